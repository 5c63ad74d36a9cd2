"""Append-only records: the event log, query traces, validation events and agent traces.

These rows are not tied to the namespace table by a foreign key: a log must outlive what it
describes. Operations that span every namespace record the namespace as '*'.
"""

from datetime import datetime
from typing import Any

from sqlalchemy import BigInteger, CheckConstraint, Float, Identity, Index, Integer, String, Text
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import Mapped, mapped_column

from memsys.models.base import Base, in_list, timestamp_column

ALL_NAMESPACES = "*"
ERROR_TYPES = ("context_bug", "model_bug", "system_error")
# S004's context-bug sub-categories (memsys.services.debug_attribution says how each is found).
CONTEXT_BUGS = (
    "wrong_store_queried",
    "wrong_mode_detected",
    "wrong_lifecycle_filter",
    "retrieval_ranking_error",
)
VALIDATION_EVENT_TYPES = ("applied", "succeeded", "failed")


class Event(Base):
    """Every write appends one row, in the same transaction as the change; every query one
    row with its trace, written after the query answers with the query's time (a failed
    query's after its rollback, with its own)."""

    __tablename__ = "event"
    __table_args__ = (
        Index("ix_event_occurred_at", "occurred_at"),
        Index("ix_event_namespace_occurred_at", "namespace", "occurred_at"),
        Index("ix_event_event_type_occurred_at", "event_type", "occurred_at"),
        Index("ix_event_subject_id", "subject_id"),
        Index("ix_event_session_id", "session_id"),
    )

    namespace: Mapped[str] = mapped_column(String(128), primary_key=True)
    id: Mapped[int] = mapped_column(BigInteger, Identity(), primary_key=True)
    occurred_at: Mapped[datetime] = timestamp_column()
    event_type: Mapped[str] = mapped_column(String(32))
    operation: Mapped[str] = mapped_column(String(64))
    subject_kind: Mapped[str | None] = mapped_column(String(32), nullable=True)
    subject_id: Mapped[str | None] = mapped_column(String(64), nullable=True)
    session_id: Mapped[str | None] = mapped_column(String(128), nullable=True)
    user_id: Mapped[str | None] = mapped_column(String(128), nullable=True)
    payload: Mapped[dict[str, Any]] = mapped_column(JSONB, server_default="{}")


class QueryTrace(Base):
    """One row per retrieval (S004 trace schema): routing, candidates, timings, output, error."""

    __tablename__ = "query_trace"
    __table_args__ = (
        CheckConstraint(f"error_type IS NULL OR {in_list('error_type', ERROR_TYPES)}", name="err"),
        Index("ix_query_trace_created_at", "created_at"),
        CheckConstraint(
            f"error_subtype IS NULL OR {in_list('error_subtype', CONTEXT_BUGS)}", name="subtype"
        ),
        Index("ix_query_trace_error_type", "error_type"),
        # "Which queries returned this memory?": retrieved @> '[{"id": "mem_…"}]'.
        Index(
            "ix_query_trace_retrieved",
            "retrieved",
            postgresql_using="gin",
            postgresql_ops={"retrieved": "jsonb_path_ops"},
        ),
    )

    namespace: Mapped[str] = mapped_column(String(128), primary_key=True)
    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    created_at: Mapped[datetime] = timestamp_column()
    operation: Mapped[str] = mapped_column(String(64))
    query: Mapped[str] = mapped_column(Text)
    user_context: Mapped[dict[str, Any]] = mapped_column(JSONB, server_default="{}")
    filters: Mapped[dict[str, Any]] = mapped_column(JSONB, server_default="{}")
    mode_detected: Mapped[str | None] = mapped_column(String(32), nullable=True)
    mode_confidence: Mapped[float | None] = mapped_column(Float, nullable=True)
    stores_queried: Mapped[list[str]] = mapped_column(JSONB, server_default="[]")
    routing_logic: Mapped[str | None] = mapped_column(Text, nullable=True)
    # Every fused candidate, best first: [id, fused score] (rank = position + 1).
    candidates: Mapped[list[Any]] = mapped_column(JSONB, server_default="[]")
    # Each channel's pool, best first: {"dense": [[id, score], …], …, "terms": {…}}.
    channels: Mapped[dict[str, Any]] = mapped_column(JSONB, server_default="{}")
    # Fusion version and weights, the retrieval request (filters, limit, pool) and the query
    # embedding's digest: what a replay needs to run the same retrieval.
    fusion: Mapped[dict[str, Any]] = mapped_column(JSONB, server_default="{}")
    retrieved: Mapped[list[dict[str, Any]]] = mapped_column(JSONB, server_default="[]")
    timings: Mapped[dict[str, Any]] = mapped_column(JSONB, server_default="{}")
    verification: Mapped[dict[str, Any] | None] = mapped_column(JSONB, nullable=True)
    output: Mapped[dict[str, Any] | None] = mapped_column(JSONB, nullable=True)
    total_latency_ms: Mapped[float] = mapped_column(Float, server_default="0")
    error: Mapped[str | None] = mapped_column(Text, nullable=True)
    error_type: Mapped[str | None] = mapped_column(String(32), nullable=True)
    error_subtype: Mapped[str | None] = mapped_column(String(32), nullable=True)
    event_id: Mapped[int | None] = mapped_column(BigInteger, nullable=True)


