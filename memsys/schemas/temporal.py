"""S002's temporal graph: episodes, search_entities, search_edges, query_graph,
build_context. Reads take `as_of` (default now): what was valid then, by the edges' and
facts' valid_from/valid_to."""

from __future__ import annotations

import unicodedata
from datetime import datetime
from typing import Annotated, Any

from pydantic import AfterValidator, Field

from memsys.schemas.common import (
    FILLED,
    NOT_BLANK,
    AsOf,
    Input,
    NamespaceName,
    Output,
    QueryText,
    SecretWarnings,
    Timestamp,
    check_as_of,
    limited,
    non_blank,
    within,
)
from memsys.schemas.graph import MAX_ITEMS, Name

MAX_GRAPH_DEPTH = 3  # both directions at depth 3 already reaches most of a dense graph
MAX_GRAPH_RESULTS = 100
MAX_FACTS = 200
MAX_EPISODE = 32_000
SOURCE_CHARS = 1_000  # an episode's source_description (kept in its metadata)


def _episode(v: str) -> str:
    v = unicodedata.normalize("NFC", v.strip())  # as memories: its names are the entities'
    if not v:
        raise ValueError("Episode content cannot be empty")
    if len(v) > MAX_EPISODE:
        raise ValueError(f"Episode content is too long: {len(v)} characters (limit {MAX_EPISODE})")
    return v


GroupIds = Annotated[
    list[NamespaceName] | None,
    Field(
        description="Namespaces to search (S002 group_ids; default: the graph namespace; "
        "an empty list searches none)"
    ),
]
Namespace = Annotated[
    NamespaceName | None,
    Field(description="Namespace of the graph (default: MEMSYS_GRAPH_NAMESPACE, 'global')"),
]
NumResults = Annotated[
    int,
    within(1, MAX_GRAPH_RESULTS),
    Field(
        description=f"How many results (1-{MAX_GRAPH_RESULTS})",
        json_schema_extra={"minimum": 1, "maximum": MAX_GRAPH_RESULTS},
    ),
]


class AddEpisodeIn(Input):
    content: Annotated[
        str,
        AfterValidator(_episode),
        NOT_BLANK,
        Field(description="The episode: text, or JSON (its string values are read)"),
    ]
    source_description: Annotated[
        Annotated[str, FILLED, limited(SOURCE_CHARS)] | None,
        Field(description="Where it came from, e.g. 'Code review session'"),
    ] = None
    reference_time: Annotated[
        Timestamp | None,
        AfterValidator(check_as_of),
        Field(description="When it happened (ISO 8601; default: now): relations start then"),
    ] = None
    entity_names: Annotated[
        list[Name] | None,
        Field(
            description="Entities to link for sure (S002 link: ENTITY1, ENTITY2), besides those "
            "the extractor finds",
            max_length=MAX_ITEMS,
        ),
    ] = None
    namespace: Namespace = None


class EpisodeRelation(Output):
    source: str
    target: str
    relation_type: str
    fact: str


class AddEpisodeOut(Output):
    episode_id: str
    memory_id: str
    entities_extracted: int
    relations_extracted: int
    extractor: str = Field(description="rules, or llm when the configured model answered")
    entities: list[str]
    relations: list[EpisodeRelation]
    relations_closed: list[EpisodeRelation] = Field(
        default_factory=list,
        description="Relations the episode denies ('no longer uses', 'B instead of C') whose "
        "live edge it closed at the reference time (as-of reads before it still see them)",
    )
    warnings: SecretWarnings = Field(default_factory=list)


class SearchEntitiesIn(Input):
    query: Annotated[QueryText, Field(description="What to look for")]
    num_results: NumResults = 10
    group_ids: GroupIds = None


class EntityNode(Output):
    uuid: str
    name: str
    entity_type: str
    summary: str | None
    group_id: str
    created_at: datetime
    valid_from: datetime
    valid_to: datetime | None
    score: float


class SearchEntitiesOut(Output):
    entities: list[EntityNode]


class SearchEdgesIn(Input):
    query: Annotated[QueryText, Field(description="What to look for")]
    num_results: NumResults = 10
    group_ids: GroupIds = None
    as_of: AsOf = None


class EntityEdge(Output):
    uuid: int
    source_node_uuid: str
    target_node_uuid: str
    source_name: str
    target_name: str
    relation_type: str
    fact: str | None
    group_id: str
    created_at: datetime
    valid_from: datetime
    valid_to: datetime | None
    expired_at: datetime | None
    score: float


class SearchEdgesOut(Output):
    edges: list[EntityEdge]


class QueryGraphIn(Input):
    query: Annotated[QueryText, Field(description="What to look for (S002 QUERY)")]
    max_results: NumResults = 10
    depth: Annotated[
        int,
        within(1, MAX_GRAPH_DEPTH),
        Field(
            description=f"Hops to walk from the best matches (1-{MAX_GRAPH_DEPTH})",
            json_schema_extra={"minimum": 1, "maximum": MAX_GRAPH_DEPTH},
        ),
    ] = 2
    namespace: Namespace = None
    as_of: AsOf = None


class QueryGraphOut(Output):
    scope: list[str] = Field(description="Names of the entities found (S002 SCOPE)")
    entities: list[EntityNode]
    links: list[str] = Field(description="source→target per relation (S002 LINKS)")
    edges: list[EntityEdge]
    relevance: list[float] = Field(description="Per entity, in scope order (S002 RELEVANCE)")


class BuildContextIn(Input):
    entity_names: Annotated[
        list[Name], Field(description="Entities to centre on", min_length=1, max_length=MAX_ITEMS)
    ]
    max_facts: Annotated[
        int,
        within(1, MAX_FACTS),
        Field(
            description=f"At most this many facts (1-{MAX_FACTS})",
            json_schema_extra={"minimum": 1, "maximum": MAX_FACTS},
        ),
    ] = 20
    center_node_uuid: Annotated[
        Annotated[str, non_blank("center_node_uuid")] | None,
        Field(description="Rank facts by their distance from this entity (its uuid)"),
    ] = None
    namespace: Namespace = None
    as_of: AsOf = None


class ContextFact(Output):
    kind: str = Field(description="edge (a relation) or fact (a versioned fact)")
    uuid: str
    subject: str
    relation_type: str | None
    object: str | None
    fact: str
    distance: int
    valid_from: datetime
    valid_to: datetime | None


class BuildContextOut(Output):
    entities: list[EntityNode]
    facts: list[ContextFact]
    context: str = Field(description="The facts as lines for a prompt")


def node(entity: Any, score: float) -> EntityNode:
    return EntityNode(
        uuid=entity.id,
        name=entity.name,
        entity_type=entity.entity_type,
        summary=entity.summary,
        group_id=entity.namespace,
        created_at=entity.created_at,
        valid_from=entity.valid_from,
        valid_to=entity.valid_to,
        score=round(score, 4),
    )
