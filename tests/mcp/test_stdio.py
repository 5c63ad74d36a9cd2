"""`memsys mcp` as a separate process, driven by the MCP SDK's own stdio client."""

from __future__ import annotations

import contextlib
import json
import os
import queue
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from anyio.from_thread import BlockingPortal, start_blocking_portal
from mcp import ClientSession, StdioServerParameters, stdio_client

from tests.conftest import table_counts

S001 = json.loads((Path(__file__).parent / "s001_input_schemas.json").read_text())["tools"]
SLICE_TOOLS = {
    *S001,
    "memory_list_namespaces",
    "preference_set",
    "preference_get",
    "preference_list",
    "preference_history",
    "preference_delete",
    "memory_store_batch",
    "memory_apply",
    "memory_outcome",
    "validation_history",
    "memory_relate",
    "memory_edge_forget",
    "memory_inspect_graph",
    "debug_trace",
    "debug_query_log",
    "debug_feedback",
    "decay",
    "debug_rehydrate",
    "memory_pin",
    "memory_unpin",
    "memory_get",
    "memory_brief",
    "debug_why",
    "debug_replay",
    "debug_error_attribution",
    "debug_monitoring_alerts",
    "debug_prune_traces",
    "memory_query",
    # the official memory server's tools (tests/mcp/test_memory_server.py)
    "create_entities",
    "create_relations",
    "add_observations",
    "delete_entities",
    "delete_observations",
    "delete_relations",
    "read_graph",
    "search_nodes",
    "open_nodes",
    "memory_observe",
    "memory_detect_contradictions",
    "memory_check_supersedes",
    "memory_backfill_edges",
    "add_episode",
    "search_entities",
    "search_edges",
    "query_graph",
    "build_context",
    "fact_set",
    "fact_get",
    "fact_history",
    "fact_verify",
    # memory as code (memsys.operations.vault)
    "memory_export",
    "memory_import",
    "memory_diff",
}
READ_ONLY = {
    "validation_history",
    "memory_analyze_health",
    "memory_get",
    "memory_brief",
    "memory_inspect_graph",
    "debug_trace",
    "debug_query_log",
    "debug_why",
    "debug_replay",
    "debug_error_attribution",
    "debug_monitoring_alerts",
    "memory_query",
    "read_graph",
    "search_nodes",
    "open_nodes",
    "search_entities",
    "search_edges",
    "query_graph",
    "build_context",
    "fact_get",
    "fact_history",
    "search",
    "search_with_filters",
    "search_with_budget",
    "memory_recall",
    "memory_context",
    "memory_count",
    "memory_list",
    "memory_list_namespaces",
    "get_index_stats",
    "preference_get",
    "preference_list",
    "preference_history",
    "memory_diff",
}
DESTRUCTIVE = {
    "index_directory",  # drops the files gone from its folder
    "decay",
    "debug_prune_traces",
    "memory_forget",
    "delete_chunks",
    "delete_file",
    "clear_index",
    "preference_delete",
    "memory_edge_forget",
    "delete_entities",
    "delete_observations",
    "delete_relations",
}


def server_params() -> StdioServerParameters:
    script = Path(sys.executable).parent / "memsys"
    return StdioServerParameters(
        command=str(script), args=["mcp"], env={**os.environ, "PYTHONUNBUFFERED": "1"}
    )


