"""Writers that meet on one row: the second waits for the first, then sees what it left —
never an edge or an observation hanging on something already gone. Each test holds the
first writer's transaction open, starts the second, and checks that it waits."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from typing import Any

from sqlalchemy import select

from memsys.db import session_scope
from memsys.mcp.server import call
from memsys.models import Edge, Entity
from memsys.operations import BY_NAME
from memsys.schemas import MemoryForgetIn
from memsys.schemas.graph import DeleteEntitiesIn
from memsys.services import knowledge, memories
from tests.conftest import lock_waiters, until
from tests.services.test_edges import op


def second_writer(name: str, args: dict[str, Any]) -> tuple[threading.Thread, list[Any]]:
    answers: list[Any] = []
    worker = threading.Thread(target=lambda: answers.append(call(BY_NAME[name], args)))
    worker.start()
    return worker, answers


def test_a_relate_waits_for_a_purge_of_its_end_and_then_finds_it_gone(embedder: Any) -> None:
    kept = op("memory_store", content="The nightly export runs at two")
    doomed = op("memory_store", content="The export's bucket key is AKIA0000")
    with session_scope() as first:
        params = MemoryForgetIn(memory_id=doomed["id"], purge=True)
        memories.forget(first, params)
        worker, answers = second_writer(
            "memory_relate",
            {"source_id": kept["id"], "target_id": doomed["id"], "relation": "relates_to"},
        )
        assert until(lambda: lock_waiters() > 0, 20)  # the relate waits for the purge
    worker.join(30)
    assert not worker.is_alive()
    assert answers[0]["success"] is False and "Memory not found" in answers[0]["error"]
    with session_scope() as s:
        assert not s.scalars(select(Edge).where(Edge.target_id == doomed["id"])).all()


def test_observations_wait_for_a_delete_of_their_entity_and_are_refused(embedder: Any) -> None:
    op("create_entities", entities=[{"name": "Ledgerly", "entityType": "service"}])
    with session_scope() as first:
        knowledge.delete_entities(first, DeleteEntitiesIn(entityNames=["Ledgerly"]))
        worker, answers = second_writer(
            "add_observations",
            {"observations": [{"entityName": "Ledgerly", "contents": ["Runs on Fridays"]}]},
        )
        assert until(lambda: lock_waiters() > 0, 20)  # the observation waits for the delete
    worker.join(30)
    assert not worker.is_alive()
    assert answers[0]["success"] is False and "Ledgerly not found" in answers[0]["error"]
    with session_scope() as s:
        [entity] = s.scalars(select(Entity).where(Entity.name == "Ledgerly")).all()
        hanging = s.scalars(
            select(Edge).where(Edge.target_id == entity.id, Edge.valid_to.is_(None))
        ).all()
        assert entity.valid_to is not None and hanging == []


def test_preference_versions_follow_the_order_their_writers_took_turns(embedder: Any) -> None:
    """A writer whose transaction began before another's version stamped its own version
    with its start: earlier than the version it replaced, unreadable as of any time."""
    from sqlalchemy import text

    from memsys.models import Preference
    from memsys.schemas import PreferenceSetIn
    from memsys.services import preferences

    with session_scope() as late:
        late.execute(text("SELECT 1"))  # its transaction (and now()) begins here
        op("preference_set", key="editor_theme", value="light")  # another writer, committed
        preferences.set_value(late, PreferenceSetIn(key="editor_theme", value="dark"))
    with session_scope() as s:
        first, second = s.scalars(select(Preference).order_by(Preference.version)).all()
    assert first.valid_from < second.valid_from and first.valid_to == second.valid_from
    at = second.valid_from.isoformat()
    assert op("preference_get", key="editor_theme", as_of=at)["value"] == "dark"


def test_a_purge_keeps_an_entity_a_relate_is_linking_meanwhile(embedder: Any) -> None:
    """memory_relate holds the entity it links; a purge that would leave that entity named
    by nothing waited for it and then deleted it anyway (its check read an older snapshot):
    the new edge pointed at a deleted entity."""
    from memsys.schemas.edges import MemoryRelateIn
    from memsys.services import edges

    doomed = op("memory_store", content="Veltrix Holdings pays its invoices late")
    kept = op("memory_store", content="The quarterly close went smoothly")
    with session_scope() as s:
        entity = s.scalars(select(Entity.id).where(Entity.name == "Veltrix Holdings")).one()
    with session_scope() as first:
        link = MemoryRelateIn(
            source_id=kept["id"], target_id=entity, target_kind="entity", relation="relates_to"
        )
        edges.relate(first, link)
        worker, answers = second_writer("memory_forget", {"memory_id": doomed["id"], "purge": True})
        worker.join(0.5)
        assert worker.is_alive()  # the purge waits for the relate (it tries its turn)
    worker.join(30)
    assert not worker.is_alive() and answers[0]["success"], answers
    with session_scope() as s:
        assert s.get(Entity, ("global", entity)) is not None  # the edge's end is still there


def test_a_purge_keeps_the_different_memory_it_superseded(embedder: Any) -> None:
    """memory_check_supersedes closes an older, different statement: it is not the purged
    memory's version, and a purge of the newer one leaves it (and its history)."""
    from memsys.models import Chunk

    old = op("memory_store", content="The request timeout is 30 seconds")["id"]
    new = op("memory_store", content="The request timeout is 60 seconds")["id"]
    assert op("memory_check_supersedes", memory_id=new)["superseded_id"] == old
    op("memory_forget", memory_id=new, purge=True)
    with session_scope() as s:
        assert s.get(Chunk, ("global", old)) is not None


