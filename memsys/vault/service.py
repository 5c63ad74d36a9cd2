"""What the front ends call: export, import and diff as services `(session, params) → output`.

Paths are on the memsys host and must lie under the folders memsys may read and write
(MEMSYS_INDEX_ROOTS, as for indexing): a server never reads or writes elsewhere for a
caller.
"""

from __future__ import annotations

from pathlib import Path

from sqlalchemy.orm import Session

from memsys.errors import InvalidInput
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
from memsys.services.indexing import check_root
from memsys.vault import diff as diffing
from memsys.vault import export as exporting
from memsys.vault import files, importer
from memsys.vault.records import SCHEMA_VERSION


def resolved(path: str) -> Path:
    """An absolute path under the allowed roots, or InvalidInput."""
    if not path.strip():
        raise InvalidInput("path cannot be empty")
    where = Path(path).expanduser().resolve()
    check_root(where, path)
    return where


def form_of(path: Path, given: SnapshotForm | None) -> SnapshotForm:
    if given is not None:
        return given
    if path.suffix == ".jsonl":
        return "jsonl"
    return "json" if path.suffix == ".json" else "vault"


def export(session: Session, params: ExportIn) -> ExportOut:
    """Write the database (or one namespace) as a JSON document, JSON lines or a vault."""
    namespaces.require(session, params.namespace)
    where = resolved(params.path)
    form = form_of(where, params.format)
    counts = {"memories": 0, "edges": 0, "preferences": 0}
    if form == "vault":
        done = exporting.to_vault(session, where, params.namespace)
        counts = {"memories": done.memories, "edges": done.edges, "preferences": done.preferences}
        size, written = done.bytes, done.files
    else:
        if where.is_dir():
            raise InvalidInput(f"{params.path} is a folder: give a file name for {form}")
        where.parent.mkdir(parents=True, exist_ok=True)
        with where.open("w", encoding="utf-8", newline="\n") as out:
            counts = exporting.to_stream(session, out, form, params.namespace)
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
    snapshot = files.open_snapshot(resolved(params.path))
    report = importer.run(session, snapshot, dry_run=params.dry_run, partial=params.partial)
    data = report.as_dict()
    data["problem_count"] = len(data["problems"])
    data["problems"] = data["problems"][:MAX_LISTED]
    return ImportOut.model_validate(data)


def diff(session: Session, params: DiffIn) -> DiffOut:
    """What changed from snapshot_a to snapshot_b ('live': the database now)."""
    sides = []
    for source in (params.snapshot_a, params.snapshot_b):
        name = source if source == diffing.LIVE else str(resolved(source))
        sides.append(diffing.read(session, name, params.namespace))
    result = diffing.compare(sides[0], sides[1])
    for key in ("added", "removed", "changed"):
        result[key] = result[key][:MAX_LISTED]
    return DiffOut(
        snapshot_a=params.snapshot_a,
        snapshot_b=params.snapshot_b,
        schema_version=SCHEMA_VERSION,
        **result,
    )
