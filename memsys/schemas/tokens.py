"""Scoped API tokens: what `memsys token create|list|revoke` takes and shows."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

from pydantic import AfterValidator, Field

from memsys.schemas.common import Input, Output
from memsys.tenancy import check_pattern

TokenMode = Literal["read", "read-write"]
NamespacePattern = Annotated[str, AfterValidator(check_pattern)]


class TokenCreateIn(Input):
    name: str = Field(min_length=1, max_length=128, description="A label for people")
    namespaces: list[NamespacePattern] = Field(
        min_length=1,
        max_length=64,
        description="Namespace patterns the token may use: 'project:acme', 'project:acme*', '*'",
    )
    mode: TokenMode = Field("read", description="read, or read-write")
    expires_at: datetime | None = Field(None, description="When the token stops working")


class TokenInfo(Output):
    id: str
    name: str
    namespaces: list[str]
    mode: str
    created_at: datetime
    expires_at: datetime | None
    revoked_at: datetime | None
    last_used_at: datetime | None
    active: bool


class TokenCreated(TokenInfo):
    secret: str = Field(description="The bearer token; shown this once, stored only hashed")


class TokenListOut(Output):
    tokens: list[TokenInfo]
