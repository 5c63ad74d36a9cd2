"""BM25 inside PostgreSQL: the formula on a hand-computed example, and statistics that follow
every write (insert, forget, purge) in the same transaction."""

from __future__ import annotations

import dataclasses
import math
from datetime import UTC, datetime

import pytest
from sqlalchemy import text

from memsys import runner
from memsys.db import session_scope
from memsys.retrieval import lexical, pipeline
from memsys.schemas import MemoryForgetIn
from memsys.services import memories
from tests.factories import store

NS = "project:bm25"


def stats(lexeme: str) -> tuple[int, int, int]:
    """(df of lexeme, live chunks, total length) in NS, as the triggers keep them."""
    with session_scope() as s:
        df = s.execute(
            text("SELECT coalesce(sum(df), 0) FROM term_stat WHERE namespace = :n AND lexeme = :l"),
            {"n": NS, "l": lexeme},
        ).scalar_one()
        corpus = s.execute(
            text("SELECT doc_count, total_len FROM corpus_stat WHERE namespace = :n"), {"n": NS}
        ).one()
    return int(df), int(corpus.doc_count), int(corpus.total_len)


def test_bm25_matches_a_hand_computed_example(embedder) -> None:
    # Words that the English stemmer leaves alone; lengths 3, 2 and 4 tokens.
    store("cat dog bird", namespace=NS)
    store("cat cat", namespace=NS)
    a = store("fish bird bird tree", namespace=NS)
    # N = 3, avgdl = 9 / 3 = 3. Query "bird": df = 2, idf = ln(1 + (3 - 2 + 0.5) / 2.5).
    idf = math.log(1 + 1.5 / 2.5)

    def bm25(tf: int, dl: int) -> float:
        return idf * tf * 2.2 / (tf + 1.2 * (1 - 0.75 + 0.75 * dl / 3))

    with session_scope() as s:
        terms = lexical.analyse(s, "bird", NS)
        found = lexical.search(s, terms, {"namespace": NS}, None, pool=10)
    assert terms.doc_count == 3 and terms.avgdl == pytest.approx(3.0)
    assert terms.df == [2] and terms.idf[0] == pytest.approx(idf)
    scores = {key[1]: score for key, score in found}
    assert len(scores) == 2
    assert scores[a.id] == pytest.approx(bm25(2, 4))  # tf 2 in a 4-token chunk ranks first
    assert found[0][0][1] == a.id
    assert sorted(scores.values())[0] == pytest.approx(bm25(1, 3))


def test_the_channel_is_exhaustive_bm25_over_postgresqls_own_analysis(embedder) -> None:
    """On a store where every query term fits the candidate budget, the channel's ranking is
    Okapi BM25 over the chunks' English tsvectors computed in Python, document by document."""
    from memsys.benchmark.harness import analysed_bm25

    for content in (
        "Deploying the billing service needs the staging database migrated first",
        "The deploy pipeline runs migrations, then restarts every service",
        "Rollbacks of a failed deployment restore the previous database snapshot",
        "Billing invoices are generated nightly by the reporting service",
        "A failed migration blocks the deploy until someone rolls it back",
        "The reporting database is a read replica refreshed hourly",
        "So was I!",  # stop words only: no lexemes, still a document of the corpus
    ):
        store(content, namespace=NS)
    with session_scope() as s:
        exhaustive, ids = analysed_bm25(s, NS)
        for query in ("deploying services", "rolled back a failed migration", "billing database"):
            terms = lexical.analyse(s, query, NS)
            found = lexical.search(s, terms, {"namespace": NS}, None, pool=10)
            expected = [ids[i] for i in exhaustive.top_terms(terms.lexemes, 10)]
            assert [key[1] for key, _ in found] == expected, query
            by_id = {ids[i]: v for i, v in exhaustive.scores(terms.lexemes).items()}
            assert [score for _, score in found] == pytest.approx([by_id[i] for i in expected])
            assert len(expected) >= 3  # stems matched: "deploying" finds "deploy", "deployment"


def test_statistics_follow_insert_forget_and_purge(embedder) -> None:
    first = store("the migration runbook covers rollback", namespace=NS)
    second = store("rollback needs the previous wheel", namespace=NS)
    df, n, total = stats("rollback")
    assert (df, n) == (2, 2) and total > 0
    runner.execute(memories.forget, MemoryForgetIn, {"memory_id": first.id, "namespace": NS})
    assert stats("rollback")[:2] == (1, 1)
    runner.execute(
        memories.forget, MemoryForgetIn, {"memory_id": second.id, "namespace": NS, "purge": True}
    )
    assert stats("rollback") == (0, 0, 0)


