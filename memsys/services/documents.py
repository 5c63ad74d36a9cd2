"""Documents: delete chunks by id, delete a file's chunks, clear the index.

Deletes close rows (`valid_to`) rather than erase them, so "as of" reads still see them.
Indexing lives in memsys.services.indexing, the embedding queue in embedding_queue.
"""

from __future__ import annotations

import os
from pathlib import Path

from sqlalchemy import func, select, update
from sqlalchemy.orm import Session

from memsys.db import rowcount, take_turns_all
from memsys.errors import SET_CONFIRM, InvalidInput, NotFound, shortened
from memsys.models import Chunk, Document
from memsys.models.log import ALL_NAMESPACES
from memsys.schemas import (
    ClearIndexIn,
    ClearIndexOut,
    DeleteChunksIn,
    DeleteChunksOut,
    DeleteFileIn,
    DeleteFileOut,
)
from memsys.services import events, namespaces


def resolve_path(path: str) -> Path:
    """A user's path (~ expanded) as the absolute path documents are stored under."""
    try:
        return Path(os.path.expanduser(path)).resolve()
    except (RuntimeError, OSError) as exc:  # a symlink loop, a name too long
        raise InvalidInput(
            f"Cannot resolve path {shortened(path)}: {shortened(str(exc))}"
        ) from None


def source_path(path: str) -> Path:
    """The path a file's document is stored under: its folder resolved as resolve_path
    resolves it, its own name kept. A symlinked file is known by the path the folder holds,
    the one its user sees, indexes, deletes and filters by; its target was stored, so that
    a re-index or delete by the link's path found nothing, and deleting the link left its
    chunks in the index. (What is read, and held to the allowed roots, is the target.)"""
    given = Path(os.path.expanduser(path))
    if given.name in ("", ".", ".."):  # no name of its own: the path resolved
        return resolve_path(path)
    return resolve_path(str(given.parent)) / given.name


def live_document(session: Session, namespace: str, source: str) -> Document | None:
    return session.scalars(
        select(Document).where(
            Document.namespace == namespace,
            Document.source_file == source,
            Document.valid_to.is_(None),
        )
    ).first()


def close_document(session: Session, doc: Document) -> int | None:
    """Close a live document and its live chunks; returns how many chunks were closed, None
    when another writer closed the document first (nothing is closed again)."""
    if not rowcount(
        session,
        update(Document)
        .where(
            Document.namespace == doc.namespace,
            Document.id == doc.id,
            Document.valid_to.is_(None),
        )
        .values(valid_to=func.now()),
    ):
        return None
    return rowcount(
        session,
        update(Chunk)
        .where(
            Chunk.namespace == doc.namespace,
            Chunk.document_id == doc.id,
            Chunk.valid_to.is_(None),
        )
        .values(valid_to=func.now()),
    )


def delete_chunks(session: Session, params: DeleteChunksIn) -> DeleteChunksOut:
    """Close chunks by id; golden-rule memories are protected (use memory_forget with force)."""
    rows = session.scalars(
        select(Chunk).where(Chunk.id.in_(params.ids), Chunk.valid_to.is_(None))
    ).all()
    found = {c.id: c for c in rows}
    namespaces.share(session, sorted({c.namespace for c in rows}))  # after any import
    protected = [c.id for c in rows if c.doc_type == "memory" and c.golden]
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
    source = str(source_path(params.source_file))
    stmt = select(Document).where(
        Document.source_file.in_([source, params.source_file]), Document.valid_to.is_(None)
    )
    if params.namespace:
        stmt = stmt.where(Document.namespace == params.namespace)
    docs = session.scalars(stmt).all()
    if not docs:
        raise NotFound(f"No indexed file: {params.source_file}")
    held = sorted({d.namespace for d in docs})
    namespaces.share(session, held)  # after any import or folder's indexing
    # After any index_file of the file (writers of one file take turns), and read again: a
    # writer waited for may have replaced the document read above with a new one (a folder's
    # indexing of a changed file), which closing the old one left live.
    take_turns_all(session, sorted({(d.namespace, d.source_file) for d in docs}))
    docs = session.scalars(stmt.where(Document.namespace.in_(held))).all()
    if not docs:
        raise NotFound(f"No indexed file: {params.source_file}")
    deleted = 0
    for doc in docs:
        closed = close_document(session, doc)
        if closed is None:  # a concurrent delete closed it first
            continue
        deleted += closed
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
        raise InvalidInput(f"Safety check: {SET_CONFIRM} to delete all documents")
    namespaces.require(session, params.namespace)
    namespaces.share_scope(session, params.namespace)  # after any import
    chunk_stmt = update(Chunk).where(Chunk.doc_type == "document", Chunk.valid_to.is_(None))
    doc_stmt = update(Document).where(Document.valid_to.is_(None))
    if params.namespace:
        chunk_stmt = chunk_stmt.where(Chunk.namespace == params.namespace)
        doc_stmt = doc_stmt.where(Document.namespace == params.namespace)
    chunks = rowcount(session, chunk_stmt.values(valid_to=func.now()))
    docs = rowcount(session, doc_stmt.values(valid_to=func.now()))
    events.record(
        session,
        namespace=params.namespace or ALL_NAMESPACES,
        event_type="delete",
        operation="clear_index",
        payload={"chunks": chunks, "documents": docs},
    )
    return ClearIndexOut(deleted_count=chunks, documents_deleted=docs)
