"""Memories: store, recall, forget, context, count, list, namespaces."""

from __future__ import annotations

import json
import unicodedata
from collections.abc import Sequence
from datetime import datetime
from typing import Annotated, Any

from pydantic import (
    AfterValidator,
    ConfigDict,
    Field,
    ValidationInfo,
    field_validator,
    model_validator,
)

from memsys import ids
from memsys.config import get_settings
from memsys.errors import InvalidInput
from memsys.schemas.common import (
    FILLED,
    NAME_BREAKERS,
    NAME_CHARACTERS,
    NOT_BLANK,
    VISIBLE_TEXT,
    Input,
    Lifecycle,
    MemoryType,
    MemoryTypeFilter,
    MinRelevance,
    NamespaceFilter,
    NamespaceName,
    NResults,
    Offset,
    OptionalQuery,
    Output,
    QueryText,
    Rule,
    SecretWarnings,
    Timestamp,
    TokenBudget,
    UnitInterval,
    check_as_of,
    check_query,
    given,
    one_way,
    visible,
    within,
)

MAX_TAGS = 50
MAX_METADATA_BYTES = 65_536  # a memory's metadata as JSON
LIST_ORDER_FIELDS = ("created_at", "updated_at", "importance", "confidence", "access_count")


def content_text(v: str, *, stored: bool = False) -> str:
    """Content as stored: trimmed, its line breaks as \\n (text pasted from Windows holds \\r\\n,
    which a file read back turns into \\n: the same memory must not come back as an edit), in
    Unicode's composed form, NFC (an "é" typed as "e" and a combining accent, as macOS file
    names and some keyboards give it, is the same text as the one-character "é": it must
    not store a second memory). `stored`: text a database may hold, as import reads it (a
    lone combining mark was content before it counted as no visible character)."""
    v = unicodedata.normalize("NFC", v.replace("\r\n", "\n").replace("\r", "\n").strip())
    if not v:
        raise ValueError("Content cannot be empty")
    if not visible(v, marks=stored):
        raise ValueError(
            "Content has no visible character (only controls, zero-width ones or combining marks)"
        )
    limit = get_settings().max_content_chars
    if len(v) > limit:
        raise ValueError(
            f"Content is too long: {len(v)} characters (limit {limit}, "
            "MEMSYS_MAX_CONTENT_CHARS). Split it or index it as a document."
        )
    return v


def stored_content_text(v: str) -> str:
    """content_text of a memory a database may hold (import: memsys.vault.records)."""
    return content_text(v, stored=True)


# Validation context of text a database may hold: a file it exported, imported again.
STORED = {"stored": True}


def content_text_in(v: str, info: ValidationInfo) -> str:
    """content_text, read as stored text (stored_content_text) under the STORED context."""
    return content_text(v, stored=bool(info.context and info.context.get("stored")))


def tag_list(v: list[str]) -> list[str]:
    """Tags trimmed, deduplicated and sorted; a blank one is dropped, one with a control
    character refused (a tag is a name: a newline or tab in one would not show)."""
    if any(NAME_BREAKERS.search(t) for t in v):
        raise ValueError("A tag cannot hold a control character (a newline, a tab, …)")
    cleaned = sorted({t.strip() for t in v if visible(t)})
    if any(len(t) > 64 for t in cleaned):
        raise ValueError("Tags must be at most 64 characters each")
    if len(cleaned) > MAX_TAGS:
        raise ValueError(f"Too many tags: {len(cleaned)} (limit {MAX_TAGS})")
    return cleaned


def metadata_map(v: dict[str, Any]) -> dict[str, Any]:
    # UTF-8 bytes, as stored; not ASCII escapes (six bytes for a CJK character, not three).
    size = len(json.dumps(v, default=str, ensure_ascii=False).encode())
    if size > MAX_METADATA_BYTES:
        raise ValueError(
            f"Metadata is too large: {size} bytes as JSON (limit {MAX_METADATA_BYTES}). "
            "Keep large text in content or index it as a document."
        )
    return v


