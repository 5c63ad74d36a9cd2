"""Namespaces: the unit of tenancy. Writes create them; reading an unknown one is an error."""

from datetime import datetime

from sqlalchemy import String
from sqlalchemy.orm import Mapped, mapped_column

from memsys.models.base import Base, timestamp_column


class Namespace(Base):
    __tablename__ = "namespace"

    name: Mapped[str] = mapped_column(String(128), primary_key=True)
    created_at: Mapped[datetime] = timestamp_column()
