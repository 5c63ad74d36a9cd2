"""Fusion of the channels: every weight in one versioned place.

Each query's candidates (the union of every channel's pool) carry every channel's exact score:
a chunk found only by the dense channel still gets its BM25 score and vice versa. Fusion is
score-aware: each channel's scores are standardised over the query's candidates (z-scores),
so a channel's vote is large exactly where it is confident — a chunk that stands far above
the channel's other candidates — and small where its scores are flat. Rank-only fusion (RRF)
gives a weak channel's 1st place the same weight as a strong one's, which is how the old
equal-weight RRF dragged the fused result below its best channel (benchmarks/README.md).

`FUSION_VERSION` names the method and weights; traces record it, and a change of any number
here must change it.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Sequence
from dataclasses import asdict, dataclass, replace

# zfuse-6: zfuse-5 with half the graph weight for a query that names no stored subject (.25,
# not .5; a subject's query keeps 5). zfuse-5: zfuse-4 with the entry seat (`entry_seat`).
# zfuse-4: zfuse-3 with the neighbourhood channel weighted by how alike rows written together
# are in this store (neighbours.py, the gate). zfuse-3: zfuse-2t with the walk seeded by the
# best 3 hits (not 5), restart .3 (not .5), and the graph weighted ×10 for a query naming the
# subject of a stored memory.
FUSION_VERSION = "zfuse-6"


@dataclass(frozen=True)
class Weights:
    version: str = FUSION_VERSION
    dense: float = 1.0
    lexical: float = 1.0
    # A walk from the hits alone mostly re-ranks their own neighbourhood, and its scores are
    # sparse: the one chunk it likes stands ~10 standard deviations out among ~100
    # candidates, so at .5 its favourite outvoted the first place that BM25 and dense agreed
    # on (LoCoMo R@1 .320 against .328 for BM25 alone; benchmarks/README.md, "zfuse-6").
    graph: float = 0.25
    graph_seeds: int = 3  # first-stage hits whose entities seed the graph walk
    graph_restart: float = 0.3  # the walk's restart probability (PageRank's 1 − damping)
    # The graph weight is multiplied by this when the query names no stored, non-hub entity.
    graph_unnamed: float = 1.0
    # ... and by this when one of the names it gives is the subject of a stored memory (a
    # memory opens with it: an entry about that thing), where the walk's order beats the
    # other channels' (multi-hop questions about a named thing's links).
    graph_subject: float = 20.0  # a weight of 5, as in zfuse-3 to zfuse-5
    # The entry seat: the walk's best *entry* (graph.Walk.entries: the one memory about a name
    # the walk went through) that fusion left below this 1-based place is moved up to it; 0 =
    # off. A multi-hop question's second step — the entry about the thing the best hit names —
    # shares few words with the question, so dense and BM25 rank it low and their agreement
    # on the first step outvotes the walk; one seat gives the walk's answer a place without
    # handing it the whole list (benchmarks/README.md, "The entry seat").
    entry_seat: int = 5
    # Neighbourhood channel (neighbours.py): the best `neighbour_seeds` hits after the other
    # channels pull in up to `neighbour_width` rows on each side, written within
    # `neighbour_gap_s` seconds (memories) or chunks of the same document.
    neighbours: float = 0.5
    neighbour_seeds: int = 10
    neighbour_width: int = 2
    neighbour_decay: float = 0.5
    neighbour_gap_s: int = 3600
    # Exponent of the seed–neighbour cosine in the share; 0 = off (measured: 1 did not keep
    # random neighbours out on SciFact at weight 1, benchmarks/README.md).
    neighbour_coherence: float = 0.0
    # The channel's weight is multiplied by its gate: 0 where rows written one after another
    # are no more alike than rows written apart (write order is noise there), 1 where they are
    # clearly more alike (a conversation, a document).
    neighbour_gated: bool = True
    # Temporal channel (temporal.py): candidates that happened inside a date range the query
    # names ("last May"); a query without one is untouched. 1 beat .5 and 0 on LoCoMo's tune
    # half (benchmarks/README.md, "Temporal channel").
    temporal: float = 1.0
    # A z-score below this adds nothing: a channel may lift a chunk it likes, but the
    # long tail of its weak candidates does not push anything down.
    floor: float = 0.0
    rrf_k: int = 60  # only for the "rrf" method, kept to measure against

    def as_dict(self) -> dict[str, float | int | str]:
        return asdict(self)


CURRENT = Weights()
# Earlier versions a trace may name (replay uses them): zfuse-5 weighed the graph .5 (×10
# for a subject's query); zfuse-4 had no entry seat; zfuse-3 did not gate the neighbourhood;
# zfuse-2t walked from the best 5 hits at restart .5 with one graph weight for every named
# query; zfuse-2 is zfuse-2t without the temporal channel.
_ZFUSE_5 = replace(CURRENT, version="zfuse-5", graph=0.5, graph_subject=10.0)
_ZFUSE_4 = replace(_ZFUSE_5, version="zfuse-4", entry_seat=0)
_ZFUSE_3 = replace(_ZFUSE_4, version="zfuse-3", neighbour_gated=False)
_ZFUSE_2T = replace(
    _ZFUSE_3, version="zfuse-2t", graph_seeds=5, graph_restart=0.5, graph_subject=1.0
)
KNOWN = {
    CURRENT.version: CURRENT,
    "zfuse-5": _ZFUSE_5,
    "zfuse-4": _ZFUSE_4,
    "zfuse-3": _ZFUSE_3,
    "zfuse-2t": _ZFUSE_2T,
    "zfuse-2": replace(_ZFUSE_2T, version="zfuse-2", temporal=0.0),
}


def _standardised(scores: Sequence[float | None]) -> list[float]:
    present = [s for s in scores if s is not None]
    if len(present) < 2:
        return [0.0 if s is None else 1.0 for s in scores]
    mean = sum(present) / len(present)
    spread = math.sqrt(sum((s - mean) ** 2 for s in present) / len(present))
    if spread == 0:
        return [0.0 for _ in scores]
    lowest = (min(present) - mean) / spread
    return [lowest if s is None else (s - mean) / spread for s in scores]


def _signal(scores: Sequence[float]) -> list[float]:
    """z-scores of a channel that found something, zeros for one that found nothing."""
    return _standardised(scores) if any(s > 0 for s in scores) else [0.0] * len(scores)


def zfuse(
    dense: Sequence[float | None],
    lexical: Sequence[float],
    weights: Weights = CURRENT,
    graph: Sequence[float] | None = None,
    neighbours: Sequence[float] | None = None,
) -> list[float]:
    """Weighted sum of each channel's z-scores over the candidates (floored)."""
    zd = _standardised(dense)
    zl = _signal(lexical)
    zg = _signal(graph) if graph is not None else [0.0] * len(zd)
    zn = _signal(neighbours) if neighbours is not None else [0.0] * len(zd)
    return [
        weights.dense * max(d, weights.floor)
        + weights.lexical * max(lx, weights.floor)
        + weights.graph * max(g, weights.floor)
        + weights.neighbours * max(n, weights.floor)
        for d, lx, g, n in zip(zd, zl, zg, zn, strict=True)
    ]


