"""Index statistics (get_index_stats): chunks, sources, namespaces, memories, the queue."""

from __future__ import annotations

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from memsys.models import Chunk, Document
from memsys.schemas import IndexStatsOut
from memsys.services import namespaces
from memsys.services.embedding_queue import pending_count


def stats(session: Session) -> IndexStatsOut:
    live = Chunk.valid_to.is_(None)
    total = session.scalar(select(func.count()).where(Chunk.doc_type == "document", live))
    # A file whose chunks delete_chunks closed, every one, keeps its document but is no
    # longer indexed: nothing of it is found. An empty file, indexed with no chunks, is.
    has_chunks = (
        select(Chunk.id)
        .where(
            Chunk.namespace == Document.namespace,
            Chunk.document_id == Document.id,
            live,
        )
        .exists()
    )
    sources = session.scalars(
        select(Document.source_file)
        .where(Document.valid_to.is_(None), has_chunks | (Document.chunk_count == 0))
        .distinct()
    ).all()
    memories = session.scalar(select(func.count()).where(Chunk.doc_type == "memory", live))
    golden = session.scalar(
        select(func.count()).where(
            Chunk.doc_type == "memory",
            live,
            Chunk.golden,
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