def test_a_relate_does_not_wait_out_an_import_beyond_the_busy_wait(
    embedder: Any, busy_wait_1s: None
) -> None:
    """A relate waited for a whole import (minutes) on a row the import had touched; it now
    takes its namespace's write turn first and gives up after MEMSYS_BUSY_WAIT_S."""
    from sqlalchemy import text
    from sqlalchemy.orm import Session

    from memsys.db import get_engine
    from memsys.services import namespaces

    a = op("memory_store", content="The nightly export runs at two")["id"]
    b = op("memory_store", content="The export bucket is in eu-west-1")["id"]
    with Session(get_engine()) as importer:
        namespaces.write_alone(importer, ["global"])
        importer.execute(text("UPDATE chunk SET updated_at = now() WHERE id = :id"), {"id": b})
        worker, answers = second_writer(
            "memory_relate", {"source_id": a, "target_id": b, "relation": "relates_to"}
        )
        worker.join(20)
        assert not worker.is_alive()  # answered while the import still runs
        importer.rollback()
    assert answers[0]["success"] is False and "import" in answers[0]["error"]


def test_a_purge_beside_a_long_import_gives_up_instead_of_hanging(
    embedder: Any, busy_wait_1s: None
) -> None:
    """A purge writes alone for the ms it takes; beside an import that holds the namespace
    for minutes it waits MEMSYS_BUSY_WAIT_S, like any writer, and says so."""
    from sqlalchemy.orm import Session

    from memsys.db import get_engine
    from memsys.services import namespaces

    doomed = op("memory_store", content="The staging password is PURGEME-77")["id"]
    with Session(get_engine()) as importer:
        namespaces.write_alone(importer, ["global"])
        worker, answers = second_writer("memory_forget", {"memory_id": doomed, "purge": True})
        worker.join(20)
        assert not worker.is_alive()  # answered while the import still runs
        importer.rollback()
    assert answers[0]["success"] is False and "MEMSYS_BUSY_WAIT_S" in answers[0]["error"]
    assert op("memory_forget", memory_id=doomed, purge=True)["purged"]  # once it has ended


def test_a_purge_waiting_for_a_writer_does_not_hold_up_the_writers_after_it(
    embedder: Any, monkeypatch: Any
) -> None:
    """A purge queued for the namespace's turn made every writer that came after it wait
    behind it (up to MEMSYS_BUSY_WAIT_S each); it now tries the turn without queueing."""
    from memsys.config import get_settings
    from memsys.services import namespaces

    doomed = op("memory_store", content="The staging password is PURGEME-78")["id"]
    monkeypatch.setenv("MEMSYS_BUSY_WAIT_S", "5")
    get_settings.cache_clear()
    try:
        with session_scope() as long_writer:
            namespaces.ensure(long_writer, "global")  # a writer in flight (a decay, a batch)
            purge, _ = second_writer("memory_forget", {"memory_id": doomed, "purge": True})
            writer, stored = second_writer("memory_store", {"content": "Deploys are on Tuesdays"})
            writer.join(4)
            assert not writer.is_alive() and purge.is_alive()  # stored while the purge waits
            assert stored[0]["success"], stored
        purge.join(10)
        assert not purge.is_alive()
    finally:
        get_settings.cache_clear()


