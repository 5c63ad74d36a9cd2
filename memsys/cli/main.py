"""The `memsys` command: builds the typer app, registers every group, maps errors to exits.

Service modules are imported inside each command, so `memsys --help` loads neither the
database layer nor the embedding model.
"""

from __future__ import annotations

import inspect
import os
import sys
from contextlib import suppress
from typing import Any

import typer
from typer.core import TyperGroup

from memsys.cli import (
    bench,
    commands,
    db,
    graph,
    lifecycle,
    once,
    preferences,
    server,
    status,
    token,
    trace,
    vault,
)
from memsys.errors import (
    DatabaseUnavailable,
    InvalidInput,
    MemsysError,
    SystemRefused,
    TimedOut,
    from_os_error,
)

EXIT_DATABASE = 1
EXIT_SYSTEM = 1  # the machine refused: a full disk, a closed pipe, a missing permission
EXIT_INPUT = 2
_UNDEFINED_TABLE = "42P01"


def fail(message: str, code: int) -> typer.Exit:
    """Print `error: <message>` as one line on stderr; return the Exit to raise."""
    typer.echo(f"error: {' '.join(message.split())}", err=True)
    return typer.Exit(code)


class MemsysGroup(TyperGroup):
    """The root group: one place where memsys errors become an error line and an exit code."""

    def main(  # type: ignore[override]
        self,
        args: Any = None,
        prog_name: str | None = None,
        standalone_mode: bool = True,
        **kw: Any,
    ) -> Any:
        """Usage errors (a bad option value, a missing argument) as one line, exit 2.

        Typer would draw a usage box of several lines; a script reading stderr wants the
        reason alone. Help output (including `memsys` with no arguments) is left as it is.
        """
        once.refuse_repeated_options(self)
        if not standalone_mode:
            return self._main_once_more_after_schema(args, prog_name, **kw)
        try:
            rv = self._main_once_more_after_schema(args, prog_name, **kw)
        except typer.Abort:
            typer.echo("Aborted!", err=True)
            sys.exit(1)
        except Exception as exc:
            # click's ClickException/UsageError, duck-typed: typer vendors click privately.
            if not (hasattr(exc, "format_message") and hasattr(exc, "exit_code")):
                raise
            if type(exc).__name__ == "NoArgsIsHelpError":  # `memsys` alone: the help
                getattr(exc, "show")()  # noqa: B009 (duck-typed click exception)
                sys.exit(exc.exit_code)
            ctx = getattr(exc, "ctx", None)
            hint = f" (see `{ctx.command_path} --help`)" if ctx is not None else ""
            typer.echo(f"error: {' '.join(exc.format_message().split())}{hint}", err=True)
            sys.exit(exc.exit_code)
        sys.exit(rv if isinstance(rv, int) else 0)

    def _main_once_more_after_schema(self, args: Any, prog_name: str | None, **kw: Any) -> Any:
        try:
            return super().main(args, prog_name, standalone_mode=False, **kw)
        except _SchemaCreated:  # the failed attempt wrote nothing: run the command again
            return super().main(args, prog_name, standalone_mode=False, **kw)

    def invoke(self, ctx: Any) -> Any:  # Any: typer's vendored click.Context is private
        try:
            return super().invoke(ctx)
        except (DatabaseUnavailable, TimedOut, SystemRefused) as exc:
            raise fail(exc.message, EXIT_DATABASE) from None
        except MemsysError as exc:
            raise fail(exc.message, EXIT_INPUT) from None
        except BrokenPipeError:
            # `memsys export - | head`: the reader has what it wanted. Nothing more goes to
            # the closed pipe (Python would complain again when it flushes stdout at exit).
            with suppress(OSError, ValueError):  # a stdout without a descriptor (a test's)
                os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            raise typer.Exit(EXIT_SYSTEM) from None
        except OSError as exc:
            # What the system refused while the command read or wrote: a path it cannot
            # take is bad input (exit 2), `export - > /dev/full` the machine's (exit 1).
            refused = from_os_error(exc)
            code = EXIT_INPUT if isinstance(refused, InvalidInput) else EXIT_SYSTEM
            raise fail(refused.message, code) from None
        except Exception as exc:
            if _created_schema(exc):
                raise _SchemaCreated from None
            mapped = _database_error(exc)
            if mapped is None:
                raise
            raise mapped from None


