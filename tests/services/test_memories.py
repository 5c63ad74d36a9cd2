"""Memories through the service layer, on the real database and the real embedding model."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from sqlalchemy import func, select, update
from sqlalchemy.orm import Session

from memsys import runner
from memsys.db import get_engine, session_scope
from memsys.errors import InvalidInput, NotFound
from memsys.models import Chunk, Edge, Entity, Event, MemoryAccess, QueryTrace
from memsys.schemas import (
    MemoryContextIn,
    MemoryCountIn,
    MemoryForgetIn,
    MemoryListIn,
    MemoryRecallIn,
    MemoryStoreBatchIn,
    MemoryStoreIn,
    MemoryStoreOut,
)
from memsys.services import context as context_service
from memsys.services import memories, memory_batch, mentions, namespaces
from memsys.tokens import count_tokens
from tests.conftest import lock_waiters, table_counts, until
from tests.factories import store


def recall(query: str, **fields):  # type: ignore[no-untyped-def]
    return runner.execute(memories.recall, MemoryRecallIn, {"query": query, **fields})


def forget(**fields):  # type: ignore[no-untyped-def]
    return runner.execute(memories.forget, MemoryForgetIn, fields)


def context(**fields):  # type: ignore[no-untyped-def]
    return runner.execute(context_service.context, MemoryContextIn, fields)


def test_store_returns_id_and_recall_finds_it(embedder) -> None:
    stored = store("User prefers dark mode for their IDE", memory_type="preference", importance=0.8)
    store("Chose FastAPI over Flask for performance", memory_type="decision")
    assert stored.id.startswith("mem_") and not stored.duplicate
    assert stored.content_hash.startswith("sha256_")
    out = recall("what color theme does the user like in the editor")
    assert out.memories[0].id == stored.id
    assert out.memories[0].memory_type == "preference"
    assert all(0.0 <= m.score <= 1.0 for m in out.memories)
    assert out.memories[0].score >= out.memories[-1].score


def test_identical_content_is_stored_once_per_namespace(embedder) -> None:
    first = store("Project uses PostgreSQL 18")
    again = store("  Project uses PostgreSQL 18  ")
    elsewhere = store("Project uses PostgreSQL 18", namespace="project:other")
    assert again.duplicate and again.id == first.id
    assert not elsewhere.duplicate and elsewhere.id != first.id
    assert table_counts()["chunk"] == 2


def test_one_text_typed_composed_or_decomposed_is_one_memory(embedder) -> None:
    """An accent typed as a letter and a combining mark (macOS file names, some keyboards)
    is the same text as the composed character: it stored a second memory, and a query
    typed that way scored the stored words differently."""
    composed = store("Lunch at Café Müller with the São Paulo team")
    decomposed = store("Lunch at Cafe\u0301 Mu\u0308ller with the Sa\u0303o Paulo team")
    assert decomposed.duplicate and decomposed.id == composed.id
    assert table_counts()["chunk"] == 1
    store("Dinner at the harbour with the Lisbon team")
    plain = recall("Café Müller lunch")
    typed = recall("Cafe\u0301 Mu\u0308ller lunch")
    assert [(m.id, m.score) for m in typed.memories] == [(m.id, m.score) for m in plain.memories]


def test_a_text_differing_only_in_unseen_characters_is_one_memory(embedder) -> None:
    """A no-break space (a word processor's), a narrow or ideographic space, a zero-width
    space, word joiner, BOM or soft hyphen (pasted from the web) show the text a reader sees
    unchanged, yet stored a second memory. Dedup reads them as a space / nothing; the text
    is stored as it was given. A zero-width joiner changes a word or an emoji: not the same."""
    first = store("Deploy window: Fridays 17:00 to 19:00")
    for variant in (
        "Deploy\u00a0window: Fridays 17:00\u202fto 19:00",
        "Deploy\u200b window:\u2060 Fridays 17:00 to\u3000\ufeff19:00",
        "De\u00adploy window: Fridays 17:00 to 19:00",
    ):
        again = store(variant)
        assert again.duplicate and again.id == first.id, variant
    given = store("Price:\u00a0100\u00a0EUR, net")
    assert not given.duplicate
    family = store("Emoji \U0001f468\u200d\U0001f469 family")
    assert not store("Emoji \U0001f468\U0001f469 family").duplicate
    with session_scope() as s:
        assert s.get(Chunk, ("global", given.id)).content == "Price:\u00a0100\u00a0EUR, net"
        assert s.get(Chunk, ("global", family.id)) is not None
    assert table_counts()["chunk"] == 4


def test_a_memory_stored_before_dedup_read_unseen_characters_is_still_found(
    embedder, tmp_path
) -> None:
    """Rows written before hold the digest of their text as it was given (no migration
    rewrites them): storing or importing that exact text again is still the same memory."""
    text = "Backups\u00a0run at 02:00 UTC"
    first = store(text)
    import hashlib

    legacy = hashlib.sha256(text.encode()).hexdigest()
    with session_scope() as s:  # as a row written before this rule reads
        s.get(Chunk, ("global", first.id)).content_hash = legacy  # type: ignore[union-attr]
    again = store(text)
    assert again.duplicate and again.id == first.id
    batch = runner.execute(
        memories.store_batch, MemoryStoreBatchIn, {"memories": [{"content": text}]}
    )
    assert batch.results[0].duplicate and batch.results[0].id == first.id
    import json

    from tests.vault.helpers import import_

    line = {"kind": "memory", "id": "mem_00000000000000f1", "type": "fact", "content": text}
    snapshot = tmp_path / "snap.jsonl"
    header = {"kind": "header", "format": "memsys-export", "schema_version": "1.0"}
    created = {"created": "2026-01-01T00:00:00+00:00", "importance": 0.5}
    snapshot.write_text(f"{json.dumps(header)}\n{json.dumps(line | created)}\n")
    imported = import_(snapshot)
    assert imported.applied and imported.memories.duplicate == 1, imported
    assert table_counts()["chunk"] == 1


def test_content_of_combining_marks_alone_is_refused(embedder) -> None:
    """A lone combining accent shows nothing of its own (it attaches to the character
    before it); it was stored as a memory."""
    from memsys.mcp.server import call
    from memsys.operations import BY_NAME

    for content in ("\u0301", " \u0301\u0308 ", "\u20dd"):
        refused = call(BY_NAME["memory_store"], {"content": content})
        assert not refused["success"] and "no visible character" in refused["error"], content
    assert call(BY_NAME["memory_store"], {"content": "e\u0301"})["success"]  # é
    assert table_counts()["chunk"] == 1


def test_concurrent_stores_of_the_same_content_yield_one_row(embedder) -> None:
    results = []
    barrier = threading.Barrier(6)

    def worker() -> None:
        barrier.wait()
        results.append(store("Deploys happen on Tuesdays", namespace="project:race"))

    threads = [threading.Thread(target=worker) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len({r.id for r in results}) == 1
    assert sum(not r.duplicate for r in results) == 1
    with session_scope() as s:
        rows = s.scalar(
            select(func.count()).select_from(Chunk).where(Chunk.namespace == "project:race")
        )
    assert rows == 1


def test_a_store_rolled_back_to_break_a_deadlock_runs_again(
    embedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Indexing a file writes its chunks first (the namespace's BM25 statistics stay locked
    # until it commits) and creates the entities they name afterwards; a store creates its
    # entities first. When both name the same new entity each waits for the other, and
    # PostgreSQL rolls back the one that waited first: the store, which the runner runs again.
    ns = "project:deadlock"
    store("Deploys happen on Tuesdays", namespace=ns)
    content = "Quillon Verhaeghe signed off the Zephyrine migration"
    attempts: list[int] = []
    real = memory_batch.store_many

    def counted(*args, **kwargs):  # type: ignore[no-untyped-def]
        attempts.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(memory_batch, "store_many", counted)
    results: list[object] = []
    with Session(get_engine()) as indexer:
        row = MemoryStoreIn(content="the nightly backup finished without errors", namespace=ns)
        real(indexer, [row], [embedder.embed_one(row.content)])
        worker = threading.Thread(target=lambda: results.append(store(content, namespace=ns)))
        worker.start()
        assert until(lambda: lock_waiters() > 0, 20)  # the store, for the statistics
        mentions.resolve(indexer, ns, [("chk_file", content)])  # the store's new entities
        indexer.commit()
        worker.join(30)
    assert not worker.is_alive()
    [stored] = results
    assert isinstance(stored, MemoryStoreOut) and not stored.duplicate
    assert len(attempts) == 2  # rolled back once, then written
    with session_scope() as s:
        assert s.scalar(select(func.count()).where(Chunk.namespace == ns)) == 3
        names = s.scalars(select(Entity.name).where(Entity.namespace == ns)).all()
        assert names.count("Quillon Verhaeghe") == names.count("Zephyrine") == 1
        edges = s.scalar(
            select(func.count()).where(Edge.namespace == ns, Edge.source_id == stored.id)
        )
        assert edges == 2


def test_a_stored_memory_keeps_every_field_the_models_vector_its_edges_and_event(
    embedder,
) -> None:
    # The row, its mention edges and its event are written by one statement from a JSON
    # document: nothing may be lost or rounded on the way (the vector least of all).
    content = "Priya moved the billing service to Kubernetes after the outage"
    out = store(
        content,
        memory_type="decision",
        importance=0.9,
        tags=["infra", "billing"],
        metadata={"ticket": "OPS-12", "ratio": 0.125},
        lifecycle="personal",
        reference_time="2026-03-14T09:30:00+01:00",
    )
    with session_scope() as s:
        row = s.scalars(select(Chunk).where(Chunk.id == out.id)).one()
        assert np.array_equal(
            np.asarray(row.embedding, dtype=np.float32), embedder.embed_one(content)
        )
        assert (row.content, row.memory_type, row.importance, row.confidence) == (
            content,
            "decision",
            0.9,
            0.3,
        )
        assert sorted(row.tags) == ["billing", "infra"] and row.lifecycle == "personal"
        assert row.meta == {"ticket": "OPS-12", "ratio": 0.125}
        assert row.occurred_at.isoformat() == "2026-03-14T08:30:00+00:00"
        assert row.token_count == count_tokens(content)
        assert f"sha256_{row.content_hash}" == out.content_hash
        named = s.scalars(
            select(Entity.name)
            .join(Edge, Edge.target_id == Entity.id)
            .where(Edge.source_id == out.id, Edge.relation == "mentions")
        ).all()
        assert {"Priya", "Kubernetes"} <= set(named)
        event = s.scalars(select(Event).where(Event.subject_id == out.id)).one()
        assert (event.event_type, event.operation) == ("create", "memory_store")
        assert event.payload == {"memory_type": "decision", "content_hash": row.content_hash}


def test_recall_filters_apply(embedder) -> None:
    store("Use tabs for Makefiles", memory_type="pattern", importance=0.9, namespace="project:a")
    store(
        "Use spaces for Python files", memory_type="pattern", importance=0.2, namespace="project:a"
    )
    store("Tabs are banned in YAML", memory_type="fact", importance=0.9, namespace="project:b")
    out = recall("tabs or spaces", namespace="project:a")
    assert {m.namespace for m in out.memories} == {"project:a"}
    out = recall("tabs or spaces", min_importance=0.5)
    assert all(m.importance >= 0.5 for m in out.memories) and len(out.memories) == 2
    out = recall("tabs or spaces", memory_type="fact")
    assert [m.content for m in out.memories] == ["Tabs are banned in YAML"]
    out = recall("tabs or spaces", min_confidence=0.5)
    assert out.memories == []  # new memories start at confidence 0.3


def test_recall_writes_a_trace_and_an_event_and_counts_access(embedder) -> None:
    stored = store("The staging database is reset nightly")
    out = recall("when is staging reset")
    with session_scope() as s:
        trace = s.get(QueryTrace, ("*", out.trace_id))
        assert trace is not None and trace.operation == "memory_recall"
        assert trace.retrieved[0]["id"] == stored.id
        assert trace.timings["embed_ms"] >= 0 and trace.event_id is not None
        kinds = s.scalars(select(Event.event_type).order_by(Event.id)).all()
        assert kinds == ["create", "query"]
        logged = select(MemoryAccess.memory_id).where(MemoryAccess.memory_id == stored.id)
        assert len(s.scalars(logged).all()) == 1


def test_unknown_namespace_is_an_error_not_an_empty_list(embedder) -> None:
    store("something", namespace="global")
    with pytest.raises(
        NotFound, match=r"Namespace not found: project:ghost\. Known namespaces: global"
    ):
        recall("anything", namespace="project:ghost")
    for op, model in ((memories.count, MemoryCountIn), (memories.list_memories, MemoryListIn)):
        with pytest.raises(NotFound, match="Namespace not found"):
            runner.execute(op, model, {"namespace": "project:ghost"})


def test_metadata_is_measured_in_the_bytes_it_is_stored_in(embedder) -> None:
    """The 64 KiB metadata limit counted ASCII escapes (six bytes for a CJK character, three
    in UTF-8): 60 KB of Chinese notes were refused as 120 KB."""
    notes = "说明" * 10_000
    stored = store("Notes of the Shenzhen vendor meeting", metadata={"notes": notes})
    with session_scope() as s:
        row = s.get(Chunk, ("global", stored.id))
        assert row is not None and row.meta["notes"] == notes


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"content": "   "}, "Content cannot be empty"),
        ({"content": "x", "memory_type": "vibe"}, "Invalid memory type: vibe"),
        ({"content": "x", "importance": 1.5}, "importance must be between 0.0 and 1.0"),
        ({"content": "x", "importance": -0.1}, "importance must be between 0.0 and 1.0"),
        ({"content": "x" * 32_001}, "Content is too long: 32001 characters"),
        ({"content": "x", "namespace": "bad namespace!"}, "Invalid namespace"),
        ({"content": "x", "metadata": {"notes": "y" * 70_000}}, "Metadata is too large"),
        ({"content": "x", "tags": [f"tag{i}" for i in range(51)]}, "Too many tags: 51"),
    ],
)
def test_bad_store_input_is_rejected_and_writes_nothing(fields, message) -> None:
    before = table_counts()
    with pytest.raises(InvalidInput, match=message):
        runner.execute(memories.store, MemoryStoreIn, fields)
    assert table_counts() == before


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"query": ""}, "Query cannot be empty"),
        ({"query": " \n\t "}, "Query cannot be empty"),
        ({"query": "x", "n_results": 0}, "n_results must be between 1 and 50"),
        ({"query": "x", "n_results": 51}, "n_results must be between 1 and 50"),
        ({"query": "x", "memory_type": "nope"}, "Invalid memory type: nope"),
        ({"query": "x", "min_confidence": 2}, "min_confidence must be between 0.0 and 1.0"),
    ],
)
def test_bad_recall_input_is_rejected(fields, message) -> None:
    before = table_counts()
    with pytest.raises(InvalidInput, match=message):
        runner.execute(memories.recall, MemoryRecallIn, fields)
    assert table_counts() == before


def test_forget_by_id_closes_the_memory_but_keeps_history(embedder) -> None:
    stored = store("Temporary note about the sprint")
    out = forget(memory_id=stored.id)
    assert out.deleted_ids == [stored.id] and not out.purged
    assert recall("sprint note").memories == []
    with session_scope() as s:
        row = s.get(Chunk, ("global", stored.id))
        assert row is not None and row.valid_to is not None  # closed, not deleted
    # The same content can be stored again after it was forgotten.
    assert not store("Temporary note about the sprint").duplicate


def test_forget_unknown_id_says_so(embedder) -> None:
    with pytest.raises(NotFound, match="Memory not found: mem_0000000000000000"):
        forget(memory_id="mem_0000000000000000")


def test_forget_refuses_a_blank_id_as_bad_input(embedder) -> None:
    """The published schema gives memory_id minLength 1 and a non-blank pattern, but a blank
    id was looked up: 404 "Memory not found: " instead of a refusal of the input."""
    for blank in ("", "   "):
        with pytest.raises(InvalidInput, match="memory_id cannot be empty"):
            forget(memory_id=blank)


def test_golden_rules_are_protected_unless_forced(embedder) -> None:
    rule = store("Never commit secrets to the repository", memory_type="golden_rule")
    out = forget(memory_id=rule.id)
    assert out.deleted_ids == [] and out.protected_ids == [rule.id]
    assert recall("secrets in git").memories[0].id == rule.id
    out = forget(memory_id=rule.id, force=True)
    assert out.deleted_ids == [rule.id]


def test_forget_by_query_keeps_pinned_memories_unless_forced(embedder) -> None:
    """A query that matches a pinned memory left it pinned no more: it was forgotten like
    any other match. It is kept now, and the answer says so; `force` (or its id) forgets it."""
    from memsys.schemas.lifecycle import PinIn
    from memsys.services import pinning

    pinned = store("Redis connection timeouts were fixed with TCP keepalive")
    gone = store("Redis connection timeouts were fixed by raising the pool size")
    with session_scope() as s:
        pinning.pin(s, PinIn(memory_id=pinned.id))
    out = forget(query="redis connection timeouts fix")
    assert out.deleted_ids == [gone.id]
    assert out.pinned_kept_ids == [pinned.id] and out.pinned_kept_count == 1
    assert out.protected_ids == []
    assert [m.id for m in recall("redis connection timeouts").memories] == [pinned.id]
    out = forget(query="redis connection timeouts fix", force=True)
    assert out.deleted_ids == [pinned.id] and out.pinned_kept_count == 0
    from memsys.operations import BY_NAME

    # what an agent reads of the tool (MCP's description, the CLI's help) says so too
    assert "pinned" in BY_NAME["memory_forget"].summary


def test_forget_by_id_takes_a_pinned_memory(embedder) -> None:
    """Naming a pinned memory's id is asking for that memory: it is forgotten (only golden
    rules need force by id)."""
    from memsys.schemas.lifecycle import PinIn
    from memsys.services import pinning

    pinned = store("The staging database is restored every Sunday")
    with session_scope() as s:
        pinning.pin(s, PinIn(memory_id=pinned.id))
    out = forget(memory_id=pinned.id)
    assert out.deleted_ids == [pinned.id] and out.pinned_kept_ids == []


def test_forget_by_query_only_takes_close_matches(embedder) -> None:
    kept = store("The office coffee machine is on floor three")
    gone = store("Redis connection timeouts were fixed with TCP keepalive")
    out = forget(query="redis connection timeouts keepalive fix")
    assert out.deleted_ids == [gone.id]
    assert [m.id for m in recall("coffee machine").memories] == [kept.id]


def test_forget_by_query_takes_a_memory_waiting_for_its_vector(embedder) -> None:
    """A memory on the embedding queue (no vector yet) that recall finds by its words is
    forgotten by the same query, judged by its text's similarity."""
    from tests.factories import queue_for_embedding

    kept = store("The office coffee machine is on floor three")
    gone = store("Redis connection timeouts were fixed with TCP keepalive")
    queue_for_embedding(gone.id, kept.id)
    out = forget(query="redis connection timeouts keepalive fix")
    assert out.deleted_ids == [gone.id]


