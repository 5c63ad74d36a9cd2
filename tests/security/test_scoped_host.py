"""What a scoped token does on the memsys host rather than in its namespaces' rows: the
schema (migrate), files under MEMSYS_INDEX_ROOTS (export, import, diff). Row-level security
filters rows; a file or the schema is shared by every tenant, so each is checked here."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from memsys.config import get_settings
from tests.security.helpers import (
    BETA,
    SECRET,
    Tenants,
    mcp_calls,
    rows_of,
    run,
    token,
)


def as_token(base: str, secret: str) -> httpx.Client:
    return httpx.Client(base_url=base, timeout=120, headers={"Authorization": f"Bearer {secret}"})


@pytest.mark.parametrize("mode", ["read", "read-write"])
def test_a_scoped_token_may_not_migrate_the_schema(tenants: Tenants, base: str, mode: str) -> None:
    """POST /v1/migrate ran Alembic as the server's database user for any token, a
    read-only one too: the schema is every namespace's."""
    _, secret = token(mode, "project:acme*")
    with as_token(base, secret) as http:
        for body in ({"dry_run": True}, {}):
            answer = http.post("/v1/migrate", json=body)
            assert answer.status_code == 403, answer.text
            assert "admin" in answer.json()["error"]
    with httpx.Client(base_url=base, timeout=120) as http:  # the local user (admin) may
        assert http.post("/v1/migrate", json={"dry_run": True}).status_code == 200


@pytest.mark.parametrize("mode", ["read", "read-write"])
def test_a_scoped_token_may_not_replace_an_export_on_the_host(
    tenants: Tenants, base: str, mode: str, tmp_path: Path
) -> None:
    """A read-only token's memory_export replaced the admin's export of every namespace
    (an earlier export may be replaced) with one of its own namespaces: beta's copy gone."""
    backup = tmp_path / "backup.jsonl"
    run("memory_export", path=str(backup))
    kept = backup.read_bytes()
    _, secret = token(mode, "project:acme*")
    calls = [
        ("memory_export", {"path": str(backup)}),
        ("memory_export", {"path": str(tmp_path / "v")}),
    ]
    with as_token(base, secret) as http:
        for _, args in calls:
            answer = http.post("/v1/export/file", json=args)
            assert answer.status_code == 403, answer.text
            assert "GET /v1/export" in answer.json()["error"]
        streamed = http.get("/v1/export")
        assert streamed.status_code == 200 and SECRET not in streamed.text
    for answer in mcp_calls(base, secret, calls):
        assert not answer.ok and "admin token" in answer.text, answer.text
    assert backup.read_bytes() == kept and not (tmp_path / "v").exists()


def test_a_diff_of_an_admins_export_shows_a_token_its_own_namespaces(
    tenants: Tenants, base: str, tmp_path: Path
) -> None:
    """memory_diff against the admin's export listed beta's memories, edge and preference
    (ids, and `project:beta/theme`) as removed: the file is not filtered by the policies."""
    backup = tmp_path / "backup.jsonl"
    run("memory_export", path=str(backup))
    _, secret = token("read", "project:acme*")
    with as_token(base, secret) as http:
        answer = http.get("/v1/diff", params={"snapshot_a": str(backup)})
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["identical"], body
    assert BETA not in answer.text
    assert not {tenants.beta_memory, tenants.beta_memory_2} & set(answer.text.split('"'))


def test_a_dry_run_import_is_refused_where_the_import_would_be(
    tenants: Tenants, base: str, tmp_path: Path
) -> None:
    """A read-only token's dry run of the admin's export answered 200, counting beta's
    rows as new (the policies hid them); the import itself is refused: so is its dry run."""
    backup = tmp_path / "backup.jsonl"
    run("memory_export", path=str(backup))
    mine = tmp_path / "acme.jsonl"
    run("memory_export", path=str(mine), namespace="project:acme")
    _, ro = token("read", "project:acme*")
    _, rw = token("read-write", "project:acme*")
    with as_token(base, ro) as as_ro, as_token(base, rw) as as_rw:
        for http in (as_ro, as_rw):
            answer = http.post("/v1/import/file", json={"path": str(backup)})
            assert answer.status_code == 403, answer.text
        assert as_ro.post("/v1/import/file", json={"path": str(mine)}).status_code == 403
        dry = as_rw.post("/v1/import/file", json={"path": str(mine)})
        assert dry.status_code == 200 and dry.json()["memories"]["unchanged"] == 1, dry.text


