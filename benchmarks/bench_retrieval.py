"""Retrieval quality on data written by others, through the pipeline the tools call.

Sets (../shared/data/README.md says how each is scored): LoCoMo evidence recall (one
namespace per conversation), the HotpotQA sample (passage recall), the same with the 6,119
2Wiki passages as distractors, and SciFact train (nDCG@10). Each set is bulk-loaded into a
fresh namespace of a private embedded PostgreSQL (embeddings cached under
benchmarks/results/), then every question goes through `memsys.retrieval.pipeline.retrieve`.

Printed for every set, all computed in the same run:
- baselines outside memsys: exact dense cosine in numpy, and a plain Okapi BM25 in Python
  (k1 1.2, b 0.75, lowercase word tokens, English stop words removed, no stemming);
- memsys's channels alone (dense = HNSW order, lexical = BM25 in PostgreSQL, graph = PPR,
  neighbours = the neighbourhood channel's own order) and fused (the method and weights in
  memsys.retrieval.fusion), with ablations re-fused on the same candidates: dense + lexical
  only, without the graph, without the neighbourhood, the graph at weight 1, plain RRF;
- the floor check: fused must not be below the best single channel.

Write times are what a real store would hold: LoCoMo turns at their session's date, 30 s
apart, in conversation order; the HotpotQA and SciFact passages in a fixed random order.
`--half tune` runs the odd-numbered questions of every set, `--half report` the even ones
(weights are chosen on the first and reported on the second).

    .venv/bin/python benchmarks/bench_retrieval.py [--quick] [--sets locomo,hotpotqa,...]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import random
import re
import time
from collections import Counter
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar

import common
import numpy as np

EVIDENCE = re.compile(r"D\d+:\d+")
WORD = re.compile(r"[a-z0-9]+")
SETS = ("locomo", "hotpotqa", "hotpotqa_2wiki", "scifact")
FLOOR_TOLERANCE = 0.005  # measurement noise allowed below the best channel
LOCOMO_DATE = "%I:%M %p on %d %B, %Y"
TURN_SECONDS = 30
HALF = "all"
LOCOMO_NOW: datetime | None = None
T = TypeVar("T")


def unordered_times(n: int) -> list[datetime]:
    """Write times in a fixed random order, one minute apart. The HotpotQA corpus file lists
    each question's passages together; a store of unrelated passages has no such order, and
    the neighbourhood channel must not learn the answer from the file's layout."""
    start = datetime(2024, 1, 1, tzinfo=UTC)
    slots = list(range(n))
    random.Random(0).shuffle(slots)
    return [start + timedelta(minutes=m) for m in slots]


# --- loading -----------------------------------------------------------------------------


def embed_cached(texts: list[str]) -> np.ndarray:
    from memsys.embeddings import get_embedder

    digest = hashlib.sha256("\x00".join(texts).encode()).hexdigest()[:16]
    path = common.RESULTS / f"vectors-{len(texts)}-{digest}.npy"
    if path.exists():
        return np.asarray(np.load(path), dtype=np.float32)
    common.progress(f"embedding {len(texts)} texts (cached afterwards)")
    vectors = get_embedder().embed(texts)
    path.parent.mkdir(parents=True, exist_ok=True)
    np.save(path, vectors)
    return vectors


def load(
    ns: str, texts: list[str], meta: list[dict[str, Any]], created: list[datetime]
) -> tuple[list[str], np.ndarray]:
    """Bulk-insert memories with real embeddings and the given write times (what a store
    written one memory at a time would hold); returns their ids (in order) and vectors."""
    from sqlalchemy import insert

    from memsys import ids
    from memsys.db import session_scope
    from memsys.models import Chunk
    from memsys.services import mentions, namespaces
    from memsys.services.memory_batch import content_hash
    from memsys.tokens import count_tokens_batch

    vectors = embed_cached(texts)
    tokens = count_tokens_batch(texts)
    chunk_ids = [ids.new_id(ids.MEMORY) for _ in texts]
    for start in range(0, len(texts), 2000):
        with session_scope() as s:
            namespaces.ensure(s, ns)
            rows = [
                {
                    "namespace": ns,
                    "id": chunk_ids[i],
                    "doc_type": "memory",
                    "memory_type": "fact",
                    "content": texts[i],
                    "content_hash": content_hash(f"{i}:{texts[i]}"),
                    "token_count": tokens[i],
                    "embedding": vectors[i],
                    "meta": meta[i],
                    "created_at": created[i],
                    "valid_from": created[i],
                    "updated_at": created[i],
                }
                for i in range(start, min(start + 2000, len(texts)))
            ]
            s.execute(insert(Chunk), rows)
            mentions.link(s, ns, [(r["id"], r["content"]) for r in rows])
    return chunk_ids, vectors


