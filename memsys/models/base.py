"""Declarative base, naming convention and the column helpers every model shares."""

from datetime import UTC, datetime

from sqlalchemy import DateTime, MetaData, String, text
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

NAMING_CONVENTION = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_N_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

LIFECYCLES = ("personal", "project", "session")


def utcnow() -> datetime:
    return datetime.now(UTC)


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)


def namespace_column() -> Mapped[str]:
    """The tenancy column: first in every primary key so a sharded Postgres can split by it."""
    return mapped_column(String(128), primary_key=True)


def timestamp_column(nullable: bool = False) -> Mapped[datetime]:
    if nullable:
        return mapped_column(DateTime(timezone=True), nullable=True)
    return mapped_column(DateTime(timezone=True), nullable=False, server_default=text("now()"))


def in_list(column: str, values: tuple[str, ...]) -> str:
    """SQL for a CHECK constraint that keeps `column` within `values`."""
    quoted = ", ".join(f"'{v}'" for v in values)
    return f"{column} IN ({quoted})"
