"""Plain factory functions: write through the real services, one transaction each."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from memsys import runner
from memsys.schemas import IndexFileIn, MemoryStoreIn, MemoryStoreOut, PreferenceSetIn
from memsys.services import indexing, memories, preferences

# A workflow long enough for maintenance to age it to a summary (40 days unread).
RELEASE_WORKFLOW = (
    "Release candidates are cut from main on the first Monday of the month. "
    "A candidate soaks in staging for a week before it is promoted. "
    "Hotfixes skip the soak but need two approvals from the on-call rota. "
    "Release notes are drafted by the author of the largest change in the candidate. "
    "A failed soak sends the candidate back to main with the failing checks attached."
)


def store(content: str, **fields: Any) -> MemoryStoreOut:
    return runner.execute(memories.store, MemoryStoreIn, {"content": content, **fields})


def queue_for_embedding(*memory_ids: str) -> None:
    """What the upgrade to whole-text vectors does to a long memory: its vector is cleared,
    which puts it on the embedding queue until a worker embeds it again."""
    from sqlalchemy import text

    from memsys.db import session_scope

    with session_scope() as s:
        s.execute(
            text("UPDATE chunk SET embedding = NULL WHERE id = ANY(:ids)"),
            {"ids": list(memory_ids)},
        )


def set_preference(key: str, value: Any, **fields: Any):  # type: ignore[no-untyped-def]
    return runner.execute(
        preferences.set_value, PreferenceSetIn, {"key": key, "value": value, **fields}
    )


def index(path: Path, **fields: Any):  # type: ignore[no-untyped-def]
    return runner.execute(indexing.index_file, IndexFileIn, {"file_path": str(path), **fields})


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


def write_pdf(path: Path, pages: list[str]) -> Path:
    """A minimal, valid PDF with one line of Helvetica text per page."""
    objects: list[bytes] = []
    n_pages = len(pages)
    font_obj = 3 + 2 * n_pages
    kids = " ".join(f"{3 + 2 * i} 0 R" for i in range(n_pages))
    objects.append(b"<< /Type /Catalog /Pages 2 0 R >>")
    objects.append(f"<< /Type /Pages /Kids [{kids}] /Count {n_pages} >>".encode())
    for i, text in enumerate(pages):
        escaped = text.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")
        stream = f"BT /F1 12 Tf 72 720 Td ({escaped}) Tj ET".encode()
        objects.append(
            f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents {4 + 2 * i} 0 R "
            f"/Resources << /Font << /F1 {font_obj} 0 R >> >> >>".encode()
        )
        objects.append(b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream")
    objects.append(b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>")
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    for offset in offsets:
        out += b"%010d 00000 n \n" % offset
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (
        len(objects) + 1,
        xref,
    )
    path.write_bytes(bytes(out))
    return path


@contextmanager
def fuzz_root(root: Path) -> Iterator[Path]:
    """`root` with one small file, as the only folder memsys may index (fuzzers never reach
    the rest of the machine); settings are re-read on entry and exit."""
    from memsys.config import get_settings

    (root / "a.md").write_text("# A\n\nA small file the fuzzer may index.\n")
    before = os.environ.get("MEMSYS_INDEX_ROOTS")
    os.environ["MEMSYS_INDEX_ROOTS"] = str(root)
    get_settings.cache_clear()
    try:
        yield root
    finally:
        if before is None:
            os.environ.pop("MEMSYS_INDEX_ROOTS", None)
        else:
            os.environ["MEMSYS_INDEX_ROOTS"] = before
        get_settings.cache_clear()
