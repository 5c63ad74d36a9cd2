"""S002 episodes (`link`, add_episode): a piece of text or JSON with a reference time. It is
kept as a memory (searchable; its mentions linked like any memory), its entities are upserted
by stable key (`concept#…`, shared with the mentions graph) and linked from the episode, and the
relations its sentences state (memsys.relation_extraction, or the optional LLM extractor of
memsys.llm_extraction when MEMSYS_EXTRACTOR_URL is set) become entity → entity edges valid
from the reference time, with the sentence as their fact and the memory as evidence.
"""

from __future__ import annotations

from datetime import UTC, datetime
from itertools import pairwise

import numpy as np
from sqlalchemy import text
from sqlalchemy.orm import Session

from memsys import extraction, ids, llm_extraction, relation_extraction
from memsys.config import get_settings
from memsys.embeddings import get_embedder
from memsys.models import Episode
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
    named = [extraction.Mention(extraction.key_for(n), n) for n in params.entity_names or []]
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
    relations = [(f.source, f.target, f.relation, f.sentence) for f in stated]
    # S002 link: ENTITY1, ENTITY2 and CONTEXT — the named ones are related in the given order.
    for a, b in pairwise(named):
        if not any({r[0].key, r[1].key} == {a.key, b.key} for r in relations):
            relation = relation_extraction.relation_between(body)
            relations.append((a, b, relation, body))
    out: list[EpisodeRelation] = []
    for source, target, relation, fact in relations:
        knowledge.relate_entities(
            session,
            ns,
            resolved[source.key],
            resolved[target.key],
            relation,
            context=fact,
            valid_from=at,
            evidence=[memory.id],
        )
        out.append(
            EpisodeRelation(
                source=wanted[source.key],
                target=wanted[target.key],
                relation_type=relation,
                fact=fact,
            )
        )
    events.record(
        session,
        namespace=ns,
        event_type="create",
        operation="add_episode",
        subject_kind=EPISODE,
        subject_id=episode_id,
        payload={"entities": len(resolved), "relations": len(out)},
    )
    return AddEpisodeOut(
        episode_id=episode_id,
        memory_id=memory.id,
        entities_extracted=len(resolved),
        relations_extracted=len(out),
        extractor="rules" if by_model is None else "llm",
        entities=[wanted[k] for k in sorted(resolved, key=list(wanted).index)],
        relations=out,
    )
