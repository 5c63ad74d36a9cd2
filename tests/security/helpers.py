"""Two tenants, scoped tokens, a real HTTP server, and calls over REST and MCP over HTTP.

`seed()` writes (as the admin) one namespace the tokens may use (`project:acme`) and one
they may not (`project:beta`), with a row in every kind of table; every piece of beta's
content carries SECRET so that a leak shows in any answer.
"""

from __future__ import annotations

import json
import re
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

import anyio
import httpx
import httpx2
import uvicorn
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from sqlalchemy import text

from memsys import runner
from memsys.api.app import create_app
from memsys.db import get_engine
from memsys.operations import BY_NAME, Operation
from memsys.schemas.tokens import TokenCreateIn
from memsys.services import tokens
from tests.conftest import tables

ACME, BETA = "project:acme", "project:beta"
SECRET = "BETA-SECRET"
PATH_PARAM = re.compile(r"{(\w+)(?::\w+)?}")


@dataclass
class Tenants:
    acme_memory: str = ""
    beta_memory: str = ""
    beta_memory_2: str = ""
    beta_edge: int = 0
    beta_chunk: str = ""
    beta_file: str = ""
    beta_dir: str = ""
    acme_file: str = ""
    beta_trace: str = ""
    ids: list[str] = field(default_factory=list)  # every beta id a caller might see


def run(name: str, **args: Any) -> Any:
    return BY_NAME[name].run(args)


def seed(root: Path) -> Tenants:
    t = Tenants()
    t.acme_memory = run(
        "memory_store", content="ACME deploys go out on Tuesdays", namespace=ACME
    ).id
    t.beta_memory = run(
        "memory_store", content=f"{SECRET} zebra launch codes are kept offline", namespace=BETA
    ).id
    t.beta_memory_2 = run(
        "memory_store", content=f"{SECRET} zebra rotation happens monthly", namespace=BETA
    ).id
    t.beta_edge = run(
        "memory_relate", source_id=t.beta_memory, target_id=t.beta_memory_2, relation="relates_to"
    ).edge_id
    run("preference_set", key="theme", value=f"{SECRET}-dark", namespace=BETA)
    run("preference_set", key="theme", value="light", namespace=ACME)
    beta_dir = root / "beta"
    beta_dir.mkdir()
    (beta_dir / "beta.md").write_text(f"# Zebra\n\n{SECRET} the zebra document says kiwi.\n")
    (root / "acme.md").write_text("# Acme\n\nThe acme document says apple.\n")
    t.beta_dir, t.beta_file = str(beta_dir), str(beta_dir / "beta.md")
    t.acme_file = str(root / "acme.md")
    t.beta_chunk = run("index_file", file_path=t.beta_file, namespace=BETA).chunk_ids[0]
    run("index_file", file_path=t.acme_file, namespace=ACME)
    run(
        "create_entities",
        entities=[
            {"name": "ZebraCorp", "entityType": "org", "observations": [f"{SECRET} observation"]},
            {"name": "Kiwi", "entityType": "fruit", "observations": []},
        ],
        namespace=BETA,
    )
    run(
        "create_relations",
        relations=[{"from": "ZebraCorp", "to": "Kiwi", "relationType": "grows"}],
        namespace=BETA,
    )
    run("memory_apply", memory_id=t.beta_memory, context=f"{SECRET} applying it")
    t.beta_trace = run("search", query="zebra launch codes", namespace=BETA).trace_id
    t.ids = [t.beta_memory, t.beta_memory_2, t.beta_chunk, t.beta_trace]
    return t


def token(mode: str, *patterns: str) -> tuple[str, str]:
    """(token id, secret) of a new scoped token."""
    made = runner.execute(
        tokens.create,
        TokenCreateIn,
        {"name": f"test {mode}", "namespaces": list(patterns or ("project:acme*",)), "mode": mode},
    )
    return made.id, made.secret