class MemoryStoreIn(Input):
    content: Annotated[
        str,
        AfterValidator(content_text_in),
        VISIBLE_TEXT,
        Field(description="The memory content text"),
    ]
    memory_type: MemoryType = "session"
    namespace: Annotated[
        NamespaceName,
        Field(description="Scope of the memory: 'global', 'default' or 'project:{name}'"),
    ] = "global"
    importance: Annotated[UnitInterval, Field(description="Importance score 0.0-1.0")] = 0.5
    metadata: Annotated[
        Annotated[dict[str, Any], AfterValidator(metadata_map)] | None,
        Field(description="Optional additional metadata"),
    ] = None
    tags: Annotated[
        Annotated[list[Annotated[str, Rule(pattern=NAME_CHARACTERS)]], AfterValidator(tag_list)]
        | None,
        Field(description="Optional tags"),
    ] = None
    lifecycle: Annotated[
        Lifecycle | None,
        Field(description="personal | project | session (default by memory type)"),
    ] = None
    reference_time: Annotated[
        Annotated[Timestamp, AfterValidator(check_as_of)] | None,  # naive: UTC
        Field(
            description="ISO 8601 time when the remembered thing happened, not in the future "
            "(default: now); "
            'queries naming a date or range ("last May") match against it'
        ),
    ] = None


MAX_BATCH = 1000
# The text one call embeds in all: ten memories at the content limit (320,000 characters by
# default). Embedding is what a batch costs (~1 s of model time per 32,000 characters of
# prose, more for code or symbols): 1,000 memories at the limit kept a call busy for hours.
BATCH_CONTENT_LIMITS = 10


def check_batch_load(texts: Sequence[str], what: str) -> None:
    """Refuse a call that would embed more than MAX_BATCH texts or more characters than
    BATCH_CONTENT_LIMITS memories at the content limit, before anything is embedded."""
    if len(texts) > MAX_BATCH:
        raise InvalidInput(f"At most {MAX_BATCH:,} {what} per call, got {len(texts):,}")
    limit = BATCH_CONTENT_LIMITS * get_settings().max_content_chars
    total = sum(len(t) for t in texts)
    if total > limit:
        raise InvalidInput(
            f"The {what} of one call hold {total:,} characters (limit {limit:,}: "
            f"{BATCH_CONTENT_LIMITS} times MEMSYS_MAX_CONTENT_CHARS); "
            "split them over several calls"
        )


def _batch(v: list[MemoryStoreIn]) -> list[MemoryStoreIn]:
    if not v:
        raise ValueError("memories cannot be empty: give at least one memory to store")
    if len(v) > MAX_BATCH:
        raise ValueError(f"At most {MAX_BATCH} memories per batch, got {len(v)}")
    return v


class MemoryStoreBatchIn(Input):
    memories: Annotated[
        list[MemoryStoreIn],
        Rule(_batch, minItems=1, maxItems=MAX_BATCH),
        Field(
            description=f"Up to {MAX_BATCH} memories, each as memory_store takes it, with "
            "at most ten times MEMSYS_MAX_CONTENT_CHARS characters of content in all"
        ),
    ]


class MemoryStoreOut(Output):
    id: str
    content_hash: str
    namespace: str
    memory_type: str
    duplicate: bool
    confidence: float
    importance: float
    revived: bool = Field(
        default=False,
        description="A duplicate of an aged (demoted, archived) memory, made active again "
        "with its full text",
    )
    warnings: SecretWarnings = Field(default_factory=list)


class MemoryStoreBatchOut(Output):
    results: list[MemoryStoreOut]
    stored: int
    duplicates: int


class MemoryRecallIn(Input):
    query: Annotated[QueryText, Field(description="Search query text")]
    n_results: NResults = 5
    namespace: NamespaceFilter = None
    memory_type: MemoryTypeFilter = None
    min_importance: Annotated[UnitInterval | None, Field(description="Minimum importance")] = None
    min_confidence: Annotated[UnitInterval | None, Field(description="Minimum confidence")] = None
    min_relevance: MinRelevance = None


class MemoryFields(Output):
    """What every memory in a result carries."""

    id: str
    content: str
    memory_type: str
    namespace: str
    confidence: float
    importance: float


# When the remembered thing happened: the reference_time it was stored with, else when it
# was stored (as memory_query's happened_at and the vault's `happened` read it).
HAPPENED = "When it happened: the reference_time it was stored with, else when it was stored"


