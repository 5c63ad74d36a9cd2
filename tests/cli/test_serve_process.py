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
from typing import Any

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

        _the_cli_hands_calls_to_the_server(home, port)

        busy = subprocess.run(  # from another home: this one has its server
            [*_memsys(), "serve", "--port", str(port)],
            env=_env(home / "another-home"),
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


def _the_cli_hands_calls_to_the_server(home: Path, port: int) -> None:
    """With a server up, CLI calls go to it: shown by a CLI whose own embedding provider is
    broken, which could not have embedded anything itself."""
    env = {**_env(home), "MEMSYS_EMBEDDING_PROVIDER": "no-such-provider"}

    def cli(*args: str, local: bool = False, cwd: Path | None = None) -> Any:
        run_env = {**env, "MEMSYS_CLI_LOCAL": "1"} if local else env
        return subprocess.run(
            [*_memsys(), *args], env=run_env, capture_output=True, text=True, timeout=120, cwd=cwd
        )

    stored = cli("store", "Deploys happen on Tuesdays after the stand-up", "--json")
    assert stored.returncode == 0, stored.stderr
    memory_id = json.loads(stored.stdout)["id"]
    recalled = cli("recall", "when do we deploy", "--json")
    assert json.loads(recalled.stdout)["memories"][0]["id"] == memory_id
    assert json.loads(cli("count", "--json").stdout)["count"] == 1
    assert cli("pref", "set", "editor/theme", "dark").returncode == 0  # a key with a slash
    assert "dark" in cli("pref", "get", "editor/theme").stdout
    # The server's errors are the CLI's errors: one line, exit 2.
    empty = cli("recall", "   ")
    assert empty.returncode == 2 and empty.stderr.strip() == "error: Query cannot be empty"
    # What cannot go into a URL is refused as in process, not a traceback (an empty id
    # reached the list route).
    for args in (("get", "bad\udcff"), ("pref", "get", "k\udcff"), ("get", "")):
        refused = cli(*args)
        assert refused.returncode == 2 and len(refused.stderr.splitlines()) == 1, refused.stderr
    assert "not valid Unicode" in cli("get", "bad\udcff").stderr
    assert cli("get", "").stderr.strip() == "error: memory_id cannot be empty"
    # A relative path is the CLI's, not the server's working directory.
    folder = Path(tempfile.mkdtemp(prefix="msv-doc-"))
    (folder / "notes.md").write_text("# Notes\n\nThe cache is flushed hourly.\n")
    indexed = cli("index-file", "notes.md", "--json", cwd=folder)
    assert json.loads(indexed.stdout)["source_file"] == str(folder / "notes.md"), indexed.stderr
    shutil.rmtree(folder, ignore_errors=True)
    # A file outside the server's MEMSYS_INDEX_ROOTS (the temporary folder and the checkout
    # here) is the user's own: the CLI reads it itself, not refused (this CLI's own model is
    # broken, so reading it ends at the embedding: proof it was not the server's refusal).
    outside = Path(tempfile.mkdtemp(prefix="msv-own-", dir=Path.home()))
    try:
        (outside / "ops.md").write_text("# Ops\n\nThe deploy runs on Tuesdays.\n")
        own = cli("index-file", str(outside / "ops.md"))
        assert own.returncode == 2 and "outside the folders" not in own.stderr, own.stderr
        assert own.stderr.strip().startswith("error: MEMSYS_EMBEDDING_PROVIDER"), own.stderr
    finally:
        shutil.rmtree(outside, ignore_errors=True)
    # In process, that CLI cannot embed: the answers above came from the server.
    assert cli("recall", "when do we deploy", local=True).returncode != 0


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


def test_first_use_of_an_embedded_home_creates_the_schema(home: Path) -> None:
    env = {**_env(home), "MEMSYS_CLI_LOCAL": "1"}
    first = subprocess.run(
        [*_memsys(), "count", "--json"], env=env, capture_output=True, text=True, timeout=180
    )
    assert first.returncode == 0, first.stderr
    assert json.loads(first.stdout)["count"] == 0  # stdout stays the JSON alone
    assert "creating the database schema" in first.stderr
    stored = subprocess.run(
        [*_memsys(), "store", "The tour works on a fresh folder", "--json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert stored.returncode == 0 and "creating" not in stored.stderr, stored.stderr


def test_a_second_server_on_one_home_and_a_port_out_of_range_are_refused(
    tmp_path: Path,
) -> None:
    """A second `memsys serve` on a home took over server.json and removed it when it
    stopped: the CLI lost the first. Port -1 or 10**30 was a traceback, port 0 announced
    port 0."""
    with socket.socket() as first:  # the first server: alive and listening
        first.bind(("127.0.0.1", 0))
        first.listen()
        port = first.getsockname()[1]
        announced = {"pid": os.getpid(), "port": port, "url": f"http://127.0.0.1:{port}"}
        (tmp_path / "server.json").write_text(json.dumps(announced))
        second = subprocess.run(
            [*_memsys(), "serve", "--port", str(_free_port())],
            env=_env(tmp_path),
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert second.returncode == 2, second.stderr
        assert second.stderr.startswith("error: memsys serve already runs on this MEMSYS_HOME")
        assert json.loads((tmp_path / "server.json").read_text())["pid"] == os.getpid()
        # A server.json a crash left behind, its pid another process's now: not a server.
        # (Refused here only for the port, which the socket above holds.)
        (tmp_path / "server.json").write_text(json.dumps({**announced, "port": _free_port()}))
        stale = subprocess.run(
            [*_memsys(), "serve", "--port", str(port)],
            env=_env(tmp_path),
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert stale.stderr.startswith(f"error: Cannot listen on 127.0.0.1:{port}"), stale.stderr
    for port in ("-1", "0", str(10**30)):
        bad = subprocess.run(
            [*_memsys(), "serve", "--port", port],
            env=_env(tmp_path / "other"),
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert bad.returncode == 2 and len(bad.stderr.splitlines()) == 1, bad.stderr
        assert "--port" in bad.stderr


def test_sigterm_stops_the_server_though_a_client_stalls_in_the_middle_of_a_request(
    home: Path,
) -> None:
    """A client that sent half a request body and then nothing (or stopped reading a streamed
    export) kept `memsys serve` from stopping on SIGTERM: uvicorn waited for its connection
    to close, with no limit, and PostgreSQL stayed up with it."""
    port = _free_port()
    proc = subprocess.Popen(
        [*_memsys(), "serve", "--port", str(port)],
        env=_env(home),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"http://127.0.0.1:{port}/v1/health", timeout=2).status_code == 200:
                    break
            time.sleep(0.3)
        pg_pid = int((home / "pgdata" / "postmaster.pid").read_text().splitlines()[0])
        with socket.create_connection(("127.0.0.1", port)) as stalled:
            head = (
                f"POST /v1/import?dry_run=true HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
                "Content-Type: application/json\r\nContent-Length: 1000\r\n"
                "Expect: 100-continue\r\n\r\n"
            )
            stalled.sendall(head.encode())
            stalled.settimeout(60)
            # uvicorn says "100 Continue" once the route reads the body: it is waiting for it.
            assert stalled.recv(1024).startswith(b"HTTP/1.1 100")
            stalled.sendall(b"{")  # 1 of the 1000 bytes announced, then nothing
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(timeout=60) == 0  # with the client still connected
        deadline = time.monotonic() + 30
        while _alive(pg_pid) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not _alive(pg_pid), "the embedded PostgreSQL outlived memsys serve"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_a_cli_call_the_server_refuses_for_its_token_says_which_variable_to_set(
    home: Path,
) -> None:
    """It said only "Missing, wrong, expired or revoked bearer token": a CLI user gives no
    header, and did not know the call had gone to a server, nor which variable to set."""
    port = _free_port()
    env = {**_env(home), "MEMSYS_API_TOKEN": "s3cret"}
    proc = subprocess.Popen(
        [*_memsys(), "serve", "--port", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                httpx.get(f"http://127.0.0.1:{port}/v1/health", timeout=2)
                break
            except httpx.HTTPError:
                time.sleep(0.3)
        without = {k: v for k, v in env.items() if k != "MEMSYS_API_TOKEN"}
        refused = subprocess.run(
            [*_memsys(), "count"], env=without, capture_output=True, text=True, timeout=60
        )
        assert refused.returncode == 2 and len(refused.stderr.splitlines()) == 1
        assert f"the memsys serve at http://127.0.0.1:{port}" in refused.stderr, refused.stderr
        assert "MEMSYS_API_TOKEN" in refused.stderr and "MEMSYS_CLI_LOCAL=1" in refused.stderr
        given = subprocess.run(
            [*_memsys(), "count"], env=env, capture_output=True, text=True, timeout=60
        )
        assert given.returncode == 0 and "0 memories" in given.stdout, given.stderr
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
