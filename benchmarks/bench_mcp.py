"""memory_recall through MCP stdio against chromadb's dense search, in the same run.

An agent sees memsys through MCP: this is the latency it feels. Three LoCoMo conversations are
stored through `memsys mcp` itself (memory_store_batch, one namespace per conversation), then
every question of those conversations is asked with `memory_recall` (n_results 5, its
namespace), timed at the client from request to parsed answer. The same turns go into a
chromadb in-memory collection per conversation (cosine HNSW), with the same model's vectors,
and each question is embedded and searched there (n_results 5) — the dense-only baseline an
agent could run in its own process instead. The two alternate question by question, so the
machine's load falls on both alike.

Also printed: memsys's own service time per call (the `total_ms` its trace records), so the
difference between client wall time and service time is the transport (JSON-RPC over pipes,
the SDK's dispatch, the worker thread) plus the commit.

    .venv/bin/python benchmarks/bench_mcp.py [--conversations 3] [--rounds 1]

chromadb is a benchmark-only dependency: `pip install -e '.[bench]'`.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import common

BATCH = 200


def _questions(conv: dict[str, Any]) -> list[str]:
    return [str(qa["question"]) for qa in conv["qa"] if qa.get("question")]


def _data(result: Any) -> dict[str, Any]:
    """The envelope's data; a failed call stops the benchmark."""
    body = result.structured_content or json.loads(result.content[0].text)
    if not body.get("success"):
        raise SystemExit(f"memsys answered an error: {body}")
    return dict(body["data"])


def _chroma(conversations: list[tuple[str, list[str]]]) -> tuple[Any, dict[str, Any]]:
    import chromadb
    from chromadb.config import Settings

    from memsys.embeddings import get_embedder

    client = chromadb.EphemeralClient(Settings(anonymized_telemetry=False))
    embedder = get_embedder()
    collections = {}
    for ns, turns in conversations:
        name = ns.replace(":", "-")
        collection = client.create_collection(name, metadata={"hnsw:space": "cosine"})
        vectors = embedder.embed(turns)
        collection.add(
            ids=[f"t{i}" for i in range(len(turns))],
            embeddings=[v.tolist() for v in vectors],
            documents=turns,
        )
        collections[ns] = collection
    return embedder, collections


async def _run(args: argparse.Namespace) -> dict[str, Any]:
    from mcp import ClientSession, StdioServerParameters, stdio_client

    data = common.locomo(common.DEFAULT_DATA)[: args.conversations]
    conversations = [(f"locomo:{c['sample_id']}", common.locomo_turns(c)) for c in data]
    questions = [(f"locomo:{c['sample_id']}", q) for c in data for q in _questions(c)]
    common.progress(
        f"{sum(len(t) for _, t in conversations)} turns, {len(questions)} questions; "
        "chromadb: embedding and adding the turns"
    )
    embedder, collections = _chroma(conversations)

    server = StdioServerParameters(
        command=str(Path(sys.executable).with_name("memsys")), args=["mcp"], env=dict(os.environ)
    )
    mcp_wall: list[float] = []
    service: list[float] = []
    chroma_wall: list[float] = []
    stages: dict[str, list[float]] = {}
    started = time.perf_counter()
    async with stdio_client(server) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        common.progress(f"memsys mcp up in {common.ms_since(started):.0f} ms; storing the turns")
        for ns, turns in conversations:
            for i in range(0, len(turns), BATCH):
                batch = [{"content": t, "namespace": ns} for t in turns[i : i + BATCH]]
                _data(await session.call_tool("memory_store_batch", {"memories": batch}))
        # Warm-up, both systems, with stored turns rather than questions: a question asked
        # here would find its vector in memsys's query cache when it is measured.
        warm = [(ns, turn) for ns, turns in conversations for turn in turns[:7]][:20]
        for ns, text in warm:
            await session.call_tool("memory_recall", {"query": text, "namespace": ns})
            collections[ns].query(query_embeddings=[embedder.embed_one(text).tolist()])
        common.progress(f"asking {len(questions)} questions x {args.rounds} round(s)")
        for _ in range(args.rounds):
            for ns, question in questions:
                t0 = time.perf_counter()
                answer = _data(
                    await session.call_tool(
                        "memory_recall", {"query": question, "namespace": ns, "n_results": 5}
                    )
                )
                mcp_wall.append(common.ms_since(t0))
                trace = _data(
                    await session.call_tool("debug_trace", {"trace_id": answer["trace_id"]})
                )
                service.append(float(trace["timings"]["total_ms"]))
                for stage, ms in trace["timings"].items():
                    stages.setdefault(stage, []).append(float(ms))

                t0 = time.perf_counter()
                vector = embedder.embed_one(question)
                collections[ns].query(query_embeddings=[vector.tolist()], n_results=5)
                chroma_wall.append(common.ms_since(t0))
    return {
        "conversations": args.conversations,
        "turns": sum(len(t) for _, t in conversations),
        "questions": len(questions),
        "rounds": args.rounds,
        "memsys_mcp_recall_ms": common.summary(mcp_wall),
        "memsys_service_total_ms": common.summary(service),
        "chromadb_dense_ms": common.summary(chroma_wall),
        "memsys_stages_ms": {k: common.summary(v) for k, v in stages.items()},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--conversations", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--keep", action="store_true", help="keep the private MEMSYS_HOME")
    args = parser.parse_args()
    home = common.private_home("msm-")
    before = common.loadavg()
    try:
        common.start_database()
        import anyio

        results = anyio.run(_run, args)
    finally:
        common.stop_database(home, keep=args.keep)
    results["machine"] = common.machine()
    results["loadavg_before_after"] = [before, common.loadavg()]
    rows = [
        [name, s["n"], s["p50"], s["p95"], s["max"], s["min"]]
        for name, s in (
            ("memsys memory_recall via MCP stdio (client wall)", results["memsys_mcp_recall_ms"]),
            ("  of which memsys service (trace total_ms)", results["memsys_service_total_ms"]),
            ("chromadb dense (embed + query, in process)", results["chromadb_dense_ms"]),
        )
    ]
    print(common.table(["ms", "n", "p50", "p95", "max", "min"], rows))
    stage_rows = [[k, s["p50"], s["p95"]] for k, s in results["memsys_stages_ms"].items()]
    print(common.table(["memsys stage (from the traces)", "p50", "p95"], stage_rows))
    print(f"load average before / after: {before} / {common.loadavg()}")
    print(f"JSON: {common.write_json('mcp.json', results)}")


if __name__ == "__main__":
    main()
