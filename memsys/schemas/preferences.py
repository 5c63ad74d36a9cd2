"""Preferences: versioned key → JSON value, with history and "as of" reads."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Annotated, Any

from pydantic import AfterValidator, Field

from memsys.config import get_settings
from memsys.schemas.common import Input, Lifecycle, LifecycleFilter, NamespaceName, Output

MAX_KEY_CHARS = 256


def _key(v: str) -> str:
    v = v.strip()
    if not v:
        raise ValueError("Preference key cannot be empty")
    if len(v) > MAX_KEY_CHARS:
        raise ValueError(f"Preference key is too long: {len(v)} characters (limit {MAX_KEY_CHARS})")
    return v


def _value(v: Any) -> Any:
    if v is None:
        raise ValueError("Preference value cannot be null")
    size = len(json.dumps(v))
    limit = get_settings().max_content_chars
    if size > limit:
        raise ValueError(f"Preference value is too large: {size} characters (limit {limit})")
    return v


Key = Annotated[str, AfterValidator(_key), Field(description="Preference key")]
PreferenceNamespace = Annotated[NamespaceName, Field(description="Namespace")]
AsOf = Annotated[datetime | None, Field(description="ISO 8601 time: the value as it was then")]


class PreferenceKeyIn(Input):
    key: Key
    namespace: PreferenceNamespace = "global"


class PreferenceSetIn(PreferenceKeyIn):
    key: Annotated[Key, Field(description="Preference key, e.g. 'coding_style'")]
    value: Annotated[Any, AfterValidator(_value), Field(description="Any JSON value")]
    lifecycle: Annotated[Lifecycle, Field(description="personal | project | session")] = "personal"


class PreferenceGetIn(PreferenceKeyIn):
    as_of: AsOf = None


class PreferenceListIn(Input):
    namespace: PreferenceNamespace = "global"
    lifecycle: LifecycleFilter = None
    as_of: Annotated[datetime | None, Field(description="ISO 8601 time")] = None


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


class PreferenceDeleteOut(Output):
    key: str
    namespace: str
    version: int = Field(description="The version that was current and is now closed")


class PreferenceHistoryOut(Output):
    key: str
    namespace: str
    versions: list[PreferenceOut]
