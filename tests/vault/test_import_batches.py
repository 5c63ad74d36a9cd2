"""An import spanning many batches: each batch is embedded while the one before is written,
so a vector must still land on its own memory, and a duplicate must still be found when its
first copy sits in a batch not yet written."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from sqlalchemy import event, select, text
from sqlalchemy.engine.interfaces import ExecuteStyle

from memsys.db import get_engine, session_scope
from memsys.models import Chunk
from memsys.vault import importer
from tests.vault.helpers import import_

TOPICS = [
    "Redis connection timeouts were fixed with socket_keepalive",
    "The deploy pipeline runs database migrations before the web tier",
    "Alice prefers dark mode in every editor she uses",
    "Postgres autovacuum was tuned for the events table",
    "The team chose WebSockets over long polling for live scores",
    "Kubernetes pods restarted because the memory limit was too low",
    "Bob is allergic to peanuts and avoids Thai restaurants",
    "The billing service retries Stripe webhooks three times",
    "We pinned numpy below 2.0 until the wheels for ARM landed",
    "Grafana alerts fire when p95 latency exceeds 300 ms",
    "The mobile app caches images for seven days",
    "Nightly backups go to a bucket in another region",
    "Search results are ranked with BM25 and embeddings",
]


def memory(i: int, content: str) -> dict[str, Any]:
    return {
        "kind": "memory",
        "id": f"mem_{i:016x}",
        "namespace": "global",
        "type": "fact",
        "content": content,
        "importance": 0.5,
        "confidence": 0.5,
        "created": "2026-01-01T00:00:00+00:00",
        "updated": "2026-01-01T00:00:00+00:00",
    }


def write_jsonl(path: Path, records: list[dict[str, Any]]) -> None:
    header = {"kind": "header", "format": "memsys-export", "schema_version": "1.0"}
    lines = [json.dumps(r) for r in [header, *records]]
    path.write_text("\n".join(lines) + "\n")


def stored_vectors() -> dict[str, tuple[str, np.ndarray]]:
    with session_scope() as s:
        rows = s.execute(
            select(Chunk.id, Chunk.content, Chunk.embedding).where(
                Chunk.doc_type == "memory", Chunk.valid_to.is_(None)
            )
        ).all()
    return {r.id: (r.content, np.asarray(r.embedding, dtype=np.float32)) for r in rows}


def assert_each_vector_is_its_own(embedder: Any) -> None:
    stored = stored_vectors()
    ids = sorted(stored)
    expected = embedder.embed([stored[i][0] for i in ids])
    for row_id, want in zip(ids, expected, strict=True):
        assert float(np.dot(stored[row_id][1], want)) > 0.999, stored[row_id][0]


@pytest.fixture
def small_batches(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(importer, "BATCH", 3)  # 13 memories: five batches, four overlaps


def test_vectors_land_on_their_own_memories(
    tmp_path: Path, embedder: Any, small_batches: None
) -> None:
    records = [memory(i, body) for i, body in enumerate(TOPICS)]
    write_jsonl(tmp_path / "snap.jsonl", records)
    report = import_(tmp_path / "snap.jsonl")
    assert report.memories.new == len(TOPICS)
    assert_each_vector_is_its_own(embedder)
    # Edits spread over several batches: each new text gets its own new vector.
    edited = [
        memory(i, body + " (checked again in 2026)") if i % 4 == 1 else memory(i, body)
        for i, body in enumerate(TOPICS)
    ]
    write_jsonl(tmp_path / "edited.jsonl", edited)
    again = import_(tmp_path / "edited.jsonl")
    assert again.memories.changed == 3 and again.memories.unchanged == len(TOPICS) - 3
    assert_each_vector_is_its_own(embedder)


@pytest.mark.parametrize("restore", [False, True])
def test_a_duplicate_of_a_batch_not_yet_written_is_found(
    tmp_path: Path,
    embedder: Any,
    small_batches: None,
    restore: bool,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Restore mode refreshes the planner's statistics once early (here after batch one is
    # written): the batches after it still find what the batches before wrote.
    monkeypatch.setattr(importer, "ANALYZE_EARLY", 3)
    # Record 3 (second batch) repeats record 1 (first batch): when batch two is checked,
    # batch one is still being embedded, not written.
    records = [memory(i, body) for i, body in enumerate(TOPICS[:6])]
    records.insert(3, memory(99, TOPICS[1]))
    records.append(
        {
            "kind": "edge",
            "namespace": "global",
            "type": "relates_to",
            "from_id": f"mem_{99:016x}",
            "to_id": f"mem_{0:016x}",
            "created": "2026-01-01T00:00:00+00:00",
        }
    )
    write_jsonl(tmp_path / "snap.jsonl", records)
    report = import_(tmp_path / "snap.jsonl", restore=restore)
    assert (report.memories.new, report.memories.duplicate) == (6, 1)
    assert report.edges.new == 1
    with session_scope() as s:
        related = "SELECT source_id, target_id FROM edge WHERE relation = 'relates_to'"
        edge = s.execute(text(related)).one()
        copies = s.execute(
            text("SELECT count(*) FROM chunk WHERE content = :c"), {"c": TOPICS[1]}
        ).scalar_one()
    assert tuple(edge) == (f"mem_{1:016x}", f"mem_{0:016x}")  # follows the stored copy
    assert copies == 1
    assert_each_vector_is_its_own(embedder)


def test_content_an_edit_moves_away_is_free_for_the_next_batch(
    tmp_path: Path, embedder: Any, small_batches: None
) -> None:
    first = [memory(i, body) for i, body in enumerate(TOPICS[:3])]
    write_jsonl(tmp_path / "first.jsonl", first)
    assert import_(tmp_path / "first.jsonl").memories.new == 3
    # Batch one edits memory 0 away from its text; batch two brings that text as a new
    # memory: once batch one is written, nothing holds it any more.
    second = [memory(0, TOPICS[0] + " (superseded)"), *first[1:], memory(50, TOPICS[0])]
    write_jsonl(tmp_path / "second.jsonl", second)
    report = import_(tmp_path / "second.jsonl")
    assert (report.memories.changed, report.memories.new, report.memories.duplicate) == (1, 1, 0)
    stored = {row_id: content for row_id, (content, _) in stored_vectors().items()}
    assert stored[f"mem_{50:016x}"] == TOPICS[0]
    assert stored[f"mem_{0:016x}"] == TOPICS[0] + " (superseded)"
    assert_each_vector_is_its_own(embedder)


def test_a_dry_run_counts_what_the_import_does(
    tmp_path: Path, embedder: Any, small_batches: None
) -> None:
    records = [memory(i, body) for i, body in enumerate(TOPICS[:7])]
    records.insert(5, memory(99, TOPICS[0]))  # a duplicate two batches after its first copy
    write_jsonl(tmp_path / "snap.jsonl", records)
    dry = import_(tmp_path / "snap.jsonl", dry_run=True)
    real = import_(tmp_path / "snap.jsonl")
    assert (
        vars(dry.memories)
        == vars(real.memories)
        == {
            "new": 7,
            "changed": 0,
            "unchanged": 0,
            "duplicate": 1,
        }
    )


def test_each_batch_is_one_insert_for_the_statistics_triggers(
    tmp_path: Path, embedder: Any, small_batches: None
) -> None:
    # The term statistics are kept by per-statement triggers: written row by row (one
    # statement each), a long import updated the same lexemes thousands of times in one
    # transaction and every later insert slowed down (100k memories: hours, not minutes).
    write_jsonl(tmp_path / "snap.jsonl", [memory(i, b) for i, b in enumerate(TOPICS)])
    statements: list[int] = []

    def count(conn: Any, cursor: Any, sql: str, params: Any, context: Any, many: bool) -> None:
        if sql.lstrip().startswith("INSERT INTO chunk"):  # executemany: a statement a row
            row_by_row = context.execute_style is ExecuteStyle.EXECUTEMANY
            statements.append(len(params) if row_by_row else 1)

    event.listen(get_engine(), "before_cursor_execute", count)
    try:
        assert import_(tmp_path / "snap.jsonl").memories.new == len(TOPICS)
    finally:
        event.remove(get_engine(), "before_cursor_execute", count)
    assert statements == [1] * 5  # 13 memories in batches of 3: five statements


def test_a_large_import_leaves_the_planner_statistics_current(
    tmp_path: Path, embedder: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The graph walk's plan depends on the edge table's statistics: an import that grows the
    tables refreshes them in its transaction instead of waiting for autovacuum."""

    def planned_rows(table: str) -> float:
        with session_scope() as s:
            return float(
                s.scalar(text(f"SELECT reltuples FROM pg_class WHERE relname = '{table}'"))
            )

    def live_rows(table: str) -> int:
        with session_scope() as s:
            return int(s.scalar(text(f"SELECT count(*) FROM {table}")))

    monkeypatch.setattr(importer, "ANALYZE_AFTER", len(TOPICS))
    write_jsonl(tmp_path / "snap.jsonl", [memory(i, body) for i, body in enumerate(TOPICS)])
    report = import_(tmp_path / "snap.jsonl")
    assert report.memories.new == len(TOPICS)
    assert live_rows("edge") > 0  # the topics name people and tools: mention edges
    for table in ("chunk", "edge", "entity"):
        assert planned_rows(table) == live_rows(table), table


