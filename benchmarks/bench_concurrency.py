"""Concurrent writers: stores per second and store latency at 1, 8 and 32 writers. Real
LoCoMo turns (new texts for every run: no dedup shortcut), a private embedded PostgreSQL,
the service path every front end calls (`runner.execute(memories.store, …)`), one thread
per writer, each store embedding its own text (ONNX Runtime runs concurrent calls side by
side; coalescing them into batches was measured slower, benchmarks/README.md).

    .venv/bin/python benchmarks/bench_concurrency.py [--stores 400] [--writers 1,8,32]
"""

from __future__ import annotations

import argparse
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import common


def run(texts: list[str], writers: int, namespace: str) -> dict[str, Any]:
    from memsys import runner
    from memsys.schemas import MemoryStoreIn
    from memsys.services import memories

    latencies: list[float] = []

    def store(text: str) -> None:
        ms, _ = common.timed(
            runner.execute, memories.store, MemoryStoreIn, {"content": text, "namespace": namespace}
        )
        latencies.append(ms)

    start = time.perf_counter()
    with ThreadPoolExecutor(writers) as pool:
        list(pool.map(store, texts))
    seconds = time.perf_counter() - start
    return {"stores_per_s": round(len(texts) / seconds, 1), **common.summary(latencies)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stores", type=int, default=400)
    parser.add_argument("--writers", default="1,8,32")
    args = parser.parse_args()
    home = common.private_home("msc-")
    try:
        settings = common.start_database()
        from memsys.embeddings import get_embedder

        embedder = get_embedder()
        embedder.embed_one("warm up")
        turns = [
            t for conv in common.locomo(common.DEFAULT_DATA) for t in common.locomo_turns(conv)
        ]
        rows, results = [], {}
        for n, writers in enumerate(int(w) for w in args.writers.split(",")):
            texts = turns[n * args.stores : (n + 1) * args.stores]
            common.progress(f"{writers} writers")
            r = run(texts, writers, f"bench:{writers}")
            results[str(writers)] = r
            rows.append([writers, r["stores_per_s"], r["p50"], r["p95"]])
        print(common.table(["writers", "stores/s", "p50 ms", "p95 ms"], rows))
        payload = {
            "machine": common.machine(),
            "load": common.loadavg(),
            "server": settings,
            "stores_per_run": args.stores,
            "results": results,
        }
        print("written to", common.write_json("concurrency.json", payload))
    finally:
        common.stop_database(home, keep=False)


if __name__ == "__main__":
    main()
