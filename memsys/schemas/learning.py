"""TRY/LEARN (S001 memory_apply, memory_outcome, validation_history)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

from pydantic import AfterValidator, Field

from memsys.schemas.common import FILLED, NOT_BLANK, NOTE_CHARS, Input, Output, limited, within


def _context(v: str) -> str:
    v = v.strip()
    if not v:
        raise ValueError("context cannot be empty: say how or where the memory is applied")
    return v


MemoryId = Annotated[str, Field(description="ID of the memory")]
SESSION_ID_CHARS = 128  # the event column's width
SessionId = Annotated[
    Annotated[str, FILLED, limited(SESSION_ID_CHARS)] | None,
    Field(description=f"Optional session identifier (≤ {SESSION_ID_CHARS} characters)"),
]


class MemoryApplyIn(Input):
    memory_id: Annotated[str, Field(description="ID of the memory being applied")]
    context: Annotated[
        str,
        AfterValidator(_context),
        NOT_BLANK,
        limited(NOTE_CHARS),
        Field(description="Description of how/where the memory is being applied"),
    ]
    session_id: SessionId = None


class MemoryApplyOut(Output):
    memory_id: str
    event_id: int


class MemoryOutcomeIn(Input):
    memory_id: Annotated[str, Field(description="ID of the memory that was applied")]
    success: Annotated[bool, Field(description="Whether the application was successful")]
    error_msg: Annotated[
        Annotated[str, limited(NOTE_CHARS)] | None,
        Field(description="Optional error message if failed"),
    ] = None
    session_id: SessionId = None


class MemoryOutcomeOut(Output):
    memory_id: str
    outcome_success: bool
    old_confidence: float
    new_confidence: float
    promoted: bool = Field(description="True when this outcome made the memory a golden rule")
    warning: str | None = Field(
        default=None, description="Set when the memory was never applied (no TRY recorded)"
    )


class ValidationHistoryIn(Input):
    memory_id: Annotated[str, Field(description="ID of the memory to get history for")]
    event_type: Annotated[
        Literal["applied", "succeeded", "failed"] | None,
        Field(description="Filter by event type (applied, succeeded, failed)"),
    ] = None
    limit: Annotated[
        int, within(1, 1000), Field(description="Maximum number of events to return")
    ] = 50


class ValidationEventOut(Output):
    id: int
    event_type: str
    context: str | None
    error_msg: str | None
    old_confidence: float | None
    new_confidence: float | None
    session_id: str | None
    timestamp: datetime


class ValidationSummary(Output):
    total_applications: int
    success_count: int
    failure_count: int
    success_rate: float | None


class ValidationHistoryOut(Output):
    events: list[ValidationEventOut]
    summary: ValidationSummary
