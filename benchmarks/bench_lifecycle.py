"""Lifecycle simulation: N memories over 180 simulated days of use, maintained daily-ish.

Memories are real texts with real embeddings (bench_memory's pool, cached under
benchmarks/results/), bulk-loaded, then given S003 types and importances and creation times
spread over the first 150 days. Each simulated day a share of the memories created so far is
accessed (a hot tenth takes half of the accesses, the rest favour recent memories); those
accesses go into the access log as they would from recall. Every `--every` days `memsys
maintain` runs with its clock set to that day (decay, stages, consolidation). At the end it
prints stage counts, storage per 1000 memories (S004 target: < 25 MB), maintenance run
times, the rehydration success rate (a sample of archived / rehydratable memories is
rehydrated; success = the full original text is back, checked against its content hash),
and recall p95 over real questions before the first maintenance and after the last.

    .venv/bin/python benchmarks/bench_lifecycle.py [--quick] [--size 100000] [--every 7]
"""

from __future__ import annotations

import argparse
import hashlib
import random
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import bench_memory
import common
import numpy as np

DAYS = 180
CREATION_DAYS = 150
TYPES = (
    "solution",
    "decision",
    "fix",
    "configuration",
    "workflow",
    "general",
    "error",
    "procedure",
    "insight",
    "fact",
    "preference",
    "problem",
)
ACCESS_SHARE = 0.02  # of the memories existing that day, accessed per day
REHYDRATE_SAMPLE = 200
QUERIES = 100


def shape(n: int, start: datetime, seed: int = 5) -> None:
    """Give the bulk-loaded memories types, importances, lifecycles and creation days (one
    set-based UPDATE: a statement per row takes minutes at 100k)."""
    from sqlalchemy import text

    from memsys.db import session_scope

    rng = random.Random(seed)
    with session_scope() as s:
        ids = list(s.scalars(text("SELECT id FROM chunk ORDER BY id")))
        kinds = [TYPES[rng.randrange(len(TYPES))] for _ in ids]
        s.execute(
            text(
                "UPDATE chunk c SET memory_type = v.t, importance = v.imp, lifecycle = v.lc, "
                "created_at = v.at, valid_from = v.at, updated_at = v.at "
                "FROM unnest(CAST(:ids AS text[]), CAST(:t AS text[]), CAST(:imp AS float8[]), "
                "CAST(:lc AS text[]), CAST(:at AS timestamptz[])) AS v(id, t, imp, lc, at) "
                "WHERE c.id = v.id"
            ),
            {
                "ids": ids,
                "t": kinds,
                "imp": [round(rng.uniform(0.3, 1.0), 2) for _ in ids],
                "lc": ["personal" if k == "preference" else "project" for k in kinds],
                "at": [
                    start + timedelta(days=CREATION_DAYS * i / max(1, len(ids)))
                    for i in range(len(ids))
                ],
            },
        )


