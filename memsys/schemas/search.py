"""Search over documents and memories: plain, filtered, within a token budget."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field

from memsys.schemas.common import (
    FILLED,
    Input,
    MinRelevance,
    NamespaceName,
    NResults,
    Output,
    QueryText,
    TokenBudget,
)

Query = Annotated[QueryText, Field(description="Natural language search query")]


class Filters(Input):
    """Metadata filters (an unknown key must not widen the search)."""

    namespace: Annotated[NamespaceName | None, Field(description="Only this namespace")] = None
    doc_type: Annotated[
        Literal["memory", "document"] | None, Field(description="'memory' or 'document'")
    ] = None
    source_file: Annotated[
        Annotated[str, FILLED] | None, Field(description="Only chunks of this file")
    ] = None


class SearchBase(Input):
    query: Query
    n_results: NResults = 5
    min_relevance: MinRelevance = None


class SearchIn(SearchBase):
    namespace: Annotated[
        NamespaceName | None,
        Field(description="Only this namespace (default: every namespace)"),
    ] = None


class SearchWithFiltersIn(SearchBase):
    filters: Annotated[Filters, Field(description="Metadata filters to apply")]


class SearchWithBudgetIn(Input):
    query: Annotated[QueryText, Field(description="Search query")]
    max_tokens: Annotated[TokenBudget, Field(description="Maximum tokens in results")]
    filters: Annotated[Filters | None, Field(description="Metadata filters to apply")] = None
    min_relevance: MinRelevance = None


class SearchHit(Output):
    id: str
    content: str
    score: float
    similarity: float | None = None
    namespace: str
    doc_type: str
    tokens: int
    metadata: dict[str, Any]


class SearchOut(Output):
    results: list[SearchHit]
    total: int
    query: str
    total_tokens: int
    trace_id: str


class SearchBudgetOut(Output):
    results: list[SearchHit]
    query: str
    tokens_used: int
    budget_remaining: int
    truncated: bool
    truncated_count: int
    trace_id: str
