"""The knowledge graph as the official MCP memory server shapes it (server-memory 0.6):
entities {name, entityType, observations}, relations {from, to, relationType}. Field names
are camelCase because an agent configured for that server sends and expects them so."""

from __future__ import annotations

import contextlib
import unicodedata
from typing import Annotated

from pydantic import AfterValidator, ConfigDict, Field, ValidationInfo, model_validator

from memsys import ids, keys, relations
from memsys.schemas.common import (
    NOT_BLANK,
    STORED_TEXT,
    VISIBLE_TEXT,
    AsOf,
    Input,
    NamespaceName,
    Output,
    QueryText,
    Rule,
    SecretWarnings,
)
from memsys.schemas.memories import content_text_in, stored_content_text
from memsys.schemas.observations import canonical_text, looks_like_envelope, parse_envelope

MAX_ITEMS = 1000
MAX_NAME = 512


# Fields that hold an entity's name; the others of this type say which field they are.
_ENTITY_FIELDS = {"name", "from_", "to", "entityName", "entityNames", "names", "entity"}


def _name(v: str, info: ValidationInfo) -> str:
    field = info.field_name or "name"
    what = "An entity name" if field in _ENTITY_FIELDS else field.rstrip("_")
    # Composed (NFC), as memories and queries are: "Café" typed with a combining accent
    # names the entity (fact, relation type) typed with an "é". And read as dedup reads a
    # memory (ids.as_read): a no-break space is a space, a zero-width space or BOM nothing.
    # Rows stored before this got the name read so from the upgrade c8e4a1f7d362 (one
    # whose folded name another row held kept its own).
    v = unicodedata.normalize("NFC", ids.as_read(v)).strip()
    if not v:
        raise ValueError(f"{what} cannot be empty")
    if len(v) > MAX_NAME:
        raise ValueError(f"{what} is at most {MAX_NAME} characters, got {len(v)}")
    return v


def _observation(v: str, info: ValidationInfo) -> str:
    v = v.strip()
    if not v:
        raise ValueError("An observation cannot be empty")
    if looks_like_envelope(v):  # S000: an envelope is validated before it is written
        v = canonical_text(parse_envelope(v))
    return content_text_in(v, info)  # stored as a memory: its limits (an import's as stored)


def _items(v: list[object]) -> list[object]:
    if len(v) > MAX_ITEMS:
        raise ValueError(f"At most {MAX_ITEMS} items per call, got {len(v)}")
    return v


ITEMS = Rule(_items, maxItems=MAX_ITEMS)
Name = Annotated[str, AfterValidator(_name), NOT_BLANK]
Observation = Annotated[str, AfterValidator(_observation), VISIBLE_TEXT]
GraphNamespace = Annotated[
    NamespaceName | None,
    Field(description="Namespace of the graph (default: MEMSYS_GRAPH_NAMESPACE, 'global')"),
]


class EntityIn(Input):
    name: Annotated[Name, Field(description="The entity's name (its identity)")]
    entityType: Annotated[Name, Field(description="e.g. person, project, service")]
    observations: Annotated[
        list[Observation], Field(description="Facts about the entity, one per string")
    ] = []

    @model_validator(mode="after")
    def _typed(self) -> EntityIn:
        """A name with an S000 prefix (`err#…`) is a stable key: well formed, and of its type."""
        kind = keys.check(self.name)
        if kind is not None and self.entityType.lower() != kind:
            raise ValueError(
                f"entityType: {self.entityType!r} does not match the key {self.name!r} "
                f"(an S000 {kind} key)"
            )
        return self


class RelationIn(Input):
    model_config = ConfigDict(populate_by_name=True)

    from_: Annotated[Name, Field(alias="from", description="Source entity name")]
    to: Annotated[Name, Field(description="Target entity name")]
    relationType: Annotated[Name, Field(description="In active voice, e.g. works_at")]

    @model_validator(mode="after")
    def _typed(self) -> RelationIn:
        """Between S000-keyed entities the relation comes from the registry (memsys.relations)
        and, for S000's own relations, joins the types S000 names."""
        ends = (keys.check(self.from_), keys.check(self.to))
        if ends[0] is None and ends[1] is None:
            return self
        self.relationType = relations.require(self.relationType)
        if ends[0] is not None and ends[1] is not None:
            relations.check_pair(self.relationType, ends[0], ends[1])
        return self


