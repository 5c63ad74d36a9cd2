"""`memsys graph`: the memory server's JSONL file in and out, and the verbs from the shell."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from memsys.errors import InvalidInput
from tests.cli.helpers import fails, run, run_json

SERVER_FILE = [
    {"type": "entity", "name": "Alice", "entityType": "person", "observations": ["Likes tea"]},
    {"type": "entity", "name": "Acme", "entityType": "company", "observations": []},
    {"type": "relation", "from": "Alice", "to": "Acme", "relationType": "works_at"},
]


def test_import_then_export_gives_the_same_file(tmp_path: Path) -> None:
    source = tmp_path / "memory.jsonl"
    source.write_text("".join(json.dumps(line) + "\n" for line in SERVER_FILE))
    imported = run("graph", "import", str(source))
    assert imported.exit_code == 0 and "2 new entities, 1 new relations" in imported.stdout
    again = run("graph", "import", str(source))  # idempotent: nothing new
    assert "0 new entities, 0 new relations" in again.stdout
    target = tmp_path / "out.jsonl"
    assert run("graph", "export", str(target)).exit_code == 0
    exported = [json.loads(line) for line in target.read_text().splitlines()]
    assert exported == SERVER_FILE


def test_an_observation_holding_a_unicode_line_break_round_trips(tmp_path: Path) -> None:
    """The file was split with splitlines(): an observation holding U+2028 (written raw, as
    JSON allows) cut its line in two, and memsys refused the file it had exported."""
    held = "Said \u2028 then \u0085 then \x1c and more"
    source = tmp_path / "memory.jsonl"
    lines = [{**SERVER_FILE[0], "observations": [held]}, *SERVER_FILE[1:]]
    source.write_text("".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines))
    imported = run("graph", "import", str(source))
    assert imported.exit_code == 0 and "2 new entities" in imported.stdout, imported.output
    target = tmp_path / "out.jsonl"
    assert run("graph", "export", str(target)).exit_code == 0
    assert target.read_text() == source.read_text()
    again = run("graph", "import", str(target))  # memsys reads what it wrote
    assert again.exit_code == 0 and "0 new entities" in again.stdout, again.output


def test_graph_verbs_from_the_shell() -> None:
    people = json.dumps([{"name": "Bo", "entityType": "person", "observations": ["Runs CI"]}])
    assert run_json("graph", "create-entities", "--entities", people)["entities"][0]["name"] == "Bo"
    assert run_json("graph", "open", "Bo")["entities"][0]["observations"] == ["Runs CI"]
    assert run_json("graph", "search", "who runs the CI")["entities"][0]["name"] == "Bo"
    assert "--entities is not valid JSON" in fails("graph", "create-entities", "--entities", "[{")
    assert run_json("graph", "delete-entities", "Bo")["success"] is True
    assert run_json("graph", "read")["entities"] == []


def test_graph_import_and_export_answer_json_as_every_command_does(tmp_path: Path) -> None:
    # README: "--json: every command that answers with data"; these two had no --json.
    source = tmp_path / "memory.jsonl"
    source.write_text("".join(json.dumps(line) + "\n" for line in SERVER_FILE))
    imported = run_json("graph", "import", str(source))
    assert imported["entities_created"] == 2 and imported["relations_created"] == 1
    exported = run_json("graph", "export", str(tmp_path / "out.jsonl"))
    assert exported == {"path": str(tmp_path / "out.jsonl"), "entities": 2, "relations": 1}
    # To stdout the file itself is the output: asking for JSON besides is refused.
    assert "--json" in fails("graph", "export", "-", "--json")


def test_a_file_the_running_server_refuses_for_its_size_is_named_so(
    monkeypatch: pytest.MonkeyPatch, embedder: Any
) -> None:
    # The server answers 413 on the Content-Length and closes: the CLI, still sending the
    # file, read a reset connection ("The running server did not answer", exit 1) instead
    import socket
    import threading

    import uvicorn

    from memsys.api.app import create_app
    from memsys.cli import remote
    from memsys.config import get_settings

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = uvicorn.Server(
        uvicorn.Config(
            create_app(background=False), host="127.0.0.1", port=port, log_level="warning"
        )
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        while not server.started:
            thread.join(0.05)
        monkeypatch.setattr(remote, "server_url", lambda: f"http://127.0.0.1:{port}")
        monkeypatch.setattr(get_settings(), "max_import_bytes", 1000)
        line = json.dumps({"type": "entity", "name": "n", "entityType": "t", "observations": []})
        body = (line + "\n").encode() * 200_000  # megabytes: far more than a socket buffers
        with pytest.raises(InvalidInput, match="over the 1000-byte limit of a graph import"):
            remote.post_file("/graph/import", body, {})
        small = (line + "\n").encode()  # the same way, a file within the limit is imported
        assert remote.post_file("/graph/import", small, {})["entities_created"] == 1
    finally:
        server.should_exit = True
        thread.join(10)


def test_a_100_continue_that_arrives_in_two_pieces_still_gets_the_file(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A server (or a proxy in front of it) whose "HTTP/1.1 100 Continue" arrives in two
    # segments: the CLI took the first piece for the whole answer, kept the file back and
    # waited for a final answer the server, waiting for the file, never sent
    import socket
    import threading
    import time

    from memsys.cli import remote

    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    received: list[bytes] = []

    def serve() -> None:
        conn, _ = listener.accept()
        with conn:
            conn.settimeout(10)
            head = b""
            while b"\r\n\r\n" not in head:
                head += conn.recv(4096)
            _, _, early = head.partition(b"\r\n\r\n")
            conn.sendall(b"HTTP/1.1 1")
            time.sleep(0.3)
            conn.sendall(b"00 Continue\r\n\r\n")
            body = early
            while len(body) < 5:
                body += conn.recv(4096)
            received.append(body)
            answer = b'{"entities_created": 1}'
            conn.sendall(
                b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                + f"Content-Length: {len(answer)}\r\nConnection: close\r\n\r\n".encode()
                + answer
            )

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    monkeypatch.setattr(remote, "server_url", lambda: f"http://127.0.0.1:{port}")
    monkeypatch.setattr(remote, "CALL_TIMEOUT", 5.0)  # the bug waits out this whole wait
    try:
        assert remote.post_file("/graph/import", b"hello", {}) == {"entities_created": 1}
        assert received == [b"hello"]
    finally:
        thread.join(10)
        listener.close()


def test_an_answer_that_is_not_http_is_said_so_not_a_traceback(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Something else listens on the announced port (the server gone, the port reused): its
    # answer is no HTTP status line, and http.client's BadStatusLine escaped the CLI
    import socket
    import threading

    from memsys.cli import remote
    from memsys.errors import DatabaseUnavailable

    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]

    def serve() -> None:
        conn, _ = listener.accept()
        with conn:
            conn.recv(4096)
            conn.sendall(b"SSH-2.0-OpenSSH_9.6\r\n")

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    monkeypatch.setattr(remote, "server_url", lambda: f"http://127.0.0.1:{port}")
    try:
        with pytest.raises(DatabaseUnavailable, match="The running server did not answer"):
            remote.post_file("/graph/import", b"hello", {})
    finally:
        thread.join(10)
        listener.close()
