"""Versioned facts (FEATURES A3): one live version per entity and attribute; a new version
supersedes the old (semver bump, `supersedes` link), the old stays readable, "as of T" works."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

from pydantic import AfterValidator, Field

from memsys.schemas.common import (
    NOT_BLANK,
    AsOf,
    Input,
    Output,
    SecretWarnings,
    Timestamp,
    UnitInterval,
    check_as_of,
    limited,
)
from memsys.schemas.graph import Name
from memsys.schemas.temporal import Namespace

MAX_FACT = 8000
URI_CHARS = 2_048


def _source_uri(v: str) -> str:
    v = v.strip()
    if not v:
        raise ValueError("source_uri cannot be empty: leave it out when there is none")
    return v


def _content(v: str) -> str:
    v = v.strip()
    if not v:
        raise ValueError("A fact cannot be empty")
    if len(v) > MAX_FACT:
        raise ValueError(f"A fact is at most {MAX_FACT} characters, got {len(v)}")
    return v


Entity = Annotated[Name, Field(description="The entity the fact is about (by name)")]
Attribute = Annotated[Name, Field(description="What about it, e.g. 'timeout' or 'owner'")]


class FactSetIn(Input):
    entity: Entity
    attribute: Attribute
    content: Annotated[str, AfterValidator(_content), NOT_BLANK, Field(description="The statement")]
    entity_type: Annotated[
        Name, Field(description="Type of the entity when it is created here")
    ] = "concept"
    confidence: Annotated[
        UnitInterval,
        Field(description="How sure (0.0-1.0)", json_schema_extra={"minimum": 0.0, "maximum": 1.0}),
    ] = 0.8
    source_uri: Annotated[
        Annotated[str, AfterValidator(_source_uri), NOT_BLANK, limited(URI_CHARS)] | None,
        Field(description=f"Where it comes from (≤ {URI_CHARS} characters)"),
    ] = None
    verified: Annotated[bool, Field(description="Checked against its source")] = False
    bump: Annotated[
        Literal["major", "minor", "patch"],
        Field(description="Which part of the version a change bumps"),
    ] = "minor"
    valid_from: Annotated[
        Timestamp | None,
        AfterValidator(check_as_of),
        Field(description="When it became true (ISO 8601; default: now)"),
    ] = None
    namespace: Namespace = None


class FactOut(Output):
    fact_id: str
    entity: str
    attribute: str | None
    content: str
    version: str
    supersedes_id: str | None
    confidence: float
    source_uri: str | None
    verified: bool
    verified_at: datetime | None
    valid_from: datetime
    valid_to: datetime | None


class FactSetOut(Output):
    fact: FactOut
    created: bool = Field(description="False when the live version already says this")
    superseded: FactOut | None = Field(description="The version this one closed")
    warnings: SecretWarnings = Field(default_factory=list)


class FactGetIn(Input):
    entity: Entity
    attribute: Annotated[Name | None, Field(description="Only this attribute")] = None
    as_of: AsOf = None
    namespace: Namespace = None


class FactsOut(Output):
    facts: list[FactOut]


class FactHistoryIn(Input):
    entity: Entity
    attribute: Annotated[Name | None, Field(description="Only this attribute")] = None
    namespace: Namespace = None


class FactVerifyIn(Input):
    fact_id: Annotated[str, Field(description="The fact version to mark")]
    verified: Annotated[bool, Field(description="True: verified now; False: not verified")] = True
    namespace: Namespace = None
