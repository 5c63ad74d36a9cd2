"""Memories' line breaks as `\\n`.

What: live memories whose content holds `\\r` (text pasted from Windows, `\\r\\n`, or a bare
`\\r`) get it as `\\n`, and the content hash of that text. One whose text, so written, another
live memory of its namespace already holds (or a second such memory holding it too) is left
as it was: two live memories cannot hold one text.
Why: memory_store now stores `\\n` (memsys.schemas.memories.content_text), as a file reads
back. A memory stored before kept its `\\r\\n`: storing the same text again made a second
memory, and its vault file read back as an edit on every import.
Downgrade: nothing to undo (which breaks were `\\r\\n` is not kept).

Revision ID: b7e2c9d41f08
Revises: c3a91f5e7d20
Create Date: 2026-11-25 09:15:00+00:00
"""

from collections.abc import Sequence

from alembic import op

revision: str = "b7e2c9d41f08"
down_revision: str | None = "c3a91f5e7d20"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# The embedding and the full-text vector do not change (the model and the parser read `\r`
# as a space, as `\n`); the term statistics follow the content's update by their trigger.
NORMALISE = r"""
WITH fixed AS (
    SELECT namespace, id,
           btrim(replace(replace(content, E'\r\n', E'\n'), E'\r', E'\n'), E' \t\n') AS text
    FROM chunk
    WHERE doc_type = 'memory' AND valid_to IS NULL AND strpos(content, E'\r') > 0
), hashed AS (
    SELECT namespace, id, text, encode(sha256(convert_to(text, 'UTF8')), 'hex') AS digest
    FROM fixed
), first AS (
    SELECT DISTINCT ON (namespace, digest) namespace, id, text, digest
    FROM hashed
    ORDER BY namespace, digest, id
)
UPDATE chunk c SET content = f.text, content_hash = f.digest
FROM first f
WHERE c.namespace = f.namespace AND c.id = f.id AND f.text <> ''
  AND NOT EXISTS (
      SELECT 1 FROM chunk t
      WHERE t.namespace = f.namespace AND t.doc_type = 'memory' AND t.valid_to IS NULL
        AND t.content_hash = f.digest
  )
"""


def upgrade() -> None:
    op.execute(NORMALISE)


def downgrade() -> None:
    pass
