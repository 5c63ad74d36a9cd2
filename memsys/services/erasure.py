"""What a purge erases besides the memory's row: everything that repeats what it said.

`memory_forget(purge=true)` promises that the text is gone (README, "Forgetting"), not only
the row that holds it. A memory's words live on in what memsys derived from them:
- its history: access log, validation events, recorded changes;
- its edges, from it and to it (the context a relation keeps may quote it), and the
  relations an episode drew from its sentences (an entity → entity edge whose evidence is
  this memory, the sentence as its context);
- its episode (`add_episode` keeps the text it was given) and that episode's links;
- the entities its text introduced (`concept#…` keys, named by extraction or by the
  episode's caller) that nothing else refers to any more: no edge from or to them, live or
  closed, and no fact about them. An entity made with `create_entities` (`kg#…`) is the
  user's own and stays;
- the answers memsys handed out that quoted it: a `memory_query` trace keeps its assembled
  text (`output.text`); a trace that handed out a purged memory keeps its ids and scores
  (the debugger's record) but loses that text.

Under a scoped token the row-level policies apply to all of it: traces written under a
namespace the token may not write (another caller's cross-namespace traces) keep their
text; an operator's purge clears them.

A purge records that it happened, never what the memory said (memsys.services.memories).
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from sqlalchemy import delete, text
from sqlalchemy.orm import Session

from memsys.models import MemoryAccess, MemoryChange, ValidationEvent

_EPISODES = text(
    """
    WITH gone AS (
        DELETE FROM episode WHERE namespace = :ns AND memory_id = ANY(CAST(:ids AS text[]))
        RETURNING id
    ), links AS (
        DELETE FROM edge e USING gone g
        WHERE e.namespace = :ns AND e.source_kind = 'episode' AND e.source_id = g.id
        RETURNING e.target_id
    )
    SELECT target_id FROM links
    """
)
# The chunks' edges either way (mentions, supersedes, memory_relate's, an observation's
# link), and relations drawn from their text.
_EDGES = text(
    """
    DELETE FROM edge
    WHERE namespace = :ns
      AND ((source_kind = 'chunk' AND source_id = ANY(CAST(:ids AS text[])))
           OR (target_kind = 'chunk' AND target_id = ANY(CAST(:ids AS text[])))
           OR (source_kind = 'entity' AND evidence_chunk_ids && CAST(:ids AS text[])))
    RETURNING source_kind, source_id, target_kind, target_id
    """
)
_ORPHANS = text(
    """
    DELETE FROM entity e
    WHERE e.namespace = :ns AND e.id = ANY(CAST(:entities AS text[]))
      AND e.key LIKE 'concept#%'
      AND NOT EXISTS (SELECT 1 FROM edge x WHERE x.namespace = :ns AND x.source_id = e.id
                      AND x.source_kind = 'entity')
      AND NOT EXISTS (SELECT 1 FROM edge x WHERE x.namespace = :ns AND x.target_id = e.id
                      AND x.target_kind = 'entity')
      AND NOT EXISTS (SELECT 1 FROM fact f WHERE f.namespace = :ns AND f.entity_id = e.id)
    """
)
_TRACES = text(
    """
    UPDATE query_trace
    SET output = jsonb_set(output, '{text}', 'null') || '{"erased": "it quoted a purged memory"}'
    WHERE (namespace = :ns OR namespace = '*' OR namespace LIKE '*@%')
      AND output ? 'text' AND jsonb_typeof(output -> 'text') = 'string'
      AND retrieved @> ANY(CAST(:probes AS jsonb[]))
    """
)


def erase(session: Session, namespace: str, memory_ids: Sequence[str]) -> None:
    """Erase what repeats the text of these memories of one namespace (their rows are the
    caller's to delete, after this)."""
    ids = sorted(set(memory_ids))
    if not ids:
        return
    for log in (ValidationEvent, MemoryChange, MemoryAccess):
        session.execute(delete(log).where(log.namespace == namespace, log.memory_id.in_(ids)))
    params = {"ns": namespace, "ids": ids}
    named = set(session.scalars(_EPISODES, params))
    for source_kind, source_id, target_kind, target_id in session.execute(_EDGES, params):
        if target_kind == "entity":
            named.add(target_id)
        if source_kind == "entity":
            named.add(source_id)
    if named:
        session.execute(_ORPHANS, {"ns": namespace, "entities": sorted(named)})
    probes = [json.dumps([{"id": i}]) for i in ids]
    session.execute(_TRACES, {"ns": namespace, "probes": probes})
