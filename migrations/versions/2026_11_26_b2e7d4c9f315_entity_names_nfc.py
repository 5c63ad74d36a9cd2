"""Entity names, fact attributes and relation types in Unicode's composed form (NFC).

What: live entities whose name is not in NFC (an accent stored as a letter and a combining
mark) get it composed, with the key that name gives: the knowledge graph's `kg#<name>`, and
the extractor's `concept#<normalised name>` (lowercase, other than letters, digits, spaces,
dots and hyphens a space, spaces squeezed, as memsys.extraction.normalise has it). A
concept's new key is written only when it is the old one with the accents composed (the
server reads letters as memsys does); else the row is left. One whose composed key another
live entity of its namespace already holds (or a second row composing to it too) is left as
it was: two live entities cannot hold one key, and merging two entities' observations,
relations and facts is the user's call (delete_entities the decomposed one, or keep both).
Fact attributes and relation types are composed the same way, every version of them (a
fact's history and an edge's are read by that name); one whose composed name another
attribute of its entity (or relation between its two ends) has or would get is left.
Nothing happens on a server whose encoding is not UTF-8.
Why: entity, fact and relation names are now read composed (memsys.schemas.graph._name), as
memories, queries and document chunks are (a9d3f6b2c814): "Café" typed with a combining
accent is the entity typed with an "é". An entity stored before kept its decomposed name: no
name a caller sends finds it any more, and the same name sent again made a second entity.
Downgrade: nothing to undo (the name means the same; which form it came in is not kept).

Revision ID: b2e7d4c9f315
Revises: a9d3f6b2c814
Create Date: 2026-11-26 03:15:00+00:00
"""

from collections.abc import Sequence

from alembic import op

revision: str = "b2e7d4c9f315"
down_revision: str | None = "a9d3f6b2c814"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Closed entities are history and keep the name they had. `concept_key` is the extractor's
# normalisation in SQL; the check that the old key is the new one decomposed (combining marks
# read as spaces, as the extractor read them) keeps a row whose letters the server classes
# otherwise than Python does as it was.
NORMALISE = r"""
DO $$
BEGIN
  IF current_setting('server_encoding') = 'UTF8' THEN
    WITH fixed AS (
        SELECT namespace, id, created_at, normalize(name, NFC) AS name
        FROM entity
        WHERE valid_to IS NULL AND key LIKE 'kg#%' AND name IS NOT NFC NORMALIZED
          AND key = 'kg#' || name
    ), first AS (
        SELECT DISTINCT ON (namespace, name) namespace, id, name
        FROM fixed
        ORDER BY namespace, name, created_at, id
    )
    UPDATE entity e SET name = f.name, key = 'kg#' || f.name
    FROM first f
    WHERE e.namespace = f.namespace AND e.id = f.id
      AND NOT EXISTS (
          SELECT 1 FROM entity t
          WHERE t.namespace = f.namespace AND t.valid_to IS NULL AND t.key = 'kg#' || f.name
      );

    WITH fixed AS (
        SELECT namespace, id, created_at, key AS old_key, normalize(name, NFC) AS name
        FROM entity
        WHERE valid_to IS NULL AND key LIKE 'concept#%' AND name IS NOT NFC NORMALIZED
    ), keyed AS (
        SELECT *, 'concept#' || btrim(regexp_replace(
                   regexp_replace(lower(name), '[^\w\s.\-]', ' ', 'g'), '\s+', ' ', 'g'))
               AS new_key
        FROM fixed
    ), checked AS (
        SELECT * FROM keyed
        WHERE old_key = 'concept#' || btrim(regexp_replace(regexp_replace(
                  normalize(substr(new_key, 9), NFD), '[^\w\s.\-]', ' ', 'g'), '\s+', ' ', 'g'))
    ), first AS (
        SELECT DISTINCT ON (namespace, new_key) namespace, id, name, new_key
        FROM checked
        ORDER BY namespace, new_key, created_at, id
    )
    UPDATE entity e SET name = f.name, key = f.new_key
    FROM first f
    WHERE e.namespace = f.namespace AND e.id = f.id
      AND NOT EXISTS (
          SELECT 1 FROM entity t
          WHERE t.namespace = f.namespace AND t.valid_to IS NULL AND t.key = f.new_key
            AND t.id <> f.id
      );

    -- Fact attributes and relation types, history included (a lookup reads every version by
    -- the attribute): a chain whose composed name another one of its entity (or of its two
    -- ends) already has, or would get too, is left as it was.
    UPDATE fact f SET attribute = normalize(f.attribute, NFC)
    WHERE f.attribute IS NOT NULL AND f.attribute IS NOT NFC NORMALIZED
      AND NOT EXISTS (
          SELECT 1 FROM fact t
          WHERE t.namespace = f.namespace AND t.entity_id IS NOT DISTINCT FROM f.entity_id
            AND t.attribute <> f.attribute
            AND normalize(t.attribute, NFC) = normalize(f.attribute, NFC)
      );
    UPDATE edge e SET relation = normalize(e.relation, NFC)
    WHERE e.relation IS NOT NFC NORMALIZED
      AND NOT EXISTS (
          SELECT 1 FROM edge t
          WHERE t.namespace = e.namespace AND t.source_id = e.source_id
            AND t.target_id = e.target_id AND t.relation <> e.relation
            AND normalize(t.relation, NFC) = normalize(e.relation, NFC)
      );
  END IF;
END
$$
"""


def upgrade() -> None:
    op.execute(NORMALISE)


def downgrade() -> None:
    pass
