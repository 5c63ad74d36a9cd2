"""The dependency rule of DESIGN.md: models ← services ← {api, mcp, cli}."""

from __future__ import annotations

import ast
from pathlib import Path

import memsys

PACKAGE = Path(memsys.__file__).parent
FRONT_END_LIBS = ("fastapi", "starlette", "uvicorn", "mcp", "typer", "rich")


def imports_of(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
    return found


def modules(folder: str) -> list[Path]:
    return sorted((PACKAGE / folder).rglob("*.py"))


def violates(names: set[str], prefixes: tuple[str, ...]) -> list[str]:
    return sorted(n for n in names if any(n == p or n.startswith(p + ".") for p in prefixes))


def test_models_import_no_services_or_front_ends() -> None:
    for path in modules("models"):
        banned = ("memsys.services", "memsys.api", "memsys.mcp", "memsys.cli", *FRONT_END_LIBS)
        assert violates(imports_of(path), banned) == [], path


def test_services_know_no_front_end() -> None:
    for path in modules("services"):
        banned = ("memsys.api", "memsys.mcp", "memsys.cli", *FRONT_END_LIBS)
        assert violates(imports_of(path), banned) == [], path


def test_front_ends_do_not_import_each_other() -> None:
    for path in modules("mcp"):
        assert violates(imports_of(path), ("memsys.api", "memsys.cli")) == [], path
    for path in modules("api"):
        assert violates(imports_of(path), ("memsys.cli",)) == [], path
        # The API mounts MCP's HTTP transport, and nothing else of it.
        assert violates(imports_of(path), ("memsys.mcp",)) in ([], ["memsys.mcp.server"]), path
    for path in modules("cli"):
        # The CLI starts the servers (serve, mcp) and uses no other part of them.
        allowed = {"memsys.api.server", "memsys.mcp.server"}
        assert set(violates(imports_of(path), ("memsys.api", "memsys.mcp"))) <= allowed, path


def test_only_one_module_imports_the_mcp_sdk() -> None:
    users = [
        p.relative_to(PACKAGE).as_posix()
        for p in PACKAGE.rglob("*.py")
        if violates(imports_of(p), ("mcp",))
    ]
    assert users == ["mcp/server.py"]


def test_every_name_the_benchmarks_import_from_memsys_exists() -> None:
    """The benchmark scripts import memsys inside their functions, so a name moved in the
    package broke `bench_retrieval.py` only minutes into a run (content_hash, moved to ids)."""
    import importlib

    benchmarks = Path(memsys.__file__).resolve().parents[1] / "benchmarks"
    missing = []
    for script in sorted(benchmarks.glob("*.py")):
        for node in ast.walk(ast.parse(script.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("memsys"):
                module = importlib.import_module(node.module or "")
                for alias in node.names:
                    if not hasattr(module, alias.name):
                        try:
                            importlib.import_module(f"{node.module}.{alias.name}")
                        except ImportError:
                            missing.append(f"{script.name}: {node.module}.{alias.name}")
    assert missing == []