# --- Python baselines ----------------------------------------------------------------------


class PlainBM25:
    """Okapi BM25 over one corpus, the textbook way (the baseline memsys must match)."""

    def __init__(self, texts: list[str]) -> None:
        from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

        self.stop = ENGLISH_STOP_WORDS
        self.docs = [Counter(self.tokens(t)) for t in texts]
        self.lengths = np.array([sum(d.values()) for d in self.docs], dtype=np.float64)
        self.avgdl = float(self.lengths.mean()) if len(self.docs) else 1.0
        df: Counter[str] = Counter()
        self.postings: dict[str, list[int]] = {}
        for i, d in enumerate(self.docs):
            for term in d:
                df[term] += 1
                self.postings.setdefault(term, []).append(i)
        n = len(self.docs)
        self.idf = {t: math.log(1 + (n - f + 0.5) / (f + 0.5)) for t, f in df.items()}

    def tokens(self, text: str) -> list[str]:
        return [w for w in WORD.findall(text.lower()) if w not in self.stop]

    def top(self, query: str, k: int) -> list[int]:
        scores: dict[int, float] = {}
        for term in set(self.tokens(query)):
            for i in self.postings.get(term, []):
                tf = self.docs[i][term]
                norm = tf + 1.2 * (1 - 0.75 + 0.75 * self.lengths[i] / self.avgdl)
                scores[i] = scores.get(i, 0.0) + self.idf[term] * tf * 2.2 / norm
        return sorted(scores, key=lambda i: -scores[i])[:k]


def dense_top(vectors: np.ndarray, query: np.ndarray, k: int) -> list[int]:
    return list(np.argsort(-(vectors @ query))[:k])


# --- running and scoring --------------------------------------------------------------------


def rankings(
    ns: str, query: str, k: int, pool: int, reference: datetime | None = None
) -> dict[str, list[str]]:
    """Every ordering memsys can produce for one query, from one pipeline run (the ablations
    re-fuse the same candidates without a channel or with another weight)."""
    from memsys.db import session_scope
    from memsys.retrieval import fusion, pipeline

    with session_scope() as s:
        found = pipeline.retrieve(
            s,
            query,
            filters={"namespace": ns, "doc_type": "memory"},
            limit=k,
            pool=pool,
            now=reference,
        )
    feats = found.features
    ids = [f[0] for f in feats]
    sims = [f[1] for f in feats]
    lex = [f[2] for f in feats]
    ppr = [f[3] for f in feats]
    near = [f[4] for f in feats]
    now = fusion.CURRENT

    def order(scores: list[float]) -> list[str]:
        return [ids[i] for i in sorted(range(len(ids)), key=lambda i: -scores[i])][:k]

    return {
        "dense": [h["id"] for h in found.channels["dense"]][:k],
        "lexical": [h["id"] for h in found.channels["lexical"]["hits"]][:k],
        "graph": [h["id"] for h in found.channels["graph"]][:k],
        "neighbours": [h["id"] for h in found.channels["neighbours"]][:k],
        "fused": [h.id for h in found.hits],
        "fused_dense_lex": order(fusion.zfuse(sims, lex, replace(now, graph=0, neighbours=0))),
        "fused_no_graph": order(fusion.zfuse(sims, lex, replace(now, graph=0), None, near)),
        "fused_no_near": order(fusion.zfuse(sims, lex, replace(now, neighbours=0), ppr)),
        "fused_graph_1": order(fusion.zfuse(sims, lex, replace(now, graph=1.0), ppr, near)),
        "fused_no_time": order(fusion.zfuse(sims, lex, now, ppr, near)),
        "fused_time_1": order(
            fusion.add_channel(fusion.zfuse(sims, lex, now, ppr, near), found.temporal, 1.0)
        ),
        "rrf": order(fusion.rrf(sims, lex)),
    }


def recall_at(gold: set[str], got: list[str], k: int) -> float:
    return len(gold & set(got[:k])) / len(gold)


def ndcg_at(gold: set[str], got: list[str], k: int) -> float:
    dcg = sum(1 / math.log2(i + 2) for i, d in enumerate(got[:k]) if d in gold)
    ideal = sum(1 / math.log2(i + 2) for i in range(min(k, len(gold))))
    return dcg / ideal


