"""S003's decay score, its status bands, and S002's `decay` operation over memory tiers.

    decay_score = importance × e^(−0.03 · days_since_access) × log2(access_count + 1) × type_weight

with a usage factor of 0.5 instead of the log2 term for a memory never accessed, and
`days_since_access` counted from its creation then. Pinned memories score 999 (S003 vault).
Bands: active ≥ 0.5, fading ≥ 0.2, dormant ≥ 0.05, archived below.

S002's tiers are a view of the lifecycle, so `decay` can be scoped by them:
  ultra  — session-lifecycle memories (scratch for one session): below the threshold they are
           deleted (closed; history kept) and counted in ENTRIES_DELETED;
  short  — project memories whose S003 type weight is below 1.1 (fix, workflow, problem,
           error, general, and types S003 does not weigh);
  medium — project memories of the heavier types (procedure, decision, insight, solution,
           code_pattern, configuration);
  long   — exempt memories: personal lifecycle, pinned, golden rules, ground truth. Their
           score is computed and stored, never acted on nor counted as decayed.
Only `ultra` loses entries; the other tiers age through the four stages of memsys.services.
lifecycle instead. ENTRIES_DECAYED counts the memories whose score fell below the threshold
in this run, so a second run right after reports 0.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any, Protocol

from sqlalchemy import func, select, text, tuple_, update
from sqlalchemy.orm import Session

from memsys.db import rowcount, take_turns
from memsys.models import Chunk
from memsys.schemas.lifecycle import DecayIn, DecayOut
from memsys.services import access, events, namespaces, observation_links
from memsys.vocabulary import is_golden

LAMBDA = 0.03
NEVER_ACCESSED_USAGE = 0.5
PINNED_SCORE = 999.0
TYPE_WEIGHTS = {
    "procedure": 1.4,
    "decision": 1.3,
    "insight": 1.25,
    "solution": 1.2,
    "code_pattern": 1.1,
    "configuration": 1.1,
    "fix": 1.0,
    "workflow": 1.0,
    "problem": 0.9,
    "error": 0.8,
    "general": 0.8,
}
DEFAULT_TYPE_WEIGHT = 1.0  # memsys's own types (preference, fact, …), which S003 does not list
STATUS_BANDS = ((0.5, "active"), (0.2, "fading"), (0.05, "dormant"))
MEDIUM_WEIGHT = 1.1
SCAN_BATCH = 2000


def type_weight(memory_type: str | None) -> float:
    return TYPE_WEIGHTS.get(memory_type or "", DEFAULT_TYPE_WEIGHT)


def days_between(earlier: datetime, later: datetime) -> float:
    return max(0.0, (later - earlier).total_seconds() / 86400)


def score(
    importance: float,
    days_since_access: float,
    access_count: int,
    memory_type: str | None,
    pinned: bool = False,
) -> float:
    """S003's decay score."""
    if pinned:
        return PINNED_SCORE
    usage = math.log2(access_count + 1) if access_count > 0 else NEVER_ACCESSED_USAGE
    return importance * math.exp(-LAMBDA * days_since_access) * usage * type_weight(memory_type)


def status(decay_score: float) -> str:
    for floor, name in STATUS_BANDS:
        if decay_score >= floor:
            return name
    return "archived"


class MemoryRow(Protocol):
    """What the rules read of a memory: a Chunk, or a row of SIGNALS."""

    namespace: str
    id: str
    memory_type: str | None
    importance: float
    confidence: float
    lifecycle: str
    pinned: bool
    tags: list[str]
    meta: dict[str, Any]
    access_count: int
    last_accessed_at: datetime | None
    created_at: datetime
    decay_score: float | None


SIGNALS = (
    Chunk.namespace,
    Chunk.id,
    Chunk.memory_type,
    Chunk.importance,
    Chunk.confidence,
    Chunk.lifecycle,
    Chunk.pinned,
    Chunk.tags,
    Chunk.meta,
    # As a caller sees them: the counters plus the accesses logged since the last fold, so
    # a decision never depends on whether maintenance has folded yet (services/access.py).
    access.live_count().label("access_count"),
    access.live_last().label("last_accessed_at"),
    Chunk.created_at,
    Chunk.decay_score,
    Chunk.stage,
    Chunk.stage_changed_at,
    Chunk.doc_type,
)