def raw_server(stderr: int = subprocess.DEVNULL) -> subprocess.Popen[bytes]:
    """`memsys mcp` spoken to as raw JSON-RPC lines on its stdin and stdout."""
    return subprocess.Popen(
        [str(Path(sys.executable).parent / "memsys"), "mcp"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=stderr,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )


def envelope(result) -> dict[str, Any]:  # type: ignore[no-untyped-def]
    text = json.loads(result.content[0].text)
    assert result.structured_content == text
    assert result.is_error == (not text["success"])
    return text


def types_of(prop: dict[str, Any]) -> set[str]:
    if "type" in prop:
        return {prop["type"]}
    if "$ref" in prop:  # a nested model
        return {"object"}
    return {"object" if "$ref" in t else t.get("type") for t in prop.get("anyOf", [])}


class Stdio:
    """One `memsys mcp` process for the module, driven from sync tests through a portal."""

    def __init__(self, portal: BlockingPortal, session: ClientSession) -> None:
        self.portal, self.session = portal, session

    def call(self, name: str, args: dict[str, Any]) -> Any:
        return self.portal.call(lambda: self.session.call_tool(name, args))

    def envelope(self, name: str, args: dict[str, Any]) -> dict[str, Any]:
        return envelope(self.call(name, args))

    def tools(self) -> dict[str, Any]:
        listed = self.portal.call(self.session.list_tools)
        return {t.name: t for t in listed.tools}

    def settle(self) -> None:
        """Let the server write what its last answers left (traces, access counts: written
        after the answer, memsys.deferred): any call that is not a retrieval waits for them."""
        assert self.envelope("memory_count", {})["success"]


@contextlib.asynccontextmanager
async def _connected() -> Any:
    async with (
        stdio_client(server_params()) as (read, write),
        ClientSession(read, write) as session,
    ):
        with anyio.fail_after(120):
            await session.initialize()
        yield session


@pytest.fixture(scope="module")
def mcp() -> Iterator[Stdio]:
    with start_blocking_portal() as portal, portal.wrap_async_context_manager(_connected()) as s:
        yield Stdio(portal, s)


def check_schema(name: str, ours: dict[str, Any]) -> None:
    theirs = S001[name]
    assert sorted(ours.get("required", [])) == sorted(theirs.get("required", [])), name
    for param, spec in theirs.get("properties", {}).items():
        mine = ours["properties"].get(param)
        assert mine is not None, f"{name}.{param} missing"
        assert spec["type"] in types_of(mine), f"{name}.{param}: {types_of(mine)}"
        # S001 gives search_with_budget.max_tokens both "required" and a default; a default
        # means nothing on a required parameter, so defaults are compared on optional ones.
        if "default" in spec and param not in theirs.get("required", []):
            assert mine.get("default") == spec["default"], f"{name}.{param} default"
        for bound in ("minimum", "maximum"):
            if bound in spec:
                assert mine.get(bound) == spec[bound], f"{name}.{param} {bound}"
        if "enum" in spec:
            assert set(spec["enum"]) <= set(mine.get("enum", [])), f"{name}.{param} enum"
    if name == "search_with_filters":
        filters = ours["$defs"]["Filters"]["properties"]
        assert set(filters) == {"namespace", "doc_type", "source_file"}


def test_tools_match_s001(mcp: Stdio) -> None:
    tools = mcp.tools()
    assert set(tools) == SLICE_TOOLS
    for name in S001:
        check_schema(name, tools[name].input_schema)
    for name, t in tools.items():
        assert t.description, name
        assert t.annotations.read_only_hint == (name in READ_ONLY), name
        assert t.annotations.destructive_hint == (name in DESTRUCTIVE), name


BOUNDS = ("minimum", "maximum", "enum", "maxItems", "maxLength", "minLength")


def bounds(prop: dict[str, Any]) -> dict[str, Any]:
    """A property's bounds, from its own schema or its non-null `anyOf` branch."""
    found = {k: prop[k] for k in BOUNDS if k in prop}
    for branch in prop.get("anyOf", []):
        found |= {k: branch[k] for k in BOUNDS if k in branch}
    return found


def test_mcp_schemas_publish_the_bounds_openapi_publishes(mcp: Stdio) -> None:
    """An agent reads the tool's input schema: a range or a set of values memsys enforces
    is stated there as in OpenAPI (memsys still refuses with its own message)."""
    from memsys.operations import BY_NAME

    tools = mcp.tools()
    compared = 0
    for name, tool in tools.items():
        op = BY_NAME[name]
        if op.input is None:
            continue
        full = op.input.model_json_schema(by_alias=True)["properties"]
        for param, prop in tool.input_schema.get("properties", {}).items():
            if param in full and bounds(full[param]):
                assert bounds(prop) == bounds(full[param]), f"{name}.{param}"
                compared += 1
    assert compared > 50
    listed = tools["memory_list"].input_schema["properties"]
    assert "access_count" in listed["order_by"]["enum"] and listed["limit"]["maximum"] == 1000
    assert mcp.envelope("memory_list", {"limit": 1001})["error"].startswith("limit must be")


PYTEST_PREFERENCE = {"content": "User prefers pytest over unittest", "memory_type": "preference"}


def test_memory_store_and_recall(mcp: Stdio) -> None:
    stored = mcp.envelope(
        "memory_store",
        {"content": "User prefers pytest over unittest", "memory_type": "preference"},
    )
    assert stored["success"] and stored["data"]["id"].startswith("mem_")
    again = mcp.envelope("memory_store", {"content": "User prefers pytest over unittest"})
    assert again["data"]["duplicate"] and again["data"]["id"] == stored["data"]["id"]
    recalled = mcp.envelope("memory_recall", {"query": "test framework"})
    assert recalled["data"]["memories"][0]["id"] == stored["data"]["id"]


def test_memory_store_takes_a_lifecycle_as_rest_the_cli_and_a_batch_item_do(mcp: Stdio) -> None:
    """MCP's memory_store hid `lifecycle`, refusing it as an unknown argument, while REST,
    `memsys store --lifecycle` and every item of MCP's own memory_store_batch took it."""
    from memsys.db import session_scope
    from memsys.models import Chunk

    stored = mcp.envelope(
        "memory_store", {"content": "The build server is in Oslo", "lifecycle": "personal"}
    )
    assert stored["success"], stored
    with session_scope() as s:
        row = s.get(Chunk, ("global", stored["data"]["id"]))
        assert row is not None and row.lifecycle == "personal"


def test_an_integral_number_is_an_integer_as_over_rest(mcp: Stdio) -> None:
    """JSON Schema's integer includes 5.0 and REST takes it (memsys.api.operations.strict);
    MCP's strict int refused it ("Input should be a valid integer")."""
    mcp.envelope("memory_store", {"content": "The build cache lives on the NAS"})
    recalled = mcp.envelope("memory_recall", {"query": "build cache", "n_results": 2.0})
    assert recalled["success"], recalled
    assert recalled["data"]["memories"][0]["content"] == "The build cache lives on the NAS"


def test_index_file_and_search(mcp: Stdio, tmp_path: Path) -> None:
    doc = tmp_path / "guide.md"
    doc.write_text("# Guide\n\n## Retries\n\nThe client retries three times with jitter.\n")
    indexed = mcp.envelope("index_file", {"file_path": str(doc)})
    assert indexed["data"]["chunks_created"] == 1
    found = mcp.envelope("search", {"query": "how many retries"})
    assert found["data"]["results"][0]["metadata"]["header_path"] == "Guide > Retries"
    within = mcp.envelope("search_with_budget", {"query": "retries", "max_tokens": 20})
    assert within["data"]["tokens_used"] <= 20


def test_memory_context_and_namespaces(mcp: Stdio, tmp_path: Path) -> None:
    mcp.envelope(
        "memory_store",
        {"content": "User prefers pytest over unittest", "memory_type": "preference"},
    )
    doc = tmp_path / "guide.md"
    doc.write_text("# Guide\n\nShort.\n")
    mcp.envelope("index_file", {"file_path": str(doc)})
    ctx = mcp.envelope("memory_context", {"token_budget": 50})
    assert "### Preferences" in ctx["data"]["context"]
    namespaces = mcp.envelope("memory_list_namespaces", {})
    assert {n["namespace"] for n in namespaces["data"]["namespaces"]} == {"global", "default"}


def test_preference_set_and_get(mcp: Stdio) -> None:
    pref = mcp.envelope("preference_set", {"key": "editor", "value": {"name": "vim"}})
    assert pref["data"]["version"] == 1
    got = mcp.envelope("preference_get", {"key": "editor"})
    assert got["data"]["value"] == {"name": "vim"}


def test_memory_forget_keeps_golden_rules(mcp: Stdio) -> None:
    rule = mcp.envelope(
        "memory_store", {"content": "Never push to main", "memory_type": "golden_rule"}
    )["data"]["id"]
    kept = mcp.envelope("memory_forget", {"memory_id": rule})
    assert kept["data"]["deleted_count"] == 0 and kept["data"]["protected_ids"] == [rule]


BIG = "word " * 7000  # 34,999 characters once stripped: over the 32,000 limit
BAD_INPUT = [
    ("search", {"query": "   "}, "Query cannot be empty"),
    ("memory_recall", {"query": "x", "n_results": 500}, "n_results must be between 1"),
    ("memory_store", {"content": "x", "memory_type": "vibe"}, "Invalid memory type: vibe"),
    ("memory_store", {"content": "x", "importance": 1.5}, "importance must be between"),
    ("memory_store", {"content": BIG}, "Content is too long: 34999 characters"),
    ("memory_forget", {"input_value": "  "}, "Query cannot be empty"),
    ("clear_index", {"confirm": False}, "Safety check: Set confirm=True to delete all"),
    ("index_file", {"file_path": "{tmp}/nope.md"}, "File not found:"),
    ("index_file", {"file_path": "{tmp}/notes.rtf"}, "Unsupported file type: .rtf"),
    ("index_directory", {"dir_path": "{tmp}/gone"}, "Directory not found:"),
    ("index_directory", {"dir_path": ""}, "Directory path cannot be empty"),
    ("memory_count", {"namespace": "project:ghost"}, "Namespace not found: project:ghost"),
    ("search_with_budget", {"query": "x"}, "Invalid arguments: max_tokens: Field required"),
    ("search_with_filters", {"query": "x", "filters": {"memory_type": "fact"}}, "memory_type"),
    ("memory_count", {"namespace": "global", "colour": "red"}, "Unknown argument(s)"),
    ("memory_store", {"content": "x", "unknown_arg": 1}, "Unknown argument(s)"),
    ("memory_recall", {"query": "x", "n_results": "5"}, "Invalid arguments: n_results"),
    ("memory_recall", {"query": "x", "n_results": True}, "Invalid arguments: n_results"),
    ("memory_recall", {"query": "x", "n_results": 2.5}, "Invalid arguments: n_results"),
    ("index_directory", {"dir_path": "{tmp}", "recursive": "yes"}, "Invalid arguments"),
    # A number is no time (the SDK read 123 as 1970-01-01T00:02:03 and the call stored it).
    ("memory_store", {"content": "x", "reference_time": 123}, "Invalid arguments: reference"),
    ("preference_get", {"key": "style", "as_of": 0}, "Invalid arguments: as_of"),
    ("memory_brief", {"kind": "episodes", "day": 0}, "Invalid arguments: day"),
    ("memory_store", {"content": "x", "reference_time": "123"}, "Invalid reference_time: '123'"),
]


@pytest.mark.parametrize(("name", "args", "message"), BAD_INPUT, ids=[b[0] for b in BAD_INPUT])
def test_bad_input_is_an_error_envelope_and_writes_nothing(
    mcp: Stdio, tmp_path: Path, name: str, args: dict[str, Any], message: str
) -> None:
    (tmp_path / "notes.rtf").write_text("{\\rtf1 not a supported format}")
    args = {k: v.format(tmp=tmp_path) if isinstance(v, str) else v for k, v in args.items()}
    mcp.settle()
    before = table_counts()
    result = mcp.envelope(name, args)
    assert result == {"success": False, "error": result["error"]}, name
    assert message in result["error"], (name, result["error"])
    mcp.settle()
    assert table_counts() == before


def test_an_unknown_tool_is_an_error(mcp: Stdio) -> None:
    assert mcp.call("no_such_tool", {}).is_error


def test_a_call_whose_json_the_sdk_cannot_read_is_answered_not_dropped() -> None:
    """A lone surrogate escape (half an emoji) or ~200-level nesting made the SDK's reader
    drop the line: the client waited for an answer forever. Raw JSON-RPC, as a client that
    cuts strings by code unit sends it (the SDK's own client cannot encode a surrogate)."""
    proc = raw_server()
    answers: queue.Queue[dict[str, Any]] = queue.Queue()
    threading.Thread(
        target=lambda: [answers.put(json.loads(line)) for line in proc.stdout or ()], daemon=True
    ).start()

    def ask(ident: int, method: str, params: str) -> dict[str, Any]:
        line = f'{{"jsonrpc":"2.0","id":{ident},"method":"{method}","params":{params}}}\n'
        assert proc.stdin is not None
        proc.stdin.write(line.encode("utf-8", "surrogateescape"))  # \udce9: the byte 0xE9
        proc.stdin.flush()
        while True:
            answer = answers.get(timeout=60)  # queue.Empty: no answer, the old hang
            if answer.get("id") == ident:
                return answer

    try:
        client = '"clientInfo":{"name":"t","version":"0"}'
        ask(1, "initialize", f'{{"protocolVersion":"2025-06-18","capabilities":{{}},{client}}}')
        assert proc.stdin is not None
        proc.stdin.write(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
        deep = '{"a":' * 200 + "1" + "}" * 200
        cases = {
            2: ('{"content":"half an emoji \\ud83d"}', "content is not valid Unicode"),
            3: (f'{{"content":"deep","metadata":{deep}}}', "nested more than 20 levels"),
            # unanswered too: a raw control character, more digits than Python converts, a
            # byte that is not UTF-8 (it was stored as U+FFFD without a word)
            8: ('{"content":"a\x00b"}', "invalid control character at character"),
            9: ('{"content":"x","importance":' + "9" * 5_000 + "}", "too many digits"),
            10: ('{"content":"caf\udce9"}', "not UTF-8 text"),
        }
        for ident, (arguments, said) in cases.items():
            result = ask(ident, "tools/call", f'{{"name":"memory_store","arguments":{arguments}}}')
            body = result["result"]["structuredContent"]
            assert body["success"] is False and said in body["error"], body
        # Any other request the SDK cannot read is answered too (it waited forever).
        others = {
            5: ("resources/read", '{"uri":"memsys://half \\ud83d"}'),
            6: ("tools/list", '{"cursor":"\\ud83d"}'),
            7: ("prompts/get", f'{{"name":"x","arguments":{deep}}}'),
        }
        for ident, (method, params) in others.items():
            refused = ask(ident, method, params)
            assert refused["error"]["code"] == -32602, refused  # invalid parameters
        count = ask(4, "tools/call", '{"name":"memory_count","arguments":{}}')
        assert count["result"]["structuredContent"]["success"] is True  # still serving
    finally:
        if proc.stdin is not None:
            proc.stdin.close()
        proc.wait(timeout=60)


def test_a_key_given_twice_is_refused_naming_it() -> None:
    """The SDK's JSON reader kept the last of two values of a key: `content` given twice
    stored the second without a word, where REST and the CLI refuse such JSON."""
    proc = raw_server()
    assert proc.stdin is not None and proc.stdout is not None

    def ask(line: str) -> dict[str, Any]:
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write((line + "\n").encode())
        proc.stdin.flush()
        return json.loads(proc.stdout.readline())  # type: ignore[no-any-return]

    try:
        client = json.dumps(CLIENT)
        init = f'{{"protocolVersion":"2025-06-18","capabilities":{{}},"clientInfo":{client}}}'
        ask(f'{{"jsonrpc":"2.0","id":1,"method":"initialize","params":{init}}}')
        proc.stdin.write(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
        call = '{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"memory_store",'
        twice = ask(call + '"arguments":{"content":"first","content":"second"}}}')
        assert twice["id"] == 2 and twice["result"]["isError"] is True
        assert "the key 'content' is given twice" in twice["result"]["structuredContent"]["error"]
        nested = ask(
            call.replace('"id":2', '"id":3') + '"arguments":{"content":"x","tags":[{}],'
            '"metadata":{"a":{"b":1,"b":2}}}}}'
        )
        assert "the key 'b' is given twice" in nested["result"]["structuredContent"]["error"]
        assert table_counts()["chunk"] == 0
    finally:
        proc.stdin.close()
        proc.wait(timeout=60)


def test_a_request_that_is_not_json_rpc_2_0_is_answered_not_dropped() -> None:
    """The SDK dropped, unanswered, a request without "jsonrpc": "2.0", one whose params
    are not an object, a line cut short and a batch (a JSON array, which MCP no longer
    takes): the client waited for an answer under its id forever."""
    proc = raw_server()
    answers: queue.Queue[dict[str, Any]] = queue.Queue()
    threading.Thread(
        target=lambda: [answers.put(json.loads(line)) for line in proc.stdout or ()], daemon=True
    ).start()

    def send(line: str) -> None:
        assert proc.stdin is not None
        proc.stdin.write((line + "\n").encode())
        proc.stdin.flush()

    def answer() -> dict[str, Any]:
        return answers.get(timeout=60)  # queue.Empty: no answer, the old hang

    try:
        init = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": CLIENT}
        send(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init}))
        assert answer()["id"] == 1
        send('{"jsonrpc":"2.0","method":"notifications/initialized"}')
        for ident, line in (
            (2, '{"id":2,"method":"tools/list"}'),
            (3, '{"jsonrpc":"1.0","id":3,"method":"tools/list"}'),
            (4, '{"jsonrpc":"2.0","id":4,"method":"tools/list"'),  # cut short
        ):
            send(line)
            refused = answer()
            assert refused["id"] == ident and refused["error"]["code"] == -32602, refused
        send('{"jsonrpc":"2.0","id":5,"method":"tools/call","params":["memory_count"]}')
        called = answer()
        assert called["id"] == 5
        assert "params are not an object" in called["result"]["structuredContent"]["error"]
        call = {"name": "memory_count", "arguments": {}}
        send(
            json.dumps(
                [
                    {"jsonrpc": "2.0", "id": 6, "method": "ping"},
                    {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": call},
                ]
            )
        )
        first, second = answer(), answer()
        assert first["id"] == 6 and first["error"]["code"] == -32602
        assert second["id"] == 7
        assert "batch" in second["result"]["structuredContent"]["error"]
        send('{"jsonrpc":"2.0","id":8,"method":"ping"}')
        assert answer() == {"jsonrpc": "2.0", "id": 8, "result": {}}  # still serving
    finally:
        if proc.stdin is not None:
            proc.stdin.close()
        proc.wait(timeout=60)


def test_the_line_filter_answers_the_right_request_and_never_stops_the_reader() -> None:
    """A line deeper than Python's own reader is answered under its top-level id (a nested
    "id" in the arguments is not it); a line that cannot be rewritten goes on as it came
    (an exception there ended the server); the answer itself is a line the SDK reads."""
    from memsys.mcp.server import _sdk_reads
    from memsys.mcp.stdio import UNREADABLE, readable

    deep = "[" * 1200 + "]" * 1200
    call = '"method":"tools/call","params":{"name":"memory_store","arguments":'
    line = f'{{"jsonrpc":"2.0",{call}{{"metadata":{{"id":7}},"x":{deep}}}}},"id":3}}'
    rewritten = json.loads(readable(line, _sdk_reads))
    assert (
        rewritten["id"] == 3 and "nested too deeply" in rewritten["params"]["arguments"][UNREADABLE]
    )
    for broken in (line.replace('"id":3', '"id":"\\q"'), line.replace("3}", "3" * 5000 + "}")):
        assert readable(broken, _sdk_reads) == broken  # left to the SDK, no exception
    surrogate = f'{{"jsonrpc":"2.0","id":4,{call}{{"\\ud83d":"x"}}}}}}'
    answer = readable(surrogate, _sdk_reads)
    assert _sdk_reads(answer) and "not valid Unicode" in answer


def test_sigint_stops_memsys_mcp_in_the_middle_of_a_call_and_nothing_is_written() -> None:
    """Ctrl+C (SIGINT) of `memsys mcp` whose stdin stays open, while a call waits for a lock
    the test holds: the process never exited (its event loop cannot unwind past the thread
    reading stdin), and the interrupted call went on to commit once the lock was free."""
    from memsys.db import get_engine
    from tests.conftest import lock_waiters, until

    proc = raw_server()
    assert proc.stdin is not None and proc.stdout is not None

    def send(message: dict[str, Any]) -> None:
        assert proc.stdin is not None
        proc.stdin.write((json.dumps({"jsonrpc": "2.0", **message}) + "\n").encode())
        proc.stdin.flush()

    holder = get_engine().connect()
    try:
        params = {"protocolVersion": "2025-06-18", "capabilities": {}}
        send({"id": 1, "method": "initialize", "params": {**params, "clientInfo": CLIENT}})
        assert json.loads(proc.stdout.readline())["id"] == 1
        send({"method": "notifications/initialized"})
        holder.exec_driver_sql("LOCK TABLE preference IN EXCLUSIVE MODE")  # held on purpose
        call = {"name": "preference_set", "arguments": {"key": "editor", "value": "vim"}}
        send({"id": 2, "method": "tools/call", "params": call})
        assert until(lambda: lock_waiters() == 1, 60)  # the call waits for the lock
        proc.send_signal(signal.SIGINT)  # stdin still open: a stop, not the end of input
        assert proc.wait(timeout=30) == 0
    finally:
        holder.rollback()
        holder.close()
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=30)
    # The stopped call's backend, given the lock, finds its client gone and rolls back.
    assert until(lambda: lock_waiters() == 0 and _others_busy() == 0, 30)
    assert table_counts()["preference"] == 0


CLIENT = {"name": "test", "version": "0"}


def _others_busy() -> int:
    """Backends of the test database, other than the one asking, inside a transaction."""
    from sqlalchemy import text

    from memsys.db import get_engine

    with get_engine().connect() as conn:
        return int(
            conn.scalar(
                text(
                    "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                    "AND pid <> pg_backend_pid() AND state IN ('active', 'idle in transaction')"
                )
            )
            or 0
        )


def test_a_line_over_the_limit_is_refused_unread_and_the_next_one_served() -> None:
    """stdin was read a line at a time however long the line: one request without an end
    held the whole of it in memory. A line past the limit is answered under its id (a tool
    call with the tool's error) and dropped as it comes; the lines after it are served."""
    import io

    from memsys.mcp.stdio import UNREADABLE, lines_of

    call = '{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"memory_store",'
    long_call = call + '"arguments":{"content":"' + "x" * 5_000 + '"}}}\n'
    long_list = '{"jsonrpc":"2.0","id":"l","method":"tools/list","params":{"cursor":"' + "y" * 5_000
    count = '{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"memory_count"}}\n'
    stdin = io.BytesIO((long_call + long_list + '"}}\n' + count).encode())

    async def read() -> list[str]:
        return [line async for line in lines_of(stdin, 1_000)]

    refused_call, refused_list, served = anyio.run(read)
    refusal = json.loads(refused_call)
    assert refusal["id"] == 7 and refusal["params"]["name"] == ""
    reason = refusal["params"]["arguments"][UNREADABLE]
    assert "over the 1000-byte limit of one MCP message" in reason
    listing = json.loads(refused_list)
    assert listing["id"] == "l" and listing["method"] == "tools/list"
    assert "over the 1000-byte limit" in listing["params"]["_meta"]
    assert served == count


def test_a_line_over_the_limit_whose_id_comes_last_is_answered_under_it() -> None:
    """The TypeScript SDK writes a request's id after its params ({"method", "params",
    "jsonrpc", "id"}): of a line past the limit only the opening was read for the id, so
    such a request was dropped unanswered and its client waited for ever."""
    import io

    from memsys.mcp.stdio import UNREADABLE, lines_of

    call = '{"method":"tools/call","params":{"name":"memory_store","arguments":{"content":"'
    long_call = call + "x" * 5_000 + '"}},"jsonrpc":"2.0","id":"req-9"}\r\n'
    long_list = '{"method":"tools/list","params":{"cursor":"' + "y" * 5_000 + '"},"id":12}\n'
    stdin = io.BytesIO((long_call + long_list).encode())

    async def read() -> list[str]:
        return [line async for line in lines_of(stdin, 1_000)]

    refused_call, refused_list = map(json.loads, anyio.run(read))
    assert refused_call["id"] == "req-9" and refused_call["method"] == "tools/call"
    assert "over the 1000-byte limit" in refused_call["params"]["arguments"][UNREADABLE]
    assert refused_list["id"] == 12
    assert "over the 1000-byte limit" in refused_list["params"]["_meta"]


def test_a_refused_request_of_any_method_says_why_without_a_traceback() -> None:
    """Outside tools/call the client read only the SDK's words: "Invalid request parameters"
    (which, and memsys's reason for a line it could not read, dropped), "Method not found",
    and for a prompt's unknown argument "Error rendering prompt" under code 0, with a
    traceback in the log as for a crash."""
    proc = raw_server(stderr=subprocess.PIPE)
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None

    def ask(ident: int, method: str, params: Any) -> dict[str, Any]:
        line = json.dumps({"jsonrpc": "2.0", "id": ident, "method": method, "params": params})
        proc.stdin.write(line.encode() + b"\n")  # type: ignore[union-attr]
        proc.stdin.flush()  # type: ignore[union-attr]
        answer: dict[str, Any] = json.loads(proc.stdout.readline())  # type: ignore[union-attr]
        assert answer["id"] == ident
        return answer

    try:
        early = ask(1, "tools/list", {})["error"]
        assert "before the session is initialized: send initialize" in early["message"]
        ask(
            2,
            "initialize",
            {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": CLIENT},
        )
        proc.stdin.write(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
        cases = {
            "foo/bar": ({}, -32601, "Method not served by memsys: foo/bar"),
            "tools/list": (
                {"cursor": 5},
                -32602,
                "Invalid parameters for tools/list: params.cursor: Input should be a valid string",
            ),
            "resources/read": (
                {},
                -32602,
                "Invalid parameters for resources/read: params.uri: Field required",
            ),
            "prompts/get": (
                {"name": "nope"},
                -32602,
                "Unknown prompt: nope (prompts: core_memory)",
            ),
        }
        for ident, (method, (params, code, message)) in enumerate(cases.items(), start=3):
            error = ask(ident, method, params)["error"]
            assert (error["code"], error["message"]) == (code, message), error
        extra = ask(9, "prompts/get", {"name": "core_memory", "arguments": {"x": "y"}})["error"]
        assert extra["message"] == (
            "Unknown argument(s) for the prompt core_memory: x (it takes: no arguments)"
        )
        # memsys's own reason for a line the SDK cannot read reaches the client too
        proc.stdin.write(
            b'{"jsonrpc":"2.0","id":10,"method":"tools/list","params":{"cursor":"\\ud83d"}}\n'
        )
        proc.stdin.flush()
        cut = json.loads(proc.stdout.readline())
        assert cut["id"] == 10 and "not valid Unicode" in cut["error"]["message"], cut
    finally:
        proc.stdin.close()
        proc.wait(timeout=60)
    assert "Traceback" not in proc.stderr.read().decode()
