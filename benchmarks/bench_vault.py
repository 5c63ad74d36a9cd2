"""Memory as code at scale: import (with embedding) and export throughput, vault size on
disk, lint and diff time, on real text (LoCoMo turns, HotpotQA/2Wiki passages).

For each size: write a JSON-lines snapshot of N memories (ids, types, tags, times), import
it into an empty database (checked, embedded in batches, one transaction), import it again
(unchanged: nothing to embed), export it as JSON, JSON lines and a vault, lint the vault and
the live database, diff the vault against the database. The model's own batch throughput on
the same texts is measured first, as the ceiling for import.

    .venv/bin/python benchmarks/bench_vault.py [--sizes 10000] [--data-dir ../shared/data]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import common

TYPES = ("fact", "decision", "solution", "fix", "problem", "general", "insight", "workflow")
MODEL_SAMPLE = 1000


def texts(data: Path, n: int) -> list[str]:
    """n distinct real texts: LoCoMo turns first, then HotpotQA and 2Wiki passages."""
    found: dict[str, None] = {}
    for conv in common.locomo(data):
        for turn in common.locomo_turns(conv):
            if len(turn) >= 20:
                found.setdefault(turn.strip())
    hotpot = json.loads((data / "hotpotqa" / "hotpotqa_train_corpus.json").read_text())
    passages = [f"{title}: {''.join(sents)}" for title, sents in hotpot.items()]
    wiki = json.loads((data / "hotpotqa" / "2wikimultihopqa_corpus.json").read_text())
    passages += [f"{p['title']}: {p['text']}" for p in wiki]
    for body in passages:
        if len(found) >= n:
            break
        if len(body.strip()) >= 20:
            found.setdefault(body.strip()[:2000])
    if len(found) < n:
        raise SystemExit(f"only {len(found)} distinct texts in {data}; use a smaller size")
    return list(found)[:n]


def snapshot(path: Path, bodies: list[str]) -> None:
    start = datetime(2026, 1, 1, tzinfo=UTC)
    with path.open("w", encoding="utf-8") as out:
        out.write('{"kind": "header", "format": "memsys-export", "schema_version": "1.0"}\n')
        for i, body in enumerate(bodies):
            moment = (start + timedelta(minutes=i)).isoformat()
            record = {
                "kind": "memory",
                "id": f"mem_{hashlib.sha256(body.encode()).hexdigest()[:16]}",
                "namespace": "bench",
                "type": TYPES[i % len(TYPES)],
                "content": body,
                "importance": round(0.1 + (i % 9) / 10, 1),
                "confidence": 0.5,
                "tags": [f"t{i % 17}", f"g{i % 5}"],
                "lifecycle": "project",
                "created": moment,
                "updated": moment,
            }
            out.write(json.dumps(record, ensure_ascii=False) + "\n")


def disk_kb(path: Path) -> int:
    return int(
        subprocess.run(
            ["du", "-sk", str(path)], capture_output=True, text=True, check=True
        ).stdout.split()[0]
    )


def run_size(n: int, data: Path, work: Path) -> dict[str, Any]:
    from sqlalchemy import text

    from memsys.db import session_scope
    from memsys.vault import diff, files, lint, live, service

    bodies = texts(data, n)
    source = work / f"source-{n}.jsonl"
    snapshot(source, bodies)
    out: dict[str, Any] = {"memories": n, "loadavg_start": common.loadavg()}
    timed = _timer(out)
    import_measured(out, timed, bodies, source)
    again = timed(
        "reimport_unchanged",
        lambda: _in_session(lambda s: service.import_from(s, source, dry_run=False, partial=False)),
    )
    assert again.memories.unchanged == n
    _export_all(out, timed, n, work, f"{n}-")
    common.progress(f"{n}: exported; lint and diff")
    schema = lint.load_schema()
    vault = work / f"{n}-vault"
    checked = timed("lint_vault", lambda: lint.lint(files.open_snapshot(vault).items(), schema))
    out["lint_vault_errors"] = checked.count("error")
    checked = timed("lint_live", lambda: _in_session(lambda s: lint.lint(live.records(s), schema)))
    out["lint_live_errors"] = checked.count("error")
    same = timed(
        "diff_vault_live",
        lambda: _in_session(
            lambda s: diff.compare(diff.read(s, str(vault), None), diff.read(s, diff.LIVE, None))
        ),
    )
    assert same["identical"], same["counts"]
    with session_scope() as s:
        out["database_mb"] = round(
            s.execute(text("SELECT pg_total_relation_size('chunk') / 1048576.0")).scalar_one(), 1
        )
    out["loadavg_end"] = common.loadavg()
    return out


def import_measured(
    out: dict[str, Any], timed: Any, bodies: list[str], source: Path, restore: bool = False
) -> None:
    """Time the model alone on a sample of `bodies`, then the import of `source` (those
    bodies) into an empty database, with the import's own embedding time measured inside
    (`restore`: in restore mode, the vector index built once after the writes)."""
    from sqlalchemy import text

    from memsys.db import get_engine
    from memsys.embeddings import get_embedder
    from memsys.vault import service

    n = len(bodies)
    # Spread over the whole mix (short turns first, long passages after): the first texts
    # alone would overstate the model's speed on what the import embeds.
    sample = bodies[:: max(1, n // MODEL_SAMPLE)][:MODEL_SAMPLE]
    embedder = get_embedder()
    embedder.embed(bodies[-32:])  # load and warm the model outside the measurement
    start = time.perf_counter()
    embedder.embed(sample)
    out["model_sentences_per_s"] = round(len(sample) / (time.perf_counter() - start), 1)
    common.progress(f"{n}: model {out['model_sentences_per_s']}/s; importing")
    with get_engine().begin() as conn:
        conn.execute(text("TRUNCATE chunk, edge, entity, event, namespace CASCADE"))
    inside = {"embedding_s": 0.0}
    model_embed = embedder.embed

    def embed(texts: list[str]) -> Any:  # the import's own embedding time, measured
        began = time.perf_counter()
        try:
            return model_embed(texts)
        finally:
            inside["embedding_s"] += time.perf_counter() - began

    embedder.embed = embed  # type: ignore[method-assign]
    common.reset_peak_rss()
    rss_before = common.rss_mb()
    try:
        report = timed(
            "import",
            lambda: _in_session(
                lambda s: service.import_from(
                    s, source, dry_run=False, partial=False, restore=restore
                )
            ),
        )
    finally:
        embedder.embed = model_embed  # type: ignore[method-assign]
    assert report.memories.new == n, report
    out["import_per_s"] = round(n / out["import_s"], 1)
    out["import_vs_model"] = round(out["import_per_s"] / out["model_sentences_per_s"], 2)
    out["import_embedding_s"] = round(inside["embedding_s"], 1)
    # Batches are embedded on a thread while the batch before is written: the wall time
    # beyond the model's own is what the writes did not hide.
    out["import_beyond_embedding_s"] = round(out["import_s"] - inside["embedding_s"], 1)
    out["rss_mb_before_import"] = rss_before
    out["import_peak_rss_mb"] = common.peak_rss_mb()
    out["import_rss_growth_mb"] = round(out["import_peak_rss_mb"] - rss_before, 1)
    common.progress(f"{n}: imported at {out['import_per_s']}/s")


def import_size(n: int, data: Path, work: Path, restore: bool = False) -> dict[str, Any]:
    """Import n memories with embedding from a JSON-lines snapshot of the bench_memory
    pool's texts (the vault's own mix has ~13k distinct texts): throughput against the
    model's, and the process's peak memory (the import streams; it never holds the file)."""
    import bench_memory

    pool, _ = bench_memory.build_pool(data)
    bodies = pool[:n]
    source = work / f"pool-{n}.jsonl"
    snapshot(source, bodies)
    out: dict[str, Any] = {"memories": n, "restore": restore, "loadavg_start": common.loadavg()}
    out["snapshot_mb"] = round(source.stat().st_size / 1048576, 1)
    import_measured(out, _timer(out), bodies, source, restore)
    out["loadavg_end"] = common.loadavg()
    return out


def bulk_size(n: int, data: Path, work: Path) -> dict[str, Any]:
    """Export, lint and diff at n memories bulk-loaded (COPY, the HNSW index rebuilt once)
    with the bench_memory pool's texts and their cached embeddings: those steps never embed,
    so 100k is measured without the model's hours (bench_memory.py embeds the pool once)."""
    import bench_memory
    from sqlalchemy import text

    from memsys.db import get_engine
    from memsys.vault import diff, files, lint, live, service

    pool, _ = bench_memory.build_pool(data)
    vectors, embedding = bench_memory.embed_pool(pool[:n], common.RESULTS, [n])
    out: dict[str, Any] = {"memories": n, "embedded": False, "loadavg_start": common.loadavg()}
    out["pool_embedding"] = embedding
    with get_engine().begin() as conn:
        conn.execute(text("TRUNCATE chunk, edge, entity, event, namespace CASCADE"))
    out["bulk_load_s"] = bench_memory.bulk_load(pool[:n], vectors)
    common.progress(f"{n}: bulk-loaded; exporting")

    timed = _timer(out)

    _export_all(out, timed, n, work, f"bulk-{n}-")
    schema = lint.load_schema()
    vault = work / f"bulk-{n}-vault"
    timed("lint_vault", lambda: lint.lint(files.open_snapshot(vault).items(), schema))
    timed(
        "lint_jsonl",
        lambda: lint.lint(files.open_snapshot(work / f"bulk-{n}-snap.jsonl").items(), schema),
    )
    timed("lint_live", lambda: _in_session(lambda s: lint.lint(live.records(s), schema)))
    timed(
        "diff_vault_live",
        lambda: _in_session(
            lambda s: diff.compare(diff.read(s, str(vault), None), diff.read(s, diff.LIVE, None))
        ),
    )
    timed(
        "import_check_unchanged",
        lambda: _in_session(
            lambda s: service.import_from(s, work / f"bulk-{n}-snap.jsonl", False, False)
        ),
    )
    out["loadavg_end"] = common.loadavg()
    return out


