"""`memsys trace`: every recall leaves a trace that can be read, listed and judged."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from memsys.api.app import create_app
from tests.cli.helpers import fails, run_json


@pytest.fixture
def client(embedder: Any) -> Iterator[TestClient]:
    with TestClient(create_app(background=False), base_url="http://127.0.0.1:8700") as c:
        yield c


def test_a_recall_is_traced_listed_and_judged(client: TestClient) -> None:
    kept = run_json("store", "Backups run nightly at 02:00 UTC", "--type", "fact")["id"]
    other = run_json("store", "The office plant needs water on Mondays")["id"]
    recalled = run_json("recall", "when do backups run", "-k", "1")
    trace_id = recalled["trace_id"]

    shown = run_json("trace", "show", trace_id)
    assert shown["query"] == "when do backups run" and shown["operation"] == "memory_recall"
    assert [r["id"] for r in shown["retrieved"]] == [kept]
    assert shown["timings"]["total_ms"] > 0 and shown["feedback"] == []

    log = run_json("trace", "log", "--limit", "5")
    assert log["traces"][0]["id"] == trace_id and log["total"] >= 1

    judged = run_json(
        "trace",
        "feedback",
        trace_id,
        "wrong",
        "--expected",
        other,
        "--expected",
        kept,
        "--note",
        "wanted both",
    )
    assert judged["attribution"] == {other: "not returned", kept: {"returned_at_rank": 1}}
    again = client.get(f"/v1/debug/trace/{trace_id}").json()
    assert again["feedback"][0]["verdict"] == "wrong"
    assert again["feedback"][0]["note"] == "wanted both"

    assert "Trace not found: qry_nope" in fails("trace", "show", "qry_nope")
    missing = client.post("/v1/debug/trace/qry_nope/feedback", json={"verdict": "right"})
    assert missing.status_code == 404
    assert "verdict" in fails("trace", "feedback", trace_id, "meh")
    assert "limit must be between 1 and 500" in fails("trace", "log", "--limit", "0")
