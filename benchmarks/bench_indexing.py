"""Document indexing throughput versus the embedding model's own throughput.

A folder of markdown files is generated from SciFact abstracts (one `## title` section per
abstract, several abstracts per file) and indexed in sync mode through the real service path
(`runner.execute(folders.index_directory, …)`, async_mode False). The same chunk texts are
then embedded by the model alone (batch 32 and 64 over the whole list, and in blocks of
SYNC_EMBED_BLOCK as index_directory's embedding loop does), so the overhead of memsys itself
is visible.
Also timed: a re-run over unchanged files (all skipped) and per-file index_file latency.

    .venv/bin/python benchmarks/bench_indexing.py [--files 300] [--quick]
        [--data-dir ../shared/data] [--keep]
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import Any

import common

NAMESPACE = "bench-docs"
SINGLE_NAMESPACE = "bench-file"
BASELINES = {"model_sentences_per_s_batch32": 159, "source": "STACK-NOTES (short sentences)"}


# --- the generated folder -------------------------------------------------------------------


def markdown(index: int, abstracts: list[dict[str, Any]]) -> str:
    parts = [f"# SciFact abstracts, part {index}\n"]
    for doc in abstracts:
        parts.append(f"## {doc['title'].strip()}\n\n{doc['text'].strip()}\n")
    return "\n".join(parts)


def write_folder(folder: Path, abstracts: list[dict[str, Any]], files: int, per_file: int) -> int:
    """`files` markdown files of `per_file` abstracts each; returns the bytes written."""
    folder.mkdir(parents=True, exist_ok=True)
    written = 0
    for i in range(files):
        text = markdown(i, abstracts[i * per_file : (i + 1) * per_file])
        written += (folder / f"abstracts_{i:03d}.md").write_text(text)
    return written


# --- measurements -----------------------------------------------------------------------------


class PhaseClock:
    """Timestamps of index_directory's progress callbacks: when reading and embedding end."""

    def __init__(self) -> None:
        self.started = time.perf_counter()
        self.marks: dict[str, float] = {}

    def __call__(self, phase: str, done: int, total: int) -> None:
        self.marks[phase] = time.perf_counter()

    def seconds(self, phase: str, since: float) -> float:
        return round(self.marks.get(phase, since) - since, 3)


@contextmanager
def model_clock() -> Iterator[dict[str, float]]:
    """Seconds spent inside the embedding model during the block (wraps the shared embedder)."""
    from memsys.embeddings import get_embedder

    embedder = get_embedder()
    spent = {"seconds": 0.0, "texts": 0}
    original = embedder.embed

    def embed(texts: list[str]) -> Any:
        started = time.perf_counter()
        try:
            return original(texts)
        finally:
            spent["seconds"] += time.perf_counter() - started
            spent["texts"] += len(texts)

    embedder.embed = embed  # type: ignore[method-assign]
    try:
        yield spent
    finally:
        del embedder.embed  # back to the class's method


def index_directory(folder: Path) -> tuple[float, Any, PhaseClock]:
    from memsys import runner
    from memsys.schemas import IndexDirectoryIn
    from memsys.services import folders

    clock = PhaseClock()
    service = partial(folders.index_directory, progress=clock)
    params = {"dir_path": str(folder), "namespace": NAMESPACE, "async_mode": False}
    seconds, out = common.timed(lambda: runner.execute(service, IndexDirectoryIn, params))
    return seconds / 1000, out, clock


def measure_directory(folder: Path) -> dict[str, Any]:
    with model_clock() as model:
        seconds, out, clock = index_directory(folder)
    read_s = clock.seconds("read", clock.started)
    embed_s = clock.seconds("embed", clock.started + read_s)
    return {
        "files_indexed": out.files_indexed,
        "failed_files": len(out.failed_files),
        "chunks": out.total_chunks,
        "pending_after": out.pending_embeddings,
        "seconds": round(seconds, 2),
        "chunks_per_s": round(out.total_chunks / seconds, 1),
        "phase_read_chunk_insert_s": read_s,
        "phase_embed_s": embed_s,
        "phase_embed_model_s": round(model["seconds"], 2),
        "phase_embed_database_s": round(embed_s - model["seconds"], 2),
        "phase_commit_s": round(seconds - read_s - embed_s, 3),
        "loadavg": common.loadavg(),
    }