def test_forget_by_query_takes_every_copy_recall_lists_once(embedder) -> None:
    """Recall lists a text stored in two namespaces once (dedup by content hash): a forget by
    query over all namespaces closed that one, and the next recall showed the other copy."""
    first = store("Alpha service runs on port 8080", namespace="project:a")
    second = store("Alpha service runs on port 8080", namespace="project:b")
    kept = store("The office coffee machine is on floor three", namespace="project:b")
    out = forget(query="Alpha service runs on port 8080")
    assert sorted(out.deleted_ids) == sorted([first.id, second.id])
    assert [m.id for m in recall("alpha service port").memories] == [kept.id]
    # within one namespace, only its copy
    again = store("Alpha service runs on port 8080", namespace="project:a")
    other = store("Alpha service runs on port 8080", namespace="project:b")
    out = forget(query="Alpha service runs on port 8080", namespace="project:b")
    assert out.deleted_ids == [other.id]
    assert [m.id for m in recall("alpha service port", n_results=1).memories] == [again.id]


def test_forget_input_value_detects_ids_and_queries(embedder) -> None:
    a = store("Build artifacts are cached in S3")
    b = store("Feature flags are read from LaunchDarkly")
    assert forget(input_value=a.id).deleted_ids == [a.id]
    assert forget(input_value="feature flags launchdarkly").deleted_ids == [b.id]
    with pytest.raises(InvalidInput, match="Give memory_id, query or input_value"):
        forget()
    before = table_counts()
    with pytest.raises(InvalidInput, match="Query cannot be empty"):
        forget(input_value="   ")
    with pytest.raises(InvalidInput, match="Query is too long"):
        forget(input_value="deploy " * 1000)
    assert table_counts() == before


