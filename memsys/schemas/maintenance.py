"""S001 B19 memory_detect_contradictions, B20 memory_check_supersedes, B22
memory_backfill_edges."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from memsys.schemas.common import Input, NamespaceFilter, Output, UnitInterval, within


class DetectContradictionsIn(Input):
    memory_id: Annotated[str, Field(description="ID of the memory to check for contradictions")]
    similarity_threshold: Annotated[
        UnitInterval,
        Field(
            description="Minimum similarity for considering",
            json_schema_extra={"minimum": 0.0, "maximum": 1.0},
        ),
    ] = 0.7
    create_edges: Annotated[bool, Field(description="Whether to create CONTRADICTS edges")] = True


class Contradiction(Output):
    memory_id: str
    content: str
    similarity: float
    contradiction_reason: str


class DetectContradictionsOut(Output):
    contradictions: list[Contradiction]
    edges_created: int


class CheckSupersedesIn(Input):
    memory_id: Annotated[str, Field(description="ID of the (potentially newer) memory to check")]
    create_edge: Annotated[bool, Field(description="Whether to create SUPERSEDES edge")] = True


class CheckSupersedesOut(Output):
    superseded_id: str | None
    edge_created: bool
    superseded_closed: bool = Field(
        default=False,
        description="The older memory was closed (recall no longer returns it; as-of reads do)",
    )
    similarity: float | None = None
    reason: str | None = None


class BackfillEdgesIn(Input):
    namespace: NamespaceFilter = None
    limit: Annotated[
        int,
        within(1, 10_000),
        Field(
            description="At most this many orphan memories per call (1-10000)",
            json_schema_extra={"minimum": 1, "maximum": 10_000},
        ),
    ] = 500
    similarity_threshold: Annotated[
        UnitInterval,
        Field(
            description="An orphan with no entity mentions is related to its nearest memory at "
            "least this similar",
            json_schema_extra={"minimum": 0.0, "maximum": 1.0},
        ),
    ] = 0.75
    dry_run: Annotated[bool, Field(description="Count the orphans, write nothing")] = False


class BackfillEdgesOut(Output):
    orphans_found: int
    processed: int
    mention_edges_created: int
    relates_edges_created: int
    remaining_orphans: int
