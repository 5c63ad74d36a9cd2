"""Cross-namespace log rows: a scoped token reads its own, never another caller's.

What: `memsys_can_log(ns)` — the row-level policy of the log tables (traces, events,
accesses, changes) — no longer lets a token's namespace patterns match the pseudo-namespaces
of cross-namespace rows: `*` (written by the local user, no token) and `*@<token id>`
(written by that token). A token reads and appends the rows of the namespaces its patterns
allow, and its own `*@<its id>` rows; a connection without a token reads them as its
`memsys.read` patterns allow (memsys's own connections carry `*`: all of them, as before).
Why: the patterns were matched against those pseudo-namespaces too. A token created with
`-n '*'` ("read everything") read every other caller's cross-namespace traces, and one with
`-n '*@*'`, which can read no namespace at all, read them as well — the query texts and the
memory text a `memory_query` trace keeps (README, "Scoped tokens": a token's cross-namespace
traces are its own).
Downgrade: the previous function.

Revision ID: d41c7a9e3b52
Revises: b7e2c9d41f08
Create Date: 2026-11-25 11:40:00+00:00
"""

from collections.abc import Sequence

from alembic import op

revision: str = "d41c7a9e3b52"
down_revision: str | None = "b7e2c9d41f08"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

UPGRADE = r"""
CREATE OR REPLACE FUNCTION memsys_can_log(ns text) RETURNS boolean
LANGUAGE sql STABLE PARALLEL SAFE AS
$$ SELECT CASE
       WHEN left(ns, 1) = '*' AND coalesce(current_setting('memsys.token', true), '') <> ''
       THEN ns = '*@' || current_setting('memsys.token', true)
       ELSE memsys_can_read(ns)
   END $$;
"""

DOWNGRADE = r"""
CREATE OR REPLACE FUNCTION memsys_can_log(ns text) RETURNS boolean
LANGUAGE sql STABLE PARALLEL SAFE AS
$$ SELECT memsys_can_read(ns)
          OR ns = '*@' || coalesce(nullif(current_setting('memsys.token', true), ''), '-') $$;
"""


def upgrade() -> None:
    op.execute(UPGRADE)


def downgrade() -> None:
    op.execute(DOWNGRADE)