def test_purge_erases_the_row_and_logs_only_that_it_happened(embedder) -> None:
    secret = store("My API key is hunter2")
    out = forget(memory_id=secret.id, purge=True, force=True)
    assert out.purged and out.deleted_ids == [secret.id]
    with session_scope() as s:
        assert s.get(Chunk, ("global", secret.id)) is None
        purge = s.scalars(select(Event).where(Event.event_type == "purge")).one()
        assert "hunter2" not in str(purge.payload)


def test_a_forgotten_memory_can_still_be_purged(embedder) -> None:
    """A forget keeps the text (closed, with its history); a purge asked for afterwards
    answered "Memory not found", so what was only forgotten could never be erased."""
    secret = store("The staging database password is swordfish")
    forget(memory_id=secret.id)
    with pytest.raises(NotFound):
        forget(memory_id=secret.id)  # forgotten once: a second forget finds nothing
    out = forget(memory_id=secret.id, purge=True)
    assert out.purged and out.deleted_ids == [secret.id]
    with session_scope() as s:
        assert s.get(Chunk, ("global", secret.id)) is None
        assert not s.scalars(select(MemoryAccess).where(MemoryAccess.memory_id == secret.id)).all()
    with pytest.raises(NotFound):
        forget(memory_id=secret.id, purge=True)  # erased: nothing left to purge


