"""Search commands: plain, filtered by doc_type / namespace / file, and within a token budget."""

from __future__ import annotations

from pathlib import Path

import pytest

from memsys.tokens import count_tokens
from tests.cli.helpers import fails, run, run_json
from tests.factories import write_docs

pytestmark = pytest.mark.usefixtures("embedder")


@pytest.fixture
def corpus(tmp_path: Path) -> dict[str, Path]:
    files = write_docs(tmp_path)
    run_json("index-directory", str(tmp_path), "--sync", "-n", "kb")
    run_json("store", "Deploys happen on Tuesdays", "-t", "decision", "-n", "team")
    return files


def test_search_finds_documents_and_memories(corpus: dict[str, Path]) -> None:
    out = run_json("search", "how are tokens signed", "-k", "3")
    assert len(out["results"]) <= 3 and "HS256" in out["results"][0]["content"]
    assert out["total_tokens"] == sum(r["tokens"] for r in out["results"])
    human = run("search", "deploys tuesday")
    assert human.exit_code == 0 and "Tuesdays" in human.stdout


def test_search_with_filters_by_doc_type(corpus: dict[str, Path]) -> None:
    memories = run_json("search-with-filters", "deploy", "--doc-type", "memory")
    assert memories["results"] and {r["doc_type"] for r in memories["results"]} == {"memory"}
    documents = run_json("search-with-filters", "deploy", "--doc-type", "document", "-k", "10")
    assert documents["results"] and {r["doc_type"] for r in documents["results"]} == {"document"}
    one_file = run_json(
        "search-with-filters", "deploy", "--source-file", str(corpus["deploy"].resolve())
    )
    assert {r["metadata"]["source_file"] for r in one_file["results"]} == {
        str(corpus["deploy"].resolve())
    }
    team = run_json("search-with-filters", "deploy", "-n", "team")
    assert {r["namespace"] for r in team["results"]} == {"team"}
    assert "--doc-type" in fails("search-with-filters", "deploy", "--doc-type", "pdf")
    assert "Namespace not found" in fails("search-with-filters", "deploy", "-n", "ghost")


@pytest.mark.parametrize("budget", [1, 15, 40, 120, 1000])
def test_search_with_budget_never_exceeds(corpus: dict[str, Path], budget: int) -> None:
    out = run_json("search-with-budget", "deployment rollback tokens", "--max-tokens", str(budget))
    used = sum(count_tokens(r["content"]) for r in out["results"])
    assert used <= budget and out["tokens_used"] == used
    assert out["budget_remaining"] == budget - used


def test_search_with_budget_filters_and_errors(corpus: dict[str, Path]) -> None:
    out = run_json("search-with-budget", "deploy", "--max-tokens", "500", "--doc-type", "memory")
    assert [r["doc_type"] for r in out["results"]] == ["memory"]
    human = run("search-with-budget", "deploy", "--max-tokens", "500")
    assert human.exit_code == 0 and "tokens used" in human.stdout
    assert run("search-with-budget", "deploy").exit_code == 2  # --max-tokens is required
    assert "--max-tokens must be between" in fails("search-with-budget", "x", "--max-tokens", "0")
    assert fails("search", " ") == "error: Query cannot be empty"


def test_search_can_stay_in_one_namespace() -> None:
    run_json("store", "Team A deploys with Helm charts", "-n", "project:a")
    run_json("store", "Team B deploys with Helm charts", "-n", "project:b")
    everywhere = run_json("search", "deploys with Helm")["results"]
    assert {r["namespace"] for r in everywhere} == {"project:a", "project:b"}
    only_b = run_json("search", "deploys with Helm", "--namespace", "project:b")["results"]
    assert [r["namespace"] for r in only_b] == ["project:b"]
    assert "Namespace not found" in fails("search", "deploys", "-n", "project:ghost")


def test_search_output_keeps_the_lines_of_code(tmp_path) -> None:
    code = tmp_path / "retry.py"
    code.write_text("def retry(call):\n    for attempt in range(3):\n        call()\n")
    run_json("index-file", str(code))
    lines = [line.rstrip() for line in run("search", "retry attempts").stdout.splitlines()]
    # one line each, the body's indentation kept (under the two-space indent of a record)
    assert "  def retry(call):" in lines and "      for attempt in range(3):" in lines


def test_a_search_sent_to_a_server_carries_its_source_file_as_an_absolute_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With a server running, the CLI sends its call over REST: a path it names must be
    resolved where the user typed it, not in the server's working directory. Top-level
    paths (delete-file, index-file) were; --source-file, which travels inside the
    search's filters, was sent as typed."""
    import json

    from memsys.cli import remote
    from memsys.operations import BY_NAME

    monkeypatch.chdir(tmp_path)
    for name in ("search_with_filters", "search_with_budget"):
        data = {"query": "q", "filters": {"source_file": "docs/guide.md"}, "max_tokens": 5}
        if name == "search_with_filters":
            del data["max_tokens"]
        request = remote._request(BY_NAME[name], data, "http://127.0.0.1:1")
        assert request.data is not None
        sent = json.loads(request.data)["filters"]["source_file"]
        assert sent == str(tmp_path / "docs" / "guide.md"), name
