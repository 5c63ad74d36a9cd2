"""Consolidation (FEATURES E7): near-duplicate memories merged into one.

Two live memories of one namespace and one type whose embeddings are at least
DUPLICATE_SIMILARITY apart in cosine are the same memory said twice. The survivor is the
one with the most earned standing (golden or pinned first, then one that is no session
scratch, then confidence, accesses, age); each other one gets a `supersedes` edge from the
survivor and is closed (history kept, so replay still sees it; the survivor takes its tags,
the metadata keys it lacks, its importance if higher and its relations), and one `episode`
event records the merge — REFLECTION.md's consolidation history and the daily episode log
read those.
Golden rules, pinned memories, ground truth and a knowledge-graph entity's observations are
never merged away (they can survive a merge). Two memories that contradict each other by
memory_check_supersedes' rules ("auth.ts depends on token.ts" / "auth.ts no longer depends
on token.ts": a correction, as alike in meaning as a repeat) are
not the same memory and are never merged: a merge could keep the stale one.

Work is incremental: each run looks at memories created since the previous run's watermark
(an event), oldest first, so a run cut short by its time budget resumes where it stopped
and a second run finds nothing new.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from sqlalchemy import exists, select, text, tuple_, update
from sqlalchemy.orm import Session
from sqlalchemy.orm.attributes import set_committed_value

from memsys import contradiction
from memsys.models import Chunk, Event
from memsys.models.chunk import AGED
from memsys.schemas.edges import MemoryRelateIn
from memsys.schemas.memories import MAX_METADATA_BYTES, MAX_TAGS
from memsys.services import decay, edges, events, history, observation_links

DUPLICATE_SIMILARITY = 0.95
NEIGHBOURS = 5
WATERMARK = "consolidate"


def watermark(session: Session, namespace: str | None = None) -> tuple[datetime, str] | None:
    """(creation time, id) up to which memories have been looked at by an earlier run: a run
    over every namespace, or one over `namespace` alone, whichever went further. A run over
    one namespace moves only its own mark, so it never carries another namespace's memories
    past the mark of the runs over all of them."""
    scopes = ["*"] if namespace is None else ["*", namespace]
    marks = [m for m in (_mark(session, s) for s in scopes) if m is not None]
    return max(marks) if marks else None


def _mark(session: Session, scope: str) -> tuple[datetime, str] | None:
    payload = session.scalar(
        select(Event.payload)
        .where(
            Event.event_type == "maintenance",
            Event.operation == WATERMARK,
            Event.namespace == scope,
        )
        .order_by(Event.occurred_at.desc(), Event.id.desc())
        .limit(1)
    )
    if not payload or "upto" not in payload:
        return None
    return datetime.fromisoformat(payload["upto"]), str(payload["upto_id"])


def candidates(
    session: Session, since: tuple[datetime, str] | None, namespace: str | None, size: int
) -> tuple[list[Chunk], bool]:
    """The next memories after `since`, oldest first, up to the first one of a namespace where
    a memory still waits on the embedding queue for its vector (it, or a neighbour the nearest
    search cannot see yet), and whether more are left for a later run: the list stopped at
    one, or memories stamped after the horizon (_HORIZON) wait. The watermark moves past
    whatever is returned, so such a memory is left for a later run, never skipped, and the
    run is not complete."""
    live = (Chunk.doc_type == "memory", Chunk.valid_to.is_(None))
    after = [*live]
    queued = select(Chunk.namespace).distinct().where(*live, Chunk.embedding.is_(None))
    if since is not None:
        after.append(tuple_(Chunk.created_at, Chunk.id) > since)
    if namespace:
        after.append(Chunk.namespace == namespace)
        queued = queued.where(Chunk.namespace == namespace)
    session.execute(text("SELECT pg_stat_clear_snapshot()"))  # not one read earlier
    horizon = session.scalar(_HORIZON)  # none newer than a write that may be in flight
    stmt = select(Chunk).where(*after, Chunk.created_at < horizon)
    rows = list(session.scalars(stmt.order_by(Chunk.created_at, Chunk.id).limit(size)))
    waiting_in = set(session.scalars(queued)) if rows else set()
    waiting = next((n for n, c in enumerate(rows) if c.namespace in waiting_in), None)
    if waiting is not None:
        return rows[:waiting], True
    later = len(rows) < size and session.scalar(
        select(exists().where(*after, Chunk.created_at >= horizon))
    )
    return rows, bool(later)


# When the oldest transaction of another client began, or now when none is open. A memory
# is stamped when its row is written, and may commit long after (a batch embedding 500
# texts): a run that took newer memories committed meanwhile would move the watermark past
# it, and it would never be looked at. Memories from then on wait for a later run. Without
# another transaction open the bound is the clock: a writer beginning right after this read
# stamps its memory later. (pg_stat_activity is read once per transaction: candidates clears
# that snapshot first.)
_HORIZON = text(
    """
    SELECT least(min(xact_start), clock_timestamp()) FROM pg_stat_activity
    WHERE datname = current_database() AND backend_type = 'client backend'
      AND pid <> pg_backend_pid() AND xact_start IS NOT NULL
    """
)


# The nearest live memories of the same namespace and type, by the HNSW index (an
# iterative scan, so the filters still leave up to :k), for every candidate at once.
_NEAR_DUPLICATES = text(
    """
    SELECT o.id AS origin, n.id
    FROM unnest(CAST(:namespaces AS text[]), CAST(:ids AS text[])) AS o(namespace, id)
    JOIN chunk k ON k.namespace = o.namespace AND k.id = o.id
    CROSS JOIN LATERAL (
        SELECT c.id, 1 - (c.embedding <=> k.embedding) AS similarity
        FROM chunk c
        WHERE c.valid_to IS NULL AND c.embedding IS NOT NULL AND c.namespace = k.namespace
          AND c.doc_type = 'memory' AND c.memory_type = k.memory_type
        ORDER BY c.embedding <=> k.embedding
        LIMIT :k
    ) AS n
    WHERE n.id <> o.id AND n.similarity >= :threshold
    ORDER BY o.id, n.similarity DESC
    """
)


def _standing(c: Chunk) -> tuple[bool, bool, float, int, float]:
    """Exempt first, then anything but session scratch (which decay deletes: a project
    memory merged into it would go with it), then confidence, accesses, age."""
    scratch = decay.tier(c) == "ultra"
    return (decay.exempt(c), not scratch, c.confidence, c.access_count, -c.created_at.timestamp())


def near_duplicates(session: Session, chunks: list[Chunk]) -> dict[str, list[str]]:
    """Each candidate's near-duplicates (id → ids), for a whole batch in one statement: one
    HNSW probe per candidate, without a round trip each."""
    if not chunks:
        return {}
    rows = session.execute(
        _NEAR_DUPLICATES,
        {
            "namespaces": [c.namespace for c in chunks],
            "ids": [c.id for c in chunks],
            "k": NEIGHBOURS + 1,
            "threshold": DUPLICATE_SIMILARITY,
        },
    )
    found: dict[str, list[str]] = {}
    for r in rows:
        found.setdefault(r.origin, []).append(r.id)
    return found


def merge_one(session: Session, chunk: Chunk, now: datetime, ids: list[str]) -> list[str] | None:
    """Merge `chunk` with its near-duplicates `ids` (those still live); returns the ids
    closed, or None when another writer holds `chunk` now (the run stops before it, so the
    next run takes it). The caller holds the write turn of chunk's namespace (maintain:
    share_if_free)."""
    if not ids:
        return []
    # The candidate itself is held too: a client forgetting (or editing) it now keeps it,
    # and the run stops before it rather than merge into a memory that may be going.
    held = session.scalars(
        select(Chunk)
        .where(Chunk.namespace == chunk.namespace, Chunk.id == chunk.id, Chunk.valid_to.is_(None))
        .with_for_update(skip_locked=True)
        .execution_options(populate_existing=True)
    ).first()
    if held is None:
        return None
    others = session.scalars(
        select(Chunk)
        .where(Chunk.namespace == chunk.namespace, Chunk.id.in_(ids), Chunk.valid_to.is_(None))
        .with_for_update(skip_locked=True)
    )
    group: list[Chunk] = [held, *(o for o in others if not _opposed(held.content, o.content))]
    survivor = max(group, key=_standing)
    # An entity's observation is never merged away (it may survive a merge).
    observed = observation_links.observations_among(session, [(c.namespace, c.id) for c in group])
    merged = [
        c
        for c in group
        if c is not survivor and not decay.exempt(c) and (c.namespace, c.id) not in observed
    ]
    if merged:
        _absorb(session, survivor, merged)
        session.execute(
            _MOVE_EDGES,
            {
                "ns": chunk.namespace,
                "survivor": survivor.id,
                "gone": [c.id for c in merged],
                "group": [c.id for c in group],
                "now": now,
            },
        )
    for other in merged:
        edges.relate(
            session,
            MemoryRelateIn(source_id=survivor.id, target_id=other.id, relation="supersedes"),
        )
        decay.close(session, other, now, "consolidate", superseded_by=survivor.id)
    if merged:
        events.record(
            session,
            namespace=chunk.namespace,
            event_type="episode",
            operation="consolidate",
            subject_kind="memory",
            subject_id=survivor.id,
            payload={
                "merged": [c.id for c in merged],
                "title": _full_text(session, survivor)[:80],
                "memory_type": survivor.memory_type,
                "tags": survivor.tags,
            },
        )
    return [c.id for c in merged]


# The closed twins' relations (memory_relate's, contradictions; not their own history, the
# `supersedes` chain, nor their `mentions`, which the survivor has of its own text) move to
# the survivor: each is closed and written again from it, unless the survivor has that edge
# already (the walks read live memories only, so it was gone from every read). Closed and
# begun again at the time the pass runs at (:now, as the memory it closes; never before the
# edge began), not the transaction's: an as-of read finds the edge on one end at every time.
_MOVE_EDGES = text(
    """
    WITH closed AS (
        UPDATE edge e SET valid_to = greatest(CAST(:now AS timestamptz), e.valid_from),
                          expired_at = now()
        WHERE e.namespace = :ns AND e.valid_to IS NULL
          AND e.relation NOT IN ('supersedes', 'mentions') AND e.source_kind <> 'episode'
          AND ((e.source_kind = 'chunk' AND e.source_id = ANY(CAST(:gone AS text[]))
                AND NOT (e.target_kind = 'chunk' AND e.target_id = ANY(CAST(:group AS text[]))))
            OR (e.target_kind = 'chunk' AND e.target_id = ANY(CAST(:gone AS text[]))
                AND NOT (e.source_kind = 'chunk'
                         AND e.source_id = ANY(CAST(:group AS text[])))))
        RETURNING e.*
    ), moved AS (
        SELECT DISTINCT ON (source_kind, source, target_kind, target, relation)
               source_kind, source, target_kind, target, relation, weight, context,
               evidence_chunk_ids, valid_to
        FROM (SELECT c.*,
                     CASE WHEN c.source_kind = 'chunk' AND c.source_id = ANY(CAST(:gone AS text[]))
                          THEN :survivor ELSE c.source_id END AS source,
                     CASE WHEN c.target_kind = 'chunk' AND c.target_id = ANY(CAST(:gone AS text[]))
                          THEN :survivor ELSE c.target_id END AS target
              FROM closed c) AS m
        ORDER BY source_kind, source, target_kind, target, relation, weight DESC, id
    )
    INSERT INTO edge (namespace, source_kind, source_id, target_kind, target_id, relation,
                      weight, context, evidence_chunk_ids, valid_from)
    SELECT :ns, m.source_kind, m.source, m.target_kind, m.target, m.relation, m.weight,
           m.context, m.evidence_chunk_ids, m.valid_to
    FROM moved m
    WHERE NOT EXISTS (
        SELECT 1 FROM edge x
        WHERE x.namespace = :ns AND x.valid_to IS NULL AND x.relation = m.relation
          AND x.source_kind = m.source_kind AND x.source_id = m.source
          AND x.target_kind = m.target_kind AND x.target_id = m.target)
    """
)


def _full_text(session: Session, memory: Chunk) -> str:
    """A memory's text, an aged one's full text from its history (its row holds aging's
    summary or key): what the merge's episode is titled by."""
    if memory.stage not in AGED:
        return memory.content
    return history.full_text(session, memory) or memory.content


