"""Episodes, fact attributes, and episodes as edge ends.

What: a namespaced `episode` table (S002: text or JSON ingested with a reference time; the
text is also kept as a memory for search, `memory_id`); `fact.attribute` with a partial unique
index on the live (namespace, entity_id, attribute); `episode` added to the node kinds an edge
may join (`ck_edge_source_kind`, `ck_edge_target_kind`).
Why: versioned facts supersede "the previous version" — the live fact about the same
attribute of the same entity — and the unique index makes two concurrent writers converge on
one live version. Episodes are where extracted entities and relations come from; an edge
`episode → entity` (mentions) records that provenance.

Revision ID: a4f19c2e7b63
Revises: 5d2f8e4a7c19
Create Date: 2026-11-23 11:00:00+00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "a4f19c2e7b63"
down_revision: str | None = "5d2f8e4a7c19"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

OLD_KINDS = "('chunk', 'entity', 'fact')"
NEW_KINDS = "('chunk', 'entity', 'fact', 'episode')"


def _kinds(kinds: str) -> None:
    for side in ("source_kind", "target_kind"):
        op.drop_constraint(op.f(f"ck_edge_{side}"), "edge", type_="check")
        op.create_check_constraint(op.f(f"ck_edge_{side}"), "edge", f"{side} IN {kinds}")


def upgrade() -> None:
    op.create_table(
        "episode",
        sa.Column("namespace", sa.String(length=128), nullable=False),
        sa.Column("id", sa.String(length=40), nullable=False),
        sa.Column("content", sa.Text(), nullable=False),
        sa.Column("source_description", sa.Text(), nullable=True),
        sa.Column("memory_id", sa.String(length=40), nullable=True),
        sa.Column(
            "reference_time",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.ForeignKeyConstraint(
            ["namespace"], ["namespace.name"], name=op.f("fk_episode_namespace_namespace")
        ),
        sa.PrimaryKeyConstraint("namespace", "id", name=op.f("pk_episode")),
    )
    op.create_index(
        "ix_episode_namespace_reference_time", "episode", ["namespace", "reference_time"]
    )
    op.add_column("fact", sa.Column("attribute", sa.Text(), nullable=True))
    op.create_index(
        "uq_fact_live_attribute",
        "fact",
        ["namespace", "entity_id", "attribute"],
        unique=True,
        postgresql_where=sa.text("valid_to IS NULL AND attribute IS NOT NULL"),
    )
    _kinds(NEW_KINDS)


def downgrade() -> None:
    op.execute("DELETE FROM edge WHERE source_kind = 'episode' OR target_kind = 'episode'")
    _kinds(OLD_KINDS)
    op.drop_index("uq_fact_live_attribute", table_name="fact")
    op.drop_column("fact", "attribute")
    op.drop_index("ix_episode_namespace_reference_time", table_name="episode")
    op.drop_table("episode")
