"""The search tools (S001 search, search_with_filters, search_with_budget) on the retrieval
pipeline (memsys/retrieval/): dense and BM25 channels, score-aware fusion. A hit's `score` is
an absolute relevance in [0, 1] (memsys.retrieval.fusion.relevance); results are ordered by
the fused score.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy.orm import Session

from memsys import deferred, ids
from memsys.config import get_settings
from memsys.db import transaction_time
from memsys.embeddings import prefetch_query
from memsys.retrieval import pipeline
from memsys.runner import before_transaction, retrieval_only
from memsys.schemas import (
    SearchBudgetOut,
    SearchHit,
    SearchIn,
    SearchOut,
    SearchWithBudgetIn,
    SearchWithFiltersIn,
)
from memsys.services import access, documents, lifecycle, namespaces, tracing

BUDGET_CANDIDATES = 50  # S001: search_with_budget considers up to 50 candidates

ROUTING = tracing.ROUTING
Hit = pipeline.Hit
Retrieval = pipeline.Retrieval


def embed_query_of(params: Any) -> None:
    """Before the transaction: start embedding the call's query into the query cache, where
    the retrieval pipeline finds it once its text-only statements have run (a call without
    a query embeds nothing)."""
    query = getattr(params, "query", None) or getattr(params, "input_value", None)
    if query and not ids.looks_like_memory_id(query):
        prefetch_query(query)


def hybrid(
    session: Session,
    query: str,
    *,
    filters: dict[str, Any] | None = None,
    limit: int,
    pool: int | None = None,
    count_access: bool = True,
    as_of: datetime | None = None,
) -> Retrieval:
    """Top `limit` chunks for `query` under `filters`, through the retrieval pipeline; with
    `as_of`, among the rows valid then (a view of the past rekindles nothing)."""
    how = tracing.replay_settings()
    if how is None:
        pool = max(pool or get_settings().candidate_pool, limit)
        found = pipeline.retrieve(
            session, query, filters=filters, limit=limit, pool=pool, as_of=as_of
        )
    else:  # a replay: the data as of then, the weights and pool the trace recorded
        pool = how.pool or max(pool or get_settings().candidate_pool, limit)
        found = pipeline.retrieve(
            session,
            query,
            filters=filters,
            limit=limit,
            pool=pool,
            as_of=how.as_of,
            vector=how.vector,
            weights=how.weights,
            method=how.method,
            terms=how.terms,
        )
    tracing.saw(found, {"filters": filters or {}, "limit": limit, "pool": pool})
    if count_access:
        touch(session, [h.id for h in found.hits if h.doc_type == "memory"])
        if as_of is None:
            lifecycle.rekindle_hits(session, found.hits)  # archived hits come back in full
    return found


def relevant(found: Retrieval, min_relevance: float | None) -> list[Hit]:
    """The hits whose own relevance reaches the caller's cut-off (all of them without one),
    in order, their shown scores capped again among the hits kept: a strong match ranked
    below a weaker one is not cut for the weaker one's score."""
    if min_relevance is None:
        return found.hits
    kept = [h for h in found.hits if h.own >= min_relevance]
    seated = found.fusion.get("seated")
    pipeline.never_rising(kept, seated["id"] if seated else None)
    return kept


def touch(session: Session, memory_ids: list[str]) -> None:
    """Count one access for each memory handed to a caller (feeds decay and hot/cold):
    after the call answers, at its transaction's time (memsys.deferred), or here outside
    the runner."""
    if memory_ids and deferred.active():
        at = transaction_time(session)
        deferred.defer(lambda into: access.record(into, memory_ids, at))
    else:
        access.record(session, memory_ids)


def _document_hit(h: Hit) -> SearchHit:
    if h.doc_type == "document":
        metadata: dict[str, Any] = {
            "source_file": h.source_file,
            "chunk_index": h.chunk_index,
            "header_path": h.header_path,
            **h.metadata,
        }
        if h.also_in:  # the same text in other indexed files, listed once (dedup)
            metadata["also_in"] = h.also_in
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


def _retrieved(returned: list[SearchHit]) -> list[dict[str, Any]]:
    return [{"id": r.id, "score": r.score, "tokens": r.tokens} for r in returned]


def _run(
    session: Session,
    params: SearchIn | SearchWithFiltersIn,
    operation: str,
    filters: dict[str, Any],
) -> SearchOut:
    query, n, min_relevance = params.query, params.n_results, params.min_relevance
    ns = filters.get("namespace")
    with tracing.traced(operation, query, namespace=ns, filters=filters, params=params) as t:
        namespaces.require(session, filters.get("namespace"))
        found = hybrid(session, query, filters=filters, limit=n)
        results = [_document_hit(h) for h in relevant(found, min_relevance)]
        trace_id = tracing.write(session, t, retrieved=_retrieved(results))
    return SearchOut(
        results=results,
        total=len(results),
        query=query,
        total_tokens=sum(r.tokens for r in results),
        trace_id=trace_id,
    )


@retrieval_only
@before_transaction(embed_query_of)
def search(session: Session, params: SearchIn) -> SearchOut:
    """Search documents and memories alike, in every namespace or in one."""
    filters = {"namespace": params.namespace} if params.namespace else {}
    return _run(session, params, "search", filters)


@retrieval_only
@before_transaction(embed_query_of)
def search_with_filters(session: Session, params: SearchWithFiltersIn) -> SearchOut:
    filters = indexed_file(params.filters.model_dump(exclude_none=True))
    return _run(session, params, "search_with_filters", filters)


def indexed_file(filters: dict[str, Any]) -> dict[str, Any]:
    """Filters whose `source_file` names a file as indexing stored it and delete_file reads
    it: a relative or ~ path, or one through a linked folder, is the resolved absolute path
    (a relative one matched nothing); a linked file is its own path (documents.source_path)."""
    given = filters.get("source_file")
    if given is None:
        return filters
    return {**filters, "source_file": str(documents.source_path(given))}


@retrieval_only
@before_transaction(embed_query_of)
def search_with_budget(session: Session, params: SearchWithBudgetIn) -> SearchBudgetOut:
    """The best results whose content fits in max_tokens, in ranked order.

    A result too large for what is left is skipped (a smaller, lower-ranked one may still
    fit); `truncated_count` says how many candidates were left out.
    """
    filters = indexed_file(params.filters.model_dump(exclude_none=True) if params.filters else {})
    ns = filters.get("namespace")
    with tracing.traced(
        "search_with_budget", params.query, namespace=ns, filters=filters, params=params
    ) as t:
        namespaces.require(session, ns)
        found = hybrid(session, params.query, filters=filters, limit=BUDGET_CANDIDATES)
        chosen: list[SearchHit] = []
        used = 0
        kept = relevant(found, params.min_relevance)
        for hit in kept:
            if used + hit.token_count <= params.max_tokens:
                chosen.append(_document_hit(hit))
                used += hit.token_count
        left_out = len(kept) - len(chosen)  # what the budget cut (not min_relevance)
        trace_id = tracing.write(
            session,
            t,
            retrieved=_retrieved(chosen),
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