class MemoryHit(MemoryFields):
    score: float
    similarity: float | None = None
    tags: list[str] = []
    metadata: dict[str, Any] = {}
    created_at: datetime
    happened_at: datetime | None = Field(default=None, description=HAPPENED)


class MemoryRecallOut(Output):
    memories: list[MemoryHit]
    total: int
    query: str
    filters: dict[str, Any]
    trace_id: str


def _input_value(v: str) -> str:
    """An id is kept as is; anything else is a query and gets the query's checks."""
    return v.strip() if ids.looks_like_memory_id(v) else check_query(v)


class MemoryForgetIn(Input):
    model_config = ConfigDict(
        json_schema_extra=given(("memory_id",), ("query",), ("input_value",), only_one=True)
    )

    memory_id: Annotated[
        Annotated[str, FILLED] | None, Field(description="Specific memory ID to delete")
    ] = None
    query: Annotated[
        QueryText | None, Field(description="Search query to find memories to delete")
    ] = None
    input_value: Annotated[
        Annotated[str, AfterValidator(_input_value), NOT_BLANK] | None,
        Field(description="Smart parameter - auto-detects if ID or query"),
    ] = None
    namespace: Annotated[
        NamespaceName | None, Field(description="Filter deletion to specific namespace")
    ] = None
    n_results: Annotated[
        NResults, Field(description="Number of search results to delete in query mode")
    ] = 5
    force: Annotated[
        bool,
        Field(description="If true, allow deletion of golden rules (and, by query, pinned ones)"),
    ] = False
    purge: Annotated[
        bool, Field(description="Erase the memory and its history instead of closing it")
    ] = False
    # Query mode forgets only close matches: S001's "top n_results" alone would delete
    # unrelated memories whenever fewer than n_results are relevant.
    min_similarity: Annotated[
        UnitInterval, Field(description="Query mode: forget only matches at least this similar")
    ] = 0.5

    @model_validator(mode="after")
    def _one_target(self) -> MemoryForgetIn:
        fields = ("memory_id", "query", "input_value")
        one_way(
            ((f, getattr(self, f) is not None) for f in fields),
            "Give one of memory_id, query or input_value, not {given}",
        )
        return self


class MemoryForgetOut(Output):
    deleted_ids: list[str]
    deleted_count: int
    protected_ids: list[str]
    pinned_kept_ids: list[str] = Field(
        default=[], description="Pinned memories a query matched and left (use force)"
    )
    pinned_kept_count: int = Field(default=0, description="How many pinned_kept_ids there are")
    purged: bool


class MemoryContextIn(Input):
    query: Annotated[
        OptionalQuery, Field(description="Optional search query to filter relevant memories")
    ] = None
    namespace: Annotated[NamespaceName | None, Field(description="Project namespace")] = None
    token_budget: Annotated[
        TokenBudget,
        Field(
            description="Maximum tokens for context",
        ),
    ] = 4000


class MemoryContextOut(Output):
    context: str
    token_estimate: int
    memory_count: int
    golden_rule_count: int
    memory_ids: list[str]
    trace_id: str


class MemoryCountIn(Input):
    namespace: NamespaceFilter = None
    memory_type: MemoryTypeFilter = None


class MemoryCountOut(Output):
    count: int
    filters: dict[str, Any]


class MemoryListIn(MemoryCountIn):
    limit: Annotated[
        int,
        within(1, 1000),
        Field(description="Maximum number of results (default: 100, max: 1000)"),
    ] = 100
    offset: Annotated[Offset, Field(description="Number of results to skip for pagination")] = 0
    order_by: Annotated[
        str, Rule(enum=list(LIST_ORDER_FIELDS)), Field(description="Field to sort by")
    ] = "created_at"
    descending: Annotated[bool, Field(description="Sort in descending order")] = True

    @field_validator("order_by")
    @classmethod
    def _order(cls, v: str) -> str:
        if v not in LIST_ORDER_FIELDS:
            raise ValueError(f"Invalid order_by: {v}. Use one of: {', '.join(LIST_ORDER_FIELDS)}")
        return v


class MemoryItem(MemoryFields):
    tags: list[str]
    metadata: dict[str, Any]
    access_count: int
    created_at: datetime
    updated_at: datetime
    happened_at: datetime = Field(description=HAPPENED)


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
