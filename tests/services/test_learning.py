"""TRY/LEARN: confidence moves by the documented bounded step, golden rules are earned."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from memsys.mcp.server import call
from memsys.operations import BY_NAME
from memsys.services.learning import next_confidence
from tests.cli.helpers import fails, run_json
from tests.conftest import table_counts
from tests.factories import store


def op(name: str, **args: Any) -> Any:
    answer = call(BY_NAME[name], args)
    assert answer["success"], answer
    return answer["data"]


def test_the_step_is_bounded_and_monotone() -> None:
    assert next_confidence(0.4, True) == 0.5  # S001's example
    assert next_confidence(0.95, True) == 1.0 and next_confidence(0.1, False) == 0.0
    levels = [i / 20 for i in range(21)]
    assert all(next_confidence(c, True) >= c >= next_confidence(c, False) for c in levels)


def test_outcomes_earn_a_golden_rule_and_the_history_adds_up(embedder: Any) -> None:
    memory = store(content="Run migrations before deploying", memory_type="procedure").id
    assert op("memory_apply", memory_id=memory, context="deploy of v2")["event_id"] > 0
    seen = [op("memory_outcome", memory_id=memory, success=True) for _ in range(6)]
    assert [s["new_confidence"] for s in seen] == [0.4, 0.5, 0.6, 0.7, 0.8, 0.9]
    assert [s["promoted"] for s in seen] == [False] * 5 + [True]
    # A golden rule is protected from forget now.
    kept = op("memory_forget", memory_id=memory)
    assert kept["protected_ids"] == [memory]
    failed = op("memory_outcome", memory_id=memory, success=False, error_msg="schema drift")
    assert (failed["old_confidence"], failed["new_confidence"]) == (0.9, 0.75)

    history = op("validation_history", memory_id=memory)
    assert history["summary"] == {
        "total_applications": 1,
        "success_count": 6,
        "failure_count": 1,
        "success_rate": 0.8571,
    }
    assert history["events"][0]["error_msg"] == "schema drift"  # newest first
    only = op("validation_history", memory_id=memory, event_type="applied")["events"]
    assert [e["context"] for e in only] == ["deploy of v2"]


def test_concurrent_outcomes_are_not_lost(embedder: Any) -> None:
    memory = store(content="Pin the base image digest").id

    def succeed(_: int) -> Any:
        return call(BY_NAME["memory_outcome"], {"memory_id": memory, "success": True})

    with ThreadPoolExecutor(5) as pool:
        list(pool.map(succeed, range(5)))
    final = op("validation_history", memory_id=memory)["events"][0]["new_confidence"]
    assert final == pytest.approx(0.8)  # 0.3 + 5 × 0.1: every outcome counted


def test_bad_outcomes_change_nothing_and_the_cli_speaks_too(embedder: Any) -> None:
    memory = run_json("store", "Use UTC in logs")["id"]
    before = table_counts()
    assert "Memory not found" in fails("outcome", "mem_0000000000000000", "--success")
    assert "context cannot be empty" in fails("apply", memory, "  ")
    assert table_counts() == before
    learned = run_json("outcome", memory, "--failure", "--error-msg", "local time used")
    assert learned["new_confidence"] == 0.15
    assert run_json("validation", memory)["summary"]["failure_count"] == 1
