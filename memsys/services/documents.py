"""Documents: index files and directories, the embedding queue, deletes and stats.

A file is one `document` row plus its chunks. Re-indexing an unchanged file (same SHA-256)
does nothing; a changed file closes its old chunks and writes new ones in one transaction.
`index_directory` writes chunks without embeddings first (full text finds them at once) and
then embeds them in batches — in this call, or in the background when async_mode is on.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

from sqlalchemy import CursorResult, Executable, func, insert, select, text, update
from sqlalchemy.orm import Session

from memsys import chunking, ids
from memsys.config import get_settings
from memsys.embeddings import get_embedder
from memsys.errors import InvalidInput, MemsysError, NotFound
from memsys.models import Chunk, Document
from memsys.models.log import ALL_NAMESPACES
from memsys.schemas import (
    ClearIndexIn,
    ClearIndexOut,
    DeleteChunksIn,
    DeleteChunksOut,
    DeleteFileIn,
    DeleteFileOut,
    FailedFile,
    IndexDirectoryIn,
    IndexDirectoryOut,
    IndexFileIn,
    IndexFileOut,
    IndexStatsOut,
)
from memsys.services import events, mentions, namespaces
from memsys.services.memories import GOLDEN_CONFIDENCE, content_hash, is_golden
from memsys.tokens import count_tokens_batch

SKIPPED_DIRS = {"node_modules", "__pycache__", "venv", "site-packages"}
EMBED_BATCH = 64
# A synchronous index_directory hands the model this many chunks per call: sentence-transformers
# sorts by length only inside one call, so bigger calls pad less (benchmarks/README.md, finding 3:
# blocks of 64 ran ~15% slower than the whole list), while the progress bar still moves.
SYNC_EMBED_BLOCK = 256

Progress = Callable[[str, int, int], None]  # (phase, done, total)

_PENDING_SQL = """
    SELECT namespace, id, content FROM chunk
    WHERE embedding IS NULL AND valid_to IS NULL {only}
    ORDER BY created_at, id
    LIMIT :limit
    FOR UPDATE SKIP LOCKED
