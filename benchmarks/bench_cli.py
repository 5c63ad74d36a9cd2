"""Cold starts as a user feels them: `memsys count`, `memsys recall`, MCP stdio to first answer.

Each run is a new process (the OS file cache is warm, as on a machine in use), against a
private embedded PostgreSQL holding 200 real LoCoMo turns. Also measured: the same CLI
commands while a `memsys serve` on the same MEMSYS_HOME is up (the database is then already
running), and the embedding runtimes side by side (import, load, RSS, single-query latency,
batch throughput).

    .venv/bin/python benchmarks/bench_cli.py [--runs 7]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import common

MEMSYS = str(Path(sys.executable).parent / "memsys")


def _wall(args: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    done = subprocess.run(args, env=env, capture_output=True, text=True, timeout=300)
    elapsed = common.ms_since(start)
    if done.returncode != 0:
        raise SystemExit(f"{args} failed: {done.stderr.strip()}")
    return elapsed


def _mcp_first_answer(env: dict[str, str]) -> float:
    """Spawn `memsys mcp`, initialize, call memory_recall once; ms until the answer."""
    import anyio
    from mcp import ClientSession, StdioServerParameters, stdio_client

    params = StdioServerParameters(command=MEMSYS, args=["mcp"], env=env)

    async def go() -> float:
        start = time.perf_counter()
        async with stdio_client(params) as (read, write), ClientSession(read, write) as s:
            await s.initialize()
            result = await s.call_tool("memory_recall", {"query": "when did she move"})
            assert json.loads(result.content[0].text)["success"]
            return common.ms_since(start)

    return anyio.run(go)


def _embedding_runtime(provider: str) -> dict[str, Any]:
    """Measured in a fresh process so import time and RSS are the runtime's own."""
    probe = f"""
import json, resource, time
t = time.perf_counter()
from memsys.embeddings import make_embedder
m = make_embedder({provider!r})
m.load(); m.embed_one("warm up")
load_ms = (time.perf_counter() - t) * 1000
import statistics
q = "what did Caroline say about the adoption agency"
lat = []
for _ in range(100):
    s = time.perf_counter(); m.embed_one(q); lat.append((time.perf_counter() - s) * 1000)
lat.sort()
lines = open({str(common.DEFAULT_DATA / "scifact" / "corpus.jsonl")!r}).readlines()[:256]
texts = [json.loads(x)["text"] for x in lines]
s = time.perf_counter(); m.embed(texts); per_s = len(texts) / (time.perf_counter() - s)
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps({{"import_and_load_ms": load_ms, "query_p50_ms": lat[50],
    "query_p95_ms": lat[95], "scifact_abstracts_per_s": per_s, "rss_mb": rss}}))
"""
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=600, check=True
    )
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    home = common.private_home("msc-")
    env = {**os.environ, "MEMSYS_HOME": str(home)}
    load_before = common.loadavg()

    common.progress("loading 200 LoCoMo turns")
    turns = common.locomo_turns(common.locomo(common.DEFAULT_DATA)[0])[:200]
    subprocess.run([MEMSYS, "db", "upgrade"], env=env, capture_output=True, check=True)
    _seed(env, turns)

    results: dict[str, Any] = {"machine": common.machine(), "load_before": load_before}
    cases = {
        "count": [MEMSYS, "count"],
        "recall": [MEMSYS, "recall", "when did she move to the new city"],
        "version": [MEMSYS, "--version"],
    }
    for name, argv in cases.items():
        common.progress(f"cold {name} x{args.runs}")
        results[f"cli_{name}_ms"] = common.summary([_wall(argv, env) for _ in range(args.runs)])
    common.progress(f"MCP stdio start to first recall x{args.runs}")
    results["mcp_first_answer_ms"] = common.summary(
        [_mcp_first_answer(env) for _ in range(args.runs)]
    )
    for provider in ("onnx", "sentence-transformers"):
        common.progress(f"embedding runtime {provider}")
        results[f"embedding_{provider}"] = _embedding_runtime(provider)
    results["load_after"] = common.loadavg()
    print(json.dumps(results, indent=2))
    common.write_json("cli", results)
    subprocess.run(["rm", "-rf", str(home)], check=False)


def _seed(env: dict[str, str], turns: list[str]) -> None:
    """Store the turns in one process (the service path), so the CLI runs find data."""
    code = (
        "import sys, json\n"
        "from memsys import runner\n"
        "from memsys.schemas import MemoryStoreIn\n"
        "from memsys.services import memories\n"
        "for t in json.load(sys.stdin):\n"
        "    runner.execute(memories.store, MemoryStoreIn, {'content': t})\n"
    )
    subprocess.run(
        [sys.executable, "-c", code], input=json.dumps(turns), env=env, text=True, check=True
    )


if __name__ == "__main__":
    main()