def test_context_groups_by_type_golden_rules_first(embedder) -> None:
    store("Always use type hints in Python code", memory_type="golden_rule")
    store("User prefers dark mode for their IDE", memory_type="preference")
    store("Chose FastAPI over Flask for performance", memory_type="decision")
    out = context()
    text = out.context
    assert text.startswith("## Relevant Memories\n")
    assert text.index("### Golden Rules (High Confidence)") < text.index("### Preferences")
    assert text.index("### Preferences") < text.index("### Decisions")
    assert "- Always use type hints in Python code [confidence: 1.00]" in text
    assert out.memory_count == 3 and out.golden_rule_count == 1
    assert out.token_estimate == count_tokens(text)


@pytest.mark.parametrize("budget", [1, 12, 25, 40, 80, 4000])
def test_context_never_exceeds_its_budget(embedder, budget: int) -> None:
    for i in range(12):
        store(f"Decision {i}: the service {i} talks to queue {i} over gRPC", memory_type="decision")
    out = context(query="which services use gRPC", token_budget=budget)
    assert count_tokens(out.context) <= budget
    assert out.token_estimate == count_tokens(out.context)
    if budget >= 80:
        assert out.memory_count >= 3


def test_context_without_a_query_lists_a_text_once(embedder) -> None:
    """Without a namespace, the same text stored in two namespaces was listed twice (a
    context with a query, through the retrieval pipeline, lists it once)."""
    a = store("Deploys run on Tuesdays after the standup", namespace="project:a")
    b = store("Deploys run on Tuesdays after the standup", namespace="project:b")
    other = store("The staging database runs on host db1", namespace="project:b")
    out = context()
    assert out.context.count("Deploys run on Tuesdays") == 1
    assert out.memory_count == 2 and other.id in out.memory_ids
    assert len({a.id, b.id} & set(out.memory_ids)) == 1
    asked = context(query="when do deploys run")
    assert asked.context.count("Deploys run on Tuesdays") == 1