def test_a_fact_set_that_found_its_entity_before_a_delete_leaves_no_live_fact_on_it(
    embedder: Any,
) -> None:
    """fact_set read its entity without holding it: a delete_entities that closed the entity
    and its facts and committed before the fact_set wrote left a live fact on a deleted
    entity (the delete's update had run before the fact existed). Holding the entity as the
    other writers of what hangs on it do, the delete waits for the fact and closes it too."""
    from memsys.db import take_turns
    from memsys.models import Fact

    op("fact_set", entity="billing", attribute="timeout", content="30 seconds")
    with session_scope() as s:
        entity = s.scalars(select(Entity).where(Entity.name == "billing")).one()
    with session_scope() as turn:  # the attribute's turn, held: fact_set stops after its read
        take_turns(turn, entity.namespace, "fact", entity.id, "timeout")
        worker, answers = second_writer(
            "fact_set", {"entity": "billing", "attribute": "timeout", "content": "45 seconds"}
        )
        assert until(lambda: lock_waiters() == 1, 20)
        deleter, deleted = second_writer("delete_entities", {"entityNames": ["billing"]})
        # the delete is done, or waits for the fact_set that holds the entity
        assert until(lambda: not deleter.is_alive() or lock_waiters() == 2, 20)
    worker.join(30)
    deleter.join(30)
    assert not worker.is_alive() and not deleter.is_alive()
    assert answers[0]["success"] and deleted[0]["success"], (answers, deleted)
    with session_scope() as s:
        closed = {e.id for e in s.scalars(select(Entity).where(Entity.valid_to.is_not(None)))}
        live = s.scalars(select(Fact).where(Fact.valid_to.is_(None))).all()
    assert [f.content for f in live if f.entity_id in closed] == []


def test_a_delete_waits_for_a_writer_naming_the_entity_and_closes_what_it_hung_on_it(
    embedder: Any,
) -> None:
    """An episode (or memory) resolved the extractor's `concept#` entity of a name without
    holding it: a delete_entities of the name ran beside it, closed the entity, and the
    writer's mention and relation edges, committed after, hung live on the closed entity."""
    from memsys.schemas.temporal import AddEpisodeIn
    from memsys.services import episodes

    op("add_episode", content="Orbitron depends on Kestrel DB.")
    with session_scope() as first:
        episodes.add_episode(first, AddEpisodeIn(content="Orbitron uses Zephyr Labs."))
        worker, answers = second_writer("delete_entities", {"entityNames": ["Orbitron"]})
        assert until(lambda: lock_waiters() > 0, 20)  # the delete waits for the writer
    worker.join(30)
    assert not worker.is_alive() and answers[0]["success"] is True
    with session_scope() as s:
        [orbitron] = s.scalars(select(Entity).where(Entity.name == "Orbitron")).all()
        touching = (Edge.source_id == orbitron.id) | (Edge.target_id == orbitron.id)
        hanging = s.scalars(
            select(Edge).where(touching, Edge.valid_to.is_(None), Edge.relation != "mentions")
        ).all()
        assert orbitron.valid_to is not None and hanging == []
    # the writer that waits for a delete finds the name free and makes it again
    with session_scope() as first:
        knowledge.delete_entities(first, DeleteEntitiesIn(entityNames=["Kestrel DB"]))
        worker, answers = second_writer("add_episode", {"content": "Kestrel DB runs nightly."})
        assert until(lambda: lock_waiters() > 0, 20)
    worker.join(30)
    assert not worker.is_alive() and answers[0]["success"] is True
    assert answers[0]["data"]["entities"] == ["Kestrel DB"]
    with session_scope() as s:
        live = s.scalars(
            select(Entity).where(Entity.name == "Kestrel DB", Entity.valid_to.is_(None))
        ).all()
        assert len(live) == 1