_STORE_SCORES = text(
    """
    UPDATE chunk c SET decay_score = v.score
    FROM unnest(CAST(:namespaces AS text[]), CAST(:ids AS text[]), CAST(:scores AS float8[]))
         AS v(namespace, id, score)
    WHERE c.namespace = v.namespace AND c.id = v.id
    """
)


def ground_truth(memory: MemoryRow) -> bool:
    """S004 ground truth: a memory marked verified / ground_truth, or tagged ground-truth."""
    meta = memory.meta or {}
    marked = bool(meta.get("ground_truth") or meta.get("verified"))
    return marked or "ground-truth" in (memory.tags or [])


def exempt(memory: MemoryRow) -> bool:
    """S004's exemptions and S001's golden rules: never demoted, archived or decayed away."""
    return (
        memory.pinned
        or memory.lifecycle == "personal"
        or is_golden(memory.memory_type, memory.confidence)
        or ground_truth(memory)
    )


def tier(memory: MemoryRow) -> str:
    if exempt(memory):
        return "long"
    if memory.lifecycle == "session":
        return "ultra"
    return "medium" if type_weight(memory.memory_type) >= MEDIUM_WEIGHT else "short"


def idle_days(memory: MemoryRow, now: datetime) -> float:
    """Days since the last access (since creation for a memory never accessed)."""
    return days_between(memory.last_accessed_at or memory.created_at, now)


def score_of(memory: MemoryRow, now: datetime) -> float:
    return score(
        memory.importance,
        idle_days(memory, now),
        memory.access_count,
        memory.memory_type,
        memory.pinned,
    )


def batch_after(
    session: Session,
    namespace: str | None,
    after: tuple[str, str],
    size: int = SCAN_BATCH,
    columns: tuple[Any, ...] = SIGNALS,
    lock: bool = False,
) -> list[Any]:
    """The next `size` live memories after key `after`; with `lock`, rows another
    transaction holds are skipped (maintenance beside live traffic, or a second run)."""
    stmt = select(*columns).where(Chunk.doc_type == "memory", Chunk.valid_to.is_(None))
    if namespace:
        stmt = stmt.where(Chunk.namespace == namespace)
    stmt = stmt.where(tuple_(Chunk.namespace, Chunk.id) > after)
    stmt = stmt.order_by(Chunk.namespace, Chunk.id).limit(size)
    if lock:  # rows being imported are left too (namespaces.free_to_write)
        stmt = stmt.where(namespaces.free_to_write(Chunk.namespace))
        stmt = stmt.with_for_update(skip_locked=True)
    return list(session.execute(stmt))


def live_batches(
    session: Session, namespace: str | None, size: int = SCAN_BATCH
) -> Iterator[list[Any]]:
    """Every live memory's signals (of one namespace, or all), a batch at a time by key."""
    after: tuple[str, str] = ("", "")
    while rows := batch_after(session, namespace, after, size):
        yield rows
        after = (rows[-1].namespace, rows[-1].id)


def rescore(rows: list[Any], now: datetime) -> dict[tuple[str, str], float]:
    return {(r.namespace, r.id): round(score_of(r, now), 6) for r in rows}


def moved_bands(
    rows: list[Any], scores: dict[tuple[str, str], float], threshold: float | None = None
) -> dict[tuple[str, str], float]:
    """The scores worth writing: those whose S003 band (or pinned 999) differs from the
    stored one, or that have none yet, or (with `threshold`, the `decay` operation's) that
    crossed it. Maintenance and decay write only these: rewriting every memory's score on
    every run rewrites every row (a full row version, index entries included, when the page
    has no room), for a value only the bands and decay's threshold act on."""
    due = {}
    for r in rows:
        key = (r.namespace, r.id)
        if key not in scores:
            continue
        new = scores[key]
        old = r.decay_score
        if (
            old is None
            or status(old) != status(new)
            or (old == PINNED_SCORE) != (new == PINNED_SCORE)
            or (threshold is not None and (old < threshold) != (new < threshold))
        ):
            due[key] = new
    return due


def store_scores(session: Session, scores: dict[tuple[str, str], float]) -> None:
    """Write decay scores in one statement (no ORM: a rescore is not an edit, updated_at
    stays)."""
    if scores:
        keys = list(scores)
        session.execute(
            _STORE_SCORES,
            {
                "namespaces": [k[0] for k in keys],
                "ids": [k[1] for k in keys],
                "scores": [scores[k] for k in keys],
            },
        )