def measure_rerun(folder: Path) -> dict[str, Any]:
    seconds, out, _ = index_directory(folder)
    return {
        "files_skipped": out.skipped_duplicates,
        "files_indexed": out.files_indexed,
        "seconds": round(seconds, 3),
        "ms_per_file": round(seconds * 1000 / max(1, out.skipped_duplicates), 2),
    }


def chunk_texts() -> dict[str, Any]:
    from sqlalchemy import text

    from memsys.db import session_scope

    with session_scope() as s:
        rows = s.execute(
            text(
                "SELECT content, token_count, embedding IS NULL AS pending FROM chunk "
                "WHERE namespace = :ns AND valid_to IS NULL ORDER BY source_file, chunk_index"
            ),
            {"ns": NAMESPACE},
        ).all()
    tokens = [r.token_count for r in rows]
    heading_only = [r for r in rows if r.content.startswith("#") and "\n" not in r.content]
    return {
        "texts": [r.content for r in rows],
        "pending": sum(1 for r in rows if r.pending),
        "tokens": {
            "mean": round(sum(tokens) / len(tokens), 1),
            "max": max(tokens),
            "heading_only_chunks": len(heading_only),
        },
    }


def model_throughput(texts: list[str]) -> dict[str, Any]:
    """Chunks/s of the model alone on the same texts, at several batchings."""
    from memsys.embeddings import get_embedder
    from memsys.services import folders

    embedder = get_embedder()
    default = embedder.batch_size
    result: dict[str, Any] = {}
    try:
        for batch in (32, 64):
            embedder.batch_size = batch
            seconds = common.timed(lambda: embedder.embed(texts))[0] / 1000
            result[f"whole_list_batch{batch}"] = round(len(texts) / seconds, 1)
        embedder.batch_size = default
        size = folders.SYNC_EMBED_BLOCK
        blocks = range(0, len(texts), size)
        ms = common.timed(lambda: [embedder.embed(texts[i : i + size]) for i in blocks])[0]
        result[f"blocks_of_{size}_batch{default}"] = round(len(texts) / ms * 1000, 1)
    finally:
        embedder.batch_size = default
    result["loadavg"] = common.loadavg()
    return result


def short_sentences(data: Path, count: int = 1500) -> dict[str, Any]:
    """The model on short sentences (LoCoMo questions), comparable with STACK-NOTES' 159/s."""
    from memsys.embeddings import get_embedder
    from memsys.tokens import count_tokens_batch

    questions = [qa["question"] for conv in common.locomo(data) for qa in conv["qa"]][:count]
    seconds = common.timed(lambda: get_embedder().embed(questions))[0] / 1000
    tokens = count_tokens_batch(questions)
    return {
        "sentences": len(questions),
        "mean_tokens": round(sum(tokens) / len(tokens), 1),
        "per_s_batch32": round(len(questions) / seconds, 1),
    }


def measure_files(folder: Path) -> dict[str, Any]:
    """index_file latency per new file (embeds at once), then per unchanged file (skipped)."""
    from memsys import runner
    from memsys.schemas import IndexFileIn
    from memsys.services import indexing

    def index(path: Path) -> tuple[float, Any]:
        params = {"file_path": str(path), "namespace": SINGLE_NAMESPACE}
        return common.timed(lambda: runner.execute(indexing.index_file, IndexFileIn, params))

    paths = sorted(folder.glob("*.md"))
    runs = [index(path) for path in paths]
    new_ms = [ms for ms, _ in runs]
    chunks = [out.chunks_created for _, out in runs]
    skip_ms = [index(path)[0] for path in paths]
    return {
        "files": len(paths),
        "chunks_per_file": round(sum(chunks) / len(chunks), 2),
        "new_file_ms": common.summary(new_ms),
        "unchanged_file_ms": common.summary(skip_ms),
    }


# --- output ------------------------------------------------------------------------------------


