"""`memsys db upgrade` works from an installed wheel, not only from a checkout."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

ROOT = Path(__file__).resolve().parents[1]
PIP = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
SCRATCH = "memsys_wheel_test"

PROBE = """
import memsys, sys
from memsys import migrator
assert memsys.__file__.startswith(sys.argv[1]), memsys.__file__
assert "_migrations" in str(migrator.migrations_dir()), migrator.migrations_dir()
migrator.upgrade("head")
print(migrator.current(), migrator.head())
"""


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    dist = tmp_path_factory.mktemp("dist")
    subprocess.run(
        [*PIP, "wheel", "--no-deps", "--no-build-isolation", "-w", str(dist), str(ROOT)],
        check=True,
        capture_output=True,
    )
    return next(dist.glob("memsys-*.whl"))


def test_the_wheel_holds_every_migration_of_the_checkout(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        shipped = {
            Path(name).name
            for name in archive.namelist()
            if name.startswith("memsys/_migrations/versions/") and name.endswith(".py")
        }
        assert "memsys/_migrations/env.py" in archive.namelist()
    in_checkout = {p.name for p in (ROOT / "migrations" / "versions").glob("*.py")}
    assert in_checkout and shipped == in_checkout


def test_the_wheel_holds_the_memory_schema_and_the_eval_set(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
    assert "memsys/vault/memory-schema.yaml" in names  # `memsys lint` without a checkout
    assert "memsys/vault/evals/labelled.yaml" in names  # `memsys eval` precision/recall


def test_wheel_ships_migrations_and_upgrades_a_database(wheel: Path, tmp_path: Path) -> None:
    target = tmp_path / "site"
    subprocess.run(
        [*PIP, "install", "--no-deps", "--no-index", "--target", str(target), str(wheel)],
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
