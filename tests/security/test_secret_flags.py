"""Secret-like strings are flagged on every write that stores text an agent gave, not only
memory_store's (S004 red team: flagged on write; the text is stored all the same)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from memsys.operations import BY_NAME
from tests.security.helpers import run
from tests.vault.test_import_batches import memory as stored
from tests.vault.test_import_batches import write_jsonl

TOKEN = "github token ghp_a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
WRITES = [
    ("add_episode", lambda text: {"content": f"Kiwi Corp rotated the {text}"}),
    ("preference_set", lambda text: {"key": "deploy", "value": text}),
    ("preference_set", lambda text: {"key": "ci", "value": {"env": {"GH": text}}}),
    ("preference_set", lambda text: {"key": "db", "value": {"password": text[-20:]}}),
    ("fact_set", lambda text: {"entity": "Kiwi", "attribute": "ci", "content": text}),
    (
        "memory_observe",
        lambda text: {"envelope": {"type": "command.exec", "cmd": f"echo {text}", "exitCode": 0}},
    ),
]


@pytest.mark.parametrize(
    ("name", "args"), WRITES, ids=[f"{n}-{i}" for i, (n, _) in enumerate(WRITES)]
)
def test_a_secret_is_flagged_on_every_write_that_stores_it(
    embedder: Any, name: str, args: Any
) -> None:
    """add_episode stored a memory of the text, preference_set and fact_set stored it as
    given, and none said a word of the token in it."""
    flagged = run(name, **args(TOKEN)).warnings
    assert len(flagged) == 1 and "looks like it holds a secret" in flagged[0], flagged
    assert run(name, **args("the nightly build")).warnings == []


def test_the_graph_writes_flag_a_secret_in_an_observation(embedder: Any, client: Any) -> None:
    """create_entities, add_observations and the graph import stored the token as an
    observation (a memory) and said nothing. Flagged in an added `warnings` field, left out
    when there is nothing to flag: the memory server's own answer shapes stay as they were."""
    from memsys.mcp.server import call
    from tests.cli.helpers import run as cli

    kiwi = {"name": "Kiwi", "entityType": "org"}
    plain = call(BY_NAME["create_entities"], {"entities": [kiwi]})
    assert plain["data"] == {"entities": [{**kiwi, "observations": []}]}
    made = call(BY_NAME["create_entities"], {"entities": [
        {"name": "Kiwi CI", "entityType": "service", "observations": [f"uses the {TOKEN}"]}
    ]})  # fmt: skip
    [warning] = made["data"]["warnings"]
    assert "an observation of Kiwi CI looks like it holds a secret (GitHub token)" in warning
    added = client.post("/v1/graph/observations", json={"observations": [
        {"entityName": "Kiwi", "contents": [f"rotated the {TOKEN}", "ships on Fridays"]}
    ]})  # fmt: skip
    assert added.status_code == 200 and len(added.json()["warnings"]) == 1
    again = client.post("/v1/graph/observations", json={"observations": [
        {"entityName": "Kiwi", "contents": ["ships on Fridays"]}
    ]})  # fmt: skip
    assert "warnings" not in again.json()
    shown = cli("graph", "add-observations", "--observations",
                json.dumps([{"entityName": "Kiwi", "contents": [f"the new {TOKEN}"]}]))  # fmt: skip
    assert shown.exit_code == 0
    assert "warning: an observation of Kiwi looks like it holds a secret" in shown.stderr
    jsonl = json.dumps({"type": "entity", "name": "Pear", "entityType": "org",
                        "observations": [f"key {TOKEN}"]})  # fmt: skip
    imported = client.post("/v1/graph/import?namespace=project:pear", content=jsonl.encode())
    assert imported.json()["entities_created"] == 1 and len(imported.json()["warnings"]) == 1