def test_a_batch_of_long_memories_is_written_whole_in_several_statements(
    tmp_path: Path, embedder: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A batch's rows go in as one JSON document, and jsonb holds at most 256 MB: memories
    long enough (MEMSYS_MAX_CONTENT_CHARS allows 10M characters) split a batch into several
    statements. Here the cap is lowered to ~2.5 memories' worth."""
    from memsys.vault import apply

    monkeypatch.setattr(apply, "INSERT_CHARS", 150)
    inserts: list[str] = []

    def seen(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        if statement.lstrip().startswith("INSERT INTO chunk"):
            inserts.append(statement)

    event.listen(get_engine(), "before_cursor_execute", seen)
    try:
        records = [memory(i, body) for i, body in enumerate(TOPICS)]
        write_jsonl(tmp_path / "snap.jsonl", records)
        report = import_(tmp_path / "snap.jsonl")
    finally:
        event.remove(get_engine(), "before_cursor_execute", seen)
    assert report.memories.new == len(TOPICS)
    assert len(inserts) >= len(TOPICS) // 3  # the one batch in several statements
    stored = {row_id: content for row_id, (content, _) in stored_vectors().items()}
    assert stored == {f"mem_{i:016x}": body for i, body in enumerate(TOPICS)}
    assert_each_vector_is_its_own(embedder)