def _absorb(session: Session, survivor: Chunk, merged: list[Chunk]) -> None:
    """What the merged memories add goes to the survivor, not away with them: their tags
    after its own, their metadata keys it lacks (within the limits a store has), and the
    highest importance. Like aging, not an edit by anyone: updated_at stays."""
    tags = list(dict.fromkeys([*survivor.tags, *(t for c in merged for t in c.tags)]))
    meta = dict(survivor.meta)
    for key, value in ((k, v) for c in merged for k, v in c.meta.items()):
        if key not in meta and _size({**meta, key: value}) <= MAX_METADATA_BYTES:
            meta[key] = value
    importance = max(survivor.importance, *(c.importance for c in merged))
    new = {"tags": tags[:MAX_TAGS], "meta": meta, "importance": importance}
    if any(getattr(survivor, k) != v for k, v in new.items()):
        session.execute(
            update(Chunk)
            .where(Chunk.namespace == survivor.namespace, Chunk.id == survivor.id)
            .values(**new, updated_at=Chunk.updated_at)
        )
        for key, value in new.items():
            set_committed_value(survivor, key, value)


def _size(meta: dict[str, Any]) -> int:
    return len(json.dumps(meta, default=str, ensure_ascii=False).encode())


def _opposed(a: str, b: str) -> bool:
    """Whether either statement contradicts the other (contradiction.py's rules)."""
    return contradiction.reason(a, b) is not None or contradiction.reason(b, a) is not None


def advance(session: Session, last: Chunk, merges: int, namespace: str | None = None) -> None:
    """Move the watermark of a run over every namespace (or over `namespace` alone) past
    `last`, the newest candidate looked at."""
    events.record(
        session,
        namespace=namespace or "*",
        event_type="maintenance",
        operation=WATERMARK,
        payload={"upto": last.created_at.isoformat(), "upto_id": last.id, "merges": merges},
    )
