"""What a purge erases besides the memory's row: everything that repeats what it said.

`memory_forget(purge=true)` promises that the text is gone (README, "Forgetting"), not only
the row that holds it. A memory's words live on in what memsys derived from them:
- its history: access log, validation events, recorded changes, and its own earlier
  versions (the closed copies an imported edit kept, the near-duplicates consolidation
  merged into it), followed down their own `supersedes` edges. A different memory it
  superseded (memory_check_supersedes) stays, and a live memory is never taken with it;
- its edges, from it and to it (the context a relation keeps may quote it), and the
  relations an episode drew from its sentences: an entity → entity edge loses the memory
  from its evidence, and goes when no other memory states it (one that stays loses its
  context sentence, which may be the purged memory's);
- its episode (`add_episode` keeps the text it was given) and that episode's links;
- the entities its text introduced (`concept#…` keys, named by extraction or by the
  episode's caller) that no edge refers to any more, live or closed. An entity made with
  `create_entities` or `fact_set` (`kg#…`) is the user's own and stays. The purge writes
  alone in the namespace (as an import does, for the milliseconds it takes), so no writer
  is naming such an entity while it looks;
- the event of a consolidation that kept it, which names the merge by its first words;
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

from memsys.models import Chunk, MemoryAccess, MemoryChange, ValidationEvent
from memsys.vocabulary import EDITED_COPY

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
# The memories' own earlier versions, and theirs in turn: the closed copies an imported edit
# kept (their edge says so) and the near-duplicates consolidation merged into them (its
# close is logged with the survivor's id). A statement memory_check_supersedes closed is
# another memory: it stays.
_VERSIONS = text(
    """
    WITH RECURSIVE down(id) AS (
        SELECT unnest(CAST(:ids AS text[]))
        UNION
        SELECT c.id FROM down d
        JOIN edge e ON e.namespace = :ns AND e.source_kind = 'chunk' AND e.source_id = d.id
                   AND e.relation = 'supersedes' AND e.target_kind = 'chunk'
        JOIN chunk c ON c.namespace = :ns AND c.id = e.target_id
                    AND c.doc_type = 'memory' AND c.valid_to IS NOT NULL
        WHERE e.context = :edited
           OR EXISTS (SELECT 1 FROM event v
                      WHERE v.subject_id = c.id AND v.namespace = :ns
                        AND v.event_type = 'delete' AND v.operation = 'consolidate'
                        AND v.payload ->> 'superseded_by' = e.source_id)
    )
    SELECT id FROM down WHERE id <> ALL(CAST(:ids AS text[]))
    """
)
# The chunks' edges either way (mentions, supersedes, memory_relate's, an observation's
# link): each direction through its own index.
_OWN_EDGES = [
    text(
        f"""
        DELETE FROM edge
        WHERE namespace = :ns AND {end}_kind = 'chunk' AND {end}_id = ANY(CAST(:ids AS text[]))
        RETURNING source_kind, source_id, target_kind, target_id
        """
    )
    for end in ("source", "target")
]
# Relations an episode drew from their text: a relation only these memories state goes;
# one another memory states too loses them from its evidence, and its sentence (it may be
# theirs). Two statements: one statement cannot both change and delete a row.
_DRAWN = [
    text(
        """
        DELETE FROM edge
        WHERE namespace = :ns AND source_kind = 'entity'
          AND evidence_chunk_ids && CAST(:ids AS text[])
          AND evidence_chunk_ids <@ CAST(:ids AS text[])
        RETURNING source_id, target_id
        """
    ),
    text(
        """
        UPDATE edge
        SET evidence_chunk_ids = ARRAY(
                SELECT x FROM unnest(evidence_chunk_ids) AS x
                WHERE x <> ALL(CAST(:ids AS text[]))),
            context = NULL
        WHERE namespace = :ns AND source_kind = 'entity'
          AND evidence_chunk_ids && CAST(:ids AS text[])
        RETURNING source_id, target_id
        """
    ),
]
_HOLD = text(
    """
    SELECT id FROM entity
    WHERE namespace = :ns AND id = ANY(CAST(:entities AS text[])) AND key LIKE 'concept#%'
    ORDER BY id FOR UPDATE
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
    """
)
# The episode event of a merge that kept one of them names it by its first words.
_MERGE_TITLES = text(
    """
    UPDATE event SET payload = payload - 'title'
    WHERE namespace = :ns AND event_type = 'episode' AND operation = 'consolidate'
      AND subject_id = ANY(CAST(:ids AS text[])) AND payload ? 'title'
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
    caller's to delete, after this; the closed versions they supersede go here)."""
    given = sorted(set(memory_ids))
    if not given:
        return
    versions = list(
        session.scalars(_VERSIONS, {"ns": namespace, "ids": given, "edited": EDITED_COPY})
    )
    ids = sorted({*given, *versions})
    for log in (ValidationEvent, MemoryChange, MemoryAccess):
        session.execute(delete(log).where(log.namespace == namespace, log.memory_id.in_(ids)))
    params = {"ns": namespace, "ids": ids}
    named = set(session.scalars(_EPISODES, params))
    for statement in _OWN_EDGES:
        for source_kind, source_id, target_kind, target_id in session.execute(statement, params):
            named |= {i for k, i in ((source_kind, source_id), (target_kind, target_id))
                      if k == "entity"}  # fmt: skip
    for statement in _DRAWN:
        for source_id, target_id in session.execute(statement, params):
            named |= {source_id, target_id}
    if named:
        entities = {"ns": namespace, "entities": sorted(named)}
        # The caller writes alone in the namespace (memories._close): no writer is naming
        # these now. A relate holding one of them (FOR SHARE) is waited for first, so that
        # the delete, a statement of its own, sees the edge it made.
        session.execute(_HOLD, entities)
        session.execute(_ORPHANS, entities)
    if versions:
        session.execute(delete(Chunk).where(Chunk.namespace == namespace, Chunk.id.in_(versions)))
    session.execute(_MERGE_TITLES, params)
    probes = [json.dumps([{"id": i}]) for i in ids]
    session.execute(_TRACES, {"ns": namespace, "probes": probes})
