"""The WHERE clauses every channel shares: the caller's filters and row validity.

Each filter is a fixed SQL fragment with a named bind; only the ones given are used, so no
value is ever spliced into SQL text.
"""

from __future__ import annotations

from datetime import datetime
from functools import lru_cache
from typing import Any

from sqlalchemy import TextClause, text

FILTER_SQL = {
    "namespace": "c.namespace = :f_namespace",
    "doc_type": "c.doc_type = :f_doc_type",
    "source_file": "c.source_file = :f_source_file",
    "memory_type": "c.memory_type = :f_memory_type",
    "min_importance": "c.importance >= :f_min_importance",
    "min_confidence": "c.confidence >= :f_min_confidence",
}
LIVE = "c.valid_to IS NULL"
AS_OF = "c.valid_from <= :as_of AND (c.valid_to IS NULL OR c.valid_to > :as_of)"


def active(filters: dict[str, Any] | None) -> dict[str, Any]:
    """The filters that were given (None means not given); unknown names are a bug."""
    given = {k: v for k, v in (filters or {}).items() if v is not None}
    unknown = set(given) - set(FILTER_SQL)
    if unknown:
        raise ValueError(f"unknown filters: {sorted(unknown)}")
    return given


def where(filters: dict[str, Any], as_of: datetime | None) -> str:
    """`validity AND filter AND …` for a chunk aliased `c`."""
    clauses = [AS_OF if as_of is not None else LIVE]
    clauses += [FILTER_SQL[name] for name in sorted(filters)]
    return " AND ".join(clauses)


def binds(filters: dict[str, Any], as_of: datetime | None) -> dict[str, Any]:
    params: dict[str, Any] = {f"f_{k}": v for k, v in filters.items()}
    if as_of is not None:
        params["as_of"] = as_of
    return params


def statement(template: str, filters: dict[str, Any], as_of: datetime | None) -> TextClause:
    """`template` with its `{where}` filled for these filters, built once per combination of
    filters and validity: the channels run on every recall."""
    return _statement(template, where(filters, as_of))


@lru_cache(maxsize=256)
def _statement(template: str, where_sql: str) -> TextClause:
    return text(template.format(where=where_sql))
