"""Pydantic inputs and outputs shared by every front end (REST models, MCP results, CLI --json).

Validation lives here once: the messages are the ones S001 gives where it gives one, and each
says what to do instead. `parse()` turns a pydantic failure into `InvalidInput`.
"""

from __future__ import annotations

import json
import re
from datetime import datetime
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError, field_validator

from memsys import ids
from memsys.config import get_settings
from memsys.errors import InvalidInput
from memsys.models.base import LIFECYCLES
from memsys.models.chunk import MEMORY_TYPES

NAMESPACE_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:/@-]{0,127}$")
MAX_RESULTS = 50
MAX_TAGS = 50
MAX_METADATA_BYTES = 65_536  # a memory's metadata as JSON
MAX_TOKENS_LIMIT = 200_000
LIST_ORDER_FIELDS = ("created_at", "updated_at", "importance", "confidence", "access_count")

M = TypeVar("M", bound=BaseModel)


def parse(model: type[M], data: dict[str, Any]) -> M:
    """Validate `data` as `model`; on failure raise InvalidInput with a one-line reason."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise InvalidInput(describe_validation_error(exc)) from None


def describe_validation_error(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors():
        ctx_error = (err.get("ctx") or {}).get("error")
        if err["type"] == "value_error" and ctx_error is not None:
            parts.append(str(ctx_error))
            continue
        where = ".".join(str(p) for p in err["loc"]) or "input"
        parts.append(f"{where}: {err['msg']}")
    return "; ".join(parts)


def check_namespace(value: str | None) -> str | None:
    if value is None:
        return None
    value = value.strip()
    if not NAMESPACE_PATTERN.match(value):
        raise ValueError(
            f"Invalid namespace: {value!r}. Use 1-128 characters: letters, digits and _ . : / @ -"
            " (e.g. 'global', 'default', 'project:myapp')"
        )
    return value


def check_query(value: str) -> str:
    value = value.strip()
    if not value:
        raise ValueError("Query cannot be empty")
    limit = get_settings().max_query_chars
    if len(value) > limit:
        raise ValueError(f"Query is too long: {len(value)} characters (limit {limit})")
    return value


def check_path(what: str, value: str) -> str:
    """A file or directory path: an empty one would silently mean the server's working dir."""
    if not value.strip():
        raise ValueError(f"{what} path cannot be empty")
    return value


def check_memory_type(value: str | None) -> str | None:
    if value is None:
        return None
    if value not in MEMORY_TYPES:
        raise ValueError(f"Invalid memory type: {value}. Use one of: {', '.join(MEMORY_TYPES)}")
    return value


def check_unit(name: str, value: float | None) -> float | None:
    if value is not None and not 0.0 <= value <= 1.0:
        raise ValueError(f"{name} must be between 0.0 and 1.0, got {value}")
    return value


def check_n_results(value: int) -> int:
    if not 1 <= value <= MAX_RESULTS:
        raise ValueError(f"n_results must be between 1 and {MAX_RESULTS}, got {value}")
    return value


class Input(BaseModel):
    model_config = ConfigDict(extra="forbid", str_strip_whitespace=False)


class Output(BaseModel):
    model_config = ConfigDict(from_attributes=True)


# ---------------------------------------------------------------- memories