def close(session: Session, memory: MemoryRow, now: datetime, operation: str, **why: Any) -> bool:
    """Delete (close) a memory as lifecycle does: history kept, the event says why. False when
    it was no longer live (a client forgot it after it was read): its close stays as made."""
    closed = rowcount(
        session,
        update(Chunk)
        .where(Chunk.namespace == memory.namespace, Chunk.id == memory.id)
        .where(Chunk.valid_to.is_(None))
        # never before the row began (one stored while a maintenance run went on)
        .values(valid_to=func.greatest(now, Chunk.valid_from), updated_at=Chunk.updated_at),
    )
    if not closed:
        return False
    events.record(
        session,
        namespace=memory.namespace,
        event_type="delete",
        operation=operation,
        subject_kind="memory",
        subject_id=memory.id,
        payload=why,
    )
    return True


def _still_below(session: Session, row: Any, now: datetime, threshold: float) -> float | None:
    """The score of a session memory the scan found below the threshold, read again under
    its row lock, when it is still live, still session scratch (not made exempt since: a
    consolidation that merged a ground-truth memory into it), still below, and still no
    entity's observation; else None. The scan reads without locks: a store that restated
    the memory meanwhile (reviving it, an access now) or an observation linked to it must
    not be lost."""
    key = (row.namespace, row.id)
    locked = session.execute(
        select(Chunk.id)
        .where(Chunk.namespace == row.namespace, Chunk.id == row.id, Chunk.valid_to.is_(None))
        .with_for_update()
    ).first()
    if locked is None:
        return None
    fresh = session.execute(
        select(*SIGNALS).where(Chunk.namespace == row.namespace, Chunk.id == row.id)
    ).one()
    current = round(score_of(fresh, now), 6)
    if (
        tier(fresh) != "ultra"
        or current >= threshold
        or key in observation_links.observations_among(session, [key])
    ):
        return None
    return current


def decay(session: Session, params: DecayIn, now: datetime | None = None) -> DecayOut:
    """S002 decay: rescore the memories in scope, delete the session scratch below threshold."""
    now = now or datetime.now(UTC)
    namespaces.require(session, params.namespace)
    # One decay at a time: two rescoring the same rows in batches deadlocked each other.
    take_turns(session, "memsys:decay")  # one part: no namespace and key can spell it
    # After any import of the namespaces it may close memories in (namespaces.share).
    namespaces.share_scope(session, params.namespace)
    folded = access.fold(session)
    decayed = deleted = scanned = 0
    bands: dict[str, int] = {}
    for rows in live_batches(session, params.namespace):
        scores: dict[tuple[str, str], float] = {}
        # A session memory that is also an entity's observation (the same text, deduplicated)
        # decays like the others but is not deleted: the graph would lose the observation.
        observed = observation_links.observations_among(
            session, [(r.namespace, r.id) for r in rows if tier(r) == "ultra"]
        )
        for row in rows:
            where = tier(row)
            if params.scope and where != params.scope:
                continue
            scanned += 1
            current = round(score_of(row, now), 6)
            scores[(row.namespace, row.id)] = current
            bands[status(current)] = bands.get(status(current), 0) + 1
            kept = (row.namespace, row.id) in observed
            if where == "ultra" and current < params.threshold and not kept:
                fresh = _still_below(session, row, now, params.threshold)
                if fresh is not None:
                    why = {"decay_score": fresh, "threshold": params.threshold}
                    deleted += close(session, row, now, "decay", **why)
            elif (
                where != "long"
                and current < params.threshold
                and (row.decay_score is None or row.decay_score >= params.threshold)
            ):
                decayed += 1
        store_scores(session, moved_bands(rows, scores, params.threshold))
    events.record(
        session,
        namespace=params.namespace or "*",
        event_type="maintenance",
        operation="decay",
        payload={
            "decayed": decayed,
            "deleted": deleted,
            "scanned": scanned,
            "threshold": params.threshold,
            "scope": params.scope,
        },
    )
    return DecayOut(
        status="OK",
        entries_decayed=decayed,
        entries_deleted=deleted,
        entries_scanned=scanned,
        counters_folded=folded,
        by_status=bands,
    )
