"""Schema versions of exported files, and the steps that carry a record from one to the next.

Every reader upgrades records as it reads them, so an import or a diff of an older file
works; `memsys migrate --file` writes the upgraded file. A file from a newer memsys is
refused: this one cannot know what its fields mean.

History:
- 0.9: records shaped like `memsys list --json` items (memory_type, created_at,
  updated_at; edges with source_id, target_id, relation, weight).
- 1.0: S003's names (type, created, updated; edges with from_id, to_id, type, strength).
- 1.1: a memory's `happened` (memory_store's reference_time), written when it has one. A 1.0
  file could not hold it: its memories are read as not saying (import keeps the stored
  time, diff shows no change), not as having none. `migrate --file` writes them without
  one, as 1.1 says a memory with no reference time, and warns that importing what it wrote
  clears the stored times (memsys.vault.service.upgrade_file).
"""

from __future__ import annotations

from collections.abc import Callable

from memsys.errors import InvalidInput
from memsys.vault.records import HAPPENED_UNKNOWN, KEYS, SCHEMA_VERSION, Record

Step = Callable[[Record], Record]

RENAMES_0_9 = {
    "memory": {"memory_type": "type", "created_at": "created", "updated_at": "updated"},
    "edge": {
        "source_id": "from_id",
        "target_id": "to_id",
        "relation": "type",
        "weight": "strength",
        "created_at": "created",
    },
}


def _from_0_9(record: Record) -> Record:
    """Renamed to 1.0's fields; what a `memsys list` item carried besides (access_count,
    last_accessed_at, …) has no field in 1.0 and is left behind, as export leaves it out."""
    kind = record.get("kind", "memory")
    if not isinstance(kind, str):  # `"kind": []`: the record's check names it
        return record
    renames = RENAMES_0_9.get(kind, {})
    renamed = {renames.get(k, k): v for k, v in record.items()}
    known = KEYS.get(kind)
    return renamed if known is None else {k: v for k, v in renamed.items() if k in known}


def _from_1_0(record: Record) -> Record:
    if record.get("kind", "memory") != "memory" or "happened" in record:
        return record
    return {**record, HAPPENED_UNKNOWN: True}


# version → (next version, the step from it)
STEPS: dict[str, tuple[str, Step]] = {"0.9": ("1.0", _from_0_9), "1.0": ("1.1", _from_1_0)}
VERSIONS = ("0.9", "1.0", "1.1")


def key(version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in version.split("."))


def check_readable(version: str, where: str) -> None:
    """Refuse a missing, unknown or future schema version, saying where and what to do."""
    try:
        wanted = key(version)
    except ValueError:
        raise InvalidInput(
            f"{where}: schema_version missing or not a version ({version!r}); "
            f"this memsys reads {', '.join(VERSIONS)}"
        ) from None
    if wanted > key(SCHEMA_VERSION):
        raise InvalidInput(
            f"{where}: written with schema version {version}, newer than this memsys "
            f"understands ({SCHEMA_VERSION}): upgrade memsys to read it"
        )
    if version not in VERSIONS:
        raise InvalidInput(
            f"{where}: unknown schema version {version}; this memsys reads {', '.join(VERSIONS)}"
        )


def steps_from(version: str) -> list[Step]:
    """The steps from `version` up to the current schema version, in order."""
    found: list[Step] = []
    while version != SCHEMA_VERSION:
        version, step = STEPS[version]
        found.append(step)
    return found
