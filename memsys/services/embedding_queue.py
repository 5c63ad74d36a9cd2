"""The embedding queue: chunks written without a vector (index_directory's async_mode) and
the batches that embed them, from the server's background worker or the CLI.

Safe to drain from several processes at once: a batch locks its rows with SKIP LOCKED.
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import text, update
from sqlalchemy.orm import Session

from memsys.embeddings import get_embedder
from memsys.models import Chunk

EMBED_BATCH = 64
# A batch's rows stay locked while it embeds, so a writer of one of them waits for the batch:
# it stops taking rows past this many tokens (64 chunks of a full window), and a long memory
# (up to ~9,500 tokens, about a second of model time) goes alone.
EMBED_TOKENS = 64 * 256

# The sizes of the next rows first (no lock), so that the batch locks only the rows it will
# embed: rows locked and then left out would hold their writers for nothing.
_SIZES_SQL = """
    SELECT token_count FROM chunk
    WHERE embedding IS NULL AND valid_to IS NULL {only}
    ORDER BY created_at, id
    LIMIT :limit
"""
_PENDING_SQL = """
    SELECT namespace, id, content, token_count, updated_at FROM chunk
    WHERE embedding IS NULL AND valid_to IS NULL {only}
    ORDER BY created_at, id
    LIMIT :limit
    FOR UPDATE SKIP LOCKED
"""
_READY = text(
    """
    UPDATE document d SET status = 'ready'
    WHERE d.status = 'pending' AND d.valid_to IS NULL
      AND (CAST(:namespace AS text) IS NULL OR d.namespace = :namespace) AND NOT EXISTS (
        SELECT 1 FROM chunk c
        WHERE c.namespace = d.namespace AND c.document_id = d.id
          AND c.embedding IS NULL AND c.valid_to IS NULL)
    """
)
_PENDING_COUNT = text(
    """
    SELECT count(*) FROM chunk
    WHERE embedding IS NULL AND valid_to IS NULL
      AND (CAST(:namespace AS text) IS NULL OR namespace = :namespace)
    """
)


def embed_pending(
    session: Session,
    limit: int = EMBED_BATCH,
    only: list[str] | None = None,
    namespace: str | None = None,
) -> int:
    """Embed up to `limit` queued chunks, fewer when they pass EMBED_TOKENS (safe to run from
    several processes at once); `only` these ids, or only this namespace's."""
    where = ("" if only is None else "AND id = ANY(:only)") + (
        "" if namespace is None else " AND namespace = :namespace"
    )
    params: dict[str, object] = {"limit": limit, "only": only, "namespace": namespace}
    sizes = session.scalars(text(_SIZES_SQL.format(only=where)), params).all()
    fits = within_budget(sizes)
    if not fits:
        return 0
    rows = session.execute(text(_PENDING_SQL.format(only=where)), {**params, "limit": fits}).all()
    # Rows another worker holds were skipped and later ones taken instead: cut again.
    rows = rows[: within_budget([r.token_count for r in rows])]
    if not rows:
        return 0
    vectors = get_embedder().embed([r.content for r in rows])
    session.execute(  # a vector is no edit: updated_at stays (the ORM would set it to now)
        update(Chunk),
        [
            {
                "namespace": r.namespace,
                "id": r.id,
                "embedding": vectors[i],
                "updated_at": r.updated_at,
            }
            for i, r in enumerate(rows)
        ],
    )
    session.execute(_READY, {"namespace": namespace})
    return len(rows)


def within_budget(sizes: Sequence[int | None]) -> int:
    """How many of these rows, in order, one batch takes: all up to EMBED_TOKENS, and at
    least the first (a memory over the budget goes alone)."""
    tokens = 0
    for taken, size in enumerate(sizes):
        tokens += size or 0
        if taken and tokens > EMBED_TOKENS:
            return taken
    return len(sizes)


def pending_count(session: Session, namespace: str | None = None) -> int:
    """Chunks waiting for their vectors (of one namespace, or all)."""
    return int(session.scalar(_PENDING_COUNT, {"namespace": namespace}) or 0)
