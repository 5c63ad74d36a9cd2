"""Indexing: a file becomes one `document` row plus its chunks; a folder, every supported
file below it.

Re-indexing an unchanged file (same SHA-256, and the chunks today's chunker makes of it:
known without chunking it again from the chunker fingerprint its event recorded) does
nothing; a changed file closes its old chunks and writes new ones in one transaction.
`index_directory` also drops the files gone from its folder (not those of a folder or
subfolder found empty, unless forced), and writes chunks without embeddings first (full
text finds them at once) and then embeds them in batches — in this call, or in the
background when async_mode is on (memsys.services.embedding_queue).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from sqlalchemy import insert, select
from sqlalchemy.orm import Session

from memsys import background, chunking, ids, regular_files, tenancy
from memsys.config import get_settings
from memsys.db import raise_if_cancelled, session_scope, take_turns
from memsys.embeddings import get_embedder
from memsys.errors import (
    OUTSIDE_ROOTS,
    InvalidInput,
    MemsysError,
    NotFound,
    Protected,
    encodable,
    from_os_error,
)
from memsys.ids import content_hash
from memsys.models import Chunk, Document, Event
from memsys.runner import before_transaction
from memsys.schemas import (
    FailedFile,
    IndexDirectoryIn,
    IndexDirectoryOut,
    IndexFileIn,
    IndexFileOut,
)
from memsys.services import events, mentions, namespaces
from memsys.services.documents import (
    close_document,
    live_document,
    resolve_path,
    source_path,
)
from memsys.services.embedding_queue import embed_pending, within_budget
from memsys.tokens import count_tokens_batch

SKIPPED_DIRS = {"node_modules", "__pycache__", "venv", "site-packages"}
# A synchronous index_directory hands the model this many chunks per call: sentence-transformers
# sorts by length only inside one call, so bigger calls pad less (benchmarks/README.md, finding 3:
# blocks of 64 ran ~15% slower than the whole list), while the progress bar still moves.
SYNC_EMBED_BLOCK = 256
MIN_EMBED_BLOCK = 32
# index_directory writes the new chunks of the files it read in INSERTs of this many rows
# (write_chunks); what it holds meanwhile is their text, a few MB at most.
CHUNK_BLOCK = 1000

Progress = Callable[[str, int, int], None]  # (phase, done, total)
Pieces = Callable[[], list[chunking.Piece]]  # a file's pieces, made when first asked for

# A file whose name holds a byte that is not UTF-8: no path memsys can store or answer with.
NOT_UTF8_NAME = "its name is not UTF-8 text: rename the file"
# What a path that is no regular file is, also when it became one after it was checked.
NOT_REGULAR = "(a directory, pipe, socket or device: only regular files are indexed)"


# Set while the CLI runs a call in its own process: the paths are its user's own, read with
# the user's own rights, and MEMSYS_INDEX_ROOTS guards only what a server reads for a caller.
_OWN_PATHS: ContextVar[bool] = ContextVar("memsys_own_paths", default=False)


@contextmanager
def callers_own_paths() -> Iterator[None]:
    """Within the block, check_root lets every path through (the CLI in process)."""
    token = _OWN_PATHS.set(True)
    try:
        yield
    finally:
        _OWN_PATHS.reset(token)


def check_root(path: Path, display: str) -> None:
    """Only files under the configured roots; said before looking, so that the answer does
    not tell whether a path outside them exists."""
    if _OWN_PATHS.get():
        return
    admin = tenancy.current().admin
    roots = get_settings().allowed_roots() if admin else get_settings().token_roots()
    if not admin and not roots:
        raise Protected(
            "Not allowed: reading files on the memsys host needs the admin token, unless the "
            "server's operator opens folders to every token (MEMSYS_TOKEN_INDEX_ROOTS)"
        )
    if not any(path == root or path.is_relative_to(root) for root in roots):
        where = ", ".join(str(r) for r in roots) or "none: indexing is off"
        setting = "MEMSYS_INDEX_ROOTS"
        if not admin:  # the host's folders are the operator's to tell
            where, setting = "the server's operator knows them", "MEMSYS_TOKEN_INDEX_ROOTS"
        raise InvalidInput(f"{display} {OUTSIDE_ROOTS} ({where}; {setting})")


def _read(path: Path, display: str, suffix: str) -> tuple[bytes, str]:
    """The bytes of the file at path (a link's target) and its kind, by the suffix of the
    name it is indexed under."""
    check_root(path, display)
    if not path.exists():
        raise NotFound(f"File not found: {display}")
    if path.is_dir():
        raise InvalidInput(f"Not a file: {display} (use index_directory for folders)")
    if not path.is_file():  # a FIFO would block the read forever; a device never ends
        raise InvalidInput(f"Not a regular file: {display} {NOT_REGULAR}")
    kind = chunking.file_type(suffix)
    limit = get_settings().max_file_bytes
    try:
        size = path.stat().st_size
        if size > limit:
            raise _too_large(f"{size} bytes", limit)
        # Never more than the limit allows, and one byte to tell: a file still being written
        # may have grown past it since it was measured.
        data = regular_files.read_bytes(path, display, limit + 1, NOT_REGULAR)
    except OSError as exc:
        raise InvalidInput(f"Failed to read file {display}: {exc.strerror or exc}") from None
    if len(data) > limit:
        raise _too_large(f"more than {limit} bytes", limit)
    return data, kind


def _too_large(size: str, limit: int) -> InvalidInput:
    return InvalidInput(
        f"Failed to read file: {size} is over the {limit}-byte limit (MEMSYS_MAX_FILE_BYTES)"
    )


@dataclass(frozen=True)
class ReadFile:
    """A file read, hashed and chunked, and (when asked) embedded: all before any transaction."""

    source: str
    kind: str
    data: bytes
    digest: str
    pieces: list[chunking.Piece] | None  # None: not chunked yet
    vectors: np.ndarray | None


def read_file(params: IndexFileIn, embed: bool) -> ReadFile:
    source = str(source_path(params.file_path))  # a link: its own path, its target read
    data, kind = _read(resolve_path(params.file_path), params.file_path, Path(source).suffix)
    digest = hashlib.sha256(data).hexdigest()
    if not embed:
        return ReadFile(source, kind, data, digest, None, None)
    lazy = LazyPieces(data, kind)
    if _unchanged(params.namespace, source, digest, lazy):  # chunked only if compared
        return ReadFile(source, kind, data, digest, lazy.made, None)
    pieces = lazy()
    return ReadFile(source, kind, data, digest, pieces, _embed_now([p.content for p in pieces]))


def _embed_now(texts: list[str]) -> np.ndarray | None:
    """The vectors of the chunks a call embeds itself: all of them, unless this process has a
    worker draining the embedding queue (`memsys serve`, `memsys mcp`). There a call embeds
    the opening chunks that fit one of the worker's batches (EMBED_TOKENS, about a second of
    model time) and leaves the rest to it, queued: a file at the 20 MiB limit kept one call
    busy for half an hour."""
    count = len(texts)
    if background.running():
        count = within_budget(count_tokens_batch(texts))
    return get_embedder().embed(texts[:count]) if count else None


def _chunk(data: bytes, kind: str) -> list[chunking.Piece]:
    return chunking.pieces_from_bytes(data, kind, get_settings().chunk_max_tokens)


@dataclass
class LazyPieces:
    """A file's pieces, made when first asked for: an unchanged file may never need them."""

    data: bytes
    kind: str
    made: list[chunking.Piece] | None = None

    def __call__(self) -> list[chunking.Piece]:
        if self.made is None:
            self.made = _chunk(self.data, self.kind)
        return self.made


