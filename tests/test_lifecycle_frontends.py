"""Lifecycle operations on MCP, REST and the CLI: decay, rehydrate, briefs, health."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import anyio
from fastapi.testclient import TestClient

from memsys import tenancy
from memsys.db import session_scope
from memsys.mcp.server import CORE_RESOURCE, build_server, call
from memsys.operations import BY_NAME
from memsys.schemas.lifecycle import HealthIn, MemoryGetIn
from memsys.services import health, maintain, memory_get
from tests.cli.helpers import fails, run, run_json
from tests.conftest import table_counts
from tests.factories import RELEASE_WORKFLOW, queue_for_embedding, store

BASE = "http://127.0.0.1:8700"


def op(name: str, **args: Any) -> Any:
    answer = call(BY_NAME[name], args)
    assert answer["success"], answer
    return answer["data"]


def unknown_memory_refused(
    client: TestClient, operation: str, route: tuple[str, str], command: str
) -> None:
    """An unknown id is "Memory not found" on MCP, REST (404) and the CLI."""
    assert call(BY_NAME[operation], {"memory_id": "mem_nope"}) == {
        "success": False,
        "error": "Memory not found: mem_nope",
    }
    missing = client.request(*route)
    assert missing.status_code == 404 and missing.json()["error"] == "Memory not found: mem_nope"
    assert "Memory not found" in fails(command, "mem_nope")


def test_bad_lifecycle_input_is_refused_everywhere_and_writes_nothing(client: TestClient) -> None:
    store("The build cache lives on the runner", lifecycle="session")
    before = table_counts()
    answer = call(BY_NAME["decay"], {"threshold": 1.5})
    assert answer == {
        "success": False,
        "error": "threshold must be between 0.0 and 1.0, got 1.5",
    }
    refused = client.post("/v1/lifecycle/decay", json={"threshold": -0.1})
    assert refused.status_code == 422 and "threshold" in refused.json()["error"]
    assert "scope" in fails("decay", "--scope", "forever")
    missing = client.post("/v1/debug/rehydrate/mem_nope")
    assert missing.status_code == 404 and missing.json()["error"] == "Memory not found: mem_nope"
    assert "Memory not found" in fails("rehydrate", "mem_nope")
    assert "kind" in call(BY_NAME["memory_brief"], {"kind": "diary"})["error"]
    assert "stale_days" in call(BY_NAME["memory_analyze_health"], {"stale_days": 0})["error"]
    assert "--budget" in fails("maintain", "--budget", "0")
    assert table_counts() == before


def test_decay_deletes_session_scratch_and_counts_decayed_once(embedder: Any) -> None:
    scratch = store("Scratch: the test run id is 42", lifecycle="session").id
    plain = store("The wiki moved to the new domain", memory_type="general").id
    golden = store("Never deploy on Fridays", memory_type="golden_rule").id
    # fresh scores: 0.5·0.5·1.0 = 0.25 (session), 0.5·0.5·0.8 = 0.2 (general)
    first = run_json("decay", "--threshold", "0.3")
    assert (first["entries_decayed"], first["entries_deleted"]) == (1, 1)
    assert first["entries_scanned"] == 3
    again = op("decay", threshold=0.3)
    assert (again["entries_decayed"], again["entries_deleted"]) == (0, 0)
    live = {m["id"] for m in op("memory_list")["memories"]}
    assert live == {plain, golden} and scratch not in live
    text = run("decay", "--threshold", "0.3").stdout
    assert "STATUS OK\nENTRIES_DECAYED 0\nENTRIES_DELETED 0\n" in text


def test_rehydrate_brings_back_the_full_text(client: TestClient) -> None:
    content = (
        "Our API gateway rate-limits each client to one hundred requests per second. "
        "Bursts of up to five hundred are allowed for ten seconds. "
        "Limits are keyed by the API token, not by the IP address. "
        "Internal services bypass the limit through the mesh, which has its own quotas. "
        "Changing a limit needs a config reload but no restart."
    )
    memory = store(content, memory_type="configuration").id
    maintain.run(now=datetime.now(UTC) + timedelta(days=40))
    listed = op("memory_list")["memories"][0]
    assert listed["content"] != content  # archived: the summary is what is stored
    answer = client.post(f"/v1/debug/rehydrate/{memory}").json()
    assert answer["stage_before"] == "archived" and answer["stage"] == "active"
    assert (answer["restored"], answer["lossy"], answer["content"]) == ("full", False, content)
    assert op("memory_list")["memories"][0]["content"] == content
    # an active memory has nothing to bring back: the CLI says so (it said "restored")
    again = run("rehydrate", memory)
    assert again.exit_code == 0 and f"{memory}: already active, nothing to restore" in again.stdout


def test_core_brief_is_a_file_a_text_a_resource_and_a_prompt(
    client: TestClient, tmp_path: Path
) -> None:
    store("Use uv to manage Python environments", memory_type="decision", tags=["python"])
    store("Never store secrets in the repo", memory_type="golden_rule")
    store("Fixed the flaky login test by waiting for the DOM", memory_type="fix")
    # importance 0.1 → 0.1·0.5·1.0 = 0.05: below CORE.md's 0.2, left out
    store("A thing happened once", memory_type="general", importance=0.1)
    written = run_json("brief", "core", "--out", str(tmp_path))
    text = (tmp_path / "CORE.md").read_text()
    assert written["text"] == text and written["entries"] == 3
    lines = text.splitlines()
    assert lines[0] == "# Memory Core (auto-generated)"
    assert lines[1].startswith(f"> Last updated: {datetime.now(UTC).date()} | Active memories: 3/4")
    assert "## Golden Rules" in lines and "## Active Decisions" in lines
    assert any(
        line.startswith("- [Use uv to manage Python environments](graph/decisions/use-uv-")
        and line.endswith(" (python)")
        for line in lines
    )
    assert "A thing happened once" not in text
    assert client.get("/v1/briefs/core").json()["text"] == text
    # Written into an exported vault, its links open the memories' files.
    run("export", str(tmp_path / "vault"))
    run_json("brief", "core", "--out", str(tmp_path / "vault"))
    targets = re.findall(r"\]\(([^)]+\.md)\)", (tmp_path / "vault" / "CORE.md").read_text())
    assert len(targets) == 3 and all((tmp_path / "vault" / t).is_file() for t in targets)

    async def over_mcp() -> tuple[str, str]:
        server = build_server()
        resource = next(iter(await server.read_resource(CORE_RESOURCE))).content
        prompt = await server.get_prompt("core_memory", {})
        return str(resource), str(prompt.messages[0].content.text)  # type: ignore[union-attr]

    resource, prompt = anyio.run(over_mcp)
    assert resource == text == prompt

    episodes = run_json("brief", "episodes", "--out", str(tmp_path))
    day = datetime.now(UTC).date()
    assert episodes["filename"] == f"episodes/{day}.md" and episodes["entries"] == 4
    log = (tmp_path / "episodes" / f"{day}.md").read_text()
    assert log.startswith(f"# {day}\n\n## ") and "- **Type:** decision" in log
    assert "- **Memory:** [Use uv to manage Python environments](../graph/decisions/" in log


def test_the_calendar_s_first_and_last_day_have_an_episode_log(client: TestClient) -> None:
    """9999-12-31 has no next day in Python: its log was an OverflowError (HTTP 500)."""
    for day in ("0001-01-01", "9999-12-31"):
        answer = client.get("/v1/briefs/episodes", params={"day": day})
        assert answer.status_code == 200, answer.text
        assert answer.json()["text"] == f"# {day}\n" and answer.json()["entries"] == 0


def test_a_busy_day_s_episode_log_is_bounded(embedder: Any) -> None:
    """A day with a bulk load: the log listed every memory stored that day (10,000 memories
    made a 4 MB answer; 100,000 would make 40 MB). It lists the first EPISODE_ENTRIES and says
    how many more there are."""
    from memsys.services.briefs import EPISODE_ENTRIES

    many = EPISODE_ENTRIES + 5
    contents = [{"content": f"Bulk note {i}", "namespace": "project:bulk"} for i in range(many)]
    assert op("memory_store_batch", memories=contents)["stored"] == many
    out = op("memory_brief", kind="episodes", namespace="project:bulk")
    assert out["entries"] == EPISODE_ENTRIES
    assert (
        out["text"]
        .rstrip()
        .endswith("… and 5 more entries this day (memory_list lists every memory)")
    )
    assert "Bulk note 0" in out["text"] and f"Bulk note {many - 1}" not in out["text"]


def test_reflection_brief_reads_themes_projects_accesses_and_merges(embedder: Any) -> None:
    for ns, n in (("project:shop", 2), ("project:blog", 1)):
        for i in range(n):
            store(
                f"Fixed a Python import cycle number {i} in {ns}",
                namespace=ns,
                tags=["fix", "python"],
                memory_type="fix",
            )
    store("Caching the config halves startup time", memory_type="insight", namespace="project:blog")
    op("memory_recall", query="python import cycle", n_results=1)
    text = op("memory_brief", kind="reflection")["text"]
    assert text.startswith("# Reflection Summary (auto-generated)\n> Last updated: ")
    assert '- **fix + python**: 3 memories ("Fixed a Python import cycle' in text
    assert "- **fix**: appears in shop (2), blog (1)" in text
    most = text.split("## Most Accessed\n")[1].split("\n\n")[0].splitlines()
    assert len(most) == 2 and most[1].startswith("1. [Fixed a Python import cycle number ")
    assert most[1].endswith(" - 1 accesses")
    assert "## Recent Insights\nInsight-type memories:\n- [Caching the config" in text
    assert text.endswith("## Consolidation History\n- Total merges performed: 0\n")


def test_health_finds_contradictions_low_confidence_and_stale(embedder: Any) -> None:
    a = store("The API is versioned in the URL path").id
    b = store("The API is versioned with a request header").id
    op("memory_relate", source_id=a, target_id=b, relation="contradicts")
    weak = store("Restart the worker to clear the queue").id
    op("memory_apply", memory_id=weak, context="queue stuck")
    for _ in range(2):
        op("memory_outcome", memory_id=weak, success=False)
    report = op("memory_analyze_health")
    assert [(c["id1"], c["id2"]) for c in report["contradictions"]] == [(a, b)]
    assert 0.3 < report["contradictions"][0]["similarity"] < 1.0
    assert report["low_confidence"] == [{"id": weak, "confidence": 0.0}]
    assert report["stale"] == []  # nothing is 30 days old yet
    op("memory_recall", query="how is the API versioned", n_results=1)
    temperatures = op("memory_analyze_health")["totals"]
    assert (temperatures["warm"], temperatures["cold"], temperatures["hot"]) == (1, 2, 0)
    assert report["recommendations"][:2] == [
        "Resolve 1 contradiction: keep the right memory and forget the other, or relate "
        "them with 'supersedes'",
        "Review 1 low-confidence memory (confidence < 0.2): correct or forget them",
    ]
    later = datetime.now(UTC) + timedelta(days=45)
    with session_scope() as s:
        stale = health.analyze(s, HealthIn(include_contradictions=False), now=later)
    assert {m.id for m in stale.stale} == {a, b, weak}
    assert [m.last_validated is None for m in stale.stale].count(False) == 1


def test_outcome_without_a_try_is_counted_with_a_warning(embedder: Any) -> None:
    memory = store("Prefer composition over inheritance").id
    answer = op("memory_outcome", memory_id=memory, success=True)
    assert answer["new_confidence"] == 0.4
    assert answer["warning"].startswith("No memory_apply was recorded")
    op("memory_apply", memory_id=memory, context="refactor")
    assert op("memory_outcome", memory_id=memory, success=True)["warning"] is None


def test_maintain_from_the_cli_reports_and_a_second_run_does_nothing(embedder: Any) -> None:
    store("Deploy notes: the release train leaves on Wednesdays", memory_type="workflow")
    store("Deploy notes: the release train leaves on Wednesdays.", memory_type="workflow")
    first = run_json("maintain", "--budget", "60")
    assert first["complete"] and first["merged"] == 1 and first["rescored"] == 2
    assert first["stages"] == {"active": 1, "demoted": 0, "archived": 0, "rehydratable": 0}
    second = run_json("maintain")
    assert (second["merged"], second["moved"]) == (0, {})
    text = run("maintain").stdout
    assert text.startswith("Maintenance complete in ") and "0 merged" in text


def test_maintain_fails_on_a_broken_model_with_one_line(embedder: Any, monkeypatch) -> None:
    """With memories queued, a broken model made `memsys maintain` print a traceback, say
    "not finished (run again)" and exit 0: cron saw success every night."""
    from memsys.config import get_settings
    from memsys.embeddings import make_embedder
    from memsys.services import embedding_queue

    waiting = store("Deploy notes: the release train leaves on Wednesdays").id
    queue_for_embedding(waiting)
    # A bad setting: the usual error, exit 2, before any step (the test run's model is
    # cached: the setting is read again, as a fresh process would).
    monkeypatch.setattr(
        embedding_queue, "get_embedder", lambda: make_embedder(get_settings().embedding_provider)
    )
    monkeypatch.setenv("MEMSYS_EMBEDDING_PROVIDER", "bogus")
    get_settings.cache_clear()
    try:
        refused = fails("maintain")
    finally:
        monkeypatch.delenv("MEMSYS_EMBEDDING_PROVIDER")
        get_settings.cache_clear()
    assert refused.startswith("error: MEMSYS_EMBEDDING_PROVIDER: unknown embedding provider")

    def broken() -> Any:  # a model that fails when it runs
        raise RuntimeError("the model could not be loaded")

    monkeypatch.setattr(embedding_queue, "get_embedder", broken)
    failed = run("maintain")
    assert failed.exit_code == 1 and "Traceback" not in failed.output
    assert failed.stdout.startswith("Maintenance not finished (run again)")  # the rest ran
    assert failed.stderr.strip().splitlines() == [
        "error: the embedding queue was not drained (RuntimeError: the model could not be "
        "loaded); the other steps ran"
    ]
    monkeypatch.undo()
    assert run_json("maintain")["embedded"] == 1


def test_pin_and_unpin_on_every_front_end(client: TestClient) -> None:
    memory = store("The incident bridge number is in the on-call handbook").id
    pinned = op("memory_pin", memory_id=memory)
    assert (pinned["pinned"], pinned["changed"], pinned["decay_score"]) == (True, True, 999.0)
    assert pinned["temperature"] == "pinned"
    again = client.post(f"/v1/memories/{memory}/pin").json()
    assert (again["pinned"], again["changed"]) == (True, False)
    assert run("pin", memory).stdout.startswith(f"{memory}: pinned (already pinned), active")
    off = client.delete(f"/v1/memories/{memory}/pin").json()
    assert (off["pinned"], off["changed"]) == (False, True) and off["decay_score"] < 1
    assert run_json("unpin", memory)["changed"] is False
    assert op("memory_unpin", memory_id=memory)["pinned"] is False

    before = table_counts()
    unknown_memory_refused(client, "memory_pin", ("DELETE", "/v1/memories/mem_nope/pin"), "pin")
    assert "memory_id" in call(BY_NAME["memory_pin"], {})["error"]
    assert table_counts() == before


def test_get_reads_one_memory_counts_the_access_and_rekindles_it(client: TestClient) -> None:
    content = (
        "The staging database is rebuilt from the nightly snapshot every Sunday at 02:00. "
        "Anything written to staging during the week is lost at the rebuild. "
        "Keep test fixtures in the seed scripts, never only in the staging database. "
        "The rebuild takes about forty minutes and staging is read-only meanwhile."
    )
    memory = store(content, memory_type="configuration", tags=["staging"]).id
    first = op("memory_get", memory_id=memory)
    assert (first["content"], first["stage"], first["rekindled"]) == (content, "active", False)
    assert (first["access_count"], first["temperature"], first["tags"]) == (1, "warm", ["staging"])
    second = client.get(f"/v1/memories/{memory}").json()
    assert second["access_count"] == 2 and second["last_accessed_at"] is not None
    assert client.get("/v1/memories/count").json()["count"] == 1  # the route before {id}

    maintain.run(now=datetime.now(UTC) + timedelta(days=40))
    assert op("memory_list")["memories"][0]["content"] != content  # archived: the summary
    shown = run("get", memory).stdout
    assert shown.startswith(f"{memory} [configuration, active, rekindled] ")
    assert content in shown
    again = run_json("get", memory)
    assert (again["content"], again["stage"], again["rekindled"]) == (content, "active", False)
    assert (again["lossy"], again["access_count"]) == (False, 4)

    before = table_counts()
    unknown_memory_refused(client, "memory_get", ("GET", "/v1/memories/mem_nope"), "get")
    assert table_counts() == before


def test_a_read_only_caller_reads_an_archived_memory_as_it_is_stored(embedder: Any) -> None:
    content = RELEASE_WORKFLOW
    memory = store(content, memory_type="workflow").id
    maintain.run(now=datetime.now(UTC) + timedelta(days=40))
    reader = tenancy.Scope(read=("*",), write=(), token_id="tok_reader")
    with tenancy.using(reader), session_scope() as s:
        seen = memory_get.get(s, MemoryGetIn(memory_id=memory))
    assert (seen.stage, seen.rekindled) == ("archived", False)
    assert seen.content != content and seen.content  # the stored summary, not restored
    written = op("memory_get", memory_id=memory)  # a caller that may write rekindles it
    assert (written["stage"], written["rekindled"], written["content"]) == (
        "active",
        True,
        content,
    )


def test_a_memory_read_back_says_when_it_happened_on_every_front_end(client: TestClient) -> None:
    """A memory stored with a reference_time came back from memory_get, memory_list and
    memory_recall without it (only memory_query and the vault showed it): a caller could not
    tell an incident of last May from one stored today."""
    may = "2026-05-12T10:00:00+00:00"
    stored = op("memory_store", content="The billing outage was a full disk", reference_time=may)
    today = op("memory_store", content="The billing dashboard moved to Grafana")
    happened = {
        stored["id"]: datetime.fromisoformat(may),
        today["id"]: None,  # no reference_time: when it was stored
    }

    def check(memory: dict[str, Any]) -> None:
        when = datetime.fromisoformat(memory["happened_at"])
        want = happened[memory["id"]]
        assert when == (want or datetime.fromisoformat(memory["created_at"])), memory

    check(op("memory_get", memory_id=stored["id"]))
    for memory in client.get("/v1/memories").json()["memories"]:
        check(memory)
    recalled = run_json("recall", "billing outage")["memories"]
    assert recalled and recalled[0]["id"] == stored["id"]
    for memory in recalled:
        check(memory)