def test_context_with_query_puts_relevant_memories_in(embedder) -> None:
    store("The billing service retries webhooks three times", memory_type="fact")
    store("Lunch is at noon on Fridays", memory_type="fact")
    out = context(query="billing webhook retries", token_budget=30)
    assert "billing service retries webhooks" in out.context
    assert "Lunch" not in out.context


def test_count_and_list_paginate_and_order(embedder) -> None:
    for i in range(5):
        store(f"fact number {i}", memory_type="fact", importance=i / 10)
    store("a decision", memory_type="decision")
    assert runner.execute(memories.count, MemoryCountIn, {}).count == 6
    assert runner.execute(memories.count, MemoryCountIn, {"memory_type": "fact"}).count == 5
    page = runner.execute(
        memories.list_memories,
        MemoryListIn,
        {"memory_type": "fact", "limit": 2, "offset": 1, "order_by": "importance"},
    )
    assert page.total == 5 and [m.content for m in page.memories] == [
        "fact number 3",
        "fact number 2",
    ]
    asc = runner.execute(
        memories.list_memories,
        MemoryListIn,
        {"order_by": "importance", "descending": False, "limit": 1},
    )
    assert asc.memories[0].content == "fact number 0"
    with pytest.raises(InvalidInput, match="Invalid order_by"):
        runner.execute(memories.list_memories, MemoryListIn, {"order_by": "content; drop table"})


