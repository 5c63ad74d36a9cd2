"""The lifecycle's say in ranking: one bounded multiplicative factor on each fused score.

    factor = confidence_factor × stage_factor

confidence_factor is 1 at the confidence every chunk starts with (0.3) and moves linearly to
1 + CONFIDENCE_CAP at confidence 1 and 1 − CONFIDENCE_CAP at 0: however much TRY/LEARN
feedback a memory gets, it moves the memory's fused score by at most ±20 %, so feedback can
reorder close calls but never lift an unrelated memory over a relevant one. stage_factor is
S004's: 1 active, 0.5 demoted, 0.1 archived, 0.01 rehydratable — except for a strong match
(cosine ≥ REKINDLE_SIMILARITY), which ranks as active: a query that really matches an aged
memory brings it back (the caller then rekindles it, memsys.services.lifecycle).
Documents and fresh memories get exactly 1, so retrieval quality without feedback is unchanged.
With `as_of`, confidence and stage are read as they were then (memsys.retrieval.signals).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy.orm import Session

from memsys.retrieval.signals import signals_as_of

Key = tuple[str, str]

BASE_CONFIDENCE = 0.3
CONFIDENCE_CAP = 0.2
STAGE_FACTOR = {"active": 1.0, "demoted": 0.5, "archived": 0.1, "rehydratable": 0.01}
REKINDLE_SIMILARITY = 0.75


def confidence_factor(confidence: float) -> float:
    c = min(1.0, max(0.0, confidence))
    if c >= BASE_CONFIDENCE:
        return 1.0 + CONFIDENCE_CAP * (c - BASE_CONFIDENCE) / (1.0 - BASE_CONFIDENCE)
    return 1.0 - CONFIDENCE_CAP * (BASE_CONFIDENCE - c) / BASE_CONFIDENCE


def stage_factor(stage: str, similarity: float | None) -> float:
    if similarity is not None and similarity >= REKINDLE_SIMILARITY:
        return 1.0
    return STAGE_FACTOR.get(stage, 1.0)


def factor(confidence: float, stage: str, similarity: float | None) -> float:
    return confidence_factor(confidence) * stage_factor(stage, similarity)


def adjust(
    session: Session,
    keys: list[Key],
    rows: dict[Key, Any],
    fused: list[float],
    as_of: datetime | None = None,
) -> list[float]:
    """`fused` with each memory's factor applied (document chunks unchanged)."""
    memory_keys = [k for k in keys if rows[k]["doc_type"] == "memory"]
    if not memory_keys:
        return fused
    if as_of is None:  # the candidates' rows already hold today's confidence and stage
        signals = {
            k: {"confidence": rows[k]["confidence"], "stage": rows[k]["stage"]} for k in memory_keys
        }
    else:
        signals = signals_as_of(session, memory_keys, as_of)
    out = list(fused)
    for i, k in enumerate(keys):
        s = signals.get(k)
        if s is not None:
            out[i] = fused[i] * factor(s["confidence"], s["stage"], rows[k]["similarity"])
    return out
