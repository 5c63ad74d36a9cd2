"""`memsys --version`, `memsys status` and `memsys model export`.

`status` answers a new user's first questions without starting anything: where the data is,
which database, whether a server is running (and where), and which embedding runtime is in
use. It never loads the model or starts the embedded PostgreSQL.
"""

from __future__ import annotations

from typing import Annotated, Any

import typer

from memsys import __version__
from memsys.cli.output import Json, echo, emit

model_app = typer.Typer(no_args_is_help=True)


def version_callback(value: bool) -> None:
    if value:
        typer.echo(f"memsys {__version__}")
        raise typer.Exit()


Version = Annotated[
    bool,
    typer.Option(
        "--version", callback=version_callback, is_eager=True, help="Print the version and exit."
    ),
]


def _database(settings: Any) -> dict[str, Any]:
    if settings.database_url:
        from memsys.db import describe_url

        return {"kind": "external", "url": describe_url(settings.database_url)}
    pgdata = settings.pgdata.expanduser()
    running = (pgdata / "postmaster.pid").exists()
    return {
        "kind": "embedded",
        "data_dir": str(pgdata),
        "initialised": (pgdata / "PG_VERSION").exists(),
        "running": running,
    }


def _model(settings: Any) -> dict[str, Any]:
    from memsys import embedding_onnx

    path = embedding_onnx.default_onnx_path()
    provider = settings.embedding_provider
    resolved = provider
    if provider == "auto":
        resolved = "onnx" if path.exists() else "onnx (exported on first use)"
    return {
        "name": embedding_onnx.MODEL_NAME,
        "provider_setting": provider,
        "runtime": resolved,
        "onnx_file": str(path),
        "onnx_file_exists": path.exists(),
    }


def _server() -> dict[str, Any]:
    from memsys.runtime_info import running_server

    info = running_server()
    if info is None:
        return {"running": False}
    health: Any = None
    try:
        import httpx

        from memsys.config import get_settings

        token = get_settings().api_token  # the database's error is the admin's to read
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        health = httpx.get(f"{info['url']}/v1/health", headers=headers, timeout=1.0).json()
    except Exception as exc:  # announced but not answering: say so
        health = {"status": "not answering", "error": type(exc).__name__}
    return {"running": True, **info, "health": health}


def status(as_json: Json = False) -> None:
    """Where the data is, which database, whether a server runs, which embedding runtime."""
    from memsys.config import get_settings

    settings = get_settings()
    report: dict[str, Any] = {
        "version": __version__,
        "home": str(settings.home.expanduser()),
        "database": _database(settings),
        "server": _server(),
        "model": _model(settings),
    }
    if as_json:
        emit(report, True, None)
        return
    db, srv, model = report["database"], report["server"], report["model"]
    echo(f"memsys {__version__}")
    echo(f"home:      {report['home']}")
    if db["kind"] == "external":
        echo(f"database:  {db['url']}")
    else:
        state = "running" if db["running"] else "stopped"
        echo(f"database:  embedded PostgreSQL at {db['data_dir']} ({state})")
    if srv["running"]:
        health = srv.get("health") or {}
        echo(f"server:    {srv['url']} (pid {srv['pid']}, {health.get('status', 'unknown')})")
    else:
        echo("server:    not running (start one with `memsys serve`)")
    echo(f"model:     {model['name']} via {model['runtime']}")


def export_model(
    force: Annotated[bool, typer.Option(help="Export again even if the file exists.")] = False,
) -> None:
    """Export the embedding model to ONNX from the shipped weights (run by `make install`)."""
    from memsys import embedding_onnx

    path = embedding_onnx.default_onnx_path()
    if path.exists() and not force:
        echo(f"ONNX model already at {path}")
        return
    echo(f"ONNX model written to {embedding_onnx.export(path)}")


def register(app: typer.Typer) -> None:
    app.command("status")(status)
    model_app.command("export")(export_model)
    app.add_typer(model_app, name="model", help="The embedding model (ONNX export).")
