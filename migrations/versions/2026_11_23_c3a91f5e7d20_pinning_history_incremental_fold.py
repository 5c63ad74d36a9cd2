"""Pinning in the history, and an access log that folds incrementally.

What:
- `memory_change.field` may be 'pinned': memory_pin / memory_unpin log the flag's old and new
  value in their transaction, so "was it pinned as of T" is answerable (replay, exemptions).
- `memory_access.counted`: whether the read that logged the row also bumped
  `chunk.access_count` (false when the bump was skipped because another transaction held the
  row). Existing rows are marked counted after counters that lag their log are raised to it;
  new rows default to false (a row logged by anything else is not in the counter yet).
  A partial index on the rows not counted yet is all `fold` reads.
Why: `fold` aggregated the whole access log on every maintenance run, so its time grew with
the log; now it takes only the rows not counted yet (and marks them counted in the same
statement that adds them to the counters), so a second run reads nothing and two runs, or a
run beside live reads, never count a row twice (issue 12).

Revision ID: c3a91f5e7d20
Revises: 5d2f8e61c0a7
Create Date: 2026-11-23 16:00:00+00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "c3a91f5e7d20"
down_revision: str | None = "5d2f8e61c0a7"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Counters behind their log (a bump skipped before this revision) catch up; a counter above
# its log (carried in by an import) is left alone.
CATCH_UP = """
WITH total AS (
    SELECT namespace, memory_id, sum(hits) AS hits, max(accessed_at) AS last
    FROM memory_access GROUP BY namespace, memory_id
)
UPDATE chunk c SET access_count = total.hits,
                   last_accessed_at = greatest(c.last_accessed_at, total.last)
FROM total
WHERE c.namespace = total.namespace AND c.id = total.memory_id AND c.access_count < total.hits
"""
FIELDS = ("stage", "confidence", "content", "lossy")


def _field_check(fields: tuple[str, ...]) -> None:
    op.drop_constraint(op.f("ck_memory_change_field"), "memory_change", type_="check")
    listed = ", ".join(f"'{f}'" for f in fields)
    op.create_check_constraint(
        op.f("ck_memory_change_field"), "memory_change", f"field IN ({listed})"
    )


def upgrade() -> None:
    _field_check((*FIELDS, "pinned"))
    op.execute(CATCH_UP)
    op.add_column(
        "memory_access",
        sa.Column("counted", sa.Boolean(), server_default=sa.true(), nullable=False),
    )
    op.alter_column("memory_access", "counted", server_default=sa.false())
    op.create_index(
        "ix_memory_access_uncounted",
        "memory_access",
        ["namespace", "memory_id"],
        postgresql_where=sa.text("NOT counted"),
    )


def downgrade() -> None:
    op.drop_index("ix_memory_access_uncounted", table_name="memory_access")
    op.drop_column("memory_access", "counted")
    op.execute("DELETE FROM memory_change WHERE field = 'pinned'")
    _field_check(FIELDS)
