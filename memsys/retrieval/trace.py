"""A retrieval as its trace records it, and the two questions asked of traces: where did a
given chunk go (`locate`), and what changed between two runs of one query (`diff`).

Stored form (compact, ranks implicit in the order): `candidates` = every fused candidate,
best first, as [id, fused score]; `channels` = each channel's pool, best first, as
[fused rank, channel score] — the chunk is `candidates[fused rank - 1]`, so each id is
stored once (an id string stands in for a chunk that is not among the candidates) — plus
the lexical channel's term statistics under "terms"; `fusion` = the version, method and
weights used, the request (filters, limit, pool) and a digest of the query embedding.
`pools(record)` turns channels back into [id, score] lists. Pure functions: nothing here
touches the database.
"""

from __future__ import annotations

import hashlib
from typing import Any

import numpy as np

from memsys.retrieval.pipeline import Retrieval

CHANNELS = ("dense", "lexical", "graph", "neighbours")
# The stages of one retrieval, in the order they run; a diff names the first that changed.
STAGES = ("embed", *CHANNELS, "fusion", "dedupe", "output")
_SCORE_OF = {"dense": "similarity", "lexical": "bm25", "graph": "ppr", "neighbours": "share"}
DIGITS = 6


def digest(vector: np.ndarray) -> str:
    """A short fingerprint of the query embedding: a replay checks it got the same vector."""
    return hashlib.sha256(np.asarray(vector, dtype=np.float32).tobytes()).hexdigest()[:16]


def channels_of(found: Retrieval) -> dict[str, Any]:
    lexical = found.channels.get("lexical", {})
    fused_rank = {chunk_id: n for n, (chunk_id, _) in enumerate(found.ranked, start=1)}
    pools = {
        "dense": found.channels.get("dense", []),
        "lexical": lexical.get("hits", []),
        "graph": found.channels.get("graph", []),
        "neighbours": found.channels.get("neighbours", []),
    }
    out: dict[str, Any] = {
        name: [[fused_rank.get(c["id"], c["id"]), c[_SCORE_OF[name]]] for c in pool]
        for name, pool in pools.items()
    }
    out["terms"] = {k: v for k, v in lexical.items() if k != "hits"}
    return out


def pools(record: dict[str, Any]) -> dict[str, list[list[Any]]]:
    """Each channel's pool as [id, score], best first (stored ranks resolved to ids)."""
    candidates = record.get("candidates") or []
    channels = record.get("channels") or {}

    def chunk(ref: Any) -> Any:
        return candidates[ref - 1][0] if isinstance(ref, int) else ref

    return {name: [[chunk(r[0]), r[1]] for r in channels.get(name, [])] for name in CHANNELS}


def candidates_of(found: Retrieval) -> list[list[Any]]:
    return [[i, round(score, DIGITS)] for i, score in found.ranked]


def fusion_of(
    found: Retrieval, request: dict[str, Any], vector: np.ndarray | None
) -> dict[str, Any]:
    return {
        **found.fusion,
        "request": request,
        "duplicates": found.duplicates,
        "embedding": None if vector is None else digest(vector),
    }


def ranked(rows: list[Any]) -> list[dict[str, Any]]:
    """[[id, score], …] → [{"id", "score", "rank"}, …] for people and JSON readers."""
    return [{"id": r[0], "score": r[1], "rank": n} for n, r in enumerate(rows, start=1)]


def _position(rows: list[Any], chunk_id: str) -> tuple[int, float] | None:
    for n, row in enumerate(rows, start=1):
        if row[0] == chunk_id:
            return n, row[1]
    return None


def returned_pairs(retrieved: list[dict[str, Any]]) -> list[list[Any]]:
    return [[r.get("id"), r.get("score")] for r in retrieved]