def test_graph_writers_wait_for_a_graph_import_of_their_namespace(embedder: Any) -> None:
    """A graph import writes alone in its namespace and takes no lock per row (a large one
    ran out of the lock table): a create_relations or add_observations beside it waits for
    it at its start, then sees what it wrote — one edge of a triple both wrote, one memory
    of a text both stored."""
    from memsys.schemas.graph_jsonl import parse_jsonl
    from memsys.services import graph_io

    op("create_entities", entities=[{"name": "Ledger", "entityType": "service"}])
    bills = "Bills customers on the first of the month"
    lines = [
        {"type": "entity", "name": "Billing", "entityType": "service", "observations": [bills]},
        {"type": "relation", "from": "Billing", "to": "Ledger", "relationType": "uses"},
    ]
    text = "".join(json.dumps(line) + "\n" for line in lines)
    uses = {"from": "Billing", "to": "Ledger", "relationType": "uses"}
    with session_scope() as first:
        graph_io.import_graph(first, parse_jsonl(text, None))
        relating, related = second_writer("create_relations", {"relations": [uses]})
        observing, observed = second_writer(
            "add_observations",
            {"observations": [{"entityName": "Ledger", "contents": ["Closes books monthly"]}]},
        )
        storing, stored = second_writer("memory_store", {"content": bills})
        assert until(lambda: lock_waiters() > 2, 20)  # all wait for the import
    for worker in (relating, observing, storing):
        worker.join(30)
        assert not worker.is_alive()
    assert related[0]["success"] and related[0]["data"]["relations"] == []  # the import's
    assert observed[0]["success"]
    assert op("read_graph")["relations"] == [uses]
    assert stored[0]["success"] and stored[0]["data"]["duplicate"], stored  # the import's
    assert [m["content"] for m in op("memory_list")["memories"]].count(bills) == 1


def test_a_delete_file_waiting_for_its_files_reindexing_deletes_the_new_version(
    tmp_path: Any, embedder: Any
) -> None:
    """delete_file read the file's document, then waited for a folder's indexing (or an
    index_file) that replaced the changed file's document with a new one: it closed the old
    one, already closed, answered deleted_count 0 and left the file in every search. It now
    reads the document again once the writer it waited for is done, and deletes that."""
    from memsys.models import Document
    from memsys.schemas.documents import IndexDirectoryIn, IndexFileIn
    from memsys.services import folders, indexing

    folder = tmp_path / "notes"
    folder.mkdir()
    notes = folder / "deploys.md"

    def deleted_while(reindex: Callable[[Any], Any], version: str) -> None:
        notes.write_text("# Deploys\n\nDeploys run on Tuesdays.\n")
        op("index_directory", dir_path=str(folder))
        notes.write_text(f"# Deploys\n\nDeploys run on {version}.\n")
        with session_scope() as first:
            reindex(first)  # the changed file's new document, not committed yet
            worker, answers = second_writer("delete_file", {"source_file": str(notes)})
            assert until(lambda: lock_waiters() > 0, 20)  # the delete waits for it
        worker.join(30)
        assert not worker.is_alive() and answers[0]["success"], answers
        assert answers[0]["data"]["deleted_count"] == 1
        with session_scope() as s:
            live = select(Document).where(Document.valid_to.is_(None))
            assert s.scalars(live.where(Document.source_file == str(notes))).all() == []

    folder_params = IndexDirectoryIn(dir_path=str(folder))
    deleted_while(lambda s: folders.index_directory(s, folder_params), "Wednesdays")
    file_params = IndexFileIn(file_path=str(notes))
    deleted_while(lambda s: indexing.index_file(s, file_params), "Thursdays")


