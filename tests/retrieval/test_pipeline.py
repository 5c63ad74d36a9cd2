"""The pipeline: fusion order, relevance that means something, as_of, dedup, and the floor
(never below the best single channel) on real slices of the evaluation sets."""

from __future__ import annotations

import json
import random
import re
from datetime import UTC, datetime
from pathlib import Path

import pytest

from memsys import runner
from memsys.db import session_scope
from memsys.retrieval import fusion, pipeline
from memsys.schemas import MemoryForgetIn
from memsys.services import memories
from tests.factories import store

DATA = Path(__file__).resolve().parents[3] / "shared" / "data"


def test_zfuse_rewards_agreement_and_a_confident_channel() -> None:
    # Candidates: 0 is top in both, 1 stands out in the lexical channel only, 2 is middling
    # in both, 3 is weak everywhere.
    dense = [0.80, 0.40, 0.55, 0.30]
    lexical = [9.0, 12.0, 3.0, 0.0]
    fused = fusion.zfuse(dense, lexical)
    order = sorted(range(4), key=lambda i: -fused[i])
    assert order[0] == 0 and order[-1] == 3
    assert fused[1] > fused[2]  # one confident channel beats two lukewarm ones
    # RRF on the same candidates cannot tell: 1 and 2 get ranks 3+1 and 2+3.
    assert fusion.rrf(dense, lexical)[1] > fusion.rrf(dense, lexical)[2]


def test_the_seat_moves_the_walks_best_entry_up_to_its_place_and_nothing_else() -> None:
    order = [7, 3, 9, 1, 4, 8, 2, 6]
    # Entries best first: 3 is already above the seat, so 6 (8th) takes the 5th place.
    assert fusion.seat(order, [3, 6, 8], 5) == ([7, 3, 9, 1, 6, 4, 8, 2], 6)
    assert fusion.seat(order, [8, 6], 5) == ([7, 3, 9, 1, 8, 4, 2, 6], 8)
    # Already at or above its place, no entry, or the seat off: the order is untouched.
    assert fusion.seat(order, [4], 5) == (order, None)
    assert fusion.seat(order, [3, 9], 5) == (order, None)
    assert fusion.seat(order, [], 5) == (order, None)
    assert fusion.seat(order, [6], 0) == (order, None)
    # Copies dedup will drop take no place: with 3 and 9 left out, the 5th place is after 8,
    # and a copy is never seated.
    assert fusion.seat(order, [6], 5, {3, 9}) == ([7, 3, 9, 1, 4, 8, 6, 2], 6)
    assert fusion.seat(order, [2, 6], 5, {2}) == ([7, 3, 9, 1, 6, 4, 8, 2], 6)


def test_relevance_is_low_for_unrelated_hits(embedder) -> None:
    store("Never commit secrets to the repository", memory_type="golden_rule")
    store("The user prefers dark mode in every editor", memory_type="preference")
    with session_scope() as s:
        found = pipeline.retrieve(s, "how do we deploy", limit=2)
    assert found.hits and all(h.score < 0.35 for h in found.hits), [h.score for h in found.hits]
    with session_scope() as s:
        found = pipeline.retrieve(s, "which theme does the user like in editors", limit=2)
    assert found.hits[0].content.startswith("The user prefers dark mode")
    assert found.hits[0].score > 0.5


def test_a_long_memory_holding_every_query_word_is_a_full_lexical_match(embedder) -> None:
    """Coverage is measured at the chunk's own length: BM25 scores a long chunk's match lower,
    which read as a fraction of the query and let min_relevance drop it."""
    steps = " ".join(
        f"Step {n}: the on-call engineer checks the dashboards, the queue depth and the error "
        "budget, then writes down what changed since the last check."
        for n in range(1, 13)
    )
    long = store(f"Checkout outage postmortem. {steps} Action items are owned by Priya.").id
    short = store("Zanzibar is where the offsite happens").id
    for other in ("Deploys go out on Tuesdays", "The VPN certificate expires in March"):
        store(other)
    with session_scope() as s:
        by_name = pipeline.retrieve(s, "Priya", limit=1)
        island = pipeline.retrieve(s, "Zanzibar", limit=1)
    assert by_name.hits[0].id == long and island.hits[0].id == short
    assert by_name.hits[0].score > 0.99 and island.hits[0].score > 0.99


def test_as_of_sees_the_rows_valid_then(embedder) -> None:
    kept = store("Postgres runs with shared_buffers of one gigabyte", namespace="project:a")
    gone = store("Postgres used to run with 128 megabytes of shared buffers", namespace="project:a")
    before = datetime.now(UTC)
    runner.execute(memories.forget, MemoryForgetIn, {"memory_id": gone.id})
    with session_scope() as s:
        now = pipeline.retrieve(s, "postgres shared buffers", limit=5)
        then = pipeline.retrieve(s, "postgres shared buffers", limit=5, as_of=before)
    assert {h.id for h in now.hits} == {kept.id}
    assert {h.id for h in then.hits} == {kept.id, gone.id}


