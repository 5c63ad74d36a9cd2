"""POST /v1/graph/import and GET /v1/graph/export: the official memory server's JSONL file in
and out over HTTP, round trip exact, bad files refused whole."""

from __future__ import annotations

import json
from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.conftest import table_counts

FILE = (
    '{"type":"entity","name":"Alice","entityType":"person","observations":["Works on billing",'
    '"Prefers Go"]}\n'
    '{"type":"entity","name":"Billing","entityType":"service","observations":[]}\n'
    "\n"
    '{"type":"relation","from":"Alice","to":"Billing","relationType":"works_on"}\n'
)


def test_import_then_export_round_trips_the_file(client: TestClient) -> None:
    done = client.post("/v1/graph/import", content=FILE.encode())
    assert done.status_code == 200, done.text
    assert done.json() == {"entities_created": 2, "relations_created": 1}
    again = client.post("/v1/graph/import", content=FILE.encode())
    assert again.json() == {"entities_created": 0, "relations_created": 0}
    out = client.get("/v1/graph/export")
    assert out.status_code == 200 and out.headers["content-type"].startswith("application/x-ndjson")
    lines = [json.loads(line) for line in out.text.splitlines()]
    assert lines == [json.loads(line) for line in FILE.splitlines() if line]
    scoped = client.post("/v1/graph/import?namespace=project:x", content=FILE.encode())
    assert scoped.json()["entities_created"] == 2
    assert client.get("/v1/graph/export", params={"namespace": "project:x"}).text == out.text


def test_a_bad_line_refuses_the_whole_file(client: TestClient) -> None:
    before = table_counts()
    bad = FILE + '{"type":"relation","from":"Alice","to":"Nobody","relationType":"knows"}\n'
    refused = client.post("/v1/graph/import", content=bad.encode())
    assert refused.status_code == 404
    assert refused.json() == {"success": False, "error": "Entity with name Nobody not found"}
    broken = client.post("/v1/graph/import", content=b'{"type":"entity"\n')
    assert broken.status_code == 422 and "line 1: not valid JSON" in broken.json()["error"]
    odd = client.post("/v1/graph/import", content=b'{"type":"note","text":"x"}\n')
    assert "line 1: not an entity or relation line" in odd.json()["error"]
    bad_ns = client.get("/v1/graph/export", params={"namespace": "no spaces"})
    assert bad_ns.status_code == 422 and "Invalid namespace" in bad_ns.json()["error"]
    assert table_counts() == before


def test_a_file_of_more_than_one_call_imports_whole_and_names_a_bad_line(
    client: TestClient,
) -> None:
    """A memory.jsonl of 2,500 entities was refused ("At most 1000 items per call"): moving
    over is one command whatever the file's size; a wrong line is named by its number."""
    people = [
        {"type": "entity", "name": f"Person {i}", "entityType": "person", "observations": []}
        for i in range(2_500)
    ]
    knows = [
        {"type": "relation", "from": f"Person {i}", "to": f"Person {i + 1}", "relationType": "k"}
        for i in range(1_200)
    ]
    body = "\n".join(json.dumps(line) for line in people + knows) + "\n"
    before = table_counts()
    wrong = body.replace('"Person 1500", "entityType": "person"', '"Person 1500", "entityType": 7')
    refused = client.post("/v1/graph/import", content=wrong.encode())
    assert refused.status_code == 422 and refused.json()["error"].startswith("line 1501: ")
    deep = '{"type":"entity","name":"D","entityType":"t","observations":' + "[" * 5_000
    nested = client.post("/v1/graph/import", content=(deep + "]" * 5_000 + "}\n").encode())
    assert nested.status_code == 422, nested.text
    assert nested.json()["error"] == "line 1: not valid JSON: nested too deeply to read"
    assert table_counts() == before
    done = client.post("/v1/graph/import", content=body.encode())
    assert done.json() == {"entities_created": 2_500, "relations_created": 1_200}
    exported = client.get("/v1/graph/export").text.splitlines()
    assert len(exported) == 3_700


def test_a_call_past_the_database_s_lock_table_is_refused_with_a_reason() -> None:
    """A transaction that holds more locks than the server has room for (a graph import of
    20,000 entities once did) was a 500 with "see the server log": it is SystemRefused (HTTP
    503) that says what ran out and what to do, and nothing of it is written."""
    from sqlalchemy import text

    from memsys.db import session_scope
    from memsys.errors import SystemRefused

    many = text("SELECT count(pg_advisory_xact_lock(k)) FROM generate_series(1, 100000) AS k")
    with pytest.raises(SystemRefused) as refused, session_scope() as s:
        s.execute(many)
    assert "ran out of shared memory" in str(refused.value)
    assert "send the items in parts" in str(refused.value)


