"""memsys against the official MCP memory server, side by side, driven over stdio by the same
MCP SDK client: create_entities and search_nodes latency at 1k and 10k entities, and writes
lost by two concurrent writer processes on one store.

Needs the official server installed once (npm, not a runtime dependency of memsys):
    npm install --prefix /tmp/kgraph-npm @modelcontextprotocol/server-memory
    .venv/bin/python benchmarks/bench_memory_server.py --official /tmp/kgraph-npm
Without --official only memsys's side runs (same client, same workload).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
import common

BATCH = 100
QUERIES = ["billing service owner", "who is on call", "payments", "entity 42", "database"]
WRITES_EACH = 200


def official(npm: Path, memory_file: Path) -> Any:
    from mcp import StdioServerParameters

    script = npm / "node_modules" / "@modelcontextprotocol" / "server-memory" / "dist" / "index.js"
    env = {**os.environ, "MEMORY_FILE_PATH": str(memory_file)}
    return StdioServerParameters(command="node", args=[str(script)], env=env)


def memsys() -> Any:
    from mcp import StdioServerParameters

    script = Path(sys.executable).parent / "memsys"
    return StdioServerParameters(command=str(script), args=["mcp"], env=dict(os.environ))


def entity(i: int, tag: str = "") -> dict[str, Any]:
    kinds = ["service", "person", "database", "team"]
    return {
        "name": f"{tag}entity {i}",
        "entityType": kinds[i % 4],
        "observations": [
            f"entity {i} handles payments batch {i % 50}",
            f"owned by team {i % 17}",
            f"Entity {i} runs on host-{i % 300}.internal behind the {kinds[(i // 4) % 4]} proxy",
        ],
    }


async def call(session: Any, name: str, args: dict[str, Any]) -> tuple[float, Any]:
    start = time.perf_counter()
    result = await session.call_tool(name, args)
    return common.ms_since(start), result


async def sizes_run(params: Any, sizes: list[int]) -> dict[str, Any]:
    from mcp import ClientSession, stdio_client

    out: dict[str, Any] = {}
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        made = 0
        for size in sizes:
            creates: list[float] = []
            while made < size:
                batch = [entity(i) for i in range(made, min(made + BATCH, size))]
                ms, result = await call(session, "create_entities", {"entities": batch})
                assert not result.is_error, result.content[0].text
                creates.append(ms)
                made += len(batch)
            searches = []
            for q in QUERIES * 4:
                ms, result = await call(session, "search_nodes", {"query": q})
                assert not result.is_error, result.content[0].text
                searches.append(ms)
            out[str(size)] = {
                "create_entities_100": common.summary(creates),
                "search_nodes": common.summary(searches),
            }
    return out


async def writers(params: Any) -> int:
    """Two processes write WRITES_EACH distinct entities each, one per call, at once."""
    from mcp import ClientSession, stdio_client

    async def one(tag: str) -> None:
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            for i in range(WRITES_EACH):
                await session.call_tool("create_entities", {"entities": [entity(i, tag)]})

    async with anyio.create_task_group() as tg:
        tg.start_soon(one, "a-")
        tg.start_soon(one, "b-")
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        graph = await session.call_tool("read_graph", {})
        data = graph.structured_content or json.loads(graph.content[0].text)
        return len(data["entities"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--official", type=Path, help="npm --prefix folder (omit: memsys only)")
    parser.add_argument("--sizes", default="1000,10000")
    args = parser.parse_args()
    sizes = [int(x) for x in args.sizes.split(",")]
    home = common.private_home("msm-")
    try:
        common.start_database()
        info = common.machine()
        work = Path(tempfile.mkdtemp(prefix="kg-official-"))
        results: dict[str, Any] = {"official_kept": "-"}
        servers = ["memsys"]
        if args.official is not None:
            servers.insert(0, "official")
            common.progress("official server: sizes")
            npm = args.official
            results["official"] = anyio.run(sizes_run, official(npm, work / "a.jsonl"), sizes)
        common.progress("memsys: sizes")
        results["memsys"] = anyio.run(sizes_run, memsys(), sizes)
        common.progress("concurrent writers")
        if args.official is not None:
            results["official_kept"] = anyio.run(writers, official(npm, work / "b.jsonl"))
        os.environ["MEMSYS_GRAPH_NAMESPACE"] = "writers"
        results["memsys_kept"] = anyio.run(writers, memsys())
        info["loadavg_end"] = common.loadavg()
        rows = []
        for who in servers:
            for size, r in results[who].items():
                c, s = r["create_entities_100"], r["search_nodes"]
                rows.append([who, size, c["p50"], c["p95"], s["p50"], s["p95"]])
        print(common.table(["server", "entities", "create p50", "create p95", "search p50",
                            "search p95"], rows))  # fmt: skip
        print(f"two writers × {WRITES_EACH}: official kept {results['official_kept']}, "
              f"memsys kept {results['memsys_kept']} of {2 * WRITES_EACH}")  # fmt: skip
        print(f"load average {info['loadavg_start']} → {info['loadavg_end']}")
        common.write_json("bench_memory_server.json", {"machine": info, **results})
    finally:
        common.stop_database(home, keep=False)


if __name__ == "__main__":
    main()
