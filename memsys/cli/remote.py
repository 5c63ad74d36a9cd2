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

import json
import os
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
    return _send(urllib.request.Request(url, data=body, headers=headers, method="POST"))


def _send(request: urllib.request.Request) -> Any | None:
    try:
        with urllib.request.urlopen(request, timeout=CALL_TIMEOUT) as response:
            return json.loads(response.read())
    except urllib.error.HTTPError as exc:
        try:
            message = json.loads(exc.read()).get("error") or exc.reason
        except ValueError:
            message = str(exc.reason)
        if exc.code == 401:  # the CLI sends no header of its own: say where the call went
            where = urllib.parse.urlsplit(request.full_url)
            message = (
                f"{message}: the memsys serve at {where.scheme}://{where.netloc} on this "
                "MEMSYS_HOME requires a token; set MEMSYS_API_TOKEN to its admin token or a "
                "scoped token's secret, or MEMSYS_CLI_LOCAL=1 to run the command in process"
            )
        raise _STATUS_ERRORS.get(exc.code, errors.InvalidInput)(str(message)) from None
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
