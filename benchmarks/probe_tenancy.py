"""What row-level security costs a recall: the admin against scoped tokens, interleaved.

10,000 real memories (bench_memory's pool, its cached vectors) in two namespaces, `bench`
and `other` (5,000 each). For each real query, in turn: recall as the admin (the connecting
superuser: no policies), as a read-only token for `bench*` (SET LOCAL ROLE memsys_tenant, the
patterns set per transaction, policies on every row), and as a token with three patterns
(`ben*,x*,y*`), each in the `bench` namespace and over every namespace it may read. The
calls are interleaved so that the machine's load falls on every variant alike; the service's
own stage timings (dense, lexical SQL) come from the query traces.

    .venv/bin/python benchmarks/probe_tenancy.py [--queries 100] [--data-dir ../shared/data]
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import common

VARIANTS = {"admin": None, "token bench*": ("bench*",), "token ben*,x*,y*": ("ben*", "x*", "y*")}
HALF = 5_000


def recall(query: str, namespace: str | None, patterns: tuple[str, ...] | None) -> Any:
    from memsys import runner, tenancy
    from memsys.schemas import MemoryRecallIn
    from memsys.services import memories

    params: dict[str, Any] = {"query": query, "n_results": 5}
    if namespace:
        params["namespace"] = namespace
    scope = tenancy.ADMIN
    if patterns is not None:
        scope = tenancy.Scope(read=patterns, write=(), token_id="tok_probe")
    with tenancy.using(scope):
        return common.timed(lambda: runner.execute(memories.recall, MemoryRecallIn, params))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--data-dir", type=Path, default=common.DEFAULT_DATA)
    args = parser.parse_args()
    home = common.private_home("mst-")
    try:
        report = run(args)
    finally:
        common.stop_database(home, keep=False)
    rows = []
    for key, r in report["results"].items():
        rows.append(
            [
                key,
                r["wall"]["p50"],
                r["wall"]["p95"],
                r["wall"]["min"],
                r["service"]["dense_ms"]["p50"],
                r["service"]["lexical_ms"]["p50"],
                r["service"]["total_ms"]["p50"],
                r["hits"],
            ]
        )
    headers = ["variant / namespace", "wall p50", "p95", "min", "dense p50", "lexical p50"]
    print(common.table([*headers, "service p50", "hits"], rows))
    print(f"loadavg start {report['machine']['loadavg_start']} end {report['loadavg_end']}")
    print(f"JSON: {common.write_json('tenancy.json', report)}")


def run(args: argparse.Namespace) -> dict[str, Any]:
    import bench_memory as bm

    pool, _ = bm.build_pool(args.data_dir)
    qs, warm = bm.queries(args.data_dir, args.queries)
    report: dict[str, Any] = {"benchmark": "tenancy", "machine": common.machine()}
    report["server"] = common.start_database()
    vectors, _ = bm.embed_pool(pool[: 2 * HALF], common.RESULTS, [2 * HALF])
    for namespace, part in (("bench", slice(0, HALF)), ("other", slice(HALF, 2 * HALF))):
        bm.NAMESPACE = namespace
        common.progress(f"loading {HALF:,} memories into {namespace}")
        bm.bulk_load(pool[part], vectors[part])
    bm.NAMESPACE = "bench"
    plan = [(v, ns) for v in VARIANTS for ns in ("bench", None)]
    for q in warm:
        for variant, ns in plan:
            recall(q, ns, VARIANTS[variant])
    common.progress(f"{len(qs)} queries x {len(plan)} variants, interleaved")
    walls: dict[str, list[float]] = {f"{v} / {ns or 'all'}": [] for v, ns in plan}
    traces: dict[str, list[str]] = {k: [] for k in walls}
    hits: dict[str, int] = dict.fromkeys(walls, 0)
    for q in qs:
        for variant, ns in plan:
            key = f"{variant} / {ns or 'all'}"
            ms, out = recall(q, ns, VARIANTS[variant])
            walls[key].append(ms)
            traces[key].append(out.trace_id)
            hits[key] += len(out.memories)
    report["results"] = {
        key: {
            "wall": common.summary(walls[key]),
            "service": bm.trace_timings(traces[key], walls[key]),
            "hits": hits[key],
        }
        for key in walls
    }
    report["loadavg_end"] = common.loadavg()
    return report


if __name__ == "__main__":
    main()
