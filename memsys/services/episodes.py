"""S002 episodes (`link`, add_episode): a piece of text or JSON with a reference time. It is
kept as a memory (searchable; its mentions linked like any memory), its entities are upserted
by stable key (`concept#…`, shared with the mentions graph) and linked from the episode, and the
relations its sentences state (memsys.relation_extraction, or the optional LLM extractor of
memsys.llm_extraction when MEMSYS_EXTRACTOR_URL is set) become entity → entity edges valid
from the reference time, with the sentence as their fact and the memory as evidence. A
relation the episode denies ("auth.ts no longer depends on token.ts", "uses B instead of C")
closes the live edge of that triple at the reference time (`valid_to`; `expired_at` now), so
reads as of an earlier time still see it; an edge that began after the reference time is left
alone (an older statement does not undo a newer one). Nor does an older statement undo a
newer denial: a relation stated at a time a closed edge already covers writes nothing, and one
stated before the triple's known periods (closed or live) gets an edge that ends where the next
one begins.
"""

from __future__ import annotations

from datetime import UTC, datetime
from itertools import pairwise

import numpy as np
from sqlalchemy import func, or_, select, text, update
from sqlalchemy.orm import Session

from memsys import extraction, ids, llm_extraction, relation_extraction, secretscan
from memsys.config import get_settings
from memsys.db import rowcount, take_turns
from memsys.embeddings import get_embedder
from memsys.models import Edge, Episode
from memsys.runner import before_transaction
from memsys.schemas import MemoryStoreIn
from memsys.schemas.temporal import AddEpisodeIn, AddEpisodeOut, EpisodeRelation
from memsys.services import events, knowledge, memories, mentions, namespaces

EPISODE = "episode"
_LINK = text(
    """
    INSERT INTO edge (namespace, source_kind, source_id, target_kind, target_id, relation,
                      valid_from)
    SELECT :ns, 'episode', :episode, 'entity', t.id, 'mentions', :at
    FROM unnest(CAST(:targets AS text[])) AS t(id)
    """
)


Extracted = tuple[list[extraction.Mention], list[relation_extraction.Found]]


def _close(session: Session, ns: str, source: str, target: str, relation: str, at: datetime) -> int:
    """Close the live entity edge of one triple that was valid at `at`; how many closed."""
    take_turns(session, ns, source, target, relation)  # as relate_entities: one writer a triple
    return rowcount(
        session,
        update(Edge)
        .where(
            Edge.namespace == ns,
            Edge.source_kind == "entity",
            Edge.source_id == source,
            Edge.target_id == target,
            Edge.relation == relation,
            Edge.valid_to.is_(None),
            Edge.valid_from <= at,
        )
        .values(valid_to=at, expired_at=func.now()),
    )


def _until(
    session: Session, ns: str, source: str, target: str, relation: str, at: datetime
) -> tuple[bool, datetime | None]:
    """An episode stating a relation at `at`, older than what the graph knows of it: whether
    a closed edge already holds it then (nothing to write), else when the next known period
    of the triple begins, closed or live (the new edge ends there, so a later denial stays
    the last word, and the live edge keeps its start). (False, None) when no period begins
    after `at`: the usual live edge."""
    take_turns(session, ns, source, target, relation)  # as relate_entities: one writer a triple
    later = session.execute(
        select(Edge.valid_from, Edge.valid_to).where(
            Edge.namespace == ns,
            Edge.source_kind == "entity",
            Edge.source_id == source,
            Edge.target_kind == "entity",
            Edge.target_id == target,
            Edge.relation == relation,
            or_(Edge.valid_to.is_(None), Edge.valid_to > at),
        )
    ).all()
    if any(start <= at and end is not None for start, end in later):
        return True, None
    return False, min((start for start, _ in later if start > at), default=None)


def _prepare(params: AddEpisodeIn) -> tuple[np.ndarray, Extracted | None]:
    """Before the transaction: the embedding, and the LLM extractor's answer if one is set."""
    body = relation_extraction.readable(params.content)
    return get_embedder().embed_one(body), llm_extraction.extract(body)


@before_transaction(_prepare)
def add_episode(
    session: Session,
    params: AddEpisodeIn,
    prepared: tuple[np.ndarray, Extracted | None] | None = None,
) -> AddEpisodeOut:
    """Store the episode, extract its entities and relations, link them."""
    ns = params.namespace or get_settings().graph_namespace
    at = params.reference_time or datetime.now(UTC)
    body = relation_extraction.readable(params.content)
    vector, by_model = prepared if prepared is not None else _prepare(params)
    namespaces.ensure(session, ns)
    memory = memories.store(
        session,
        MemoryStoreIn(
            content=body,
            memory_type="fact",
            namespace=ns,
            metadata={EPISODE: True, "source": params.source_description or ""},
        ),
        prepared=vector,
    )
    found, stated = by_model or relation_extraction.extract(body)
    given: dict[str, str] = {}
    for name in params.entity_names or []:
        given.setdefault(extraction.key_for(name), name)  # each entity once, as first named
    named = [extraction.Mention(key, name) for key, name in given.items()]
    wanted = {m.key: m.name for m in [*found, *named]}
    resolved = mentions.upsert(session, ns, wanted) if wanted else {}
    episode_id = ids.new_id("ep")
    session.add(
        Episode(
            namespace=ns,
            id=episode_id,
            content=params.content,
            source_description=params.source_description,
            memory_id=memory.id,
            reference_time=at,
        )
    )
    session.flush()
    session.execute(
        _LINK,
        {"ns": ns, "episode": episode_id, "targets": sorted(set(resolved.values())), "at": at},
    )
    relations = [(f.source, f.target, f.relation, f.sentence, f.negated) for f in stated]
    # S002 link: ENTITY1, ENTITY2 and CONTEXT — the named ones are related in the given order.
    for a, b in pairwise(named):
        if not any({r[0].key, r[1].key} == {a.key, b.key} for r in relations):
            relation = relation_extraction.relation_between(body)
            relations.append((a, b, relation, body, False))
    out: list[EpisodeRelation] = []
    closed: list[EpisodeRelation] = []
    for source, target, relation, fact, negated in relations:
        source_id, target_id = resolved[source.key], resolved[target.key]
        said = EpisodeRelation(
            source=wanted[source.key], target=wanted[target.key], relation_type=relation, fact=fact
        )
        if negated:
            if _close(session, ns, source_id, target_id, relation, at):
                closed.append(said)
            continue
        held, until = _until(session, ns, source_id, target_id, relation, at)
        if not held:
            knowledge.relate_entities(
                session, ns, source_id, target_id, relation,
                context=fact, valid_from=at, evidence=[memory.id], valid_to=until,
            )  # fmt: skip
        out.append(said)
    events.record(
        session,
        namespace=ns,
        event_type="create",
        operation="add_episode",
        subject_kind=EPISODE,
        subject_id=episode_id,
        payload={"entities": len(resolved), "relations": len(out), "closed": len(closed)},
    )
    return AddEpisodeOut(
        episode_id=episode_id,
        memory_id=memory.id,
        entities_extracted=len(resolved),
        relations_extracted=len(out),
        extractor="rules" if by_model is None else "llm",
        entities=[wanted[k] for k in sorted(resolved, key=list(wanted).index)],
        relations=out,
        relations_closed=closed,
        warnings=secretscan.warnings(params.content),
    )
