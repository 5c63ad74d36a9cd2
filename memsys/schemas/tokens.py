"""Scoped API tokens: what `memsys token create|list|revoke` takes and shows."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

from pydantic import AfterValidator, Field

from memsys.schemas.common import NAME_BREAKERS, Input, Output, visible
from memsys.tenancy import check_pattern

TokenMode = Literal["read", "read-write"]
NamespacePattern = Annotated[str, AfterValidator(check_pattern)]


def _label(v: str) -> str:
    """A label people read in `memsys token list`: trimmed, showing something, one line."""
    v = v.strip()
    if not visible(v):
        raise ValueError("A token's name cannot be empty: give a label (who or what uses it)")
    if NAME_BREAKERS.search(v):
        raise ValueError("A token's name cannot hold a control character (a newline, a tab, …)")
    return v


class TokenCreateIn(Input):
    name: Annotated[str, AfterValidator(_label)] = Field(
        min_length=1, max_length=128, description="A label for people"
    )
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
