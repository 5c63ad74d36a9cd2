"""REST and MCP as an attacker or a careless client would use them: every answer is the
envelope with a conventional code, foreign pages cannot reach memsys through a browser,
and nothing is written by a refused request."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

from memsys.api.app import create_app
from memsys.config import get_settings
from memsys.mcp.server import call
from memsys.operations import BY_NAME
from tests.conftest import table_counts

BASE = "http://127.0.0.1:8700"


def test_a_foreign_host_or_origin_is_refused_before_anything_runs(client: TestClient) -> None:
    before = table_counts()
    rebound = client.post(
        "/v1/memories", json={"content": "planted"}, headers={"Host": "evil.example:8811"}
    )
    assert rebound.status_code == 421 and "Host not allowed" in rebound.json()["error"]
    cross = client.post(
        "/v1/memories", json={"content": "planted"}, headers={"Origin": "https://evil.example"}
    )
    assert cross.status_code == 403 and "Origin not allowed" in cross.json()["error"]
    assert client.get("/v1/memories", headers={"Host": "evil.example"}).status_code == 421
    assert table_counts() == before
    local = client.get("/v1/memories/count", headers={"Origin": "http://localhost:3000"})
    assert local.status_code == 200


def test_the_bound_address_is_allowed_when_serving_beyond_loopback(embedder: Any) -> None:
    app = create_app(extra_hosts=["10.1.2.3", "10.1.2.3:*"], background=False)
    with TestClient(app, base_url="http://10.1.2.3:8700") as c:
        assert c.get("/v1/memories/count").status_code == 200
        assert c.get("/v1/memories/count", headers={"Host": "evil.example"}).status_code == 421


@pytest.mark.parametrize(
    ("method", "path", "kwargs", "status"),
    [
        ("post", "/v1/memories", {"content": b"{not json"}, 422),
        ("post", "/v1/memories", {"content": b'{"content": "\xff\xfe"}'}, 400),
        ("get", "/v1/nowhere", {}, 404),
        ("delete", "/v1/search", {}, 405),
    ],
)
def test_protocol_errors_use_the_envelope(
    client: TestClient, method: str, path: str, kwargs: dict[str, Any], status: int
) -> None:
    headers = {"content-type": "application/json"}
    response = client.request(method.upper(), path, headers=headers, **kwargs)
    assert response.status_code == status, response.text
    body = response.json()
    assert body["success"] is False and body["error"] and "detail" not in body


def test_an_unknown_path_or_method_is_named_with_where_to_look(client: TestClient) -> None:
    # They read only "Not Found" / "Method Not Allowed": which path, which method?
    missing = client.get("/v1/nowhere").json()["error"]
    assert missing == "No route GET /v1/nowhere: the routes are listed at /docs"
    wrong = client.delete("/v1/search").json()["error"]
    assert wrong == "DELETE is not a method of /v1/search: it takes POST"


def test_a_crash_is_a_500_envelope_without_sql_or_parameters(
    client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    from memsys.services import memories

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("SELECT secret FROM chunk WHERE content = 'private'")

    monkeypatch.setattr(memories, "count", broken)
    with TestClient(
        create_app(background=False), base_url=BASE, raise_server_exceptions=False
    ) as c:
        response = c.get("/v1/memories/count")
    assert response.status_code == 500
    assert response.json() == {"success": False, "error": "Internal error; see the server log"}


def test_the_bearer_scheme_is_case_insensitive(
    monkeypatch: pytest.MonkeyPatch, embedder: Any
) -> None:
    monkeypatch.setenv("MEMSYS_API_TOKEN", "s3cret")
    get_settings.cache_clear()
    try:
        with TestClient(create_app(background=False), base_url=BASE) as c:
            for scheme in ("bearer", "BEARER", "Bearer"):
                answer = c.get("/v1/memories/count", headers={"Authorization": f"{scheme} s3cret"})
                assert answer.status_code == 200, scheme
            assert (
                c.get("/v1/memories/count", headers={"Authorization": "Basic s3cret"}).status_code
                == 401
            )
    finally:
        monkeypatch.delenv("MEMSYS_API_TOKEN")
        get_settings.cache_clear()


def test_search_with_budget_filters_over_mcp(embedder: Any) -> None:
    call(BY_NAME["memory_store"], {"content": "Team A deploys with Helm", "namespace": "project:a"})
    call(BY_NAME["memory_store"], {"content": "Team B deploys with Helm", "namespace": "project:b"})
    answer = call(
        BY_NAME["search_with_budget"],
        {"query": "deploys with Helm", "max_tokens": 5000, "filters": {"namespace": "project:b"}},
    )
    assert answer["success"] is True
    assert {r["namespace"] for r in answer["data"]["results"]} == {"project:b"}


@pytest.mark.parametrize("path", ["/v1/import", "/v1/graph/import"])
def test_an_endless_body_is_refused_as_it_arrives(embedder: Any, path: str) -> None:
    """/dev/zero sent as a file: POST /v1/import spooled it to the disk for as long as the
    client sent (then "not JSON"), POST /v1/graph/import read it whole into memory before
    it compared its size with the limit, and neither closed the connection after refusing
    it (the server read and dropped what the client went on sending). Now the first NUL
    (no JSON text has one) ends the request and its connection; nothing is written."""
    import httpx

    from tests.security.helpers import http_server

    sent = 0

    def zeros() -> Any:
        nonlocal sent
        while sent < 256 << 20:  # a bound for the test: the client stops here
            sent += 1 << 16
            yield bytes(1 << 16)

    before = table_counts()
    with http_server() as url, httpx.Client(timeout=60) as client:
        try:
            response = client.post(url + path, content=zeros())
        except httpx.TransportError:  # closed before the client had sent it all: fine
            pass
        else:
            assert response.status_code == 422, response.text
            assert response.json()["success"] is False
    assert sent <= 16 << 20, f"{sent:,} bytes read"
    assert table_counts() == before


@pytest.mark.parametrize(
    ("method", "path", "body", "message"),
    [
        ("post", "/v1/memories", b'{"content": "a", "content": "b"}', "the key 'content' is given"),
        ("post", "/v1/memories", b'{"content": "a", "metadata": {"k": 1, "k": 2}}', "key 'k'"),
        ("put", "/v1/preferences/editor", b'{"value": 1, "value": 2}', "key 'value' is given"),
        ("post", "/v1/migrate", b'{"dry_run": true, "dry_run": false}', "key 'dry_run'"),
        (
            "post",
            "/v1/memories",
            b'{"content": "a", "importance": ' + b"9" * 5_000 + b"}",
            "digits",
        ),
    ],
)
def test_a_json_body_names_each_key_once(
    client: TestClient, method: str, path: str, body: bytes, message: str
) -> None:
    """A key given twice kept the last without a word (an argument dropped: the first
    content, a metadata value, a dry run turned into a migration); an integer of more
    digits than Python reads was said to be "not UTF-8 text, or nested too deeply"."""
    before = table_counts()
    headers = {"content-type": "application/json"}
    response = client.request(method.upper(), path, content=body, headers=headers)
    assert response.status_code == 422, response.text
    assert message in response.json()["error"] and "sys." not in response.json()["error"]
    assert table_counts() == before


def test_a_missing_body_is_named_as_such(client: TestClient) -> None:
    """POST without a body (routes whose fields are all optional too) said
    "request: Field required": neither that a body is wanted nor what it should be."""
    for path in ("/v1/lifecycle/decay", "/v1/facts/fact_x/verify", "/v1/memories"):
        response = client.post(path)
        assert response.status_code == 422, response.text
        error = response.json()["error"]
        assert error == "The body is missing: send the input as a JSON object (at least {})"
