"""Declarative base, naming convention and the column helpers every model shares."""

from datetime import datetime

from sqlalchemy import DateTime, MetaData, func, text
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from memsys.vocabulary import LIFECYCLES

__all__ = ["LIFECYCLES", "Base", "in_list", "timestamp_column"]

NAMING_CONVENTION = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_N_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)


def timestamp_column(nullable: bool = False, on_update: bool = False) -> Mapped[datetime]:
    """A timestamptz column; `on_update` sets it to now() whenever the ORM updates the row."""
    if nullable:
        return mapped_column(DateTime(timezone=True), nullable=True)
    return mapped_column(
        DateTime(timezone=True),
        nullable=False,
        server_default=text("now()"),
        onupdate=func.now() if on_update else None,
    )


def in_list(column: str, values: tuple[str, ...]) -> str:
    """SQL for a CHECK constraint that keeps `column` within `values`."""
    quoted = ", ".join(f"'{v}'" for v in values)
    return f"{column} IN ({quoted})"