class ValidationEvent(Base):
    """TRY/LEARN: a memory was applied, then succeeded or failed; confidence before and after."""

    __tablename__ = "validation_event"
    __table_args__ = (
        CheckConstraint(in_list("event_type", VALIDATION_EVENT_TYPES), name="event_type"),
        Index("ix_validation_event_namespace_memory_id", "namespace", "memory_id"),
        Index("ix_validation_event_created_at", "created_at"),
    )

    namespace: Mapped[str] = mapped_column(String(128), primary_key=True)
    id: Mapped[int] = mapped_column(BigInteger, Identity(), primary_key=True)
    memory_id: Mapped[str] = mapped_column(String(40))
    event_type: Mapped[str] = mapped_column(String(16))
    context: Mapped[str | None] = mapped_column(Text, nullable=True)
    session_id: Mapped[str | None] = mapped_column(String(128), nullable=True)
    error_msg: Mapped[str | None] = mapped_column(Text, nullable=True)
    old_confidence: Mapped[float | None] = mapped_column(Float, nullable=True)
    new_confidence: Mapped[float | None] = mapped_column(Float, nullable=True)
    created_at: Mapped[datetime] = timestamp_column()


class AgentTrace(Base):
    """Which agent session produced which commit / file change (S001 trace_query, trace_list)."""

    __tablename__ = "agent_trace"
    __table_args__ = (
        Index("ix_agent_trace_commit_sha", "commit_sha"),
        Index("ix_agent_trace_file_path", "file_path"),
        Index("ix_agent_trace_session_id", "session_id"),
        Index("ix_agent_trace_created_at", "created_at"),
    )

    namespace: Mapped[str] = mapped_column(String(128), primary_key=True)
    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    session_id: Mapped[str | None] = mapped_column(String(128), nullable=True)
    agent: Mapped[str | None] = mapped_column(String(128), nullable=True)
    commit_sha: Mapped[str | None] = mapped_column(String(64), nullable=True)
    file_path: Mapped[str | None] = mapped_column(Text, nullable=True)
    line_start: Mapped[int | None] = mapped_column(Integer, nullable=True)
    line_end: Mapped[int | None] = mapped_column(Integer, nullable=True)
    summary: Mapped[str | None] = mapped_column(Text, nullable=True)
    payload: Mapped[dict[str, Any]] = mapped_column(JSONB, server_default="{}")
    created_at: Mapped[datetime] = timestamp_column()
