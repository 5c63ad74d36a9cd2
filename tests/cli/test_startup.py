"""The installed `memsys` command: fast help without the database, clean database errors."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

UNREACHABLE = "postgresql+psycopg://nobody@127.0.0.1:1/nothing"


def _memsys() -> list[str]:
    script = Path(sys.executable).parent / "memsys"
    return [str(script)] if script.exists() else [sys.executable, "-m", "memsys.cli.main"]


def _env(tmp_path: Path) -> dict[str, str]:
    # An unreachable server and an empty home: touching the database would fail or leave files.
    return {**os.environ, "MEMSYS_DATABASE_URL": UNREACHABLE, "MEMSYS_HOME": str(tmp_path)}


def test_help_is_fast_and_never_touches_the_database(tmp_path: Path) -> None:
    for args in (["--help"], ["index-directory", "--help"], ["pref", "--help"]):
        started = time.perf_counter()
        done = subprocess.run(
            [*_memsys(), *args], env=_env(tmp_path), capture_output=True, text=True, timeout=60
        )
        elapsed = time.perf_counter() - started
        assert done.returncode == 0, done.stderr
        assert "Usage" in done.stdout and done.stderr == ""
        assert elapsed < 5, f"memsys {' '.join(args)} took {elapsed:.1f}s"
    assert list(tmp_path.iterdir()) == []


def test_importing_the_cli_loads_no_database_or_model_code() -> None:
    probe = (
        "import sys, memsys.cli.main; "
        "heavy = ['torch', 'sentence_transformers', 'sqlalchemy', 'memsys.db', "
        "'memsys.services', 'alembic', 'uvicorn', 'mcp']; "
        "print([m for m in heavy if m in sys.modules])"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout.strip() == "[]"


def test_unreachable_database_exits_1_with_one_line(tmp_path: Path) -> None:
    done = subprocess.run(
        [*_memsys(), "count"], env=_env(tmp_path), capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 1
    assert done.stderr.startswith("error: Cannot connect to PostgreSQL")
    assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr
