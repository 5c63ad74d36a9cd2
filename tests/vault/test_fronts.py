"""REST (streaming export, import of a body, diff, migrate) and the MCP tools (import is a
dry run unless told otherwise)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient

from memsys.mcp.server import call
from memsys.operations import BY_NAME
from tests.conftest import table_counts
from tests.vault.helpers import empty_database, export, seed
from tests.vault.test_import_batches import memory


def test_rest_export_streams_what_the_file_export_writes(
    tmp_path: Path, client: TestClient
) -> None:
    seed()
    export(tmp_path / "snap.json")
    answer = client.get("/v1/export")
    assert answer.status_code == 200 and answer.headers["content-type"] == "application/json"
    assert answer.content == (tmp_path / "snap.json").read_bytes()
    lines = client.get("/v1/export", params={"format": "jsonl", "namespace": "project:game"})
    assert lines.headers["content-type"] == "application/x-ndjson"
    assert len(lines.text.splitlines()) == 3  # header, one memory, one preference
    missing = client.get("/v1/export", params={"namespace": "nowhere"})
    assert missing.status_code == 404 and "Namespace not found" in missing.json()["error"]


def test_rest_import_of_a_body(tmp_path: Path, client: TestClient) -> None:
    seed()
    body = client.get("/v1/export", params={"format": "jsonl"}).content
    empty_database()
    dry = client.post("/v1/import", params={"dry_run": True}, content=body)
    assert dry.status_code == 200 and dry.json()["memories"]["new"] == 4
    assert not dry.json()["applied"]
    typo = client.post("/v1/import", params={"dryrun": True}, content=body)
    assert typo.status_code == 422 and "Unknown query parameter(s): dryrun" in typo.text
    assert client.get("/v1/memories/count").json()["count"] == 0  # the typo wrote nothing
    done = client.post("/v1/import", content=body)
    assert done.status_code == 200 and done.json()["applied"]
    assert client.get("/v1/memories/count").json()["count"] == 4
    assert client.get("/v1/export", params={"bogus": 1}).status_code == 422


def test_rest_import_with_problems_is_422_and_writes_nothing(client: TestClient) -> None:
    body = (
        b'{"kind": "header", "format": "memsys-export", "schema_version": "1.0"}\n'
        b'{"kind": "edge", "type": "relates_to", "from_id": "mem_a", "to_id": "mem_b", '
        b'"created": "2026-01-01T00:00:00+00:00"}\n'
    )
    before = table_counts()
    answer = client.post("/v1/import", content=body)
    assert answer.status_code == 422
    error = answer.json()["error"]
    assert "nothing imported" in error and "body:2: dangling edge" in error
    assert "/tmp" not in error
    assert table_counts() == before
    # The same in one JSON document: a record is named by its place (it read "line None").
    document = json.dumps(
        {"format": "memsys-export", "schema_version": "1.0", "memories": [], "preferences": []}
        | {"edges": [json.loads(body.splitlines()[1])]}
    )
    answer = client.post("/v1/import", content=document.encode())
    assert answer.status_code == 422
    error = answer.json()["error"]
    assert "rest): body edges[0]: dangling edge: memory mem_a" in error, error
    assert "None" not in error
    assert table_counts() == before
    # A duplicate names the other line by the body too, never the server's temporary file.
    record = json.dumps(memory(1, "The kettle is descaled every March")).encode()
    twice = body.splitlines()[0] + b"\n" + record + b"\n" + record + b"\n"
    duplicate = client.post("/v1/import", content=twice)
    assert duplicate.status_code == 422
    assert "body:3: duplicate id" in duplicate.json()["error"]
    assert "/tmp" not in json.dumps(duplicate.json()), duplicate.json()
    future = client.post(
        "/v1/import", content=b'{"format": "memsys-export", "schema_version": "3.1"}'
    )
    assert future.status_code == 422 and "body:1" in future.json()["error"]
    assert "newer than this memsys" in future.json()["error"]


def test_rest_diff_and_migrate(tmp_path: Path, client: TestClient) -> None:
    seed()
    export(tmp_path / "snap.json")
    same = client.get("/v1/diff", params={"snapshot_a": str(tmp_path / "snap.json")})
    assert same.status_code == 200 and same.json()["identical"]
    outside = client.get("/v1/diff", params={"snapshot_a": "/etc/passwd"})
    assert outside.status_code == 422 and "outside the folders" in outside.json()["error"]
    written = client.post("/v1/export/file", json={"path": str(tmp_path / "server.jsonl")})
    assert written.status_code == 200 and written.json()["memories"] == 4
    checked = client.post("/v1/import/file", json={"path": str(tmp_path / "server.jsonl")})
    assert checked.json()["dry_run"] and checked.json()["memories"]["unchanged"] == 4
    plan = client.post("/v1/migrate", json={"dry_run": True})
    assert plan.status_code == 200
    assert plan.json()["sql"] == "" and plan.json()["from_revision"] == plan.json()["to_revision"]


def test_an_export_replaces_an_earlier_export_never_another_file(
    tmp_path: Path, client: TestClient
) -> None:
    """POST /v1/export/file replaced any file under the index roots (a home folder's)."""
    seed()
    precious = tmp_path / "notes.txt"
    precious.write_text("precious data\n")
    for path in (precious, tmp_path / "notes.json"):
        if path.suffix == ".json":
            path.write_text('{"title": "my settings"}\n')
        refused = client.post("/v1/export/file", json={"path": str(path), "format": "jsonl"})
        assert refused.status_code == 422, refused.text
        assert "exists and is not a memsys export" in refused.json()["error"]
    assert precious.read_text() == "precious data\n"
    for name in ("snap.json", "snap.jsonl"):
        first = client.post("/v1/export/file", json={"path": str(tmp_path / name)})
        again = client.post("/v1/export/file", json={"path": str(tmp_path / name)})
        assert first.status_code == again.status_code == 200, again.text
    pretty = tmp_path / "pretty.json"  # an earlier export, reformatted: still one
    pretty.write_text(
        "\ufeff" + json.dumps(json.loads((tmp_path / "snap.json").read_text()), indent=2)
    )
    assert client.post("/v1/export/file", json={"path": str(pretty)}).status_code == 200


def test_an_export_writes_no_file_through_a_link_in_the_vault(
    tmp_path: Path, client: TestClient
) -> None:
    """A vault cloned from git may hold links: POST /v1/export/file wrote through them, into
    the files and folders they point at (anywhere, outside MEMSYS_INDEX_ROOTS too)."""
    seed()
    vault = tmp_path / "vault"
    assert client.post("/v1/export/file", json={"path": str(vault)}).status_code == 200
    fix = next((vault / "graph/fixes").glob("*.md")).relative_to(vault).as_posix()
    outside = tmp_path / "outside"
    for relative in (".gitignore", "_index.json", "vault/preferences.yaml", fix, "graph/fixes"):
        outside.mkdir()
        target = outside / "victim" if relative == "graph/fixes" else outside / "victim.txt"
        if relative == "graph/fixes":
            target.mkdir()  # a fresh clone's linked folder: the export would fill it
        else:
            target.write_text("precious\n")
        (vault / relative).rename(tmp_path / "kept")
        (vault / relative).symlink_to(target)
        refused = client.post("/v1/export/file", json={"path": str(vault)})
        assert refused.status_code == 422, (relative, refused.text)
        assert f"{vault / relative}: a link" in refused.json()["error"]
        if target.is_dir():
            assert not any(target.iterdir()), relative
        else:
            assert target.read_text() == "precious\n", relative
        (vault / relative).unlink()
        (tmp_path / "kept").rename(vault / relative)
        shutil.rmtree(outside)
    assert client.post("/v1/export/file", json={"path": str(vault)}).status_code == 200


def test_mcp_import_is_a_dry_run_unless_told(tmp_path: Path, embedder: Any) -> None:
    seed()
    made = call(BY_NAME["memory_export"], {"path": str(tmp_path / "vault")})
    assert made["success"] and made["data"]["format"] == "vault"
    empty_database()
    dry = call(BY_NAME["memory_import"], {"path": str(tmp_path / "vault")})
    assert dry["success"] and dry["data"]["dry_run"] and dry["data"]["memories"]["new"] == 4
    assert table_counts()["chunk"] == 0
    done = call(BY_NAME["memory_import"], {"path": str(tmp_path / "vault"), "dry_run": False})
    assert done["data"]["applied"] and table_counts()["chunk"] == 4
    diffed = call(BY_NAME["memory_diff"], {"snapshot_a": str(tmp_path / "vault")})
    assert diffed["success"] and diffed["data"]["identical"]
    refused = call(BY_NAME["memory_diff"], {"snapshot_a": str(tmp_path / "none.json")})
    assert not refused["success"] and "Snapshot not found" in refused["error"]


def test_a_snapshot_with_problems_is_refused_by_every_front_end(
    tmp_path: Path, client: TestClient, embedder: Any
) -> None:
    """MCP memory_import and POST /v1/import/file answered success (applied: false) where
    POST /v1/import answered 422 and `memsys import` exit 2."""
    seed()
    snap = tmp_path / "snap.jsonl"
    call(BY_NAME["memory_export"], {"path": str(snap)})
    lines = snap.read_text().splitlines()
    lines[1] = lines[1].replace('"importance": ', '"importance": 7, "was": ', 1)
    snap.write_text("\n".join(lines) + "\n")
    before = table_counts()
    for dry_run in (True, False):
        answer = call(BY_NAME["memory_import"], {"path": str(snap), "dry_run": dry_run})
        assert not answer["success"] and f"{snap}:2" in answer["error"], answer
        assert "nothing imported" in answer["error"]
        rest = client.post("/v1/import/file", json={"path": str(snap), "dry_run": dry_run})
        assert rest.status_code == 422 and f"{snap}:2" in rest.json()["error"]
    partial = call(BY_NAME["memory_import"], {"path": str(snap), "partial": True})
    assert partial["success"] and partial["data"]["problem_count"] >= 1
    assert table_counts() == before


def test_paths_the_file_system_refuses_are_clear_errors(tmp_path: Path, embedder: Any) -> None:
    """A name too long for the file system, a link loop: one line naming the reason (they
    were "Internal error in memory_export; see the server log")."""
    import os

    seed()
    long_name = str(tmp_path / ("a" * 256))
    loop = tmp_path / "loop"
    os.symlink(loop, loop)
    before = table_counts()
    for name, args, reason in (
        ("memory_export", {"path": long_name + ".json"}, "File name too long"),
        ("memory_import", {"path": long_name, "dry_run": False}, "File name too long"),
        ("memory_diff", {"snapshot_a": long_name}, "File name too long"),
        ("index_file", {"file_path": long_name + ".md"}, "File name too long"),
        ("index_directory", {"dir_path": long_name}, "File name too long"),
        ("memory_export", {"path": str(loop / "snap.json")}, "Symlink loop"),
        ("memory_import", {"path": str(loop), "dry_run": False}, "Symlink loop"),
        ("memory_diff", {"snapshot_a": str(loop)}, "Symlink loop"),
    ):
        answer = call(BY_NAME[name], args)
        assert not answer["success"] and reason in answer["error"], (name, answer)
        assert "Internal error" not in answer["error"] and len(answer["error"]) < 500
    assert table_counts() == before


def test_rest_import_of_a_body_over_the_limit_is_413_and_imports_nothing(
    client: TestClient, monkeypatch: Any
) -> None:
    """POST /v1/import spooled its body to a temporary file for as long as the client sent:
    one request could fill the server's disk. Past MEMSYS_MAX_IMPORT_BYTES it is refused,
    whether the Content-Length says so or the body only turns out so as it comes."""
    from memsys.config import get_settings

    seed()
    body = client.get("/v1/export", params={"format": "jsonl"}).content
    empty_database()
    monkeypatch.setenv("MEMSYS_MAX_IMPORT_BYTES", str(len(body) - 1))
    get_settings.cache_clear()
    try:
        declared = client.post("/v1/import", content=body)
        streamed = client.post("/v1/import", content=iter([body[:100], body[100:]]))
        for answer in (declared, streamed):
            assert answer.status_code == 413, answer.text
            error = answer.json()["error"]
            assert f"over the {len(body) - 1}-byte limit" in error
            assert "MEMSYS_MAX_IMPORT_BYTES" in error
        assert client.get("/v1/memories/count").json()["count"] == 0
        monkeypatch.setenv("MEMSYS_MAX_IMPORT_BYTES", str(len(body)))
        get_settings.cache_clear()
        assert client.post("/v1/import", content=body).status_code == 200  # at the limit
    finally:
        monkeypatch.delenv("MEMSYS_MAX_IMPORT_BYTES")
        get_settings.cache_clear()
