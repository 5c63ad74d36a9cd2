"""Probes behind the findings in README.md: why recall's SQL grows with size, what would fix it.

On the bench_memory pool (its cached embeddings) at one size, it times:
- the full-text channel as memsys runs it and four alternatives (with each one's top-10
  overlap with today's ranking), unprepared and with psycopg's default auto-prepare;
- memsys's hybrid statement with auto-prepare, without it, and with force_custom_plan;
- the access-count UPDATE recall runs on its hits, at fillfactor 100 (after a bulk load) and
  after `fillfactor = 90` + a table rewrite, with the share of HOT updates.

    .venv/bin/python benchmarks/probe_recall_sql.py [--size 100000] [--data-dir …] [--keep]
"""

from __future__ import annotations

import argparse
import statistics
import time
from functools import partial
from pathlib import Path
from typing import Any

import common

NAMESPACE = "bench"
TSQ_OR = "replace(plainto_tsquery('english', %(query)s)::text, '&', '|')::tsquery"
LIVE = "c.valid_to IS NULL AND c.doc_type = 'memory' AND c.namespace = 'bench'"
RARE_TSQ = """
    (SELECT coalesce(string_agg(quote_literal(w.word), ' | '), '')::tsquery AS tsq
     FROM unnest(tsvector_to_array(to_tsvector('english', %(query)s))) t(word)
     JOIN lexeme_df w ON w.word = t.word WHERE w.ndoc <= %(cap)s)"""
LEXICAL = {
    "today: OR of all terms, ts_rank_cd over every match": f"""
        SELECT c.id FROM chunk c, (SELECT {TSQ_OR} AS tsq) q
        WHERE c.tsv @@ q.tsq AND {LIVE} ORDER BY ts_rank_cd(c.tsv, q.tsq) DESC LIMIT 60""",
    "OR of lexemes in <= 1% of rows only": f"""
        SELECT c.id FROM chunk c, {RARE_TSQ} q
        WHERE c.tsv @@ q.tsq AND {LIVE} ORDER BY ts_rank_cd(c.tsv, q.tsq) DESC LIMIT 60""",
    "OR, rank only the first 1000 GIN matches": f"""
        SELECT id FROM (SELECT c.id, c.tsv, q.tsq FROM chunk c, (SELECT {TSQ_OR} AS tsq) q
                        WHERE c.tsv @@ q.tsq AND {LIVE} LIMIT 1000) s
        ORDER BY ts_rank_cd(tsv, tsq) DESC LIMIT 60""",
    "OR, ts_rank instead of ts_rank_cd": f"""
        SELECT c.id FROM chunk c, (SELECT {TSQ_OR} AS tsq) q
        WHERE c.tsv @@ q.tsq AND {LIVE} ORDER BY ts_rank(c.tsv, q.tsq) DESC LIMIT 60""",
    "AND of all terms (plainto_tsquery)": f"""
        SELECT c.id FROM chunk c, (SELECT plainto_tsquery('english', %(query)s) AS tsq) q
        WHERE c.tsv @@ q.tsq AND {LIVE} ORDER BY ts_rank_cd(c.tsv, q.tsq) DESC LIMIT 60""",
}
LEXEME_DF = """
    CREATE TABLE lexeme_df AS
    SELECT word, ndoc FROM ts_stat('SELECT tsv FROM chunk WHERE valid_to IS NULL');
    CREATE UNIQUE INDEX ON lexeme_df (word)
"""
TOUCH = """
    UPDATE chunk SET access_count = access_count + 1, last_accessed_at = now()
    WHERE doc_type = 'memory' AND valid_to IS NULL AND id = ANY(%(ids)s)
"""


def load(size: int, data: Path) -> list[str]:
    """bench_memory's pool prefix bulk-loaded; returns the probe queries."""
    import bench_memory

    pool, _ = bench_memory.build_pool(data)
    common.start_database()
    vectors, _ = bench_memory.embed_pool(pool[:size], common.RESULTS, [size])
    common.progress(f"bulk-loading {size:,} memories")
    bench_memory.bulk_load(pool[:size], vectors)
    return bench_memory.queries(data, 100)[0]


def connect(prepare_threshold: int | None = 5):  # type: ignore[no-untyped-def]
    import bench_memory

    conn = bench_memory.raw_connection()
    conn.prepare_threshold = prepare_threshold
    return conn


def run_lexical(sql: str, qs: list[str], cap: int, prepare: int | None) -> tuple[list, list]:
    times: list[float] = []
    ids: list[list[str]] = []
    with connect(prepare) as conn:
        for q in qs * 2:  # the first pass warms the cache (and the prepared statement)
            ms, rows = common.timed(fetch_all, conn, sql, {"query": q, "cap": cap})
            times.append(ms)
            ids.append([r[0] for r in rows])
    return times[len(qs) :], ids[len(qs) :]


def fetch_all(conn: Any, sql: str, params: dict[str, Any]) -> list[Any]:
    return list(conn.execute(sql, params).fetchall())


def overlap10(got: list[list[str]], base: list[list[str]]) -> float:
    pairs = zip(got, base, strict=True)
    return round(statistics.fmean(len(set(a[:10]) & set(b[:10])) / 10 for a, b in pairs), 3)


