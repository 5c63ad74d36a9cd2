"""The database schema's version, driven through Alembic from code: upgrade, downgrade,
current and head for `memsys db …`, `memsys serve` and `memsys mcp`, from a checkout or a
wheel. (Pydantic input and output models are `memsys.schemas`.)"""

import io
import logging
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Connection

from memsys.db import get_engine

_PACKAGE = Path(__file__).resolve().parent
log = logging.getLogger(__name__)


def migrations_dir() -> Path:
    """The wheel ships migrations as package data; a checkout has them at the top level."""
    for candidate in (_PACKAGE / "_migrations", _PACKAGE.parent / "migrations"):
        if (candidate / "env.py").exists():
            return candidate
    raise RuntimeError("memsys migrations are missing from this installation")


def alembic_config(connection: Connection | None = None) -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", str(migrations_dir()))
    if connection is not None:
        cfg.attributes["connection"] = connection
    return cfg


def head() -> str | None:
    return ScriptDirectory.from_config(alembic_config()).get_current_head()


def current() -> str | None:
    with get_engine().connect() as conn:
        return MigrationContext.configure(conn).get_current_revision()


def upgrade_sql(revision: str = "head", start: str | None = None) -> str:
    """The SQL `upgrade(revision)` would run from `start` (default: the database's current
    revision), from Alembic's offline mode; nothing is executed."""
    start = start or current() or "base"
    buffer = io.StringIO()
    cfg = Config(output_buffer=buffer)
    cfg.set_main_option("script_location", str(migrations_dir()))
    if start == ScriptDirectory.from_config(cfg).get_revision(revision).revision:
        return ""
    command.upgrade(cfg, f"{start}:{revision}", sql=True)
    return buffer.getvalue()


def behind(revision: str, start: str | None) -> bool:
    """Whether `revision` is an ancestor of `start` (an upgrade to it would do nothing: the
    database is past it)."""
    if start is None or revision in ("head", "heads"):
        return False
    from alembic.script.revision import RevisionError
    from alembic.util import CommandError

    script = ScriptDirectory.from_config(alembic_config())
    try:
        target = script.get_revision(revision)
        if target is None or target.revision == start:
            return False
        return any(r.revision == target.revision for r in script.iterate_revisions(start, "base"))
    except (CommandError, RevisionError):  # a revision this memsys does not know: the
        # upgrade reports it (one line, exit 2)
        return False


def upgrade(revision: str = "head") -> None:
    with get_engine().begin() as conn:
        command.upgrade(alembic_config(conn), revision)


def downgrade(revision: str) -> None:
    with get_engine().begin() as conn:
        command.downgrade(alembic_config(conn), revision)


def ensure_current() -> None:
    """Bring the database to the newest schema (used by `memsys serve` and `memsys mcp`);
    one log line when it did something, none otherwise."""
    before, newest = current(), head()
    if before != newest:
        upgrade("head")
        log.warning("memsys: database schema upgraded from %s to %s", before or "empty", newest)