def print_tables(report: dict[str, Any]) -> None:
    d, m = report["index_directory"], report["model"]
    t = report["chunk_tokens"]
    print(f"\nindex_directory (sync): {d['files_indexed']} files, {d['chunks']:,} chunks")
    print(f"chunk tokens mean {t['mean']}, max {t['max']}; heading-only {t['heading_only_chunks']}")
    rows = [
        ["index_directory, async_mode False", d["chunks_per_s"], d["seconds"]],
        ["  read + chunk + insert phase", "", d["phase_read_chunk_insert_s"]],
        ["  embed phase (blocks of chunks per model call + UPDATE)", "", d["phase_embed_s"]],
        ["    of which model inference", "", d["phase_embed_model_s"]],
        ["    of which database (SELECT, UPDATE, ready)", "", d["phase_embed_database_s"]],
        ["  commit", "", d["phase_commit_s"]],
    ]
    for key, value in m.items():
        if key != "loadavg":
            rows.append([f"model alone, {key.replace('_', ' ')}", value, ""])
    print(common.table(["what", "chunks/s", "seconds"], rows))
    r, f = report["rerun_unchanged"], report["index_file"]
    print(
        f"\nre-run, all unchanged: {r['files_skipped']} files skipped in {r['seconds']} s "
        f"({r['ms_per_file']} ms/file)"
    )
    print(f"\nindex_file per file ({f['files']} files, {f['chunks_per_file']} chunks each):")
    stats = ("min", "p50", "p95", "max")
    rows = [[k, *(f[f"{k}_ms"][s] for s in stats)] for k in ("new_file", "unchanged_file")]
    print(common.table(["ms", "min", "p50", "p95", "max"], rows))
    q = report["model_short_sentences"]
    print(
        f"\nmodel alone on {q['sentences']} short sentences ({q['mean_tokens']} tokens): "
        f"{q['per_s_batch32']}/s at batch 32; baseline: {BASELINES}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=300)
    parser.add_argument("--per-file", type=int, default=5, help="abstracts per file")
    parser.add_argument("--single", type=int, default=30, help="files for index_file latency")
    parser.add_argument("--quick", action="store_true", help="60 files, 10 single files")
    parser.add_argument("--data-dir", type=Path, default=common.DEFAULT_DATA)
    parser.add_argument("--keep", action="store_true", help="keep the private MEMSYS_HOME")
    args = parser.parse_args()
    if args.quick:
        args.files, args.single = 60, 10
    home = common.private_home("msi-")
    docs = Path(tempfile.mkdtemp(prefix="msi-docs-", dir="/tmp"))
    try:
        report = run(args, docs)
    finally:
        common.stop_database(home, args.keep)
        shutil.rmtree(docs, ignore_errors=True)
    print_tables(report)
    print(f"\nJSON: {common.write_json('indexing.json', report)}")


def run(args: argparse.Namespace, docs: Path) -> dict[str, Any]:
    abstracts = common.scifact_corpus(args.data_dir)
    needed = (args.files + args.single) * args.per_file
    if needed > len(abstracts):
        raise SystemExit(f"only {len(abstracts)} abstracts; asked for {needed}")
    folder_bytes = write_folder(docs / "dir", abstracts, args.files, args.per_file)
    rest = abstracts[args.files * args.per_file :]
    write_folder(docs / "single", rest, args.single, args.per_file)
    report: dict[str, Any] = {"benchmark": "indexing", "machine": common.machine()}
    report["server"] = common.start_database()
    report["folder"] = {"files": args.files, "abstracts_per_file": args.per_file}
    report["folder"]["bytes"] = folder_bytes
    from memsys.embeddings import get_embedder

    get_embedder().embed_one("warm up")
    common.progress(f"index_directory over {args.files} files")
    report["index_directory"] = measure_directory(docs / "dir")
    chunks = chunk_texts()
    report["chunk_tokens"], report["chunks_left_pending"] = chunks["tokens"], chunks["pending"]
    common.progress(f"model alone on the same {len(chunks['texts']):,} chunk texts")
    report["model"] = model_throughput(chunks["texts"])
    report["model_short_sentences"] = short_sentences(args.data_dir)
    common.progress("re-run (unchanged) and per-file index_file")
    report["rerun_unchanged"] = measure_rerun(docs / "dir")
    report["index_file"] = measure_files(docs / "single")
    report["baselines"] = BASELINES
    report["machine"]["loadavg_end"] = common.loadavg()
    return report


if __name__ == "__main__":
    main()
