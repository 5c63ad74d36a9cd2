"""Memories' and documents' text in Unicode's composed form (NFC).

What: live memories whose content is not in NFC (an accent stored as a letter and a
combining mark, as macOS file names and some keyboards give it) get it composed, and the
content hash of that text. One whose composed text another live memory of its namespace
already holds (or a second such memory holding it too) is left as it was: two live
memories cannot hold one text. So is an aged memory (archived, rehydratable): its row holds
a summary or a key, its content hash is its full text's, and its history finds that full
text by the exact summary the row holds (memsys.services.history.full_texts) — composing
the summary lost the full text for export and rehydration. Live document chunks not in NFC
get it composed too, with their content hash. Nothing happens on a server whose encoding is
not UTF-8 (PostgreSQL normalises only UTF-8 text).
Why: memory_store now stores NFC (memsys.schemas.memories.content_text), so that "café"
typed either way is one memory; indexing composes documents (memsys.chunking) and queries
are read composed (memsys.schemas.common.check_query). A memory stored before kept its
decomposed text: storing the same words again, composed, made a second memory; and a
document chunk stored decomposed no longer matched a query's words in full text.
Downgrade: nothing to undo (the text means the same; which form it came in is not kept).

Revision ID: a9d3f6b2c814
Revises: c5d2e8a17f40
Create Date: 2026-11-26 00:45:00+00:00
"""

from collections.abc import Sequence

from alembic import op

revision: str = "a9d3f6b2c814"
down_revision: str | None = "c5d2e8a17f40"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# The embedding does not change (the model's tokenizer decomposes and drops accents itself);
# the full-text vector is a generated column and the term statistics follow the content's
# update by their trigger. Closed versions are history and keep the text they had.
NORMALISE = r"""
DO $$
BEGIN
  IF current_setting('server_encoding') = 'UTF8' THEN
    WITH fixed AS (
        SELECT namespace, id, normalize(content, NFC) AS text
        FROM chunk
        WHERE doc_type = 'memory' AND valid_to IS NULL
          AND stage NOT IN ('archived', 'rehydratable') AND content IS NOT NFC NORMALIZED
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
    WHERE c.namespace = f.namespace AND c.id = f.id
      AND NOT EXISTS (
          SELECT 1 FROM chunk t
          WHERE t.namespace = f.namespace AND t.doc_type = 'memory' AND t.valid_to IS NULL
            AND t.content_hash = f.digest
      );
    UPDATE chunk
    SET content = normalize(content, NFC),
        content_hash = encode(sha256(convert_to(normalize(content, NFC), 'UTF8')), 'hex')
    WHERE doc_type = 'document' AND valid_to IS NULL AND content IS NOT NFC NORMALIZED;
  END IF;
END
$$
"""


def upgrade() -> None:
    op.execute(NORMALISE)


def downgrade() -> None:
    pass
