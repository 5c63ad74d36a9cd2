"""Memory as code on the command line: export, import, diff (rows of memsys.operations.vault,
written by hand for stdout/stdin, folders and CI exit codes), lint, migrate and eval.

These run in this process on the user's own files, so paths are not limited to
MEMSYS_INDEX_ROOTS as they are for a server. Exit codes: 0 success; 1 a check found
something (diff: the snapshots differ; lint: errors; eval: a suite below its threshold);
2 bad input (a missing file, a snapshot with problems, an unknown suite).
"""

from __future__ import annotations

import sys
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, TypeVar

import typer

from memsys.cli.output import (
    Json,
    Namespace,
    echo,
    emit,
    path_given,
    plural,
    stdin_bytes,
    warn,
)

if TYPE_CHECKING:
    from sqlalchemy.orm import Session

    from memsys.schemas.vault import DiffOut, ExportOut, ImportOut

T = TypeVar("T")
EXIT_FOUND = 1
EXIT_INPUT = 2


def in_session(work: Callable[[Session], T]) -> T:
    from memsys.db import session_scope

    with session_scope() as session:
        return work(session)


def refuse(message: str) -> typer.Exit:
    typer.echo(f"error: {' '.join(message.split())}", err=True)
    return typer.Exit(EXIT_INPUT)


Form = Annotated[
    str | None,
    typer.Option("--format", "-f", help="json | jsonl | vault (default: from PATH's suffix)."),
]


def export_command(
    path: Annotated[
        str,
        typer.Argument(
            help="A .json/.jsonl file, a folder for the vault, or - for stdout.",
            callback=path_given,
        ),
    ] = "-",
    form: Form = None,
    namespace: Namespace = None,
    as_json: Json = False,
) -> None:
    """Export memories, edges and preferences: a JSON document, JSON lines or a vault."""
    from memsys.errors import InvalidInput
    from memsys.vault import service

    if form not in (None, "json", "jsonl", "vault"):
        raise InvalidInput(f"--format must be json, jsonl or vault, not {form}")
    if path == "-":
        if form == "vault":
            raise InvalidInput("a vault is a folder: give its path instead of -")
        in_session(lambda s: _to_stdout(s, form or "json", namespace))
        return
    result = in_session(
        lambda s: service.export_to(s, Path(path).expanduser(), form, namespace)  # type: ignore[arg-type]
    )
    emit(result, as_json, _exported)


def _to_stdout(session: Session, form: str, namespace: str | None) -> None:
    from memsys.services import namespaces
    from memsys.vault import export

    namespaces.require(session, namespace)  # a misspelt one: no empty snapshot, exit 0
    export.to_stream(session, sys.stdout, form, namespace)


def _exported(r: ExportOut) -> None:
    echo(
        f"Exported {r.memories} memories, "
        f"{plural(r.edges, 'edge')}, {plural(r.preferences, 'preference')} to {r.path} "
        f"({r.format}, schema {r.schema_version}, {plural(r.files, 'file')}, {r.bytes:,} bytes)"
    )


# What json.loads reads a file in, so stdin too (its bytes are spooled as they came).
ENCODINGS = ("utf-8", "utf-16", "utf-16-le", "utf-16-be", "utf-32", "utf-32-le", "utf-32-be")


@contextmanager
def _readable(path: str) -> Iterator[Path]:
    """The snapshot as a path; stdin (-) is spooled to a temporary file (import reads twice)."""
    if path != "-":
        yield Path(path).expanduser()
        return
    with tempfile.TemporaryDirectory(prefix="memsys-import-") as folder:
        spool = Path(folder) / "stdin.json"
        with spool.open("wb") as out:  # the bytes, read as a file's are (UTF-8, 16 or 32)
            for piece in stdin_bytes(ENCODINGS):
                out.write(piece)
        yield spool


def import_command(
    path: Annotated[
        str,
        typer.Argument(help="A .json/.jsonl export, a vault folder, or -.", callback=path_given),
    ],
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Check and count what would change; write nothing.")
    ] = False,
    partial: Annotated[
        bool,
        typer.Option("--partial", help="Import the valid records even when others have problems."),
    ] = False,
    restore: Annotated[
        bool,
        typer.Option(
            "--restore",
            help="Drop the vector index first and build it once after the writes (faster for "
            "large imports); every other call on memories waits until the import commits.",
        ),
    ] = False,
    as_json: Json = False,
) -> None:
    """Import a snapshot: every record checked first; problems listed with file and line and
    nothing written unless --partial; edited memories become new versions."""
    from memsys.vault import service

    with _readable(path) as where:  # stdin's problems name `-`, not the temporary file
        result = in_session(
            lambda s: service.import_spooled(s, where, path, dry_run, partial, restore)
        )
    emit(result, as_json, _imported)
    if result.problem_count and not partial:
        raise refuse(
            f"{plural(result.problem_count, 'problem')} in {path}: nothing imported "
            "(fix them, or --partial to import the rest)"
        )


def _imported(r: ImportOut) -> None:
    for p in r.problems:
        echo(p.shown())
    if r.problem_count > len(r.problems):
        echo(f"… and {r.problem_count - len(r.problems)} more problems (--json lists them)")
    verb = "Would import" if r.dry_run else "Imported"
    counted = r.dry_run or r.applied  # refused for its problems: it counted nothing
    for kind in ("memories", "edges", "preferences") if counted else ():
        c = getattr(r, kind)
        echo(
            f"{verb} {kind}: {c.new} new, {c.changed} changed, {c.unchanged} unchanged"
            + (f", {c.duplicate} duplicates" if c.duplicate else "")
        )
    for v in r.versions:
        echo(f"new version of {v.id} (previous fields kept as {v.previous})")
    for warning in r.warnings:  # a secret-like text: the user should know it is stored
        warn(warning)
    if r.warning_count > len(r.warnings):
        left = r.warning_count - len(r.warnings)
        warn(f"… and {left} more of these (text that looks like it holds a secret)")


def diff_command(
    snapshot_a: Annotated[
        str,
        typer.Argument(help="A snapshot: .json, .jsonl or a vault folder.", callback=path_given),
    ],
    snapshot_b: Annotated[
        str,
        typer.Argument(
            help="Another snapshot, or 'live' for the database now.", callback=path_given
        ),
    ] = "live",
    namespace: Namespace = None,
    as_json: Json = False,
) -> None:
    """Compare two snapshots (or one with the live database). Exit 0 when identical, 1 when
    they differ."""
    from memsys.vault import service

    result = in_session(lambda s: service.diff_of(s, snapshot_a, snapshot_b, namespace))
    emit(result, as_json, _diffed)
    if not result.identical:
        raise typer.Exit(EXIT_FOUND)


def _diffed(r: DiffOut) -> None:
    from memsys.vault import diff

    for line in diff.lines(r.model_dump(mode="json")):
        echo(line)
    c = r.counts
    echo(
        f"{c['added']} added, {c['removed']} removed, {c['changed']} changed, "
        f"{c['unchanged']} unchanged"
    )


def register(app: typer.Typer) -> None:
    """lint, migrate and eval (export, import and diff come from the operation table)."""
    from memsys.cli import vault_checks

    app.command("lint")(vault_checks.lint_command)
    app.command("migrate")(vault_checks.migrate_command)
    app.command("eval")(vault_checks.eval_command)
