"""A folder indexed: every supported file below it (indexing.index_file each), and the
files indexed from it before that are gone from it now dropped — but not those of a folder
or subfolder found empty (a disk not mounted), unless forced. Chunks are written without
embeddings first (full text finds them at once) and then embedded in batches: in this call,
or in the background when async_mode is on (memsys.services.embedding_queue).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from memsys import chunking
from memsys.db import raise_if_cancelled, take_turns
from memsys.errors import InvalidInput, MemsysError, NotFound, encodable, from_os_error
from memsys.models import Document
from memsys.schemas import FailedFile, IndexDirectoryIn, IndexDirectoryOut, IndexFileIn
from memsys.services import events, namespaces
from memsys.services.documents import close_document, live_document, resolve_path
from memsys.services.embedding_queue import embed_pending
from memsys.services.indexing import Progress, check_root, index_file, write_chunks

SKIPPED_DIRS = {"node_modules", "__pycache__", "venv", "site-packages"}
# A synchronous index_directory hands the model this many chunks per call: sentence-transformers
# sorts by length only inside one call, so bigger calls pad less (benchmarks/README.md, finding 3:
# blocks of 64 ran ~15% slower than the whole list), while the progress bar still moves.
SYNC_EMBED_BLOCK = 256
MIN_EMBED_BLOCK = 32
# index_directory writes the new chunks of the files it read in INSERTs of this many rows
# (write_chunks); what it holds meanwhile is their text, a few MB at most.
CHUNK_BLOCK = 1000
# A file whose name holds a byte that is not UTF-8: no path memsys can store or answer with.
NOT_UTF8_NAME = "its name is not UTF-8 text: rename the file"


def discover(root: Path, recursive: bool, unread: list[OSError] | None = None) -> list[Path]:
    """Supported files under root, sorted; hidden and dependency folders are skipped. The
    folders that could not be listed (no permission) are added to `unread`."""
    found: list[Path] = []
    for folder, dirs, files in os.walk(root, onerror=None if unread is None else unread.append):
        dirs[:] = sorted(d for d in dirs if _walked(d))
        if not recursive:
            dirs[:] = []
        for name in sorted(files):
            if _wanted(name):
                found.append(Path(folder) / name)
    return found


def _unlisted(exc: OSError) -> FailedFile:
    """A folder the walk could not list: a failure of its own, as its files cannot be named."""
    folder = encodable(str(exc.filename))
    return FailedFile(file=folder, error=f"{exc.strerror or exc}: the files in it were not read")


def _walked(folder: str) -> bool:
    return not folder.startswith(".") and folder not in SKIPPED_DIRS


def _wanted(name: str) -> bool:
    return not name.startswith(".") and Path(name).suffix.lower() in chunking.FILE_TYPES


def _gone(path: str) -> bool:
    """Nothing is at path any more, or a link to nothing (its target deleted: the file the
    link was indexed for is gone though the link stayed); a file that cannot be looked at
    is not gone, nor is a link loop."""
    try:
        os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        return True
    except (OSError, ValueError):
        return False
    return False


def _deleted(session: Session, params: IndexDirectoryIn, root: Path) -> list[Document]:
    """The live documents of files this run would have indexed, had they still been there:
    under root (directly, unless recursive), of a supported type, outside hidden and
    dependency folders, and gone from the disk."""
    docs = session.scalars(
        select(Document)
        .where(
            Document.namespace == params.namespace,
            Document.valid_to.is_(None),
            Document.source_file.startswith(os.path.join(root, ""), autoescape=True),
        )
        .order_by(Document.source_file)
    ).all()
    deleted: list[Document] = []
    for doc in docs:
        path = Path(doc.source_file)
        if not path.is_relative_to(root):
            continue
        *folders, name = path.relative_to(root).parts
        if (folders and not params.recursive) or not all(map(_walked, folders)):
            continue
        if _wanted(name) and _gone(doc.source_file):
            deleted.append(doc)
    return deleted


def drop_deleted(session: Session, docs: list[Document]) -> tuple[list[str], int]:
    """Close the documents of files gone from the folder (_deleted). Returns their paths and
    the chunks closed."""
    removed: list[str] = []
    closed = 0
    for doc in docs:
        take_turns(session, doc.namespace, doc.source_file)
        # Read again in its turn: a writer that had it may have closed or replaced it.
        live = live_document(session, doc.namespace, doc.source_file)
        if live is None or live.id != doc.id:
            continue
        closed += close_document(session, doc) or 0
        removed.append(doc.source_file)
        events.record(
            session,
            namespace=doc.namespace,
            event_type="delete",
            operation="index_directory",
            subject_kind="document",
            subject_id=doc.id,
            payload={"source_file": doc.source_file, "reason": "file deleted"},
        )
    return removed, closed


def _kept(deleted: list[Document], files: list[Path], root: Path) -> dict[Path, list[str]]:
    """The files gone from the disk that look unmounted rather than deleted, by the folder
    that lost them: the nearest folder on a file's path that still exists (its own, or the
    one around the gone ones) holds no file to index now. An empty folder is what a mount
    point is without its disk (the indexed folder itself, or one below it); a file whose
    folder is gone with it was deleted or renamed together with the folder."""
    held: set[Path] = set()  # the folders with a file to index below them
    for path in files:
        held.update(p for p in path.parents if p.is_relative_to(root))
    kept: dict[Path, list[str]] = {}
    for doc in deleted:
        folder = Path(doc.source_file).parent
        while folder != root and not os.path.isdir(folder):  # False, not raised, on EACCES
            folder = folder.parent
        if folder not in held:
            kept.setdefault(folder, []).append(doc.source_file)
    return kept


def _kept_warning(kept: int, folders: list[str]) -> str:
    holds = "the folder holds" if len(folders) == 1 else "these folders hold"
    return (
        f"Kept {kept} file(s) indexed from {', '.join(folders)} before: {holds} no file to "
        "index now (a disk not mounted?). If you deleted them all, index it again with "
        "force=true (memsys index-directory --force) to drop them."
    )


def index_directory(
    session: Session, params: IndexDirectoryIn, progress: Progress | None = None
) -> IndexDirectoryOut:
    """Index every supported file below a folder, continuing past files that fail; the
    files indexed from it before and deleted since are dropped (drop_deleted), but not those
    of a folder or subfolder that holds none at all now (_kept), unless params.force says so."""
    root = resolve_path(params.dir_path)
    check_root(root, params.dir_path)
    if not root.exists():
        raise NotFound(f"Directory not found: {params.dir_path}")
    if not root.is_dir():
        raise InvalidInput(f"Not a directory: {params.dir_path} (use index_file for one file)")
    unread: list[OSError] = []
    files = discover(root, params.recursive, unread)
    # One transaction for the whole folder, which names entities after writing each file's
    # chunks: it writes alone in the namespace, as an import does (namespaces.write_alone).
    namespaces.write_alone(session, [params.namespace])
    namespaces.ensure(session, params.namespace)
    indexed = skipped = chunks = 0
    failed = [_unlisted(exc) for exc in unread if not _gone(str(exc.filename))]
    new_chunk_ids: list[str] = []
    unwritten: list[dict[str, Any]] = []  # new chunks of the files read, written in blocks
    for n, path in enumerate(files, start=1):
        raise_if_cancelled()  # a cancelled call stops here, not after thousands of files
        if encodable(str(path)) != str(path):  # a byte of its name is not UTF-8
            failed.append(FailedFile(file=encodable(str(path)), error=NOT_UTF8_NAME))
            continue
        rows: list[dict[str, Any]] = []
        try:
            with session.begin_nested():  # one bad file rolls back only itself
                result = index_file(
                    session,
                    IndexFileIn(file_path=str(path), namespace=params.namespace),
                    embed_now=False,
                    chunk_rows=rows,
                )
        except (MemsysError, OSError) as exc:
            # An OSError about the path (a folder listed but not to be entered) fails the
            # file; one about the machine (a full disk, too many open files) fails the call.
            error = exc if isinstance(exc, MemsysError) else from_os_error(exc)
            if isinstance(exc, OSError) and not isinstance(error, InvalidInput):
                raise error from None
            # Deleted since it was listed (before or while it was read): no failure, a file
            # gone (drop_deleted below).
            if not _gone(str(path)):
                failed.append(FailedFile(file=str(path), error=error.message))
        else:
            if result.skipped_unchanged:
                skipped += 1
            else:
                indexed += 1
                chunks += result.chunks_created
                new_chunk_ids.extend(result.chunk_ids)
                unwritten += rows
                if len(unwritten) >= CHUNK_BLOCK:
                    write_chunks(session, unwritten)
                    unwritten = []
        if progress:
            progress("read", n, len(files))
    write_chunks(session, unwritten)
    # A folder with nothing in it looks like one whose files were all deleted: a mount point
    # whose disk is not mounted would lose its whole index. Then they are kept unless forced.
    deleted = _deleted(session, params, root)
    kept: set[str] = set()
    folders: list[str] = []
    if deleted and not params.force:
        for folder, paths in _kept(deleted, files, root).items():
            kept.update(paths)
            below = folder.relative_to(root)
            folders.append(os.path.join(params.dir_path, below) if below.parts else params.dir_path)
        deleted = [d for d in deleted if d.source_file not in kept]
    removed, removed_chunks = drop_deleted(session, deleted)

    done = 0
    if not params.async_mode:
        # About ten progress steps on a large folder, never blocks under 32 chunks.
        size = max(MIN_EMBED_BLOCK, min(SYNC_EMBED_BLOCK, len(new_chunk_ids) // 10))
        for start in range(0, len(new_chunk_ids), size):
            block = new_chunk_ids[start : start + size]
            # A call stops at the queue's token budget (EMBED_TOKENS): again for the rest.
            while embedded := embed_pending(session, limit=len(block), only=block):
                done += embedded
                if progress:
                    progress("embed", done, len(new_chunk_ids))
    return IndexDirectoryOut(
        files_indexed=indexed,
        total_chunks=chunks,
        failed_files=failed,
        skipped_duplicates=skipped,
        pending_embeddings=len(new_chunk_ids) - done,
        namespace=params.namespace,
        removed_files=removed,
        removed_chunks=removed_chunks,
        kept_files=sorted(kept),
        warning=_kept_warning(len(kept), sorted(folders)) if kept else None,
    )
