"""Retrieval quality: LoCoMo evidence recall@k and HotpotQA passage recall@k.

Each channel is measured alone (pgvector kNN, PostgreSQL full text) and fused as memsys
serves it (`memory_recall`), so a change to fusion shows which channel it helps or hurts.
Scoring follows ../shared/data/README.md; its baselines are printed beside the figures.

    .venv/bin/python benchmarks/bench_quality.py [--data-dir ../shared/data] [--quick]
"""

from __future__ import annotations

import argparse
import json
import re
import time
from pathlib import Path
from typing import Any

import common

KS = (1, 2, 5, 10, 20)
BASELINES = {
    "locomo": {
        "dense": {1: 0.141, 5: 0.334, 10: 0.428, 20: 0.518},
        "bm25": {5: 0.520, 10: 0.591},
        "naive_rrf": {5: 0.452, 10: 0.534},
    },
    "hotpotqa": {
        "dense": {2: 0.625, 5: 0.785, 10: 0.850, 20: 0.890},
        "bm25": {5: 0.775, 10: 0.895},
        "naive_rrf": {5: 0.820, 10: 0.885},
    },
}
EVIDENCE = re.compile(r"D\d+:\d+")

VECTOR_ONLY = """
SELECT c.id FROM chunk c
WHERE c.namespace = :ns AND c.valid_to IS NULL AND c.embedding IS NOT NULL
ORDER BY c.embedding <=> :embedding LIMIT :k
"""
TEXT_ONLY = """
SELECT c.id FROM chunk c,
     (SELECT replace(plainto_tsquery('english', :query)::text, '&', '|')::tsquery AS tsq) q
WHERE c.namespace = :ns AND c.valid_to IS NULL AND c.tsv @@ q.tsq
ORDER BY ts_rank_cd(c.tsv, q.tsq) DESC LIMIT :k
"""


def load_memories(ns: str, texts: list[str], meta: list[dict]) -> list[str]:
    """Bulk-insert memories with real embeddings; returns their ids in order."""
    from sqlalchemy import insert

    from memsys import ids
    from memsys.db import session_scope
    from memsys.embeddings import get_embedder
    from memsys.models import Chunk
    from memsys.services import namespaces
    from memsys.services.memories import content_hash
    from memsys.tokens import count_tokens_batch

    vectors = get_embedder().embed(texts)
    tokens = count_tokens_batch(texts)
    chunk_ids = [ids.new_id(ids.MEMORY) for _ in texts]
    with session_scope() as s:
        namespaces.ensure(s, ns)
        rows = [
            {
                "namespace": ns,
                "id": chunk_ids[i],
                "doc_type": "memory",
                "memory_type": "fact",
                "content": t,
                "content_hash": content_hash(f"{i}:{t}"),
                "token_count": tokens[i],
                "embedding": vectors[i],
                "meta": meta[i],
            }
            for i, t in enumerate(texts)
        ]
        s.execute(insert(Chunk), rows)
    return chunk_ids


def channels(ns: str, query: str, k: int) -> dict[str, list[str]]:
    from pgvector.sqlalchemy import Vector
    from sqlalchemy import bindparam, text

    from memsys import runner
    from memsys.db import session_scope
    from memsys.embeddings import get_embedder
    from memsys.models.chunk import DIMENSIONS
    from memsys.schemas import MemoryRecallIn
    from memsys.services import memories

    vec = text(VECTOR_ONLY).bindparams(bindparam("embedding", type_=Vector(DIMENSIONS)))
    with session_scope() as s:
        vector_ids = s.scalars(
            vec, {"ns": ns, "embedding": get_embedder().embed_one(query), "k": k}
        ).all()
        text_ids = s.scalars(text(TEXT_ONLY), {"ns": ns, "query": query, "k": k}).all()
    fused = runner.execute(
        memories.recall, MemoryRecallIn, {"query": query, "namespace": ns, "n_results": k}
    )
    return {
        "vector": list(vector_ids),
        "fulltext": list(text_ids),
        "fused": [m.id for m in fused.memories],
    }