class _SchemaCreated(Exception):
    """The embedded database got its schema on first use: the command runs once more."""


def _no_schema(exc: Exception) -> bool:
    if "sqlalchemy" not in sys.modules:
        return False
    from sqlalchemy.exc import ProgrammingError

    return isinstance(exc, ProgrammingError) and (
        getattr(exc.orig, "sqlstate", None) == _UNDEFINED_TABLE
    )


def _created_schema(exc: Exception) -> bool:
    """First use of the embedded database (which memsys owns): create the schema, as `memsys
    serve` would, and say so. A database given by URL is never migrated behind its back."""
    from memsys.config import get_settings

    if not _no_schema(exc) or get_settings().database_url is not None:
        return False
    from memsys import migrator

    typer.echo("memsys: first use of this data folder: creating the database schema", err=True)
    migrator.upgrade("head")
    return True


def _database_error(exc: Exception) -> typer.Exit | None:
    """PostgreSQL errors a user fixes without a traceback: no schema yet, server gone."""
    if "sqlalchemy" not in sys.modules:
        return None
    from sqlalchemy.exc import DBAPIError, OperationalError

    from memsys.dberrors import timed_out

    if _no_schema(exc):
        return fail(
            "the database has no memsys schema yet: run `memsys db upgrade` "
            "(`memsys serve` and `memsys mcp` do it on start)",
            EXIT_DATABASE,
        )
    late = timed_out(exc) if isinstance(exc, DBAPIError) else None
    if late is not None:  # a path outside db.session_scope (bench, eval)
        return fail(late.message, EXIT_DATABASE)
    if isinstance(exc, OperationalError):
        first = str(exc.orig).strip().splitlines()[0] if exc.orig else str(exc)
        return fail(f"database unavailable: {first}", EXIT_DATABASE)
    return None


app = typer.Typer(
    name="memsys",
    cls=MemsysGroup,
    help="Long-term memory for LLM agents on one PostgreSQL database.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_show_locals=False,  # locals may hold the database URL
)


@app.callback()
def _root(version: status.Version = False) -> None:
    """Long-term memory for LLM agents on one PostgreSQL database."""


commands.register(app, {"pref": preferences.app, "graph": graph.app, "trace": trace.app})
app.add_typer(preferences.app, name="pref", help="Versioned preferences (key → JSON value).")
app.add_typer(
    graph.app,
    name="graph",
    help="Knowledge graph: the official MCP memory server's verbs (entities, relations, "
    "observations).",
)
app.add_typer(
    trace.app,
    name="trace",
    help="Retrieval traces: show, log, feedback, why, replay, errors, alerts, prune.",
)
app.add_typer(db.app, name="db", help="Database schema migrations (Alembic).")
app.add_typer(token.app, name="token", help="Scoped API tokens for the HTTP server.")
app.add_typer(bench.app, name="bench", help="Measure retrieval quality on evaluation sets.")
server.register(app)
lifecycle.register(app)
status.register(app)
vault.register(app)


def _flowing_summaries(group: typer.Typer) -> None:
    """Each command's summary in a command list as one paragraph: typer draws the line
    breaks of a docstring there as typed (the command's own --help joins them)."""
    for info in group.registered_commands:
        text = info.help or inspect.getdoc(info.callback) or ""
        if info.short_help is None and text:
            info.short_help = " ".join(text.split("\n\n")[0].split())
    for sub in group.registered_groups:
        if sub.typer_instance is not None:
            _flowing_summaries(sub.typer_instance)


_flowing_summaries(app)


if __name__ == "__main__":
    app()