def _unchanged(namespace: str, source: str, digest: str, made: Pieces) -> bool:
    """A short read of its own: is this exact file already indexed? (No embedding then.)"""
    with session_scope() as session:
        doc = live_document(session, namespace, source)
        return doc is not None and _current(session, doc, digest, made)[0] is not None


def _current(
    session: Session, doc: Document, digest: str, made: Pieces
) -> tuple[list[str] | None, bool]:
    """The live chunk ids of an indexed file, in order, when they hold what today's chunker
    makes of the same bytes; None when the file changed, when delete_chunks closed some of
    its chunks (indexing the unchanged file again then restores them, not skips it) or when
    an older memsys chunked it otherwise (a Windows file's \\r kept, a heading not read as one:
    the file's bytes alone would keep those chunks until the file was edited).

    A document whose chunks today's chunker made (its fingerprint, stored with it) is not
    chunked again to tell: that cost as much as indexing it. The flag says whether the
    fingerprint told; when it did not, `made` was called and the chunks compared."""
    if doc.sha256 != digest:
        return None, False
    live = (Chunk.namespace == doc.namespace, Chunk.document_id == doc.id, Chunk.valid_to.is_(None))
    fingerprint = _fingerprint()
    if fingerprint is not None and _chunked_by(session, doc) == fingerprint:
        ids = session.scalars(select(Chunk.id).where(*live).order_by(Chunk.chunk_index)).all()
        if len(ids) == doc.chunk_count:  # none closed by delete_chunks
            return list(ids), True
    chunks = session.execute(
        select(Chunk.id, Chunk.content, Chunk.header_path, Chunk.meta)
        .where(*live)
        .order_by(Chunk.chunk_index)
    ).all()
    stored = [(c.content, c.header_path, c.meta or {}) for c in chunks]
    made_now = [(p.content, p.header_path, p.metadata) for p in made()]
    return ([c.id for c in chunks] if stored == made_now else None), False


def _fingerprint() -> str | None:
    return chunking.fingerprint(get_settings().chunk_max_tokens)


