"""Preferences (KV). Every change is a new version row; the current one has valid_to NULL."""

from datetime import datetime
from typing import Any

from sqlalchemy import CheckConstraint, ForeignKey, Index, Integer, String, text
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import Mapped, mapped_column

from memsys.models.base import LIFECYCLES, Base, in_list, timestamp_column


class Preference(Base):
    __tablename__ = "preference"
    __table_args__ = (
        CheckConstraint(in_list("lifecycle", LIFECYCLES), name="lifecycle"),
        # O(1) read of the current value by (namespace, key).
        Index(
            "uq_preference_current",
            "namespace",
            "key",
            unique=True,
            postgresql_where=text("valid_to IS NULL"),
        ),
    )

    namespace: Mapped[str] = mapped_column(
        String(128), ForeignKey("namespace.name"), primary_key=True
    )
    key: Mapped[str] = mapped_column(String(256), primary_key=True)
    version: Mapped[int] = mapped_column(Integer, primary_key=True)
    value: Mapped[Any] = mapped_column(JSONB)
    lifecycle: Mapped[str] = mapped_column(String(16), server_default="personal")
    valid_from: Mapped[datetime] = timestamp_column()
    valid_to: Mapped[datetime | None] = timestamp_column(nullable=True)
