"""`memsys lint`, `memsys migrate` and `memsys eval`: the checks a vault repository runs in
CI. Exit codes: 0 clean, 1 a finding (lint errors, an eval below its threshold), 2 bad
input (a missing schema file, an unknown suite)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from memsys import regular_files
from memsys.cli.output import Json, Namespace, echo, emit, path_given, plural, warn
from memsys.cli.vault import EXIT_FOUND, in_session

if TYPE_CHECKING:
    from memsys.vault.lint import Report


def lint_command(
    path: Annotated[
        str | None,
        typer.Argument(
            help="A vault folder or .json/.jsonl export (default: the live database).",
            callback=path_given,
        ),
    ] = None,
    schema: Annotated[
        str | None,
        typer.Option(
            "--schema",
            help="memory-schema.yaml to check against (default: memsys's).",
            callback=path_given,
        ),
    ] = None,
    fix: Annotated[
        bool, typer.Option("--fix", help="Write the safe fixes back into the files.")
    ] = False,
    strict: Annotated[bool, typer.Option("--strict", help="Warnings fail too.")] = False,
    as_json: Json = False,
) -> None:
    """Check memories, edges and preferences against memory-schema.yaml: types, required
    fields, ranges, retention. Exit 1 when there are errors (or warnings with --strict)."""
    from memsys.errors import InvalidInput
    from memsys.vault import files, fixer, lint, live

    rules = lint.load_schema(schema)
    if path is None:
        if fix:
            raise InvalidInput("--fix edits files: give a vault folder or an export to fix")
        report = in_session(lambda s: lint.lint(live.records(s), rules))
    else:
        snapshot = files.open_snapshot(path)
        report = lint.lint(snapshot.items(), rules)
        if fix:
            fixed = fixer.apply(snapshot, report)
            report = lint.lint(files.open_snapshot(path).items(), rules)
            if not as_json:
                echo(f"Fixed {fixed} finding{'' if fixed == 1 else 's'}")
        if snapshot.form == "vault":
            for note in files.unread_notes(snapshot.path):
                report.findings.append(lint.Finding("warning", note, None, lint.UNREAD))
    if as_json:
        emit(_as_dict(report), True, None)
    else:
        _show(report)
    failed = report.count("error") or (strict and report.count("warning"))
    if failed:
        raise typer.Exit(EXIT_FOUND)


def _as_dict(report: Report) -> dict[str, Any]:
    return {
        "schema_version": report.schema_version,
        "checked": report.checked,
        "errors": report.count("error"),
        "warnings": report.count("warning"),
        "findings": [
            {
                "severity": f.severity,
                "source": f.source,
                "line": f.line,
                "message": f.message,
                "fixable": f.fix is not None,
            }
            for f in report.findings
        ],
    }


def _show(report: Report) -> None:
    for f in report.findings:
        where = f.source if f.line is None else f"{f.source}:{f.line}"
        echo(f"{where}: {f.severity}: {f.message}" + (" (--fix)" if f.fix else ""))
    checked = ", ".join(plural(n, kind) for kind, n in report.checked.items() if n)
    echo(
        f"{checked or 'nothing'} checked against schema {report.schema_version}: "
        f"{report.count('error')} errors, {report.count('warning')} warnings"
    )


def migrate_command(
    revision: Annotated[str, typer.Argument(help="Target revision of the database.")] = "head",
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Print the SQL the upgrade would run; run nothing.")
    ] = False,
    file: Annotated[
        str | None,
        typer.Option(
            "--file", help="Upgrade an exported .json/.jsonl file instead.", callback=path_given
        ),
    ] = None,
    output: Annotated[
        str | None,
        typer.Option(
            "--output", "-o", help="Where the upgraded file goes (- stdout).", callback=path_given
        ),
    ] = None,
    as_json: Json = False,
) -> None:
    """Upgrade the database schema (Alembic), or an exported file to this schema version."""
    from memsys.errors import InvalidInput
    from memsys.vault import service

    if file is not None:
        if output is None:
            raise InvalidInput("--file needs --output (a new file, or - for stdout)")
        if output == "-":
            result = service.upgrade_file(Path(file), sys.stdout)
        else:
            service.check_replaceable(Path(output).expanduser(), output)
            with regular_files.replaced(Path(output).expanduser(), output) as out:
                result = service.upgrade_file(Path(file), out, output)
        if output != "-":
            if as_json:
                emit(result, True, None)
            else:
                echo(_upgraded(result, output))
        if not as_json or output == "-":
            for warning in result["warnings"]:
                warn(warning)
        return
    result = service.migrate(revision, dry_run)
    if dry_run and not as_json:
        sys.stdout.write(result["sql"] or f"-- already at {result['to_revision']}\n")
        return
    if as_json:
        emit(result, True, None)
    else:
        echo(f"schema: {result['from_revision']} -> {result['to_revision']}")


def _upgraded(r: dict[str, Any], output: str) -> str:
    versions = f"schema {r['from_version']} to {r['to_version']}"
    return f"Upgraded {r['records']} records from {versions}: {output}"


def eval_command(
    suite: Annotated[
        list[str] | None,
        typer.Option("--suite", "-s", help="Run only these suites (repeat the option)."),
    ] = None,
    namespace: Namespace = None,
    locomo: Annotated[
        str | None,
        typer.Option(
            "--locomo", help="locomo10.json for the precision/recall suite.", callback=path_given
        ),
    ] = None,
    as_json: Json = False,
) -> None:
    """S004's memory evals: freshness, leakage, precision_recall, staleness, red_team. Each
    prints its figures against S004's thresholds; exit 1 when one fails."""
    from memsys.vault.evals import runner

    results = runner.run(suite or list(runner.SUITES), namespace=namespace, locomo=locomo)
    if as_json:
        emit(
            {"passed": all(r.passed for r in results), "suites": [r.as_dict() for r in results]},
            True,
            None,
        )
    else:
        for r in results:
            for line in r.lines():
                echo(line)
    if not all(r.passed for r in results):
        raise typer.Exit(EXIT_FOUND)
