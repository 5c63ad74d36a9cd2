"""Retrieval quality on data written by others, through the pipeline the tools call.

The sets, the baselines, the rankings and the floor check are `memsys.benchmark` — the code
behind `memsys bench retrieval` — so this script and the command measure the same thing.
What this script adds for development runs: a private embedded PostgreSQL, embeddings cached
under benchmarks/results/, a bulk loader that writes rows directly with their historical
write times (fast; the command stores through memory_store_batch instead), and the figures
written to benchmarks/results/retrieval.json with the machine and its load.

Sets (../shared/data/README.md says how each is scored): LoCoMo evidence recall (one
namespace per conversation), the HotpotQA sample (passage recall), the same with the 6,119
2Wiki passages as distractors, SciFact train (nDCG@10), and memsys's own agent-memory sets
(memsys/benchmark/agent_memory.json, recall@1, each store's floor checked alone).
`--half tune` runs the odd-numbered questions of every set, `--half report` the even ones
(weights are chosen on the first and reported on the second).

    .venv/bin/python benchmarks/bench_retrieval.py [--quick] [--sets locomo,hotpotqa,...]
"""

from __future__ import annotations

import argparse
import hashlib
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import common
import numpy as np
from sqlalchemy import insert
from sqlalchemy.orm import Session

from memsys.benchmark import harness
from memsys.benchmark.sets import SETS, Corpus

START = datetime(2024, 1, 1, tzinfo=UTC)


def embed_cached(texts: list[str]) -> np.ndarray:
    from memsys.embeddings import get_embedder
    from memsys.whole_text import VECTOR_SCHEME

    # The scheme is part of the key: vectors made another way are not these texts' vectors.
    digest = hashlib.sha256("\x00".join([VECTOR_SCHEME, *texts]).encode()).hexdigest()[:16]
    path = common.RESULTS / f"vectors-{len(texts)}-{digest}.npy"
    if path.exists():
        return np.asarray(np.load(path), dtype=np.float32)
    common.progress(f"embedding {len(texts)} texts (cached afterwards)")
    vectors = get_embedder().embed(texts)
    path.parent.mkdir(parents=True, exist_ok=True)
    np.save(path, vectors)
    return vectors


def bulk_load(session: Session, ns: str, corpus: Corpus, vectors: np.ndarray) -> list[str]:
    """Rows inserted directly, each written at its reference time (or a minute after the one
    before, in the corpus's write order) with its mentions linked: what a store written one
    memory at a time would hold, without paying for a write path per text. No dedup, so every
    text keeps its own id."""
    from memsys import ids
    from memsys.ids import content_hash
    from memsys.models import Chunk
    from memsys.services import mentions, namespaces
    from memsys.tokens import count_tokens_batch

    texts = corpus.texts
    times = corpus.times or [START + timedelta(minutes=i) for i in range(len(texts))]
    tokens = count_tokens_batch(texts)
    # Ids from the corpus position, not random: ties (equal BM25 or PageRank scores) are
    # broken by id, and with random ids two runs of the same code ordered tied candidates
    # differently (a run is now repeatable).
    chunk_ids = [
        f"{ids.MEMORY}_{hashlib.sha256(f'{corpus.name}:{i}'.encode()).hexdigest()[:16]}"
        for i in range(len(texts))
    ]
    namespaces.ensure(session, ns)
    for start in range(0, len(texts), 2000):
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
                "meta": corpus.meta[i] if corpus.meta else {},
                "created_at": times[i],
                "valid_from": times[i],
                "updated_at": times[i],
            }
            for i in range(start, min(start + 2000, len(texts)))
        ]
        session.execute(insert(Chunk), rows)
        mentions.link(session, ns, [(r["id"], r["content"]) for r in rows])
    return chunk_ids


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--data-dir", type=Path, default=common.DEFAULT_DATA)
    parser.add_argument("--quick", action="store_true", help="a slice of every set")
    parser.add_argument("--sets", default=",".join(SETS))
    parser.add_argument("--keep", action="store_true", help="keep the private database")
    parser.add_argument("--half", choices=("all", "tune", "report"), default="all")
    args = parser.parse_args()
    home = common.private_home("msr-")
    out: dict[str, Any] = {"machine": common.machine(), "loadavg_start": common.loadavg()}
    out["half"] = args.half
    try:
        common.start_database()
        for name in args.sets.split(","):
            common.progress(f"set {name}")
            out[name] = harness.run_set(
                name, args.data_dir, args.quick, args.half, embed_cached, bulk_load
            )
            print("\n" + "\n".join(harness.render(name, out[name])), flush=True)
        out["loadavg_end"] = common.loadavg()
    finally:
        common.stop_database(home, args.keep)
    path = common.write_json("retrieval.json", out)
    print(f"written to {path}")


if __name__ == "__main__":
    main()
