"""The REST API under /v1: status codes, the error body, auth, and MCP at /mcp over HTTP."""

from __future__ import annotations

import json
import socket
import tempfile
import threading
import time
from pathlib import Path

import anyio
import pytest
import uvicorn
from fastapi.testclient import TestClient
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from memsys.api.app import create_app
from memsys.api.server import check_bind
from memsys.config import get_settings
from memsys.errors import InvalidInput
from tests.conftest import table_counts
from tests.factories import write_docs

BASE = "http://127.0.0.1:8700"
# Missing, but inside the index roots the tests allow (outside them the answer is the same
# 422 whether a path exists or not: tests/services/test_documents.py).
MISSING = f"{tempfile.gettempdir()}/memsys-no-such-folder"
PYPROJECT = Path(__file__).resolve().parents[2] / "pyproject.toml"


def test_health_checks_the_database(client: TestClient) -> None:
    body = client.get("/v1/health").json()
    assert body["status"] == "ok" and body["schema"] == body["head"]


def test_store_recall_forget_round_trip(client: TestClient) -> None:
    created = client.post(
        "/v1/memories", json={"content": "The CI runs on two cores", "memory_type": "fact"}
    )
    assert created.status_code == 201
    memory_id = created.json()["id"]
    duplicate = client.post("/v1/memories", json={"content": "The CI runs on two cores"})
    assert duplicate.status_code == 200 and duplicate.json()["duplicate"]
    recalled = client.post("/v1/memories/recall", json={"query": "how many CPUs does CI have"})
    assert recalled.status_code == 200
    assert recalled.json()["memories"][0]["id"] == memory_id
    assert client.get("/v1/memories/count").json()["count"] == 1
    listed = client.get("/v1/memories", params={"limit": 5, "memory_type": "fact"}).json()
    assert listed["total"] == 1 and listed["memories"][0]["id"] == memory_id
    gone = client.delete(f"/v1/memories/{memory_id}")
    assert gone.status_code == 200 and gone.json()["deleted_ids"] == [memory_id]
    assert client.delete(f"/v1/memories/{memory_id}").status_code == 404


def test_context_and_namespaces(client: TestClient) -> None:
    client.post(
        "/v1/memories", json={"content": "Always pin dependencies", "memory_type": "golden_rule"}
    )
    ctx = client.post("/v1/memories/context", json={"token_budget": 40}).json()
    assert ctx["golden_rule_count"] == 1 and ctx["token_estimate"] <= 40
    names = client.get("/v1/namespaces").json()
    assert [n["namespace"] for n in names["namespaces"]] == ["global"]


@pytest.mark.parametrize(
    ("method", "path", "payload", "status", "message"),
    [
        ("post", "/v1/memories", {"content": ""}, 422, "Content cannot be empty"),
        (
            "post",
            "/v1/memories",
            {"content": "x", "memory_type": "mood"},
            422,
            "Invalid memory type: mood",
        ),
        (
            "post",
            "/v1/memories",
            {"content": "x", "importance": 7},
            422,
            "importance must be between",
        ),
        ("post", "/v1/memories", {"nothing": 1}, 422, "content: Field required"),
        ("post", "/v1/memories/recall", {"query": "  "}, 422, "Query cannot be empty"),
        (
            "post",
            "/v1/memories/recall",
            {"query": "x", "n_results": 99},
            422,
            "n_results must be between 1 and 50",
        ),
        (
            "post",
            "/v1/memories/recall",
            {"query": "x", "namespace": "ghost"},
            404,
            "Namespace not found: ghost",
        ),
        ("post", "/v1/search", {"query": ""}, 422, "Query cannot be empty"),
        (
            "post",
            "/v1/search/budget",
            {"query": "x", "max_tokens": 0},
            422,
            "max_tokens must be between",
        ),
        (
            "post",
            "/v1/documents/index-file",
            {"file_path": f"{MISSING}/x.md"},
            404,
            f"File not found: {MISSING}/x.md",
        ),
        (
            "post",
            "/v1/documents/index-file",
            {"file_path": str(PYPROJECT)},
            422,
            "Unsupported file type: .toml",
        ),
        ("post", "/v1/documents/index-directory", {"dir_path": " "}, 422, "path cannot be empty"),
        (
            "post",
            "/v1/memories",
            {"content": "x" * 32001},
            422,
            "Content is too long: 32001 characters (limit 32000",
        ),
        (
            "post",
            "/v1/memories",
            {"content": "x", "metadata": {"blob": "y" * 70000}},
            422,
            "Metadata is too large",
        ),
        (
            "post",
            "/v1/memories",
            {"content": "x", "tags": [f"t{i}" for i in range(51)]},
            422,
            "Too many tags: 51 (limit 50)",
        ),
        ("post", "/v1/memories/forget", {"input_value": "  "}, 422, "Query cannot be empty"),
        (
            "put",
            "/v1/preferences/editor",
            {"value": "vim", "namespace": "project:x"},
            422,
            "namespace: goes in the query string (?namespace=…), not in the body",
        ),
        (
            "post",
            "/v1/documents/index-directory",
            {"dir_path": MISSING},
            404,
            f"Directory not found: {MISSING}",
        ),
        ("post", "/v1/documents/clear", {"confirm": False}, 422, "Safety check: Set confirm=True"),
        ("get", "/v1/preferences/theme", None, 404, "Namespace not found: global"),
    ],
)
def test_bad_requests_get_a_clear_error_and_change_nothing(
    client: TestClient, method: str, path: str, payload, status: int, message: str
) -> None:
    before = table_counts()
    response = client.request(method, path, json=payload)
    assert response.status_code == status, response.text
    body = response.json()
    assert body["success"] is False and message in body["error"]
    assert table_counts() == before


