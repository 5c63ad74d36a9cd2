"""The debugger's costs at 10k (and 100k) memories: tracing overhead on recall, replay latency
and determinism, trace storage per 1000 queries, query-embedding determinism.

Same population as bench_memory.py (real texts, cached embeddings, bulk-loaded). Recall runs
through the real service path (`runner.execute`), traced and untraced in alternating blocks
of the same queries in the same run: "untraced" replaces `tracing.write` by a no-op, so the
difference is building the trace and writing its row and query event (after the answer,
beside the next calls of its block). Each traced recall is then replayed
as of its time with the query-embedding cache cleared (the embedding is recomputed), and the
replay's `identical` flag counted.

    .venv/bin/python benchmarks/bench_trace.py [--sizes 10000] [--queries 200] [--quick]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

import bench_memory
import common

TARGETS = {"tracing_overhead_p95_ms": 1.0, "trace_bytes": 1024}


def recall(query: str) -> tuple[float, Any]:
    from memsys import runner
    from memsys.schemas import MemoryRecallIn
    from memsys.services import memories

    params = {"query": query, "n_results": 5, "namespace": bench_memory.NAMESPACE}
    return common.timed(lambda: runner.execute(memories.recall, MemoryRecallIn, params))


def untraced(query: str) -> float:
    from memsys.services import tracing

    real = tracing.write
    tracing.write = lambda *a, **k: ""  # type: ignore[assignment]
    try:
        return recall(query)[0]
    finally:
        tracing.write = real  # type: ignore[assignment]


def measure_overhead(qs: list[str], warm: list[str], block: int = 10) -> dict[str, Any]:
    """Traced and untraced recall latency in alternating blocks of the same queries. The
    trace is written after the answer (memsys.deferred), beside the next call: within a
    block each variant carries its own background writes, and between blocks they are
    settled (untimed), so untraced calls never pay for traced ones."""
    from memsys import deferred

    for q in warm:
        recall(q)
        untraced(q)
    on: list[float] = []
    off: list[float] = []
    trace_ids: list[str] = []
    for start in range(0, len(qs), block):
        chunk = qs[start : start + block]
        traced_first = (start // block) % 2 == 0  # neither always gets the warmer cache
        for variant in (True, False) if traced_first else (False, True):
            for q in chunk:
                if variant:
                    ms, out = recall(q)
                    on.append(ms)
                    trace_ids.append(out.trace_id)
                else:
                    off.append(untraced(q))
            deferred.settle()
    diff = [a - b for a, b in zip(on, off, strict=True)]
    return {
        "recall_traced_ms": common.summary(on),
        "recall_untraced_ms": common.summary(off),
        "overhead_ms": {
            "p50_of_difference": round(common.percentile(diff, 50), 3),
            "p95_traced_minus_p95_untraced": round(
                common.percentile(on, 95) - common.percentile(off, 95), 3
            ),
            "median_traced_minus_median_untraced": round(
                common.percentile(on, 50) - common.percentile(off, 50), 3
            ),
        },
        "_trace_ids": trace_ids,
    }


def server_cpu_s() -> float:
    """CPU seconds used so far by the database server: the postmaster's children (backends,
    WAL writer, checkpointer…) — load-independent, unlike wall time on a busy machine."""
    import os

    from sqlalchemy import text

    from memsys.db import session_scope

    with session_scope() as s:
        backend = s.scalar(text("SELECT pg_backend_pid()"))
    postmaster = int(Path(f"/proc/{backend}/stat").read_text().rsplit(")", 1)[1].split()[1])
    ticks = 0
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == postmaster:
            ticks += int(fields[11]) + int(fields[12])  # utime + stime
    return ticks / os.sysconf("SC_CLK_TCK")


def cpu_cost(qs: list[str], block: int = 20) -> dict[str, Any]:
    """CPU per recall, traced and untraced, in alternating blocks: this process's CPU plus
    the database server's. The difference is what tracing costs in work, whatever the load."""
    from memsys import deferred

    spent = {"traced": [0.0, 0.0], "untraced": [0.0, 0.0]}
    calls = {"traced": 0, "untraced": 0}
    for start in range(0, len(qs), block):
        chunk = qs[start : start + block]
        order = ("traced", "untraced") if (start // block) % 2 == 0 else ("untraced", "traced")
        for variant in order:
            client, server = time.process_time(), server_cpu_s()
            for q in chunk:
                recall(q) if variant == "traced" else untraced(q)
            deferred.settle()  # a block's background writes are counted in its block
            spent[variant][0] += time.process_time() - client
            spent[variant][1] += server_cpu_s() - server
            calls[variant] += len(chunk)
    out: dict[str, Any] = {}
    for variant, (client, server) in spent.items():
        n = calls[variant]
        out[variant] = {
            "client_ms": round(client / n * 1000, 3),
            "server_ms": round(server / n * 1000, 3),
            "total_ms": round((client + server) / n * 1000, 3),
        }
    out["overhead_ms"] = round(out["traced"]["total_ms"] - out["untraced"]["total_ms"], 3)
    out["calls_each"] = calls["traced"]
    return out


def write_cost(qs: list[str]) -> dict[str, Any]:
    """The time the call spends inside tracing.write (the trace is only handed over), and
    the background write each call leaves (memsys.deferred: one transaction with the
    trace, its query event and the access rows), each timed alone."""
    from memsys import deferred
    from memsys.services import tracing

    real, real_run = tracing.write, deferred._run
    spent: list[float] = []
    behind: list[float] = []

    def timed_run(*args: Any, **kw: Any) -> None:
        started = time.perf_counter()
        try:
            real_run(*args, **kw)
        finally:
            behind.append((time.perf_counter() - started) * 1000)

    def timed_write(*args: Any, **kw: Any) -> str:
        started = time.perf_counter()
        try:
            return real(*args, **kw)
        finally:
            spent.append((time.perf_counter() - started) * 1000)

    tracing.write = timed_write  # type: ignore[assignment]
    deferred._run = timed_run  # type: ignore[assignment]
    try:
        for q in qs:
            recall(q)
            deferred.settle()  # each background write alone, not beside the next call
    finally:
        tracing.write = real  # type: ignore[assignment]
        deferred._run = real_run  # type: ignore[assignment]
    return {**common.summary(spent), "background": common.summary(behind)}


def storage(trace_ids: list[str]) -> dict[str, Any]:
    from sqlalchemy import text

    from memsys.db import session_scope

    with session_scope() as s:
        row = s.execute(
            text(
                "SELECT count(*) AS n, avg(pg_column_size(t.*)) AS row_bytes, "
                "avg(pg_column_size(t.channels)) AS channels, "
                "avg(pg_column_size(t.candidates)) AS candidates, "
                "avg(pg_column_size(t.fusion)) AS fusion, "
                "avg(length(t.channels::text) + length(t.candidates::text)) AS json_chars "
                "FROM query_trace t WHERE id = ANY(:ids)"
            ),
            {"ids": trace_ids},
        ).one()
        total = s.scalar(text("SELECT pg_total_relation_size('query_trace')"))
        count = s.scalar(text("SELECT count(*) FROM query_trace"))
        events = s.scalar(
            text("SELECT avg(pg_column_size(e.*)) FROM event e WHERE event_type = 'query'")
        )
    return {
        "traces": int(count),
        "row_bytes_avg": round(float(row.row_bytes)),
        "channels_bytes_avg": round(float(row.channels)),
        "candidates_bytes_avg": round(float(row.candidates)),
        "fusion_bytes_avg": round(float(row.fusion)),
        "uncompressed_json_chars_avg": round(float(row.json_chars)),
        "event_row_bytes_avg": round(float(events or 0)),
        "table_bytes_per_1000": round(int(total) / max(1, int(count)) * 1000),
    }


def measure_replay(trace_ids: list[str]) -> dict[str, Any]:
    from memsys import runner
    from memsys.embeddings import _queries
    from memsys.schemas.debug_replay import ReplayIn
    from memsys.services import debug_replay

    walls: list[float] = []
    inside: list[float] = []
    identical = 0
    changed: dict[str, int] = {}
    for trace_id in trace_ids:
        _queries.clear()  # the replay recomputes the query embedding
        ms, out = common.timed(
            lambda t=trace_id: runner.execute(debug_replay.replay, ReplayIn, {"trace_id": t})
        )
        walls.append(ms)
        inside.append(out.replay_ms)
        identical += out.identical
        if not out.identical:
            changed[str(out.changed_stage)] = changed.get(str(out.changed_stage), 0) + 1
    return {
        "replay_wall_ms": common.summary(walls),
        "replay_inside_ms": common.summary(inside),
        "identical": identical,
        "replayed": len(trace_ids),
        "changed_stages": changed,
    }


def embedding_determinism(qs: list[str]) -> dict[str, Any]:
    """Digests of query embeddings recomputed with 2 threads, then 1 thread."""
    import torch

    from memsys.embeddings import get_embedder
    from memsys.retrieval.trace import digest

    model = get_embedder()
    threads = torch.get_num_threads()
    first = [digest(model.embed_one(q)) for q in qs]
    again = [digest(model.embed_one(q)) for q in qs]
    torch.set_num_threads(1)
    try:
        single = [digest(model.embed_one(q)) for q in qs]
    finally:
        torch.set_num_threads(threads)
    other = other_process_digests(qs)
    return {
        "queries": len(qs),
        "threads": threads,
        "provider": type(model).__name__,
        "same_digest_recomputed": sum(a == b for a, b in zip(first, again, strict=True)),
        "same_digest_one_thread": sum(a == b for a, b in zip(first, single, strict=True)),
        "same_digest_other_process": sum(a == b for a, b in zip(first, other, strict=True)),
    }


def other_process_digests(qs: list[str]) -> list[str]:
    """The same digests from a fresh Python process (as a CLI replay would compute them)."""
    import json
    import subprocess
    import sys

    code = (
        "import json, sys\n"
        "from memsys.embeddings import get_embedder\n"
        "from memsys.retrieval.trace import digest\n"
        "m = get_embedder()\n"
        "print(json.dumps([digest(m.embed_one(q)) for q in json.load(sys.stdin)]))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        input=json.dumps(qs),
        capture_output=True,
        text=True,
        check=True,
        cwd=common.ROOT,
    )
    return list(json.loads(done.stdout.strip().splitlines()[-1]))


def run_size(size: int, loaded: int, pool: list[str], vectors: Any, args: Any) -> dict:
    common.progress(f"loading {size - loaded:,} memories (total {size:,})")
    load = bench_memory.bulk_load(pool[loaded:size], vectors[loaded:size])
    qs, warm = bench_memory.queries(args.data_dir, args.queries)
    common.progress(f"{size:,}: recall traced vs untraced ({len(qs)} queries each)")
    overhead = measure_overhead(qs, warm)
    trace_ids = overhead.pop("_trace_ids")
    common.progress(f"{size:,}: CPU per recall, traced vs untraced")
    cpu = cpu_cost(qs)
    common.progress(f"{size:,}: tracing.write alone")
    write = write_cost(qs[: args.queries // 2])
    common.progress(f"{size:,}: replaying {args.replays} traces")
    replay = measure_replay(trace_ids[: args.replays])
    return {
        "size": size,
        "load": load,
        **overhead,
        "cpu_per_recall": cpu,
        "trace_write_ms": write,
        "replay": replay,
        "storage": storage(trace_ids),
        "loadavg": common.loadavg(),
    }


def print_tables(report: dict[str, Any]) -> None:
    rows = []
    for r in report["sizes"]:
        on, off, o = r["recall_traced_ms"], r["recall_untraced_ms"], r["overhead_ms"]
        rows.append(
            [
                f"{r['size']:,}",
                f"{on['p50']} / {on['p95']}",
                f"{off['p50']} / {off['p95']}",
                o["p50_of_difference"],
                o["p95_traced_minus_p95_untraced"],
                f"{r['trace_write_ms']['p50']} / {r['trace_write_ms']['p95']}",
                "{p50} / {p95}".format(**r["trace_write_ms"]["background"]),
            ]
        )
    print(
        common.table(
            [
                "memories",
                "traced p50/p95 ms",
                "untraced p50/p95 ms",
                "Δ p50",
                "Δ p95",
                "write in call p50/p95 ms",
                "after the answer p50/p95 ms",
            ],
            rows,
        )
    )
    rows = []
    for r in report["sizes"]:
        rp, st = r["replay"], r["storage"]
        rows.append(
            [
                f"{r['size']:,}",
                f"{rp['replay_wall_ms']['p50']} / {rp['replay_wall_ms']['p95']}",
                f"{rp['identical']}/{rp['replayed']}",
                st["row_bytes_avg"],
                round(st["table_bytes_per_1000"] / 1024 / 1024, 2),
            ]
        )
    print(
        common.table(
            ["memories", "replay p50/p95 ms", "identical", "trace row B", "MB / 1000 traces"],
            rows,
        )
    )
    for r in report["sizes"]:
        print(f"CPU per recall at {r['size']:,}:", r["cpu_per_recall"])
    print("embedding determinism:", report["embedding_determinism"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000")
    parser.add_argument("--quick", action="store_true", help="1000 memories, 40 queries")
    parser.add_argument("--data-dir", type=Path, default=common.DEFAULT_DATA)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--replays", type=int, default=100)
    parser.add_argument("--keep", action="store_true", help="keep the private MEMSYS_HOME")
    args = parser.parse_args()
    if args.quick:
        args.sizes, args.queries, args.replays = "1000", 40, 20
    sizes = sorted(int(s) for s in args.sizes.split(","))
    home = common.private_home("mst-")
    try:
        report = run(args, sizes)
    finally:
        common.stop_database(home, args.keep)
    print_tables(report)
    path = common.write_json("trace.json", report)
    print(f"\nJSON: {path}")


def run(args: argparse.Namespace, sizes: list[int]) -> dict[str, Any]:
    pool, _ = bench_memory.build_pool(args.data_dir)
    report: dict[str, Any] = {"benchmark": "trace", "machine": common.machine()}
    report["server"] = common.start_database()
    from memsys.embeddings import get_embedder

    get_embedder().embed_one("warm up")
    vectors, report["pool_embedding"] = bench_memory.embed_pool(
        pool[: sizes[-1]], common.RESULTS, sizes
    )
    report["targets"] = TARGETS
    qs, _ = bench_memory.queries(args.data_dir, 50)
    report["embedding_determinism"] = embedding_determinism(qs)
    report["sizes"] = []
    loaded = 0
    for size in sizes:
        report["sizes"].append(run_size(size, loaded, pool, vectors, args))
        loaded = size
    report["machine"]["loadavg_end"] = common.loadavg()
    return report


if __name__ == "__main__":
    main()