def lint_files(n: int, data: Path, work: Path) -> dict[str, Any]:
    """Lint time of an n-file vault and an n-record JSON-lines file, written straight from
    records (no database, no model): what `memsys lint` costs a CI job."""
    from memsys.vault import files, jsonforms, lint, markdown

    base = texts(data, min(n, 12_000))
    vault, lines = work / f"lint-{n}-vault", work / f"lint-{n}.jsonl"
    records = []
    for i in range(n):
        body = base[i % len(base)] + ("" if i < len(base) else f" (note {i})")
        records.append(
            {
                "kind": "memory",
                "id": f"mem_{i:016x}",
                "namespace": "bench",
                "type": TYPES[i % len(TYPES)],
                "content": body,
                "importance": 0.5,
                "confidence": 0.5,
                "tags": [f"t{i % 17}"],
                "lifecycle": "project",
                "stage": "active",
                "pinned": False,
                "metadata": {},
                "created": "2026-11-01T00:00:00+00:00",
                "updated": "2026-11-01T00:00:00+00:00",
            }
        )
    for rec in records:
        path = vault / markdown.memory_path(rec)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(markdown.render_memory(rec, []), encoding="utf-8")
    with lines.open("w", encoding="utf-8") as out:
        jsonforms.write(out, "jsonl", records)
    schema = lint.load_schema()
    out: dict[str, Any] = {"files": n, "loadavg_start": common.loadavg()}
    for key, target in (("lint_vault", vault), ("lint_jsonl", lines)):
        t0 = time.perf_counter()
        report = lint.lint(files.open_snapshot(target).items(), schema)
        out[f"{key}_s"] = round(time.perf_counter() - t0, 2)
        out[f"{key}_findings"] = len(report.findings)
    out["vault_disk_kb"] = disk_kb(vault)
    out["loadavg_end"] = common.loadavg()
    return out


