"""Where a running `memsys serve` announces itself: MEMSYS_HOME/server.json.

`memsys serve` writes {pid, host, port, url, started_at} once it listens and removes the file
when it stops; `memsys status` reads it. A file whose pid is gone (the server was killed) is
stale and reported as "not running".
"""

from __future__ import annotations

import hashlib
import json
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from memsys.config import get_settings

FILE_NAME = "server.json"


def server_file() -> Path:
    return get_settings().home.expanduser() / FILE_NAME


def database_identity() -> str:
    """Which database this process's settings name (no secret in it): the CLI hands a call
    to a running server only when both use the same one."""
    settings = get_settings()
    target = settings.database_url or f"embedded:{settings.home.expanduser().resolve()}"
    return hashlib.sha256(target.encode()).hexdigest()[:16]


def announce(host: str, port: int) -> Path:
    shown = f"[{host}]" if ":" in host else host
    info = {
        "pid": os.getpid(),
        "database": database_identity(),
        "host": host,
        "port": port,
        "url": f"http://{shown}:{port}",
        "started_at": datetime.now(UTC).isoformat(),
    }
    path = server_file()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(info) + "\n")
    tmp.replace(path)
    return path


def withdraw() -> None:
    """Remove the file if it is this process's own."""
    info = running_server()
    if info is not None and info.get("pid") == os.getpid():
        server_file().unlink(missing_ok=True)


def pid_alive(pid: int) -> bool:
    """Whether a process with this pid exists (a pid owned by someone else counts) and has
    not ended: a zombie — killed, its status not yet read by its parent (a supervisor, a
    container's init that reaps late) — is dead."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    return not _zombie(pid)


def _zombie(pid: int) -> bool:
    """Linux: the process's state in /proc/<pid>/stat is Z. Elsewhere: not known, False."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rpartition(")")[2].split()[:1] == ["Z"]  # the name in (…) may hold spaces


def running_server() -> dict[str, Any] | None:
    """The announced server if its process is alive, else None."""
    try:
        info = json.loads(server_file().read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(info, dict) or not isinstance(info.get("pid"), int):
        return None
    return info if pid_alive(info["pid"]) else None


def reachable_host(info: dict[str, Any]) -> str:
    """The address to reach an announced server at: a wildcard bind (0.0.0.0, ::) is
    reached on loopback."""
    host = str(info.get("host") or "127.0.0.1")
    return "127.0.0.1" if host in ("0.0.0.0", "::") else host