def test_golden_rules_are_kept_unless_forced(client: TestClient) -> None:
    rule = client.post(
        "/v1/memories", json={"content": "Never push to main", "memory_type": "golden_rule"}
    ).json()["id"]
    kept = client.delete(f"/v1/memories/{rule}").json()
    assert kept["deleted_count"] == 0 and kept["protected_ids"] == [rule]
    assert client.get("/v1/memories/count").json()["count"] == 1
    gone = client.delete(f"/v1/memories/{rule}", params={"force": True}).json()
    assert gone["deleted_ids"] == [rule]


def test_documents_index_search_and_delete(client: TestClient, tmp_path) -> None:
    files = write_docs(tmp_path)
    out = client.post(
        "/v1/documents/index-directory",
        json={"dir_path": str(tmp_path), "namespace": "docs", "async_mode": False},
    ).json()
    assert out["files_indexed"] == 4 and out["failed_files"] == []
    found = client.post(
        "/v1/search/filtered",
        json={"query": "token expiry", "filters": {"namespace": "docs", "doc_type": "document"}},
    ).json()
    assert found["results"][0]["metadata"]["header_path"] == "Configuration > Authentication"
    budget = client.post("/v1/search/budget", json={"query": "deploy", "max_tokens": 25}).json()
    assert budget["tokens_used"] <= 25
    stats = client.get("/v1/documents/stats").json()
    assert stats["unique_sources"] == 4 and stats["pending_embeddings"] == 0
    deleted = client.post("/v1/documents/delete-file", json={"source_file": str(files["auth"])})
    assert deleted.status_code == 200 and deleted.json()["deleted_count"] == 3
    cleared = client.post("/v1/documents/clear", json={"confirm": True}).json()
    assert cleared["documents_deleted"] == 3


def test_index_directory_of_a_folder_found_empty_keeps_its_files(
    client: TestClient, tmp_path
) -> None:
    files = write_docs(tmp_path)
    again = {"dir_path": str(tmp_path), "namespace": "mnt", "async_mode": False}
    client.post("/v1/documents/index-directory", json=again)
    for path in files.values():  # its disk not mounted: the folder looks emptied
        path.unlink()
    kept = client.post("/v1/documents/index-directory", json=again).json()
    assert len(kept["kept_files"]) == 4 and "force=true" in kept["warning"]
    assert kept["removed_files"] == []
    forced = client.post("/v1/documents/index-directory", json={**again, "force": True}).json()
    assert len(forced["removed_files"]) == 4 and forced["warning"] is None


def test_preferences_over_rest(client: TestClient) -> None:
    first = client.put("/v1/preferences/editor", json={"value": "vim"})
    assert first.status_code == 200 and first.json()["version"] == 1
    client.put("/v1/preferences/editor", json={"value": "helix"})
    assert client.get("/v1/preferences/editor").json()["value"] == "helix"
    as_of = first.json()["valid_from"]
    assert client.get("/v1/preferences/editor", params={"as_of": as_of}).json()["value"] == "vim"
    history = client.get("/v1/preferences/editor/history").json()
    assert [v["value"] for v in history["versions"]] == ["vim", "helix"]
    listing = client.get("/v1/preferences").json()
    assert listing["total"] == 1
    missing = client.get("/v1/preferences/theme")
    assert missing.status_code == 404 and "Preference not found: theme" in missing.json()["error"]


