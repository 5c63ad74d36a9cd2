"""Documents and chunks. A chunk is every searchable unit: a stored memory or a document piece.

History: rows are closed (`valid_to`), not deleted, so "as of T" reads work; only a purge
removes them. Each live memory's content hash is unique within its namespace.
"""

from datetime import datetime
from typing import Any

from pgvector.sqlalchemy import Vector
from sqlalchemy import (
    ARRAY,
    BigInteger,
    Boolean,
    CheckConstraint,
    ColumnElement,
    Computed,
    Float,
    ForeignKey,
    ForeignKeyConstraint,
    Index,
    Integer,
    String,
    Text,
    or_,
    text,
)
from sqlalchemy.dialects.postgresql import JSONB, TSVECTOR
from sqlalchemy.ext.hybrid import hybrid_property
from sqlalchemy.orm import Mapped, mapped_column

from memsys.models.base import LIFECYCLES, Base, in_list, timestamp_column
from memsys.vocabulary import DOC_TYPES, GOLDEN_CONFIDENCE, GOLDEN_RULE, MEMORY_TYPES, is_golden

DIMENSIONS = 384  # all-MiniLM-L6-v2; the embedders check their output against it
STAGES = ("active", "demoted", "archived", "rehydratable")
AGED = STAGES[2:]  # a row of these holds a summary or a key; its history holds the text
DOCUMENT_STATUSES = ("pending", "ready")


class Document(Base):
    """One indexed source file; its SHA-256 lets a re-index skip unchanged files."""

    __tablename__ = "document"
    __table_args__ = (
        CheckConstraint(in_list("status", DOCUMENT_STATUSES), name="status"),
        Index(
            "uq_document_live_source",
            "namespace",
            "source_file",
            unique=True,
            postgresql_where=text("valid_to IS NULL"),
        ),
        Index("ix_document_source_file", "source_file"),
    )

    namespace: Mapped[str] = mapped_column(
        String(128), ForeignKey("namespace.name"), primary_key=True
    )
    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    source_file: Mapped[str] = mapped_column(Text)
    file_type: Mapped[str] = mapped_column(String(16))
    sha256: Mapped[str] = mapped_column(String(64))
    size_bytes: Mapped[int] = mapped_column(BigInteger)
    chunk_count: Mapped[int] = mapped_column(Integer)
    status: Mapped[str] = mapped_column(String(16), server_default="ready")
    created_at: Mapped[datetime] = timestamp_column()
    valid_from: Mapped[datetime] = timestamp_column()
    valid_to: Mapped[datetime | None] = timestamp_column(nullable=True)


