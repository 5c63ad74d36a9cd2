"""Ranking signals as of a past time: the change log of stage, confidence, content, lossy.

Every service that changes one of those signals calls `record` in its own transaction, so the
log and the row never disagree. `as_of` answers "what was it then": the `old_value` of the
first change after T, or the current value when nothing changed since (memsys.models.lifecycle).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import func, insert, select, text
from sqlalchemy.orm import Session

from memsys.models import MemoryChange
from memsys.retrieval.signals import earlier_values, signals_as_of

__all__ = [
    "change_row",
    "earlier_values",
    "full_text",
    "record",
    "record_rows",
    "signals_as_of",
]


def change_row(
    chunk: Any, field: str, old: Any, new: Any, operation: str, at: datetime | None = None
) -> dict[str, Any] | None:
    """The history row of one change of `field` (None when nothing changes)."""
    if old == new:
        return None
    values: dict[str, Any] = {
        "namespace": chunk.namespace,
        "memory_id": chunk.id,
        "field": field,
        "old_value": old,
        "new_value": new,
        "operation": operation,
    }
    if at is not None:
        values["changed_at"] = at
    return values


def record_rows(session: Session, rows: list[dict[str, Any]]) -> None:
    """Write history rows in one statement, in order (call it in the changes' transaction)."""
    if rows:
        session.execute(insert(MemoryChange), rows)


def record(
    session: Session,
    chunk: Any,
    field: str,
    old: Any,
    new: Any,
    operation: str,
    at: datetime | None = None,
) -> None:
    """Log one change of `field` (call it in the transaction that makes the change)."""
    row = change_row(chunk, field, old, new, operation, at)
    if row is not None:
        session.execute(insert(MemoryChange).values(**row))


def full_text(session: Session, memory: Any) -> str | None:
    """The text a memory had before aging cut it, walked back from its row's text through the
    cuts that made it (full_texts): key ← summary ← text. A text no cut made is its own — one
    imported or edited since an earlier archiving is never replaced by that earlier text. None
    when the row's text came from a cut its history no longer holds (no cut, yet the content
    changed); the current content when aging never changed it."""
    walked = full_texts(session, [(memory.namespace, memory.id, memory.content)])
    if walked:
        return next(iter(walked.values()))
    changes = select(MemoryChange.id).where(
        MemoryChange.namespace == memory.namespace,
        MemoryChange.memory_id == memory.id,
        MemoryChange.field == "content",
    )
    if session.scalar(changes.limit(1)) is None:
        return str(memory.content)  # aging never changed it
    # A cut that made this text but no longer holds what it cut: the text is lost. Else the
    # row's text came after every cut (an import, an edit): it is the memory's own.
    made_it = changes.where(
        MemoryChange.operation.in_(("archive", "key_only")),
        MemoryChange.new_value == func.to_jsonb(memory.content),
    )
    return None if session.scalar(made_it.limit(1)) is not None else str(memory.content)


# Aging's cuts of each memory's text (old value → new value), newest first.
_CUTS = text(
    """
    SELECT m.namespace, m.memory_id, m.old_value #>> '{}' AS old, m.new_value #>> '{}' AS new
    FROM memory_change m
    JOIN unnest(CAST(:namespaces AS text[]), CAST(:ids AS text[])) AS k(namespace, id)
      ON m.namespace = k.namespace AND m.memory_id = k.id
    WHERE m.field = 'content' AND m.operation IN ('archive', 'key_only')
      AND jsonb_typeof(m.old_value) = 'string' AND jsonb_typeof(m.new_value) = 'string'
    ORDER BY m.namespace, m.memory_id, m.changed_at DESC, m.id DESC
    """
)


def full_texts(session: Session, aged: list[tuple[str, str, str]]) -> dict[tuple[str, str], str]:
    """The full texts of aged memories ((namespace, id, the content their row holds)), where
    their history still holds them: an export carries the memory, not what aging left of it
    (a restore from it would lose the text). Walked back from the row's content through the
    cuts that made it — key ← summary ← text — so a text imported or edited since an earlier
    archiving is its own full text, never that earlier one's."""
    if not aged:
        return {}
    params = {"namespaces": [a[0] for a in aged], "ids": [a[1] for a in aged]}
    cuts: dict[tuple[str, str], list[Any]] = {}
    for row in session.execute(_CUTS, params):
        cuts.setdefault((row.namespace, row.memory_id), []).append(row)
    found: dict[tuple[str, str], str] = {}
    for namespace, memory_id, content in aged:
        text_ = content
        for cut in cuts.get((namespace, memory_id), []):  # newest first: back in time
            if cut.new == text_:
                text_ = cut.old
        if text_ != content:
            found[namespace, memory_id] = text_
    return found