def _timer(out: dict[str, Any]) -> Any:
    """timed(key, fn): run fn, record its seconds as out[key + "_s"], return its result."""

    def timed(key: str, work_fn: Any) -> Any:
        t0 = time.perf_counter()
        result = work_fn()
        out[f"{key}_s"] = round(time.perf_counter() - t0, 2)
        return result

    return timed


def _export_all(out: dict[str, Any], timed: Any, n: int, work: Path, prefix: str) -> None:
    """Export the store in each format: seconds, rate, bytes and size on disk."""
    from memsys.vault import service

    for form, name in (("json", "snap.json"), ("jsonl", "snap.jsonl"), ("vault", "vault")):
        target = work / f"{prefix}{name}"
        done = timed(
            f"export_{form}",
            lambda t=target, f=form: _in_session(lambda s: service.export_to(s, t, f, None)),
        )
        out[f"export_{form}_per_s"] = round(n / max(out[f"export_{form}_s"], 1e-9), 1)
        out[f"export_{form}_bytes"] = done.bytes
        out[f"export_{form}_disk_kb"] = disk_kb(target)


def _in_session(work: Any) -> Any:
    from memsys.db import session_scope

    with session_scope() as session:
        return work(session)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", default="10000")
    parser.add_argument("--data-dir", type=Path, default=common.DEFAULT_DATA)
    parser.add_argument(
        "--bulk-sizes",
        default="",
        help="e.g. 100000: the bench_memory pool bulk-loaded with its cached embeddings",
    )
    parser.add_argument(
        "--import-sizes",
        default="",
        help="e.g. 100000: import (with embedding) of the bench_memory pool's texts",
    )
    parser.add_argument(
        "--restore", action="store_true", help="the --import-sizes imports in restore mode"
    )
    parser.add_argument("--lint-files", default="", help="e.g. 100000: lint only, no database")
    parser.add_argument("--keep", action="store_true")
    args = parser.parse_args()
    home = common.private_home("mvb-")
    work = home / "work"
    work.mkdir()
    try:
        settings = common.start_database()
        results = {"machine": common.machine(), "server": settings, "sizes": [], "bulk": []}
        for n in (int(s) for s in args.sizes.split(",") if s):
            results["sizes"].append(run_size(n, args.data_dir, work))
            common.write_json("vault.json", results)
        for n in (int(s) for s in args.import_sizes.split(",") if s):
            results.setdefault("imports", []).append(
                import_size(n, args.data_dir, work, args.restore)
            )
            common.write_json("vault.json", results)
            print(json.dumps(results["imports"][-1], indent=1))
        for n in (int(s) for s in args.lint_files.split(",") if s):
            results["lint"] = lint_files(n, args.data_dir, work)
            print(json.dumps(results["lint"], indent=1))
        for n in (int(s) for s in args.bulk_sizes.split(",") if s):
            results["bulk"].append(bulk_size(n, args.data_dir, work))
            common.write_json("vault.json", results)
            print(json.dumps(results["bulk"][-1], indent=1))
        rows = [
            [
                r["memories"],
                r["model_sentences_per_s"],
                r["import_per_s"],
                r["reimport_unchanged_s"],
                r["export_json_per_s"],
                r["export_vault_per_s"],
                r["export_vault_disk_kb"] // 1024,
                r["export_json_bytes"] // 1048576,
                r["lint_vault_s"],
                r["lint_live_s"],
                r["diff_vault_live_s"],
            ]
            for r in results["sizes"]
        ]
        print(
            common.table(
                [
                    "memories",
                    "model/s",
                    "import/s",
                    "reimport s",
                    "export json/s",
                    "export vault/s",
                    "vault MB (du)",
                    "json MB",
                    "lint vault s",
                    "lint live s",
                    "diff s",
                ],
                rows,
            )
        )
    finally:
        common.stop_database(home, args.keep)


if __name__ == "__main__":
    main()
