"""Scoped API tokens: who may read or write which namespaces over HTTP.

Only the sha256 of a token's secret is kept (the secret is shown once, at creation). The
table has no namespace column and is never visible to a scoped session (the tenant role
holds no privilege on it): a token cannot list or read other tokens.
"""

from datetime import datetime

from sqlalchemy import CheckConstraint, String
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.orm import Mapped, mapped_column

from memsys.models.base import Base, in_list, timestamp_column

TOKEN_MODES = ("read", "read-write")


class ApiToken(Base):
    __tablename__ = "api_token"
    __table_args__ = (CheckConstraint(in_list("mode", TOKEN_MODES), name="mode"),)

    id: Mapped[str] = mapped_column(String(40), primary_key=True)
    name: Mapped[str] = mapped_column(String(128))
    # hex sha256 of the secret: a lookup by hash, never a comparison of secrets in Python
    secret_sha256: Mapped[str] = mapped_column(String(64), unique=True)
    namespaces: Mapped[list[str]] = mapped_column(ARRAY(String(130)))
    mode: Mapped[str] = mapped_column(String(16))
    created_at: Mapped[datetime] = timestamp_column()
    expires_at: Mapped[datetime | None] = timestamp_column(nullable=True)
    revoked_at: Mapped[datetime | None] = timestamp_column(nullable=True)
    last_used_at: Mapped[datetime | None] = timestamp_column(nullable=True)
