"""Hybrid search: semantic and lexical channels, filters, scores, the token budget."""

from __future__ import annotations

import pytest
from sqlalchemy import select

from memsys import runner
from memsys.db import session_scope
from memsys.errors import InvalidInput, NotFound
from memsys.models import QueryTrace
from memsys.schemas import SearchIn, SearchWithBudgetIn, SearchWithFiltersIn
from memsys.services import search
from memsys.tokens import count_tokens
from tests.factories import index, store, write_docs


def run_search(query: str, **fields):  # type: ignore[no-untyped-def]
    return runner.execute(search.search, SearchIn, {"query": query, **fields})


def filtered(query: str, filters: dict, **fields):  # type: ignore[no-untyped-def]
    data = {"query": query, "filters": filters, **fields}
    return runner.execute(search.search_with_filters, SearchWithFiltersIn, data)


def budget(query: str, max_tokens: int, **fields):  # type: ignore[no-untyped-def]
    data = {"query": query, "max_tokens": max_tokens, **fields}
    return runner.execute(search.search_with_budget, SearchWithBudgetIn, data)


def assert_never_rising(out) -> None:  # type: ignore[no-untyped-def]
    """Scores read down the list never rise, the one exception being the entry the seat
    placed (the trace names it): it shows its own relevance and lowers none below it."""
    with session_scope() as s:
        fusion = s.scalar(select(QueryTrace.fusion).where(QueryTrace.id == out.trace_id))
    seated = (fusion.get("seated") or {}).get("id")
    scores = [r.score for r in out.results if r.id != seated]
    assert scores == sorted(scores, reverse=True)


@pytest.fixture
def corpus(tmp_path, embedder):  # type: ignore[no-untyped-def]
    files = write_docs(tmp_path)
    for path in files.values():
        index(path, namespace="docs")
    store("User prefers short answers", memory_type="preference")
    return files


def test_semantic_match_without_shared_words(corpus) -> None:
    out = run_search("how long until a login credential stops working")
    assert out.results[0].metadata["header_path"] == "Configuration > Authentication"
    assert out.results[0].doc_type == "document"
    assert out.total == len(out.results) <= 5


def test_exact_term_match_ranks_first(corpus) -> None:
    out = run_search("HS256")
    assert "HS256" in out.results[0].content


def test_scores_are_normalised_and_ordered(corpus) -> None:
    out = run_search("deploy rollback wheel", n_results=10)
    assert all(0.0 <= r.score <= 1.0 for r in out.results)
    assert_never_rising(out)
    assert out.results[0].metadata["source_file"].endswith("deploy.md")
    assert out.total_tokens == sum(r.tokens for r in out.results)


def test_filters_by_doc_type_namespace_and_file(corpus) -> None:
    memories_only = filtered("answers", {"doc_type": "memory"})
    assert [r.doc_type for r in memories_only.results] == ["memory"]
    docs = filtered("answers", {"namespace": "docs"})
    assert {r.namespace for r in docs.results} == {"docs"}
    one_file = filtered(
        "anything at all", {"source_file": str(corpus["code"].resolve())}, n_results=10
    )
    assert {r.metadata["source_file"] for r in one_file.results} == {str(corpus["code"].resolve())}
    with pytest.raises(NotFound, match="Namespace not found: nowhere"):
        filtered("x", {"namespace": "nowhere"})
    with pytest.raises(InvalidInput, match="doc_type"):
        filtered("x", {"doc_type": "spreadsheet"})
    with pytest.raises(InvalidInput, match="Extra inputs"):
        filtered("x", {"author": "me"})


