"""Hybrid retrieval: pgvector kNN and PostgreSQL full text, fused by reciprocal rank fusion.

Both channels rank a bounded candidate pool inside one SQL statement, with every filter pushed
into both. The fused score is normalised to [0, 1]: 1.0 means first in every channel that
returned anything. The lexical channel ORs the query's terms (plainto_tsquery ANDs them, and
an AND of a natural-language question rarely matches anything).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import numpy as np
from pgvector.sqlalchemy import Vector
from sqlalchemy import bindparam, text
from sqlalchemy.orm import Session

from memsys.config import get_settings
from memsys.embeddings import DIMENSIONS
from memsys.embeddings import embed_query as cached_query_embedding
from memsys.models.log import ALL_NAMESPACES
from memsys.schemas import (
    SearchBudgetOut,
    SearchHit,
    SearchIn,
    SearchOut,
    SearchWithBudgetIn,
    SearchWithFiltersIn,
)
from memsys.services import events, namespaces

BUDGET_CANDIDATES = 50  # S001: search_with_budget considers up to 50 candidates

# Each filter is a fixed SQL fragment with a named bind; only the ones given are used.
_FILTER_SQL = {
    "namespace": "c.namespace = :f_namespace",
    "doc_type": "c.doc_type = :f_doc_type",
    "source_file": "c.source_file = :f_source_file",
    "memory_type": "c.memory_type = :f_memory_type",
    "min_importance": "c.importance >= :f_min_importance",
    "min_confidence": "c.confidence >= :f_min_confidence",
}

_HYBRID = """
WITH vec AS (
    SELECT c.namespace, c.id, c.embedding <=> :embedding AS distance
    FROM chunk c
    WHERE c.valid_to IS NULL AND c.embedding IS NOT NULL {filters}
    ORDER BY c.embedding <=> :embedding
    LIMIT :pool
), vec_ranked AS (
    SELECT namespace, id, row_number() OVER (ORDER BY distance) AS rank FROM vec
), lexical AS (
    SELECT c.namespace, c.id, ts_rank_cd(c.tsv, q.tsq) AS weight
    FROM chunk c,
         (SELECT replace(plainto_tsquery('english', :query)::text, '&', '|')::tsquery AS tsq) q
    WHERE c.tsv @@ q.tsq AND c.valid_to IS NULL {filters}
    ORDER BY weight DESC
    LIMIT :pool
), lex_ranked AS (
    SELECT namespace, id, row_number() OVER (ORDER BY weight DESC) AS rank FROM lexical
), fused AS (
    SELECT coalesce(v.namespace, l.namespace) AS namespace, coalesce(v.id, l.id) AS id,
           v.rank AS vec_rank, l.rank AS fts_rank,
           coalesce(1.0 / (:rrf_k + v.rank), 0) + coalesce(1.0 / (:rrf_k + l.rank), 0) AS rrf
    FROM vec_ranked v FULL OUTER JOIN lex_ranked l ON v.namespace = l.namespace AND v.id = l.id
)
SELECT f.vec_rank, f.fts_rank, f.rrf,
       (SELECT count(*) FROM vec_ranked) AS vec_count,
       (SELECT count(*) FROM lex_ranked) AS fts_count,
       CASE WHEN c.embedding IS NULL THEN NULL
            ELSE 1 - (c.embedding <=> :embedding) END AS similarity,
       c.namespace, c.id, c.doc_type, c.content, c.token_count, c.memory_type, c.importance,
       c.confidence, c.tags, c.metadata, c.source_file, c.chunk_index, c.header_path,
       c.created_at
