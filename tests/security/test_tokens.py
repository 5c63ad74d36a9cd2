"""Scoped tokens: created with a secret shown once and stored hashed, listed without secrets,
revoked and expired tokens refused; the admin token keeps working; the scheme is
case-insensitive."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import text

from memsys.api.app import create_app
from memsys.config import get_settings
from memsys.db import get_engine
from tests.cli.helpers import fails, run_json
from tests.security.helpers import ACME, run

BASE = "http://127.0.0.1:8700"


@pytest.fixture
def client(embedder: Any) -> Iterator[TestClient]:
    with TestClient(create_app(background=False), base_url=BASE) as c:
        yield c


def test_cli_creates_lists_and_revokes_tokens(client: TestClient) -> None:
    made = run_json(
        "token", "create", "ci bot", "-n", "project:acme*", "--write", "--expires", "30d"
    )
    secret = made["secret"]
    assert made["mode"] == "read-write" and made["namespaces"] == ["project:acme*"]
    with get_engine().connect() as conn:
        stored = conn.execute(text("SELECT secret_sha256 FROM api_token")).scalar_one()
    assert stored == hashlib.sha256(secret.encode()).hexdigest()
    listed = run_json("token", "list")
    assert [t["id"] for t in listed["tokens"]] == [made["id"]]
    assert secret not in json.dumps(listed)
    auth = {"Authorization": f"Bearer {secret}"}
    assert client.get("/v1/memories/count", headers=auth).status_code == 200
    run_json("token", "revoke", made["id"])
    refused = client.get("/v1/memories/count", headers=auth)
    assert refused.status_code == 401 and refused.json()["success"] is False
    assert run_json("token", "list")["tokens"][0]["active"] is False


def test_cli_refuses_bad_patterns_and_unknown_tokens() -> None:
    assert "Invalid namespace pattern" in fails("token", "create", "x", "-n", "project acme")
    assert "Token not found" in fails("token", "revoke", "tok_0000000000000000")
    past = fails("token", "create", "x", "-n", ACME, "--expires", "2001-01-01T00:00:00")
    assert "in the past" in past
    assert "neither a duration" in fails("token", "create", "x", "-n", ACME, "--expires", "soon")
    # A blank name made a token that `memsys token list` showed without a label.
    assert "name cannot be empty" in fails("token", "create", "   ", "-n", ACME)
    assert "control character" in fails("token", "create", "ci\nbot", "-n", ACME)
    with get_engine().connect() as conn:
        assert conn.execute(text("SELECT count(*) FROM api_token")).scalar_one() == 0


def test_an_expired_token_is_refused(client: TestClient) -> None:
    made = run_json("token", "create", "short", "-n", ACME, "--expires", "1h")
    with get_engine().begin() as conn:
        conn.execute(text("UPDATE api_token SET expires_at = now() - interval '1 second'"))
    answer = client.get("/v1/memories/count", headers={"Authorization": f"Bearer {made['secret']}"})
    assert answer.status_code == 401


def test_a_wrong_token_is_refused_even_on_loopback(client: TestClient) -> None:
    """No token on loopback is the local user; a token that is given must be valid."""
    assert client.get("/v1/memories/count").status_code == 200
    for header in ("Bearer msk_nope", "Bearer nope", "Basic dXNlcjpwYXNz", "Bearer"):
        answer = client.get("/v1/memories/count", headers={"Authorization": header})
        assert answer.status_code == 401, header
        assert answer.headers["www-authenticate"] == "Bearer"


def test_the_admin_token_sees_everything_and_scoped_tokens_still_work(
    embedder: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    run("memory_store", content="acme fact", namespace=ACME)
    run("memory_store", content="beta fact", namespace="project:beta")
    scoped = run_json("token", "create", "reader", "-n", ACME)["secret"]
    monkeypatch.setenv("MEMSYS_API_TOKEN", "s3cret")
    get_settings.cache_clear()
    try:
        with TestClient(create_app(background=False), base_url=BASE) as c:
            assert c.get("/v1/memories/count").status_code == 401
            for scheme in ("Bearer", "bearer", "BEARER"):
                admin = c.get("/v1/memories/count", headers={"Authorization": f"{scheme} s3cret"})
                assert admin.status_code == 200 and admin.json()["count"] == 2, scheme
            mine = c.get("/v1/memories/count", headers={"Authorization": f"Bearer {scoped}"})
            assert mine.status_code == 200 and mine.json()["count"] == 1
    finally:
        monkeypatch.delenv("MEMSYS_API_TOKEN")
        get_settings.cache_clear()


def test_the_open_health_route_tells_a_stranger_no_database_address(
    embedder: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """/v1/health answers without a token (for probes); with the database gone its error
    named the server's database (user, host, port) to anyone who asked."""
    from memsys import db

    monkeypatch.setenv("MEMSYS_API_TOKEN", "s3cret")
    get_settings.cache_clear()
    try:
        with TestClient(create_app(background=False), base_url=BASE) as c:
            db.set_engine(db.make_engine("postgresql+psycopg://memsys@127.0.0.1:1/memsys"))
            stranger = c.get("/v1/health")
            admin = c.get("/v1/health", headers={"Authorization": "Bearer s3cret"})
    finally:
        db.set_engine(None)
        monkeypatch.delenv("MEMSYS_API_TOKEN")
        get_settings.cache_clear()
    assert stranger.status_code == 503 and stranger.json()["status"] == "unavailable"
    assert "127.0.0.1" not in stranger.text and "memsys@" not in stranger.text, stranger.text
    assert "server log" in stranger.json()["error"]
    assert admin.status_code == 503 and "127.0.0.1" in admin.json()["error"]  # the operator's


def test_a_tool_tells_a_scoped_caller_no_database_address(embedder: Any) -> None:
    """Only /v1/health kept the database's address from a token's holder: every other
    route and MCP tool answered a scoped caller with the driver's message (host, port)."""
    from memsys import db, tenancy
    from memsys.mcp.server import call
    from memsys.operations import BY_NAME

    scoped = tenancy.Scope(read=(ACME,), write=(ACME,), token_id="tok_x")
    db.set_engine(db.make_engine("postgresql+psycopg://memsys@127.0.0.1:1/memsys"))
    try:
        with tenancy.using(scoped):
            theirs = call(BY_NAME["memory_count"], {})
        admins = call(BY_NAME["memory_count"], {})
    finally:
        db.set_engine(None)
    assert not theirs["success"] and "127.0.0.1" not in theirs["error"], theirs
    assert "server log" in theirs["error"]
    assert not admins["success"] and "127.0.0.1" in admins["error"]  # the operator's


def test_revoke_reads_a_pasted_token_id_and_refuses_a_blank_one(embedder: Any) -> None:
    """`memsys token revoke ""` said "Token not found: (…)", and an id pasted from the
    list with a space was not found."""
    made = run_json("token", "create", "ci bot", "-n", ACME)
    assert "A token id cannot be empty" in fails("token", "revoke", "  ")
    assert run_json("token", "revoke", f" {made['id']} ")["active"] is False
