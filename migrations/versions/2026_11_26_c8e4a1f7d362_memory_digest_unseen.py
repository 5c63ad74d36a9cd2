"""Memories and document chunks stored before dedup read unseen differences away get the
content hash dedup computes now; graph names stored before get the name read now.

What: a live memory whose text holds a space separator other than a space (no-break, narrow
no-break, ideographic, …: Unicode's Zs) or a character that changes nothing a reader sees
(zero-width space, word joiner, BOM, soft hyphen) gets the hash of its text with those read
as a space / as nothing — today's digest (memsys.ids.content_hash), inlined below. Only a row
whose hash is verifiably the old digest of that text (the SHA-256 of the text as stored) is
changed. An aged memory (archived, rehydratable) holds a summary or a key, and its hash is
that of its full text: the full text is found in its history (a content change's old value
whose SHA-256 is the row's hash) and the row gets that text's new digest; its content stays.
Two live memories of a namespace cannot hold one digest (a unique index): one whose new
digest another live memory already holds (the same words stored again since, without the
unseen character), or a second old row reading the same, keeps its old hash — as the NFC
upgrade (a9d3f6b2c814) left such rows. Both are live memories a user stored, with their own
ids, history, accesses and relations: folding one into the other (closing it) is a choice
about what to forget, the user's (memory_forget), not an upgrade's. Such a row is still
found by its exact text (memsys.ids.content_hashes asks for the old digest too). Live
document chunks holding such characters get the new digest as well (no index ties them).
Closed versions are history and keep theirs. The graph's names are read the same way now
(memsys.schemas.graph._name): a live entity of the memory server whose name holds such a
character gets the name read so (composed, stripped) and the key it gives, unless another
live entity holds that key, a second old one reads the same (the first made keeps it) or the
name reads as nothing; fact attributes and relation types get theirs, every version, unless
their entity (their two ends) has one reading the same. Nothing happens on a server whose
encoding is not UTF-8 (the characters are not read there as memsys reads them).
Why: dedup now reads those differences away (memsys.ids.content_hash), but rows stored
before kept the digest of their text as given: storing "ab" while a memory held
"a<zero-width space>b" made a second memory, and a store of that text (its turn: the new
digest) and a forget of that row (its turn: the row's hash) took different turns, so they
did not queue behind each other. An entity named "Alice<no-break space>Smith" before was
found by no name a caller can send (every name given is read folded): delete_entities,
add_observations and create_relations could not reach it, and the name sent again made a
second entity.
Downgrade: nothing to undo (the code of the revision before computes the same digest).

Revision ID: c8e4a1f7d362
Revises: b2e7d4c9f315
Create Date: 2026-11-26 05:40:00+00:00
"""

from collections.abc import Sequence

from alembic import op

revision: str = "c8e4a1f7d362"
down_revision: str | None = "b2e7d4c9f315"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Today's digest's reading, fixed here as it was when this revision was written: these read
# as a space (Unicode's Zs other than the space itself) ...
_AS_SPACE = (
    0x00A0,
    0x1680,
    *range(0x2000, 0x200B),
    0x202F,
    0x205F,
    0x3000,
)
# ... and these as nothing (zero-width space, word joiner, BOM, soft hyphen).
_AS_NOTHING = (0x200B, 0x2060, 0xFEFF, 0x00AD)

# translate(text, FROM, TO): a character of FROM past TO's length is deleted. FROM is made by
# chr() when the statement runs, not written as E'\\u…' escapes: PostgreSQL reads those when
# it parses the block, before the encoding check, and a server whose encoding lacks one of
# the characters (LATIN1 has no U+1680) refused the whole upgrade.
_FROM = " || ".join(f"chr({c})" for c in (*_AS_SPACE, *_AS_NOTHING))
_TO = " " * len(_AS_SPACE)
_READ = f"translate({{text}}, {_FROM}, '{_TO}')"
_DIGEST = "encode(sha256(convert_to({text}, 'UTF8')), 'hex')"
_OLD = "(m.old_value #>> '{}')"  # a content change's old text


# What str.strip() (memsys.schemas.graph._name) strips from a name once it is read so.
_STRIP = " || ".join(
    f"chr({c})" for c in (0x09, 0x0A, 0x0B, 0x0C, 0x0D, 0x1C, 0x1D, 0x1E, 0x1F, 0x20, 0x85)
)
_STRIP += " || chr(8232) || chr(8233)"


def _read(expr: str) -> str:
    return _READ.format(text=expr)