class MemoryStoreIn(Input):
    content: str
    memory_type: str = "session"
    namespace: str = "global"
    importance: float = 0.5
    metadata: dict[str, Any] | None = None
    tags: list[str] | None = None
    lifecycle: Literal["personal", "project", "session"] | None = None

    @field_validator("content")
    @classmethod
    def _content(cls, v: str) -> str:
        v = v.strip()
        if not v:
            raise ValueError("Content cannot be empty")
        limit = get_settings().max_content_chars
        if len(v) > limit:
            raise ValueError(
                f"Content is too long: {len(v)} characters (limit {limit}, "
                "MEMSYS_MAX_CONTENT_CHARS). Split it or index it as a document."
            )
        return v

    _memory_type = field_validator("memory_type")(classmethod(lambda c, v: check_memory_type(v)))
    _namespace = field_validator("namespace")(classmethod(lambda c, v: check_namespace(v)))
    _importance = field_validator("importance")(
        classmethod(lambda c, v: check_unit("importance", v))
    )

    @field_validator("tags")
    @classmethod
    def _tags(cls, v: list[str] | None) -> list[str] | None:
        if v is None:
            return None
        cleaned = sorted({t.strip() for t in v if t.strip()})
        if any(len(t) > 64 for t in cleaned):
            raise ValueError("Tags must be at most 64 characters each")
        if len(cleaned) > MAX_TAGS:
            raise ValueError(f"Too many tags: {len(cleaned)} (limit {MAX_TAGS})")
        return cleaned

    @field_validator("metadata")
    @classmethod
    def _metadata(cls, v: dict[str, Any] | None) -> dict[str, Any] | None:
        if v is None:
            return None
        size = len(json.dumps(v, default=str).encode())
        if size > MAX_METADATA_BYTES:
            raise ValueError(
                f"Metadata is too large: {size} bytes as JSON (limit {MAX_METADATA_BYTES}). "
                "Keep large text in content or index it as a document."
            )
        return v


class MemoryStoreOut(Output):
    id: str
    content_hash: str
    namespace: str
    memory_type: str
    duplicate: bool
    confidence: float
    importance: float


class RecallFilters(Input):
    namespace: str | None = None
    memory_type: str | None = None
    min_importance: float | None = None
    min_confidence: float | None = None

    _namespace = field_validator("namespace")(classmethod(lambda c, v: check_namespace(v)))
    _memory_type = field_validator("memory_type")(classmethod(lambda c, v: check_memory_type(v)))
    _min_importance = field_validator("min_importance")(
        classmethod(lambda c, v: check_unit("min_importance", v))
    )
    _min_confidence = field_validator("min_confidence")(
        classmethod(lambda c, v: check_unit("min_confidence", v))
    )


class MemoryRecallIn(RecallFilters):
    query: str
    n_results: int = 5
    min_relevance: float | None = None

    _min_relevance = field_validator("min_relevance")(
        classmethod(lambda c, v: check_unit("min_relevance", v))
    )

    _query = field_validator("query")(classmethod(lambda c, v: check_query(v)))
    _n = field_validator("n_results")(classmethod(lambda c, v: check_n_results(v)))


class MemoryHit(Output):
    id: str
    content: str
    memory_type: str
    namespace: str
    confidence: float
    importance: float
    score: float
    similarity: float | None = None
    tags: list[str] = []
    metadata: dict[str, Any] = {}
    created_at: datetime


class MemoryRecallOut(Output):
    memories: list[MemoryHit]
    total: int
    query: str
    filters: dict[str, Any]
    trace_id: str


class MemoryForgetIn(Input):
    memory_id: str | None = None
    query: str | None = None
    input_value: str | None = None
    namespace: str | None = None
    n_results: int = 5
    force: bool = False
    purge: bool = False
    # Query mode forgets only close matches: S001's "top n_results" alone would delete
    # unrelated memories whenever fewer than n_results are relevant.
    min_similarity: float = 0.5

    _namespace = field_validator("namespace")(classmethod(lambda c, v: check_namespace(v)))
    _n = field_validator("n_results")(classmethod(lambda c, v: check_n_results(v)))
    _min_similarity = field_validator("min_similarity")(
        classmethod(lambda c, v: check_unit("min_similarity", v))
    )

    @field_validator("query")
    @classmethod
    def _query(cls, v: str | None) -> str | None:
        return None if v is None else check_query(v)

    @field_validator("input_value")
    @classmethod
    def _input_value(cls, v: str | None) -> str | None:
        """An id is kept as is; anything else is a query and gets the query's checks."""
        if v is None:
            return None
        return v.strip() if ids.looks_like_memory_id(v) else check_query(v)


class MemoryForgetOut(Output):
    deleted_ids: list[str]
    deleted_count: int
    protected_ids: list[str]
    purged: bool


