"""`memsys eval`: every suite prints its figures against S004's thresholds, a failing one
exits 1, and an eval leaves the store it measures as it was."""

from __future__ import annotations

import json
from pathlib import Path

from sqlalchemy import text

from memsys.db import get_engine
from memsys.mcp.server import call
from memsys.operations import BY_NAME
from memsys.secretscan import find
from tests.cli.helpers import fails, run
from tests.conftest import table_counts
from tests.factories import store
from tests.vault.helpers import seed


def test_all_suites_pass_on_a_healthy_store_and_change_nothing(embedder: object) -> None:
    seed()
    before = table_counts()
    result = run("eval", "--json")
    assert result.exit_code == 0, result.stdout
    data = json.loads(result.stdout)
    names = [s["suite"] for s in data["suites"]]
    assert names == ["freshness", "leakage", "precision_recall", "staleness", "red_team"]
    figures = {f["name"]: f for s in data["suites"] for f in s["figures"]}
    assert figures["project memories updated in 30 days"]["value"] == 1.0
    assert figures["planted cross-namespace hits (recall + memory_context)"]["value"] == 0.0
    assert figures["execution precision@1 (labelled set)"]["value"] >= 0.9
    assert figures["planted stale memory detected"]["value"] == 1.0
    assert figures["behaviour changed by injected memories"]["value"] == 0.0
    assert figures["planted secrets flagged on write"]["value"] == 1.0
    assert table_counts() == before  # probes were rolled back


def test_a_failing_suite_exits_1_with_its_figure(embedder: object) -> None:
    for n in range(4):
        store(f"Project note number {n} about the old build server", memory_type="fact")
    with get_engine().begin() as conn:
        conn.execute(text("UPDATE chunk SET updated_at = now() - interval '90 days'"))
    result = run("eval", "--suite", "freshness")
    assert result.exit_code == 1
    assert "FAIL  project memories updated in 30 days: 0.000 >= 0.7  (0/4)" in result.stdout


def test_a_memory_naming_a_deleted_entity_counts_as_stale(embedder: object) -> None:
    """Memories mention concept entities, never the graph's own, and delete_entities closes
    every edge to what it deletes: the live staleness figure stayed 0 whatever the graph
    deleted. A deleted entity is matched by name now; made again, it is live, not stale."""

    def graph(name: str, **args: object) -> None:
        assert call(BY_NAME[name], {"namespace": "billing", **args})["success"]

    graph("create_entities", entities=[{"name": "LegacyBilling", "entityType": "service"}])
    store("Invoices are sent by LegacyBilling every night", memory_type="fact", namespace="billing")
    store("Refunds go through the payments desk", memory_type="fact", namespace="billing")
    graph("delete_entities", entityNames=["LegacyBilling"])
    result = run("eval", "--suite", "staleness", "-n", "billing")
    assert result.exit_code == 1, result.stdout
    assert "FAIL  memories referencing deprecated entities: 0.500 < 0.1  (1/2)" in result.stdout

    graph("create_entities", entities=[{"name": "LegacyBilling", "entityType": "service"}])
    result = run("eval", "--suite", "staleness", "-n", "billing")
    assert result.exit_code == 0, result.stdout
    assert "memories referencing deprecated entities: 0.000 < 0.1  (0/2)" in result.stdout


def test_locomo_evidence_on_a_turn_said_twice_is_found(tmp_path: Path, embedder: object) -> None:
    """A turn repeated word for word is stored once; the memory's id stood for the last
    such turn only, so evidence naming the first one was never recalled (recall 0)."""
    turns = [
        {"speaker": "Ann", "dia_id": "D1:1", "text": "The wombat sanctuary opens at nine"},
        {"speaker": "Bo", "dia_id": "D1:2", "text": "Great, see you there"},
        {"speaker": "Ann", "dia_id": "D1:3", "text": "The wombat sanctuary opens at nine"},
    ]
    qa = [{"question": "When does the wombat sanctuary open?", "evidence": ["D1:1"]}]
    path = tmp_path / "locomo10.json"
    path.write_text(json.dumps([{"conversation": {"session_1": turns}, "qa": qa}]))
    result = run("eval", "--suite", "precision_recall", "--locomo", str(path))
    assert "PASS  LoCoMo evidence recall@10 (conversation 1): 1.000" in result.stdout


def test_unknown_suite_is_bad_input() -> None:
    assert "Unknown suite(s): vibes" in fails("eval", "--suite", "vibes")
    assert "Namespace not found: typo" in fails("eval", "-n", "typo")  # passed on no data


def test_secret_like_content_is_flagged_on_store(embedder: object) -> None:
    flagged = store("deploy with AWS key AKIAIOSFODNN7EXAMPLE", memory_type="fact")
    assert flagged.warnings and "AWS access key id" in flagged.warnings[0]
    assert store("Rotate the API keys every 90 days", memory_type="fact").warnings == []
    assert find("password: hunter2hunter2") == ["assigned secret"]


def test_a_locomo_file_of_another_shape_is_bad_input(tmp_path: Path, embedder: object) -> None:
    turn = {"dia_id": "D1:1", "speaker": "A", "text": "hi\u0000"}
    for name, data in (
        ("number.json", [{"conversation": 5, "qa": []}]),
        ("object.json", {"a": 1}),
        ("nul.json", [{"conversation": {"session_1": [turn]}, "qa": []}]),
    ):
        path = tmp_path / name
        path.write_text(json.dumps(data))
        said = fails("eval", "--suite", "precision_recall", "--locomo", str(path))
        assert "--locomo" in said and "Traceback" not in said, said
