"""Long-running front ends: `memsys serve` (REST + MCP over HTTP) and `memsys mcp` (stdio)."""

from __future__ import annotations

import json
import sys
from typing import Annotated

import typer

from memsys.cli.output import Json


def serve(
    host: Annotated[str, typer.Option(envvar="MEMSYS_HOST", help="Address to bind.")] = (
        "127.0.0.1"
    ),
    port: Annotated[
        int, typer.Option(envvar="MEMSYS_PORT", min=1, max=65_535, help="Port to bind.")
    ] = 8700,
    as_json: Json = False,
) -> None:
    """Serve REST (/v1, /docs) and MCP (/mcp) on one port; migrates the schema first."""
    from memsys.api.server import check_alone, check_bind, check_port
    from memsys.api.server import serve as run_server

    check_alone()  # refuse before announcing anything
    check_bind(host)
    check_port(host, port)
    shown = f"[{host}]" if ":" in host else host
    urls = {
        "rest_url": f"http://{shown}:{port}/v1",
        "mcp_url": f"http://{shown}:{port}/mcp",
        "docs_url": f"http://{shown}:{port}/docs",
    }
    if as_json:  # one line: a supervisor reads it while the server keeps running
        sys.stdout.write(json.dumps(urls) + "\n")
        sys.stdout.flush()
    else:
        # One URL per line, never wrapped: a terminal narrower than a URL must not split it.
        for name, key in (("REST", "rest_url"), ("MCP ", "mcp_url"), ("docs", "docs_url")):
            sys.stderr.write(f"memsys {name}  {urls[key]}\n")
        sys.stderr.flush()
    run_server(host, port)


def mcp() -> None:
    """Serve MCP over stdio for an agent (stdout carries the protocol, so there is no --json)."""
    from memsys.mcp.server import run_stdio

    run_stdio()


def register(app: typer.Typer) -> None:
    """Add serve and mcp to the top level of `app`."""
    app.command("serve")(serve)
    app.command("mcp")(mcp)
