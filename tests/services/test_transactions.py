"""Slow work happens before the transaction: a model call never holds a pooled connection."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from memsys import runner
from memsys.db import get_engine
from memsys.schemas import IndexFileIn, MemoryRecallIn, MemoryStoreIn, SearchIn
from memsys.services import indexing, memories
from memsys.services import search as search_service


def test_embedding_runs_while_no_connection_is_checked_out(
    embedder: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    held: list[int] = []
    real = type(embedder).embed

    def watched(self: Any, texts: list[str]) -> Any:
        held.append(get_engine().pool.checkedout())
        return real(self, texts)

    monkeypatch.setattr(type(embedder), "embed", watched)
    doc = tmp_path / "notes.md"
    doc.write_text("# Notes\n\nThe staging database is rebuilt every Sunday night.\n")

    runner.execute(memories.store, MemoryStoreIn, {"content": "Releases are cut on Thursdays"})
    runner.execute(indexing.index_file, IndexFileIn, {"file_path": str(doc)})
    recalled = runner.execute(
        memories.recall, MemoryRecallIn, {"query": "when are releases cut, exactly?"}
    )
    found = runner.execute(
        search_service.search, SearchIn, {"query": "when is staging rebuilt, again?"}
    )

    assert len(held) == 4, held  # content, file, and each new query: embedded once each
    assert held == [0, 0, 0, 0]
    assert recalled.memories[0].content == "Releases are cut on Thursdays"
    assert "Sunday" in found.results[0].content