def score(results: list[tuple[set[str], dict[str, list[str]]]]) -> dict[str, dict[str, float]]:
    table: dict[str, dict[str, float]] = {}
    for channel in ("vector", "fulltext", "fused"):
        row = {}
        for k in KS:
            hits = [len(gold & set(got[channel][:k])) / len(gold) for gold, got in results]
            full = [gold <= set(got[channel][:k]) for gold, got in results]
            row[f"R@{k}"] = round(sum(hits) / len(hits), 3)
            row[f"all@{k}"] = round(sum(full) / len(full), 3)
        table[channel] = row
    return table


def locomo(data: Path, limit: int | None) -> dict[str, Any]:
    results = []
    memories = 0
    for conv in common.locomo(data)[: limit or None]:
        ns = f"locomo:{conv['sample_id']}"
        turns, meta = [], []
        c = conv["conversation"]
        for key in sorted(k for k in c if re.fullmatch(r"session_\d+", k)):
            for turn in c[key]:
                turns.append(f"{turn['speaker']}: {turn['text']}")
                meta.append({"dia_id": turn["dia_id"], "date": c.get(f"{key}_date_time")})
        chunk_ids = load_memories(ns, turns, meta)
        memories += len(chunk_ids)
        by_dia = {m["dia_id"]: cid for m, cid in zip(meta, chunk_ids, strict=True)}
        for qa in conv["qa"]:
            gold = {
                by_dia[d] for d in EVIDENCE.findall(" ".join(qa.get("evidence", []))) if d in by_dia
            }
            if gold:
                results.append((gold, channels(ns, qa["question"], max(KS))))
    return {"questions": len(results), "memories": memories, **score(results)}


def hotpotqa(data: Path, limit: int | None) -> dict[str, Any]:
    corpus = json.loads((data / "hotpotqa" / "hotpotqa_train_corpus.json").read_text())
    titles = list(corpus)
    texts = [f"{t}: {''.join(corpus[t]).strip()}" for t in titles]
    ns = "hotpotqa"
    chunk_ids = load_memories(ns, texts, [{"title": t} for t in titles])
    by_title = dict(zip(titles, chunk_ids, strict=True))
    questions = json.loads((data / "hotpotqa" / "hotpotqa_train.json").read_text())[: limit or None]
    results = []
    for q in questions:
        gold = {by_title[t] for t, _ in q["supporting_facts"] if t in by_title}
        if gold:
            results.append((gold, channels(ns, q["question"], max(KS))))
    return {"questions": len(results), "passages": len(texts), **score(results)}


def print_table(name: str, result: dict[str, Any]) -> None:
    print(f"\n{name}: {result['questions']} questions")
    print(f"{'channel':<10}" + "".join(f"{'R@' + str(k):>8}" for k in KS))
    for channel in ("vector", "fulltext", "fused"):
        print(f"{channel:<10}" + "".join(f"{result[channel][f'R@{k}']:>8.3f}" for k in KS))
    for base, row in BASELINES[name].items():
        print(f"{base:<10}" + "".join(f"{row.get(k, float('nan')):>8.3f}" for k in KS))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--data-dir", type=Path, default=common.DEFAULT_DATA)
    parser.add_argument(
        "--quick", action="store_true", help="2 LoCoMo conversations, 30 HotpotQA questions"
    )
    parser.add_argument("--keep", action="store_true", help="keep the private database")
    args = parser.parse_args()
    home = common.private_home("msq-")
    try:
        common.start_database()
        started = time.time()
        out: dict[str, Any] = {"machine": common.machine()}
        out["locomo"] = locomo(args.data_dir, 2 if args.quick else None)
        out["hotpotqa"] = hotpotqa(args.data_dir, 30 if args.quick else None)
        out["seconds"] = round(time.time() - started, 1)
        out["loadavg_end"] = common.loadavg()
    finally:
        common.stop_database(home, args.keep)
    for name in ("locomo", "hotpotqa"):
        print_table(name, out[name])
    path = common.write_json("quality.json", out)
    print(json.dumps(out))
    print(f"written to {path}")


if __name__ == "__main__":
    main()
