"""Lifecycle and learning history: memory_change, memory_access, and chunk lifecycle columns.

What: `memory_change` (one row per change of a memory's stage, confidence, content on
archiving/rekindling, or lossy mark: old and new value), `memory_access` (the access
log: one row per memory handed to a caller), and three `chunk` columns: `decay_score` (S003's
score as of the last maintenance), `stage_changed_at`, `lossy` (rekindled from its summary).
Existing access counts are carried into the log as one row each (`hits` = the count), so
`chunk.access_count` equals the sum of the log from the start.
Why: ranking uses confidence, stage and access counts, and archiving replaces content; a
query replayed as of a past time must see those signals as they were (issue 12, "Replay
depends on this"), and hot/warm/cold needs accesses by time.

Revision ID: a4f0c2d81e63
Revises: 5d2f8e6a1c37
Create Date: 2026-11-23 10:30:00+00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "a4f0c2d81e63"
down_revision: str | None = "5d2f8e6a1c37"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

CARRY_ACCESS_COUNTS = """
INSERT INTO memory_access (namespace, memory_id, hits, accessed_at)
SELECT namespace, id, access_count, coalesce(last_accessed_at, created_at)
FROM chunk WHERE doc_type = 'memory' AND access_count > 0
"""


def _log_table(name: str, *columns: sa.schema.SchemaItem) -> None:
    op.create_table(
        name,
        sa.Column("namespace", sa.String(length=128), nullable=False),
        sa.Column("id", sa.BigInteger(), sa.Identity(always=False), nullable=False),
        sa.Column("memory_id", sa.String(length=40), nullable=False),
        *columns,
        sa.PrimaryKeyConstraint("namespace", "id", name=op.f(f"pk_{name}")),
    )


def upgrade() -> None:
    now = sa.text("now()")
    _log_table(
        "memory_change",
        sa.Column("field", sa.String(length=16), nullable=False),
        sa.Column("old_value", postgresql.JSONB(astext_type=sa.Text()), nullable=True),
        sa.Column("new_value", postgresql.JSONB(astext_type=sa.Text()), nullable=True),
        sa.Column("operation", sa.String(length=64), nullable=False),
        sa.Column("changed_at", sa.DateTime(timezone=True), server_default=now, nullable=False),
        sa.CheckConstraint(
            "field IN ('stage', 'confidence', 'content', 'lossy')",
            name=op.f("ck_memory_change_field"),
        ),
    )
    op.create_index(
        "ix_memory_change_memory",
        "memory_change",
        ["namespace", "memory_id", "field", "changed_at"],
    )
    op.create_index("ix_memory_change_changed_at", "memory_change", ["changed_at"])
    _log_table(
        "memory_access",
        sa.Column("hits", sa.Integer(), server_default="1", nullable=False),
        sa.Column("accessed_at", sa.DateTime(timezone=True), server_default=now, nullable=False),
    )
    op.create_index(
        "ix_memory_access_memory", "memory_access", ["namespace", "memory_id", "accessed_at"]
    )
    op.create_index("ix_memory_access_accessed_at", "memory_access", ["accessed_at"])
    op.add_column("chunk", sa.Column("decay_score", sa.Float(), nullable=True))
    op.add_column("chunk", sa.Column("stage_changed_at", sa.DateTime(timezone=True), nullable=True))
    op.add_column("chunk", sa.Column("lossy", sa.Boolean(), server_default="false", nullable=False))
    op.execute(CARRY_ACCESS_COUNTS)


def downgrade() -> None:
    op.drop_column("chunk", "lossy")
    op.drop_column("chunk", "stage_changed_at")
    op.drop_column("chunk", "decay_score")
    op.drop_index("ix_memory_access_accessed_at", table_name="memory_access")
    op.drop_index("ix_memory_access_memory", table_name="memory_access")
    op.drop_table("memory_access")
    op.drop_index("ix_memory_change_changed_at", table_name="memory_change")
    op.drop_index("ix_memory_change_memory", table_name="memory_change")
    op.drop_table("memory_change")
