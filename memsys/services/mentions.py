"""Links every chunk to the entities it mentions, at write time, in the writer's transaction.

Shape (what memsys/retrieval/graph.py walks): an `entity` row per distinct name in a
namespace (key `concept#<normalised name>`, type `concept`), and an `edge` per mention:
source_kind 'chunk' → target_kind 'entity', relation 'mentions', weight 1 — or
`SUBJECT_WEIGHT` for the name the chunk opens with (its subject: an entry's title, a note's
heading, a turn's speaker; `extraction.subject`), which graph retrieval follows when another
chunk mentions that name. Entities are
upserted by their stable key (the partial unique index on live keys), so concurrent writers
converge on one row. Work per write is proportional to the chunk, never to the corpus.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import text
from sqlalchemy.orm import Session

from memsys import extraction, ids
from memsys.db import in_one_trip

MENTIONS = "mentions"
RESOLVE_TRIES = 5  # a name deleted again each time it is made: its mention is left out
SUBJECT_WEIGHT = 4.0

_UPSERT = text(
    """
    INSERT INTO entity (namespace, id, key, name, entity_type)
    SELECT :namespace, e.id, e.key, e.name, 'concept'
    FROM unnest(CAST(:ids AS text[]), CAST(:keys AS text[]), CAST(:names AS text[]))
         AS e(id, key, name)
    ORDER BY e.key
    ON CONFLICT (namespace, key) WHERE valid_to IS NULL DO NOTHING
    """
)
# Held (a share lock, in key order) until the writer commits, as upsert_entity holds the
# memory server's entities: a delete_entities of the name (FOR UPDATE, the same order)
# waits for this writer and closes the edges it hangs on the entity, or this one waits for
# the delete and finds the entity gone (then upsert makes it again).
_RESOLVE = text(
    """
    SELECT key, id FROM entity
    WHERE namespace = :namespace AND valid_to IS NULL AND key = ANY(CAST(:keys AS text[]))
    ORDER BY key
    FOR SHARE
    """
)
# The mention edges of (chunk_id, entity_id, weight) arrays; `{join}` may narrow them to
# chunks a statement has just written (memory_batch writes rows, edges and events at once).
EDGE_INSERT = """
    INSERT INTO edge (namespace, source_kind, source_id, target_kind, target_id, relation,
                      weight)
    SELECT :namespace, 'chunk', m.chunk_id, 'entity', m.entity_id, 'mentions', m.weight
    FROM unnest(CAST(:chunk_ids AS text[]), CAST(:entity_ids AS text[]),
                CAST(:weights AS float8[])) AS m(chunk_id, entity_id, weight) {join}
"""
_EDGES = text(EDGE_INSERT.format(join=""))


def edge_params(pairs: Sequence[tuple[str, str, float]]) -> dict[str, list[Any]]:
    """EDGE_INSERT's arrays for (chunk_id, entity_id, weight) triples."""
    return {
        "chunk_ids": [p[0] for p in pairs],
        "entity_ids": [p[1] for p in pairs],
        "weights": [p[2] for p in pairs],
    }


def upsert(session: Session, namespace: str, names: dict[str, str]) -> dict[str, str]:
    """Concept entities by stable key (key → display name), created if missing; key → id.
    The caller holds its share of the namespace's write turn (namespaces.ensure): a purge,
    which writes alone, never removes an entity a writer is naming; and the entities found
    are held until it commits (_RESOLVE), so a delete_entities of one waits for it."""
    found: dict[str, str] = {}
    keys = sorted(names)
    for _ in range(RESOLVE_TRIES):
        if not keys:
            break
        new = {
            "namespace": namespace,
            "ids": [ids.new_id(ids.ENTITY) for _ in keys],
            "keys": keys,
            "names": [names[k] for k in keys],
        }
        # Two statements (the read sees an entity a concurrent writer committed while the
        # upsert waited for it), one round trip.
        _, resolved = in_one_trip(
            session, (_UPSERT, new), (_RESOLVE, {"namespace": namespace, "keys": keys})
        )
        found.update((row.key, row.id) for row in resolved)
        # A key not found was deleted between the two statements: the name is free again.
        keys = [k for k in keys if k not in found]
    return found


def resolve(
    session: Session, namespace: str, chunks: Sequence[tuple[str, str]]
) -> list[tuple[str, str, float]]:
    """The mentions in (chunk_id, text) pairs of one namespace as (chunk_id, entity_id,
    weight), their entities created where missing. The chunks need not be written yet."""
    per_chunk = [(chunk_id, extraction.extract(body)) for chunk_id, body in chunks]
    subjects = {chunk_id: extraction.subject(body) for chunk_id, body in chunks}
    names: dict[str, str] = {}
    for _, mentions in per_chunk:
        for m in mentions:
            names.setdefault(m.key, m.name)
    if not names:
        return []
    resolved = upsert(session, namespace, names)
    return [
        (cid, resolved[m.key], SUBJECT_WEIGHT if m.key == subjects[cid] else 1.0)
        for cid, ms in per_chunk
        for m in ms
        if m.key in resolved
    ]


def link(session: Session, namespace: str, chunks: Sequence[tuple[str, str]]) -> int:
    """Extract mentions from (chunk_id, text) pairs of one namespace; returns edges written."""
    pairs = resolve(session, namespace, chunks)
    if pairs:
        session.execute(_EDGES, {"namespace": namespace, **edge_params(pairs)})
    return len(pairs)
