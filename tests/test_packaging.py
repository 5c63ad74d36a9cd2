"""`memsys db upgrade` works from an installed wheel, not only from a checkout."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

ROOT = Path(__file__).resolve().parents[1]
SCRATCH = "memsys_wheel_test"

PROBE = """
import memsys, sys
from memsys import schema
assert memsys.__file__.startswith(sys.argv[1]), memsys.__file__
assert "_migrations" in str(schema.migrations_dir()), schema.migrations_dir()
schema.upgrade("head")
print(schema.current(), schema.head())
"""


def test_wheel_ships_migrations_and_upgrades_a_database(tmp_path: Path) -> None:
    dist, target = tmp_path / "dist", tmp_path / "site"
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    subprocess.run(
        [*pip, "wheel", "--no-deps", "--no-build-isolation", "-w", str(dist), str(ROOT)],
        check=True,
        capture_output=True,
    )
    wheel = next(dist.glob("memsys-*.whl"))
    subprocess.run(
        [*pip, "install", "--no-deps", "--no-index", "--target", str(target), str(wheel)],
        check=True,
        capture_output=True,
    )

    url = make_url(os.environ["MEMSYS_DATABASE_URL"])
    admin = create_engine(url.set(database="postgres"), isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'DROP DATABASE IF EXISTS "{SCRATCH}" WITH (FORCE)'))
        conn.execute(text(f'CREATE DATABASE "{SCRATCH}"'))
    try:
        env = {
            **os.environ,
            "PYTHONPATH": str(target),
            "MEMSYS_DATABASE_URL": url.set(database=SCRATCH).render_as_string(False),
        }
        out = subprocess.run(
            [sys.executable, "-c", PROBE, str(target)],
            env=env,
            cwd=tmp_path,  # not the checkout: its migrations/ must not be what is found
            capture_output=True,
            text=True,
            check=False,
        )
        assert out.returncode == 0, out.stderr
        current, head = out.stdout.split()
        assert current == head
    finally:
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{SCRATCH}" WITH (FORCE)'))
        admin.dispose()
