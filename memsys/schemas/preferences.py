"""Preferences: versioned key → JSON value, with history and "as of" reads."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Annotated, Any

from pydantic import AfterValidator, Field

from memsys.config import get_settings
from memsys.schemas.common import (
    BIDI_CHARS,
    CONTROL,
    CONTROL_CHARS,
    INVISIBLE,
    NAME_BREAKERS,
    PATTERN_END,
    SPACE,
    Input,
    Lifecycle,
    LifecycleFilter,
    NamespaceName,
    Output,
    Rule,
    SecretWarnings,
    Timestamp,
    check_as_of,
    visible,
)

# The preference table takes 256 characters, but each change is logged with the key as the
# event's subject_id, which is 64 wide: a longer key failed after the write (a 500).
MAX_KEY_CHARS = 64
# A key is a name: a control character in one (a tab, \x1f) would be stripped or invisible, and
# two different requests would name the same preference.
# A new key also shows a character and holds no bidi control (which reorders what a reader
# sees); a key is read, deleted or listed by the older rule, so that one stored before the
# newer rule stays reachable.
_NAME = CONTROL_CHARS + BIDI_CHARS
READ_KEY_RULE = Rule(
    minLength=1,
    maxLength=MAX_KEY_CHARS,
    pattern=rf"^[^{CONTROL_CHARS}]*[^{CONTROL_CHARS}{SPACE}][^{CONTROL_CHARS}]*{PATTERN_END}",
)
KEY_RULE = Rule(
    minLength=1,
    maxLength=MAX_KEY_CHARS,
    pattern=rf"^[^{_NAME}]*[^{_NAME}{INVISIBLE}][^{_NAME}]*{PATTERN_END}",
)


def _read_key(v: str) -> str:
    if CONTROL.search(v):
        raise ValueError(f"Preference key {v!r} contains a control character; use visible text")
    v = v.strip()
    if not v:
        raise ValueError("Preference key cannot be empty")
    if len(v) > MAX_KEY_CHARS:
        raise ValueError(f"Preference key is too long: {len(v)} characters (limit {MAX_KEY_CHARS})")
    return v


def _stored_key(v: str, marks: bool = True) -> str:
    """A key a database may hold: what import restores (a key ending in '/history', or
    made of combining marks, was settable once, and an export of a database holding one
    must import again)."""
    v = _read_key(v)
    if NAME_BREAKERS.search(v):  # a bidi control (_read_key refused the others)
        raise ValueError(f"Preference key {v!r} contains a control character; use visible text")
    if not visible(v, marks=marks):
        raise ValueError(
            "Preference key has no visible character (only zero-width ones or combining marks)"
        )
    return v


def _key(v: str) -> str:
    """A key a new preference may take: a stored key not ending in '/history', showing
    more than combining marks."""
    v = _stored_key(v, marks=False)
    if v.endswith("/history"):  # the REST path of the history of the key before it
        raise ValueError(
            f"Preference key {v!r} ends in '/history', which REST reads as the history of "
            f"{v.removesuffix('/history')!r}: choose another key"
        )
    return v


def _value(v: Any) -> Any:
    if v is None:
        raise ValueError("Preference value cannot be null")
    # Characters as the value reads, not as ASCII escapes (\uXXXX: six for one CJK
    # character, twelve for an emoji), which refused a 6,000-character Chinese value.
    size = len(json.dumps(v, ensure_ascii=False))
    limit = get_settings().max_content_chars
    if size > limit:
        raise ValueError(f"Preference value is too large: {size} characters (limit {limit})")
    return v


Key = Annotated[str, AfterValidator(_key), KEY_RULE, Field(description="Preference key")]
StoredKey = Annotated[
    str, AfterValidator(_stored_key), KEY_RULE, Field(description="Preference key")
]
ReadKey = Annotated[
    str, AfterValidator(_read_key), READ_KEY_RULE, Field(description="Preference key")
]
PreferenceNamespace = Annotated[NamespaceName, Field(description="Namespace")]
# A past time, as every as_of (the future is refused, not guessed at).
AsOf = Annotated[
    Timestamp | None,
    AfterValidator(check_as_of),
    Field(description="ISO 8601 time: the value as it was then"),
]


class PreferenceKeyIn(Input):
    key: ReadKey
    namespace: PreferenceNamespace = "global"


class PreferenceSetIn(PreferenceKeyIn):
    key: Annotated[Key, Field(description="Preference key, e.g. 'coding_style'")]
    value: Annotated[
        Any,
        AfterValidator(_value),
        Rule(**{"not": {"type": "null"}}),
        Field(description="Any JSON value but null"),
    ]
    lifecycle: Annotated[Lifecycle, Field(description="personal | project | session")] = "personal"


class PreferenceRestoreIn(PreferenceSetIn):
    """What import sets: a key the database may already hold (memsys.vault), not only one a
    new preference may take — what an export wrote imports again."""

    key: Annotated[StoredKey, Field(description="Preference key")]


class PreferenceGetIn(PreferenceKeyIn):
    as_of: AsOf = None


class PreferenceListIn(Input):
    namespace: PreferenceNamespace = "global"
    lifecycle: LifecycleFilter = None
    as_of: AsOf = None


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
    warnings: SecretWarnings = Field(default_factory=list)


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
