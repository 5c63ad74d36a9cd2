"""A small store with every kind of record, and the calls the vault tests share."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sqlalchemy import text

from memsys import runner
from memsys.db import get_engine, session_scope
from memsys.schemas.edges import MemoryRelateIn
from memsys.schemas.vault import DiffIn, DiffOut, ExportIn, ExportOut, ImportIn, ImportOut
from memsys.services import edges
from memsys.vault import service
from tests.conftest import tables
from tests.factories import set_preference, store

# When the seeded problem happened (memory_store's reference_time), as exports write it.
HAPPENED = "2026-03-01T09:30:00+00:00"


def seed() -> dict[str, str]:
    """Memories of several types and namespaces (one pinned, one with metadata and unicode),
    two edges, two preferences. Returns the memory ids by name."""
    ids = {
        "fix": store(
            "Redis connection timeouts fixed with socket_keepalive=True",
            memory_type="fix",
            tags=["redis", "production"],
            importance=0.8,
        ).id,
        "problem": store(
            "Redis connections drop under load",
            memory_type="problem",
            reference_time=HAPPENED,
        ).id,
        "decision": store(
            "# Use WebSockets\nWebSockets over polling: lower latency — café ☕",
            memory_type="decision",
            metadata={"title": "WebSockets over polling", "source": {"pr": 42}},
            namespace="project:game",
        ).id,
        "rule": store("Never commit secrets", memory_type="golden_rule").id,
    }
    runner.execute(
        edges.relate,
        MemoryRelateIn,
        {"source_id": ids["fix"], "target_id": ids["problem"], "relation": "relates_to"},
    )
    runner.execute(
        edges.relate,
        MemoryRelateIn,
        {"source_id": ids["rule"], "target_id": ids["fix"], "relation": "caused_by", "weight": 0.5},
    )
    with get_engine().begin() as conn:
        conn.execute(text("UPDATE chunk SET pinned = true WHERE id = :id"), {"id": ids["rule"]})
    set_preference("editor", "helix")
    set_preference("theme", {"dark": True, "size": 14}, namespace="project:game")
    return ids


def happened(memory_id: str) -> str | None:
    """When a live memory happened, as exports write it (None: it has no reference time)."""
    with session_scope() as s:
        when = s.execute(
            text("SELECT occurred_at FROM chunk WHERE id = :id AND valid_to IS NULL"),
            {"id": memory_id},
        ).scalar_one()
    return None if when is None else str(when.isoformat())


def empty_database() -> None:
    with get_engine().begin() as conn:
        conn.execute(text(f"TRUNCATE {', '.join(tables())} RESTART IDENTITY CASCADE"))


def export(path: Path, **fields: Any) -> ExportOut:
    return runner.execute(service.export, ExportIn, {"path": str(path), **fields})


def import_(path: Path, **fields: Any) -> ImportOut:
    data = {"path": str(path), "dry_run": False, **fields}
    return runner.execute(service.import_, ImportIn, data)


def diff(a: str, b: str = "live", **fields: Any) -> DiffOut:
    return runner.execute(service.diff, DiffIn, {"snapshot_a": a, "snapshot_b": b, **fields})


def tree(root: Path) -> dict[str, bytes]:
    """Every file of a folder (relative path → bytes), derived index left out."""
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and p.name != "_index.json"
    }


def live_count(sql: str, **params: Any) -> int:
    with session_scope() as s:
        return int(s.execute(text(sql), params).scalar_one())
