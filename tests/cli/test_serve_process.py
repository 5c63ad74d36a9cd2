"""`memsys serve` as a real process: announces itself, answers `status`, stops on SIGTERM."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.cli.test_startup import _memsys


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.fixture
def home() -> Iterator[Path]:
    # Short path: the embedded server's socket must fit in ~107 bytes.
    path = Path(tempfile.mkdtemp(prefix="msv-", dir="/tmp"))
    yield path
    postmaster = path / "pgdata" / "postmaster.pid"
    if postmaster.exists():  # a failed test must not leave a server running
        with contextlib.suppress(ProcessLookupError, ValueError):
            os.kill(int(postmaster.read_text().splitlines()[0]), signal.SIGTERM)
    shutil.rmtree(path, ignore_errors=True)


def _env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "MEMSYS_DATABASE_URL"}
    return {**env, "MEMSYS_HOME": str(home)}


def test_sigterm_stops_the_server_and_its_embedded_postgres(home: Path) -> None:
    port = _free_port()
    proc = subprocess.Popen(
        [*_memsys(), "serve", "--port", str(port)],
        env=_env(home),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 120
        health = None
        while time.monotonic() < deadline:
            try:
                health = httpx.get(f"http://127.0.0.1:{port}/v1/health", timeout=2).json()
                break
            except httpx.HTTPError:
                time.sleep(0.3)
        # The model loads before the server listens: the first answer already says ready.
        assert health is not None and health["status"] == "ok" and health["model"] == "ready"

        status = subprocess.run(
            [*_memsys(), "status", "--json"],
            env=_env(home),
            capture_output=True,
            text=True,
            timeout=60,
        )
        report = json.loads(status.stdout)
        assert report["server"]["running"] and report["server"]["port"] == port
        assert report["server"]["health"]["status"] == "ok"
        assert report["database"]["kind"] == "embedded" and report["database"]["running"]

        busy = subprocess.run(
            [*_memsys(), "serve", "--port", str(port)],
            env=_env(home),
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert busy.returncode == 2
        assert busy.stderr.startswith(f"error: Cannot listen on 127.0.0.1:{port}")
        assert len(busy.stderr.strip().splitlines()) == 1 and busy.stdout == ""

        postmaster = home / "pgdata" / "postmaster.pid"
        pg_pid = int(postmaster.read_text().splitlines()[0])
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
        deadline = time.monotonic() + 30
        while _alive(pg_pid) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not _alive(pg_pid), "the embedded PostgreSQL outlived memsys serve"
        assert not (home / "server.json").exists()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_status_and_version_touch_nothing(tmp_path: Path) -> None:
    env = {**os.environ, "MEMSYS_HOME": str(tmp_path)}
    env.pop("MEMSYS_DATABASE_URL", None)
    version = subprocess.run(
        [*_memsys(), "--version"], env=env, capture_output=True, text=True, timeout=60
    )
    assert version.returncode == 0 and version.stdout.startswith("memsys ")
    # A stale announcement (a killed server) is not reported as running.
    (tmp_path / "server.json").write_text(json.dumps({"pid": 2**22 + 7, "port": 1, "url": "x"}))
    status = subprocess.run(
        [*_memsys(), "status", "--json"], env=env, capture_output=True, text=True, timeout=60
    )
    report = json.loads(status.stdout)
    assert report["home"] == str(tmp_path) and report["server"] == {"running": False}
    assert report["database"] == {
        "kind": "embedded",
        "data_dir": str(tmp_path / "pgdata"),
        "initialised": False,
        "running": False,
    }
    assert sorted(p.name for p in tmp_path.iterdir()) == ["server.json"]


def test_recall_path_embeds_without_importing_torch() -> None:
    probe = (
        "import sys; from memsys.embeddings import embed_query, get_embedder; "
        "v = embed_query('how do we deploy'); "
        "print(get_embedder().provider, len(v), 'torch' in sys.modules, "
        "'sentence_transformers' in sys.modules)"
    )
    done = subprocess.run(
        [__import__("sys").executable, "-c", probe],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert done.stdout.split() == ["onnx", "384", "False", "False"], done.stderr