def evaluate(
    ns: str,
    ids: list[str],
    texts: list[str],
    vectors: np.ndarray,
    questions: list[tuple[str, set[str]]],
    ks: tuple[int, ...],
    pool: int,
    now: datetime | None = None,
) -> dict[str, Any]:
    from memsys.embeddings import embed_query

    bm25 = PlainBM25(texts)
    k = max(ks)
    runs: dict[str, list[tuple[set[str], list[str]]]] = {}
    started = time.perf_counter()
    for query, gold in questions:
        got = rankings(ns, query, k, pool, now)
        got["baseline_dense"] = [ids[i] for i in dense_top(vectors, embed_query(query), k)]
        got["baseline_bm25"] = [ids[i] for i in bm25.top(query, k)]
        for name, ranking in got.items():
            runs.setdefault(name, []).append((gold, ranking))
    seconds = time.perf_counter() - started
    table: dict[str, dict[str, float]] = {}
    for name, results in runs.items():
        row = {f"R@{k}": sum(recall_at(g, r, k) for g, r in results) / len(results) for k in ks}
        row.update(
            {f"all@{k}": sum(g <= set(r[:k]) for g, r in results) / len(results) for k in ks}
        )
        row["nDCG@10"] = sum(ndcg_at(g, r, 10) for g, r in results) / len(results)
        table[name] = {key: round(v, 4) for key, v in row.items()}
    return {"questions": len(questions), "documents": len(texts), "seconds": seconds, **table}


def floor_check(result: dict[str, Any], metric: str) -> dict[str, Any]:
    # Every channel alone, each in its own order: the graph and the neighbourhood are channels
    # too (on HotpotQA the graph alone beats dense and BM25).
    best = max(result[name][metric] for name in ("dense", "lexical", "graph", "neighbours"))
    return {
        "metric": metric,
        "fused": result["fused"][metric],
        "best_channel": best,
        "holds": result["fused"][metric] >= best - FLOOR_TOLERANCE,
    }


# --- the sets --------------------------------------------------------------------------------


def load_conversation(
    conv: dict[str, Any],
) -> tuple[str, list[str], list[str], np.ndarray, list[tuple[str, set[str]]]]:
    """One LoCoMo conversation in its own namespace: (namespace, ids, turns, vectors,
    questions with their evidence ids)."""
    ns = f"locomo:{conv['sample_id']}"
    turns, meta, created = [], [], []
    c = conv["conversation"]
    for key in sorted(
        (k for k in c if re.fullmatch(r"session_\d+", k)), key=lambda k: int(k.split("_")[1])
    ):
        # Each turn stored as it is said: the session's date, TURN_SECONDS apart.
        start = datetime.strptime(c[f"{key}_date_time"], LOCOMO_DATE).replace(tzinfo=UTC)
        for n, turn in enumerate(c[key]):
            turns.append(f"{turn['speaker']}: {turn['text']}")
            meta.append({"dia_id": turn["dia_id"], "date": c.get(f"{key}_date_time")})
            created.append(start + timedelta(seconds=TURN_SECONDS * n))
    ids, vectors = load(ns, turns, meta, created)
    # Questions are asked after the last session: dates in them resolve against its day.
    global LOCOMO_NOW
    LOCOMO_NOW = max(created) + timedelta(hours=1)
    by_dia = {m["dia_id"]: cid for m, cid in zip(meta, ids, strict=True)}
    questions = []
    for qa in conv["qa"]:
        found = EVIDENCE.findall(" ".join(qa.get("evidence", [])))
        gold = {by_dia[d] for d in found if d in by_dia}
        if gold:
            questions.append((qa["question"], gold))
    return ns, ids, turns, vectors, half(questions)


def half(questions: list[T]) -> list[T]:
    """HALF "tune" keeps the odd-numbered questions, "report" the even ones, "all" every one:
    weights are tuned on one half and reported on the other."""
    if HALF == "all":
        return questions
    return questions[1 if HALF == "tune" else 0 :: 2]


def locomo(data: Path, quick: bool) -> dict[str, Any]:
    merged: dict[str, Any] = {}
    questions_total = 0
    per_conv = []
    for conv in common.locomo(data)[: 2 if quick else None]:
        ns, ids, turns, vectors, questions = load_conversation(conv)
        per_conv.append(
            evaluate(ns, ids, turns, vectors, questions, (1, 5, 10, 20), 60, LOCOMO_NOW)
        )
        questions_total += len(questions)
    for name in per_conv[0]:
        if isinstance(per_conv[0][name], dict):
            merged[name] = {
                key: round(
                    sum(r[name][key] * r["questions"] for r in per_conv) / questions_total, 4
                )
                for key in per_conv[0][name]
            }
    merged["questions"] = questions_total
    merged["documents"] = sum(r["documents"] for r in per_conv)
    merged["seconds"] = sum(r["seconds"] for r in per_conv)
    return merged