def rows_of(namespace_like: str) -> dict[str, list[str]]:
    """Every row (as text) of every namespaced table whose namespace matches, as the admin."""
    out: dict[str, list[str]] = {}
    with get_engine().connect() as conn:
        for name in tables():
            column = "name" if name == "namespace" else "namespace"
            exists = conn.execute(
                text(
                    "SELECT 1 FROM information_schema.columns WHERE table_schema = "
                    "current_schema() AND table_name = :t AND column_name = :c"
                ),
                {"t": name, "c": column},
            ).first()
            if exists is None:
                continue
            rows = conn.execute(
                text(f"SELECT t::text FROM {name} t WHERE {column} LIKE :ns ORDER BY 1"),
                {"ns": namespace_like},
            )
            out[name] = list(rows.scalars())
    return out


def namespaces_in_use() -> set[str]:
    found: set[str] = set()
    with get_engine().connect() as conn:
        for name in tables():
            column = "name" if name == "namespace" else "namespace"
            try:
                found |= set(conn.execute(text(f"SELECT DISTINCT {column} FROM {name}")).scalars())
            except Exception:  # a table without that column
                conn.rollback()
    return found


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def http_server() -> Iterator[str]:
    """A real uvicorn server (REST + MCP at /mcp) on a free loopback port; its base URL."""
    port = free_port()
    server = uvicorn.Server(
        uvicorn.Config(
            create_app(background=False), host="127.0.0.1", port=port, log_level="warning"
        )
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(10)


@dataclass
class Answer:
    status: int  # HTTP status; over MCP 200 for success, 400 for an error result
    text: str
    ok: bool


def _query(params: dict[str, Any]) -> str:
    """A query string as httpx would build it (None empty, booleans lowercase, a list
    repeated), but with lone surrogates percent-encoded instead of raising."""
    pairs = [(k, i) for k, v in params.items() for i in (v if isinstance(v, list) else [v])]
    shown = [(k, "" if v is None else str(v).lower() if isinstance(v, bool) else str(v))
             for k, v in pairs]  # fmt: skip
    return "?" + urlencode(shown, encoding="utf-8", errors="surrogatepass") if shown else ""


def rest_call(http: httpx.Client, op: Operation, args: dict[str, Any]) -> Answer:
    """The call over the first REST route of `op` that can carry these arguments."""
    for rest in op.rest:
        in_path = PATH_PARAM.findall(rest.path)
        rest_of = {k: v for k, v in args.items() if k not in in_path}
        if not set(in_path) <= set(args):
            continue
        if rest.fields is not None and not set(rest_of) <= set(rest.fields):
            continue
        path = "/v1" + PATH_PARAM.sub(
            lambda m: quote(str(args[m[1]]), safe="", errors="surrogatepass"), rest.path
        )
        query = {k: v for k, v in rest_of.items() if k in rest.query}
        # A lone surrogate cannot be UTF-8: JSON carries it escaped (`\\ud800`), a query
        # string percent-encodes its surrogatepass bytes — what a client can actually send.
        if rest.method in ("GET", "DELETE"):
            response = http.request(rest.method, path + _query(rest_of))
        else:
            body = {k: v for k, v in rest_of.items() if k not in rest.query}
            response = http.request(
                rest.method,
                path + _query(query),
                content=json.dumps(body),
                headers={"Content-Type": "application/json"},
            )
        return Answer(response.status_code, response.text, response.status_code < 400)
    raise AssertionError(f"no REST route of {op.name} takes {sorted(args)}")


def mcp_calls(base: str, secret: str, calls: list[tuple[str, dict[str, Any]]]) -> list[Answer]:
    """Every call as an MCP tool call over streamable HTTP with the token, in one session."""
    answers: list[Answer] = []

    async def talk() -> None:
        with anyio.fail_after(600):
            await session_calls()

    async def session_calls() -> None:
        client = httpx2.AsyncClient(
            headers={"Authorization": f"Bearer {secret}"}, timeout=httpx2.Timeout(120)
        )
        async with (
            client,
            streamable_http_client(f"{base}/mcp", http_client=client) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            for name, args in calls:
                result = await session.call_tool(name, args)
                body = result.structured_content or {}
                shown = json.dumps(body) + "".join(getattr(c, "text", "") for c in result.content)
                answers.append(Answer(400 if result.is_error else 200, shown, not result.is_error))

    anyio.run(talk)
    return answers