def test_as_of_a_past_time_the_statistics_are_those_of_the_rows_valid_then(embedder) -> None:
    """A memory forgotten since is found by its words in a view of the past, scored with
    that time's statistics (today's know only the live rows)."""
    ticket = store("OPS-90210: rotate the TLS certificate on the edge proxy", namespace=NS).id
    store("Rotate the staging database password every quarter", namespace=NS)
    store("The edge proxy runs three replicas", namespace=NS)
    with session_scope() as s:
        before = lexical.analyse(s, "OPS-90210 rotate", NS)
    then = datetime.now(UTC)
    runner.execute(memories.forget, MemoryForgetIn, {"memory_id": ticket, "namespace": NS})
    store("Rotate the API keys when someone leaves", namespace=NS)
    with session_scope() as s:
        today = lexical.analyse(s, "OPS-90210 rotate", NS)
        past = lexical.analyse(s, "OPS-90210 rotate", NS, then)
        hits = lexical.search(s, past, {"namespace": NS}, then, 10)
    assert dict(zip(today.lexemes, today.df, strict=True))["-90210"] == 0
    # the past view's statistics are exactly what the triggers kept at that time
    assert (past.lexemes, past.df, past.doc_count) == (before.lexemes, before.df, before.doc_count)
    assert past.avgdl == pytest.approx(before.avgdl)
    assert hits[0][0][1] == ticket
    with session_scope() as s:
        found = pipeline.retrieve(s, "OPS-90210", filters={"namespace": NS}, limit=3, as_of=then)
    assert found.channels["lexical"]["hits"][0]["id"] == ticket == found.hits[0].id


def test_a_failed_write_leaves_the_statistics_unchanged(embedder) -> None:
    store("kubernetes ingress controller", namespace=NS)
    before = stats("ingress")
    with pytest.raises(RuntimeError), session_scope() as s:
        s.execute(
            text(
                "INSERT INTO chunk (namespace, id, doc_type, content, content_hash, token_count,"
                " memory_type) VALUES (:n, 'mem_x', 'memory', 'ingress ingress', 'h', 2, 'fact')"
            ),
            {"n": NS},
        )
        assert stats("ingress")[0] == 1  # another transaction does not see it yet
        raise RuntimeError("abort halfway")
    assert stats("ingress") == before


def test_lexical_channel_finds_rare_terms_beyond_the_dense_pool(embedder) -> None:
    # A distinctive identifier that a sentence embedding barely notices.
    store("Deploy target is cluster zx81-eu", namespace=NS)
    for i in range(30):
        store(f"Deployment note {i}: clusters are deployed by the release pipeline", namespace=NS)
    with session_scope() as s:
        found = pipeline.retrieve(s, "zx81-eu", filters={"namespace": NS}, limit=3)
    assert "zx81-eu" in found.hits[0].content
    assert found.hits[0].fts_rank == 1


