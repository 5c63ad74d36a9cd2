"""An import beside the writers of its namespaces. An import holds a namespace's BM25
statistics from its first row until it commits and creates the entities its rows name after
writing them; a store creates its entities first. A store that named a new entity and then
waited for the statistics would deadlock with the import, and PostgreSQL would roll back the
one that waited second — the import. A writer now waits for the import at its start."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import func, select, text
from sqlalchemy.orm import Session

from memsys import ids, runner
from memsys.db import get_engine, session_scope
from memsys.errors import Busy
from memsys.models import Chunk, Entity
from memsys.schemas import MemoryForgetIn, MemoryStoreIn
from memsys.schemas.learning import MemoryOutcomeIn
from memsys.schemas.lifecycle import DecayIn, PinIn
from memsys.services import decay, learning, memories, namespaces, pinning
from memsys.vault import apply, service
from tests.conftest import lock_waiters, lock_waits, until
from tests.factories import store
from tests.vault.test_import_batches import memory, write_jsonl


def test_a_store_that_created_an_entity_first_does_not_roll_an_import_back(
    tmp_path: Path, embedder: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    store("Deploys happen on Tuesdays")  # the namespace exists: neither creates it
    content = "Quillon Verhaeghe signed off the Zephyrine migration"
    vector = embedder.embed_one(content)
    in_transaction, go = threading.Event(), threading.Event()

    def paused(params: MemoryStoreIn) -> Callable[[], Any]:
        def vector_when_told() -> Any:  # awaited after the store created its entities
            in_transaction.set()
            go.wait(30)
            return vector

        return vector_when_told

    monkeypatch.setattr(memories.store, "prepare", paused)
    # Between writing its rows and naming their entities, the import gives a store that waits
    # for the statistics longer than deadlock_timeout (1 s): PostgreSQL's check of that wait
    # then finds no cycle, and the import's own wait would be the one found and rolled back.
    named = threading.Event()
    link = apply.mentions.link

    def slow_link(*args: Any) -> int:
        named.set()
        if until(lambda: lock_waiters() > 0, 2.0):
            time.sleep(1.5)
        return link(*args)

    monkeypatch.setattr(apply.mentions, "link", slow_link)

    stored: list[Any] = []
    writer = threading.Thread(target=lambda: stored.append(store(content)))
    writer.start()
    assert in_transaction.wait(30)
    snapshot = tmp_path / "snapshot.jsonl"
    write_jsonl(snapshot, [memory(1, "The Zephyrine rollout was reviewed by Quillon Verhaeghe")])
    outcome: dict[str, Any] = {}

    def import_once() -> None:  # as the CLI and REST run it: one transaction, no retry
        try:
            with session_scope() as session:
                outcome["report"] = service.import_from(session, snapshot, False, False, False)
        except Exception as exc:  # the assertion below shows it
            outcome["error"] = exc

    importer = threading.Thread(target=import_once)
    importer.start()
    assert until(lambda: named.is_set() or lock_waiters() > 0, 30)
    go.set()
    importer.join(60)
    writer.join(60)

    assert not importer.is_alive() and not writer.is_alive()
    assert "error" not in outcome, outcome.get("error")
    assert outcome["report"].memories.new == 1
    assert len(stored) == 1 and not stored[0].duplicate
    with session_scope() as s:
        assert s.scalar(select(func.count()).where(Chunk.doc_type == "memory")) == 3
        names = s.scalars(select(Entity.name).where(Entity.valid_to.is_(None))).all()
    assert names.count("Quillon Verhaeghe") == names.count("Zephyrine") == 1


@pytest.mark.parametrize("write", ["store", "forget", "pin", "decay"])
def test_a_writer_waits_for_an_import_at_its_start_holding_nothing(
    embedder: Any, write: str
) -> None:
    kept = store("Deploys happen on Tuesdays")
    calls = {
        "store": lambda: store("Releases are cut on Thursdays"),
        "forget": lambda: runner.execute(memories.forget, MemoryForgetIn, {"memory_id": kept.id}),
        "pin": lambda: runner.execute(pinning.pin, PinIn, {"memory_id": kept.id}),
        "decay": lambda: runner.execute(decay.decay, DecayIn, {"namespace": "global"}),
    }
    with Session(get_engine()) as importer:
        namespaces.write_alone(importer, ["global"])  # an import of the namespace, under way
        done: list[Any] = []
        writer = threading.Thread(target=lambda: done.append(calls[write]()))
        writer.start()
        assert until(lambda: lock_waiters() > 0, 20)
        assert lock_waits() == ["advisory"]  # its turn, not a row the import may need
        importer.commit()
        writer.join(30)
    assert len(done) == 1
    with session_scope() as s:
        live = s.scalars(
            select(Chunk.content).where(Chunk.doc_type == "memory", Chunk.valid_to.is_(None))
        ).all()
    expected = {"store": 2, "forget": 0, "pin": 1, "decay": 1}[write]
    assert len(live) == expected


def test_a_store_waiting_for_an_import_holds_no_turn_of_its_content(embedder: Any) -> None:
    # memory_store sends its content's turn in the round trip that tries the namespace's:
    # taken while the import writes alone, it would close a cycle with an import of the
    # same text (the import waiting for the content, the store for the namespace).
    content = "Backups run at midnight"
    with Session(get_engine()) as importer:
        namespaces.write_alone(importer, ["global"])
        done: list[Any] = []
        writer = threading.Thread(target=lambda: done.append(store(content)))
        writer.start()
        assert until(lambda: lock_waiters() > 0, 20)
        free = importer.scalar(
            text("SELECT pg_try_advisory_xact_lock(hashtextextended(:key, 0))"),
            {"key": "\x1f".join(("global", "memory", ids.content_hash(content)))},
        )
        importer.commit()
        writer.join(30)
    assert free
    assert len(done) == 1 and not done[0].duplicate


def test_a_writer_gives_up_on_a_long_import_busy_and_writes_nothing(
    embedder: Any, busy_wait_1s: None
) -> None:
    kept = store("Deploys happen on Tuesdays")
    with Session(get_engine()) as importer:
        namespaces.write_alone(importer, ["global"])  # an import that runs for minutes
        with pytest.raises(Busy, match=r"writing namespace 'global'.*Try again"):
            store("Releases are cut on Thursdays")  # a new memory: ensure waits
        with pytest.raises(Busy, match="MEMSYS_BUSY_WAIT_S"):  # an existing one: share waits
            runner.execute(memories.forget, MemoryForgetIn, {"memory_id": kept.id})
        with pytest.raises(Busy):  # an outcome of a memory the import may edit
            runner.execute(
                learning.outcome, MemoryOutcomeIn, {"memory_id": kept.id, "success": True}
            )
        importer.rollback()
    with session_scope() as s:
        live = s.scalars(
            select(Chunk.id).where(Chunk.doc_type == "memory", Chunk.valid_to.is_(None))
        ).all()
    assert live == [kept.id]


def test_a_writer_of_many_namespaces_waits_the_busy_wait_once_not_once_each(
    embedder: Any, busy_wait_1s: None
) -> None:
    """A decay or forget with no namespace shares every namespace. Behind imports of six
    that end one after another, each just before the writer's wait for it ran out, it
    waited MEMSYS_BUSY_WAIT_S for each (~5.5 s here); it now waits 1 s in all."""
    names = [f"ns{i}" for i in range(6)]
    for name in names:
        store("Deploys happen on Tuesdays", namespace=name)
    importers = [Session(get_engine()) for _ in names]
    for importer, name in zip(importers, names, strict=True):
        namespaces.write_alone(importer, [name])

    def end_one_by_one() -> None:
        for importer in importers:
            time.sleep(0.8)
            importer.rollback()

    ender = threading.Thread(target=end_one_by_one)
    started = time.monotonic()
    ender.start()
    try:
        shown = "'ns0', 'ns1', 'ns2', 'ns3', 'ns4' and 1 more"
        with pytest.raises(Busy, match=shown), session_scope() as writer:
            namespaces.share(writer, names)
        assert time.monotonic() - started < 3.0
    finally:
        ender.join(30)
        for importer in importers:
            importer.close()


def test_a_writer_that_waited_for_a_short_import_keeps_the_lock_limit(
    embedder: Any, busy_wait_1s: None
) -> None:
    importer = Session(get_engine())
    namespaces.write_alone(importer, ["global"])

    def commit_when_waited_for() -> None:
        until(lambda: lock_waiters() > 0, 20)
        importer.commit()

    ender = threading.Thread(target=commit_when_waited_for)
    ender.start()
    try:
        with session_scope() as s:
            namespaces.ensure(s, "global")  # waits for the import, then goes on
            # The wait's own limit was for the turn only: later waits keep the configured one.
            assert s.scalar(text("SHOW lock_timeout")) == "0"
    finally:
        ender.join(30)
        importer.close()


def test_a_writer_of_several_namespaces_never_holds_one_an_import_needs_while_it_waits(
    embedder: Any,
) -> None:
    """share() of several namespaces takes them in sorted order, waiting: a share tried out
    of order and kept (of "zeta" while "alpha" was queued for) closed a cycle with an import
    of both once it got "alpha", and PostgreSQL rolled one of them back."""
    store("Deploys happen on Tuesdays", namespace="alpha")
    store("Releases are cut on Thursdays", namespace="zeta")
    earlier = Session(get_engine())  # a writer of alpha, under way
    namespaces.share(earlier, ["alpha"])
    importer = Session(get_engine())
    outcome: dict[str, Any] = {}

    def import_both() -> None:
        try:
            namespaces.write_alone(importer, ["alpha", "zeta"])
            outcome["import"] = "took both"
        except Exception as exc:  # the assertion below shows it
            outcome["import"] = exc

    def write_both() -> None:
        try:
            with session_scope() as writer:
                namespaces.share(writer, ["alpha", "zeta"])
            outcome["writer"] = "wrote"
        except Exception as exc:
            outcome["writer"] = exc

    queued = threading.Thread(target=import_both)
    queued.start()
    assert until(lambda: lock_waiters() == 1, 20)  # the import queues for alpha
    writer = threading.Thread(target=write_both)
    writer.start()
    assert until(lambda: lock_waiters() == 2, 20)  # the writer too, behind it
    earlier.commit()  # the import gets alpha, then needs zeta
    queued.join(30)
    assert outcome["import"] == "took both"  # not rolled back to break a deadlock
    importer.commit()
    writer.join(30)
    assert outcome["writer"] == "wrote"  # it waited for the import, then went on
    earlier.close()
    importer.close()
