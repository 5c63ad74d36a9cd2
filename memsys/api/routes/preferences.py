"""Preferences: versioned key-value with history and "as of" reads."""

from datetime import datetime
from typing import Any, Literal

from fastapi import APIRouter
from pydantic import BaseModel, ConfigDict

from memsys import runner
from memsys.schemas import (
    PreferenceGetIn,
    PreferenceHistoryOut,
    PreferenceKeyIn,
    PreferenceListIn,
    PreferenceListOut,
    PreferenceOut,
    PreferenceSetIn,
    PreferenceSetOut,
)
from memsys.services import preferences

router = APIRouter(prefix="/preferences", tags=["preferences"])


class PreferenceBody(BaseModel):
    # The namespace is a query parameter; a stray one in the body must not be ignored silently.
    model_config = ConfigDict(extra="forbid")

    value: Any
    lifecycle: Literal["personal", "project", "session"] = "personal"


@router.get("", response_model=PreferenceListOut)
def list_preferences(
    namespace: str = "global",
    lifecycle: Literal["personal", "project", "session"] | None = None,
    as_of: datetime | None = None,
) -> PreferenceListOut:
    """Preferences of a namespace, now or as of a time (MCP: preference_list)."""
    data = {"namespace": namespace, "lifecycle": lifecycle, "as_of": as_of}
    return runner.execute(preferences.list_values, PreferenceListIn, data)


@router.put("/{key:path}", response_model=PreferenceSetOut)
def set_preference(key: str, body: PreferenceBody, namespace: str = "global") -> PreferenceSetOut:
    """Set a preference; each change is a new version (MCP: preference_set)."""
    data = {"key": key, "namespace": namespace, **body.model_dump()}
    return runner.execute(preferences.set_value, PreferenceSetIn, data)


@router.get("/{key:path}/history", response_model=PreferenceHistoryOut)
def history(key: str, namespace: str = "global") -> PreferenceHistoryOut:
    """Every version of a preference (MCP: preference_history)."""
    return runner.execute(
        preferences.history, PreferenceKeyIn, {"key": key, "namespace": namespace}
    )


@router.get("/{key:path}", response_model=PreferenceOut)
def get_preference(
    key: str, namespace: str = "global", as_of: datetime | None = None
) -> PreferenceOut:
    """A preference now, or as of a time (MCP: preference_get)."""
    data = {"key": key, "namespace": namespace, "as_of": as_of}
    return runner.execute(preferences.get, PreferenceGetIn, data)