"""
_READY = text(
    """
    UPDATE document d SET status = 'ready'
    WHERE d.status = 'pending' AND d.valid_to IS NULL AND NOT EXISTS (
        SELECT 1 FROM chunk c
        WHERE c.namespace = d.namespace AND c.document_id = d.id
          AND c.embedding IS NULL AND c.valid_to IS NULL)
    """
)
_PENDING_COUNT = text("SELECT count(*) FROM chunk WHERE embedding IS NULL AND valid_to IS NULL")


def _rowcount(session: Session, statement: Executable) -> int:
    """Rows an UPDATE touched."""
    result = session.execute(statement)
    return int(cast(CursorResult[Any], result).rowcount or 0)


def resolve(path: str) -> Path:
    return Path(os.path.expanduser(path)).resolve()


def _live_document(session: Session, namespace: str, source: str) -> Document | None:
    return session.scalars(
        select(Document).where(
            Document.namespace == namespace,
            Document.source_file == source,
            Document.valid_to.is_(None),
        )
    ).first()


def _close_document(session: Session, doc: Document) -> int:
    """Close a document and its live chunks; returns how many chunks were closed."""
    closed = _rowcount(
        session,
        update(Chunk)
        .where(
            Chunk.namespace == doc.namespace,
            Chunk.document_id == doc.id,
            Chunk.valid_to.is_(None),
        )
        .values(valid_to=func.now()),
    )
    doc.valid_to = func.now()
    session.flush()
    return closed


def _read(path: Path, display: str) -> tuple[bytes, str]:
    if not path.exists():
        raise NotFound(f"File not found: {display}")
    if path.is_dir():
        raise InvalidInput(f"Not a file: {display} (use index_directory for folders)")
    kind = chunking.file_type(path.suffix)
    limit = get_settings().max_file_bytes
    try:
        size = path.stat().st_size
        if size > limit:
            raise InvalidInput(
                f"Failed to read file: {size} bytes is over the {limit}-byte limit "
                "(MEMSYS_MAX_FILE_BYTES)"
            )
        return path.read_bytes(), kind
    except OSError as exc:
        raise InvalidInput(f"Failed to read file: {exc.strerror or exc}") from None


def index_file(session: Session, params: IndexFileIn, *, embed_now: bool = True) -> IndexFileOut:
    """Index one file; unchanged files are skipped, changed ones replace their chunks."""
    path = resolve(params.file_path)
    data, kind = _read(path, params.file_path)
    digest = hashlib.sha256(data).hexdigest()
    source = str(path)
    namespaces.ensure(session, params.namespace)
    existing = _live_document(session, params.namespace, source)
    if existing is not None and existing.sha256 == digest:
        chunk_ids = session.scalars(
            select(Chunk.id)
            .where(
                Chunk.namespace == params.namespace,
                Chunk.document_id == existing.id,
                Chunk.valid_to.is_(None),
            )
            .order_by(Chunk.chunk_index)
        ).all()
        return IndexFileOut(
            chunks_created=0,
            source_file=source,
            namespace=params.namespace,
            chunk_ids=list(chunk_ids),
            skipped_unchanged=True,
            replaced_chunks=0,
            document_id=existing.id,
        )

    pieces = chunking.pieces_from_bytes(data, kind, get_settings().chunk_max_tokens)
    replaced = _close_document(session, existing) if existing is not None else 0
    texts = [p.content for p in pieces]
    vectors = get_embedder().embed(texts) if embed_now and texts else None
    doc_id = ids.new_id(ids.DOCUMENT)
    session.execute(
        insert(Document).values(
            namespace=params.namespace,
            id=doc_id,
            source_file=source,
            file_type=kind,
            sha256=digest,
            size_bytes=len(data),
            chunk_count=len(pieces),
            status="ready" if vectors is not None or not pieces else "pending",
        )
    )
    chunk_ids = [ids.new_id(ids.CHUNK) for _ in pieces]
    if pieces:
        tokens = count_tokens_batch(texts)
        session.execute(
            insert(Chunk),
            [
                {
                    "namespace": params.namespace,
                    "id": chunk_ids[i],
                    "doc_type": "document",
                    "content": piece.content,
                    "content_hash": content_hash(piece.content),
                    "token_count": tokens[i],
                    "embedding": None if vectors is None else vectors[i],
                    "meta": piece.metadata,
                    "document_id": doc_id,
                    "source_file": source,
                    "chunk_index": i,
                    "header_path": piece.header_path,
                }
                for i, piece in enumerate(pieces)
            ],
        )
        mentions.link(session, params.namespace, list(zip(chunk_ids, texts, strict=True)))
    events.record(
        session,
        namespace=params.namespace,
        event_type="edit" if existing is not None else "create",
        operation="index_file",
        subject_kind="document",
        subject_id=doc_id,
        payload={"source_file": source, "sha256": digest, "chunks": len(pieces)},
    )
    return IndexFileOut(
        chunks_created=len(pieces),
        source_file=source,
        namespace=params.namespace,
        chunk_ids=chunk_ids,
        skipped_unchanged=False,
        replaced_chunks=replaced,
        document_id=doc_id,
    )


def discover(root: Path, recursive: bool) -> list[Path]:
    """Supported files under root, sorted; hidden and dependency folders are skipped."""
    found: list[Path] = []
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d not in SKIPPED_DIRS)
        if not recursive:
            dirs[:] = []
        for name in sorted(files):
            if not name.startswith(".") and Path(name).suffix.lower() in chunking.FILE_TYPES:
                found.append(Path(folder) / name)
    return found


def index_directory(
    session: Session, params: IndexDirectoryIn, progress: Progress | None = None
) -> IndexDirectoryOut:
    """Index every supported file below a folder, continuing past files that fail."""
    root = resolve(params.dir_path)
    if not root.exists():
        raise NotFound(f"Directory not found: {params.dir_path}")
    if not root.is_dir():
        raise InvalidInput(f"Not a directory: {params.dir_path} (use index_file for one file)")
    files = discover(root, params.recursive)
    namespaces.ensure(session, params.namespace)
    indexed = skipped = chunks = 0
    failed: list[FailedFile] = []
    new_chunk_ids: list[str] = []
    for n, path in enumerate(files, start=1):
        try:
            with session.begin_nested():  # one bad file rolls back only itself
                result = index_file(
                    session,
                    IndexFileIn(file_path=str(path), namespace=params.namespace),
                    embed_now=False,
                )
        except MemsysError as exc:
            failed.append(FailedFile(file=str(path), error=exc.message))
        else:
            if result.skipped_unchanged:
                skipped += 1
            else:
                indexed += 1
                chunks += result.chunks_created
                new_chunk_ids.extend(result.chunk_ids)
        if progress:
            progress("read", n, len(files))

    if not params.async_mode:
        done = 0
        for start in range(0, len(new_chunk_ids), SYNC_EMBED_BLOCK):
            block = new_chunk_ids[start : start + SYNC_EMBED_BLOCK]
            done += embed_pending(session, limit=len(block), only=block)
            if progress:
                progress("embed", done, len(new_chunk_ids))
    return IndexDirectoryOut(
        files_indexed=indexed,
        total_chunks=chunks,
        failed_files=failed,
        skipped_duplicates=skipped,
        pending_embeddings=0 if not params.async_mode else len(new_chunk_ids),
        namespace=params.namespace,
    )


def embed_pending(session: Session, limit: int = EMBED_BATCH, only: list[str] | None = None) -> int:
    """Embed up to `limit` queued chunks (safe to run from several processes at once)."""
    stmt = text(_PENDING_SQL.format(only="" if only is None else "AND id = ANY(:only)"))
    params: dict[str, object] = {"limit": limit}
    if only is not None:
        params["only"] = only
    rows = session.execute(stmt, params).all()
    if not rows:
        return 0
    vectors = get_embedder().embed([r.content for r in rows])
    session.execute(
        update(Chunk),
        [
            {"namespace": r.namespace, "id": r.id, "embedding": vectors[i]}
            for i, r in enumerate(rows)
        ],
    )
    session.execute(_READY)
    return len(rows)


def pending_count(session: Session) -> int:
    return int(session.scalar(_PENDING_COUNT) or 0)


def delete_chunks(session: Session, params: DeleteChunksIn) -> DeleteChunksOut:
    """Close chunks by id; golden-rule memories are protected (use memory_forget with force)."""
    rows = session.scalars(
        select(Chunk).where(Chunk.id.in_(params.ids), Chunk.valid_to.is_(None))
    ).all()
    found = {c.id: c for c in rows}
    protected = [
        c.id for c in rows if c.doc_type == "memory" and is_golden(c.memory_type, c.confidence)
    ]
    deleted = [i for i in params.ids if i in found and i not in protected]
    for chunk_id in deleted:
        chunk = found[chunk_id]
        chunk.valid_to = func.now()
        events.record(
            session,
            namespace=chunk.namespace,
            event_type="delete",
            operation="delete_chunks",
            subject_kind=chunk.doc_type,
            subject_id=chunk_id,
        )
    session.flush()
    return DeleteChunksOut(
        deleted_count=len(deleted),
        deleted_ids=deleted,
        not_found_ids=[i for i in params.ids if i not in found],
        protected_ids=protected,
    )


def delete_file(session: Session, params: DeleteFileIn) -> DeleteFileOut:
    """Close every chunk indexed from one source file."""
    namespaces.require(session, params.namespace)
    source = str(resolve(params.source_file))
    stmt = select(Document).where(
        Document.source_file.in_([source, params.source_file]), Document.valid_to.is_(None)
    )
    if params.namespace:
        stmt = stmt.where(Document.namespace == params.namespace)
    docs = session.scalars(stmt).all()
    if not docs:
        raise NotFound(f"No indexed file: {params.source_file}")
    deleted = 0
    for doc in docs:
        deleted += _close_document(session, doc)
        events.record(
            session,
            namespace=doc.namespace,
            event_type="delete",
            operation="delete_file",
            subject_kind="document",
            subject_id=doc.id,
            payload={"source_file": doc.source_file},
        )
    return DeleteFileOut(deleted_count=deleted, source_file=docs[0].source_file)


def clear_index(session: Session, params: ClearIndexIn) -> ClearIndexOut:
    """Close every indexed document (memories are kept: forget them with memory_forget)."""
    if not params.confirm:
        raise InvalidInput("Safety check: Set confirm=True to delete all documents")
    namespaces.require(session, params.namespace)
    chunk_stmt = update(Chunk).where(Chunk.doc_type == "document", Chunk.valid_to.is_(None))
    doc_stmt = update(Document).where(Document.valid_to.is_(None))
    if params.namespace:
        chunk_stmt = chunk_stmt.where(Chunk.namespace == params.namespace)
        doc_stmt = doc_stmt.where(Document.namespace == params.namespace)
    chunks = _rowcount(session, chunk_stmt.values(valid_to=func.now()))
    docs = _rowcount(session, doc_stmt.values(valid_to=func.now()))
    events.record(
        session,
        namespace=params.namespace or ALL_NAMESPACES,
        event_type="delete",
        operation="clear_index",
        payload={"chunks": chunks, "documents": docs},
    )
    return ClearIndexOut(deleted_count=chunks, documents_deleted=docs)


def stats(session: Session) -> IndexStatsOut:
    live = Chunk.valid_to.is_(None)
    total = session.scalar(select(func.count()).where(Chunk.doc_type == "document", live))
    sources = session.scalars(
        select(Document.source_file).where(Document.valid_to.is_(None)).distinct()
    ).all()
    memories = session.scalar(select(func.count()).where(Chunk.doc_type == "memory", live))
    golden = session.scalar(
        select(func.count()).where(
            Chunk.doc_type == "memory",
            live,
            (Chunk.memory_type == "golden_rule") | (Chunk.confidence >= GOLDEN_CONFIDENCE),
        )
    )
    return IndexStatsOut(
        total_documents=int(total or 0),
        unique_sources=len(sources),
        source_files=sorted(sources),
        namespaces=namespaces.names(session),
        memory_count=int(memories or 0),
        golden_rule_count=int(golden or 0),
        pending_embeddings=pending_count(session),
    )
