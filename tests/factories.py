"""Plain factory functions: write through the real services, one transaction each."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from memsys import runner
from memsys.schemas import IndexFileIn, MemoryStoreIn, MemoryStoreOut, PreferenceSetIn
from memsys.services import documents, memories, preferences


def store(content: str, **fields: Any) -> MemoryStoreOut:
    return runner.execute(memories.store, MemoryStoreIn, {"content": content, **fields})


def set_preference(key: str, value: Any, **fields: Any):  # type: ignore[no-untyped-def]
    return runner.execute(
        preferences.set_value, PreferenceSetIn, {"key": key, "value": value, **fields}
    )


def index(path: Path, **fields: Any):  # type: ignore[no-untyped-def]
    return runner.execute(documents.index_file, IndexFileIn, {"file_path": str(path), **fields})


def write_docs(root: Path) -> dict[str, Path]:
    """A small folder of real documents to index."""
    root.mkdir(parents=True, exist_ok=True)
    files = {
        "auth": root / "auth.md",
        "deploy": root / "guides" / "deploy.md",
        "notes": root / "notes.txt",
        "code": root / "service.py",
    }
    files["deploy"].parent.mkdir(parents=True, exist_ok=True)
    files["auth"].write_text(
        "# Configuration\n\nGeneral settings live in settings.toml.\n\n"
        "## Authentication\n\nTokens are signed with HS256 and expire after 15 minutes. "
        "Refresh tokens rotate on every use.\n\n"
        "## Logging\n\nLogs are written as JSON lines to stderr.\n"
    )
    files["deploy"].write_text(
        "# Deployment\n\nDeploy with `make release`; the pipeline builds a wheel and uploads it.\n"
        "\n## Rollback\n\nRoll back by pinning the previous wheel version in production.\n"
    )
    files["notes"].write_text(
        "The cache warms at startup.\n\nRedis connection timeouts were fixed with keepalive.\n"
    )
    files["code"].write_text(
        '"""A small service."""\n\nimport os\n\n\n'
        'def connect(url):\n    """Open a database connection."""\n    return url\n\n\n'
        "class RateLimiter:\n    def allow(self, key):\n        return True\n"
    )
    return files
