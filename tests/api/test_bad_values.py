"""Values PostgreSQL cannot store, or that no one means, are refused alike by every front end
with a clear message, and nothing is written."""

from __future__ import annotations

import re
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
    # Limits checked on the input, not by the database or a later check mid-call (those were
    # "Internal error"); free text no longer takes megabytes.
    (
        "memory_apply",
        {"memory_id": "mem_x", "context": "ci", "session_id": "s" * 129},
        "session_id is too long: 129 characters (limit 128)",
    ),
    (
        "memory_outcome",
        {"memory_id": "mem_x", "success": False, "error_msg": "e" * 9_000},
        "error_msg is too long: 9,000 characters (limit 8,000)",
    ),
    (
        "memory_observe",
        {"envelope": {"type": "command.exec", "cmd": "x" * 40_000, "exitCode": 0}},
        "Content is too long",
    ),
    (
        "add_episode",
        {"content": "c", "source_description": "s" * 70_000},
        "source_description is too long",
    ),
    (
        "debug_feedback",
        {"trace_id": "t", "verdict": "wrong", "expected_mode": "dreaming"},
        "Unknown mode: 'dreaming'",
    ),
    (
        "fact_set",
        {"entity": "e", "attribute": "a", "content": "c", "source_uri": "  "},
        "source_uri cannot be empty",
    ),
    ("preference_list", {"as_of": "9999-12-31T00:00:00Z"}, "is in the future"),
    ("debug_query_log", {"namespace": "typo"}, "Namespace not found: typo"),  # was []
    # a forget by id that was also given a query ignored the query
    (
        "memory_forget",
        {"memory_id": "mem_0000000000000001", "query": "old notes"},
        "Give one of memory_id, query or input_value, not memory_id and query",
    ),
    # text that shows nothing, where a name or a memory is meant
    ("memory_store", {"content": "\u200b\ufeff\x01"}, "no visible character"),
    ("memory_store", {"content": "x", "tags": ["a\nb"]}, "control character"),
    ("preference_set", {"key": "\u200b", "value": 1}, "no visible character"),
    ("preference_set", {"key": "abc\u202edef", "value": 1}, "control character"),
    (  # a future time was stored as when a memory happened (episodes refused it)
        "memory_store",
        {"content": "x", "reference_time": "2999-01-01T00:00:00Z"},
        "reference_time 2999-01-01T00:00:00+00:00 is in the future",
    ),
    # a time whose offset takes it before year 1 in UTC: stored as a year BC that no read
    # could give back (every recall of its namespace was "Internal error"), or a crash
    (
        "memory_store",
        {"content": "x", "reference_time": "0001-01-01T00:00:00+14:00"},
        "reference_time 0001-01-01T00:00:00+14:00 is outside the years 1-9999 in UTC",
    ),
    (
        "memory_query",
        {"query": "deploy", "as_of": "0001-01-01T00:00:00+14:00"},
        "outside the years 1-9999 in UTC",
    ),
    ("query_graph", {"query": "q", "as_of": "0001-01-01T00:00:00+01:00"}, "years 1-9999"),
    ("debug_why", {"trace_id": "t", "memory_id": " "}, "memory_id cannot be empty"),
    (
        "debug_feedback",
        {"trace_id": "t", "verdict": "wrong", "expected_ids": ["mem_a"] * 101},
        "at most 100 items",
    ),
    (
        "memory_inspect_graph",
        {"memory_id": "mem_x", "edge_types": ["no;such"]},
        "Invalid edge type: 'no;such'",
    ),
    # year 1 east of UTC is before year 1 in UTC: reading as of it raised OverflowError (500)
    ("memory_query", {"query": "x", "as_of": "0001-01-01T00:00:00+05:00"}, "years 1-9999"),
    ("preference_list", {"as_of": "0001-01-01T00:00:00+05:00"}, "outside the years 1-9999"),
    # an observation given as JSON text: nested past Python's reader it was a RecursionError
    # ("Internal error", HTTP 500); a key given twice kept the last without a word
    (
        "add_observations",
        {
            "observations": [
                {"entityName": "A", "contents": ['{"type":"doc.note","x":' + "[" * 100_000]}
            ]
        },
        "observation is not valid JSON (nested too deeply to read)",
    ),
    (
        "create_entities",
        {
            "entities": [
                {"name": "A", "entityType": "t", "observations": ['{"type":"a","type":"b"}']}
            ]
        },
        "the key 'type' is given twice",
    ),
    # memory_edge_forget matched a blank id or any text as a relation to nothing, without a word
    ("memory_edge_forget", {"memory_id": " "}, "memory_id cannot be empty"),
    (
        "memory_edge_forget",
        {"source_id": "mem_a", "target_id": "mem_b", "relation": "no;such"},
        "Invalid edge type: 'no;such'",
    ),
    # What an error echoes is bounded: a huge value is cut, a list of bad items summed up.
    ("memory_store", {"content": "x", "namespace": "n" * 100_000}, "Invalid namespace: 'nnn"),
    ("memory_store_batch", {"memories": [1] * 20_000}, "… and 19,990 more"),
]


