"""What memsys says about a database it cannot use."""

from __future__ import annotations

import pytest
from sqlalchemy import text

from memsys.db import check_pgvector, get_engine, pgvector_problem
from memsys.errors import DatabaseUnavailable


def test_the_test_server_passes_the_check() -> None:
    with get_engine().connect() as conn:
        check_pgvector(conn)  # raises if the real server lacked what memsys needs
        available = conn.execute(
            text("SELECT default_version FROM pg_available_extensions WHERE name = 'vector'")
        ).scalar()
    assert pgvector_problem(available, 180000) is None


def test_a_server_without_pgvector_gets_the_fix_named() -> None:
    message = pgvector_problem(None, 160004)
    assert message is not None
    assert "no pgvector extension" in message and "pgvector/pgvector" in message


@pytest.mark.parametrize(
    ("available", "server", "expected"),
    [
        ("0.6.2", 160000, "pgvector 0.6.2 is too old"),
        ("0.8.5", 140011, "PostgreSQL 140011 is too old"),
    ],
)
def test_old_versions_are_refused(available: str, server: int, expected: str) -> None:
    assert expected in (pgvector_problem(available, server) or "")


def test_an_unreachable_server_is_reported_with_its_address(monkeypatch) -> None:
    from memsys import db
    from memsys.config import get_settings

    monkeypatch.setenv("MEMSYS_DATABASE_URL", "postgresql://memsys:pw@127.0.0.1:1/nowhere")
    get_settings.cache_clear()
    saved = db._engine
    db._engine = None
    try:
        with pytest.raises(
            DatabaseUnavailable, match=r"Cannot connect to PostgreSQL at .*127\.0\.0\.1:1/nowhere"
        ):
            db.get_engine()
    finally:
        db._engine = saved
        get_settings.cache_clear()