def locate(record: dict[str, Any], chunk_id: str) -> dict[str, Any]:
    """Which channels saw `chunk_id` and where, its fused rank, and the stage that dropped it
    (or the rank it was returned at). `record` holds a trace's stored fields."""
    channels = pools(record)
    seen: dict[str, Any] = {}
    for name in CHANNELS:
        pool = channels[name]
        at = _position(pool, chunk_id)
        seen[name] = (
            {"rank": at[0], "score": at[1], _SCORE_OF[name]: at[1]}
            if at
            else {"rank": None, "pool": len(pool)}
        )
    fused = _position(record.get("candidates") or [], chunk_id)
    returned = _position(returned_pairs(record.get("retrieved") or []), chunk_id)
    fusion = record.get("fusion") or {}
    limit = (fusion.get("request") or {}).get("limit")
    out: dict[str, Any] = {
        "memory_id": chunk_id,
        "channels": seen,
        "fused_rank": fused[0] if fused else None,
        "fused_score": fused[1] if fused else None,
        "returned_rank": returned[0] if returned else None,
    }
    seated = fusion.get("seated") or {}
    if returned and seated.get("id") == chunk_id:
        out["stage"] = "returned"
        out["reason"] = (
            f"returned at rank {returned[0]}: the entry seat moved it up from place "
            f"{seated['from']} (the walk's best entry about a name it went through)"
        )
    elif returned:
        out["stage"], out["reason"] = "returned", f"returned at rank {returned[0]}"
    elif not fused:
        out["stage"] = "retrieval"
        out["reason"] = "no channel had it in its candidate pool"
    elif chunk_id in (fusion.get("duplicates") or []):
        out["stage"] = "dedupe"
        out["reason"] = "left out: a better-ranked chunk has the same text"
    elif limit is not None and _hit_position(record, fused[0]) > limit:
        out["stage"] = "fusion"
        out["reason"] = f"fused rank {fused[0]}, below the cut at {limit} results"
    else:
        out["stage"] = "output"
        out["reason"] = (
            f"fused rank {fused[0]} made the top {limit}, but the tool's own cut "
            "(min_relevance, token budget or content) left it out"
        )
    return out


def _hit_position(record: dict[str, Any], fused_rank: int) -> int:
    """Place among the hits of a candidate at `fused_rank`: duplicates above it take none."""
    dropped = set((record.get("fusion") or {}).get("duplicates") or [])
    above = (record.get("candidates") or [])[: fused_rank - 1]
    return fused_rank - sum(1 for row in above if row[0] in dropped)


def _list_diff(original: list[Any], replay: list[Any]) -> dict[str, Any]:
    """Added, removed, moved and rescored ids between two ranked [id, score] lists."""
    before = {r[0]: (n, r[1]) for n, r in enumerate(original, start=1)}
    after = {r[0]: (n, r[1]) for n, r in enumerate(replay, start=1)}
    out: dict[str, Any] = {}
    added = [{"id": i, "rank": r, "score": s} for i, (r, s) in after.items() if i not in before]
    removed = [{"id": i, "rank": r, "score": s} for i, (r, s) in before.items() if i not in after]
    moved = [
        {"id": i, "original_rank": before[i][0], "replay_rank": r}
        for i, (r, _) in after.items()
        if i in before and before[i][0] != r
    ]
    rescored = [
        {"id": i, "original": before[i][1], "replay": s}
        for i, (_, s) in after.items()
        if i in before and before[i][1] != s
    ]
    for key, value in (("added", added), ("removed", removed), ("moved", moved)):
        if value:
            out[key] = value
    if rescored:
        out["rescored"] = rescored
    return out


def _stage_lists(record: dict[str, Any]) -> dict[str, Any]:
    return {
        **pools(record),
        "fusion": record.get("candidates") or [],
        "output": returned_pairs(record.get("retrieved") or []),
    }


def diff(original: dict[str, Any], replay: dict[str, Any]) -> dict[str, Any]:
    """Field-by-field differences, stage by stage (S004 _compare_traces, extended to every
    channel's candidates, ranks and scores); `changed_stage` is the first stage that differs."""
    stages: dict[str, Any] = {}
    o_fusion, r_fusion = original.get("fusion") or {}, replay.get("fusion") or {}
    if o_fusion.get("embedding") != r_fusion.get("embedding"):
        stages["embed"] = {
            "original": o_fusion.get("embedding"),
            "replay": r_fusion.get("embedding"),
        }
    o_lists, r_lists = _stage_lists(original), _stage_lists(replay)
    for stage in (*CHANNELS, "fusion", "output"):
        changes = _list_diff(o_lists[stage], r_lists[stage])
        if changes:
            stages[stage] = changes
    o_terms = (original.get("channels") or {}).get("terms")
    r_terms = (replay.get("channels") or {}).get("terms")
    if o_terms != r_terms:
        stages.setdefault("lexical", {})["terms"] = {"original": o_terms, "replay": r_terms}
    if sorted(o_fusion.get("duplicates") or []) != sorted(r_fusion.get("duplicates") or []):
        stages["dedupe"] = {
            "original": o_fusion.get("duplicates"),
            "replay": r_fusion.get("duplicates"),
        }
    fields = {
        name: {"original": original.get(name), "replay": replay.get(name)}
        for name in ("mode_detected", "stores_queried", "output", "verification", "error")
        if original.get(name) != replay.get(name)
    }
    changed = next((s for s in STAGES if s in stages), None)
    if changed is None and fields:
        changed = "output"
    return {
        "identical": not stages and not fields,
        "changed_stage": changed,
        "stages": stages,
        "fields": fields,
    }