def test_an_import_larger_than_the_lock_table_imports_whole(client: TestClient) -> None:
    """A file of more than about 6,000 entities was refused with 503 "ran out of shared
    memory": the import took a lock per entity, observation and relation, held to its
    commit, past max_locks_per_transaction. It writes alone in its namespace now, under one
    lock, whatever the file's size."""
    n = 8_000
    lines = [
        {"type": "entity", "name": f"Host {i}", "entityType": "host",
         "observations": [f"rack {i // 50}"] if i % 10 == 0 else []}
        for i in range(n)
    ] + [
        {"type": "relation", "from": f"Host {i}", "to": f"Host {i + 1}", "relationType": "next"}
        for i in range(0, n - 1, 2)
    ]  # fmt: skip
    body = "".join(json.dumps(line) + "\n" for line in lines).encode()
    done = client.post("/v1/graph/import", content=body)
    assert done.status_code == 200, done.text
    assert done.json() == {"entities_created": n, "relations_created": n // 2}
    graph = client.get("/v1/graph/export").text.splitlines()
    assert len(graph) == n + n // 2
    opened = client.post("/v1/graph/open", json={"names": ["Host 10"]}).json()
    assert opened["entities"][0]["observations"] == ["rack 0"]
    assert opened["relations"] == [{"from": "Host 10", "to": "Host 11", "relationType": "next"}]


def test_a_graph_import_over_the_limit_is_413_naming_the_setting(
    client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """POST /v1/import answers a body over MEMSYS_MAX_IMPORT_BYTES 413 and names the setting;
    POST /v1/graph/import answered its own (fixed) limit 422, a status that says the file's
    lines are wrong, and took any body up to 64 MiB whatever the setting said. Now the same
    413, whether the Content-Length says so or the body only turns out so as it comes, and
    nothing imported."""
    from memsys.api.graph_io import MAX_BODY
    from memsys.config import get_settings

    before = table_counts()
    body = FILE.encode()
    monkeypatch.setenv("MEMSYS_MAX_IMPORT_BYTES", str(len(body) - 1))
    get_settings.cache_clear()
    try:
        declared = client.post("/v1/graph/import", content=body)
        streamed = client.post("/v1/graph/import", content=iter([body[:50], body[50:]]))
        for answer in (declared, streamed):
            assert answer.status_code == 413, answer.text
            error = answer.json()["error"]
            assert f"over the {len(body) - 1}-byte limit of a graph import" in error
            assert "MEMSYS_MAX_IMPORT_BYTES" in error and "nothing was imported" in error
        assert table_counts() == before
        monkeypatch.setenv("MEMSYS_MAX_IMPORT_BYTES", str(len(body)))
        get_settings.cache_clear()
        assert client.post("/v1/graph/import", content=body).status_code == 200  # at the limit
    finally:
        monkeypatch.delenv("MEMSYS_MAX_IMPORT_BYTES")
        get_settings.cache_clear()
    # The graph file is read whole into memory: past MAX_BODY it is refused whatever the
    # setting (4 GiB by default), with the same status.
    huge = client.post("/v1/graph/import", content=b" " * (MAX_BODY + 1))
    assert huge.status_code == 413 and f"over the {MAX_BODY}-byte limit" in huge.json()["error"]


def test_a_graph_import_names_the_aged_memories_it_brings_back(
    client: TestClient, tmp_path: Any
) -> None:
    """An imported observation whose text an aged memory holds is linked to that memory
    and brings it back active (as memory_store does); the answer lists it in `revived`
    and `memsys graph import` prints it."""
    from datetime import UTC, datetime, timedelta

    from memsys.services import maintain
    from tests.cli.helpers import run as cli

    texts = [
        "Olga rotates the staging database credentials on the first Monday of each month",
        "Pavel owns the release calendar and freezes merges two days before each release",
    ]
    stored = [
        client.post("/v1/memories", json={"content": t, "memory_type": "configuration"}).json()
        for t in texts
    ]
    maintain.run(now=datetime.now(UTC) + timedelta(days=100))
    lines = [
        json.dumps({"type": "entity", "name": n, "entityType": "person", "observations": [t]})
        for n, t in zip(["Olga", "Pavel"], texts, strict=True)
    ]
    done = client.post("/v1/graph/import", content=lines[0].encode())
    assert done.json() == {
        "entities_created": 1,
        "relations_created": 0,
        "revived": [stored[0]["id"]],
    }
    path = tmp_path / "pavel.jsonl"
    path.write_text(lines[1] + "\n")
    shown = cli("graph", "import", str(path))
    assert shown.exit_code == 0, shown.stderr
    assert f"{stored[1]['id']}: aged, made active again" in shown.stdout