def test_two_stores_of_an_aged_memory_at_once_revive_it_once(embedder: Any) -> None:
    """Two stores of an archived memory's text at once: the second waits for the first,
    which brings it back in full (revived); the second finds it active, the same memory,
    and says duplicate only. One row, restored once."""
    from datetime import UTC, datetime, timedelta

    from memsys.models import Chunk
    from memsys.schemas import MemoryStoreIn
    from memsys.services import maintain

    text = (
        "Releases are cut from the main branch every second Thursday after the integration "
        "suite passes, tagged with the date, and announced in the release channel with the "
        "list of merged changes and the names of the people who reviewed them."
    )
    memory = op("memory_store", content=text, memory_type="configuration")["id"]
    maintain.run(now=datetime.now(UTC) + timedelta(days=40))
    with session_scope() as s:
        assert s.get(Chunk, ("global", memory)).stage == "archived"
    with session_scope() as first:
        mine = memories.store(first, MemoryStoreIn(content=text, memory_type="configuration"))
        worker, answers = second_writer("memory_store", {"content": text})
        assert until(lambda: lock_waiters() > 0, 20)  # the second waits for the first
    worker.join(30)
    assert not worker.is_alive() and answers[0]["success"], answers
    theirs = answers[0]["data"]
    assert (mine.id, mine.duplicate, mine.revived) == (memory, True, True)
    assert (theirs["id"], theirs["duplicate"], theirs["revived"]) == (memory, True, False)
    with session_scope() as s:
        live = s.scalars(select(Chunk).where(Chunk.doc_type == "memory", Chunk.valid_to.is_(None)))
        assert [(m.id, m.stage, m.content) for m in live] == [(memory, "active", text)]


def test_a_store_of_an_aged_memory_a_decay_deletes_meanwhile_stores_it_anew(
    embedder: Any,
) -> None:
    """A store found an archived session memory of its text, and its revive waited for a
    decay that was deleting that memory (a decay takes no turn of the text): it answered
    duplicate of the deleted memory, and the text the user had just said again was nowhere.
    It is stored anew now, as it would have been after the decay."""
    from datetime import UTC, datetime, timedelta

    from memsys.models import Chunk
    from memsys.schemas.lifecycle import DecayIn
    from memsys.services import decay, maintain

    text = "Scratch note: the canary hosts still run last week's build of the scheduler"
    memory = op("memory_store", content=text, lifecycle="session")["id"]
    later = datetime.now(UTC) + timedelta(days=40)
    maintain.run(now=later)
    with session_scope() as first:
        out = decay.decay(first, DecayIn(), now=later + timedelta(days=400))
        assert out.entries_deleted == 1  # not committed yet
        worker, answers = second_writer("memory_store", {"content": text, "lifecycle": "session"})
        assert until(lambda: lock_waiters() > 0, 20)  # its revive waits for the decay
    worker.join(30)
    assert not worker.is_alive() and answers[0]["success"], answers
    stored = answers[0]["data"]
    assert stored["id"] != memory and not stored["duplicate"] and not stored["revived"]
    with session_scope() as s:
        live = s.scalars(select(Chunk).where(Chunk.doc_type == "memory", Chunk.valid_to.is_(None)))
        assert [(m.id, m.stage, m.content) for m in live] == [(stored["id"], "active", text)]


def decay_paused_after_its_read(
    monkeypatch: Any, text: str
) -> tuple[str, threading.Thread, threading.Event, list[Any]]:
    """An archived session memory of `text` (written 400 days ago, never read since) and a
    decay in another thread that has read it, below its threshold, and waits for `go`
    before it deletes; the decay's answer lands in the list once the thread ends."""
    from datetime import UTC, datetime, timedelta

    from sqlalchemy import text as sql

    from memsys.schemas.lifecycle import DecayIn
    from memsys.services import decay, maintain, observation_links

    memory = op("memory_store", content=text, lifecycle="session")["id"]
    with session_scope() as s:  # written 400 days ago, never read since
        s.execute(
            sql("UPDATE chunk SET created_at = created_at - interval '400 days' WHERE id = :id"),
            {"id": memory},
        )
    maintain.run(now=datetime.now(UTC))
    read, go = threading.Event(), threading.Event()
    among = observation_links.observations_among

    def read_then_wait(session: Any, keys: Any) -> Any:
        found = among(session, keys)
        read.set()
        assert go.wait(30)
        return found

    monkeypatch.setattr(observation_links, "observations_among", read_then_wait)
    outs: list[Any] = []

    def run_decay() -> None:
        with session_scope() as s:
            outs.append(decay.decay(s, DecayIn(), now=datetime.now(UTC) + timedelta(seconds=1)))

    worker = threading.Thread(target=run_decay)
    worker.start()
    assert read.wait(30)  # the decay has read the memory, below its threshold
    return memory, worker, go, outs