def test_candidates_beyond_the_cap_are_the_same_live_and_as_of(
    embedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    """When one term alone is in more chunks than the cap, the chunks scored are the first by
    id, whatever plan reads them: a replay (as of a time) scores the same candidates."""
    ids = [store(f"Release note {i}: the rollout went fine", namespace=NS).id for i in range(12)]
    monkeypatch.setattr(lexical, "CANDIDATE_CAP", 5)
    with session_scope() as s:
        terms = lexical.analyse(s, "rollout", NS)
        scope = {"namespace": NS}
        live = lexical.search(s, terms, scope, None, 20)
        then = lexical.search(s, terms, scope, datetime.now(UTC), 20)
    assert {k[1] for k, _ in live} == set(sorted(ids)[:5])
    assert live == then


def test_a_trace_keeps_the_budget_its_query_was_scored_with() -> None:
    terms = lexical.QueryTerms(["rollout"], [7], [1.0], 10, 4.0, budget=3, cap=3)
    again = lexical.QueryTerms.recorded(terms.trace())
    assert (again.budget, again.cap) == (3, 3)
    # A trace written before the budget was recorded replays with the one it ran with.
    older = {k: v for k, v in terms.trace().items() if k not in ("budget", "cap")}
    assert (lexical.QueryTerms.recorded(older).budget, lexical.QueryTerms.recorded(older).cap) == (
        20_000,
        4_000,
    )


def test_the_channel_scores_a_chunk_as_the_feature_reads_do(embedder) -> None:
    """The channel scores its candidates in its own statement; the pipeline reads the BM25 of
    other candidates in others (`BM25_OF`), and fusion compares the two, so they must agree to
    the last bit. A replay (as of a time, with the statistics its trace recorded, which may
    list the lexemes in another order) must find the same hits with the same scores."""
    for content in (
        "The billing export failed twice on the staging database",
        "Billing runs nightly; the export lands in the reporting bucket",
        "Staging database credentials rotate every ninety days",
        "A failed export retries three times before it pages anyone",
    ):
        store(content, namespace=NS)
    scope = {"namespace": NS}
    with session_scope() as s:
        terms = lexical.analyse(s, "billing export failed on staging", NS)
        live = lexical.search(s, terms, scope, None, 10)
        recorded = lexical.QueryTerms.recorded(terms.trace())
        recorded = dataclasses.replace(  # the query's terms listed the other way round
            recorded, lexemes=recorded.lexemes[::-1], df=recorded.df[::-1], idf=recorded.idf[::-1]
        )
        assert len(recorded.lexemes) >= 3
        then = lexical.search(s, recorded, scope, datetime.now(UTC), 10)
        each = text(f"SELECT cand.id, {lexical.BM25_OF} FROM chunk cand WHERE cand.id = ANY(:ids)")
        params = {**lexical.score_params(terms), "ids": [k[1] for k, _ in live]}
        one_by_one = dict(s.execute(each, params).all())
    assert len(live) == 4
    assert live == then
    assert {k[1]: score for k, score in live} == one_by_one


def test_a_number_finds_its_signed_reading_and_the_reverse(embedder) -> None:
    """PostgreSQL reads `JIRA-1234` as `jira` and `-1234`: the query `1234` found nothing
    lexically, nor `00942` in `ORA-00942`; each number also looks for its other reading,
    counted once in the query's whole weight."""
    ticket = store("JIRA-1234 tracks the flaky upload retries", namespace=NS).id
    oracle = store("ORA-00942 means the table or view does not exist", namespace=NS).id
    plain = store("Order 5150 shipped on Monday", namespace=NS).id
    store("The upload service retries three times", namespace=NS)
    with session_scope() as s:
        for query, wanted in (("1234", ticket), ("00942", oracle), ("ticket -5150", plain)):
            terms = lexical.analyse(s, query, NS)
            hits = lexical.search(s, terms, {"namespace": NS}, None, 10)
            assert hits and hits[0][0][1] == wanted, (query, terms)
        terms = lexical.analyse(s, "1234", NS)
        assert terms.readings == {"-1234": "1234"} and terms.whole == max(terms.idf)
        # a reading the scope does not hold is no term at all
        assert lexical.analyse(s, "777", NS).lexemes == ["777"]


def test_a_path_or_host_is_found_by_its_parts(embedder) -> None:
    """PostgreSQL reads `billing/invoice.py` and `grafana.prod.acme.io` as one token each: a
    query naming the file, the host's name or the host without its port found nothing lexically.
    A stored text's parts are lexemes too; the text's own lexemes keep their counts."""
    invoice = store("KeyError: 'tenant_id' in billing/invoice.py line 212", namespace=NS).id
    grafana = store("Dashboards live at grafana.prod.acme.io", namespace=NS).id
    db = store("Postgres listens on db.acme.io:5432 in staging", namespace=NS).id
    store("Invoices are rendered as PDF on the billing host", namespace=NS)
    with session_scope() as s:
        for query, wanted in (
            ("invoice.py", invoice),
            ("grafana prod", grafana),
            ("db.acme.io", db),
        ):
            terms = lexical.analyse(s, query, NS)
            hits = lexical.search(s, terms, {"namespace": NS}, None, 10)
            assert hits and hits[0][0][1] == wanted, (query, terms, hits)
        vector, plain, counted = s.execute(
            text(
                "SELECT memsys_tsv(:t), to_tsvector('english', :t), "
                "memsys_tsv('acme.io/docs docs and more docs')"
            ),
            {"t": "cats chase more cats, and MyD88/CD40 in kb/min"},
        ).one()
    assert vector == plain  # words, and pairs of words joined by one slash, read as before
    assert "'doc':4,7 " in counted  # a part already in the text adds no occurrence
    assert stats("invoice.py")[0] == 1 and stats("grafana")[0] == 1