def test_a_lexical_hit_purged_during_the_recall_is_left_out(embedder, monkeypatch) -> None:
    """Each statement sees what is committed when it starts: a memory purged after the
    lexical channel found it, before its features are read, is no candidate (no error)."""
    kept = store("The staging cluster runs on three nodes", namespace="project:a")
    purged = store("The staging cluster was moved to the new region", namespace="project:a")
    real = pipeline.lexical.search

    def search_then_purge(*args: object) -> object:
        hits = real(*args)
        assert purged.id in {k[1] for k, _ in hits}
        forget = {"memory_id": purged.id, "purge": True}
        runner.execute(memories.forget, MemoryForgetIn, forget)  # commits on its own
        return hits

    monkeypatch.setattr(pipeline.lexical, "search", search_then_purge)
    with session_scope() as s:
        found = pipeline.retrieve(s, "staging cluster", limit=5)
    assert [h.id for h in found.hits] == [kept.id]
    assert purged.id not in {f[0] for f in found.features}


def test_the_same_text_in_two_namespaces_is_returned_once(embedder) -> None:
    store("Use ruff for linting", namespace="project:a")
    store("Use ruff for linting", namespace="project:b")
    with session_scope() as s:
        found = pipeline.retrieve(s, "which linter", limit=5)
    assert [h.content for h in found.hits].count("Use ruff for linting") == 1


def _recall(gold: set[str], got: list[str], k: int) -> float:
    return len(gold & set(got[:k])) / len(gold)


def _floor(ns: str, questions: list[tuple[str, set[str]]], k: int) -> dict[str, float]:
    """Recall@k of the fused list and of every channel alone (each in its own order)."""
    totals = {"dense": 0.0, "lexical": 0.0, "graph": 0.0, "neighbours": 0.0, "fused": 0.0}
    with session_scope() as s:
        for query, gold in questions:
            found = pipeline.retrieve(s, query, filters={"namespace": ns}, limit=k)
            lists = {
                "dense": [h["id"] for h in found.channels["dense"]],
                "lexical": [h["id"] for h in found.channels["lexical"]["hits"]],
                "graph": [h["id"] for h in found.channels["graph"]],
                "neighbours": [h["id"] for h in found.channels["neighbours"]],
                "fused": [h.id for h in found.hits],
            }
            for name, ranked in lists.items():
                totals[name] += _recall(gold, ranked, k)
    return {name: value / len(questions) for name, value in totals.items()}


def _assert_floor(scores: dict[str, float]) -> None:
    best = max(v for name, v in scores.items() if name != "fused")
    assert scores["fused"] >= best, scores


def _bulk(ns: str, texts: list[str]) -> list[str]:
    """Store through memory_store_batch (the model embeds a batch at a time)."""
    from memsys.schemas import MemoryStoreBatchIn, MemoryStoreIn

    stored: list[str] = []
    for start in range(0, len(texts), 100):
        batch = MemoryStoreBatchIn(
            memories=[MemoryStoreIn(content=t, namespace=ns) for t in texts[start : start + 100]]
        )
        stored += [r.id for r in runner.run(memories.store_batch, batch).results]
    return stored


@pytest.mark.skipif(not DATA.exists(), reason="the shared evaluation data is not beside the repo")
def test_fused_is_never_below_the_best_channel_on_locomo(embedder) -> None:
    conv = json.loads((DATA / "locomo" / "locomo10.json").read_text())[0]
    c = conv["conversation"]
    turns, dia = [], []
    for key in sorted((k for k in c if re.fullmatch(r"session_\d+", k)), key=lambda k: int(k[8:])):
        for turn in c[key]:
            turns.append(f"{turn['speaker']}: {turn['text']}")
            dia.append(turn["dia_id"])
    ids = dict(zip(dia, _bulk("locomo:0", turns), strict=True))
    questions = []
    for qa in conv["qa"]:
        gold = {ids[d] for d in re.findall(r"D\d+:\d+", " ".join(qa["evidence"])) if d in ids}
        if gold:
            questions.append((qa["question"], gold))
    _assert_floor(_floor("locomo:0", questions, 10))


