"""`memsys serve`: REST + MCP on one port, loopback by default, a token required elsewhere."""

from __future__ import annotations

import ipaddress
import logging
import os
import signal
import socket
from types import FrameType

import uvicorn

from memsys import runtime_info
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


def check_alone() -> None:
    """One server per MEMSYS_HOME: a second would take over its announcement (server.json),
    and remove it when it stopped, leaving the CLI blind to the first."""
    running = runtime_info.running_server()
    if running is not None and running.get("pid") != os.getpid() and _answers(running):
        raise InvalidInput(
            f"memsys serve already runs on this MEMSYS_HOME (pid {running['pid']}, "
            f"{running.get('url', 'port ' + str(running.get('port')))}): stop it first, or "
            "give this one another MEMSYS_HOME"
        )


def _answers(announced: dict[str, object]) -> bool:
    """Whether the announced server listens (its pid alone may be another process's now,
    after a crash left server.json behind)."""
    host = runtime_info.reachable_host(announced)
    try:
        with socket.create_connection((host, int(str(announced.get("port")))), timeout=1):
            return True
    except (OSError, ValueError):
        return False


def check_port(host: str, port: int) -> None:
    """Refuse a port that is taken before announcing anything (uvicorn would only log it)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as exc:
            raise InvalidInput(
                f"Cannot listen on {host}:{port}: {exc.strerror or exc}. Another memsys serve? "
                "(`memsys status` tells) Pick another port with --port or MEMSYS_PORT."
            ) from None


# On SIGTERM or SIGINT, how long requests under way may take to finish before they are
# cancelled. Without a limit uvicorn waited for every connection to close: a client that
# stopped sending a body or reading a streamed export held the stop (and the embedded
# PostgreSQL) for as long as it stayed connected. Below docker stop's 10 s before SIGKILL.
STOP_GRACE_S = 5


def _exit_on_sigterm(signum: int, frame: FrameType | None) -> None:
    # uvicorn shuts down gracefully on SIGTERM, then re-raises the signal; with the default
    # action the process would die there, skipping the exit hooks that stop the embedded
    # PostgreSQL. Exiting normally runs them (as Ctrl-C does).
    raise SystemExit(0)


def serve(host: str = "127.0.0.1", port: int = 8700) -> None:
    """Migrate the database to the newest schema, then serve until interrupted."""
    check_alone()
    check_bind(host)
    check_port(host, port)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    logging.getLogger("mcp").setLevel(logging.WARNING)
    # Alembic narrates at INFO as it loads (plugins) and on every connection it configures
    # ("Context impl …"): noise at each start and each /v1/health. Set before it is imported.
    logging.getLogger("alembic").setLevel(logging.WARNING)
    from memsys import migrator, runtime_info
    from memsys.api.app import create_app

    migrator.ensure_current()
    extra = [] if is_loopback(host) else [host, f"{host}:*"]
    if extra and "MEMSYS_INDEX_ROOTS" not in os.environ:
        # Reachable from the network: no file of this machine is readable through indexing
        # unless the operator names the folders.
        os.environ["MEMSYS_INDEX_ROOTS"] = ""
        get_settings.cache_clear()
    signal.signal(signal.SIGTERM, _exit_on_sigterm)
    runtime_info.announce(host, port)
    try:
        uvicorn.run(
            create_app(extra_hosts=extra),
            host=host,
            port=port,
            log_level="info",
            timeout_graceful_shutdown=STOP_GRACE_S,
        )
    finally:
        runtime_info.withdraw()
