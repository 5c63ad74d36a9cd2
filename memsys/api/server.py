"""`memsys serve`: REST + MCP on one port, loopback by default, a token required elsewhere."""

from __future__ import annotations

import ipaddress
import logging

import uvicorn

from memsys.config import get_settings
from memsys.errors import InvalidInput


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_bind(host: str) -> None:
    if not is_loopback(host) and not get_settings().api_token:
        raise InvalidInput(
            f"Refusing to serve on {host} without MEMSYS_API_TOKEN: anyone who can reach it "
            "could read and change every memory. Set MEMSYS_API_TOKEN (clients then send "
            "'Authorization: Bearer <token>') or serve on 127.0.0.1."
        )


def serve(host: str = "127.0.0.1", port: int = 8700) -> None:
    """Migrate the database to the newest schema, then serve until interrupted."""
    check_bind(host)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    logging.getLogger("mcp").setLevel(logging.WARNING)
    from memsys import schema
    from memsys.api.app import create_app

    schema.ensure_current()
    extra = [] if is_loopback(host) else [host, f"{host}:*"]
    uvicorn.run(create_app(extra_hosts=extra), host=host, port=port, log_level="info")
