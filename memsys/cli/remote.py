"""Hand a CLI call to a running `memsys serve` on the same MEMSYS_HOME and database.

The server already holds the model and a warm connection pool, so `memsys recall` answers
in the time of one HTTP round trip instead of loading the model. The call goes to the
operation's REST route (memsys.operations) and its answer is read into the same output
model, so rendering and --json are identical. When no server is announced
(MEMSYS_HOME/server.json), its process is gone, it serves another database, or it cannot be
reached, the CLI runs the call itself. MEMSYS_CLI_LOCAL=1 always runs it in process.

Only the standard library is used here: the point is not to import the database layer.
"""

from __future__ import annotations

import http.client
import json
import os
import select
import socket
import time
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

from memsys import errors, ids
from memsys.operations import Operation, Rest
from memsys.schemas import Output
from memsys.schemas.common import check_values

PATH_FIELDS = ("file_path", "dir_path", "source_file")  # resolved here, not in the server's cwd
CONNECT_TIMEOUT = 2.0
CALL_TIMEOUT = 600.0  # indexing a large file through the server can take minutes

_STATUS_ERRORS: dict[int, type[errors.MemsysError]] = {
    404: errors.NotFound,
    409: errors.Conflict,
    403: errors.Protected,
    503: errors.DatabaseUnavailable,
}


def server_url() -> str | None:
    """The running server for this MEMSYS_HOME and database, if any."""
    from memsys import runtime_info
    from memsys.config import get_settings

    if get_settings().cli_local:
        return None

    info = runtime_info.running_server()
    if info is None or info.get("database") != runtime_info.database_identity():
        return None
    host = runtime_info.reachable_host(info)
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{info['port']}"


def _route(op: Operation, data: dict[str, Any]) -> Rest:
    """The route a call takes: the operation's first, but for an id another route's word
    shadows there (GET /memories/count is the count) its next route of the same method,
    which reads any id (/memories/by-id/{memory_id})."""
    rest = op.rest[0]
    if rest.path == "/memories/{memory_id}" and data.get("memory_id") in ids.ROUTE_WORDS:
        return next(r for r in op.rest[1:] if r.method == rest.method)
    return rest


def _request(op: Operation, data: dict[str, Any], base: str) -> urllib.request.Request:
    rest = _route(op, data)
    data = dict(data)
    for name, value in data.items():  # what cannot travel (a lone surrogate): as in process
        try:
            check_values(value, name)
        except ValueError as exc:
            raise errors.InvalidInput(str(exc)) from None
    for name in PATH_FIELDS:
        if isinstance(data.get(name), str) and data[name].strip():
            data[name] = os.path.abspath(os.path.expanduser(data[name]))
    nested = data.get("filters")  # a search's --source-file travels inside its filters
    if isinstance(nested, dict) and isinstance(nested.get("source_file"), str):
        source = nested["source_file"]
        if source.strip():
            data["filters"] = {**nested, "source_file": os.path.abspath(os.path.expanduser(source))}
    path = rest.path
    for name in [p.split(":")[0] for p in _path_params(path)]:
        raw = str(data.pop(name, ""))
        if not raw.strip():  # an empty id would make the path another route's
            raise errors.InvalidInput(f"{name} cannot be empty")
        value = urllib.parse.quote(raw, safe="")
        path = path.replace(f"{{{name}:path}}", value).replace(f"{{{name}}}", value)
    query = {k: data.pop(k) for k in list(data) if k in rest.query}
    if rest.method in ("GET", "DELETE"):
        query, data = {**query, **data}, {}
    url = f"{base}/v1{path}"
    if query:
        pairs = {k: json.dumps(v) if isinstance(v, bool) else v for k, v in query.items()}
        url += "?" + urllib.parse.urlencode(pairs, doseq=True)
    body = json.dumps(data).encode() if rest.method in ("POST", "PUT") else None
    return urllib.request.Request(
        url, data=body, headers=_headers("application/json"), method=rest.method
    )


def _headers(content_type: str) -> dict[str, str]:
    from memsys.config import get_settings

    headers = {"Content-Type": content_type, "Accept": "application/json"}
    token = get_settings().api_token
    if token:
        headers["Authorization"] = f"Bearer {token}"
    return headers


def _path_params(path: str) -> list[str]:
    return [part[1:-1] for part in path.split("/") if part.startswith("{")]


# Calls that read a file the user names: a path outside the server's MEMSYS_INDEX_ROOTS (it
# reads only there, for any caller) is read in the CLI's process, as the user's own.
OWN_FILES = {"index_file"}


def call(op: Operation, data: dict[str, Any]) -> Output | None:
    """The operation's result from the running server, or None to run it in process."""
    base = server_url()
    if base is None:
        return None
    try:
        answer = _send(_request(op, data, base))
    except errors.InvalidInput as exc:
        if op.name in OWN_FILES and errors.OUTSIDE_ROOTS in str(exc):
            return None  # the server may not read it for a caller; this user may
        raise
    return None if answer is None else op.output.model_validate(answer)


