"""Edge contexts' line breaks as `\\n`.

What: live edges whose context holds `\\r` (`\\r\\n` pasted from Windows, or a bare `\\r`)
get it as `\\n`.
Why: memory_relate now stores `\\n` (memsys.schemas.edges.edge_context), as memory content
already is (b7e2c9d41f08). An edge stored before kept its `\\r\\n`: its export read back as
`\\n`, so every import of an unchanged export replaced the edge, and an export imported into
an empty database exported different bytes.
Downgrade: nothing to undo (which breaks were `\\r\\n` is not kept).

Revision ID: c5d2e8a17f40
Revises: a6c4e2b9d173
Create Date: 2026-11-25 18:30:00+00:00
"""

from collections.abc import Sequence

from alembic import op

revision: str = "c5d2e8a17f40"
down_revision: str | None = "a6c4e2b9d173"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# The context was trimmed when it was written: only breaks inside it change. Closed edges
# are history and keep the text they had.
NORMALISE = r"""
UPDATE edge SET context = replace(replace(context, E'\r\n', E'\n'), E'\r', E'\n')
WHERE valid_to IS NULL AND strpos(context, E'\r') > 0
"""


def upgrade() -> None:
    op.execute(NORMALISE)


def downgrade() -> None:
    pass
