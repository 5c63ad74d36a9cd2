"""Alembic environment: memsys's metadata, memsys's database (or the connection it is given)."""

from alembic import context
from sqlalchemy import text

from memsys.db import check_pgvector, get_engine
from memsys.models import Base

config = context.config
target_metadata = Base.metadata

# Row-level security is forced on the data tables (migration 5d2f8e61c0a7): a migration that
# reads or rewrites rows must see every namespace, whoever runs it — memsys's own engine sets
# this per connection, but a table owner that is not a superuser, or the printed SQL run by
# hand, would otherwise see no rows and recount statistics from nothing. For the session:
# the migrations run one transaction each.
SEE_EVERY_NAMESPACE = (
    "SELECT set_config('memsys.read', '*', false), set_config('memsys.write', '*', false)"
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
        connection.execute(text(SEE_EVERY_NAMESPACE))
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
        context.execute(SEE_EVERY_NAMESPACE)
        context.run_migrations()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
