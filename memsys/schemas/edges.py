"""Edges between memories (S001 memory_relate, memory_edge_forget, memory_inspect_graph)."""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import AfterValidator, ConfigDict, Field, model_validator

from memsys import relations
from memsys.errors import shortened
from memsys.schemas.common import FILLED, AsOf, Input, Output, Rule, given, one_way, within

# memory_relate takes any public relation of the one registry (memsys.relations): S001's four
# first, then S000's vocabulary, S003's and S002's types; any case, stored lower snake_case.
MEMORY_RELATIONS = relations.PUBLIC
MAX_DEPTH = 5
Direction = Literal["outgoing", "incoming", "both"]


def _relation(v: str) -> str:
    try:
        return relations.require(v)
    except ValueError:
        raise ValueError(
            f"Invalid relation: {v}. Use one of: {', '.join(MEMORY_RELATIONS)}"
        ) from None


EDGE_TYPE = r"^[A-Za-z][A-Za-z0-9_ -]{0,63}$"


def _edge_type(v: str) -> str:
    """A relation to follow: the registry's name for it in any spelling (memsys's own too: a
    walk may follow `mentions`), else the lower snake_case form an imported vault stores
    (any relation of that shape: `inspired_by`); other text is refused, not matched to
    nothing."""
    if not re.fullmatch(EDGE_TYPE, v):
        raise ValueError(
            f"Invalid edge type: {shortened(repr(v), 80)}. A relation is a name of letters, "
            "digits and _ (e.g. caused_by, relates_to)"
        )
    name = relations.normalise(v)
    return relations.canonical(name) or name


def _decay(v: float) -> float:
    if not 0.0 < v <= 1.0:
        raise ValueError(f"decay_factor must be above 0 and at most 1, got {v}")
    return v


Relation = Annotated[
    str,
    AfterValidator(_relation),
    Field(
        description="Type of relationship: one of the enum (the canonical spelling; any case, "
        "and `-` or a space for `_`, are read as the same)",
        json_schema_extra={"enum": list(MEMORY_RELATIONS)},
    ),
]


NodeKind = Literal["memory", "chunk", "entity", "fact", "episode"]
MAX_CONTEXT = 2000
MAX_WEIGHT = 1000.0


def edge_context(v: str | None) -> str | None:
    """The context as stored: trimmed, its line breaks as \n, as memory content is
    (memories.content_text: a vault's edge file reads back \r\n as \n)."""
    if v is None:
        return None
    if len(v) > MAX_CONTEXT:
        raise ValueError(f"context is at most {MAX_CONTEXT} characters, got {len(v)}")
    return v.replace("\r\n", "\n").replace("\r", "\n").strip() or None


class MemoryRelateIn(Input):
    source_id: Annotated[str, Field(description="ID of the source memory")]
    target_id: Annotated[str, Field(description="ID of the target memory")]
    relation: Relation
    weight: Annotated[float, within(0, MAX_WEIGHT), Field(description="Edge weight (0-1000)")] = 1.0
    # memsys's additions: an edge may join any two nodes of one namespace, with a reason
    source_kind: Annotated[
        NodeKind,
        Field(
            description="What source_id names: memory (default), chunk (an indexed document "
            "chunk), entity, fact or episode"
        ),
    ] = "memory"
    target_kind: Annotated[NodeKind, Field(description="What target_id names (as source_kind)")] = (
        "memory"
    )
    context: Annotated[
        str | None,
        AfterValidator(edge_context),
        Field(description=f"Why they are related, kept on the edge (≤ {MAX_CONTEXT} characters)"),
    ] = None


class MemoryRelateOut(Output):
    edge_id: int
    created: bool = Field(description="False when this edge already existed (it is returned)")


# edge.id is a bigint, but a number beyond 2^53 is not exact in JSON (JavaScript, and JSON
# Schema validators that read it as a double: 2^63 + 192 compares equal to 2^63 - 1); an id
# sequence never gets there. Beyond the bigint it was a 500.
MAX_EDGE_ID = 2**53 - 1


