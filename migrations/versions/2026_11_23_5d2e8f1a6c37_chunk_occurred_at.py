"""When a memory happened, apart from when it was written.

What: a nullable `chunk.occurred_at` (timestamptz) and an index on
`(namespace, coalesce(occurred_at, created_at))`.
Why: memory_store takes S002's `reference_time` — the moment the remembered thing happened
(a meeting last Tuesday stored today). The temporal channel (memsys/retrieval/temporal.py)
matches dates and ranges in a query ("last May", "in 2023") against that moment, falling
back to the write time for rows that have none (every row written before this revision, and
document chunks); the index serves those range filters. NULL rather than a backfilled copy
of created_at, so that no existing row is rewritten.

Revision ID: 5d2e8f1a6c37
Revises: a4f19c2e7b63
Create Date: 2026-11-23 11:00:00+00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "5d2e8f1a6c37"
down_revision: str | None = "a4f19c2e7b63"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("chunk", sa.Column("occurred_at", sa.DateTime(timezone=True), nullable=True))
    op.create_index(
        "ix_chunk_namespace_happened",
        "chunk",
        ["namespace", sa.text("coalesce(occurred_at, created_at)")],
    )


def downgrade() -> None:
    op.drop_index("ix_chunk_namespace_happened", table_name="chunk")
    op.drop_column("chunk", "occurred_at")