def hotpotqa(data: Path, quick: bool, distractors: bool) -> dict[str, Any]:
    corpus = json.loads((data / "hotpotqa" / "hotpotqa_train_corpus.json").read_text())
    titles = list(corpus)
    texts = [f"{t}: {''.join(corpus[t]).strip()}" for t in titles]
    ns = "hotpotqa"
    if distractors:
        extra = json.loads((data / "hotpotqa" / "2wikimultihopqa_corpus.json").read_text())
        for passage in extra:
            if passage["title"] not in corpus:
                texts.append(f"{passage['title']}: {passage['text'].strip()}")
        ns = "hotpotqa-2wiki"
    ids, vectors = load(ns, texts, [{} for _ in texts], unordered_times(len(texts)))
    by_title = dict(zip(titles, ids, strict=False))
    raw = json.loads((data / "hotpotqa" / "hotpotqa_train.json").read_text())
    questions = []
    for q in raw[: 30 if quick else None]:
        gold = {by_title[t] for t, _ in q["supporting_facts"] if t in by_title}
        if gold:
            questions.append((q["question"], gold))
    return evaluate(ns, ids, texts, vectors, half(questions), (2, 5, 10, 20), 60)


def scifact(data: Path, quick: bool) -> dict[str, Any]:
    docs = common.read_jsonl(data / "scifact" / "corpus.jsonl")
    texts = [f"{d['title']} {d['text']}" for d in docs]
    ids, vectors = load(
        "scifact", texts, [{"doc_id": d["_id"]} for d in docs], unordered_times(len(texts))
    )
    by_doc = {d["_id"]: cid for d, cid in zip(docs, ids, strict=True)}
    claims = {q["_id"]: q["text"] for q in common.read_jsonl(data / "scifact" / "queries.jsonl")}
    qrels: dict[str, set[str]] = {}
    for line in (data / "scifact" / "qrels" / "train.tsv").read_text().splitlines()[1:]:
        qid, doc, _ = line.split("\t")
        if doc in by_doc and qid in claims:
            qrels.setdefault(qid, set()).add(by_doc[doc])
    questions = half([(claims[q], gold) for q, gold in sorted(qrels.items())])
    return evaluate(
        "scifact", ids, texts, vectors, questions[: 80 if quick else None], (10, 100), 100
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--data-dir", type=Path, default=common.DEFAULT_DATA)
    parser.add_argument("--quick", action="store_true", help="a slice of every set")
    parser.add_argument("--sets", default=",".join(SETS))
    parser.add_argument("--keep", action="store_true", help="keep the private database")
    parser.add_argument("--half", choices=("all", "tune", "report"), default="all")
    args = parser.parse_args()
    global HALF
    HALF = args.half
    home = common.private_home("msr-")
    out: dict[str, Any] = {"machine": common.machine(), "loadavg_start": common.loadavg()}
    out["half"] = HALF
    try:
        common.start_database()
        for name in args.sets.split(","):
            common.progress(f"set {name}")
            if name == "locomo":
                out[name] = locomo(args.data_dir, args.quick)
                out[name]["floor"] = floor_check(out[name], "R@10")
            elif name in ("hotpotqa", "hotpotqa_2wiki"):
                out[name] = hotpotqa(args.data_dir, args.quick, name == "hotpotqa_2wiki")
                out[name]["floor"] = floor_check(out[name], "R@5")
            elif name == "scifact":
                out[name] = scifact(args.data_dir, args.quick)
                out[name]["floor"] = floor_check(out[name], "nDCG@10")
            print_set(name, out[name])
        out["loadavg_end"] = common.loadavg()
    finally:
        common.stop_database(home, args.keep)
    path = common.write_json("retrieval.json", out)
    print(f"written to {path}")


def print_set(name: str, result: dict[str, Any]) -> None:
    rows = ["baseline_dense", "baseline_bm25", "dense", "lexical", "graph", "neighbours", "rrf"]
    rows += ["fused_dense_lex", "fused_no_graph", "fused_no_near", "fused_graph_1"]
    rows += ["fused_no_time", "fused_time_1", "fused"]
    metrics = [m for m in result["fused"] if not m.startswith("all@")]
    print(f"\n{name}: {result['questions']} questions, {result['documents']} documents")
    print(f"{'ranking':<16}" + "".join(f"{m:>9}" for m in metrics))
    for row in rows:
        print(f"{row:<16}" + "".join(f"{result[row][m]:>9.3f}" for m in metrics))
    floor = result["floor"]
    verdict = "holds" if floor["holds"] else "BROKEN"
    print(
        f"floor ({floor['metric']}): fused {floor['fused']:.3f} vs best channel "
        f"{floor['best_channel']:.3f} — {verdict}"
    )


if __name__ == "__main__":
    main()
