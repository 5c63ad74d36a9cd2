"""`memsys mcp` as a separate process, driven by the MCP SDK's own stdio client."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import anyio
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
}
READ_ONLY = {
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
}
DESTRUCTIVE = {"memory_forget", "delete_chunks", "delete_file", "clear_index"}


def server_params() -> StdioServerParameters:
    script = Path(sys.executable).parent / "memsys"
    return StdioServerParameters(
        command=str(script), args=["mcp"], env={**os.environ, "PYTHONUNBUFFERED": "1"}
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


async def session_run(check) -> None:  # type: ignore[no-untyped-def]
    with anyio.fail_after(120):
        async with (
            stdio_client(server_params()) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            await check(session)


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


def test_tools_match_s001_and_work_over_stdio(tmp_path) -> None:
    doc = tmp_path / "guide.md"
    doc.write_text("# Guide\n\n## Retries\n\nThe client retries three times with jitter.\n")
    notes = tmp_path / "notes.rtf"
    notes.write_text("{\\rtf1 not a supported format}")

    async def check(session: ClientSession) -> None:
        tools = {t.name: t for t in (await session.list_tools()).tools}
        assert set(tools) == SLICE_TOOLS
        for name in S001:
            check_schema(name, tools[name].input_schema)
        for name, t in tools.items():
            assert t.description, name
            assert t.annotations.read_only_hint == (name in READ_ONLY), name
            assert t.annotations.destructive_hint == (name in DESTRUCTIVE), name

        stored = envelope(
            await session.call_tool(
                "memory_store",
                {"content": "User prefers pytest over unittest", "memory_type": "preference"},
            )
        )
        assert stored["success"] and stored["data"]["id"].startswith("mem_")
        again = envelope(
            await session.call_tool(
                "memory_store", {"content": "User prefers pytest over unittest"}
            )
        )
        assert again["data"]["duplicate"] and again["data"]["id"] == stored["data"]["id"]
        recalled = envelope(await session.call_tool("memory_recall", {"query": "test framework"}))
        assert recalled["data"]["memories"][0]["id"] == stored["data"]["id"]

        indexed = envelope(await session.call_tool("index_file", {"file_path": str(doc)}))
        assert indexed["data"]["chunks_created"] == 1
        found = envelope(await session.call_tool("search", {"query": "how many retries"}))
        assert found["data"]["results"][0]["metadata"]["header_path"] == "Guide > Retries"
        within = envelope(
            await session.call_tool("search_with_budget", {"query": "retries", "max_tokens": 20})
        )
        assert within["data"]["tokens_used"] <= 20
        ctx = envelope(await session.call_tool("memory_context", {"token_budget": 50}))
        assert "### Preferences" in ctx["data"]["context"]
        namespaces = envelope(await session.call_tool("memory_list_namespaces", {}))
        assert {n["namespace"] for n in namespaces["data"]["namespaces"]} == {"global", "default"}
        pref = envelope(
            await session.call_tool("preference_set", {"key": "editor", "value": {"name": "vim"}})
        )
        assert pref["data"]["version"] == 1
        got = envelope(await session.call_tool("preference_get", {"key": "editor"}))
        assert got["data"]["value"] == {"name": "vim"}

        rule = envelope(
            await session.call_tool(
                "memory_store", {"content": "Never push to main", "memory_type": "golden_rule"}
            )
        )["data"]["id"]
        kept = envelope(await session.call_tool("memory_forget", {"memory_id": rule}))
        assert kept["data"]["deleted_count"] == 0 and kept["data"]["protected_ids"] == [rule]

        big = "word " * 7000  # 34,999 characters once stripped: over the 32,000 limit
        errors = [
            ("search", {"query": "   "}, "Query cannot be empty"),
            ("memory_recall", {"query": "x", "n_results": 500}, "n_results must be between 1"),
            ("memory_store", {"content": "x", "memory_type": "vibe"}, "Invalid memory type: vibe"),
            ("memory_store", {"content": "x", "importance": 1.5}, "importance must be between"),
            ("memory_store", {"content": big}, "Content is too long: 34999 characters"),
            ("memory_forget", {"input_value": "  "}, "Query cannot be empty"),
            ("clear_index", {"confirm": False}, "Safety check: Set confirm=True to delete all"),
            ("index_file", {"file_path": str(tmp_path / "nope.md")}, "File not found:"),
            ("index_file", {"file_path": str(notes)}, "Unsupported file type: .rtf"),
            ("index_directory", {"dir_path": str(tmp_path / "gone")}, "Directory not found:"),
            ("index_directory", {"dir_path": ""}, "Directory path cannot be empty"),
            ("memory_count", {"namespace": "project:ghost"}, "Namespace not found: project:ghost"),
            ("search_with_budget", {"query": "x"}, "Invalid arguments: max_tokens: Field required"),
            (
                "search_with_filters",
                {"query": "x", "filters": {"memory_type": "fact"}},
                "memory_type",
            ),
        ]
        before = table_counts()
        for name, args, message in errors:
            result = envelope(await session.call_tool(name, args))
            assert result == {"success": False, "error": result["error"]}, name
            assert message in result["error"], (name, result["error"])
        assert table_counts() == before
        unknown = await session.call_tool("no_such_tool", {})
        assert unknown.is_error

    anyio.run(session_run, check)
