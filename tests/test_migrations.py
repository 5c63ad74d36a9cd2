"""Alembic owns the schema: upgrade → downgrade base → upgrade works and matches the models."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import Engine, create_engine, inspect, text
from sqlalchemy.engine import make_url

from memsys import migrator
from memsys.models import Base

SCRATCH = "memsys_migrations_test"


@pytest.fixture
def scratch_engine() -> Iterator[Engine]:
    url = make_url(os.environ["MEMSYS_DATABASE_URL"])
    admin = create_engine(url.set(database="postgres"), isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'DROP DATABASE IF EXISTS "{SCRATCH}" WITH (FORCE)'))
        conn.execute(text(f'CREATE DATABASE "{SCRATCH}"'))
    engine = create_engine(url.set(database=SCRATCH))
    yield engine
    engine.dispose()
    with admin.connect() as conn:
        conn.execute(text(f'DROP DATABASE IF EXISTS "{SCRATCH}" WITH (FORCE)'))
    admin.dispose()


def _run(engine: Engine, action: str, revision: str) -> None:
    with engine.begin() as conn:
        getattr(command, action)(migrator.alembic_config(conn), revision)


def test_upgrade_downgrade_upgrade_and_models_match(scratch_engine: Engine) -> None:
    _run(scratch_engine, "upgrade", "head")
    tables = set(inspect(scratch_engine).get_table_names())
    assert set(Base.metadata.tables) <= tables
    _run(scratch_engine, "downgrade", "base")
    assert set(inspect(scratch_engine).get_table_names()) <= {"alembic_version"}
    _run(scratch_engine, "upgrade", "head")
    with scratch_engine.connect() as conn:
        context = MigrationContext.configure(conn, opts={"compare_type": True})
        assert context.get_current_revision() == migrator.head()
        assert compare_metadata(context, Base.metadata) == []
        extensions = conn.execute(text("SELECT extname FROM pg_extension")).scalars().all()
        assert "vector" in extensions
        # compare_metadata does not look at storage parameters (WITH (...)); check them here.
        for name, table in Base.metadata.tables.items():
            wanted = {
                k: str(v) for k, v in (table.dialect_options["postgresql"]["with"] or {}).items()
            }
            options = conn.scalar(
                text("SELECT reloptions FROM pg_class WHERE oid = CAST(:t AS regclass)"),
                {"t": name},
            )
            assert dict(o.split("=", 1) for o in options or []) == wanted, name