def test_namespaces_are_listed_with_counts(embedder) -> None:
    store("one", namespace="project:a")
    store("two", namespace="project:a")
    store("three")
    listing = runner.execute_bare(namespaces.list_with_counts)
    counts = {n.namespace: n.memory_count for n in listing.namespaces}
    assert counts == {"global": 1, "project:a": 2}


def test_metadata_keeps_numbers_json_allows(embedder) -> None:
    # JSONB parameters are written with orjson, which refuses integers beyond 64 bits:
    # those go through the standard library instead, and come back as they were sent.
    meta = {"build": 2**70, "ratio": 0.1, "nested": {"ids": [1, -(2**64)]}, "flag": None}
    out = store("metadata with very large numbers", metadata=meta)
    with session_scope() as s:
        assert s.scalar(select(Chunk.meta).where(Chunk.id == out.id)) == meta


def test_a_memory_is_forgotten_once_however_many_forgets_race(embedder) -> None:  # type: ignore[no-untyped-def]
    """Five forgets of one id at once each answered deleted_count 1 (and wrote five delete
    events): the row is closed once, the others find it gone."""
    kept = store("Deploys happen on Tuesdays")
    holder = Session(get_engine())
    first = memories.forget(holder, MemoryForgetIn(memory_id=kept.id))  # not committed yet
    answers: list[object] = []

    def another() -> None:
        try:
            answers.append(forget(memory_id=kept.id).deleted_count)
        except NotFound as exc:
            answers.append(exc.message)

    racers = [threading.Thread(target=another) for _ in range(4)]
    for racer in racers:
        racer.start()
    assert until(lambda: lock_waiters() == 4, 20)  # each waits for the first
    holder.commit()
    holder.close()
    for racer in racers:
        racer.join(30)
    assert first.deleted_count == 1
    assert answers == [f"Memory not found: {kept.id}"] * 4
    with session_scope() as s:
        deletes = s.scalar(
            select(func.count()).where(Event.event_type == "delete", Event.subject_id == kept.id)
        )
    assert deletes == 1


