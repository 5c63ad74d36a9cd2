"""Leakage (S004 suite 2): nothing crosses a namespace, and session or project memories do
not end up in personal memory — each below 5%.

- S004's lifecycle rates: personal memories whose metadata says they began as session (or,
  unpinned, as project) memories.
- A planted probe: near-identical memories in a session namespace, another session's
  namespace and a personal one; recall and memory_context scoped to one must return nothing
  of the others.
- A live sample: memories recalled by their own text within their namespace; any hit from
  another namespace is a leak.
"""

from __future__ import annotations

from sqlalchemy import text
from sqlalchemy.orm import Session

from memsys.embeddings import get_embedder
from memsys.schemas import MemoryContextIn, MemoryStoreIn
from memsys.services import context, memories
from memsys.vault.evals.base import Context, Figure, probe_namespace, ratio, scratch

THRESHOLD = 0.05
SAMPLE = 20

_LIFECYCLE = text(
    """
    SELECT count(*) AS personal,
           count(*) FILTER (WHERE metadata ->> 'original_lifecycle' = 'session') AS from_session,
           count(*) FILTER (WHERE metadata ->> 'original_lifecycle' = 'project'
                            AND NOT pinned) AS from_project
    FROM chunk
    WHERE doc_type = 'memory' AND valid_to IS NULL AND lifecycle = 'personal'
      AND (CAST(:namespace AS text) IS NULL OR namespace = :namespace)
    """
)
_SAMPLE = text(
    """
    SELECT namespace, left(content, 300) AS content FROM chunk
    WHERE doc_type = 'memory' AND valid_to IS NULL
      AND (CAST(:namespace AS text) IS NULL OR namespace = :namespace)
    ORDER BY content_hash LIMIT :n
    """
)
PLANTED = {
    "session-a": "Session A: the staging deploy token rotates at midnight",
    "session-b": "Session B: the staging deploy token rotates at noon",
    "personal": "Personal: I like the staging deploy token to rotate at dawn",
}


def _planted() -> Figure:
    spaces = {label: probe_namespace(label) for label in PLANTED}
    vectors = get_embedder().embed(list(PLANTED.values()))
    leaked = returned = 0
    with scratch() as s:
        for (label, content), vector in zip(PLANTED.items(), vectors, strict=True):
            params = MemoryStoreIn(content=content, memory_type="session", namespace=spaces[label])
            memories.store(s, params, prepared=vector)
        for ns in spaces.values():
            hits = memories.recall_hits(
                s, "when does the staging deploy token rotate", {"namespace": ns}, 10, False
            ).hits
            assembled = context.context(
                s, MemoryContextIn(query="staging deploy token", namespace=ns)
            ).context
            foreign = [c for c in PLANTED.values() if c in assembled and c not in _own(ns, spaces)]
            returned += len(hits) + 1
            leaked += sum(h.namespace != ns for h in hits) + bool(foreign)
    return Figure(
        "planted cross-namespace hits (recall + memory_context)",
        ratio(leaked, returned),
        THRESHOLD,
        higher_is_better=False,
        detail=f"{leaked}/{returned}",
    )


def _own(ns: str, spaces: dict[str, str]) -> list[str]:
    return [PLANTED[label] for label, space in spaces.items() if space == ns]


def _sampled(session: Session, ctx: Context) -> Figure:
    leaked = returned = 0
    for row in session.execute(_SAMPLE, {"namespace": ctx.namespace, "n": SAMPLE}):
        hits = memories.recall_hits(
            session, row.content, {"namespace": row.namespace}, 10, False
        ).hits
        returned += len(hits)
        leaked += sum(h.namespace != row.namespace for h in hits)
    return Figure(
        "live sample: hits from another namespace",
        ratio(leaked, returned),
        THRESHOLD,
        higher_is_better=False,
        detail=f"{leaked}/{returned}",
    )


def run(session: Session, ctx: Context) -> list[Figure]:
    row = session.execute(_LIFECYCLE, {"namespace": ctx.namespace}).one()
    return [
        Figure(
            "personal memories that began as session memories",
            ratio(row.from_session, row.personal),
            THRESHOLD,
            higher_is_better=False,
            detail=f"{row.from_session}/{row.personal}",
        ),
        Figure(
            "personal memories that began as project memories (unpinned)",
            ratio(row.from_project, row.personal),
            THRESHOLD,
            higher_is_better=False,
            detail=f"{row.from_project}/{row.personal}",
        ),
        _planted(),
        _sampled(session, ctx),
    ]