def test_memory_import_flags_a_secret_in_what_it_imports(
    embedder: Any, client: Any, tmp_path: Path
) -> None:
    """memory_import wrote the token as a memory (and a preference's value) and said
    nothing; its answer lists each such record by file and line, imported all the same."""
    from memsys.mcp.server import call
    from tests.cli.helpers import run as cli

    memory = {**stored(1, f"CI uses the {TOKEN}"), "namespace": "project:kiwi"}
    preference = {"kind": "preference", "namespace": "project:kiwi", "key": "db",
                  "value": {"password": TOKEN[-20:]}}  # fmt: skip
    snapshot = tmp_path / "snap.jsonl"
    write_jsonl(snapshot, [memory, stored(2, "Backups run nightly"), preference])
    answer = call(BY_NAME["memory_import"], {"path": str(snapshot)})
    assert answer["success"], answer
    dry = answer["data"]
    assert [w.split(": ")[0] for w in dry["warnings"]] == [f"{snapshot}:2", f"{snapshot}:4"]
    assert "content looks like it holds a secret (GitHub token)" in dry["warnings"][0]
    body = client.post("/v1/import", content=snapshot.read_bytes())
    assert body.json()["applied"] and body.json()["warnings"][0].startswith("body:2: content")
    shown = cli("import", str(snapshot))
    assert shown.exit_code == 0
    assert f"warning: {snapshot}:4: value looks like it holds a secret" in shown.stderr


def test_memory_import_counts_every_flagged_record_beyond_those_it_lists(
    embedder: Any, client: Any, tmp_path: Path
) -> None:
    """A snapshot of more flagged records than an answer lists: the answer listed the first
    MAX_LISTED with no word of the rest (the user saw a list and took it for all), and the
    import held every warning in memory until its end. Now `warning_count` says how many,
    the report keeps only the first MAX_LISTED, and the CLI says how many it left out."""
    from memsys.db import session_scope
    from memsys.mcp.server import call
    from memsys.schemas.vault import MAX_LISTED
    from memsys.vault import files, importer
    from tests.cli.helpers import run as cli

    flagged = MAX_LISTED + 3
    preferences = [
        {"kind": "preference", "namespace": "project:kiwi", "key": f"db{i}",
         "value": {"password": f"{TOKEN[-20:]}{i}"}}
        for i in range(flagged)
    ]  # fmt: skip
    snapshot = tmp_path / "snap.jsonl"
    write_jsonl(snapshot, preferences)
    with session_scope() as s:
        report = importer.run(s, files.open_snapshot(snapshot), dry_run=True)
    assert len(report.warnings) == MAX_LISTED and report.warning_count == flagged
    answer = call(BY_NAME["memory_import"], {"path": str(snapshot)})
    assert answer["data"]["warning_count"] == flagged
    assert len(answer["data"]["warnings"]) == MAX_LISTED
    assert answer["data"]["warnings"][0].startswith(f"{snapshot}:2: value")
    body = client.post("/v1/import?dry_run=true", content=snapshot.read_bytes())
    assert body.status_code == 200 and body.json()["warning_count"] == flagged
    shown = cli("import", "--dry-run", str(snapshot))
    assert shown.exit_code == 0, shown.stderr
    assert shown.stderr.count("warning: ") == MAX_LISTED + 1
    assert "warning: … and 3 more of these (text that looks like it holds a secret)" in shown.stderr


def test_memory_import_does_not_flag_a_record_it_refuses(embedder: Any, tmp_path: Path) -> None:
    """A partial import skips a memory whose id the snapshot holds twice (a problem), yet
    flagged its first copy as imported ("memsys stored it") though it stored neither."""
    from memsys.mcp.server import call

    twice = stored(1, f"CI uses the {TOKEN}")
    snapshot = tmp_path / "snap.jsonl"
    write_jsonl(snapshot, [twice, {**twice, "content": f"CD uses the {TOKEN}"}])
    answer = call(BY_NAME["memory_import"], {"path": str(snapshot), "dry_run": False,
                                             "partial": True})  # fmt: skip
    data = answer["data"]
    assert data["applied"] and data["problem_count"] == 1 and data["memories"]["new"] == 0
    assert data["warnings"] == [] and data["warning_count"] == 0