def test_a_store_beside_a_forget_of_its_text_never_answers_with_the_closing_id(  # type: ignore[no-untyped-def]
    embedder,
) -> None:
    kept = store("Deploys happen on Tuesdays")
    holder = Session(get_engine())
    memories.forget(holder, MemoryForgetIn(memory_id=kept.id))  # not committed yet
    stored: list[MemoryStoreOut] = []
    writer = threading.Thread(target=lambda: stored.append(store("Deploys happen on Tuesdays")))
    writer.start()
    assert until(lambda: lock_waiters() == 1, 20)  # the store waits for the forget's turn
    holder.commit()
    holder.close()
    writer.join(30)
    (again,) = stored
    assert not again.duplicate and again.id != kept.id  # a new memory, alive
    assert recall("when do we deploy").memories[0].id == again.id


def test_a_store_beside_a_forget_of_a_row_hashed_before_dedup_waits_its_turn(  # type: ignore[no-untyped-def]
    embedder,
) -> None:
    """A memory hashed before dedup read a zero-width space away, and kept so by the upgrade
    (another live memory held its new digest): a forget took the turn of the row's digest, a
    store of its text the turn of today's, so the store answered with the id being closed."""
    import hashlib

    text_ = "Deploys\u200b happen on Fridays"
    old = store(text_)
    with session_scope() as s:
        s.execute(
            update(Chunk)
            .where(Chunk.id == old.id)
            .values(content_hash=hashlib.sha256(text_.encode()).hexdigest())
        )
    holder = Session(get_engine())
    memories.forget(holder, MemoryForgetIn(memory_id=old.id))  # not committed yet
    stored: list[MemoryStoreOut] = []
    writer = threading.Thread(target=lambda: stored.append(store(text_)))
    writer.start()
    try:
        waited = until(lambda: lock_waiters() == 1, 20)  # the store waits for the forget's turn
    finally:
        holder.commit()
        holder.close()
        writer.join(30)
    (again,) = stored
    assert waited and not again.duplicate and again.id != old.id


def test_a_forgotten_memory_stops_naming_its_entities(embedder) -> None:
    """Its mention edges close with it (the graph channel counts live mentions to tell a hub
    from a subject); before the forget they were live, as an as_of read sees them."""
    memory = store("Grafana alerts page the on-call engineer through PagerDuty")
    kept = store("PagerDuty escalates after fifteen minutes")

    def mentions_of(chunk_id: str) -> list[Edge]:
        with session_scope() as s:
            return list(
                s.scalars(
                    select(Edge).where(Edge.source_id == chunk_id, Edge.relation == "mentions")
                )
            )

    assert mentions_of(memory.id) and all(e.valid_to is None for e in mentions_of(memory.id))
    forget(memory_id=memory.id)
    with session_scope() as s:
        closed_at = s.get(Chunk, ("global", memory.id)).valid_to  # type: ignore[union-attr]
    assert all(e.valid_to == e.expired_at == closed_at for e in mentions_of(memory.id))
    assert all(e.valid_to is None for e in mentions_of(kept.id))


