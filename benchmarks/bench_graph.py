"""Graph queries and stable-key upserts: the depth-2 walk (memsys.services.graph_walk, the
recursive CTE query_graph and build_context run) on N entities / 5N edges including
serialisation to the S002 output models, and entity upsert throughput by stable key.

    .venv/bin/python benchmarks/bench_graph.py [--nodes 100000] [--queries 300] [--quick]

The graph is synthetic (uniform random endpoints, four relation types, validity spread over a
year): enough to measure the walk, not a claim about any real graph's shape.
"""

from __future__ import annotations

import argparse
import random
import time
from datetime import UTC, datetime
from typing import Any

import common

NS = "bench"
LOAD = [
    "INSERT INTO namespace (name) VALUES ('bench') ON CONFLICT DO NOTHING",
    """INSERT INTO entity (namespace, id, key, name, entity_type)
       SELECT 'bench', 'ent_' || i, 'concept#e' || i, 'e' || i, 'concept'
       FROM generate_series(1, :n) i""",
    """INSERT INTO edge (namespace, source_kind, source_id, target_kind, target_id, relation,
                        weight, valid_from)
       SELECT 'bench', 'entity', 'ent_' || (1 + floor(random() * :n))::int,
              'entity', 'ent_' || (1 + floor(random() * :n))::int,
              (ARRAY['depends_on', 'uses', 'part_of', 'relates_to'])[1 + floor(random() * 4)::int],
              random(), now() - random() * interval '365 days'
       FROM generate_series(1, :n * 5)""",
    "ANALYZE entity",
    "ANALYZE edge",
]


def load(n: int) -> float:
    from sqlalchemy import text

    from memsys.db import session_scope

    start = time.perf_counter()
    with session_scope() as s:
        for statement in LOAD:
            s.execute(text(statement), {"n": n})
    return round(time.perf_counter() - start, 1)


def walks(n: int, queries: int, both: bool) -> dict[str, Any]:
    from memsys.db import session_scope
    from memsys.schemas.temporal import node
    from memsys.services import graph_walk
    from memsys.services.temporal_graph import edge_out

    rng = random.Random(7)
    now = datetime.now(UTC)
    latencies: list[float] = []
    sizes: list[int] = []
    with session_scope() as s:
        for _ in range(queries):
            seed = f"ent_{rng.randint(1, n)}"
            start = time.perf_counter()
            found = graph_walk.walk(s, NS, [seed], 2, now, both=both)
            names = {i: e.name for i, e in found.entities.items()}
            payload = {
                "entities": [node(e, 0.7 ** found.depth[i]).model_dump(mode="json")
                             for i, e in found.entities.items()],
                "edges": [edge_out(e, names, 1.0).model_dump(mode="json") for e in found.edges],
            }  # fmt: skip
            latencies.append(common.ms_since(start))
            sizes.append(len(payload["edges"]))
    return {**common.summary(latencies), "edges_mean": round(sum(sizes) / len(sizes), 1)}


def upserts(count: int) -> dict[str, Any]:
    from memsys.db import session_scope
    from memsys.services import knowledge

    keys = [f"dep#pkg{i}@1.0.{i % 7}" for i in range(count)]
    out: dict[str, Any] = {}
    for label in ("new", "again"):  # the second pass finds every key: the idempotent path
        start = time.perf_counter()
        for chunk in range(0, count, 100):
            with session_scope() as s:
                for key in keys[chunk : chunk + 100]:
                    knowledge.upsert_entity(s, NS, key, "dependency")
        out[f"{label}_per_s"] = round(count / (time.perf_counter() - start), 1)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--upserts", type=int, default=5000)
    parser.add_argument("--quick", action="store_true", help="10k nodes, 100 queries")
    args = parser.parse_args()
    if args.quick:
        args.nodes, args.queries, args.upserts = 10_000, 100, 1000
    home = common.private_home("msg-")
    try:
        settings = common.start_database()
        info = common.machine()
        common.progress(f"loading {args.nodes} entities, {args.nodes * 5} edges")
        load_s = load(args.nodes)
        walks(args.nodes, 20, True)  # warm the cache
        results = {
            "load_s": load_s,
            "depth2_both": walks(args.nodes, args.queries, True),
            "depth2_outgoing": walks(args.nodes, args.queries, False),
            "upsert": upserts(args.upserts),
        }
        info["loadavg_end"] = common.loadavg()
        rows = [
            [name, r["p50"], r["p95"], r["max"], r["edges_mean"]]
            for name, r in results.items()
            if isinstance(r, dict) and "p50" in r
        ]
        print(f"{args.nodes} entities / {args.nodes * 5} edges, load {load_s} s")
        print(common.table(["depth-2 walk + serialisation", "p50 ms", "p95 ms", "max ms",
                            "edges/answer"], rows))  # fmt: skip
        print(f"stable-key upserts/s: {results['upsert']}")
        print(f"load average {info['loadavg_start']} → {info['loadavg_end']}")
        common.write_json("bench_graph.json", {"machine": info, "server": settings, **results,
                                          "nodes": args.nodes})  # fmt: skip
    finally:
        common.stop_database(home, keep=False)


if __name__ == "__main__":
    main()
