"""The embedding queue: chunks written without a vector (index_directory's async_mode) and
the batches that embed them, from the server's background worker or the CLI.

Safe to drain from several processes at once: a batch locks its rows with SKIP LOCKED.
"""

from __future__ import annotations

from sqlalchemy import text, update
from sqlalchemy.orm import Session

from memsys.embeddings import get_embedder
from memsys.models import Chunk

EMBED_BATCH = 64
# A batch's rows stay locked while it embeds, so a writer of one of them waits for the batch:
# it stops taking rows past this many tokens (64 chunks of a full window), and a long memory
# (up to ~9,500 tokens, about a second of model time) goes alone.
EMBED_TOKENS = 64 * 256

_PENDING_SQL = """
    SELECT namespace, id, content, token_count FROM chunk
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
_PENDING_COUNT = text("SELECT count(*) FROM chunk WHERE embedding IS NULL AND valid_to IS NULL")


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
    rows = session.execute(text(_PENDING_SQL.format(only=where)), params).all()
    if not rows:
        return 0
    tokens = 0
    for taken, row in enumerate(rows):
        tokens += row.token_count or 0
        if taken and tokens > EMBED_TOKENS:
            rows = rows[:taken]  # the rest stay queued (their locks go with this transaction)
            break
    vectors = get_embedder().embed([r.content for r in rows])
    session.execute(
        update(Chunk),
        [
            {"namespace": r.namespace, "id": r.id, "embedding": vectors[i]}
            for i, r in enumerate(rows)
        ],
    )
    session.execute(_READY, {"namespace": namespace})
    return len(rows)


def pending_count(session: Session) -> int:
    return int(session.scalar(_PENDING_COUNT) or 0)