@pytest.mark.skipif(not DATA.exists(), reason="the shared evaluation data is not beside the repo")
def test_fused_is_never_below_the_best_channel_on_multi_hop_passages(embedder) -> None:
    """HotpotQA: 40 questions over all their passages (two gold and eight distractors each,
    ~400 passages), stored in a shuffled order."""
    raw = json.loads((DATA / "hotpotqa" / "hotpotqa_train.json").read_text())[:40]
    corpus = {title: "".join(lines).strip() for q in raw for title, lines in q["context"]}
    titles = sorted(corpus)
    random.Random(7).shuffle(titles)
    ids = dict(zip(titles, _bulk("hotpot", [f"{t}: {corpus[t]}" for t in titles]), strict=True))
    questions = [(q["question"], {ids[t] for t, _ in q["supporting_facts"]}) for q in raw]
    _assert_floor(_floor("hotpot", questions, 5))


@pytest.mark.skipif(not DATA.exists(), reason="the shared evaluation data is not beside the repo")
def test_fused_is_never_below_the_best_channel_on_scientific_claims(embedder) -> None:
    """SciFact: 60 claims; their cited abstracts among 400 abstracts of the corpus."""
    docs = {}
    with (DATA / "scifact" / "corpus.jsonl").open() as f:
        for line in f:
            d = json.loads(line)
            docs[d["_id"]] = f"{d['title']} {d['text']}"
    claims = {}
    with (DATA / "scifact" / "queries.jsonl").open() as f:
        for line in f:
            q = json.loads(line)
            claims[q["_id"]] = q["text"]
    qrels: dict[str, set[str]] = {}
    for line in (DATA / "scifact" / "qrels" / "train.tsv").read_text().splitlines()[1:]:
        qid, doc, _ = line.split("\t")
        if doc in docs and qid in claims:
            qrels.setdefault(qid, set()).add(doc)
    chosen = sorted(qrels)[:60]
    cited = {d for q in chosen for d in qrels[q]}
    others = [d for d in docs if d not in cited][: 400 - len(cited)]
    order = sorted(cited) + others
    random.Random(7).shuffle(order)  # write order must not tell which abstracts are cited
    ids = dict(zip(order, _bulk("scifact", [docs[d] for d in order]), strict=True))
    questions = [(claims[q], {ids[d] for d in qrels[q]}) for q in chosen]
    _assert_floor(_floor("scifact", questions, 10))


def test_min_relevance_cuts_unrelated_hits_in_every_front_end(embedder) -> None:
    from fastapi.testclient import TestClient

    from memsys.api.app import create_app
    from memsys.schemas import MemoryRecallIn, SearchIn
    from memsys.services import search
    from tests.cli.helpers import run_json

    store("Never commit secrets to the repository", memory_type="golden_rule")
    store("The user prefers dark mode in every editor", memory_type="preference")
    unrelated = {"query": "how do we deploy", "min_relevance": 0.5}
    assert runner.execute(memories.recall, MemoryRecallIn, unrelated).memories == []
    assert runner.execute(search.search, SearchIn, unrelated).results == []
    related = {"query": "which theme does the user like in editors", "min_relevance": 0.5}
    got = runner.execute(memories.recall, MemoryRecallIn, related).memories
    assert [m.content for m in got] == ["The user prefers dark mode in every editor"]

    with TestClient(create_app(background=False), base_url="http://127.0.0.1:8700") as client:
        body = client.post("/v1/memories/recall", json=unrelated).json()
        assert body["memories"] == []
        bad = client.post("/v1/search", json={"query": "x", "min_relevance": 2})
        assert bad.status_code == 422 and "min_relevance" in bad.json()["error"]
    cli = run_json("recall", related["query"], "--min-relevance", "0.5")
    assert [m["content"] for m in cli["memories"]] == ["The user prefers dark mode in every editor"]


def test_min_relevance_reads_each_hits_own_relevance_not_the_cap_above_it() -> None:
    """A shown score never rises down the list (it is capped by the hit above); a cut-off
    applied to that capped score dropped a strong match ranked under a weaker one."""
    from memsys.services import search

    def hit(name: str, own: float) -> pipeline.Hit:
        return pipeline.Hit(
            namespace="global", id=name, doc_type="memory", content=name, token_count=1,
            score=own, own=own, similarity=own, vec_rank=None, fts_rank=None,
            memory_type="fact", importance=0.5, confidence=0.3, tags=[], metadata={},
            source_file=None, chunk_index=None, header_path=None, created_at=datetime.now(UTC),
        )  # fmt: skip

    hits = [hit("weaker first", 0.74), hit("exact match", 0.95), hit("noise", 0.2)]
    pipeline.never_rising(hits, None)
    assert [h.score for h in hits] == [0.74, 0.74, 0.2]  # as the list shows them
    found = pipeline.Retrieval(hits=hits, vec_count=3, fts_count=1)
    kept = search.relevant(found, 0.8)
    assert [(h.id, h.score) for h in kept] == [("exact match", 0.95)]
    assert [h.id for h in search.relevant(found, None)] == [h.id for h in hits]