def planted_export(tenants: Tenants, tmp_path: Path) -> Path:
    """acme's export with its memory given beta's memory id (and a text of acme's own)."""
    mine = tmp_path / "acme.jsonl"
    run("memory_export", path=str(mine), namespace="project:acme")
    header, memory, *rest = mine.read_text().splitlines()
    planted = {**json.loads(memory), "id": tenants.beta_memory, "content": "planted by acme"}
    del planted["content_hash"]
    mine.write_text("\n".join([header, json.dumps(planted), *rest]) + "\n")
    return mine


def test_an_import_may_not_take_the_id_of_a_memory_the_token_cannot_see(
    tenants: Tenants, base: str, tmp_path: Path
) -> None:
    """Memory ids are unique across namespaces, but an import checked them under the
    token's policies: it stored beta's id in acme, and the admin's GET /v1/memories/{id}
    then answered the token's text for beta's memory."""
    mine = planted_export(tenants, tmp_path)
    _, secret = token("read-write", "project:acme*")
    with as_token(base, secret) as http:
        answer = http.post("/v1/import/file", json={"path": str(mine), "dry_run": False})
    assert answer.status_code == 422, answer.text
    refused = f"id {tenants.beta_memory} cannot be imported with this token: give the memory"
    assert refused in answer.json()["error"]
    assert BETA not in answer.text
    with httpx.Client(base_url=base, timeout=120) as admin:
        shown = admin.get(f"/v1/memories/{tenants.beta_memory}").json()
    assert shown["namespace"] == BETA and SECRET in shown["content"]


def test_the_refusal_of_an_id_held_elsewhere_does_not_tell_a_token_it_exists(
    tenants: Tenants, base: str, tmp_path: Path
) -> None:
    """The refusal read "id … is taken in this database": to a token that may not read the
    namespace holding it, confirmation that the id exists there. The token is told what to
    do, not what the database holds; the admin is told where the id is."""
    mine = planted_export(tenants, tmp_path)
    _, secret = token("read-write", "project:acme*")
    with as_token(base, secret) as http:
        error = http.post("/v1/import/file", json={"path": str(mine)}).json()["error"]
    for telling in ("taken", "exists", "in this database", "namespace", BETA):
        assert telling not in error, error
    with httpx.Client(base_url=base, timeout=120) as admin:
        precise = admin.post("/v1/import/file", json={"path": str(mine)}).json()["error"]
    assert f"memory {tenants.beta_memory} is in namespace {BETA} here" in precise, precise


def test_a_path_outside_the_roots_does_not_tell_a_token_the_servers_folders(
    tenants: Tenants, base: str
) -> None:
    """A path outside MEMSYS_INDEX_ROOTS was refused with the list of the folders memsys
    may read on the host: the server's directories, for any token (the operator's to give)."""
    roots = get_settings().allowed_roots()
    _, secret = token("read-write", "project:acme*")
    with as_token(base, secret) as http:
        answers = [
            http.post("/v1/documents/index-file", json={"file_path": "/etc/passwd"}),
            http.get("/v1/diff", params={"snapshot_a": "/etc/passwd"}),
        ]
    for answer in answers:
        assert answer.status_code == 422, answer.text
        assert "outside the folders memsys may" in answer.text
        assert not any(str(root) in answer.text for root in roots), answer.text
    with httpx.Client(base_url=base, timeout=120) as admin:  # the local user: its own host
        answer = admin.get("/v1/diff", params={"snapshot_a": "/etc/passwd"})
    assert str(roots[0]) in answer.text


@pytest.fixture
def token_roots(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[str | None], None]]:
    """Sets MEMSYS_TOKEN_INDEX_ROOTS (None: unset, the default) for the server in process."""

    def set_to(value: str | None) -> None:
        if value is None:
            monkeypatch.delenv("MEMSYS_TOKEN_INDEX_ROOTS", raising=False)
        else:
            monkeypatch.setenv("MEMSYS_TOKEN_INDEX_ROOTS", value)
        get_settings.cache_clear()

    yield set_to
    monkeypatch.undo()
    get_settings.cache_clear()


