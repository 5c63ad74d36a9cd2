"""Memory as code: export, import and diff of snapshots (JSON, JSON lines, markdown vault)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field

from memsys.schemas.common import NOT_BLANK, Input, NamespaceFilter, Output

SnapshotForm = Literal["json", "jsonl", "vault"]
MAX_LISTED = 1000  # problems and differences listed in one answer; the counts are complete


class ExportIn(Input):
    path: Annotated[
        str,
        NOT_BLANK,
        Field(
            description="Where to write, on the memsys host: a .json or .jsonl file, or a "
            "folder for the markdown vault (empty, or an earlier vault export)"
        ),
    ]
    format: Annotated[
        SnapshotForm | None,
        Field(
            description="json | jsonl | vault (default: from the path: .json, .jsonl, else vault)"
        ),
    ] = None
    namespace: NamespaceFilter = None


class ExportOut(Output):
    path: str
    format: SnapshotForm
    schema_version: str
    memories: int
    edges: int
    preferences: int
    files: int = Field(description="Files written (1 for JSON)")
    bytes: int = Field(description="Size of what was written")


class ImportIn(Input):
    path: Annotated[
        str,
        NOT_BLANK,
        Field(description="A memsys export on the memsys host: .json, .jsonl, or a vault folder"),
    ]
    dry_run: Annotated[
        bool, Field(description="Check and count what would change, write nothing")
    ] = True
    partial: Annotated[
        bool,
        Field(description="Import the valid records even when others have problems"),
    ] = False
    restore: Annotated[
        bool,
        Field(
            description="Restore mode, for loading a database nobody is using: the vector "
            "index is dropped first and built once after the writes (faster for large "
            "imports), and every other call on memories waits until the import commits. "
            "Admin only; not with dry_run"
        ),
    ] = False


class ImportCounts(Output):
    new: int
    changed: int = Field(description="Memories: new versions (the old one kept, superseded)")
    unchanged: int
    duplicate: int = Field(description="Content already stored under another id")


class ImportProblem(Output):
    source: str
    line: int | None
    message: str

    def shown(self) -> str:
        """`source:line: message`; a record of a JSON document has no line (its source
        names its place: `snap.json edges[3]`)."""
        line = "" if self.line is None else f":{self.line}"
        return f"{self.source}{line}: {self.message}"


class ImportVersion(Output):
    id: str
    previous: str = Field(description="The closed copy holding the fields before the edit")


class ImportOut(Output):
    dry_run: bool
    partial: bool
    applied: bool = Field(description="False when nothing was written (dry run, or problems)")
    memories: ImportCounts
    edges: ImportCounts
    preferences: ImportCounts
    problem_count: int
    problems: list[ImportProblem] = Field(description=f"The first {MAX_LISTED} problems")
    versions: list[ImportVersion]
    warnings: list[str] = Field(
        default_factory=list,
        description=f"The first {MAX_LISTED} records whose text looks like it holds a secret "
        "(file:line; imported all the same, as memory_store stores and flags one)",
    )
    warning_count: int = Field(
        default=0,
        description="How many warnings in all, listed or not (one per kind of secret a "
        "record's text looks like it holds)",
    )


class DiffIn(Input):
    snapshot_a: Annotated[
        str,
        NOT_BLANK,
        Field(description="A snapshot on the memsys host (.json, .jsonl, vault folder)"),
    ]
    snapshot_b: Annotated[
        str,
        NOT_BLANK,
        Field(description="Another snapshot, or 'live' for the database as it is now"),
    ] = "live"
    namespace: NamespaceFilter = None


class DiffEntry(Output):
    kind: Literal["memory", "edge", "preference"]
    id: str = Field(description="Memory or edge id; namespace/key for a preference")


class FieldChange(Output):
    before: Any
    after: Any


class DiffChange(DiffEntry):
    fields: dict[str, FieldChange]


class DiffOut(Output):
    snapshot_a: str
    snapshot_b: str
    schema_version: str
    added: list[DiffEntry] = Field(description="In b, not in a")
    removed: list[DiffEntry] = Field(description="In a, not in b")
    changed: list[DiffChange]
    counts: dict[str, int]
    identical: bool
