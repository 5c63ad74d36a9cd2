"""Alembic environment: memsys's metadata, memsys's database (or the connection it is given)."""

from alembic import context
from sqlalchemy import text

from memsys.db import get_engine
from memsys.dberrors import check_pgvector
from memsys.models import Base

config = context.config
target_metadata = Base.metadata


# Row-level security is forced on the data tables (migration 5d2f8e61c0a7): a migration that
# reads or rewrites rows must see every namespace, whoever runs it — memsys's own engine sets
# this per connection, but a table owner that is not a superuser, or the printed SQL run by
# hand, would otherwise see no rows and recount statistics from nothing. Online, for the
# upgrade's transaction only (the connection may be the caller's, and goes back to a pool);
# in the printed SQL, for the session that runs it (each migration is its own transaction).
def see_every_namespace(local: bool) -> str:
    scope = "true" if local else "false"
    return (
        f"SELECT set_config('memsys.read', '*', {scope}), set_config('memsys.write', '*', {scope})"
    )


def run_migrations_online() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        _run(connection)
        return
    with get_engine().connect() as conn:
        _run(conn)
        conn.commit()


def _run(connection) -> None:  # type: ignore[no-untyped-def]
    check_pgvector(connection)
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        compare_type=True,
        transaction_per_migration=True,
    )
    with context.begin_transaction():
        connection.execute(text("SET LOCAL lock_timeout = '10s'"))
        # An index build over every row may take long: not held to MEMSYS_STATEMENT_TIMEOUT_S.
        connection.execute(text("SET LOCAL statement_timeout = 0"))
        connection.execute(text(see_every_namespace(local=True)))
        context.run_migrations()


def run_migrations_offline() -> None:
    """`memsys migrate --dry-run`: the SQL an upgrade would run, printed, never executed."""
    context.configure(
        dialect_name="postgresql",
        target_metadata=target_metadata,
        literal_binds=True,
        transaction_per_migration=True,
    )
    with context.begin_transaction():
        context.execute("SET lock_timeout = '10s'")
        context.execute(see_every_namespace(local=False))
        context.run_migrations()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
