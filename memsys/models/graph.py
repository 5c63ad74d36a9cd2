"""Entities, versioned facts and typed edges between any two nodes (chunk, entity, fact)."""

from datetime import datetime
from typing import Any

from sqlalchemy import (
    ARRAY,
    BigInteger,
    Boolean,
    CheckConstraint,
    Float,
    ForeignKey,
    ForeignKeyConstraint,
    Identity,
    Index,
    String,
    Text,
    text,
)
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import Mapped, mapped_column

from memsys.models.base import LIFECYCLES, Base, in_list, timestamp_column

NODE_KINDS = ("chunk", "entity", "fact", "episode")


class Entity(Base):
    """A typed node with a stable, deterministic key (S000: `err#…`, `fix#…`, `doc#…`)."""

    __tablename__ = "entity"
    __table_args__ = (
        CheckConstraint(in_list("lifecycle", LIFECYCLES), name="lifecycle"),
        Index(
            "uq_entity_live_key",
            "namespace",
            "key",
            unique=True,
            postgresql_where=text("valid_to IS NULL"),
        ),
        Index("ix_entity_namespace_name", "namespace", "name"),
        Index("ix_entity_namespace_entity_type", "namespace", "entity_type"),
    )

    namespace: Mapped[str] = mapped_column(
        String(128), ForeignKey("namespace.name"), primary_key=True
    )
    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    key: Mapped[str] = mapped_column(Text)
    name: Mapped[str] = mapped_column(Text)
    entity_type: Mapped[str] = mapped_column(String(64))
    summary: Mapped[str | None] = mapped_column(Text, nullable=True)
    meta: Mapped[dict[str, Any]] = mapped_column("metadata", JSONB, server_default="{}")
    lifecycle: Mapped[str] = mapped_column(String(16), server_default="project")
    created_at: Mapped[datetime] = timestamp_column()
    updated_at: Mapped[datetime] = timestamp_column(on_update=True)
    valid_from: Mapped[datetime] = timestamp_column()
    valid_to: Mapped[datetime | None] = timestamp_column(nullable=True)


class Fact(Base):
    """A verifiable statement with a semver version and a `supersedes` chain."""

    __tablename__ = "fact"
    __table_args__ = (
        CheckConstraint("confidence >= 0 AND confidence <= 1", name="confidence_range"),
        CheckConstraint(in_list("lifecycle", LIFECYCLES), name="lifecycle"),
        ForeignKeyConstraint(
            ["namespace", "supersedes_id"], ["fact.namespace", "fact.id"], ondelete="SET NULL"
        ),
        ForeignKeyConstraint(
            ["namespace", "entity_id"], ["entity.namespace", "entity.id"], ondelete="SET NULL"
        ),
        Index("ix_fact_namespace_entity_id", "namespace", "entity_id"),
        Index("ix_fact_namespace_verified", "namespace", "verified"),
        # one live version per (entity, attribute): concurrent supersedes converge on it
        Index(
            "uq_fact_live_attribute",
            "namespace",
            "entity_id",
            "attribute",
            unique=True,
            postgresql_where=text("valid_to IS NULL AND attribute IS NOT NULL"),
        ),
    )

    namespace: Mapped[str] = mapped_column(
        String(128), ForeignKey("namespace.name"), primary_key=True
    )
    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    entity_id: Mapped[str | None] = mapped_column(String(40), nullable=True)
    attribute: Mapped[str | None] = mapped_column(Text, nullable=True)
    content: Mapped[str] = mapped_column(Text)
    source_uri: Mapped[str | None] = mapped_column(Text, nullable=True)
    confidence: Mapped[float] = mapped_column(Float, server_default="0.8")
    version: Mapped[str] = mapped_column(String(32), server_default="1.0.0")
    supersedes_id: Mapped[str | None] = mapped_column(String(40), nullable=True)
    verified: Mapped[bool] = mapped_column(Boolean, server_default="false")
    verified_at: Mapped[datetime | None] = timestamp_column(nullable=True)
    lifecycle: Mapped[str] = mapped_column(String(16), server_default="project")
    created_at: Mapped[datetime] = timestamp_column()
    valid_from: Mapped[datetime] = timestamp_column()
    valid_to: Mapped[datetime | None] = timestamp_column(nullable=True)


class Edge(Base):
    """A typed, weighted relation. Invalidated edges are closed (valid_to, expired_at)."""

    __tablename__ = "edge"
    __table_args__ = (
        CheckConstraint(in_list("source_kind", NODE_KINDS), name="source_kind"),
        CheckConstraint(in_list("target_kind", NODE_KINDS), name="target_kind"),
        CheckConstraint("weight >= 0", name="weight_non_negative"),
        Index("ix_edge_namespace_source_id", "namespace", "source_id"),
        Index("ix_edge_namespace_target_id", "namespace", "target_id"),
        Index("ix_edge_namespace_relation", "namespace", "relation"),
    )

    namespace: Mapped[str] = mapped_column(
        String(128), ForeignKey("namespace.name"), primary_key=True
    )
    # Integer ids: S001's memory_relate returns, and memory_edge_forget takes, an integer.
    id: Mapped[int] = mapped_column(BigInteger, Identity(), primary_key=True)
    source_kind: Mapped[str] = mapped_column(String(16))
    source_id: Mapped[str] = mapped_column(String(40))
    target_kind: Mapped[str] = mapped_column(String(16))
    target_id: Mapped[str] = mapped_column(String(40))
    relation: Mapped[str] = mapped_column(String(64))
    weight: Mapped[float] = mapped_column(Float, server_default="1.0")
    context: Mapped[str | None] = mapped_column(Text, nullable=True)
    evidence_chunk_ids: Mapped[list[str]] = mapped_column(ARRAY(Text), server_default="{}")
    created_at: Mapped[datetime] = timestamp_column()
    valid_from: Mapped[datetime] = timestamp_column()
    valid_to: Mapped[datetime | None] = timestamp_column(nullable=True)
    expired_at: Mapped[datetime | None] = timestamp_column(nullable=True)


class Episode(Base):
    """S002: one ingested piece of text or JSON with its reference time; the entities and
    relations extracted from it point back to it (`mentions` edges, edge evidence)."""

    __tablename__ = "episode"
    __table_args__ = (Index("ix_episode_namespace_reference_time", "namespace", "reference_time"),)

    namespace: Mapped[str] = mapped_column(
        String(128), ForeignKey("namespace.name"), primary_key=True
    )
    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    content: Mapped[str] = mapped_column(Text)
    source_description: Mapped[str | None] = mapped_column(Text, nullable=True)
    memory_id: Mapped[str | None] = mapped_column(String(40), nullable=True)
    reference_time: Mapped[datetime] = timestamp_column()
    created_at: Mapped[datetime] = timestamp_column()