def simulate_accesses(day: int, start: datetime, ids: list[str], rng: random.Random) -> int:
    """One day of use: accesses logged as recall logs them (the counters fold at maintain)."""
    from sqlalchemy import text

    from memsys.db import session_scope

    existing = max(1, int(len(ids) * min(1.0, day / CREATION_DAYS)))
    hot = ids[: max(1, existing // 10)]
    count = max(1, int(existing * ACCESS_SHARE))
    rows = []
    for _ in range(count):
        if rng.random() < 0.5:
            memory_id = hot[rng.randrange(len(hot))]
        else:  # recent memories are used more: an exponential look-back
            back = min(existing - 1, int(rng.expovariate(1 / max(1, existing * 0.1))))
            memory_id = ids[existing - 1 - back]
        at = start + timedelta(days=day, seconds=rng.randrange(86400))
        rows.append({"ns": bench_memory.NAMESPACE, "id": memory_id, "at": at})
    with session_scope() as s:
        s.execute(
            text(
                "INSERT INTO memory_access (namespace, memory_id, accessed_at) "
                "VALUES (:ns, :id, :at)"
            ),
            rows,
        )
    return count


def storage() -> dict[str, Any]:
    from sqlalchemy import text

    from memsys.db import session_scope

    with session_scope() as s:
        sizes = {
            t: int(s.scalar(text(f"SELECT pg_total_relation_size('{t}')")) or 0)
            for t in ("chunk", "memory_change", "memory_access")
        }
        live = int(s.scalar(text("SELECT count(*) FROM chunk WHERE valid_to IS NULL")) or 0)
        updates = s.execute(
            text("SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables WHERE relname = 'chunk'")
        ).one()
        content = int(
            s.scalar(text("SELECT sum(octet_length(content)) FROM chunk WHERE valid_to IS NULL"))
            or 0
        )
    total = sum(sizes.values())
    return {
        "live_memories": live,
        "bytes": sizes,
        "mb_per_1000": round(total / 1024 / 1024 / max(1, live) * 1000, 3),
        "chunk_mb_per_1000": round(sizes["chunk"] / 1024 / 1024 / max(1, live) * 1000, 3),
        "live_content_mb": round(content / 1024 / 1024, 2),
        "chunk_updates": int(updates.n_tup_upd),
        "chunk_hot_updates": int(updates.n_tup_hot_upd),
    }


def rehydration(now: datetime, rng: random.Random) -> dict[str, Any]:
    """Rehydrate a sample of aged memories; success = the original text, by content hash."""
    from sqlalchemy import text

    from memsys.db import session_scope
    from memsys.schemas.lifecycle import RehydrateIn
    from memsys.services import lifecycle

    with session_scope() as s:
        aged = list(
            s.execute(
                text(
                    "SELECT id, content_hash FROM chunk WHERE valid_to IS NULL "
                    "AND stage IN ('archived', 'rehydratable') ORDER BY id"
                )
            )
        )
    sample = rng.sample(aged, min(REHYDRATE_SAMPLE, len(aged)))
    ok = 0
    for row in sample:
        with session_scope() as s:
            out = lifecycle.rehydrate(s, RehydrateIn(memory_id=row.id), now=now)
        digest = hashlib.sha256(out.content.encode("utf-8")).hexdigest()
        ok += out.restored == "full" and digest == row.content_hash
    return {
        "aged": len(aged),
        "sampled": len(sample),
        "full_text_back": ok,
        "success_rate": round(ok / len(sample), 4) if sample else None,
    }


def recall_p95(qs: list[str]) -> dict[str, float]:
    walls = [bench_memory.recall_once(q, bench_memory.NAMESPACE)[0] for q in qs]
    return common.summary(walls)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--size", type=int, default=100_000)
    parser.add_argument("--quick", action="store_true", help="10,000 memories")
    parser.add_argument("--every", type=int, default=7, help="days between maintenance runs")
    parser.add_argument("--data-dir", type=Path, default=common.DEFAULT_DATA)
    parser.add_argument("--keep", action="store_true")
    parser.add_argument(
        "--real-vectors",
        type=int,
        default=None,
        help="embed only the first N texts; the rest get random unit vectors (stated in the "
        "report: stages, storage, maintenance and rehydration do not depend on the vectors, "
        "consolidation and recall latency do)",
    )
    args = parser.parse_args()
    size = 10_000 if args.quick else args.size
    home = common.private_home("memsys-lc-")
    report: dict[str, Any] = {"machine": common.machine(), "size": size, "days": DAYS}
    try:
        report["server"] = common.start_database()
        texts, _ = bench_memory.build_pool(args.data_dir)
        vectors, report["embeddings"] = pool_vectors(texts[:size], args.real_vectors)
        start = datetime.now(UTC) - timedelta(days=DAYS)
        report["bulk_load"] = bench_memory.bulk_load(
            texts[:size], np.asarray(vectors), before_index=lambda: shape(size, start)
        )
        qs, warm = bench_memory.queries(args.data_dir, QUERIES)
        for q in warm:
            bench_memory.recall_once(q, bench_memory.NAMESPACE)
        report["recall_before"] = recall_p95(qs)
        run_lifecycle(report, size, start, args.every)
        report["recall_after"] = recall_p95(qs)
        report["rehydration"] = rehydration(start + timedelta(days=DAYS), random.Random(3))
        report["machine"]["loadavg_end"] = common.loadavg()
        print_report(report)
        common.write_json("lifecycle.json", report)
    finally:
        common.stop_database(home, args.keep)


def pool_vectors(texts: list[str], real: int | None) -> tuple[np.ndarray, dict[str, Any]]:
    """The model's vectors for the first `real` texts (all when None), random unit vectors
    (seeded) for the rest."""
    real = len(texts) if real is None else min(real, len(texts))
    vectors, info = bench_memory.embed_pool(texts[:real], common.RESULTS, [real])
    filler = np.random.default_rng(17).standard_normal((len(texts) - real, 384))
    filler /= np.linalg.norm(filler, axis=1, keepdims=True)
    info = {**info, "model_vectors": real, "random_vectors": len(texts) - real}
    return np.concatenate([np.asarray(vectors), filler.astype(np.float32)]), info


def run_lifecycle(report: dict[str, Any], size: int, start: datetime, every: int) -> None:
    from sqlalchemy import text

    from memsys.db import session_scope
    from memsys.services import maintain

    with session_scope() as s:
        ids = list(s.scalars(text("SELECT id FROM chunk ORDER BY created_at, id")))
    rng = random.Random(11)
    runs: list[dict[str, Any]] = []
    accesses = 0
    for day in range(1, DAYS + 1):
        accesses += simulate_accesses(day, start, ids, rng)
        if day % every == 0 or day == DAYS:
            began = time.perf_counter()
            r = maintain.run(now=start + timedelta(days=day, hours=23), budget_s=600)
            runs.append(
                {
                    "day": day,
                    "seconds": round(time.perf_counter() - began, 2),
                    "moved": r.moved,
                    "counters_folded": r.counters_folded,
                    "merged": r.merged,
                    "complete": r.complete,
                    "stages": r.stages,
                }
            )
            common.progress(f"day {day}: {r.stages} in {runs[-1]['seconds']} s")
    report["accesses"] = accesses
    report["maintenance_runs"] = runs
    report["maintenance_seconds"] = common.summary([r["seconds"] * 1000 for r in runs])
    report["storage"] = storage()


def print_report(r: dict[str, Any]) -> None:
    last = r["maintenance_runs"][-1]
    secs = {k: round(v / 1000, 2) for k, v in r["maintenance_seconds"].items()}
    print(
        f"\nlifecycle: {r['size']:,} memories, {r['days']} days, {r['accesses']:,} accesses, "
        f"maintenance every {r['maintenance_runs'][0]['day']} days"
    )
    e = r["embeddings"]
    if e.get("random_vectors"):
        print(f"vectors: {e['model_vectors']:,} from the model, {e['random_vectors']:,} random")
    print("stages at the end:", last["stages"])
    print("merged near-duplicates (all runs):", sum(x["merged"] for x in r["maintenance_runs"]))
    st = r["storage"]
    print(
        f"storage: {st['mb_per_1000']} MB per 1000 live memories (chunk + history + access "
        f"log; chunk alone {st['chunk_mb_per_1000']} MB); target < 25"
    )
    print(f"chunk row updates: {st['chunk_updates']:,} ({st['chunk_hot_updates']:,} HOT)")
    print(
        f"maintenance run (s): first {r['maintenance_runs'][0]['seconds']}, "
        f"p50 {secs['p50']}, p95 {secs['p95']}, max {secs['max']}"
    )
    h = r["rehydration"]
    print(
        f"rehydration: {h['full_text_back']}/{h['sampled']} full text back "
        f"(success rate {h['success_rate']}) of {h['aged']} aged memories"
    )
    b, a = r["recall_before"], r["recall_after"]
    print(
        f"recall ms p50/p95: before {b['p50']:.1f}/{b['p95']:.1f}, "
        f"after {a['p50']:.1f}/{a['p95']:.1f}"
    )
    print("load average start/end:", r["machine"]["loadavg_start"], r["machine"]["loadavg_end"])


if __name__ == "__main__":
    main()
