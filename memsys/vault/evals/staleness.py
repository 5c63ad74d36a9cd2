"""Staleness (S004 suite 4): live memories that mention a deprecated entity (one deleted
from the graph with delete_entities and not created again, or marked `deprecated` in its
metadata), matched by name as S004 does — below 10% of live memories. A planted probe
first checks that the detector finds a stale memory at all."""

from __future__ import annotations

from sqlalchemy import text
from sqlalchemy.orm import Session

from memsys.embeddings import get_embedder
from memsys.schemas import MemoryStoreIn
from memsys.services import memories
from memsys.vault.evals.base import Context, Figure, probe_namespace, ratio, scratch

THRESHOLD = 0.10

# A memory names things through its `mentions` edges to concept entities (memsys.services.
# mentions), never to the knowledge graph's own `kg#` entities; delete_entities closes the
# concept entity of the name it deletes too but keeps those mention edges. A deleted entity
# is found by its name, among entities closed and not made again (no live entity of that
# name: create_entities makes it again under its own key) or marked deprecated.
_STALE = text(
    """
    WITH gone AS (
        SELECT DISTINCT g.namespace, lower(g.name) AS name FROM entity g
        WHERE (g.metadata ->> 'deprecated' = 'true'
               OR (g.valid_to IS NOT NULL AND NOT EXISTS (
                   SELECT 1 FROM entity a
                   WHERE a.namespace = g.namespace AND lower(a.name) = lower(g.name)
                     AND a.valid_to IS NULL)))
          AND (CAST(:namespace AS text) IS NULL OR g.namespace = :namespace)
    )
    SELECT count(*) AS total,
           count(*) FILTER (WHERE EXISTS (
               SELECT 1 FROM edge e JOIN entity en
                 ON en.namespace = e.namespace AND en.id = e.target_id
               WHERE e.namespace = c.namespace AND e.source_kind = 'chunk'
                 AND e.source_id = c.id AND e.target_kind = 'entity'
                 AND e.relation = 'mentions' AND e.valid_to IS NULL
                 AND (en.metadata ->> 'deprecated' = 'true'
                      OR (en.namespace, lower(en.name)) IN (SELECT namespace, name FROM gone))
           )) AS stale
    FROM chunk c
    WHERE c.doc_type = 'memory' AND c.valid_to IS NULL
      AND (CAST(:namespace AS text) IS NULL OR c.namespace = :namespace)
    """
)
_DEPRECATE = text(
    """
    UPDATE entity SET metadata = metadata || '{"deprecated": true}'
    WHERE namespace = :namespace AND id IN (
        SELECT target_id FROM edge WHERE namespace = :namespace AND source_id = :id
          AND relation = 'mentions')
    """
)


def _detector_finds_planted() -> Figure:
    ns = probe_namespace("staleness")
    content = "Invoices are sent by the LegacyBilling service every night"
    with scratch() as s:
        params = MemoryStoreIn(content=content, memory_type="fact", namespace=ns)
        stored = memories.store(s, params, prepared=get_embedder().embed_one(content))
        s.execute(_DEPRECATE, {"namespace": ns, "id": stored.id})
        row = s.execute(_STALE, {"namespace": ns}).one()
    return Figure("planted stale memory detected", ratio(row.stale, 1), 1.0, detail="self-test")


def run(session: Session, ctx: Context) -> list[Figure]:
    row = session.execute(_STALE, {"namespace": ctx.namespace}).one()
    live = Figure(
        "memories referencing deprecated entities",
        ratio(row.stale, row.total),
        THRESHOLD,
        higher_is_better=False,
        detail=f"{row.stale}/{row.total}",
    )
    return [_detector_finds_planted(), live]
