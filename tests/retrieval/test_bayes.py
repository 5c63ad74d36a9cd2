"""The probabilistic store (D9): P(X|Y) from co-occurrence or recorded outcomes, a stated
Beta(1, 1) prior, the counts in the answer, and "unknown" when Y matches nothing."""

from __future__ import annotations

from sqlalchemy import text as sql

from memsys import runner
from memsys.retrieval import bayes
from memsys.schemas.learning import MemoryApplyIn, MemoryOutcomeIn
from memsys.schemas.query import QueryIn
from memsys.services import learning
from memsys.services import query as query_service
from tests.factories import store

NS = "project:odds"


def test_questions_name_x_and_y() -> None:
    assert bayes.parse("P(deploy fails | friday)") == ("deploy fails", "friday")
    assert bayes.parse("probability of a rollback given a schema change?") == (
        "a rollback",
        "a schema change",
    )
    assert bayes.parse("How likely is a timeout when the queue is full?") == (
        "a timeout",
        "the queue is full",
    )
    assert bayes.parse("how likely is it") is None
    assert bayes.parse("P( | )") is None and bayes.parse("P(a | )") is None  # as P(|) is


def test_co_occurrence_with_its_counts(embedder) -> None:  # type: ignore[no-untyped-def]
    for text in (
        "Friday deploy failed: the migration locked the table",
        "The Friday deploy failed again after the config change",
        "Friday release went out cleanly",
        "Tuesday deploy failed on a flaky test",
    ):
        store(text, namespace=NS)
    out = runner.execute(
        query_service.query, QueryIn, {"query": "P(deploy fails | friday)", "namespace": NS}
    )
    assert out.stores_queried == ["bayesian"]
    p = out.probability
    assert p is not None and p["known"] and p["method"] == "co-occurrence"
    assert (p["given"], p["hits"], p["trials"]) == (3, 2, 3)
    assert p["prior"] == {"alpha": 1.0, "beta": 1.0}
    assert p["probability"] == round((2 + 1) / (3 + 2), 4)
    assert "2 of 3" in out.output


def test_recorded_outcomes(embedder) -> None:  # type: ignore[no-untyped-def]
    memory = store("Retry the flaky upload with exponential backoff", namespace=NS).id
    for success in (True, True, False):
        runner.execute(learning.apply, MemoryApplyIn, {"memory_id": memory, "context": "ci"})
        runner.execute(learning.outcome, MemoryOutcomeIn, {"memory_id": memory, "success": success})
    from memsys.db import session_scope

    with session_scope() as s:
        found = bayes.estimate(s, "success", "flaky upload", {"namespace": NS}, None)
    assert found.method == "outcomes"
    assert (found.given, found.hits, found.trials) == (1, 2, 3)
    assert found.probability == round(3 / 5, 4)
    # As of a time, only the outcomes recorded by then count (a replay sees what it saw).
    with session_scope() as s:
        stored = s.scalar(sql("SELECT created_at FROM chunk WHERE id = :id"), {"id": memory})
        first = s.scalar(
            sql("SELECT min(created_at) FROM validation_event WHERE event_type = 'succeeded'")
        )
        before = bayes.estimate(s, "success", "flaky upload", {"namespace": NS}, stored)
        assert (before.given, before.trials) == (1, 0)
        then = bayes.estimate(s, "success", "flaky upload", {"namespace": NS}, first)
        assert (then.hits, then.trials) == (1, 1)


def test_a_condition_nothing_matches_is_unknown(embedder) -> None:  # type: ignore[no-untyped-def]
    store("The cache is warmed at startup", namespace=NS)
    out = runner.execute(
        query_service.query,
        QueryIn,
        {"query": "probability of a cache miss given a zebra stampede", "namespace": NS},
    )
    p = out.probability
    assert p is not None and not p["known"] and p["probability"] is None
    assert (p["given"], p["hits"], p["trials"]) == (0, 0, 0)
    assert "unknown" in out.output


def test_an_event_named_by_no_searchable_word_is_unknown(embedder) -> None:  # type: ignore[no-untyped-def]
    # "the" is in every note, yet matches none: "0 of 2" and 0.25 would be a made-up answer
    store("The deploy went out on Friday", namespace=NS)
    store("The deploy was rolled back", namespace=NS)
    for query, word in (("P(the | deploy)", "the"), ("P(deploy | it is)", "it is")):
        out = runner.execute(query_service.query, QueryIn, {"query": query, "namespace": NS})
        p = out.probability
        assert p is not None and not p["known"] and p["probability"] is None
        assert (p["given"], p["hits"], p["trials"]) == (0, 0, 0)
        assert out.output.endswith(f"unknown: {word!r} has no word memory is searched by")


def test_an_estimate_is_one_statement(embedder) -> None:  # type: ignore[no-untyped-def]
    # memory_query's P(X|Y) asks the database once: whether X and Y hold a searchable word
    # is read with the counts, not in a round trip of its own before them
    from sqlalchemy import event

    from memsys.db import get_engine, session_scope

    store("The deploy went out on Friday", namespace=NS)
    statements: list[str] = []

    def seen(conn, cursor, statement, *args) -> None:  # type: ignore[no-untyped-def]
        statements.append(statement)

    with session_scope() as s:
        s.execute(sql("SELECT 1"))  # the session's own opening statements are not counted
        event.listen(get_engine(), "before_cursor_execute", seen)
        try:
            answers = [
                bayes.estimate(s, x, y, {"namespace": NS}, None)
                for x, y in (("friday", "deploy"), ("success", "deploy"), ("the", "deploy"))
            ]
        finally:
            event.remove(get_engine(), "before_cursor_execute", seen)
    assert len(statements) == 3, statements
    assert [a.method for a in answers] == ["co-occurrence", "outcomes", "co-occurrence"]
    assert (answers[0].given, answers[0].hits) == (1, 1)
    assert answers[2].unsearchable == "the" and not answers[2].known