def add_channel(
    fused: Sequence[float], scores: Sequence[float], weight: float, floor: float = 0.0
) -> list[float]:
    """`fused` plus one more channel's weighted, floored z-scores (the temporal channel)."""
    return [f + weight * max(z, floor) for f, z in zip(fused, _signal(scores), strict=True)]


def seat(
    order: list[int], entries: Sequence[int], place: int, skipped: Collection[int] = ()
) -> tuple[list[int], int | None]:
    """`order` with the first of `entries` (best first) that is not among the first
    `place` − 1 moved up to the `place`-th (1-based), and the candidate moved (None: nothing
    to move, or `place` is 0). Places count only candidates not in `skipped` (the copies
    dedup will drop), which are never moved."""
    if place < 1:
        return order, None
    counted = [i for i in order if i not in skipped]
    above = counted[: place - 1]
    chosen = next((i for i in entries if i not in above and i not in skipped), None)
    if chosen is None or counted.index(chosen) < place:
        return order, None
    rest = [i for i in order if i != chosen]
    at = rest.index(above[-1]) + 1 if above else 0
    return [*rest[:at], chosen, *rest[at:]], chosen


def ranks(scores: Sequence[float | None]) -> list[int | None]:
    """1-based rank of each score (None and zero-BM25 entries get no rank)."""
    order = sorted(
        (i for i, s in enumerate(scores) if s is not None), key=lambda i: -(scores[i] or 0)
    )
    out: list[int | None] = [None] * len(scores)
    for rank, i in enumerate(order, start=1):
        out[i] = rank
    return out


def rrf(
    dense: Sequence[float | None], lexical: Sequence[float], weights: Weights = CURRENT
) -> list[float]:
    """Plain reciprocal rank fusion (the old method), for the benchmark's ablation."""
    rd = ranks(dense)
    rl = ranks([s if s > 0 else None for s in lexical])
    return [
        (1 / (weights.rrf_k + a) if a else 0.0) + (1 / (weights.rrf_k + b) if b else 0.0)
        for a, b in zip(rd, rl, strict=True)
    ]


def relevance(similarity: float | None, bm25: float, bm25_max: float) -> float:
    """An absolute relevance in [0, 1] for people and cut-offs (min_relevance).

    Noisy-OR of the cosine similarity (clipped at 0) and the share of the query's BM25 weight
    the chunk matches (`bm25_max`: what the chunk would score matching every query term once,
    at its own length): an unrelated chunk scores low whatever else was found, unlike a score
    normalised to the best hit.
    """
    sim = max(0.0, similarity or 0.0)
    coverage = min(1.0, bm25 / bm25_max) if bm25_max > 0 else 0.0
    return 1 - (1 - sim) * (1 - coverage)