class MemoryEdgeForgetIn(Input):
    model_config = ConfigDict(
        json_schema_extra=given(
            ("edge_id",), ("memory_id",), ("source_id", "target_id"), alone=True
        )
    )

    edge_id: Annotated[
        Annotated[int, within(1, MAX_EDGE_ID)] | None,
        Field(description="Specific edge ID to delete"),
    ] = None
    # Blank ids are refused, and the relation is read as memory_relate and
    # memory_inspect_graph read it: "depends on" matched no stored depends_on, and a blank id
    # or a relation of any text matched nothing, deleted_count 0, without a word.
    memory_id: Annotated[
        Annotated[str, FILLED] | None,
        Field(description="Memory ID to delete all connected edges"),
    ] = None
    source_id: Annotated[
        Annotated[str, FILLED] | None, Field(description="Source memory ID for pair deletion")
    ] = None
    target_id: Annotated[
        Annotated[str, FILLED] | None, Field(description="Target memory ID for pair deletion")
    ] = None
    relation: Annotated[
        Annotated[str, Rule(_edge_type, pattern=EDGE_TYPE)] | None,
        Field(description="Filter by relation type (any case; `-` or a space for `_`)"),
    ] = None
    direction: Annotated[Direction, Field(description="For memory_id mode: edge direction")] = (
        "both"
    )

    @model_validator(mode="after")
    def _one_way(self) -> MemoryEdgeForgetIn:
        ends = self.source_id is not None or self.target_id is not None
        one_way(
            (
                ("edge_id", self.edge_id is not None),
                ("memory_id", self.memory_id is not None),
                ("source_id/target_id", ends),
            ),
            "Give one of edge_id, memory_id, or source_id with target_id: not {given}",
        )
        return self


class MemoryEdgeForgetOut(Output):
    deleted_ids: list[int]
    deleted_count: int


class MemoryInspectIn(Input):
    memory_id: Annotated[str, Field(description="ID of the memory to start inspection from")]
    max_depth: Annotated[
        int,
        within(1, MAX_DEPTH),
        Field(
            description=f"Maximum number of hops to traverse (1-{MAX_DEPTH})",
            json_schema_extra={"minimum": 1, "maximum": MAX_DEPTH},
        ),
    ] = 2
    direction: Annotated[Direction, Field(description="Which edges to follow")] = "both"
    edge_types: Annotated[
        list[Annotated[str, Rule(_edge_type, pattern=EDGE_TYPE)]] | None,
        Field(description="Optional list of edge types (relations) to follow; any case"),
    ] = None
    include_scores: Annotated[bool, Field(description="Compute relevance scores for paths")] = True
    decay_factor: Annotated[
        float,
        Rule(_decay, exclusiveMinimum=0.0, maximum=1.0),
        Field(description="Factor by which relevance decays per hop"),
    ] = 0.7
    output_format: Annotated[
        Literal["json", "mermaid"], Field(description="json, or a mermaid flowchart as text")
    ] = "json"
    as_of: AsOf = None


class GraphNode(Output):
    id: str
    kind: str = "memory"  # memory, chunk (of a document), entity, fact or episode
    content: str
    depth: int
    relevance: float | None = None


class GraphEdge(Output):
    id: int
    source: str
    target: str
    relation: str
    weight: float


class GraphPath(Output):
    path: list[str]
    total_relevance: float | None = None


class InspectStats(Output):
    total_nodes: int
    total_edges: int
    max_depth_reached: int
    truncated: bool = Field(
        default=False,
        description="More nodes or edges were within reach than one answer holds "
        "(500 nodes, 2,000 edges, strongest edges first)",
    )


class MemoryInspectOut(Output):
    origin_id: str
    nodes: list[GraphNode]
    edges: list[GraphEdge]
    paths: list[GraphPath]
    stats: InspectStats
    mermaid: str | None = None
