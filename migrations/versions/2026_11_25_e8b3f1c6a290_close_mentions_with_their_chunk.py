"""A closed chunk's mentions close with it.

What: a trigger on `chunk` (`AFTER UPDATE OF valid_to`, when a live row is closed) gives the
chunk's live `mentions` edges the same `valid_to`; the upgrade closes those already left
open by chunks closed before it.
Why: forgetting a memory, a lifecycle delete, a re-indexed or deleted document, an observation
removed — each closes the chunk row and left its mention edges live. The graph channel
counts an entity's live mentions to tell a hub from a subject (memsys/retrieval/graph.py),
so a forgotten memory still weighed in every later query that named its entities. Closing
the edges at the chunk's own time keeps `as_of` reads exact: before the close they were live.
Downgrade: drops the trigger (the closed edges stay closed; they were the chunks' own).

Revision ID: e8b3f1c6a290
Revises: d41c7a9e3b52
Create Date: 2026-11-25 12:05:00+00:00
"""

from collections.abc import Sequence

from alembic import op

revision: str = "e8b3f1c6a290"
down_revision: str | None = "d41c7a9e3b52"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

FUNCTION = """
CREATE FUNCTION memsys_close_mentions() RETURNS trigger LANGUAGE plpgsql AS $fn$
BEGIN
    UPDATE edge SET valid_to = NEW.valid_to, expired_at = NEW.valid_to
    WHERE namespace = NEW.namespace AND source_kind = 'chunk' AND source_id = NEW.id
      AND relation = 'mentions' AND valid_to IS NULL;
    RETURN NULL;
END
$fn$
"""

TRIGGER = """
CREATE TRIGGER chunk_close_mentions AFTER UPDATE OF valid_to ON chunk
    FOR EACH ROW WHEN (OLD.valid_to IS NULL AND NEW.valid_to IS NOT NULL)
    EXECUTE FUNCTION memsys_close_mentions()
"""

BACKFILL = """
UPDATE edge e SET valid_to = c.valid_to, expired_at = c.valid_to
FROM chunk c
WHERE e.namespace = c.namespace AND e.source_kind = 'chunk' AND e.source_id = c.id
  AND e.relation = 'mentions' AND e.valid_to IS NULL AND c.valid_to IS NOT NULL
"""


def upgrade() -> None:
    op.execute(FUNCTION)
    op.execute(TRIGGER)
    op.execute(BACKFILL)


def downgrade() -> None:
    op.execute("DROP TRIGGER chunk_close_mentions ON chunk")
    op.execute("DROP FUNCTION memsys_close_mentions()")