def test_files_on_the_host_are_the_admins_unless_the_operator_opens_folders_to_tokens(
    tenants: Tenants, base: str, tmp_path: Path, token_roots: Callable[[str | None], None]
) -> None:
    """Every file under MEMSYS_INDEX_ROOTS was every token's: any scoped token indexed any
    of them (beta's document too) into its own namespace, and imported or diffed any
    snapshot there. By default a token reads no file on the host; the operator opens
    folders to tokens with MEMSYS_TOKEN_INDEX_ROOTS."""
    shared = tmp_path / "shared"
    shared.mkdir()
    (shared / "handbook.md").write_text("# Handbook\n\nEveryone may read the handbook.\n")
    snapshot = tmp_path / "acme.jsonl"
    run("memory_export", path=str(snapshot), namespace="project:acme")
    _, secret = token("read-write", "project:acme*")
    calls = [
        ("index_file", {"file_path": tenants.beta_file, "namespace": "project:acme"}),
        ("index_directory", {"dir_path": tenants.beta_dir, "namespace": "project:acme"}),
        ("memory_import", {"path": str(snapshot)}),
        ("memory_diff", {"snapshot_a": str(snapshot)}),
    ]
    token_roots(None)
    refused = "Not allowed: reading files on the memsys host needs the admin token"
    with as_token(base, secret) as http:
        answers = [
            http.post("/v1/documents/index-file", json=calls[0][1]),
            http.post("/v1/documents/index-directory", json=calls[1][1]),
            http.post("/v1/import/file", json=calls[2][1]),
            http.get("/v1/diff", params=calls[3][1]),
        ]
    for answer in answers:
        assert answer.status_code == 403 and refused in answer.json()["error"], answer.text
    for over_mcp in mcp_calls(base, secret, calls):
        assert not over_mcp.ok and refused in over_mcp.text, over_mcp.text
    assert SECRET not in json.dumps(rows_of("project:acme"))  # beta's document not copied
    with httpx.Client(base_url=base, timeout=120) as admin:  # the local user: its own host
        own = admin.post(
            "/v1/documents/index-file", json={"file_path": str(shared / "handbook.md")}
        )
        assert own.status_code == 200, own.text

    token_roots(str(shared))
    with as_token(base, secret) as http:
        opened = http.post(
            "/v1/documents/index-file",
            json={"file_path": str(shared / "handbook.md"), "namespace": "project:acme"},
        )
        assert opened.status_code == 200, opened.text
        outside = http.post("/v1/documents/index-file", json=calls[0][1])
        assert outside.status_code == 422, outside.text
        assert "outside the folders memsys may" in outside.json()["error"]
        assert "MEMSYS_TOKEN_INDEX_ROOTS" in outside.json()["error"]


def test_token_roots_outside_the_index_roots_are_named_at_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A folder of MEMSYS_TOKEN_INDEX_ROOTS outside MEMSYS_INDEX_ROOTS is not opened to
    tokens (the admin may not read it either), and nothing said so: the operator who named
    it read only the tokens' 403s. The server says so as it starts."""
    import logging

    from memsys.api.app import create_app

    inside, outside = tmp_path / "shared", Path("/usr/share")
    inside.mkdir()
    monkeypatch.setenv("MEMSYS_INDEX_ROOTS", str(tmp_path))
    monkeypatch.setenv("MEMSYS_TOKEN_INDEX_ROOTS", f"{inside}:{outside}")
    get_settings.cache_clear()
    try:
        with caplog.at_level(logging.WARNING, logger="memsys"):
            create_app(background=False)
    finally:
        monkeypatch.undo()
        get_settings.cache_clear()
    said = [r.getMessage() for r in caplog.records if "MEMSYS_TOKEN_INDEX_ROOTS" in r.getMessage()]
    assert len(said) == 1 and str(outside) in said[0] and str(inside) not in said[0], said
    assert "MEMSYS_INDEX_ROOTS" in said[0].replace("MEMSYS_TOKEN_INDEX_ROOTS", "")
