"""memory_observe: one S000 observation envelope, filed under the entity its stable key names."""

from __future__ import annotations

import unicodedata
from typing import Annotated, Any

from pydantic import AfterValidator, Field, model_validator

from memsys import keys, relations
from memsys.jsonvalue import KeyTwice
from memsys.schemas.common import Input, Output, SecretWarnings
from memsys.schemas.graph import GraphNamespace
from memsys.schemas.memories import content_text
from memsys.schemas.observations import canonical_text, parse_envelope, stable_key

MAX_LINKS = 50


def _composed(value: Any) -> Any:
    """Every text of a JSON value in Unicode's composed form (NFC), keys included: the
    envelope's stable key is built from it and graph names are read composed. Two keys of
    one object that compose alike are refused, as a key given twice is everywhere else."""
    if isinstance(value, str):
        return unicodedata.normalize("NFC", value)
    if isinstance(value, list):
        return [_composed(v) for v in value]
    if isinstance(value, dict):
        composed: dict[str, Any] = {}
        for key, item in value.items():
            name = _composed(key)
            if name in composed:  # "cafe\u0301" and "caf\u00e9": one key, a value lost
                raise KeyTwice(f"the key {name[:80]!r} is given twice (in two Unicode forms)")
            composed[name] = _composed(item)
        return composed
    return value


def _envelope(v: dict[str, Any]) -> dict[str, Any]:
    parsed = parse_envelope(_composed(v), "envelope")
    stable_key(parsed)  # a key it cannot make is refused here, before any write
    content_text(canonical_text(parsed))  # its text is stored as a memory: held to its limits
    return dict(parsed.model_dump(mode="json", exclude_none=True))


def _target(v: str) -> str:
    v = unicodedata.normalize("NFC", v.strip())
    if keys.check(v) is None:
        raise ValueError(f"Link target {v!r} is not an S000 stable key (e.g. dep#lodash@4.17.21)")
    return v


class LinkIn(Input):
    relation: Annotated[
        str,
        AfterValidator(relations.require),
        Field(description="A relation of the registry, e.g. CAUSED_BY, RESOLVES, TOUCHES"),
    ]
    target: Annotated[
        str,
        AfterValidator(_target),
        Field(description="The other entity's stable key (created if missing)"),
    ]


class MemoryObserveIn(Input):
    envelope: Annotated[
        dict[str, Any],
        AfterValidator(_envelope),
        Field(
            description="An S000 observation envelope: {type: command.exec | error.capture | "
            "warning.capture | fix.apply | fix.outcome | doc.note | run.summary, …its fields}"
        ),
    ]
    links: Annotated[
        list[LinkIn],
        Field(
            description="Relations from the observed entity to others, e.g. "
            '[{"relation": "CAUSED_BY", "target": "dep#lodash@4.17.21"}]',
            max_length=MAX_LINKS,
        ),
    ] = []
    namespace: GraphNamespace = None

    @model_validator(mode="after")
    def _pairs(self) -> MemoryObserveIn:
        _, kind = stable_key(parse_envelope(self.envelope, "envelope"))
        for link in self.links:
            target_type = keys.type_of(link.target)
            assert target_type is not None
            relations.check_pair(link.relation, kind, target_type)
        return self


class MemoryObserveOut(Output):
    entity: str = Field(description="The stable key: the entity's name")
    entityType: str
    namespace: str
    created: bool = Field(description="False when the entity already existed")
    observation_added: bool = Field(description="False when it already had this observation")
    links_created: int
    warnings: SecretWarnings = Field(default_factory=list)