@pytest.mark.parametrize(("name", "args", "message"), CASES, ids=[c[0] for c in CASES])
def test_refused_over_mcp_and_rest(
    client: TestClient, name: str, args: dict[str, Any], message: str
) -> None:
    before = table_counts()
    answer = call(BY_NAME[name], args)
    assert answer["success"] is False and message in answer["error"], answer
    assert len(answer["error"]) <= 2_000
    rest = BY_NAME[name].rest[0]
    path, body = "/v1" + rest.path, dict(args)
    for field in re.findall(r"{(\w+)(?::path)?}", rest.path):  # the path's own parameters
        value = quote(str(body.pop(field, "")), safe="")
        path = path.replace(f"{{{field}:path}}", value).replace(f"{{{field}}}", value)
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
    assert len(error) <= 2_000
    assert table_counts() == before


def test_refused_by_the_cli() -> None:
    before = table_counts()
    assert "--budget must be more than 0" in fails("maintain", "--budget", "nan")
    assert "--budget must be more than 0" in fails("maintain", "--budget", "inf")
    far = fails("token", "create", "t", "-n", "x", "--expires", "99999999d")
    assert "is too far in the future" in far
    assert "not valid Unicode" in fails("store", "lone \udcff byte")
    assert "offset must be 0 or more" in fails("list", "--offset", str(10**30))
    # JSON that gives a key twice: json kept the last without a word
    assert "the key 'a' is given twice" in fails("pref", "set", "k", '{"a": 1, "a": 2}')
    twice = '[{"name": "A", "name": "B", "entityType": "t", "observations": []}]'
    said = fails("graph", "create-entities", "--entities", twice)
    assert "the key 'name' is given twice" in said
    assert table_counts() == before


def test_a_url_that_is_not_utf8_is_refused_not_guessed_at(client: TestClient) -> None:
    """%FF in a path was read as U+FFFD: a preference stored under a key nobody typed."""
    before = table_counts()
    for url in ("/v1/preferences/%FF", "/v1/preferences/%ED%A0%80", "/v1/preferences/k?x=%FF"):
        answer = client.put(url, json={"value": 1})
        assert answer.status_code == 400, answer.text
        assert answer.json() == {
            "success": False,
            "error": f"The URL's {'query string' if '?' in url else 'path'} is not UTF-8 text",
        }
    assert client.put("/v1/preferences/caf%C3%A9", json={"value": 1}).status_code == 200
    # a key stored before keys had to show a character is still read by its name
    assert client.get("/v1/preferences/%E2%80%8B").status_code == 404
    assert client.get("/v1/preferences/café").json()["value"] == 1
    assert table_counts()["preference"] == before["preference"] + 1


def test_a_query_parameter_given_twice_is_refused_not_half_dropped(client: TestClient) -> None:
    """`?limit=1&limit=500` took the last value without a word (one of the two was dropped)."""
    for url in ("/v1/memories?limit=1&limit=500", "/v1/memories?namespace=a&namespace=b"):
        answer = client.get(url)
        assert answer.status_code == 422, answer.text
        assert "given more than once" in answer.json()["error"], answer.text
    assert client.get("/v1/memories?limit=1&offset=0").status_code == 200
    # a DELETE reads its query string the same way: nothing is removed
    before = table_counts()
    answer = client.delete("/v1/preferences/k?namespace=a&namespace=b")
    assert answer.status_code == 422 and "given more than once" in answer.text
    assert table_counts() == before