class RelationRef(Input):
    """A relation named to delete it: not gated by the vocabulary (a relation written before
    a gate, or before the vocabulary changed, can still go); a registry name in another
    spelling (`CAUSED_BY`) is the one stored between keyed entities."""

    model_config = ConfigDict(populate_by_name=True)

    from_: Annotated[Name, Field(alias="from", description="Source entity name")]
    to: Annotated[Name, Field(description="Target entity name")]
    relationType: Annotated[Name, Field(description="The relation's type")]

    @model_validator(mode="after")
    def _spelled(self) -> RelationRef:
        if keys.prefix_of(self.from_) or keys.prefix_of(self.to):
            self.relationType = relations.canonical(self.relationType) or self.relationType
        return self


def _observation_ref(v: str) -> str:
    """An observation named to delete it: an envelope is read as written (canonical when it
    still parses; one of a type S000 no longer has is matched as given), its text as stored
    (one of combining marks only, stored before they counted as no visible character)."""
    v = v.strip()
    if not v:
        raise ValueError("An observation cannot be empty")
    if looks_like_envelope(v):
        with contextlib.suppress(ValueError):
            v = canonical_text(parse_envelope(v))
    return stored_content_text(v)


ObservationRef = Annotated[str, AfterValidator(_observation_ref), STORED_TEXT]


class ObservationsIn(Input):
    entityName: Annotated[Name, Field(description="The entity to add to")]
    contents: Annotated[list[Observation], Field(description="Observations to add")]


class DeletionIn(Input):
    entityName: Annotated[Name, Field(description="The entity to remove from")]
    observations: Annotated[list[ObservationRef], Field(description="Observations to remove")]


class CreateEntitiesIn(Input):
    entities: Annotated[list[EntityIn], ITEMS, Field(description="Entities to create")]
    namespace: GraphNamespace = None


class CreateRelationsIn(Input):
    relations: Annotated[list[RelationIn], ITEMS, Field(description="Relations to create")]
    namespace: GraphNamespace = None


class AddObservationsIn(Input):
    observations: Annotated[
        list[ObservationsIn], ITEMS, Field(description="Per entity, what to add")
    ]
    namespace: GraphNamespace = None


class DeleteEntitiesIn(Input):
    entityNames: Annotated[list[Name], ITEMS, Field(description="Entities to delete")]
    namespace: GraphNamespace = None


class DeleteObservationsIn(Input):
    deletions: Annotated[list[DeletionIn], ITEMS, Field(description="Per entity, what to remove")]
    namespace: GraphNamespace = None


class DeleteRelationsIn(Input):
    relations: Annotated[list[RelationRef], ITEMS, Field(description="Relations to delete")]
    namespace: GraphNamespace = None


class ReadGraphIn(Input):
    namespace: GraphNamespace = None
    as_of: AsOf = None  # memsys's addition: deletes close rows, so the past stays readable


class SearchNodesIn(Input):
    query: Annotated[
        QueryText, Field(description="What to look for in names, types and observations")
    ]
    namespace: GraphNamespace = None


class OpenNodesIn(Input):
    names: Annotated[list[Name], ITEMS, Field(description="Entity names")]
    namespace: GraphNamespace = None
    as_of: AsOf = None


class EntityOut(Output):
    name: str
    entityType: str
    observations: list[str]


class RelationOut(Output):
    model_config = ConfigDict(populate_by_name=True, serialize_by_alias=True)

    from_: str = Field(alias="from")
    to: str
    relationType: str


# Left out of the answer when empty: the memory server's own shapes, as a client of it reads
# them, unless there is something to flag (memory_store's `warnings`, memsys.secretscan).
Flagged = Annotated[SecretWarnings, Field(exclude_if=lambda v: not v)]
# The aged memories a write restated, made active again (as memory_store's `revived`); left
# out when empty, as `warnings` is.
Revived = Annotated[
    list[str],
    Field(
        exclude_if=lambda v: not v,
        description="Ids of aged (archived, rehydratable) memories whose text this call gave "
        "again: made active again, in full, as memory_store does",
    ),
]


class EntitiesOut(Output):
    entities: list[EntityOut]
    warnings: Flagged = Field(default_factory=list)
    revived: Revived = Field(default_factory=list)


class RelationsOut(Output):
    relations: list[RelationOut]


class AddedObservations(Output):
    entityName: str
    addedObservations: list[str]


class ObservationsOut(Output):
    results: list[AddedObservations]
    warnings: Flagged = Field(default_factory=list)
    revived: Revived = Field(default_factory=list)


class DoneOut(Output):
    success: bool
    message: str


class GraphOut(Output):
    entities: list[EntityOut]
    relations: list[RelationOut]
