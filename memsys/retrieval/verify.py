"""The verify stage (S004 "Two-Stage Verification"), run in execution mode.

1. Ground truth: the best-ranked authoritative item — a stored preference that answers the
   query, or a golden-rule memory at least `GROUND_TRUTH_MIN` relevant — verifies the answer
   (confidence 1.0) and is moved to the top.
2. Otherwise agreement: the top three chunks verify each other when their mean pairwise
   cosine similarity (their stored embeddings) reaches `AGREEMENT_MIN`; the confidence is
   that mean. Fewer than three chunks cannot agree.

The result always says which method decided, what was checked and why. It speaks of the
answer handed back: a verdict that checked an item the token budget then left out is made
again over what the answer holds (`of_answer`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sqlalchemy import text
from sqlalchemy.orm import Session

from memsys.retrieval.assemble import Item

GROUND_TRUTH_MIN = 0.5
# MiniLM cosine: paraphrases of one fact ≈ 0.7–0.9, chunks merely on one topic ≈ 0.3–0.5.
AGREEMENT_MIN = 0.6
CHUNK_SOURCES = ("memory", "document")

_AGREEMENT = text(
    """
    WITH top AS (
        SELECT c.namespace, c.id, c.embedding FROM chunk c
        JOIN unnest(CAST(:namespaces AS text[]), CAST(:ids AS text[])) AS k(namespace, id)
          ON c.namespace = k.namespace AND c.id = k.id
        WHERE c.embedding IS NOT NULL
    )
    SELECT avg(1 - (a.embedding <=> b.embedding)) FROM top a
    JOIN top b ON (a.namespace, a.id) < (b.namespace, b.id)
    """
)


@dataclass
class Verification:
    verified: bool
    method: str  # ground_truth | agreement | none
    ground_truth_match: str | None
    confidence: float
    agreement: float | None = None
    checked: list[str] = field(default_factory=list)
    reason: str = ""

    def as_dict(self) -> dict[str, object]:
        return {
            "verified": self.verified,
            "method": self.method,
            "ground_truth_match": self.ground_truth_match,
            "confidence": self.confidence,
            "agreement": self.agreement,
            "checked": self.checked,
            "reason": self.reason,
        }


def run(session: Session, items: list[Item]) -> tuple[list[Item], Verification]:
    """Verify the ranked `items`; returns them (a ground-truth match first) and the verdict."""
    for item in items:
        if item.ground_truth and item.score >= GROUND_TRUTH_MIN:
            rest = [i for i in items if i is not item]
            return [item, *rest], Verification(
                verified=True,
                method="ground_truth",
                ground_truth_match=item.id,
                confidence=1.0,
                checked=[item.id],
                reason=f"ground truth: {item.source} {item.id} answers the query",
            )
    top = [i for i in items if i.source in CHUNK_SOURCES][:3]
    checked = [i.id for i in top]
    if len(top) < 3:
        return items, Verification(
            verified=False,
            method="none",
            ground_truth_match=None,
            confidence=0.5,
            checked=checked,
            reason=f"no ground truth, and {len(top)} chunk(s): agreement needs 3",
        )
    agreement = round(mean_similarity(session, top), 4)
    verified = agreement >= AGREEMENT_MIN
    return items, Verification(
        verified=verified,
        method="agreement" if verified else "none",
        ground_truth_match=None,
        confidence=agreement if verified else 0.5,
        agreement=agreement,
        checked=checked,
        reason=(
            f"no ground truth; top-3 agreement {agreement:.2f} "
            f"{'≥' if verified else '<'} {AGREEMENT_MIN}"
        ),
    )


def of_answer(session: Session, verdict: Verification, returned: list[Item]) -> Verification:
    """`verdict` when the answer (`returned`, in its order) holds every item it checked;
    otherwise the verdict on the returned items, naming what the budget left out."""
    held = {i.id for i in returned}
    missing = [c for c in verdict.checked if c not in held]
    if not missing:
        return verdict
    _, again = run(session, returned)
    again.reason += f" (the budget left out {', '.join(missing)})"
    return again


def mean_similarity(session: Session, items: list[Item]) -> float:
    """Mean pairwise cosine similarity of the items' stored embeddings (0 without a pair)."""
    params = {"namespaces": [i.namespace for i in items], "ids": [i.id for i in items]}
    return float(session.execute(_AGREEMENT, params).scalar() or 0.0)
