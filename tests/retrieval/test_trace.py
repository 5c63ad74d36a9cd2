"""The trace's own logic on recorded traces: where a chunk went, what differs between runs."""

from __future__ import annotations

from typing import Any

from memsys.retrieval import trace as shape


def record(**changes: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "channels": {
            # Stored as [fused rank, score]: a=1, c=2, b=3, d=4, e=5 in `candidates`.
            "dense": [[1, 0.9], [3, 0.8], [2, 0.7], [4, 0.6]],
            "lexical": [[3, 3.2], [1, 1.1]],
            "graph": [],
            "neighbours": [[5, 0.2], ["gone", 0.1]],  # a chunk no longer among candidates
            "terms": {"terms": {"backup": 2}, "doc_count": 5, "avgdl": 4.0},
        },
        "candidates": [["a", 2.1], ["c", 1.9], ["b", 1.5], ["d", 0.4], ["e", 0.1]],
        "fusion": {"version": "zfuse-2", "request": {"limit": 2}, "duplicates": ["c"]},
        "retrieved": [{"id": "a", "score": 0.9}],
        "output": None,
    }
    return {**base, **changes}


def test_pools_resolve_stored_ranks_to_ids() -> None:
    pools = shape.pools(record())
    assert pools["dense"] == [["a", 0.9], ["b", 0.8], ["c", 0.7], ["d", 0.6]]
    assert pools["neighbours"] == [["e", 0.2], ["gone", 0.1]]
    assert shape.locate(record(), "gone")["channels"]["neighbours"]["rank"] == 2


def test_locate_names_the_stage_for_each_fate() -> None:
    trace = record()
    assert shape.locate(trace, "a")["stage"] == "returned"
    assert shape.locate(trace, "a")["channels"]["lexical"]["rank"] == 2
    assert shape.locate(trace, "c")["stage"] == "dedupe"
    # b is 3rd by fusion but 2nd among hits (c above it was a duplicate): within the limit,
    # so the tool's own cut (min_relevance here) dropped it.
    assert shape.locate(trace, "b")["stage"] == "output"
    lost = shape.locate(trace, "d")
    assert lost["stage"] == "fusion" and lost["fused_rank"] == 4
    assert lost["channels"]["lexical"] == {"rank": None, "pool": 2}
    assert shape.locate(trace, "zz")["stage"] == "retrieval"


def test_locate_says_when_the_entry_seat_placed_a_hit() -> None:
    trace = record(
        fusion={"version": "zfuse-5", "request": {"limit": 2}, "seated": {"id": "b", "from": 9}},
        retrieved=[{"id": "a", "score": 0.9}, {"id": "b", "score": 0.3}],
    )
    seated = shape.locate(trace, "b")
    assert seated["stage"] == "returned" and seated["returned_rank"] == 2
    assert "entry seat moved it up from place 9" in seated["reason"]
    assert shape.locate(trace, "a")["reason"] == "returned at rank 1"


def test_diff_of_equal_traces_is_empty() -> None:
    assert shape.diff(record(), record()) == {
        "identical": True,
        "changed_stage": None,
        "stages": {},
        "fields": {},
    }


def test_diff_reports_the_first_stage_that_changed() -> None:
    # Fusion order changes too (b first), so every stored rank points elsewhere: the dense
    # pool, the same chunks with the same scores, must not show as changed.
    changed = record(
        channels={
            **record()["channels"],
            "dense": [[2, 0.9], [1, 0.8], [3, 0.7], [4, 0.6]],
            "lexical": [[2, 1.3], [1, 3.2]],
            "neighbours": [[5, 0.2], ["gone", 0.1]],
        },
        candidates=[["b", 2.2], ["a", 2.1], ["c", 1.9], ["d", 0.4], ["e", 0.1]],
        retrieved=[{"id": "b", "score": 0.95}],
    )
    out = shape.diff(record(), changed)
    assert out["changed_stage"] == "lexical" and not out["identical"]
    lexical = out["stages"]["lexical"]
    assert lexical["moved"] == [
        {"id": "a", "original_rank": 2, "replay_rank": 1},
        {"id": "b", "original_rank": 1, "replay_rank": 2},
    ]
    assert lexical["rescored"] == [{"id": "a", "original": 1.1, "replay": 1.3}]
    assert out["stages"]["output"]["added"] == [{"id": "b", "rank": 1, "score": 0.95}]
    assert out["stages"]["output"]["removed"] == [{"id": "a", "rank": 1, "score": 0.9}]
    assert "dense" not in out["stages"]


def test_a_different_query_embedding_is_the_first_change() -> None:
    other = record(fusion={**record()["fusion"], "embedding": "ffff"})
    assert shape.diff(record(), other)["changed_stage"] == "embed"
