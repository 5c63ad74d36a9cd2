"""What a maintenance batch costs at 100k memories, and how much of it is the chunk table's
page room: the same pool (bench_memory's texts and cached vectors, bulk-loaded) under a given
`fillfactor`, then `maintain.run` with the clock moved 1 day (every memory's first decay
score: a score-only write) and 8 days (demotions: a stage change), each with a time budget.
Reports memories handled per second and how many row updates were HOT (no index entry
written, HNSW included).

    .venv/bin/python benchmarks/probe_maintenance.py --fillfactor 90 [--size 100000]
"""

from __future__ import annotations

import argparse
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import bench_memory
import common


def chunk_updates() -> dict[str, int]:
    from sqlalchemy import text

    from memsys.db import session_scope

    time.sleep(11)  # idle backends flush their statistics within 10 s
    with session_scope() as s:
        row = s.execute(
            text("SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables WHERE relname = 'chunk'")
        ).one()
    return {"updates": int(row[0]), "hot": int(row[1])}


def maintain_once(now: datetime, budget_s: float) -> dict[str, Any]:
    from memsys.services import maintain

    before = chunk_updates()
    started = time.perf_counter()
    report = maintain.run(now=now, budget_s=budget_s)
    seconds = time.perf_counter() - started
    after = chunk_updates()
    updates = after["updates"] - before["updates"]
    return {
        "seconds": round(seconds, 1),
        "rescored": report.rescored,
        "per_second": round(report.rescored / seconds, 1),
        "moved": report.moved,
        "complete": report.complete,
        "chunk_updates": updates,
        "hot_share": round((after["hot"] - before["hot"]) / updates, 3) if updates else None,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fillfactor", type=int, default=90)
    parser.add_argument("--size", type=int, default=100_000)
    parser.add_argument("--budget", type=float, default=120.0)
    parser.add_argument("--data-dir", type=Path, default=common.DEFAULT_DATA)
    args = parser.parse_args()
    home = common.private_home("msp-")
    try:
        report = run(args)
    finally:
        common.stop_database(home, False)
    for step in ("first_scores", "demotions"):
        print(step, report[step])
    print("\nJSON:", common.write_json(f"maintenance-ff{args.fillfactor}.json", report))


def run(args: argparse.Namespace) -> dict[str, Any]:
    from sqlalchemy import text

    from memsys.db import session_scope

    report: dict[str, Any] = {"machine": common.machine(), "fillfactor": args.fillfactor}
    report["server"] = common.start_database()
    pool, _ = bench_memory.build_pool(args.data_dir)
    vectors, _ = bench_memory.embed_pool(pool[: args.size], common.RESULTS, [args.size])
    with session_scope() as s:
        s.execute(text(f"ALTER TABLE chunk SET (fillfactor = {int(args.fillfactor)})"))
    common.progress(f"bulk-loading {args.size:,} memories at fillfactor {args.fillfactor}")
    report["load"] = bench_memory.bulk_load(pool[: args.size], vectors[: args.size])
    now = datetime.now(UTC)
    common.progress("maintenance, clock +1 day (first scores)")
    report["first_scores"] = maintain_once(now + timedelta(days=1), args.budget)
    common.progress("maintenance, clock +8 days (demotions)")
    report["demotions"] = maintain_once(now + timedelta(days=8), args.budget)
    report["sizes"] = bench_memory.relation_sizes()
    report["machine"]["loadavg_end"] = common.loadavg()
    return report


if __name__ == "__main__":
    main()
