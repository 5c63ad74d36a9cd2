"""Live chunks longer than the model's window are queued to be embedded again, whole.

What: the vector of every live chunk of more than 254 tokens is cleared, which puts the
chunk on the embedding queue (memsys.services.embedding_queue: `embedding IS NULL`). The
background worker of `memsys serve` and `memsys mcp` embeds it again in batches as soon as
the process starts; `memsys index-directory` drains the same queue when it is run without
`--no-wait`.
Why: memsys now embeds a text over the model's window from all of its ~200-token pieces
(memsys/whole_text.py), so that a question about a long memory's later part finds
it by meaning. Vectors written before read only the first window; left alone, a store would
hold vectors made two ways until each long memory happened to be written again.
Until a chunk's turn comes it is found by full text search (and the graph) but not by the
dense channel: the worker does ~20 long chunks a second on two cores (SciFact abstracts of
~300 words), so a store with a thousand long memories is whole again within a minute.
Downgrade: nothing to undo. Vectors made whole stay whole; the older code reads them as any
vector (the migration does not keep the first-window vectors: they are derived data).

Revision ID: a6c4e2b9d173
Revises: f3a8d5c2e917
Create Date: 2026-11-25 15:40:00+00:00
"""

from collections.abc import Sequence

from alembic import op

revision: str = "a6c4e2b9d173"
down_revision: str | None = "f3a8d5c2e917"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# 254: the model's 256-token window less [CLS] and [SEP] (memsys.whole_text.WINDOW_TOKENS,
# written out: a migration must not change when the code does).
QUEUE_LONG = """
UPDATE chunk SET embedding = NULL
WHERE valid_to IS NULL AND embedding IS NOT NULL AND token_count > 254
"""


def upgrade() -> None:
    op.execute(QUEUE_LONG)


def downgrade() -> None:
    pass