def _chunked_by(session: Session, doc: Document) -> str | None:
    """The fingerprint of the chunker that made a document's chunks, as its last index_file
    event recorded it; None when none did (an older memsys)."""
    return session.scalar(
        select(Event.payload["chunker"].astext)
        .where(
            Event.namespace == doc.namespace,
            Event.subject_id == doc.id,
            Event.operation == "index_file",
        )
        .order_by(Event.id.desc())
        .limit(1)
    )


@before_transaction(lambda params: read_file(params, embed=True))
def index_file(
    session: Session,
    params: IndexFileIn,
    *,
    embed_now: bool = True,
    prepared: ReadFile | None = None,
    chunk_rows: list[dict[str, Any]] | None = None,
) -> IndexFileOut:
    """Index one file; unchanged files are skipped, changed ones replace their chunks.

    Through the runner the file is read and embedded before the transaction opens
    (`prepared`); index_directory reads each file here and leaves embedding to the queue,
    and writes the new chunks of many files at once (`chunk_rows`: write_chunks).
    """
    read = prepared or read_file(params, embed=False)
    source, digest = read.source, read.digest
    namespaces.ensure(session, params.namespace)
    # Writers of one file take turns: the second sees the first's document and replaces it
    # (or skips it when unchanged) instead of failing on the live-document unique index.
    take_turns(session, params.namespace, source)
    existing = live_document(session, params.namespace, source)
    made = LazyPieces(read.data, read.kind, read.pieces)
    kept, told = (None, False) if existing is None else _current(session, existing, digest, made)
    if existing is not None and kept is not None:
        if not told and (fingerprint := _fingerprint()) is not None:
            # Compared and found current: noted, so the next index need not chunk it again.
            events.record(
                session,
                namespace=params.namespace,
                event_type="maintenance",
                operation="index_file",
                subject_kind="document",
                subject_id=existing.id,
                payload={"source_file": source, "chunker": fingerprint, "reason": "chunks current"},
            )
        return IndexFileOut(
            chunks_created=0,
            source_file=source,
            namespace=params.namespace,
            chunk_ids=kept,
            skipped_unchanged=True,
            replaced_chunks=0,
            document_id=existing.id,
        )

    replaced = (close_document(session, existing) or 0) if existing is not None else 0
    pieces = made()
    texts = [p.content for p in pieces]
    vectors = read.vectors
    if vectors is None and embed_now and texts:  # changed since it was read, or called directly
        vectors = _embed_now(texts)
    embedded = 0 if vectors is None else len(vectors)
    doc_id = ids.new_id(ids.DOCUMENT)
    session.execute(
        insert(Document).values(
            namespace=params.namespace,
            id=doc_id,
            source_file=source,
            file_type=read.kind,
            sha256=digest,
            size_bytes=len(read.data),
            chunk_count=len(pieces),
            status="ready" if embedded == len(pieces) else "pending",
        )
    )
    chunk_ids = [ids.new_id(ids.CHUNK) for _ in pieces]
    if pieces:
        tokens = count_tokens_batch(texts)
        rows = [
            {
                "namespace": params.namespace,
                "id": chunk_ids[i],
                "doc_type": "document",
                "content": piece.content,
                "content_hash": content_hash(piece.content),
                "token_count": tokens[i],
                "embedding": None if vectors is None or i >= embedded else vectors[i],
                "meta": piece.metadata,
                "document_id": doc_id,
                "source_file": source,
                "chunk_index": i,
                "header_path": piece.header_path,
            }
            for i, piece in enumerate(pieces)
        ]
        if chunk_rows is None:
            write_chunks(session, rows)
        else:  # the caller writes them, with other files' chunks
            chunk_rows.extend(rows)
        mentions.link(session, params.namespace, list(zip(chunk_ids, texts, strict=True)))
    events.record(
        session,
        namespace=params.namespace,
        event_type="edit" if existing is not None else "create",
        operation="index_file",
        subject_kind="document",
        subject_id=doc_id,
        payload={
            "source_file": source,
            "sha256": digest,
            "chunks": len(pieces),
            "chunker": _fingerprint(),
        },
    )
    return IndexFileOut(
        chunks_created=len(pieces),
        source_file=source,
        namespace=params.namespace,
        chunk_ids=chunk_ids,
        skipped_unchanged=False,
        replaced_chunks=replaced,
        document_id=doc_id,
        pending_embeddings=len(pieces) - embedded,
    )


def write_chunks(session: Session, rows: list[dict[str, Any]]) -> None:
    """Insert chunk rows; RETURNING makes it one multi-row INSERT (up to 1,000 rows), so the
    statistics trigger runs once for them. Once per file, a folder of thousands of files
    grew slower with each: every run of the trigger updates the counts of the same common
    terms again in the one transaction, and each update walked all the row versions the
    earlier ones left (5,000 small files: 5 minutes, most of it there)."""
    if rows:
        session.execute(insert(Chunk).returning(Chunk.id), rows)


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
