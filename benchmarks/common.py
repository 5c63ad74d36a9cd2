"""Shared helpers for the benchmark scripts: a private embedded server, timing statistics,
machine facts, real text from ../shared/data, and JSON/table output.

`private_home()` must run before any memsys module is imported: settings and the engine are
read once per process, and the benchmarks must never touch a real memsys database.
"""

from __future__ import annotations

import json
import os
import platform
import re
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_DATA = ROOT.parent / "shared" / "data"
RESULTS = ROOT / "benchmarks" / "results"
T = TypeVar("T")
SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(])")
SESSION_KEY = re.compile(r"session_\d+")


# --- environment -------------------------------------------------------------------------


def private_home(prefix: str) -> Path:
    """A fresh MEMSYS_HOME under /tmp (short: the embedded server needs a path < 90 chars)."""
    home = Path(tempfile.mkdtemp(prefix=prefix, dir="/tmp"))
    os.environ["MEMSYS_HOME"] = str(home)
    os.environ.pop("MEMSYS_DATABASE_URL", None)  # never benchmark against a real database
    os.environ.setdefault("MEMSYS_INDEX_ROOTS", "/")  # benchmarks index data sets anywhere
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    return home


def start_database() -> dict[str, Any]:
    """Migrate, then restart the embedded server so memsys's own tuning (shared_buffers,
    written by ALTER SYSTEM on first start) is in effect, as on any later start."""
    from memsys import db, migrator

    migrator.upgrade()
    db.stop_embedded()
    return server_settings()


def server_settings() -> dict[str, Any]:
    from sqlalchemy import text

    from memsys.db import get_engine

    names = ["server_version", "shared_buffers", "maintenance_work_mem", "work_mem"]
    names += ["hnsw.ef_search", "hnsw.iterative_scan", "synchronous_commit"]
    with get_engine().connect() as conn:
        return {n: conn.execute(text(f"SHOW {n}")).scalar() for n in names}


def stop_database(home: Path, keep: bool) -> None:
    from memsys import db

    db.stop_embedded()  # before the data dir goes: a server must never outlive its files
    if not keep:
        shutil.rmtree(home, ignore_errors=True)


def machine() -> dict[str, Any]:
    import torch

    mem_kb = 0
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemTotal:"):
            mem_kb = int(line.split()[1])
    return {
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "cpus": os.cpu_count(),
        "memory_gb": round(mem_kb / 1024 / 1024, 1),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "torch_threads": torch.get_num_threads(),
        "loadavg_start": loadavg(),
    }


def loadavg() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


# --- timing ------------------------------------------------------------------------------


def _status_mb(field: str) -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return round(int(line.split()[1]) / 1024, 1)
    return float("nan")


def rss_mb() -> float:
    """This process's resident memory now, and its peak since reset_peak_rss() (Linux)."""
    return _status_mb("VmRSS")


def peak_rss_mb() -> float:
    return _status_mb("VmHWM")


def reset_peak_rss() -> None:
    Path("/proc/self/clear_refs").write_text("5")  # VmHWM := VmRSS


def ms_since(start: float) -> float:
    return (time.perf_counter() - start) * 1000


def timed(fn: Callable[..., T], *args: Any) -> tuple[float, T]:
    """(milliseconds, result) of one call of fn(*args)."""
    start = time.perf_counter()
    result = fn(*args)
    return ms_since(start), result


def percentile(values: list[float], q: float) -> float:
    """Linear-interpolated percentile (q in 0..100) of a non-empty list."""
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q / 100
    low = int(pos)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (pos - low)


def summary(values: list[float]) -> dict[str, float]:
    """min / p50 (the median) / mean / p95 / max of a list of milliseconds."""
    if not values:
        return {"n": 0}
    return {
        "n": len(values),
        "min": round(min(values), 2),
        "p50": round(statistics.median(values), 2),
        "mean": round(statistics.fmean(values), 2),
        "p95": round(percentile(values, 95), 2),
        "max": round(max(values), 2),
    }


@contextmanager
def stopwatch(into: dict[str, float], key: str) -> Iterator[None]:
    """Record the block's wall time in seconds as into[key]."""
    start = time.perf_counter()
    yield
    into[key] = round(time.perf_counter() - start, 3)


def progress(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


# --- real text ---------------------------------------------------------------------------


def sentences(text: str, min_chars: int = 20) -> list[str]:
    parts = (p.strip() for p in SENTENCE_END.split(text))
    return [p for p in parts if len(p) >= min_chars]


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    with path.open() as f:
        return [json.loads(line) for line in f if line.strip()]


def scifact_corpus(data: Path) -> list[dict[str, Any]]:
    return read_jsonl(data / "scifact" / "corpus.jsonl")


def locomo(data: Path) -> list[dict[str, Any]]:
    return json.loads((data / "locomo" / "locomo10.json").read_text())


def locomo_turns(conv: dict[str, Any]) -> list[str]:
    c = conv["conversation"]
    keys = sorted((k for k in c if SESSION_KEY.fullmatch(k)), key=lambda k: int(k.split("_")[1]))
    return [f"{t['speaker']}: {t['text']}" for k in keys for t in c[k] if t.get("text")]


# --- output ------------------------------------------------------------------------------


def write_json(name: str, payload: dict[str, Any]) -> Path:
    """results/<name> (the latest run) and a dated copy, so earlier runs stay comparable."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    body = json.dumps(payload, indent=2, default=str) + "\n"
    stem, suffix = name.rsplit(".", 1)
    (RESULTS / f"{stem}-{time.strftime('%Y%m%d-%H%M%S')}.{suffix}").write_text(body)
    path = RESULTS / name
    path.write_text(body)
    return path


def table(headers: list[str], rows: list[list[Any]]) -> str:
    """A plain fixed-width table (first column left-aligned, the rest right-aligned)."""
    cells = [[str(h) for h in headers]] + [[_cell(v) for v in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]

    def line(row: list[str]) -> str:
        first = row[0].ljust(widths[0])
        rest = (v.rjust(w) for v, w in zip(row[1:], widths[1:], strict=True))
        return "  ".join([first, *rest])

    rule = "  ".join("-" * w for w in widths)
    return "\n".join([line(cells[0]), rule, *(line(r) for r in cells[1:])])


def _cell(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:,.2f}" if value < 1000 else f"{value:,.0f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)