class MemoryContextIn(Input):
    query: str | None = None
    namespace: str | None = None
    token_budget: int = 4000

    _namespace = field_validator("namespace")(classmethod(lambda c, v: check_namespace(v)))

    @field_validator("query")
    @classmethod
    def _query(cls, v: str | None) -> str | None:
        return None if v is None else check_query(v)

    @field_validator("token_budget")
    @classmethod
    def _budget(cls, v: int) -> int:
        if not 1 <= v <= MAX_TOKENS_LIMIT:
            raise ValueError(f"token_budget must be between 1 and {MAX_TOKENS_LIMIT}, got {v}")
        return v


class MemoryContextOut(Output):
    context: str
    token_estimate: int
    memory_count: int
    golden_rule_count: int
    memory_ids: list[str]
    trace_id: str


class MemoryCountIn(Input):
    namespace: str | None = None
    memory_type: str | None = None

    _namespace = field_validator("namespace")(classmethod(lambda c, v: check_namespace(v)))
    _memory_type = field_validator("memory_type")(classmethod(lambda c, v: check_memory_type(v)))


class MemoryCountOut(Output):
    count: int
    filters: dict[str, Any]


class MemoryListIn(MemoryCountIn):
    limit: int = 100
    offset: int = 0
    order_by: str = "created_at"
    descending: bool = True

    @field_validator("limit")
    @classmethod
    def _limit(cls, v: int) -> int:
        if not 1 <= v <= 1000:
            raise ValueError(f"limit must be between 1 and 1000, got {v}")
        return v

    @field_validator("offset")
    @classmethod
    def _offset(cls, v: int) -> int:
        if v < 0:
            raise ValueError(f"offset must be 0 or more, got {v}")
        return v

    @field_validator("order_by")
    @classmethod
    def _order(cls, v: str) -> str:
        if v not in LIST_ORDER_FIELDS:
            raise ValueError(f"Invalid order_by: {v}. Use one of: {', '.join(LIST_ORDER_FIELDS)}")
        return v


class MemoryItem(Output):
    id: str
    content: str
    memory_type: str
    namespace: str
    confidence: float
    importance: float
    tags: list[str]
    metadata: dict[str, Any]
    access_count: int
    created_at: datetime
    updated_at: datetime


class MemoryListOut(Output):
    memories: list[MemoryItem]
    total: int
    limit: int
    offset: int


class NamespaceInfo(Output):
    namespace: str
    memory_count: int
    chunk_count: int
    document_count: int
    preference_count: int
    created_at: datetime


class NamespaceListOut(Output):
    namespaces: list[NamespaceInfo]
    total: int


# ---------------------------------------------------------------- search


class SearchFilters(Input):
    namespace: str | None = None
    doc_type: Literal["memory", "document"] | None = None
    source_file: str | None = None

    _namespace = field_validator("namespace")(classmethod(lambda c, v: check_namespace(v)))


class SearchIn(Input):
    query: str
    n_results: int = 5
    min_relevance: float | None = None

    _min_relevance = field_validator("min_relevance")(
        classmethod(lambda c, v: check_unit("min_relevance", v))
    )

    _query = field_validator("query")(classmethod(lambda c, v: check_query(v)))
    _n = field_validator("n_results")(classmethod(lambda c, v: check_n_results(v)))


class SearchWithFiltersIn(SearchIn):
    filters: SearchFilters


class SearchWithBudgetIn(Input):
    query: str
    max_tokens: int
    filters: SearchFilters | None = None
    min_relevance: float | None = None

    _min_relevance = field_validator("min_relevance")(
        classmethod(lambda c, v: check_unit("min_relevance", v))
    )

    _query = field_validator("query")(classmethod(lambda c, v: check_query(v)))

    @field_validator("max_tokens")
    @classmethod
    def _budget(cls, v: int) -> int:
        if not 1 <= v <= MAX_TOKENS_LIMIT:
            raise ValueError(f"max_tokens must be between 1 and {MAX_TOKENS_LIMIT}, got {v}")
        return v


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


# ---------------------------------------------------------------- documents


class IndexFileIn(Input):
    file_path: str
    namespace: str = "default"

    _file_path = field_validator("file_path")(classmethod(lambda c, v: check_path("File", v)))
    _namespace = field_validator("namespace")(classmethod(lambda c, v: check_namespace(v)))


