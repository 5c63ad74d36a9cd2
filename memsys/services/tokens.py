"""Scoped API tokens: create (the secret is returned once), list, revoke, and the lookup
the HTTP layer does for every request that carries one. Only sha256(secret) is stored."""

from __future__ import annotations

import hashlib
import secrets
from datetime import UTC, datetime, timedelta

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from memsys import ids
from memsys.errors import InvalidInput, NotFound
from memsys.models import ApiToken
from memsys.schemas.tokens import TokenCreated, TokenCreateIn, TokenInfo, TokenListOut
from memsys.tenancy import Scope

SECRET_PREFIX = "msk_"
TOKEN_ID = "tok"
TOUCH_EVERY = timedelta(minutes=1)  # last_used_at is advisory: not a write per request


def digest(secret: str) -> str:
    return hashlib.sha256(secret.encode("utf-8", "surrogatepass")).hexdigest()


def _info(row: ApiToken, now: datetime) -> TokenInfo:
    active = row.revoked_at is None and (row.expires_at is None or row.expires_at > now)
    return TokenInfo(
        id=row.id,
        name=row.name,
        namespaces=list(row.namespaces),
        mode=row.mode,
        created_at=row.created_at,
        expires_at=row.expires_at,
        revoked_at=row.revoked_at,
        last_used_at=row.last_used_at,
        active=active,
    )


def create(session: Session, params: TokenCreateIn) -> TokenCreated:
    """A new token for the given namespace patterns; the only time its secret is shown."""
    now = datetime.now(UTC)
    if params.expires_at is not None and params.expires_at.astimezone(UTC) <= now:
        raise InvalidInput("expires_at is in the past: give a future time (or none)")
    secret = SECRET_PREFIX + secrets.token_urlsafe(32)
    row = ApiToken(
        id=ids.new_id(TOKEN_ID),
        name=params.name,
        secret_sha256=digest(secret),
        namespaces=list(dict.fromkeys(params.namespaces)),
        mode=params.mode,
        expires_at=params.expires_at,
        created_at=now,
    )
    session.add(row)
    session.flush()
    return TokenCreated(**_info(row, now).model_dump(), secret=secret)


def list_all(session: Session) -> TokenListOut:
    now = datetime.now(UTC)
    rows = session.scalars(select(ApiToken).order_by(ApiToken.created_at, ApiToken.id))
    return TokenListOut(tokens=[_info(r, now) for r in rows])


def revoke(session: Session, token_id: str) -> TokenInfo:
    """Revoke a token: the next request that carries it is refused."""
    token_id = token_id.strip()  # pasted from `memsys token list`
    if not token_id:
        raise InvalidInput("A token id cannot be empty (`memsys token list` shows them)")
    row = session.get(ApiToken, token_id)
    if row is None:
        raise NotFound(f"Token not found: {token_id} (`memsys token list` shows them)")
    now = datetime.now(UTC)
    if row.revoked_at is None:
        row.revoked_at = now
        session.flush()
    return _info(row, now)


def authenticate(session: Session, secret: str) -> Scope | None:
    """The scope of an active token with this secret, or None."""
    if not secret.startswith(SECRET_PREFIX):
        return None
    row = session.scalar(select(ApiToken).where(ApiToken.secret_sha256 == digest(secret)))
    now = datetime.now(UTC)
    if row is None or row.revoked_at is not None:
        return None
    if row.expires_at is not None and row.expires_at <= now:
        return None
    if row.last_used_at is None or now - row.last_used_at > TOUCH_EVERY:
        session.execute(update(ApiToken).where(ApiToken.id == row.id).values(last_used_at=now))
    patterns = tuple(row.namespaces)
    return Scope(
        read=patterns,
        write=patterns if row.mode == "read-write" else (),
        token_id=row.id,
    )
