"""Many memories stored in a handful of statements (memory_store_batch, and the knowledge
graph's create_entities / add_observations, which store every observation as a memory).

The rules are memory_store's (memsys.services.memories.store): a live memory of the same
content in the namespace is returned as a duplicate (also within one batch: the first copy is
stored, the later ones point at it); golden rules start fully confident, everything else
unproven; the lifecycle defaults by type; each new memory is linked to the entities it
mentions and logged with a `create` event. Only the shape differs: per namespace, one
statement locks the content hashes (sorted, so two batches with shared contents take turns
instead of deadlocking), one reads the live duplicates, two find or create the entities the
new memories name, and one writes the new rows with their mention edges and events (ON
CONFLICT DO NOTHING: a writer that stored the same content first wins, and its row is read
back as a duplicate). All but the last need no embedding, so memory_store runs them while
the model is still working on its content, in two round trips (db.in_one_trip; for one
namespace the first also carries the BEGIN and the namespace's turn): on two cores every
round trip beside the model slows it down.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np
from sqlalchemy import text
from sqlalchemy.orm import Session

from memsys import ids, secretscan
from memsys.db import Statement, alone, in_one_trip, json_text, turns_statement
from memsys.ids import content_hashes
from memsys.schemas import MemoryStoreIn, MemoryStoreOut
from memsys.services import mentions, namespaces
from memsys.tokens import count_tokens_batch
from memsys.vocabulary import DEFAULT_LIFECYCLE, GOLDEN_RULE

INITIAL_CONFIDENCE = 0.3  # S001: a new memory is unproven; TRY/LEARN moves it


# The live memories of some content hashes in a namespace: what a store answers as duplicates.
_LIVE = text(
    """
    SELECT id, content_hash, memory_type, confidence, importance, stage FROM chunk
    WHERE namespace = :namespace AND doc_type = 'memory' AND valid_to IS NULL
      AND content_hash = ANY(CAST(:digests AS text[]))
    """
)


def _out(row: Any, namespace: str, duplicate: bool) -> MemoryStoreOut:
    return MemoryStoreOut(
        id=row.id,
        content_hash=f"sha256_{row.content_hash}",
        namespace=namespace,
        memory_type=row.memory_type or "",
        duplicate=duplicate,
        confidence=row.confidence,
        importance=row.importance,
    )


def _live(session: Session, namespace: str, digests: list[str]) -> dict[str, Any]:
    rows = session.execute(_LIVE, {"namespace": namespace, "digests": digests})
    return {r.content_hash: r for r in rows}


def _by_digest(rows: Iterable[Any], aliases: dict[str, str]) -> dict[str, Any]:
    """Live rows by the digest of their text (content_hash); a row written before dedup read
    unseen characters away holds its text's own digest (an alias), and a row holding the
    digest itself wins over it."""
    found: dict[str, Any] = {}
    for row in rows:
        digest = aliases.get(row.content_hash, row.content_hash)
        if digest not in found or row.content_hash == digest:
            found[digest] = row
    return found


def _in_turn(
    namespace: str,
    digests: list[str],
    aliases: dict[str, str],
    holding: str | None = None,
    alone: frozenset[str] = frozenset(),
) -> list[Statement]:
    """Take the turns of these contents, then read their live memories (under the digests
    of rows written before, too: `aliases`): two statements (the read sees what a writer we
    waited for committed), sent in one round trip. No turns in a namespace the transaction
    writes alone in (`alone`, db.writing_alone: an import)."""
    turned = [] if namespace in alone else digests
    turns = turns_statement([(namespace, "memory", d) for d in turned], holding=holding)
    wanted = set(digests)
    sought = sorted(wanted | {old for old, new in aliases.items() if new in wanted})
    return [turns, (_LIVE, {"namespace": namespace, "digests": sought})]


def _live_in_turn(
    session: Session, namespace: str, digests: list[str], aliases: dict[str, str]
) -> dict[str, Any]:
    _, rows = in_one_trip(session, *_in_turn(namespace, digests, aliases, None, alone(session)))
    return _by_digest(rows, aliases)


def _record(
    memory_id: str, item: MemoryStoreIn, digest: str, tokens: int, vector: np.ndarray
) -> dict[str, Any]:
    """One new row as _WRITE reads it from its JSON document."""
    return {
        "id": memory_id,
        "content": item.content,
        "content_hash": digest,
        "token_count": tokens,
        "embedding": vector.tolist(),
        "memory_type": item.memory_type,
        "importance": item.importance,
        "confidence": 1.0 if item.memory_type == GOLDEN_RULE else INITIAL_CONFIDENCE,
        "tags": item.tags or [],
        "meta": item.metadata or {},
        "lifecycle": item.lifecycle or DEFAULT_LIFECYCLE.get(item.memory_type, "project"),
        "occurred_at": None if item.reference_time is None else item.reference_time.isoformat(),
    }


# The new rows, their mention edges and their `create` events in one statement. The rows come
# as one JSON document (an embedding as a JSON array reads as pgvector's text form); a row a
# concurrent writer stored first is skipped (ON CONFLICT), and so are its edges and event.
# Each row takes the statement's own clock, not the transaction's: memories stored in one
# batch keep the order they were given in (the neighbourhood channel reads it). A new row's
# updated_at is its created_at (the transaction's clock would put it before its creation).
_WRITE = text(
    f"""
    WITH written AS (
        INSERT INTO chunk (namespace, id, doc_type, content, content_hash, token_count,
                           embedding, memory_type, importance, confidence, tags, metadata,
                           lifecycle, occurred_at, created_at, updated_at)
        SELECT :namespace, r.id, 'memory', r.content, r.content_hash, r.token_count,
               CAST(r.embedding AS vector), r.memory_type, r.importance, r.confidence,
               r.tags, r.meta, r.lifecycle, r.occurred_at, r.at, r.at
        FROM (
            SELECT rows.*, clock_timestamp() AS at  -- once per row (volatile: not pulled up)
            FROM jsonb_to_recordset(CAST(:rows AS jsonb)) AS rows(
                id text, content text, content_hash text, token_count integer, embedding text,
                memory_type text, importance float8, confidence float8, tags text[],
                meta jsonb, lifecycle text, occurred_at timestamptz)
        ) AS r
        ON CONFLICT (namespace, content_hash) WHERE doc_type = 'memory' AND valid_to IS NULL
        DO NOTHING
        RETURNING id, content_hash, memory_type, confidence, importance
    ), edges AS (
        {mentions.EDGE_INSERT.format(join="JOIN written w ON w.id = m.chunk_id")}
    ), events AS (
        INSERT INTO event (namespace, event_type, operation, subject_kind, subject_id, payload)
        SELECT :namespace, 'create', 'memory_store', 'memory', w.id,
               jsonb_build_object('memory_type', w.memory_type, 'content_hash', w.content_hash)
        FROM written w
    )
    SELECT * FROM written
    """
)


def _store_namespace(
    session: Session,
    namespace: str,
    items: list[tuple[int, MemoryStoreIn, str]],
    vectors: Callable[[], Sequence[np.ndarray]],
    aliases: dict[str, str],
    found: dict[str, Any] | None = None,
    aged: set[str] | None = None,
) -> dict[int, MemoryStoreOut]:
    """Store one namespace's share of a batch; (position, item, digest) in order, and
    `vectors()[position]` is an item's embedding. Everything that needs no vector (the
    duplicate check, the token counts, the entities the new memories name) runs first: the
    embedding may still be on its way (embeddings.embed_beside). `aliases`: digests rows
    written before hold for these texts (ids.content_hashes). `found`: the live
    duplicates, read under the contents' turns already. `aged`: gets the ids of the
    duplicates that are not active (demoted, archived, rehydratable)."""
    digests = sorted({d for _, _, d in items})
    if found is None:
        found = _live_in_turn(session, namespace, digests, aliases)
    first: dict[str, tuple[int, MemoryStoreIn]] = {}
    for position, item, digest in items:
        if digest not in found:
            first.setdefault(digest, (position, item))
    written: dict[str, Any] = {}
    if first:
        tokens = count_tokens_batch([item.content for _, item in first.values()])
        new_ids = {d: ids.new_id(ids.MEMORY) for d in first}
        # Entities are upserted now; their edges wait for the rows (a memory that a writer
        # outside these locks stored meanwhile leaves its names behind as entities, no edges).
        edges = mentions.edge_params(
            mentions.resolve(
                session, namespace, [(new_ids[d], i.content) for d, (_, i) in first.items()]
            )
        )
        embedded = vectors()
        records = [
            _record(new_ids[digest], item, digest, n, embedded[position])
            for (digest, (position, item)), n in zip(first.items(), tokens, strict=True)
        ]
        params = {"namespace": namespace, "rows": json_text(records)}
        written = {r.content_hash: r for r in session.execute(_WRITE, {**params, **edges})}
        raced = [d for d in first if d not in written]  # a concurrent memory_store won
        found.update(_live(session, namespace, raced) if raced else {})
    out: dict[int, MemoryStoreOut] = {}
    seen: dict[str, MemoryStoreOut] = {}
    for position, item, digest in items:
        if digest in seen:  # a later copy within the batch: the first one's answer
            out[position] = seen[digest].model_copy(update={"duplicate": True, "warnings": []})
            continue
        if digest in written:
            stored = _out(written[digest], namespace, duplicate=False)
            stored.warnings = secretscan.warnings(item.content)
        else:
            stored = _out(found[digest], namespace, duplicate=True)
            if aged is not None and found[digest].stage != "active":
                aged.add(stored.id)
        seen[digest] = out[position] = stored
    return out


def store_many(
    session: Session,
    items: Sequence[MemoryStoreIn],
    vectors: Sequence[np.ndarray] | Callable[[], Sequence[np.ndarray]],
    aged: set[str] | None = None,
) -> list[MemoryStoreOut]:
    """Store memories in the caller's transaction (vectors[i] is items[i]'s embedding, or
    `vectors()` waits for them all); one result per item, in order, as memory_store would
    have answered. `aged` gets the ids of duplicates that are aged (memories.store revives
    them)."""
    by_namespace: dict[str, list[tuple[int, MemoryStoreIn, str]]] = {}
    aliases: dict[str, str] = {}  # a digest rows written before hold → the text's digest
    for i, item in enumerate(items):
        digest, *earlier = content_hashes(item.content)
        by_namespace.setdefault(item.namespace, []).append((i, item, digest))
        aliases.update(dict.fromkeys(earlier, digest))
    wait = vectors if callable(vectors) else (lambda: vectors)
    results: dict[int, MemoryStoreOut] = {}
    # Each namespace's write turn, then its rows, in sorted order: two batches that span the
    # same namespaces queue instead of deadlocking on their statistics.
    if len(by_namespace) == 1:  # memory_store: its turns and duplicate read in one trip
        [(namespace, batch)] = by_namespace.items()
        digests = sorted({d for _, _, d in batch})
        then = _in_turn(namespace, digests, aliases, namespaces.turn_key(namespace), alone(session))
        rows = namespaces.ensure(session, namespace, *then)
        found = None if rows is None else _by_digest(rows[1], aliases)
        results = _store_namespace(session, namespace, batch, wait, aliases, found, aged)
        return [results[i] for i in range(len(items))]
    for namespace in sorted(by_namespace):
        namespaces.ensure(session, namespace)
    for namespace in sorted(by_namespace):
        results.update(
            _store_namespace(session, namespace, by_namespace[namespace], wait, aliases, aged=aged)
        )
    return [results[i] for i in range(len(items))]
