"""Search over documents and memories."""

from fastapi import APIRouter

from memsys import runner
from memsys.schemas import (
    SearchBudgetOut,
    SearchIn,
    SearchOut,
    SearchWithBudgetIn,
    SearchWithFiltersIn,
)
from memsys.services import search

router = APIRouter(prefix="/search", tags=["search"])


@router.post("", response_model=SearchOut)
def search_all(body: SearchIn) -> SearchOut:
    """Hybrid search across every namespace (MCP: search)."""
    return runner.run(search.search, body)


@router.post("/filtered", response_model=SearchOut)
def search_with_filters(body: SearchWithFiltersIn) -> SearchOut:
    """Search by namespace, doc_type or source_file (MCP: search_with_filters)."""
    return runner.run(search.search_with_filters, body)


@router.post("/budget", response_model=SearchBudgetOut)
def search_with_budget(body: SearchWithBudgetIn) -> SearchBudgetOut:
    """The best results within max_tokens (MCP: search_with_budget)."""
    return runner.run(search.search_with_budget, body)
