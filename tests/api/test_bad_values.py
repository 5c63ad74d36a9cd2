"""Values PostgreSQL cannot store, or that no one means, are refused alike by every front end
with a clear message, and nothing is written."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

import pytest
from fastapi.testclient import TestClient

from memsys.mcp.server import call
from memsys.operations import BY_NAME
from tests.cli.helpers import fails
from tests.conftest import table_counts


def nested(depth: int) -> Any:
    value: Any = "leaf"
    for _ in range(depth):
        value = {"k": value}
    return value


CASES = [
    ("memory_store", {"content": "half\x00way"}, "NUL character"),
    ("memory_store", {"content": "lone \ud800 surrogate"}, "not valid Unicode"),
    ("memory_store", {"content": "x", "metadata": {"a\x00": 1}}, "NUL character"),
    ("memory_store", {"content": "x", "metadata": nested(50)}, "nested more than 20"),
    ("memory_store", {"content": "x", "importance": 1e308}, "importance must be between"),
    # Python's JSON reads NaN and Infinity; PostgreSQL refused them mid-write (was a 500)
    ("memory_store", {"content": "x", "metadata": {"x": float("nan")}}, "not JSON numbers"),
    ("preference_set", {"key": "k", "value": [float("inf")]}, "not JSON numbers"),
    ("memory_recall", {"query": "q\x00"}, "NUL character"),
    ("memory_recall", {"query": "q", "n_results": 10**40}, "n_results must be between"),
    ("memory_list", {"offset": 10**30}, "offset must be 0 or more"),
    ("preference_set", {"key": "k", "value": ["\udfff"]}, "not valid Unicode"),
    # the published contract: what the OpenAPI document states is what is refused
    ("memory_edge_forget", {"edge_id": 2**63}, "edge_id must be between 1 and"),
    ("memory_edge_forget", {"edge_id": 2**53}, "edge_id must be between 1 and"),
    ("memory_diff", {"snapshot_a": "~nosuchuser/a.json"}, "~nosuchuser/a.json"),  # was 500
    ("preference_set", {"key": "a\tb", "value": 1}, "contains a control character"),
    ("preference_set", {"key": "k" * 65, "value": 1}, "too long: 65 characters (limit 64)"),
    ("preference_list", {"as_of": "yesterday"}, "Invalid as_of: 'yesterday'"),
    ("memory_store", {"content": "x", "reference_time": 0}, "Invalid reference_time: 0"),
]


@pytest.mark.parametrize(("name", "args", "message"), CASES, ids=[c[0] for c in CASES])
def test_refused_over_mcp_and_rest(
    client: TestClient, name: str, args: dict[str, Any], message: str
) -> None:
    before = table_counts()
    answer = call(BY_NAME[name], args)
    assert answer["success"] is False and message in answer["error"], answer
    rest = BY_NAME[name].rest[0]
    path = "/v1" + rest.path.replace("{key:path}", quote(str(args.get("key", ""))))
    body = {k: v for k, v in args.items() if k != "key"}
    if rest.method == "GET":
        response = client.get(path, params=body)
    else:
        # json= cannot carry a lone surrogate; send it escaped, as a JSON client would
        import json

        raw = json.dumps(body)
        response = client.request(
            rest.method, path, content=raw, headers={"content-type": "application/json"}
        )
    assert 400 <= response.status_code < 500, response.text
    error = response.json()["error"]
    assert message in error and "Traceback" not in error and "SELECT" not in error
    assert table_counts() == before


def test_refused_by_the_cli() -> None:
    before = table_counts()
    assert "not valid Unicode" in fails("store", "lone \udcff byte")
    assert "offset must be 0 or more" in fails("list", "--offset", str(10**30))
    assert table_counts() == before
