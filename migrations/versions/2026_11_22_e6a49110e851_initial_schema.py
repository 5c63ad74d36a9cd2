"""Initial schema: every table of FEATURES A1-A9 on one PostgreSQL database.

What: the pgvector extension; namespaces; documents and chunks (memories and document
pieces) with a 384-d embedding under HNSW (cosine) and a generated English tsvector under
GIN; versioned preferences; entities, versioned facts and typed edges; the append-only
event log, query traces, validation events and agent traces.
Why: one store for KV, relational, vector, graph and log. History is kept by closing rows
(valid_to) rather than deleting them, so "as of T" reads work everywhere.

Revision ID: e6a49110e851
Revises:
Create Date: 2026-11-22 07:38:58.184359+00:00
"""

from collections.abc import Sequence

import pgvector.sqlalchemy
import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "e6a49110e851"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.execute("CREATE EXTENSION IF NOT EXISTS vector")
    op.create_table(
        "agent_trace",
        sa.Column("namespace", sa.String(length=128), nullable=False),
        sa.Column("id", sa.String(length=40), nullable=False),
        sa.Column("session_id", sa.String(length=128), nullable=True),
        sa.Column("agent", sa.String(length=128), nullable=True),
        sa.Column("commit_sha", sa.String(length=64), nullable=True),
        sa.Column("file_path", sa.Text(), nullable=True),
        sa.Column("line_start", sa.Integer(), nullable=True),
        sa.Column("line_end", sa.Integer(), nullable=True),
        sa.Column("summary", sa.Text(), nullable=True),
        sa.Column(
            "payload", postgresql.JSONB(astext_type=sa.Text()), server_default="{}", nullable=False
        ),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.PrimaryKeyConstraint("namespace", "id", name=op.f("pk_agent_trace")),
    )
    op.create_index("ix_agent_trace_commit_sha", "agent_trace", ["commit_sha"], unique=False)
    op.create_index("ix_agent_trace_created_at", "agent_trace", ["created_at"], unique=False)
    op.create_index("ix_agent_trace_file_path", "agent_trace", ["file_path"], unique=False)
    op.create_index("ix_agent_trace_session_id", "agent_trace", ["session_id"], unique=False)
    op.create_table(
        "event",
        sa.Column("namespace", sa.String(length=128), nullable=False),
        sa.Column("id", sa.BigInteger(), sa.Identity(always=False), nullable=False),
        sa.Column(
            "occurred_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.Column("event_type", sa.String(length=32), nullable=False),
        sa.Column("operation", sa.String(length=64), nullable=False),
        sa.Column("subject_kind", sa.String(length=32), nullable=True),
        sa.Column("subject_id", sa.String(length=64), nullable=True),
        sa.Column("session_id", sa.String(length=128), nullable=True),
        sa.Column("user_id", sa.String(length=128), nullable=True),
        sa.Column(
            "payload", postgresql.JSONB(astext_type=sa.Text()), server_default="{}", nullable=False
        ),
        sa.PrimaryKeyConstraint("namespace", "id", name=op.f("pk_event")),
    )
    op.create_index(
        "ix_event_event_type_occurred_at", "event", ["event_type", "occurred_at"], unique=False
    )
    op.create_index(
        "ix_event_namespace_occurred_at", "event", ["namespace", "occurred_at"], unique=False
    )
    op.create_index("ix_event_occurred_at", "event", ["occurred_at"], unique=False)
    op.create_index("ix_event_session_id", "event", ["session_id"], unique=False)
    op.create_index("ix_event_subject_id", "event", ["subject_id"], unique=False)
    op.create_table(
        "namespace",
        sa.Column("name", sa.String(length=128), nullable=False),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.PrimaryKeyConstraint("name", name=op.f("pk_namespace")),
    )
    op.create_table(
        "query_trace",
        sa.Column("namespace", sa.String(length=128), nullable=False),
        sa.Column("id", sa.String(length=40), nullable=False),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.Column("operation", sa.String(length=64), nullable=False),
        sa.Column("query", sa.Text(), nullable=False),
        sa.Column(
            "user_context",
            postgresql.JSONB(astext_type=sa.Text()),
            server_default="{}",
            nullable=False,
        ),
        sa.Column(
            "filters", postgresql.JSONB(astext_type=sa.Text()), server_default="{}", nullable=False
        ),
        sa.Column("mode_detected", sa.String(length=32), nullable=True),
        sa.Column("mode_confidence", sa.Float(), nullable=True),
        sa.Column(
            "stores_queried",
            postgresql.JSONB(astext_type=sa.Text()),
            server_default="[]",
            nullable=False,
        ),
        sa.Column("routing_logic", sa.Text(), nullable=True),
        sa.Column(
            "candidates",
            postgresql.JSONB(astext_type=sa.Text()),
            server_default="[]",
            nullable=False,
        ),
        sa.Column(
            "retrieved",
            postgresql.JSONB(astext_type=sa.Text()),
            server_default="[]",
            nullable=False,
        ),
        sa.Column(
            "timings", postgresql.JSONB(astext_type=sa.Text()), server_default="{}", nullable=False
        ),
        sa.Column("verification", postgresql.JSONB(astext_type=sa.Text()), nullable=True),
        sa.Column("output", postgresql.JSONB(astext_type=sa.Text()), nullable=True),
        sa.Column("total_latency_ms", sa.Float(), server_default="0", nullable=False),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("error_type", sa.String(length=32), nullable=True),
        sa.Column("event_id", sa.BigInteger(), nullable=True),
        sa.CheckConstraint(
            "error_type IS NULL OR error_type IN ('context_bug', 'model_bug', 'system_error')",
            name=op.f("ck_query_trace_err"),
        ),
        sa.PrimaryKeyConstraint("namespace", "id", name=op.f("pk_query_trace")),
    )
    op.create_index("ix_query_trace_created_at", "query_trace", ["created_at"], unique=False)
    op.create_index("ix_query_trace_error_type", "query_trace", ["error_type"], unique=False)
    op.create_table(
        "validation_event",
        sa.Column("namespace", sa.String(length=128), nullable=False),
        sa.Column("id", sa.BigInteger(), sa.Identity(always=False), nullable=False),
        sa.Column("memory_id", sa.String(length=40), nullable=False),
        sa.Column("event_type", sa.String(length=16), nullable=False),
        sa.Column("context", sa.Text(), nullable=True),
        sa.Column("session_id", sa.String(length=128), nullable=True),
        sa.Column("error_msg", sa.Text(), nullable=True),
        sa.Column("old_confidence", sa.Float(), nullable=True),
        sa.Column("new_confidence", sa.Float(), nullable=True),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.CheckConstraint(
            "event_type IN ('applied', 'succeeded', 'failed')",
            name=op.f("ck_validation_event_event_type"),
        ),
        sa.PrimaryKeyConstraint("namespace", "id", name=op.f("pk_validation_event")),
    )
    op.create_index(
        "ix_validation_event_created_at", "validation_event", ["created_at"], unique=False
    )
    op.create_index(
        "ix_validation_event_namespace_memory_id",
        "validation_event",
        ["namespace", "memory_id"],
        unique=False,
    )
    op.create_table(
        "document",
        sa.Column("namespace", sa.String(length=128), nullable=False),
        sa.Column("id", sa.String(length=40), nullable=False),
        sa.Column("source_file", sa.Text(), nullable=False),
        sa.Column("file_type", sa.String(length=16), nullable=False),
        sa.Column("sha256", sa.String(length=64), nullable=False),
        sa.Column("size_bytes", sa.BigInteger(), nullable=False),
        sa.Column("chunk_count", sa.Integer(), nullable=False),
        sa.Column("status", sa.String(length=16), server_default="ready", nullable=False),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.Column(
            "valid_from",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.Column("valid_to", sa.DateTime(timezone=True), nullable=True),
        sa.CheckConstraint("status IN ('pending', 'ready')", name=op.f("ck_document_status")),
        sa.ForeignKeyConstraint(
            ["namespace"], ["namespace.name"], name=op.f("fk_document_namespace_namespace")
        ),
        sa.PrimaryKeyConstraint("namespace", "id", name=op.f("pk_document")),
    )
    op.create_index("ix_document_source_file", "document", ["source_file"], unique=False)
    op.create_index(
        "uq_document_live_source",
        "document",
        ["namespace", "source_file"],
        unique=True,
        postgresql_where=sa.text("valid_to IS NULL"),
    )
    op.create_table(
        "edge",
        sa.Column("namespace", sa.String(length=128), nullable=False),
        sa.Column("id", sa.BigInteger(), sa.Identity(always=False), nullable=False),
        sa.Column("source_kind", sa.String(length=16), nullable=False),
        sa.Column("source_id", sa.String(length=40), nullable=False),
        sa.Column("target_kind", sa.String(length=16), nullable=False),
        sa.Column("target_id", sa.String(length=40), nullable=False),
        sa.Column("relation", sa.String(length=64), nullable=False),
        sa.Column("weight", sa.Float(), server_default="1.0", nullable=False),
        sa.Column("context", sa.Text(), nullable=True),
        sa.Column("evidence_chunk_ids", sa.ARRAY(sa.Text()), server_default="{}", nullable=False),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.Column(
            "valid_from",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.Column("valid_to", sa.DateTime(timezone=True), nullable=True),
        sa.Column("expired_at", sa.DateTime(timezone=True), nullable=True),
        sa.CheckConstraint(
            "source_kind IN ('chunk', 'entity', 'fact')", name=op.f("ck_edge_source_kind")
        ),
        sa.CheckConstraint(
            "target_kind IN ('chunk', 'entity', 'fact')", name=op.f("ck_edge_target_kind")
        ),
        sa.CheckConstraint("weight >= 0", name=op.f("ck_edge_weight_non_negative")),
        sa.ForeignKeyConstraint(
            ["namespace"], ["namespace.name"], name=op.f("fk_edge_namespace_namespace")
        ),
        sa.PrimaryKeyConstraint("namespace", "id", name=op.f("pk_edge")),
    )
    op.create_index("ix_edge_namespace_relation", "edge", ["namespace", "relation"], unique=False)
    op.create_index("ix_edge_namespace_source_id", "edge", ["namespace", "source_id"], unique=False)
    op.create_index("ix_edge_namespace_target_id", "edge", ["namespace", "target_id"], unique=False)
    op.create_table(
        "entity",
        sa.Column("namespace", sa.String(length=128), nullable=False),
        sa.Column("id", sa.String(length=40), nullable=False),
        sa.Column("key", sa.Text(), nullable=False),
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("entity_type", sa.String(length=64), nullable=False),
        sa.Column("summary", sa.Text(), nullable=True),
        sa.Column(
            "metadata", postgresql.JSONB(astext_type=sa.Text()), server_default="{}", nullable=False
        ),
        sa.Column("lifecycle", sa.String(length=16), server_default="project", nullable=False),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.Column(
            "updated_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.Column(
            "valid_from",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.Column("valid_to", sa.DateTime(timezone=True), nullable=True),
        sa.CheckConstraint(
            "lifecycle IN ('personal', 'project', 'session')", name=op.f("ck_entity_lifecycle")
        ),
        sa.ForeignKeyConstraint(
            ["namespace"], ["namespace.name"], name=op.f("fk_entity_namespace_namespace")
        ),
        sa.PrimaryKeyConstraint("namespace", "id", name=op.f("pk_entity")),
    )
    op.create_index(
        "ix_entity_namespace_entity_type", "entity", ["namespace", "entity_type"], unique=False
    )
    op.create_index("ix_entity_namespace_name", "entity", ["namespace", "name"], unique=False)
    op.create_index(
        "uq_entity_live_key",
        "entity",
        ["namespace", "key"],
        unique=True,
        postgresql_where=sa.text("valid_to IS NULL"),
    )
    op.create_table(
        "preference",
        sa.Column("namespace", sa.String(length=128), nullable=False),
        sa.Column("key", sa.String(length=256), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("value", postgresql.JSONB(astext_type=sa.Text()), nullable=False),
        sa.Column("lifecycle", sa.String(length=16), server_default="personal", nullable=False),
        sa.Column(
            "valid_from",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.Column("valid_to", sa.DateTime(timezone=True), nullable=True),
        sa.CheckConstraint(
            "lifecycle IN ('personal', 'project', 'session')", name=op.f("ck_preference_lifecycle")
        ),
        sa.ForeignKeyConstraint(
            ["namespace"], ["namespace.name"], name=op.f("fk_preference_namespace_namespace")
        ),
        sa.PrimaryKeyConstraint("namespace", "key", "version", name=op.f("pk_preference")),
    )
    op.create_index(
        "uq_preference_current",
        "preference",
        ["namespace", "key"],
        unique=True,
        postgresql_where=sa.text("valid_to IS NULL"),
    )
    op.create_table(
        "chunk",
        sa.Column("namespace", sa.String(length=128), nullable=False),
        sa.Column("id", sa.String(length=40), nullable=False),
        sa.Column("doc_type", sa.String(length=16), nullable=False),
        sa.Column("content", sa.Text(), nullable=False),
        sa.Column("content_hash", sa.String(length=64), nullable=False),
        sa.Column("token_count", sa.Integer(), nullable=False),
        sa.Column("embedding", pgvector.sqlalchemy.vector.VECTOR(dim=384), nullable=True),
        sa.Column(
            "tsv",
            postgresql.TSVECTOR(),
            sa.Computed("to_tsvector('english'::regconfig, content)", persisted=True),
            nullable=False,
        ),
        sa.Column("memory_type", sa.String(length=32), nullable=True),
        sa.Column("importance", sa.Float(), server_default="0.5", nullable=False),
        sa.Column("confidence", sa.Float(), server_default="0.3", nullable=False),
        sa.Column("tags", sa.ARRAY(sa.Text()), server_default="{}", nullable=False),
        sa.Column(
            "metadata", postgresql.JSONB(astext_type=sa.Text()), server_default="{}", nullable=False
        ),
        sa.Column("lifecycle", sa.String(length=16), server_default="project", nullable=False),
        sa.Column("stage", sa.String(length=16), server_default="active", nullable=False),
        sa.Column("pinned", sa.Boolean(), server_default="false", nullable=False),
        sa.Column("access_count", sa.Integer(), server_default="0", nullable=False),
        sa.Column("last_accessed_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("document_id", sa.String(length=40), nullable=True),
        sa.Column("source_file", sa.Text(), nullable=True),
        sa.Column("chunk_index", sa.Integer(), nullable=True),
        sa.Column("header_path", sa.Text(), nullable=True),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.Column(
            "updated_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.Column(
            "valid_from",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.Column("valid_to", sa.DateTime(timezone=True), nullable=True),
        sa.CheckConstraint(
            "(doc_type = 'document') = (document_id IS NOT NULL)",
            name=op.f("ck_chunk_document_has_source"),
        ),
        sa.CheckConstraint(
            "(doc_type = 'memory') = (memory_type IS NOT NULL)",
            name=op.f("ck_chunk_memory_has_type"),
        ),
        sa.CheckConstraint("doc_type IN ('memory', 'document')", name=op.f("ck_chunk_doc_type")),
        sa.CheckConstraint(
            "lifecycle IN ('personal', 'project', 'session')", name=op.f("ck_chunk_lifecycle")
        ),
        sa.CheckConstraint(
            "memory_type IS NULL OR memory_type IN ('preference', 'decision', 'pattern', 'session', 'fact', 'golden_rule', 'solution', 'fix', 'configuration', 'problem', 'workflow', 'code_pattern', 'error', 'general', 'procedure', 'insight')",
            name=op.f("ck_chunk_memory_type"),
        ),
        sa.CheckConstraint(
            "stage IN ('active', 'demoted', 'archived', 'rehydratable')",
            name=op.f("ck_chunk_stage"),
        ),
        sa.CheckConstraint(
            "confidence >= 0 AND confidence <= 1", name=op.f("ck_chunk_confidence_range")
        ),
        sa.CheckConstraint(
            "importance >= 0 AND importance <= 1", name=op.f("ck_chunk_importance_range")
        ),
        sa.ForeignKeyConstraint(
            ["namespace", "document_id"],
            ["document.namespace", "document.id"],
            name=op.f("fk_chunk_namespace_document_id_document"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["namespace"], ["namespace.name"], name=op.f("fk_chunk_namespace_namespace")
        ),
        sa.PrimaryKeyConstraint("namespace", "id", name=op.f("pk_chunk")),
    )
    op.create_index(
        "ix_chunk_embedding_hnsw",
        "chunk",
        ["embedding"],
        unique=False,
        postgresql_using="hnsw",
        postgresql_with={"m": 16, "ef_construction": 64},
        postgresql_ops={"embedding": "vector_cosine_ops"},
    )
    op.create_index("ix_chunk_id", "chunk", ["id"], unique=False)
    op.create_index(
        "ix_chunk_namespace_doc_type_created_at",
        "chunk",
        ["namespace", "doc_type", "created_at"],
        unique=False,
    )
    op.create_index(
        "ix_chunk_namespace_document_id", "chunk", ["namespace", "document_id"], unique=False
    )
    op.create_index(
        "ix_chunk_pending_embedding",
        "chunk",
        ["created_at"],
        unique=False,
        postgresql_where=sa.text("embedding IS NULL AND valid_to IS NULL"),
    )
    op.create_index("ix_chunk_tsv", "chunk", ["tsv"], unique=False, postgresql_using="gin")
    op.create_index(
        "uq_chunk_live_memory_hash",
        "chunk",
        ["namespace", "content_hash"],
        unique=True,
        postgresql_where=sa.text("doc_type = 'memory' AND valid_to IS NULL"),
    )
    op.create_table(
        "fact",
        sa.Column("namespace", sa.String(length=128), nullable=False),
        sa.Column("id", sa.String(length=40), nullable=False),
        sa.Column("entity_id", sa.String(length=40), nullable=True),
        sa.Column("content", sa.Text(), nullable=False),
        sa.Column("source_uri", sa.Text(), nullable=True),
        sa.Column("confidence", sa.Float(), server_default="0.8", nullable=False),
        sa.Column("version", sa.String(length=32), server_default="1.0.0", nullable=False),
        sa.Column("supersedes_id", sa.String(length=40), nullable=True),
        sa.Column("verified", sa.Boolean(), server_default="false", nullable=False),
        sa.Column("verified_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("lifecycle", sa.String(length=16), server_default="project", nullable=False),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.Column(
            "valid_from",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.Column("valid_to", sa.DateTime(timezone=True), nullable=True),
        sa.CheckConstraint(
            "lifecycle IN ('personal', 'project', 'session')", name=op.f("ck_fact_lifecycle")
        ),
        sa.CheckConstraint(
            "confidence >= 0 AND confidence <= 1", name=op.f("ck_fact_confidence_range")
        ),
        sa.ForeignKeyConstraint(
            ["namespace", "entity_id"],
            ["entity.namespace", "entity.id"],
            name=op.f("fk_fact_namespace_entity_id_entity"),
            ondelete="SET NULL",
        ),
        sa.ForeignKeyConstraint(
            ["namespace", "supersedes_id"],
            ["fact.namespace", "fact.id"],
            name=op.f("fk_fact_namespace_supersedes_id_fact"),
            ondelete="SET NULL",
        ),
        sa.ForeignKeyConstraint(
            ["namespace"], ["namespace.name"], name=op.f("fk_fact_namespace_namespace")
        ),
        sa.PrimaryKeyConstraint("namespace", "id", name=op.f("pk_fact")),
    )
    op.create_index("ix_fact_namespace_entity_id", "fact", ["namespace", "entity_id"], unique=False)
    op.create_index("ix_fact_namespace_verified", "fact", ["namespace", "verified"], unique=False)


def downgrade() -> None:
    # The vector extension stays: on a shared server other schemas may use it.
    op.drop_index("ix_fact_namespace_verified", table_name="fact")
    op.drop_index("ix_fact_namespace_entity_id", table_name="fact")
    op.drop_table("fact")
    op.drop_index(
        "uq_chunk_live_memory_hash",
        table_name="chunk",
        postgresql_where=sa.text("doc_type = 'memory' AND valid_to IS NULL"),
    )
    op.drop_index("ix_chunk_tsv", table_name="chunk", postgresql_using="gin")
    op.drop_index(
        "ix_chunk_pending_embedding",
        table_name="chunk",
        postgresql_where=sa.text("embedding IS NULL AND valid_to IS NULL"),
    )
    op.drop_index("ix_chunk_namespace_document_id", table_name="chunk")
    op.drop_index("ix_chunk_namespace_doc_type_created_at", table_name="chunk")
    op.drop_index("ix_chunk_id", table_name="chunk")
    op.drop_index(
        "ix_chunk_embedding_hnsw",
        table_name="chunk",
        postgresql_using="hnsw",
        postgresql_with={"m": 16, "ef_construction": 64},
        postgresql_ops={"embedding": "vector_cosine_ops"},
    )
    op.drop_table("chunk")
    op.drop_index(
        "uq_preference_current",
        table_name="preference",
        postgresql_where=sa.text("valid_to IS NULL"),
    )
    op.drop_table("preference")
    op.drop_index(
        "uq_entity_live_key", table_name="entity", postgresql_where=sa.text("valid_to IS NULL")
    )
    op.drop_index("ix_entity_namespace_name", table_name="entity")
    op.drop_index("ix_entity_namespace_entity_type", table_name="entity")
    op.drop_table("entity")
    op.drop_index("ix_edge_namespace_target_id", table_name="edge")
    op.drop_index("ix_edge_namespace_source_id", table_name="edge")
    op.drop_index("ix_edge_namespace_relation", table_name="edge")
    op.drop_table("edge")
    op.drop_index(
        "uq_document_live_source",
        table_name="document",
        postgresql_where=sa.text("valid_to IS NULL"),
    )
    op.drop_index("ix_document_source_file", table_name="document")
    op.drop_table("document")
    op.drop_index("ix_validation_event_namespace_memory_id", table_name="validation_event")
    op.drop_index("ix_validation_event_created_at", table_name="validation_event")
    op.drop_table("validation_event")
    op.drop_index("ix_query_trace_error_type", table_name="query_trace")
    op.drop_index("ix_query_trace_created_at", table_name="query_trace")
    op.drop_table("query_trace")
    op.drop_table("namespace")
    op.drop_index("ix_event_subject_id", table_name="event")
    op.drop_index("ix_event_session_id", table_name="event")
    op.drop_index("ix_event_occurred_at", table_name="event")
    op.drop_index("ix_event_namespace_occurred_at", table_name="event")
    op.drop_index("ix_event_event_type_occurred_at", table_name="event")
    op.drop_table("event")
    op.drop_index("ix_agent_trace_session_id", table_name="agent_trace")
    op.drop_index("ix_agent_trace_file_path", table_name="agent_trace")
    op.drop_index("ix_agent_trace_created_at", table_name="agent_trace")
    op.drop_index("ix_agent_trace_commit_sha", table_name="agent_trace")
    op.drop_table("agent_trace")
