"""Ranking signals of memories as they were at a past time (or now): confidence, stage,
access count. The change log (memory_change) and the access log (memory_access) are written
by the lifecycle and learning services in the transaction of each change; this module only
reads them, so retrieval can replay a query against the state it saw.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import select, text
from sqlalchemy.orm import Session

from memsys.models import Chunk

Key = tuple[str, str]

_FIRST_CHANGES_AFTER = text(
    """
    SELECT DISTINCT ON (m.namespace, m.memory_id, m.field)
           m.namespace, m.memory_id, m.field, m.old_value
    FROM memory_change m
    JOIN unnest(CAST(:namespaces AS text[]), CAST(:ids AS text[])) AS k(namespace, id)
      ON m.namespace = k.namespace AND m.memory_id = k.id
    WHERE m.field = ANY(:fields) AND m.changed_at > :as_of
    ORDER BY m.namespace, m.memory_id, m.field, m.changed_at, m.id
    """
)

_ACCESSES_UNTIL = text(
    """
    SELECT a.namespace, a.memory_id, sum(a.hits) AS hits
    FROM memory_access a
    JOIN unnest(CAST(:namespaces AS text[]), CAST(:ids AS text[])) AS k(namespace, id)
      ON a.namespace = k.namespace AND a.memory_id = k.id
    WHERE a.accessed_at <= :as_of
    GROUP BY a.namespace, a.memory_id
    """
)


def _keyed(keys: list[Key]) -> dict[str, list[str]]:
    return {"namespaces": [k[0] for k in keys], "ids": [k[1] for k in keys]}


def earlier_values(
    session: Session, keys: list[Key], fields: tuple[str, ...], as_of: datetime
) -> dict[tuple[str, str, str], Any]:
    """(namespace, id, field) → the value it had at `as_of`, for those changed since."""
    if not keys:
        return {}
    rows = session.execute(
        _FIRST_CHANGES_AFTER, {**_keyed(keys), "fields": list(fields), "as_of": as_of}
    )
    return {(r.namespace, r.memory_id, r.field): r.old_value for r in rows}


def contents_as_of(session: Session, keys: list[Key], as_of: datetime) -> dict[Key, str]:
    """The text each memory had at `as_of`, for those whose content changed since (archived
    to a summary, cut to a key, rekindled): the old value of its first content change after
    then. Memories unchanged since are left out (their current content is what they had)."""
    earlier = earlier_values(session, keys, ("content",), as_of)
    return {(ns, mid): value for (ns, mid, _), value in earlier.items() if isinstance(value, str)}


def confidences_as_of(session: Session, keys: list[Key], as_of: datetime) -> dict[Key, float]:
    """The confidence each memory had at `as_of`, for those whose confidence changed since
    (outcomes): the old value of its first confidence change after then."""
    earlier = earlier_values(session, keys, ("confidence",), as_of)
    return {
        (ns, mid): float(value)
        for (ns, mid, _), value in earlier.items()
        if isinstance(value, int | float)
    }


def signals_as_of(
    session: Session, keys: list[Key], as_of: datetime | None
) -> dict[Key, dict[str, Any]]:
    """Confidence, stage and access count of each memory as they were at `as_of` (now when
    None); keys that are not memories are left out."""
    if not keys:
        return {}
    ns, ids = [k[0] for k in keys], [k[1] for k in keys]
    rows = session.execute(
        select(Chunk.namespace, Chunk.id, Chunk.confidence, Chunk.stage, Chunk.access_count).where(
            Chunk.doc_type == "memory", Chunk.namespace.in_(set(ns)), Chunk.id.in_(ids)
        )
    ).all()
    found = {
        (r.namespace, r.id): {
            "confidence": r.confidence,
            "stage": r.stage,
            "access_count": r.access_count,
        }
        for r in rows
    }
    if as_of is None or not found:
        return found
    present = list(found)
    for (namespace, memory_id, field), value in earlier_values(
        session, present, ("confidence", "stage"), as_of
    ).items():
        found[(namespace, memory_id)][field] = value
    # The access log is complete (older counts were carried into it): sum it up to then.
    for signal in found.values():
        signal["access_count"] = 0
    for r in session.execute(_ACCESSES_UNTIL, {**_keyed(present), "as_of": as_of}):
        found[(r.namespace, r.memory_id)]["access_count"] = int(r.hits)
    return found
