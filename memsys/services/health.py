"""S001 memory_analyze_health: contradictions, low confidence, stale memories, and what to do.

contradictions: live `contradicts` edges between live memories (memory_relate or the
contradiction detector writes them), with the cosine of the two memories.
low_confidence: confidence below LOW_CONFIDENCE — a memory that failed more than it worked.
stale: no validation event (TRY/LEARN) in `stale_days` and older than that.
Each list holds at most LIMIT entries; `totals` has the full counts, and how many memories
are hot / warm / cold / pinned (S004, from the access log).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import func, select, text
from sqlalchemy.orm import Session

from memsys.models import Chunk, ValidationEvent
from memsys.schemas.lifecycle import Contradiction, HealthIn, HealthOut, LowConfidence, Stale
from memsys.services import access, namespaces

LOW_CONFIDENCE = 0.2
LIMIT = 50

_CONTRADICTIONS = text(
    """
    SELECT e.source_id, e.target_id, 1 - (a.embedding <=> b.embedding) AS similarity
    FROM edge e
    JOIN chunk a ON a.namespace = e.namespace AND a.id = e.source_id AND a.valid_to IS NULL
    JOIN chunk b ON b.namespace = e.namespace AND b.id = e.target_id AND b.valid_to IS NULL
    WHERE e.relation = 'contradicts' AND e.valid_to IS NULL
      AND e.source_kind = 'chunk' AND e.target_kind = 'chunk'
      AND (CAST(:namespace AS text) IS NULL OR e.namespace = :namespace)
    ORDER BY similarity DESC NULLS LAST, e.id
    """
)


def _live(namespace: str | None) -> Any:
    where = [Chunk.doc_type == "memory", Chunk.valid_to.is_(None)]
    if namespace:
        where.append(Chunk.namespace == namespace)
    return where


def analyze(session: Session, params: HealthIn, now: datetime | None = None) -> HealthOut:
    now = now or datetime.now(UTC)
    namespaces.require(session, params.namespace)
    ns = params.namespace
    contradictions: list[Contradiction] = []
    low: list[LowConfidence] = []
    stale: list[Stale] = []
    totals: dict[str, int] = {
        "memories": int(session.scalar(select(func.count()).where(*_live(ns))) or 0),
        **access.temperature_counts(session, ns, now),
    }
    if params.include_contradictions:
        rows = session.execute(_CONTRADICTIONS, {"namespace": ns}).all()
        totals["contradictions"] = len(rows)
        contradictions = [
            Contradiction(
                id1=r.source_id,
                id2=r.target_id,
                similarity=None if r.similarity is None else round(float(r.similarity), 4),
            )
            for r in rows[:LIMIT]
        ]
    if params.include_low_confidence:
        where = [*_live(ns), Chunk.confidence < LOW_CONFIDENCE]
        totals["low_confidence"] = int(session.scalar(select(func.count()).where(*where)) or 0)
        low = [
            LowConfidence(id=r.id, confidence=r.confidence)
            for r in session.execute(
                select(Chunk.id, Chunk.confidence)
                .where(*where)
                .order_by(Chunk.confidence, Chunk.id)
                .limit(LIMIT)
            )
        ]
    if params.include_stale:
        cutoff = now - timedelta(days=params.stale_days)
        last = (
            select(func.max(ValidationEvent.created_at))
            .where(
                ValidationEvent.namespace == Chunk.namespace,
                ValidationEvent.memory_id == Chunk.id,
            )
            .scalar_subquery()
        )
        where = [
            *_live(ns),
            Chunk.created_at < cutoff,
            func.coalesce(last, Chunk.created_at) < cutoff,
        ]
        totals["stale"] = int(session.scalar(select(func.count()).where(*where)) or 0)
        stale = [
            Stale(id=r.id, last_validated=r.last)
            for r in session.execute(
                select(Chunk.id, last.label("last"))
                .where(*where)
                .order_by(func.coalesce(last, Chunk.created_at), Chunk.id)
                .limit(LIMIT)
            )
        ]
    return HealthOut(
        contradictions=contradictions,
        low_confidence=low,
        stale=stale,
        recommendations=recommend(totals, params.stale_days),
        totals=totals,
    )


def recommend(totals: dict[str, int], stale_days: int) -> list[str]:
    advice = []
    if totals.get("contradictions"):
        n = totals["contradictions"]
        advice.append(
            f"Resolve {n} contradiction{'s' * (n != 1)}: keep the right memory and forget "
            "the other, or relate them with 'supersedes'"
        )
    if totals.get("low_confidence"):
        n = totals["low_confidence"]
        advice.append(
            f"Review {n} low-confidence memor{'ies' if n != 1 else 'y'} (confidence < "
            f"{LOW_CONFIDENCE}): correct or forget them"
        )
    if totals.get("stale"):
        n = totals["stale"]
        advice.append(
            f"Validate {n} stale memor{'ies' if n != 1 else 'y'} (no memory_apply/"
            f"memory_outcome in {stale_days} days), or let `memsys maintain` age them"
        )
    if not advice:
        advice.append("No action needed")
    return advice