def probe_lexical(qs: list[str], size: int) -> dict[str, Any]:
    with connect() as conn:
        ms = common.timed(lambda: conn.execute(LEXEME_DF))[0]
        conn.commit()
    result: dict[str, Any] = {"lexeme_df_build_ms": round(ms, 1)}
    base: list[list[str]] = []
    for name, sql in LEXICAL.items():
        for label, prepare in (("unprepared", None), ("auto-prepare", 5)):
            times, ids = run_lexical(sql, qs, size // 100, prepare)
            base = base or ids
            result[f"{name} [{label}]"] = {
                **common.summary(times),
                "top10_overlap": overlap10(ids, base),
            }
            common.progress(f"{name} [{label}]: {result[f'{name} [{label}]']}")
    return result


def probe_prepare(qs: list[str]) -> dict[str, Any]:
    """memsys's own hybrid() (embeddings precomputed) on three differently set sessions."""
    from sqlalchemy import text
    from sqlalchemy.orm import Session

    from memsys.db import get_engine
    from memsys.embeddings import get_embedder
    from memsys.retrieval import pipeline
    from memsys.services import search

    vectors = {q: get_embedder().embed_one(q) for q in qs}
    embed, pipeline.embed_query = pipeline.embed_query, vectors.__getitem__
    modes = ("auto-prepare (psycopg default)", "prepare_threshold None", "force_custom_plan")
    sessions = {m: Session(get_engine()) for m in modes}
    driver = sessions[modes[1]].connection().connection.driver_connection
    assert driver is not None
    driver.prepare_threshold = None
    sessions[modes[2]].execute(text("SET plan_cache_mode = force_custom_plan"))
    times: dict[str, list[float]] = {m: [] for m in modes}
    filters = {"namespace": NAMESPACE, "doc_type": "memory"}
    try:
        for q in qs * 2:
            for m in modes:
                hybrid = partial(search.hybrid, filters=filters, limit=5, count_access=False)
                times[m].append(common.timed(hybrid, sessions[m], q)[0])
    finally:
        pipeline.embed_query = embed
        for s in sessions.values():
            s.close()
    return {m: common.summary(t[len(qs) :]) for m, t in times.items()}


def touch_round(sample: int = 500) -> dict[str, Any]:
    """UPDATE 5 random never-touched rows at a time; latency and the HOT share."""
    with connect() as conn:
        ids = conn.execute(
            "SELECT id FROM chunk WHERE access_count = 0 ORDER BY random() LIMIT %s", (sample,)
        ).fetchall()
        ids = [r[0] for r in ids]
        before = hot_counts(conn)
        times = []
        for i in range(0, len(ids), 5):
            times.append(common.timed(conn.execute, TOUCH, {"ids": ids[i : i + 5]})[0])
            conn.commit()
        conn.execute("SELECT pg_stat_force_next_flush()")
        conn.commit()
        time.sleep(1)
        after = hot_counts(conn)
    updates, hot = after[0] - before[0], after[1] - before[1]
    return {**common.summary(times), "updates": updates, "hot_updates": hot}


def hot_counts(conn: Any) -> tuple[int, int]:
    conn.commit()
    row = conn.execute(
        "SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables WHERE relname = 'chunk'"
    ).fetchone()
    conn.commit()
    return int(row[0]), int(row[1])


def probe_touch() -> dict[str, Any]:
    result: dict[str, Any] = {"fillfactor_100": touch_round()}
    with connect() as conn:
        conn.autocommit = True
        conn.execute("ALTER TABLE chunk SET (fillfactor = 90)")
        conn.execute("SET maintenance_work_mem = '1GB'")
        rewrite_ms = common.timed(conn.execute, "VACUUM FULL chunk")[0]
        result["rewrite_s"] = round(rewrite_ms / 1000, 1)
        conn.execute("ANALYZE chunk")
    result["fillfactor_90"] = touch_round()
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=100_000)
    parser.add_argument("--data-dir", type=Path, default=common.DEFAULT_DATA)
    parser.add_argument("--keep", action="store_true", help="keep the private MEMSYS_HOME")
    args = parser.parse_args()
    home = common.private_home("msp-")
    report: dict[str, Any] = {"benchmark": "probe_recall_sql", "size": args.size}
    try:
        report["machine"] = common.machine()
        qs = load(args.size, args.data_dir)
        report["lexical_channel"] = probe_lexical(qs, args.size)
        report["hybrid_statement"] = probe_prepare(qs)
        report["access_count_update"] = probe_touch()
        report["machine"]["loadavg_end"] = common.loadavg()
    finally:
        common.stop_database(home, args.keep)
    print_tables(report)
    print(f"\nJSON: {common.write_json('probe_recall_sql.json', report)}")


def print_tables(report: dict[str, Any]) -> None:
    stats = ("p50", "p95")
    rows = [
        [name, *(v[s] for s in stats), v["top10_overlap"]]
        for name, v in report["lexical_channel"].items()
        if isinstance(v, dict)
    ]
    print(f"\nfull-text channel alone at {report['size']:,} memories (ms)")
    print(common.table(["variant", *stats, "top-10 overlap"], rows))
    rows = [[m, *(v[s] for s in stats)] for m, v in report["hybrid_statement"].items()]
    print("\nmemsys hybrid statement (ms)")
    print(common.table(["session", *stats], rows))
    t = report["access_count_update"]
    rows = [
        [k, *(t[k][s] for s in stats), f"{t[k]['hot_updates']}/{t[k]['updates']}"]
        for k in ("fillfactor_100", "fillfactor_90")
    ]
    print("\naccess-count UPDATE of 5 hits (ms)")
    print(common.table(["table", *stats, "HOT"], rows))


if __name__ == "__main__":
    main()
