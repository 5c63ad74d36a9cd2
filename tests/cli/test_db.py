"""`memsys db`: current, upgrade, downgrade — and what a user sees before the first upgrade."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

from memsys import db, migrator
from tests.cli.helpers import fails, run, run_json

SCRATCH = "memsys_cli_db_test"


def test_current_prints_head() -> None:
    head = migrator.head()
    assert head
    out = run_json("db", "current")
    assert out == {"current": head, "head": head, "up_to_date": True}
    human = run("db", "current")
    assert human.exit_code == 0 and head in human.stdout and "up to date" in human.stdout


@pytest.fixture
def scratch_database() -> Iterator[None]:
    """Point memsys at an empty database for one test, then back at the test database."""
    url = make_url(os.environ["MEMSYS_DATABASE_URL"])
    admin = create_engine(url.set(database="postgres"), isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'DROP DATABASE IF EXISTS "{SCRATCH}" WITH (FORCE)'))
        conn.execute(text(f'CREATE DATABASE "{SCRATCH}"'))
    db.set_engine(db.make_engine(url.set(database=SCRATCH).render_as_string(hide_password=False)))
    try:
        yield
    finally:
        db.set_engine(None)  # the next session reconnects to MEMSYS_DATABASE_URL
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{SCRATCH}" WITH (FORCE)'))
        admin.dispose()


def test_upgrade_and_downgrade_on_an_empty_database(scratch_database: None) -> None:
    head = migrator.head()
    assert run_json("db", "current")["current"] is None
    assert "memsys db upgrade" in fails("count", code=1)  # no schema yet: says what to do

    assert run_json("db", "upgrade") == {"current": head, "head": head, "up_to_date": True}
    assert run_json("count")["count"] == 0
    down = run_json("db", "downgrade", "base")
    assert down["current"] is None and down["up_to_date"] is False
    assert "Can't locate revision" in fails("db", "downgrade", "nonexistent")
    assert run("db", "upgrade", "head").exit_code == 0
    assert run_json("db", "current")["current"] == head


def test_upgrade_on_a_server_without_pgvector_names_the_fix(scratch_database: None) -> None:
    # A real server that offers no pgvector: PostgreSQL 18 looks for extensions only under
    # extension_control_path (in its "extension" subfolder), here an empty folder that the
    # server's own user can read.
    empty = Path(tempfile.mkdtemp(prefix="msnoext-", dir="/tmp"))
    (empty / "extension").mkdir()
    for folder in (empty, empty / "extension"):
        folder.chmod(0o755)
    try:
        with db.get_engine().connect() as conn:
            conn.execute(
                text(f"ALTER DATABASE \"{SCRATCH}\" SET extension_control_path = '{empty}'")
            )
            conn.commit()
        db.get_engine().dispose()  # new connections pick the setting up

        line = fails("db", "upgrade", code=1)
        assert "no pgvector extension" in line and "pgvector/pgvector" in line
        with db.get_engine().connect() as conn:
            tables = conn.execute(
                text("SELECT count(*) FROM pg_tables WHERE schemaname = 'public'")
            ).scalar()
        assert tables == 0  # nothing was created
    finally:
        shutil.rmtree(empty)
