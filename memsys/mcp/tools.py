"""MCP tools, named and shaped as S001 gives them. Each: validate → service → envelope.

Constraints that S001 states (minimum, maximum, enum) are published in the JSON schema but
checked by memsys's own validators, so a bad value gets S001's error text in the envelope
rather than a generic validation dump. Every tool returns `{"success": true, "data": …}` or
`{"success": false, "error": "…"}`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field

from memsys import runner
from memsys.background import worker
from memsys.errors import MemsysError
from memsys.models.chunk import MEMORY_TYPES
from memsys.schemas import (
    MAX_RESULTS,
    ClearIndexIn,
    DeleteChunksIn,
    DeleteFileIn,
    IndexDirectoryIn,
    IndexFileIn,
    MemoryContextIn,
    MemoryCountIn,
    MemoryForgetIn,
    MemoryListIn,
    MemoryRecallIn,
    MemoryStoreIn,
    PreferenceGetIn,
    PreferenceKeyIn,
    PreferenceListIn,
    PreferenceSetIn,
    SearchIn,
    SearchWithBudgetIn,
    SearchWithFiltersIn,
)
from memsys.services import documents, memories, namespaces, preferences
from memsys.services import search as search_service

Envelope = dict[str, Any]


@dataclass(frozen=True)
class ToolSpec:
    fn: Callable[..., Envelope]
    read_only: bool
    destructive: bool
    idempotent: bool


TOOLS: list[ToolSpec] = []


def tool(
    *, read_only: bool = False, destructive: bool = False, idempotent: bool = False
) -> Callable[[Callable[..., Envelope]], Callable[..., Envelope]]:
    def register(fn: Callable[..., Envelope]) -> Callable[..., Envelope]:
        TOOLS.append(ToolSpec(fn, read_only, destructive, idempotent))
        return fn

    return register


def envelope(call: Callable[[], BaseModel]) -> Envelope:
    try:
        return {"success": True, "data": call().model_dump(mode="json")}
    except MemsysError as exc:
        return {"success": False, "error": exc.message}


def _run(service: Callable[..., Any], model: type[BaseModel], args: dict[str, Any]) -> Envelope:
    return envelope(lambda: runner.execute(service, model, args))


MIN_RELEVANCE = Field(
    description="Only results at least this relevant (0.0-1.0; relevance is absolute: "
    "unrelated hits score low)",
    json_schema_extra={"minimum": 0.0, "maximum": 1.0},
)
N_RESULTS = Field(
    description=f"Maximum number of results to return (1-{MAX_RESULTS})",
    json_schema_extra={"minimum": 1, "maximum": MAX_RESULTS},
)
NAMESPACE_FILTER = Field(description="Only this namespace (e.g. 'global', 'project:myapp')")
MEMORY_TYPE = Field(description="Type of memory", json_schema_extra={"enum": list(MEMORY_TYPES)})
MEMORY_TYPE_FILTER = Field(description="Only this memory type")


class Filters(BaseModel):
    model_config = ConfigDict(extra="forbid")  # an unknown key must not widen the search

    namespace: str | None = Field(default=None, description="Only this namespace")
    doc_type: str | None = Field(
        default=None,
        description="'memory' or 'document'",
        json_schema_extra={"enum": ["memory", "document"]},
    )
    source_file: str | None = Field(default=None, description="Only chunks of this file")


# ------------------------------------------------------------------ documents


@tool(idempotent=True)
def index_file(
    file_path: Annotated[str, Field(description="Absolute or relative path to the document")],
    namespace: Annotated[str, Field(description="Namespace for organizing documents")] = "default",
) -> Envelope:
    """Index one document (.md .markdown .txt .py .pdf) so search can find it. Re-indexing an
    unchanged file does nothing; a changed file replaces its chunks."""
    return _run(documents.index_file, IndexFileIn, locals())


@tool(idempotent=True)
def index_directory(
    dir_path: Annotated[str, Field(description="Directory path to scan for documents")],
    recursive: Annotated[bool, Field(description="Scan subdirectories recursively")] = True,
    namespace: Annotated[str, Field(description="Namespace for organizing documents")] = "default",
    async_mode: Annotated[
        bool,
        Field(
            description="Return at once and finish embeddings in the background "
            "(full-text search works immediately). False waits for every embedding."
        ),
    ] = True,
) -> Envelope:
    """Index every supported file under a folder. Unchanged files (same SHA-256) are skipped;
    files that fail are listed and skipped."""
    result = _run(documents.index_directory, IndexDirectoryIn, locals())
    if result["success"] and async_mode:
        worker().wake()
    return result


@tool(destructive=True)
def delete_chunks(
    ids: Annotated[list[str], Field(description="List of chunk IDs to delete")],
) -> Envelope:
    """Delete specific chunks by id (golden-rule memories are protected)."""
    return _run(documents.delete_chunks, DeleteChunksIn, locals())


@tool(destructive=True)
def delete_file(
    source_file: Annotated[str, Field(description="Source file path to delete chunks for")],
    namespace: Annotated[str | None, NAMESPACE_FILTER] = None,
) -> Envelope:
    """Delete all chunks indexed from one source file."""
    return _run(documents.delete_file, DeleteFileIn, locals())


@tool(destructive=True)
def clear_index(
    confirm: Annotated[bool, Field(description="Safety gate - must be true to proceed")],
    namespace: Annotated[str | None, Field(description="Only this namespace")] = None,
) -> Envelope:
    """Delete every indexed document (memories are kept). Requires confirm=true."""
    return _run(documents.clear_index, ClearIndexIn, locals())


@tool(read_only=True)
def get_index_stats() -> Envelope:
    """Collection statistics: chunks, source files, namespaces, memories, golden rules."""
    return envelope(lambda: runner.execute_bare(documents.stats))


# ------------------------------------------------------------------ search


@tool(read_only=True)
def search(
    query: Annotated[str, Field(description="Natural language search query")],
    n_results: Annotated[int, N_RESULTS] = 5,
    min_relevance: Annotated[float | None, MIN_RELEVANCE] = None,
) -> Envelope:
    """Search indexed documents and memories (semantic + keyword, fused)."""
    return _run(search_service.search, SearchIn, locals())


@tool(read_only=True)
def search_with_filters(
    query: Annotated[str, Field(description="Natural language search query")],
    filters: Annotated[Filters, Field(description="Metadata filters to apply")],
    n_results: Annotated[int, N_RESULTS] = 5,
    min_relevance: Annotated[float | None, MIN_RELEVANCE] = None,
) -> Envelope:
    """Search within a namespace, a doc_type ('memory' or 'document') or one source file."""
    args = {**locals(), "filters": filters.model_dump(exclude_none=True)}
    return _run(search_service.search_with_filters, SearchWithFiltersIn, args)


@tool(read_only=True)
def search_with_budget(
    query: Annotated[str, Field(description="Search query")],
    max_tokens: Annotated[int, Field(description="Maximum tokens in results")],
    min_relevance: Annotated[float | None, MIN_RELEVANCE] = None,
) -> Envelope:
    """The best results that fit in a token budget; the budget is never exceeded."""
    return _run(search_service.search_with_budget, SearchWithBudgetIn, locals())


# ------------------------------------------------------------------ memories


@tool()
def memory_store(
    content: Annotated[str, Field(description="The memory content text")],
    memory_type: Annotated[str, MEMORY_TYPE] = "session",
    namespace: Annotated[
        str, Field(description="Scope of the memory: 'global', 'default' or 'project:{name}'")
    ] = "global",
    importance: Annotated[float, Field(description="Importance score 0.0-1.0")] = 0.5,
    metadata: Annotated[
        dict[str, Any] | None, Field(description="Optional additional metadata")
    ] = None,
    tags: Annotated[list[str] | None, Field(description="Optional tags")] = None,
) -> Envelope:
    """Store something worth remembering: a preference, decision, pattern, fact, fix, ...
    Identical content in the same namespace returns the existing id with duplicate=true."""
    return _run(memories.store, MemoryStoreIn, locals())


@tool(read_only=True)
def memory_recall(
    query: Annotated[str, Field(description="Search query text")],
    n_results: Annotated[int, N_RESULTS] = 5,
    namespace: Annotated[str | None, NAMESPACE_FILTER] = None,
    memory_type: Annotated[str | None, MEMORY_TYPE_FILTER] = None,
    min_importance: Annotated[float | None, Field(description="Minimum importance")] = None,
    min_confidence: Annotated[float | None, Field(description="Minimum confidence")] = None,
    min_relevance: Annotated[float | None, MIN_RELEVANCE] = None,
) -> Envelope:
    """Recall the memories most relevant to a query. Use before acting on a task."""
    return _run(memories.recall, MemoryRecallIn, locals())


@tool(destructive=True)
def memory_forget(
    memory_id: Annotated[str | None, Field(description="Specific memory ID to delete")] = None,
    query: Annotated[
        str | None, Field(description="Search query to find memories to delete")
    ] = None,
    input_value: Annotated[
        str | None, Field(description="Smart parameter - auto-detects if ID or query")
    ] = None,
    namespace: Annotated[
        str | None, Field(description="Filter deletion to specific namespace")
    ] = None,
    n_results: Annotated[
        int, Field(description="Number of search results to delete in query mode")
    ] = 5,
    force: Annotated[bool, Field(description="If true, allow deletion of golden rules")] = False,
    purge: Annotated[
        bool, Field(description="Erase the memory and its history instead of closing it")
    ] = False,
    min_similarity: Annotated[
        float, Field(description="Query mode: forget only matches at least this similar")
    ] = 0.5,
) -> Envelope:
    """Forget memories by id or by query. Golden rules are kept unless force=true."""
    return _run(memories.forget, MemoryForgetIn, locals())


@tool(read_only=True)
def memory_context(
    query: Annotated[
        str | None, Field(description="Optional search query to filter relevant memories")
    ] = None,
    namespace: Annotated[str | None, Field(description="Project namespace")] = None,
    token_budget: Annotated[int, Field(description="Maximum tokens for context")] = 4000,
) -> Envelope:
    """Markdown of the memories to inject into a prompt, golden rules first, within budget."""
    return _run(memories.context, MemoryContextIn, locals())


@tool(read_only=True)
def memory_count(
    namespace: Annotated[str | None, NAMESPACE_FILTER] = None,
    memory_type: Annotated[str | None, MEMORY_TYPE_FILTER] = None,
) -> Envelope:
    """Count memories, optionally by namespace and type."""
    return _run(memories.count, MemoryCountIn, locals())


@tool(read_only=True)
def memory_list(
    namespace: Annotated[str | None, NAMESPACE_FILTER] = None,
    memory_type: Annotated[str | None, MEMORY_TYPE_FILTER] = None,
    limit: Annotated[
        int, Field(description="Maximum number of results (default: 100, max: 1000)")
    ] = 100,
    offset: Annotated[int, Field(description="Number of results to skip for pagination")] = 0,
    order_by: Annotated[str, Field(description="Field to sort by")] = "created_at",
    descending: Annotated[bool, Field(description="Sort in descending order")] = True,
) -> Envelope:
    """List memories page by page."""
    return _run(memories.list_memories, MemoryListIn, locals())


@tool(read_only=True)
def memory_list_namespaces() -> Envelope:
    """Every namespace with its memory, chunk, document and preference counts."""
    return envelope(lambda: runner.execute_bare(namespaces.list_with_counts))


# ------------------------------------------------------------------ preferences


@tool(idempotent=True)
def preference_set(
    key: Annotated[str, Field(description="Preference key, e.g. 'coding_style'")],
    value: Annotated[Any, Field(description="Any JSON value")],
    namespace: Annotated[str, Field(description="Namespace")] = "global",
    lifecycle: Annotated[
        str,
        Field(
            description="personal | project | session",
            json_schema_extra={"enum": ["personal", "project", "session"]},
        ),
    ] = "personal",
) -> Envelope:
    """Set a user or project preference; every change is kept as a new version."""
    return _run(preferences.set_value, PreferenceSetIn, locals())


@tool(read_only=True)
def preference_get(
    key: Annotated[str, Field(description="Preference key")],
    namespace: Annotated[str, Field(description="Namespace")] = "global",
    as_of: Annotated[
        datetime | None, Field(description="ISO 8601 time: the value as it was then")
    ] = None,
) -> Envelope:
    """Read a preference now, or as it was at a past time."""
    return _run(preferences.get, PreferenceGetIn, locals())


@tool(read_only=True)
def preference_list(
    namespace: Annotated[str, Field(description="Namespace")] = "global",
    lifecycle: Annotated[str | None, Field(description="personal | project | session")] = None,
    as_of: Annotated[datetime | None, Field(description="ISO 8601 time")] = None,
) -> Envelope:
    """All preferences of a namespace, now or as of a past time."""
    return _run(preferences.list_values, PreferenceListIn, locals())


@tool(read_only=True)
def preference_history(
    key: Annotated[str, Field(description="Preference key")],
    namespace: Annotated[str, Field(description="Namespace")] = "global",
) -> Envelope:
    """Every version a preference has had, oldest first."""
    return _run(preferences.history, PreferenceKeyIn, locals())
