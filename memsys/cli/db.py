"""`memsys db`: Alembic migrations driven from code (works from a checkout or a wheel)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any

import typer

from memsys.cli.output import Json, echo, emit

app = typer.Typer(no_args_is_help=True)


def _revisions() -> dict[str, Any]:
    from memsys import migrator

    current, head = migrator.current(), migrator.head()
    return {"current": current, "head": head, "up_to_date": current == head}


def _migrate(action: Callable[[], None]) -> None:
    """Run an Alembic command; its errors (unknown revision, …) are input errors."""
    from alembic.util import CommandError

    from memsys.errors import InvalidInput

    try:
        action()
    except CommandError as exc:
        raise InvalidInput(f"migration failed: {exc}") from None


def _show(revisions: dict[str, Any], as_json: bool) -> None:
    if as_json:
        emit(revisions, True, None)
        return
    note = " (up to date)" if revisions["up_to_date"] else ""
    echo(f"current: {revisions['current'] or 'none (empty database)'}{note}")
    echo(f"head:    {revisions['head']}")


@app.command()
def upgrade(
    revision: Annotated[str, typer.Argument(help="Target revision.")] = "head",
    as_json: Json = False,
) -> None:
    """Upgrade the database schema (to the newest revision by default)."""
    from memsys import migrator

    _migrate(lambda: migrator.upgrade(revision))
    _show(_revisions(), as_json)


@app.command()
def downgrade(
    revision: Annotated[str, typer.Argument(help="Target revision ('base' removes all).")],
    as_json: Json = False,
) -> None:
    """Downgrade the database schema to a revision."""
    from memsys import migrator

    _migrate(lambda: migrator.downgrade(revision))
    _show(_revisions(), as_json)


@app.command()
def current(as_json: Json = False) -> None:
    """Show the database's revision and the newest one this memsys knows."""
    _show(_revisions(), as_json)