FROM fused f JOIN chunk c ON c.namespace = f.namespace AND c.id = f.id
ORDER BY f.rrf DESC, similarity DESC NULLS LAST, c.id
LIMIT :limit
"""

_TOUCH = text(
    """
    UPDATE chunk SET access_count = access_count + 1, last_accessed_at = now()
    WHERE doc_type = 'memory' AND valid_to IS NULL AND id = ANY(:ids)
    """
)


@dataclass
class Hit:
    namespace: str
    id: str
    doc_type: str
    content: str
    token_count: int
    score: float
    similarity: float | None
    vec_rank: int | None
    fts_rank: int | None
    memory_type: str | None
    importance: float
    confidence: float
    tags: list[str]
    metadata: dict[str, Any]
    source_file: str | None
    chunk_index: int | None
    header_path: str | None
    created_at: datetime

    def trace_row(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "namespace": self.namespace,
            "score": round(self.score, 6),
            "similarity": None if self.similarity is None else round(self.similarity, 6),
            "vec_rank": self.vec_rank,
            "fts_rank": self.fts_rank,
            "tokens": self.token_count,
        }


@dataclass
class Retrieval:
    hits: list[Hit]
    vec_count: int
    fts_count: int
    timings: dict[str, float] = field(default_factory=dict)

    def candidates(self) -> list[dict[str, Any]]:
        return [h.trace_row() for h in self.hits]


def _statement(filters: dict[str, Any]):  # type: ignore[no-untyped-def]
    clauses = "".join(f" AND {_FILTER_SQL[name]}" for name in sorted(filters))
    return text(_HYBRID.format(filters=clauses)).bindparams(
        bindparam("embedding", type_=Vector(DIMENSIONS))
    )


def embed_query(query: str) -> np.ndarray:
    return cached_query_embedding(query)


def hybrid(
    session: Session,
    query: str,
    *,
    filters: dict[str, Any] | None = None,
    limit: int,
    pool: int | None = None,
    count_access: bool = True,
) -> Retrieval:
    """Top `limit` chunks for `query` under `filters` (keys of _FILTER_SQL, None values ignored)."""
    settings = get_settings()
    active = {k: v for k, v in (filters or {}).items() if v is not None}
    unknown = set(active) - set(_FILTER_SQL)
    if unknown:
        raise ValueError(f"unknown filters: {sorted(unknown)}")
    t0 = time.perf_counter()
    vector = embed_query(query)
    t1 = time.perf_counter()
    params: dict[str, Any] = {f"f_{k}": v for k, v in active.items()}
    params.update(
        embedding=vector,
        query=query,
        pool=max(pool or settings.candidate_pool, limit),
        rrf_k=settings.rrf_k,
        limit=limit,
    )
    rows = session.execute(_statement(active), params).mappings().all()
    t2 = time.perf_counter()

    vec_count = int(rows[0]["vec_count"]) if rows else 0
    fts_count = int(rows[0]["fts_count"]) if rows else 0
    best = sum(1.0 / (settings.rrf_k + 1) for n in (vec_count, fts_count) if n)
    hits = [
        Hit(
            namespace=r["namespace"],
            id=r["id"],
            doc_type=r["doc_type"],
            content=r["content"],
            token_count=r["token_count"],
            score=min(1.0, float(r["rrf"]) / best) if best else 0.0,
            similarity=None if r["similarity"] is None else max(0.0, float(r["similarity"])),
            vec_rank=r["vec_rank"],
            fts_rank=r["fts_rank"],
            memory_type=r["memory_type"],
            importance=r["importance"],
            confidence=r["confidence"],
            tags=list(r["tags"] or []),
            metadata=dict(r["metadata"] or {}),
            source_file=r["source_file"],
            chunk_index=r["chunk_index"],
            header_path=r["header_path"],
            created_at=r["created_at"],
        )
        for r in rows
    ]
    if count_access:
        touch(session, [h.id for h in hits if h.doc_type == "memory"])
    timings = {
        "embed_ms": round((t1 - t0) * 1000, 3),
        "sql_ms": round((t2 - t1) * 1000, 3),
    }
    return Retrieval(hits=hits, vec_count=vec_count, fts_count=fts_count, timings=timings)


def touch(session: Session, memory_ids: list[str]) -> None:
    """Count one access for each memory handed to a caller (feeds decay and hot/cold)."""
    if memory_ids:
        session.execute(_TOUCH, {"ids": memory_ids})


def _document_hit(h: Hit) -> SearchHit:
    if h.doc_type == "document":
        metadata: dict[str, Any] = {
            "source_file": h.source_file,
            "chunk_index": h.chunk_index,
            "header_path": h.header_path,
            **h.metadata,
        }
    else:
        metadata = {
            "memory_type": h.memory_type,
            "importance": h.importance,
            "confidence": h.confidence,
            "tags": h.tags,
            **h.metadata,
        }
    return SearchHit(
        id=h.id,
        content=h.content,
        score=round(h.score, 4),
        similarity=None if h.similarity is None else round(h.similarity, 4),
        namespace=h.namespace,
        doc_type=h.doc_type,
        tokens=h.token_count,
        metadata=metadata,
    )


def _traced(
    session: Session,
    operation: str,
    query: str,
    filters: dict[str, Any],
    found: Retrieval,
    returned: list[SearchHit],
    started: float,
    output: dict[str, Any] | None = None,
) -> str:
    timings = {**found.timings, "total_ms": round((time.perf_counter() - started) * 1000, 3)}
    return events.trace_query(
        session,
        namespace=filters.get("namespace") or ALL_NAMESPACES,
        operation=operation,
        query=query,
        filters=filters,
        stores=["vector", "fulltext"],
        routing="hybrid: pgvector kNN + full text, reciprocal rank fusion",
        candidates=found.candidates(),
        retrieved=[{"id": r.id, "score": r.score, "tokens": r.tokens} for r in returned],
        timings=timings,
        output=output,
    )


def _run(
    session: Session, operation: str, query: str, filters: dict[str, Any], n: int
) -> SearchOut:
    started = time.perf_counter()
    namespaces.require(session, filters.get("namespace"))
    found = hybrid(session, query, filters=filters, limit=n)
    results = [_document_hit(h) for h in found.hits]
    trace_id = _traced(session, operation, query, filters, found, results, started)
    return SearchOut(
        results=results,
        total=len(results),
        query=query,
        total_tokens=sum(r.tokens for r in results),
        trace_id=trace_id,
    )


def search(session: Session, params: SearchIn) -> SearchOut:
    """Search every namespace, documents and memories alike."""
    return _run(session, "search", params.query, {}, params.n_results)


def search_with_filters(session: Session, params: SearchWithFiltersIn) -> SearchOut:
    filters = params.filters.model_dump(exclude_none=True)
    return _run(session, "search_with_filters", params.query, filters, params.n_results)


def search_with_budget(session: Session, params: SearchWithBudgetIn) -> SearchBudgetOut:
    """The best results whose content fits in max_tokens, highest score first.

    A result too large for what is left is skipped (a smaller, lower-ranked one may still
    fit); `truncated_count` says how many candidates were left out.
    """
    started = time.perf_counter()
    filters = params.filters.model_dump(exclude_none=True) if params.filters else {}
    namespaces.require(session, filters.get("namespace"))
    found = hybrid(session, params.query, filters=filters, limit=BUDGET_CANDIDATES)
    chosen: list[SearchHit] = []
    used = 0
    for hit in found.hits:
        if used + hit.token_count <= params.max_tokens:
            chosen.append(_document_hit(hit))
            used += hit.token_count
    left_out = len(found.hits) - len(chosen)
    trace_id = _traced(
        session,
        "search_with_budget",
        params.query,
        filters,
        found,
        chosen,
        started,
        output={"max_tokens": params.max_tokens, "tokens_used": used},
    )
    return SearchBudgetOut(
        results=chosen,
        query=params.query,
        tokens_used=used,
        budget_remaining=params.max_tokens - used,
        truncated=left_out > 0,
        truncated_count=left_out,
        trace_id=trace_id,
    )