class Chunk(Base):
    __tablename__ = "chunk"
    __table_args__ = (
        CheckConstraint(in_list("doc_type", DOC_TYPES), name="doc_type"),
        CheckConstraint(
            f"memory_type IS NULL OR {in_list('memory_type', MEMORY_TYPES)}", name="memory_type"
        ),
        CheckConstraint(
            "(doc_type = 'memory') = (memory_type IS NOT NULL)", name="memory_has_type"
        ),
        CheckConstraint(
            "(doc_type = 'document') = (document_id IS NOT NULL)", name="document_has_source"
        ),
        CheckConstraint("importance >= 0 AND importance <= 1", name="importance_range"),
        CheckConstraint("confidence >= 0 AND confidence <= 1", name="confidence_range"),
        CheckConstraint(in_list("lifecycle", LIFECYCLES), name="lifecycle"),
        CheckConstraint(in_list("stage", STAGES), name="stage"),
        ForeignKeyConstraint(
            ["namespace", "document_id"],
            ["document.namespace", "document.id"],
            ondelete="CASCADE",
        ),
        Index(
            "ix_chunk_embedding_hnsw",
            "embedding",
            postgresql_using="hnsw",
            postgresql_with={"m": 16, "ef_construction": 64},
            postgresql_ops={"embedding": "vector_cosine_ops"},
        ),
        Index("ix_chunk_tsv", "tsv", postgresql_using="gin"),
        Index(
            "uq_chunk_live_memory_hash",
            "namespace",
            "content_hash",
            unique=True,
            postgresql_where=text("doc_type = 'memory' AND valid_to IS NULL"),
        ),
        Index("ix_chunk_id", "id"),
        # Write order, ties broken by id: the neighbourhood channel walks it (LIMIT width).
        Index("ix_chunk_write_order", "namespace", "doc_type", "created_at", "id"),
        Index("ix_chunk_namespace_document_id", "namespace", "document_id"),
        # The temporal channel's range filter: when a memory happened (retrieval/temporal.py).
        Index(
            "ix_chunk_namespace_happened", "namespace", text("coalesce(occurred_at, created_at)")
        ),
        Index(
            "ix_chunk_pending_embedding",
            "created_at",
            postgresql_where=text("embedding IS NULL AND valid_to IS NULL"),
        ),
        # Maintenance writes scores, stages and folded access counts; free room on each page
        # lets those updates stay HOT instead of adding entries to every index.
        {"postgresql_with": {"fillfactor": 90}},
    )

    namespace: Mapped[str] = mapped_column(
        String(128), ForeignKey("namespace.name"), primary_key=True
    )
    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    doc_type: Mapped[str] = mapped_column(String(16))
    content: Mapped[str] = mapped_column(Text)
    content_hash: Mapped[str] = mapped_column(String(64))
    token_count: Mapped[int] = mapped_column(Integer)
    # NULL while the embedding is queued (index_directory async_mode); full text works at once.
    embedding: Mapped[Any] = mapped_column(Vector(DIMENSIONS), nullable=True)
    # The English tsvector plus the parts of paths, hosts and other joined identifiers
    # (migration f3a8d5c2e917); BM25's statistics are kept from it by triggers.
    tsv: Mapped[Any] = mapped_column(TSVECTOR, Computed("memsys_tsv(content)", persisted=True))
    # Tokens in that tsvector (BM25's document length); a generated column may not read
    # another one, hence the tsvector computed again inside the expression.
    doc_len: Mapped[int] = mapped_column(
        Integer,
        Computed("memsys_tsv_length(to_tsvector('english'::regconfig, content))", persisted=True),
    )

    # Memories
    memory_type: Mapped[str | None] = mapped_column(String(32), nullable=True)
    importance: Mapped[float] = mapped_column(Float, server_default="0.5")
    confidence: Mapped[float] = mapped_column(Float, server_default="0.3")
    tags: Mapped[list[str]] = mapped_column(ARRAY(Text), server_default="{}")
    meta: Mapped[dict[str, Any]] = mapped_column("metadata", JSONB, server_default="{}")
    lifecycle: Mapped[str] = mapped_column(String(16), server_default="project")
    stage: Mapped[str] = mapped_column(String(16), server_default="active")
    pinned: Mapped[bool] = mapped_column(Boolean, server_default="false")
    access_count: Mapped[int] = mapped_column(Integer, server_default="0")
    last_accessed_at: Mapped[datetime | None] = timestamp_column(nullable=True)
    # Lifecycle (memsys.services.lifecycle): S003's decay score as of the last maintenance,
    # when the stage last changed, and whether a rekindled memory came back as its summary.
    decay_score: Mapped[float | None] = mapped_column(Float, nullable=True)
    stage_changed_at: Mapped[datetime | None] = timestamp_column(nullable=True)
    lossy: Mapped[bool] = mapped_column(Boolean, server_default="false")

    # Document chunks
    document_id: Mapped[str | None] = mapped_column(String(40), nullable=True)
    source_file: Mapped[str | None] = mapped_column(Text, nullable=True)
    chunk_index: Mapped[int | None] = mapped_column(Integer, nullable=True)
    header_path: Mapped[str | None] = mapped_column(Text, nullable=True)

    created_at: Mapped[datetime] = timestamp_column()
    # When the remembered thing happened (memory_store's reference_time); NULL: when written.
    occurred_at: Mapped[datetime | None] = timestamp_column(nullable=True)
    updated_at: Mapped[datetime] = timestamp_column(on_update=True)
    valid_from: Mapped[datetime] = timestamp_column()
    valid_to: Mapped[datetime | None] = timestamp_column(nullable=True)

    @hybrid_property
    def golden(self) -> bool:
        """The golden-rule rule (memsys.vocabulary.is_golden), in Python and in SQL."""
        return is_golden(self.memory_type, self.confidence)

    @golden.inplace.expression
    @classmethod
    def _golden_sql(cls) -> ColumnElement[bool]:
        return or_(cls.memory_type == GOLDEN_RULE, cls.confidence >= GOLDEN_CONFIDENCE)