def test_a_decay_spares_a_memory_revived_after_it_read_it(embedder: Any, monkeypatch: Any) -> None:
    """A decay scored an archived session memory from a read taken without a lock and closed
    it later: a store that restated the memory in between (reviving it, an access now) lost
    it all the same. The decay now reads a row it would delete again under its lock, and
    keeps one that is no longer below the threshold."""
    from memsys.models import Chunk

    text = "Scratch note: the staging queue drains into the old billing worker"
    memory, worker, go, outs = decay_paused_after_its_read(monkeypatch, text)
    again = op("memory_store", content=text, lifecycle="session")
    assert again["id"] == memory and again["revived"]
    go.set()
    worker.join(30)
    assert not worker.is_alive() and outs[0].entries_deleted == 0
    with session_scope() as s:
        live = s.scalars(select(Chunk).where(Chunk.doc_type == "memory", Chunk.valid_to.is_(None)))
        assert [(m.id, m.stage, m.content) for m in live] == [(memory, "active", text)]


def test_a_decay_spares_a_memory_made_ground_truth_after_it_read_it(
    embedder: Any, monkeypatch: Any
) -> None:
    """Between a decay's read and its delete, a consolidation merged a ground-truth
    memory into a session memory (its tags and metadata go to the survivor, which is then
    exempt from decay). The decay's second read looked at the score alone, still below the
    threshold, and deleted the memory that now held the ground truth."""
    from sqlalchemy import text as sql

    from memsys.models import Chunk

    text = "Scratch note: the nightly export writes into the reporting bucket"
    memory, worker, go, outs = decay_paused_after_its_read(monkeypatch, text)
    with session_scope() as s:  # what consolidation's merge writes to its survivor
        s.execute(
            sql("UPDATE chunk SET tags = tags || ARRAY['ground-truth'] WHERE id = :id"),
            {"id": memory},
        )
    go.set()
    worker.join(30)
    assert not worker.is_alive() and outs[0].entries_deleted == 0
    with session_scope() as s:
        live = s.scalars(
            select(Chunk.id).where(Chunk.doc_type == "memory", Chunk.valid_to.is_(None))
        )
        assert list(live) == [memory]


def test_a_batch_restating_a_memory_a_decay_deletes_meanwhile_twice_stores_it_once(
    embedder: Any,
) -> None:
    """A batch that says an archived session memory's text twice, while a decay deletes
    that memory: the text is stored anew once, the second item its duplicate within the
    batch, and the new memory is found by its words as any stored one is."""
    from datetime import UTC, datetime, timedelta

    from memsys.models import Chunk
    from memsys.schemas.lifecycle import DecayIn
    from memsys.services import decay, maintain

    text = "Scratch note: the replica in the east region lags the primary by a minute"
    memory = op("memory_store", content=text, lifecycle="session")["id"]
    later = datetime.now(UTC) + timedelta(days=40)
    maintain.run(now=later)
    item = {"content": text, "lifecycle": "session"}
    with session_scope() as first:
        out = decay.decay(first, DecayIn(), now=later + timedelta(days=400))
        assert out.entries_deleted == 1  # not committed yet
        worker, answers = second_writer("memory_store_batch", {"memories": [item, item]})
        assert until(lambda: lock_waiters() > 0, 20)  # its revive waits for the decay
    worker.join(30)
    assert not worker.is_alive() and answers[0]["success"], answers
    batch = answers[0]["data"]
    new, again = batch["results"]
    assert new["id"] != memory and not new["duplicate"] and not new["revived"]
    assert (again["id"], again["duplicate"]) == (new["id"], True)
    assert (batch["stored"], batch["duplicates"]) == (1, 1)
    with session_scope() as s:
        live = s.scalars(select(Chunk).where(Chunk.doc_type == "memory", Chunk.valid_to.is_(None)))
        assert [(m.id, m.content) for m in live] == [(new["id"], text)]
    found = op("memory_recall", query="replica east region lags primary")
    assert new["id"] in [r["id"] for r in found["memories"]]