@pytest.mark.parametrize(
    ("operation", "fields"),
    [
        ("memory_outcome", {"memory_id": "mem_0", "success": True, "session_id": "  "}),
        ("debug_query_log", {"operation": ""}),
        ("search_with_filters", {"query": "x", "filters": {"source_file": " "}}),
        ("add_episode", {"content": "Alpha uses Beta.", "source_description": "\t"}),
    ],
)
def test_blank_optional_text_is_refused_by_name_not_stored(
    operation: str, fields: dict[str, object]
) -> None:
    from memsys.mcp.server import call
    from memsys.operations import BY_NAME

    before = table_counts()
    answer = call(BY_NAME[operation], fields)
    assert answer["success"] is False and "cannot be empty: leave it out" in answer["error"]
    assert table_counts() == before


LONG_NOTE_OPENING = (
    "Design note: how the billing service exports invoices to the accounting system."
)
LONG_NOTE_BODY = " ".join(
    f"Export step {n}: the nightly job reads the invoices of the day, converts each one to "
    "the ledger format and uploads the file over SFTP."
    for n in range(8)
)
LONG_NOTE_SECTION = (
    "Known problem: the staging cluster runs out of disk space every Friday. Its nodes keep "
    "every log file because log rotation is switched off there. When the disks fill up, pods "
    "are evicted and the staging deploys fail. The fix is to turn logrotate back on for the "
    "staging nodes and delete old logs. Until then, whoever is on call empties the staging "
    "nodes' log directories by hand on Friday morning, before the disks are full."
)


def test_a_long_memory_is_found_by_meaning_for_a_section_past_the_models_window(
    embedder,
) -> None:
    """The model reads 254 tokens of a text. A long note's vector used to say what its
    opening says, so a question about a later section found it only by its words: here the
    dense ranking (the channel's own SQL order) puts it first, where the opening's vector
    puts it below most short memories of the store."""
    from sqlalchemy import text

    from memsys.embeddings import embed_query, get_embedder
    from memsys.retrieval.dense import literal
    from memsys.tokens import truncate_to_tokens
    from memsys.whole_text import WINDOW_TOKENS

    note = f"{LONG_NOTE_OPENING}\n\n{LONG_NOTE_BODY}\n\n{LONG_NOTE_SECTION}"
    assert count_tokens(f"{LONG_NOTE_OPENING}\n\n{LONG_NOTE_BODY}") > WINDOW_TOKENS
    others = [
        "Invoices are numbered per year, starting again at 1 every January.",
        "The accounting team closes the books on the third working day of the month.",
        "Customers pay by SEPA direct debit or by card.",
        "Refunds over 500 euros need a second approval.",
        "The team standup is at 9:30 every weekday.",
        "Use Python 3.11 for every new service.",
    ]
    stored = store(note, namespace="long-notes")
    assert stored.warnings == []  # nothing of it is out of the vector's reach
    for content in others:
        store(content, namespace="long-notes")
    question = embed_query("why does the staging cluster keep running out of disk space")
    with session_scope() as session:
        order = (
            session.execute(
                text(
                    "SELECT id FROM chunk WHERE namespace = 'long-notes' "
                    "AND valid_to IS NULL ORDER BY embedding <=> CAST(:q AS vector)"
                ),
                {"q": literal(question)},
            )
            .scalars()
            .all()
        )
    assert order[0] == stored.id
    # The vector of what the model alone reads of the note would rank it under four of six.
    opening_only = get_embedder().embed([truncate_to_tokens(note, WINDOW_TOKENS)])[0]
    above = get_embedder().embed(others) @ question > float(opening_only @ question)
    assert int(above.sum()) >= 4
    assert store(note, namespace="long-notes").duplicate  # stored once, as any memory


def test_a_close_is_never_stamped_before_the_memory_began(embedder) -> None:
    """A forget whose transaction began before the memory was stored stamped its close with
    that start (valid_to before valid_from: the memory never existed as of any time); a
    lifecycle close with a maintenance run's earlier clock did the same."""
    from datetime import timedelta

    from sqlalchemy import text

    from memsys.services import decay

    with session_scope() as late:
        late.execute(text("SELECT 1"))  # its transaction, and now(), begin here
        memory = store("The cache is warmed at startup")  # committed by another transaction
        memories.forget(late, MemoryForgetIn(memory_id=memory.id))
    other = store("Grafana alerts page the on-call engineer")
    with session_scope() as s:
        row = s.get(Chunk, ("global", other.id))
        assert row is not None
        decay.close(s, row, row.valid_from - timedelta(hours=1), "decay")
    with session_scope() as s:
        for memory_id in (memory.id, other.id):
            closed = s.get(Chunk, ("global", memory_id))
            assert closed is not None and closed.valid_to is not None
            assert closed.valid_to >= closed.valid_from, memory_id
