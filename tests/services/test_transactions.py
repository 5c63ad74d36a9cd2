"""Slow work happens before the transaction: a model call never holds a pooled connection
(except one text's embedding — a query's, or a new memory's content — which may run on the
embedding worker beside its own call's first statements)."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from memsys import deferred, embeddings, runner
from memsys.db import get_engine
from memsys.schemas import IndexFileIn, MemoryRecallIn, MemoryStoreIn, SearchIn
from memsys.services import indexing, memories
from memsys.services import search as search_service


def test_embedding_runs_while_no_connection_is_checked_out(
    embedder: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    held: list[tuple[str, int]] = []
    real = type(embedder).embed

    def watched(self: Any, texts: list[str]) -> Any:
        worker = threading.current_thread().name.startswith(embeddings.WORKER_NAME)
        held.append(("worker" if worker else "caller", get_engine().pool.checkedout()))
        return real(self, texts)

    monkeypatch.setattr(type(embedder), "embed", watched)
    doc = tmp_path / "notes.md"
    doc.write_text("# Notes\n\nThe staging database is rebuilt every Sunday night.\n")

    def call(service: Any, schema: Any, params: dict[str, Any]) -> Any:
        # The previous call's trace and access rows are written by the background thread
        # with a connection of its own: let them land, so the count below is this call's.
        assert deferred.settle()
        return runner.execute(service, schema, params)

    call(memories.store, MemoryStoreIn, {"content": "Releases are cut on Thursdays"})
    call(indexing.index_file, IndexFileIn, {"file_path": str(doc)})
    recalled = call(memories.recall, MemoryRecallIn, {"query": "when are releases cut, exactly?"})
    found = call(search_service.search, SearchIn, {"query": "when is staging rebuilt, again?"})

    assert len(held) == 4, held  # content, file, and each new query: embedded once each
    assert held[1] == ("caller", 0)  # a file: before the transaction
    for where, connections in (held[0], *held[2:]):  # one text: before, or beside its call
        assert (where, connections) == ("caller", 0) or (where == "worker" and connections <= 1)
    assert recalled.memories[0].content == "Releases are cut on Thursdays"
    assert "Sunday" in found.results[0].content
