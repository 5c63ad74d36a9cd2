"""Index memories in write order, ties included.

What: `ix_chunk_namespace_doc_type_created_at` (namespace, doc_type, created_at) is replaced
by `ix_chunk_write_order` (namespace, doc_type, created_at, id).
Why: the neighbourhood channel walks a seed's neighbours in (created_at, id) order with a
LIMIT of a few rows. Memories written in one transaction (a batch store, a bulk load) shared
one created_at, and the three-column index could not give them in id order: each seed read
and sorted every row of its batch (p95 195 ms for that stage at 10k memories,
benchmarks/README.md). With id as the last column the walk is an ordered index range scan
that stops after `width` rows. The same order serves list/export by creation time.

Revision ID: 5d2f8e6a1c37
Revises: 7c1e5a9b2d40
Create Date: 2026-11-23 10:30:00+00:00
"""

from collections.abc import Sequence

from alembic import op

revision: str = "5d2f8e6a1c37"
down_revision: str | None = "7c1e5a9b2d40"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_index("ix_chunk_write_order", "chunk", ["namespace", "doc_type", "created_at", "id"])
    op.drop_index("ix_chunk_namespace_doc_type_created_at", table_name="chunk")


def downgrade() -> None:
    op.create_index(
        "ix_chunk_namespace_doc_type_created_at", "chunk", ["namespace", "doc_type", "created_at"]
    )
    op.drop_index("ix_chunk_write_order", table_name="chunk")
