"""What the front ends call: export, import and diff as services `(session, params) → output`.

Paths are on the memsys host and must lie under the folders memsys may read and write
(MEMSYS_INDEX_ROOTS, as for indexing; for a scoped token MEMSYS_TOKEN_INDEX_ROOTS): a server
never reads or writes elsewhere for a caller.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, TextIO

from sqlalchemy import event
from sqlalchemy.orm import Session

from memsys import regular_files, tenancy
from memsys.errors import InvalidInput, MemsysError, Protected
from memsys.schemas.vault import (
    MAX_LISTED,
    DiffIn,
    DiffOut,
    ExportIn,
    ExportOut,
    ImportIn,
    ImportOut,
    SnapshotForm,
)
from memsys.services import namespaces
from memsys.services.documents import resolve_path
from memsys.services.indexing import check_root
from memsys.vault import diff as diffing
from memsys.vault import export as exporting
from memsys.vault import files, importer, jsonforms, records
from memsys.vault.records import SCHEMA_VERSION, Located, Problem, Record


def resolved(path: str) -> Path:
    """An absolute path under the allowed roots, or InvalidInput."""
    if not path.strip():
        raise InvalidInput("path cannot be empty")
    where = resolve_path(path)  # a link loop or a name too long: InvalidInput
    check_root(where, path)
    return where


def form_of(path: Path, given: SnapshotForm | None) -> SnapshotForm:
    """The export's form: given, or from the path (.json, .jsonl, a folder for a vault). A
    new path with another extension (`notes.txt`) is refused rather than made a folder."""
    if given is not None:
        return given
    if path.suffix == ".jsonl":
        return "jsonl"
    if path.suffix == ".json":
        return "json"
    if path.suffix and not path.is_dir():
        raise InvalidInput(
            f"{path.name}: name a .json or .jsonl file, or a folder for the vault (a folder "
            "with a dot in its name: add --format vault, REST and MCP format=vault)"
        )
    return "vault"


_EXPORT_HEADER = re.compile(  # as written, or reformatted (spaces, a BOM) as import reads it
    rb'^(\xef\xbb\xbf)?\s*\{\s*("kind"\s*:\s*"header"\s*,\s*)?"format"\s*:\s*"memsys-export"'
)


def _replaceable(where: Path) -> bool:
    """A file an export may replace: none, an empty one, or an earlier JSON export (as a
    vault export replaces an earlier vault, never another folder's files)."""
    try:
        head = regular_files.read_bytes(where, str(where), limit=256)
    except (FileNotFoundError, NotADirectoryError):  # nothing there (writing says more)
        return True
    return not head or _EXPORT_HEADER.match(head) is not None


def check_replaceable(where: Path, shown: str | None = None) -> None:
    """Refuse to write a JSON export (or an upgraded one) over a file that is not one."""
    if not _replaceable(where):
        raise InvalidInput(
            f"{shown or where} exists and is not a memsys export: give a new file name (an "
            "earlier export is replaced; any other file is left alone)"
        )


def import_spooled(
    session: Session, spool: Path, shown: str, dry_run: bool, partial: bool, restore: bool
) -> ImportOut:
    """import_from of a snapshot copied into a temporary file (a request body, stdin), each
    problem and error naming it as the caller knows it (`shown`), not the file's path."""
    try:
        result = import_from(session, spool, dry_run, partial, restore)
    except MemsysError as exc:
        raise type(exc)(exc.message.replace(str(spool), shown)) from None
    for p in result.problems:
        p.source = p.source.replace(str(spool), shown, 1)
        p.message = p.message.replace(str(spool), shown)  # "also at …/body.json:2"
    result.warnings = [w.replace(str(spool), shown, 1) for w in result.warnings]
    return result


def export(session: Session, params: ExportIn) -> ExportOut:
    """Write the database (or one namespace) as a JSON document, JSON lines or a vault.
    Not for a scoped token: the folders are every tenant's, and an export replaces an
    earlier one (a read-only token replaced the admin's export of every namespace with
    its own)."""
    if not tenancy.current().admin:
        raise Protected(
            "Not allowed: writing an export on the memsys host needs the admin token; "
            "GET /v1/export streams this token's namespaces"
        )
    return export_to(session, resolved(params.path), params.format, params.namespace)


def export_to(
    session: Session, where: Path, form: SnapshotForm | None, namespace: str | None
) -> ExportOut:
    """`export` for a path already allowed (the CLI writes where its user says)."""
    namespaces.require(session, namespace)
    form = form_of(where, form)
    if form == "vault":
        done = exporting.to_vault(session, where, namespace)
        counts = {"memories": done.memories, "edges": done.edges, "preferences": done.preferences}
        size, written = done.bytes, done.files
    else:
        if where.is_dir():
            raise InvalidInput(f"{where} is a folder: give a file name for {form}")
        check_replaceable(where)
        with regular_files.replaced(where) as out:  # a failed export leaves the old file
            counts = exporting.to_stream(session, out, form, namespace)
        size, written = where.stat().st_size, 1
    return ExportOut(
        path=str(where),
        format=form,
        schema_version=SCHEMA_VERSION,
        files=written,
        bytes=size,
        **counts,
    )


def import_(session: Session, params: ImportIn) -> ImportOut:
    """Check a snapshot and (unless dry_run, or it has problems and partial is off) apply it."""
    return import_from(
        session, resolved(params.path), params.dry_run, params.partial, params.restore
    )


def import_checked(session: Session, params: ImportIn) -> ImportOut:
    """memory_import (MCP, POST /v1/import/file): `import_`, a snapshot with problems refused
    as bad input unless partial — as POST /v1/import (422) and `memsys import` (exit 2) do;
    it answered success with nothing imported."""
    result = import_(session, params)
    if result.problem_count and not params.partial:
        raise InvalidInput(refusal(result))
    return result


def refusal(result: ImportOut) -> str:
    """The error of an import with problems: how many, and the first few with their lines."""
    shown = "; ".join(p.shown() for p in result.problems[:5])
    return (
        f"{result.problem_count} problem(s), nothing imported (partial=true imports the "
        f"rest): {shown}"
    )


def import_from(
    session: Session, where: Path, dry_run: bool, partial: bool, restore: bool = False
) -> ImportOut:
    if restore and dry_run:
        raise InvalidInput(
            "restore mode applies to an import that writes, and a dry run writes nothing: "
            "drop --dry-run (REST and MCP: dry_run=false)"
        )
    if restore and not tenancy.current().admin:
        raise Protected(
            "restore mode locks every namespace's memories until the import commits: it "
            "needs the admin token"
        )
    snapshot = files.open_snapshot(where)
    report = importer.run(session, snapshot, dry_run=dry_run, partial=partial, restore=restore)
    if snapshot.form == "vault" and report.applied and not report.problems:
        # once it is the database's, an edited file is no edit export must keep (export.py)
        event.listen(
            session,
            "after_commit",
            lambda _s: exporting.note_imported(where, snapshot.read),
            once=True,
        )
    data = report.as_dict()
    data["problem_count"] = len(data["problems"])
    data["problems"] = data["problems"][:MAX_LISTED]
    return ImportOut.model_validate(data)


def diff(session: Session, params: DiffIn) -> DiffOut:
    """What changed from snapshot_a to snapshot_b ('live': the database now)."""
    a, b = (
        s if s == diffing.LIVE else str(resolved(s)) for s in (params.snapshot_a, params.snapshot_b)
    )
    return diff_of(session, a, b, params.namespace)


def diff_of(session: Session, a: str, b: str, namespace: str | None) -> DiffOut:
    """A namespace nothing holds is refused (a typo would compare nothing and say
    "identical", which a CI job reads as no drift)."""
    sides = [diffing.read(session, source, namespace) for source in (a, b)]
    if namespace is not None and not (sides[0] or sides[1]):  # one side holding it will do
        if diffing.LIVE in (a, b):
            namespaces.require(session, namespace)  # an empty namespace is no typo
        else:
            raise InvalidInput(f"Neither snapshot holds namespace {namespace}")
    result = diffing.compare(sides[0], sides[1])
    for key in ("added", "removed", "changed"):
        result[key] = result[key][:MAX_LISTED]
    return DiffOut(snapshot_a=a, snapshot_b=b, schema_version=SCHEMA_VERSION, **result)


def migrate(revision: str, dry_run: bool) -> dict[str, Any]:
    """Upgrade the database schema through Alembic; a dry run returns the SQL instead."""
    from alembic.script.revision import RevisionError
    from alembic.util import CommandError

    from memsys import migrator

    before = migrator.current()
    try:
        if migrator.behind(revision, before):
            raise InvalidInput(
                f"the database is at {before}, past {revision}: migrate only upgrades "
                "(`memsys db downgrade` goes back)"
            )
        if dry_run:
            sql = migrator.upgrade_sql(revision)
        else:
            migrator.upgrade(revision)
            sql = None
    except (CommandError, RevisionError) as exc:
        raise InvalidInput(f"migration failed: {exc}") from None
    after = migrator.current() if not dry_run else revision
    return {
        "from_revision": before,
        "to_revision": migrator.head() if after == "head" else after,
        "dry_run": dry_run,
        "sql": sql,
    }


def _writable(item: Located) -> Record:
    """An upgraded record as upgrade_file writes it, or InvalidInput naming what it cannot
    write without a loss: what no input may hold, a kind it has no array for, a field
    ordered() would leave out (import refuses each as a problem)."""
    for key, problem in records.unstorable(item):  # NUL, lone surrogates, …
        raise InvalidInput(f"{item.source}:{item.at(key) or 1}: {problem}")
    kind = item.get("kind")
    if not isinstance(kind, str) or kind not in records.KEYS:
        where = f"{item.source}:{item.at('kind') or 1}"
        raise InvalidInput(f"{where}: kind: expected memory, edge or preference, got {kind!r}")
    for key in item:  # a reader's own mark (an older file's `happened` unknown) is no field
        if key not in records.KEYS[kind] and key not in records.READER_KEYS:
            where = f"{item.source}:{item.at(str(key)) or 1}"
            raise InvalidInput(f"{where}: {key}: unknown field of a {kind} record")
    return dict(item)


def upgrade_file(source: Path, out: TextIO, output: str = "-") -> dict[str, Any]:
    """Rewrite an exported .json/.jsonl file in this memsys's schema version: as the output's
    name says (.json, .jsonl), else in the form the file had."""
    snapshot = files.open_snapshot(source)
    if snapshot.form == "vault":
        raise InvalidInput("a vault is upgraded by importing it (import reads older versions)")
    upgraded: list[Record] = []
    unknown = 0  # memories whose file could not say when they happened
    for item in snapshot.items():
        if isinstance(item, Problem):
            raise InvalidInput(str(item))
        unknown += bool(item.get(records.HAPPENED_UNKNOWN))
        upgraded.append(records.ordered(_writable(item)))
    order = {"memory": 0, "edge": 1, "preference": 2}
    upgraded.sort(key=lambda r: order.get(r.get("kind", ""), 3))
    suffix = Path(output).suffix
    form = "jsonl" if suffix == ".jsonl" else "json" if suffix == ".json" else snapshot.form
    counts = jsonforms.write(out, form, upgraded)
    warnings = (
        [
            f"{unknown} memories of this {snapshot.version} file do not say when they happened "
            f"(schema {snapshot.version} could not); the upgraded file says they have no time, "
            "so importing it clears a time the database holds for them. To keep those times, "
            f"import the {snapshot.version} file itself (import reads older versions)."
        ]
        if unknown
        else []
    )
    return {
        "from_version": snapshot.version,
        "to_version": SCHEMA_VERSION,
        "records": sum(counts.values()),
        "warnings": warnings,
    }