def test_openapi_docs_are_served(client: TestClient) -> None:
    spec = client.get("/openapi.json").json()
    assert "/v1/memories/recall" in spec["paths"] and "/v1/search/budget" in spec["paths"]
    assert client.get("/docs").status_code == 200
    # Every route is listed on /docs with a title and a description (POST /v1/import was
    # titled "Import " from its function's name, import_).
    for path, methods in spec["paths"].items():
        for method, route in methods.items():
            summary = route.get("summary", "")
            assert summary and summary == summary.strip(), (method, path, summary)
            assert route.get("description"), (method, path)


def test_a_token_is_required_when_configured(monkeypatch, embedder) -> None:
    monkeypatch.setenv("MEMSYS_API_TOKEN", "s3cret")
    get_settings.cache_clear()
    try:
        with TestClient(create_app(background=False), base_url=BASE) as c:
            assert c.get("/v1/health").status_code == 200  # liveness stays open
            denied = c.post("/v1/memories", json={"content": "x"})
            assert denied.status_code == 401 and "bearer token" in denied.json()["error"]
            wrong = c.get("/v1/memories/count", headers={"Authorization": "Bearer nope"})
            assert wrong.status_code == 401
            ok = c.get("/v1/memories/count", headers={"Authorization": "Bearer s3cret"})
            assert ok.status_code == 200
            assert c.post("/mcp", json={}).status_code == 401
    finally:
        monkeypatch.delenv("MEMSYS_API_TOKEN")
        get_settings.cache_clear()


def test_serving_beyond_loopback_needs_a_token(monkeypatch) -> None:
    check_bind("127.0.0.1")
    check_bind("localhost")
    check_bind("::1")
    refused = r"Refusing to serve on 0\.0\.0\.0 without MEMSYS_API_TOKEN"
    with pytest.raises(InvalidInput, match=refused):
        check_bind("0.0.0.0")
    monkeypatch.setenv("MEMSYS_API_TOKEN", "t")
    get_settings.cache_clear()
    try:
        check_bind("0.0.0.0")
    finally:
        monkeypatch.delenv("MEMSYS_API_TOKEN")
        get_settings.cache_clear()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_mcp_over_streamable_http_at_slash_mcp(embedder) -> None:
    port = free_port()
    server = uvicorn.Server(
        uvicorn.Config(
            create_app(background=False), host="127.0.0.1", port=port, log_level="warning"
        )
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.05)

    async def talk() -> None:
        with anyio.fail_after(60):
            async with (
                streamable_http_client(f"http://127.0.0.1:{port}/mcp") as (read, write),
                ClientSession(read, write) as session,
            ):
                await session.initialize()
                names = {t.name for t in (await session.list_tools()).tools}
                assert {"memory_store", "search", "preference_get"} <= names
                result = await session.call_tool("memory_store", {"content": "served over HTTP"})
                body = json.loads(result.content[0].text)
                assert body["success"] and body["data"]["id"].startswith("mem_")
                bad = await session.call_tool("search", {"query": ""})
                assert bad.is_error and bad.structured_content == {
                    "success": False,
                    "error": "Query cannot be empty",
                }

    try:
        anyio.run(talk)
    finally:
        server.should_exit = True
        thread.join(10)


def test_batch_store_is_all_or_nothing(client: TestClient) -> None:
    ok = client.post(
        "/v1/memories/batch",
        json={"memories": [{"content": "Cache TTL is 300 s"}, {"content": "Logs ship to Loki"}]},
    )
    assert ok.status_code == 200 and ok.json()["stored"] == 2
    refused = client.post(
        "/v1/memories/batch",
        json={"memories": [{"content": "Would be stored"}, {"content": "  "}]},
    )
    assert refused.status_code == 422 and "Content cannot be empty" in refused.json()["error"]
    assert client.get("/v1/memories/count").json()["count"] == 2
    assert client.post("/v1/memories/batch", json={"memories": []}).status_code == 422