def post_file(path: str, body: bytes, query: dict[str, str]) -> Any | None:
    """POST a file's bytes to the running server's `path` (under /v1): its JSON answer, or
    None to do the work in process."""
    base = server_url()
    if base is None:
        return None
    url = f"{base}/v1{path}" + (f"?{urllib.parse.urlencode(query)}" if query else "")
    headers = _headers("application/octet-stream")
    try:
        status, reason, answer = _post_when_agreed(url, body, headers)
    except ConnectionRefusedError:
        return None  # announced but not listening: nothing was sent, do it here
    except OSError as exc:
        raise errors.DatabaseUnavailable(f"The running server did not answer: {exc}") from None
    except http.client.HTTPException:  # another program on its port, or cut off mid-answer
        raise errors.DatabaseUnavailable(
            "The running server did not answer: what came back is no whole HTTP answer"
        ) from None
    if status >= 400:
        raise _refused(status, reason, answer, url)
    return json.loads(answer)


def _post_when_agreed(url: str, body: bytes, headers: dict[str, str]) -> tuple[int, str, bytes]:
    """POST `body` once the server agreed to read it (Expect: 100-continue): a server that
    refuses the request on its headers (a file over its MEMSYS_MAX_IMPORT_BYTES: 413) answers
    before a byte of the body is sent. Sent whole at once, the body met a connection the
    server had closed after its answer, and the CLI read a reset instead of the reason."""
    where = urllib.parse.urlsplit(url)
    connection = http.client.HTTPConnection(where.hostname or "", where.port, timeout=CALL_TIMEOUT)
    try:
        target = where.path + (f"?{where.query}" if where.query else "")
        connection.putrequest("POST", target, skip_accept_encoding=True)
        sent = {**headers, "Content-Length": str(len(body)), "Expect": "100-continue"}
        for name, value in sent.items():
            connection.putheader(name, value)
        connection.endheaders()
        if connection.sock is None or _continue(connection.sock):
            connection.send(body)
        response = connection.getresponse()
        return response.status, response.reason, response.read()
    finally:
        connection.close()


# A server that does not answer Expect (a proxy that drops it) gets the body after this.
CONTINUE_WAIT_S = 5.0


def _continue(sock: socket.socket) -> bool:
    """Whether to send the body: the server said 100 Continue (http.client skips that
    interim answer when it reads the final one) or nothing within CONTINUE_WAIT_S; not when
    it answered already (its refusal, which http.client then reads). The status line can
    come in pieces: a piece is waited on, not taken for the whole."""
    seen = b""  # peeked at, left for http.client: "HTTP/1.1 100" is 12 bytes
    deadline = time.monotonic() + CONTINUE_WAIT_S
    while len(seen) < 12:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([sock], [], [], left)[0]:
            break
        more = sock.recv(12, socket.MSG_PEEK)
        if not more:  # closed before a byte: the body's send says so
            break
        if more == seen:  # readable with nothing new: the rest of the line is on its way
            time.sleep(0.01)
        seen = more
    return b"100".startswith(seen[9:12])  # nothing, 100, or a status not yet read


def _refused(status: int, reason: str, answer: bytes, url: str) -> errors.MemsysError:
    """The error of an answer 4xx/5xx: the server's own message, as a MemsysError."""
    try:
        message = json.loads(answer).get("error") or reason
    except (ValueError, AttributeError):
        message = reason
    if status == 401:  # the CLI sends no header of its own: say where the call went
        where = urllib.parse.urlsplit(url)
        message = (
            f"{message}: the memsys serve at {where.scheme}://{where.netloc} on this "
            "MEMSYS_HOME requires a token; set MEMSYS_API_TOKEN to its admin token or a "
            "scoped token's secret, or MEMSYS_CLI_LOCAL=1 to run the command in process"
        )
    return _STATUS_ERRORS.get(status, errors.InvalidInput)(str(message))


def _send(request: urllib.request.Request) -> Any | None:
    try:
        with urllib.request.urlopen(request, timeout=CALL_TIMEOUT) as response:
            return json.loads(response.read())
    except urllib.error.HTTPError as exc:
        raise _refused(exc.code, str(exc.reason), exc.read(), request.full_url) from None
    except urllib.error.URLError as exc:
        if isinstance(exc.reason, ConnectionRefusedError):
            return None  # announced but not listening: nothing was sent, do it here
        raise errors.DatabaseUnavailable(
            f"The running server did not answer: {exc.reason}"
        ) from None


def run(op: Operation, data: dict[str, Any]) -> Output:
    """The operation's result: from the running server when there is one, else in process."""
    result = call(op, data)
    if result is not None:
        return result
    from memsys.services.indexing import callers_own_paths

    with callers_own_paths():
        return op.run(data)