def test_a_relative_source_file_filter_names_the_indexed_file(corpus, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Indexing stores a file under its resolved absolute path and delete_file resolves the
    path it is given; the source_file filter compared the string as given, so a relative
    path (what a shell user types) matched nothing, silently."""
    indexed = str(corpus["code"].resolve())
    monkeypatch.chdir(corpus["code"].parent)
    relative = {"source_file": corpus["code"].name}
    one_file = filtered("anything at all", relative, n_results=10)
    assert one_file.results and {r.metadata["source_file"] for r in one_file.results} == {indexed}
    within = budget("anything at all", 3000, filters=relative)
    assert within.results and {r.metadata["source_file"] for r in within.results} == {indexed}


@pytest.mark.parametrize("max_tokens", [1, 10, 30, 60, 200, 3000])
def test_budget_is_never_exceeded(corpus, max_tokens: int) -> None:
    out = budget("configuration deployment tokens cache", max_tokens)
    used = sum(count_tokens(r.content) for r in out.results)
    assert used == out.tokens_used <= max_tokens
    assert out.budget_remaining == max_tokens - out.tokens_used
    assert out.truncated == (out.truncated_count > 0)
    assert_never_rising(out)
    if max_tokens == 3000:
        assert not out.truncated and len(out.results) >= 5


def test_hits_under_min_relevance_are_not_counted_as_cut_by_the_budget(corpus) -> None:
    """truncated_count counted what min_relevance dropped: an agent raised max_tokens for
    nothing."""
    params = {"query": "configuration deployment tokens cache", "max_tokens": 100_000}
    everything = runner.execute(search.search_with_budget, SearchWithBudgetIn, params)
    strict = runner.execute(
        search.search_with_budget, SearchWithBudgetIn, {**params, "min_relevance": 0.99}
    )
    assert not everything.truncated and len(strict.results) < len(everything.results)
    assert not strict.truncated and strict.truncated_count == 0


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"query": ""}, "Query cannot be empty"),
        ({"query": "   "}, "Query cannot be empty"),
        ({"query": "x", "n_results": 0}, "n_results must be between 1 and 50"),
        ({"query": "x", "n_results": 500}, "n_results must be between 1 and 50"),
        ({"query": "x" * 5000}, "Query is too long"),
    ],
)
def test_bad_queries(fields, message) -> None:
    with pytest.raises(InvalidInput, match=message):
        runner.execute(search.search, SearchIn, fields)


def test_budget_must_be_positive() -> None:
    with pytest.raises(InvalidInput, match="max_tokens must be between 1"):
        budget("x", 0)


def test_stopword_only_query_still_answers_by_meaning(corpus) -> None:
    out = run_search("what is it about")  # no lexemes: the vector channel alone
    assert out.results and all(0.0 <= r.score <= 1.0 for r in out.results)
    # The score is an absolute relevance (issue 9): with no lexical evidence it is the
    # similarity itself, not 1.0 for whatever came first.
    assert out.results[0].score == out.results[0].similarity < 0.5


def test_a_text_in_two_indexed_files_is_one_hit_naming_both(tmp_path, embedder) -> None:
    """A link and its target in one indexed folder (or a file copied under a second name)
    are two documents with the same chunks. Retrieval lists a text once, so the second
    path was nowhere in the answer: the hit now names the other files holding its exact
    text, in its metadata's `also_in`."""
    from memsys.schemas import IndexDirectoryIn
    from memsys.services import folders

    folder = tmp_path / "notes"
    folder.mkdir()
    plan = folder / "plan.md"
    plan.write_text("# Plan\n\nThe migration window opens on Sunday at dawn.\n")
    (folder / "plan-link.md").symlink_to(plan)
    (folder / "plan-copy.md").write_text(plan.read_text())
    (folder / "other.md").write_text("# Other\n\nThe migration of the mail server is done.\n")
    runner.execute(
        folders.index_directory, IndexDirectoryIn, {"dir_path": str(folder), "async_mode": False}
    )
    paths = {str(folder / n) for n in ("plan.md", "plan-link.md", "plan-copy.md")}
    for out in (
        run_search("migration window"),
        filtered("migration window", {"doc_type": "document"}),
        budget("migration window", 500),
    ):
        same = [r for r in out.results if "migration window" in r.content]
        assert len(same) == 1, out.results
        (hit,) = same
        assert {hit.metadata["source_file"], *hit.metadata["also_in"]} == paths
        assert len(hit.metadata["also_in"]) == 2
        other = [r for r in out.results if "mail server" in r.content]
        assert other and "also_in" not in other[0].metadata