def test_an_offset_whose_plus_the_url_turned_into_a_space_says_so(client: TestClient) -> None:
    """`?as_of=…+01:00` typed unencoded reaches the server as `… 01:00`: the refusal said
    only "Use ISO 8601", with the offset looking right in the URL the caller wrote."""
    answer = client.get("/v1/preferences/editor?as_of=2026-01-01T10:00:00+01:00")
    assert answer.status_code == 422, answer.text
    assert "%2B" in answer.json()["error"], answer.text
    answer = client.get("/v1/preferences/editor?as_of=yesterday")
    assert answer.status_code == 422 and "%2B" not in answer.text
    taken = client.get("/v1/preferences/editor?as_of=2026-01-01T10:00:00%2B01:00")
    assert taken.status_code in (200, 404), taken.text  # read, not refused


def test_a_field_sent_in_the_body_that_goes_elsewhere_says_where(client: TestClient) -> None:
    """PUT /v1/preferences/{key} takes its namespace in the query string: one sent in the body
    was refused with 'Extra inputs are not permitted', which did not say where it goes."""
    before = table_counts()
    answer = client.put("/v1/preferences/editor", json={"value": "vim", "namespace": "p"})
    assert answer.status_code == 422, answer.text
    assert answer.json()["error"] == (
        "namespace: goes in the query string (?namespace=…), not in the body"
    )
    answer = client.put("/v1/preferences/editor", json={"value": "vim", "key": "editor"})
    assert answer.json()["error"] == "key: goes in the URL path, not in the body"
    assert table_counts() == before
    # a field no route takes is still refused as unknown
    answer = client.put("/v1/preferences/editor", json={"value": "vim", "colour": "red"})
    assert answer.status_code == 422 and "colour" in answer.json()["error"]
    assert client.put("/v1/preferences/editor?namespace=p", json={"value": "vim"}).is_success


def test_a_utc_offset_past_what_postgresql_reads_is_taken_in_utc(client: TestClient) -> None:
    """ISO 8601 (and the published date-time format) allows offsets up to 23:59; PostgreSQL
    reads none past 15:59. A time with such an offset went to the database as given: a
    DataError, HTTP 500 (and the keep-alive connection dropped). It is the same instant in
    UTC, read as such."""
    stored = client.post(
        "/v1/memories",
        json={"content": "Shipped the release", "reference_time": "2020-01-02T23:30:00+23:59"},
    )
    assert stored.status_code == 201, stored.text
    for path, as_of in (
        ("/v1/preferences", "2020-06-01T00:00:00+17:01"),
        ("/v1/preferences/editor", "2020-06-01T00:00:00+17:01"),
        ("/v1/graph", "2020-06-01T00:00:00-16:30"),
    ):
        answer = client.get(path, params={"as_of": as_of})
        assert answer.status_code in (200, 404), (path, answer.text)
    for name, args in (
        ("memory_query", {"query": "release", "as_of": "2020-06-01T00:00:00+20:00"}),
        ("add_episode", {"content": "Ann met Bo", "reference_time": "2020-01-01T00:00+16:00"}),
        (
            "fact_set",
            {
                "entity": "e",
                "attribute": "a",
                "content": "c",
                "valid_from": "2020-01-01T00:00-23:00",
            },
        ),
    ):
        assert call(BY_NAME[name], args)["success"] is True, name


def test_an_episode_of_json_nested_past_python_s_reader_is_read_as_text(
    client: TestClient,
) -> None:
    """add_episode reads JSON content as `key: value` lines; 15,000 brackets (within the
    content limit) were a RecursionError: "Internal error", HTTP 500."""
    deep = "[" * 15_000 + "]" * 15_000
    answer = client.post("/v1/graph/episodes", json={"content": deep})
    assert answer.status_code == 201, answer.text
    assert call(BY_NAME["add_episode"], {"content": "[" * 15_000})["success"] is True
