"""What lifecycle and learning change, kept so that ranking can be replayed as of any time.

`memory_change` holds one row per change of a ranking signal of a memory (stage, confidence,
content when it is archived or rekindled, lossy mark, pinned flag): the value before and
after, written in the transaction of the change. The value of a signal as of T is the
`old_value` of its first change after T, or the current value when nothing changed since.
`memory_access` is the access log: one row per memory handed to a caller (`hits` > 1 only
for counts carried over from before the log existed); `counted` says whether `fold` has
added it to `chunk.access_count` yet (reads only log; maintenance folds), so the counter is
the log's running sum up to the last fold. Like the event log, neither table has a foreign key:
history outlives what it describes, and only a purge removes it.
"""

from datetime import datetime
from typing import Any

from sqlalchemy import BigInteger, Boolean, CheckConstraint, Identity, Index, Integer, String, text
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import Mapped, mapped_column

from memsys.models.base import Base, in_list, timestamp_column

CHANGE_FIELDS = ("stage", "confidence", "content", "lossy", "pinned")


class MemoryChange(Base):
    __tablename__ = "memory_change"
    __table_args__ = (
        CheckConstraint(in_list("field", CHANGE_FIELDS), name="field"),
        Index("ix_memory_change_memory", "namespace", "memory_id", "field", "changed_at"),
        Index("ix_memory_change_changed_at", "changed_at"),
    )

    namespace: Mapped[str] = mapped_column(String(128), primary_key=True)
    id: Mapped[int] = mapped_column(BigInteger, Identity(), primary_key=True)
    memory_id: Mapped[str] = mapped_column(String(40))
    field: Mapped[str] = mapped_column(String(16))
    old_value: Mapped[Any] = mapped_column(JSONB, nullable=True)
    new_value: Mapped[Any] = mapped_column(JSONB, nullable=True)
    operation: Mapped[str] = mapped_column(String(64))
    changed_at: Mapped[datetime] = timestamp_column()


class MemoryAccess(Base):
    __tablename__ = "memory_access"
    __table_args__ = (
        Index("ix_memory_access_memory", "namespace", "memory_id", "accessed_at"),
        Index("ix_memory_access_accessed_at", "accessed_at"),
        Index(
            "ix_memory_access_uncounted",
            "namespace",
            "memory_id",
            postgresql_where=text("NOT counted"),
        ),
    )

    namespace: Mapped[str] = mapped_column(String(128), primary_key=True)
    id: Mapped[int] = mapped_column(BigInteger, Identity(), primary_key=True)
    memory_id: Mapped[str] = mapped_column(String(40))
    hits: Mapped[int] = mapped_column(Integer, server_default="1")
    counted: Mapped[bool] = mapped_column(Boolean, server_default="false")
    accessed_at: Mapped[datetime] = timestamp_column()
