"""Indexing: a file becomes one `document` row plus its chunks (a folder: services.folders).

Re-indexing an unchanged file (same SHA-256, and the chunks today's chunker makes of it:
known without chunking it again from the chunker fingerprint its event recorded) does
nothing; a changed file closes its old chunks and writes new ones in one transaction.
"""

from __future__ import annotations

import hashlib
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
from memsys.db import session_scope, take_turns
from memsys.embeddings import get_embedder
from memsys.errors import (
    OUTSIDE_ROOTS,
    InvalidInput,
    NotFound,
    Protected,
)
from memsys.ids import content_hash
from memsys.models import Chunk, Document, Event
from memsys.runner import before_transaction
from memsys.schemas import (
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
from memsys.services.embedding_queue import within_budget
from memsys.tokens import count_tokens_batch

Progress = Callable[[str, int, int], None]  # (phase, done, total)
Pieces = Callable[[], list[chunking.Piece]]  # a file's pieces, made when first asked for

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
