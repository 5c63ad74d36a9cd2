"""Lifecycle: S002 decay and memory_get, S004 rehydrate, S003 briefs (CORE.md,
REFLECTION.md, episodes), S001 memory_analyze_health."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

from pydantic import Field

from memsys.schemas.common import Day, Input, NamespaceFilter, Output, UnitInterval, within
from memsys.schemas.memories import MemoryItem

Tier = Literal["ultra", "short", "medium", "long"]


class DecayIn(Input):
    threshold: Annotated[
        UnitInterval,
        Field(
            description="Decay score below which an entry counts as decayed (S003 bands: "
            "active >= 0.5, fading >= 0.2, dormant >= 0.05, archived below)",
            json_schema_extra={"minimum": 0.0, "maximum": 1.0},
        ),
    ] = 0.05
    scope: Annotated[
        Tier | None,
        Field(
            description="Only this tier: ultra (session memories; deleted below the "
            "threshold), short, medium (project memories by type weight), long (exempt)"
        ),
    ] = None
    namespace: NamespaceFilter = None


class DecayOut(Output):
    status: str
    entries_decayed: int = Field(description="Entries whose score fell below the threshold now")
    entries_deleted: int = Field(description="Session (ultra) entries deleted below it")
    entries_scanned: int
    counters_folded: int = Field(description="Access counters brought in line with the log")
    by_status: dict[str, int]


class RehydrateIn(Input):
    memory_id: Annotated[str, Field(description="ID of the archived memory to rehydrate")]


class RehydrateOut(Output):
    memory_id: str
    stage_before: str
    stage: str
    restored: Literal["full", "summary", "none"] = Field(
        description="full: the original text is back; summary/none: lossy"
    )
    lossy: bool
    content: str
    temperature: str = Field(description="hot | warm | cold | pinned, from the access log")


class BriefIn(Input):
    kind: Annotated[
        Literal["core", "reflection", "episodes"],
        Field(description="core (CORE.md), reflection (REFLECTION.md) or episodes (a day's log)"),
    ]
    namespace: NamespaceFilter = None
    day: Annotated[
        Day | None, Field(description="The day of the episode log (YYYY-MM-DD; default today)")
    ] = None


class BriefOut(Output):
    kind: str
    filename: str = Field(description="Where the CLI writes it, relative to the output folder")
    text: str
    entries: int


class HealthIn(Input):
    namespace: NamespaceFilter = None
    include_contradictions: Annotated[bool, Field(description="Check for contradictions")] = True
    include_low_confidence: Annotated[bool, Field(description="Find low-confidence memories")] = (
        True
    )
    include_stale: Annotated[bool, Field(description="Find stale memories")] = True
    stale_days: Annotated[
        int,
        within(1, 36500),
        Field(
            description="Days without validation to consider stale",
            json_schema_extra={"minimum": 1, "maximum": 36500},
        ),
    ] = 30


class Contradiction(Output):
    id1: str
    id2: str
    similarity: float | None


class LowConfidence(Output):
    id: str
    confidence: float


class Stale(Output):
    id: str
    last_validated: datetime | None


class HealthOut(Output):
    contradictions: list[Contradiction]
    low_confidence: list[LowConfidence]
    stale: list[Stale]
    recommendations: list[str]
    totals: dict[str, int]


class PinIn(Input):
    memory_id: Annotated[str, Field(description="ID of the memory to pin or unpin")]


class PinOut(Output):
    memory_id: str
    pinned: bool
    changed: bool = Field(description="False when the memory already was (un)pinned")
    stage: str = Field(description="Pinning brings an aged memory back to active")
    decay_score: float = Field(description="S003: 999 while pinned")
    temperature: str = Field(description="hot | warm | cold | pinned, from the access log")


class MemoryGetIn(Input):
    memory_id: Annotated[str, Field(description="ID of the memory to read")]


class MemoryGetOut(MemoryItem):
    stage: str = Field(description="active | demoted | archived | rehydratable, after this read")
    pinned: bool
    golden: bool
    lossy: bool = Field(description="True when an aged memory came back as its summary only")
    rekindled: bool = Field(description="True when this read brought an aged memory back")
    decay_score: float | None = Field(
        description="S003 score as maintenance or decay last stored it (when its band, or "
        "the side of decay's threshold, changed)"
    )
    last_accessed_at: datetime | None
    temperature: str = Field(description="hot | warm | cold | pinned, from the access log")
    superseded_by: str | None = Field(
        None,
        description="An earlier version (the id an import or edit named as keeping the "
        "previous fields): the memory that holds its fields now. None for a live memory",
    )
    valid_to: datetime | None = Field(None, description="An earlier version: when it was replaced")