class IndexFileOut(Output):
    chunks_created: int
    source_file: str
    namespace: str
    chunk_ids: list[str]
    skipped_unchanged: bool
    replaced_chunks: int
    document_id: str


class IndexDirectoryIn(Input):
    dir_path: str
    recursive: bool = True
    namespace: str = "default"
    async_mode: bool = True

    _dir_path = field_validator("dir_path")(classmethod(lambda c, v: check_path("Directory", v)))
    _namespace = field_validator("namespace")(classmethod(lambda c, v: check_namespace(v)))


class FailedFile(Output):
    file: str
    error: str


class IndexDirectoryOut(Output):
    files_indexed: int
    total_chunks: int
    failed_files: list[FailedFile]
    skipped_duplicates: int
    pending_embeddings: int
    namespace: str


class DeleteChunksIn(Input):
    ids: list[str]

    @field_validator("ids")
    @classmethod
    def _ids(cls, v: list[str]) -> list[str]:
        if not v:
            raise ValueError("ids cannot be empty: give the chunk ids to delete")
        if len(v) > 1000:
            raise ValueError(f"At most 1000 ids per call, got {len(v)}")
        return list(dict.fromkeys(i.strip() for i in v))


class DeleteChunksOut(Output):
    deleted_count: int
    deleted_ids: list[str]
    not_found_ids: list[str]
    protected_ids: list[str]


class DeleteFileIn(Input):
    source_file: str
    namespace: str | None = None

    _source_file = field_validator("source_file")(
        classmethod(lambda c, v: check_path("Source file", v))
    )
    _namespace = field_validator("namespace")(classmethod(lambda c, v: check_namespace(v)))


class DeleteFileOut(Output):
    deleted_count: int
    source_file: str


class ClearIndexIn(Input):
    confirm: bool = False
    namespace: str | None = None

    _namespace = field_validator("namespace")(classmethod(lambda c, v: check_namespace(v)))


class ClearIndexOut(Output):
    deleted_count: int
    documents_deleted: int


class IndexStatsOut(Output):
    total_documents: int
    unique_sources: int
    source_files: list[str]
    namespaces: list[str]
    memory_count: int
    golden_rule_count: int
    pending_embeddings: int


# ---------------------------------------------------------------- preferences


class PreferenceKeyIn(Input):
    key: str
    namespace: str = "global"

    _namespace = field_validator("namespace")(classmethod(lambda c, v: check_namespace(v)))

    @field_validator("key")
    @classmethod
    def _key(cls, v: str) -> str:
        v = v.strip()
        if not v:
            raise ValueError("Preference key cannot be empty")
        if len(v) > 256:
            raise ValueError(f"Preference key is too long: {len(v)} characters (limit 256)")
        return v


class PreferenceSetIn(PreferenceKeyIn):
    value: Any
    lifecycle: Literal["personal", "project", "session"] = "personal"

    @field_validator("value")
    @classmethod
    def _value(cls, v: Any) -> Any:
        if v is None:
            raise ValueError("Preference value cannot be null")
        size = len(json.dumps(v))
        limit = get_settings().max_content_chars
        if size > limit:
            raise ValueError(f"Preference value is too large: {size} characters (limit {limit})")
        return v


class PreferenceGetIn(PreferenceKeyIn):
    as_of: datetime | None = None


class PreferenceListIn(Input):
    namespace: str = "global"
    lifecycle: Literal["personal", "project", "session"] | None = None
    as_of: datetime | None = None

    _namespace = field_validator("namespace")(classmethod(lambda c, v: check_namespace(v)))


class PreferenceOut(Output):
    key: str
    value: Any
    namespace: str
    lifecycle: str
    version: int
    valid_from: datetime
    valid_to: datetime | None = None


class PreferenceSetOut(PreferenceOut):
    changed: bool


class PreferenceListOut(Output):
    preferences: list[PreferenceOut]
    total: int
    namespace: str
    as_of: datetime | None = None


class PreferenceHistoryOut(Output):
    key: str
    namespace: str
    versions: list[PreferenceOut]


assert set(LIFECYCLES) == {"personal", "project", "session"}