def _name(expr: str) -> str:
    """A graph name as memsys.schemas.graph._name reads it now: unseen characters read
    away, composed (NFC), stripped."""
    return f"btrim(normalize({_read(expr)}, NFC), {_STRIP})"


def _digest(expr: str) -> str:
    return _DIGEST.format(text=expr)


REHASH = f"""
DO $$
BEGIN
  IF current_setting('server_encoding') = 'UTF8' THEN
    WITH given AS (
        -- the text each live memory's hash was made of: its own, or an aged one's full text
        SELECT c.namespace, c.id, c.content AS text
        FROM chunk c
        WHERE c.doc_type = 'memory' AND c.valid_to IS NULL
          AND {_read("c.content")} <> c.content
          AND c.content_hash = {_digest("c.content")}
        UNION
        SELECT c.namespace, c.id, {_OLD}
        FROM chunk c
        JOIN memory_change m
          ON m.namespace = c.namespace AND m.memory_id = c.id AND m.field = 'content'
        WHERE c.doc_type = 'memory' AND c.valid_to IS NULL
          AND c.stage IN ('archived', 'rehydratable')
          AND jsonb_typeof(m.old_value) = 'string'
          AND {_read(_OLD)} <> {_OLD}
          AND c.content_hash = {_digest(_OLD)}
    ), hashed AS (
        SELECT namespace, id, {_digest(_read("text"))} AS digest FROM given
    ), first AS (
        SELECT DISTINCT ON (namespace, digest) namespace, id, digest
        FROM hashed
        ORDER BY namespace, digest, id
    )
    UPDATE chunk c SET content_hash = f.digest
    FROM first f
    WHERE c.namespace = f.namespace AND c.id = f.id
      AND NOT EXISTS (
          SELECT 1 FROM chunk t
          WHERE t.namespace = f.namespace AND t.doc_type = 'memory' AND t.valid_to IS NULL
            AND t.content_hash = f.digest
      );
    UPDATE chunk
    SET content_hash = {_digest(_read("content"))}
    WHERE doc_type = 'document' AND valid_to IS NULL
      AND {_read("content")} <> content
      AND content_hash = {_digest("content")};

    -- The graph's names (memsys.schemas.graph._name reads them so now): a live entity of
    -- the memory server (kg#<name>) gets its name read so and the key it gives, unless
    -- another live entity holds that key or a second old one reads the same (the first
    -- made keeps it), or the name reads as nothing.
    WITH fixed AS (
        SELECT namespace, id, created_at, {_name("name")} AS name
        FROM entity
        WHERE valid_to IS NULL AND key LIKE 'kg#%' AND key = 'kg#' || name
          AND {_read("name")} <> name
    ), first AS (
        SELECT DISTINCT ON (namespace, name) namespace, id, name
        FROM fixed
        WHERE name <> ''
        ORDER BY namespace, name, created_at, id
    )
    UPDATE entity e SET name = f.name, key = 'kg#' || f.name
    FROM first f
    WHERE e.namespace = f.namespace AND e.id = f.id
      AND NOT EXISTS (
          SELECT 1 FROM entity t
          WHERE t.namespace = f.namespace AND t.valid_to IS NULL AND t.key = 'kg#' || f.name
      );
    -- Fact attributes and relation types, every version (their history is read by that
    -- name), unless their entity (their two ends) has one reading the same already.
    UPDATE fact f SET attribute = {_name("f.attribute")}
    WHERE f.attribute IS NOT NULL AND {_read("f.attribute")} <> f.attribute
      AND {_name("f.attribute")} <> ''
      AND NOT EXISTS (
          SELECT 1 FROM fact t
          WHERE t.namespace = f.namespace AND t.entity_id IS NOT DISTINCT FROM f.entity_id
            AND t.attribute <> f.attribute
            AND {_name("t.attribute")} = {_name("f.attribute")}
      );
    UPDATE edge e SET relation = {_name("e.relation")}
    WHERE {_read("e.relation")} <> e.relation AND {_name("e.relation")} <> ''
      AND NOT EXISTS (
          SELECT 1 FROM edge t
          WHERE t.namespace = e.namespace AND t.source_id = e.source_id
            AND t.target_id = e.target_id AND t.relation <> e.relation
            AND {_name("t.relation")} = {_name("e.relation")}
      );
  END IF;
END
$$
"""


def upgrade() -> None:
    op.execute(REHASH)


def downgrade() -> None:
    pass
