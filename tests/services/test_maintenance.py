"""S001 B19 memory_detect_contradictions, B20 memory_check_supersedes, B22
memory_backfill_edges, on the real model and database."""

from __future__ import annotations

from typing import Any

from sqlalchemy import func, select

from memsys.db import session_scope
from memsys.models import Edge
from memsys.schemas.edges import MemoryRelateIn
from memsys.services import embedding_queue
from tests.factories import queue_for_embedding, store
from tests.services.test_edges import fails, op


def live_edges(relation: str) -> int:
    with session_scope() as s:
        stmt = select(func.count()).where(Edge.relation == relation, Edge.valid_to.is_(None))
        return int(s.scalar(stmt) or 0)


def test_contradictions_are_found_explained_and_linked_once(embedder: Any) -> None:
    old = store("User prefers pytest over unittest", memory_type="preference").id
    new = store("User prefers unittest over pytest", memory_type="preference").id
    negated = store("User does not prefer pytest over unittest", memory_type="preference").id
    store("The deploy pipeline builds a wheel and uploads it")
    out = op("memory_detect_contradictions", memory_id=old)
    found = {c["memory_id"]: c for c in out["contradictions"]}
    assert set(found) == {new, negated}
    assert "negation" in found[negated]["contradiction_reason"]
    assert "Changed value" in found[new]["contradiction_reason"]
    assert all(c["similarity"] >= 0.7 for c in found.values())
    assert out["edges_created"] == 2 and live_edges("contradicts") == 2
    again = op("memory_detect_contradictions", memory_id=old)
    assert again["edges_created"] == 0 and live_edges("contradicts") == 2
    dry = op("memory_detect_contradictions", memory_id=new, create_edges=False)
    assert dry["edges_created"] == 0 and old in {c["memory_id"] for c in dry["contradictions"]}
    strict = op("memory_detect_contradictions", memory_id=old, similarity_threshold=0.99)
    assert strict["contradictions"] == []


def test_agreeing_memories_are_not_contradictions(embedder: Any) -> None:
    a = store("Deploys go out on Tuesdays").id
    store("Deploys go out on Tuesdays after the review")
    store("Logs are written as JSON lines to stderr")
    assert op("memory_detect_contradictions", memory_id=a)["contradictions"] == []


def test_a_newer_update_supersedes_the_older_memory(embedder: Any) -> None:
    old = store("The request timeout is 30 seconds").id
    store("Logs are written as JSON lines to stderr")
    new = store("The request timeout is 60 seconds").id
    # the older one supersedes nothing: it came first
    assert op("memory_check_supersedes", memory_id=old)["superseded_id"] is None
    out = op("memory_check_supersedes", memory_id=new)
    assert out["superseded_id"] == old and out["edge_created"] is True
    assert "30 seconds → 60 seconds" in out["reason"]
    assert live_edges("supersedes") == 1
    # acted on once: the older one is closed, so a second check finds nothing to replace
    again = op("memory_check_supersedes", memory_id=new)
    assert again["superseded_id"] is None and again["edge_created"] is False
    assert live_edges("supersedes") == 1


def test_backfill_links_orphans_and_leaves_linked_ones(embedder: Any) -> None:
    from memsys import runner
    from memsys.services import edges

    a = store("the cache warms at startup").id  # no capitalised names: no mentions
    b = store("the cache warms at startup and after deploys").id
    c = store("lowercase notes about nothing in particular at all").id
    d = store("Redis keepalive fixed the timeouts").id  # mentions Redis: linked at write
    with session_scope() as s:  # pretend a and b were written before mentions existed
        s.execute(Edge.__table__.delete().where(Edge.source_id.in_([a, b, c, d])))
    runner.run(edges.relate, MemoryRelateIn(source_id=c, target_id=d, relation="relates_to"))
    assert op("memory_backfill_edges", dry_run=True)["orphans_found"] == 2
    out = op("memory_backfill_edges")
    assert out["orphans_found"] == 2 and out["relates_edges_created"] >= 1
    assert out["remaining_orphans"] == 0
    assert op("memory_backfill_edges")["orphans_found"] == 0


def test_bad_maintenance_calls_are_refused(embedder: Any) -> None:
    assert "Memory not found: mem_0000000000000000" in fails(
        "memory_detect_contradictions", memory_id="mem_0000000000000000"
    )
    a = store("x is 1").id
    assert "similarity_threshold must be between 0.0 and 1.0" in fails(
        "memory_detect_contradictions", memory_id=a, similarity_threshold=2
    )
    assert "limit must be between 1 and 10000" in fails("memory_backfill_edges", limit=0)
    # a namespace nobody has is refused, not "0 orphans" (a typo would pass for done)
    assert "Namespace not found: project:nope" in fails(
        "memory_backfill_edges", namespace="project:nope"
    )


def test_memories_waiting_for_their_vector_are_still_compared_by_meaning(embedder: Any) -> None:
    """A memory on the embedding queue has no stored vector yet: the similarity tools embed
    it on the spot, as the queue will, instead of failing on its missing similarity."""
    old = store("The request timeout is 30 seconds").id
    new = store("The request timeout is 60 seconds").id
    queue_for_embedding(old)
    found = op("memory_detect_contradictions", memory_id=old, create_edges=False)
    assert [c["memory_id"] for c in found["contradictions"]] == [new]
    queue_for_embedding(new)  # both waiting now: the older one is no candidate until embedded
    assert op("memory_check_supersedes", memory_id=new, create_edge=False)["superseded_id"] is None
    with session_scope() as s:
        assert embedding_queue.embed_pending(s, only=[old]) == 1
    assert op("memory_check_supersedes", memory_id=new, create_edge=False)["superseded_id"] == old
    waiting = store("Zebra crossings are painted white").id  # names nothing: an orphan
    queue_for_embedding(waiting)
    out = op("memory_backfill_edges")  # the queued orphan is left for a later run
    assert out["remaining_orphans"] >= 1
    with session_scope() as s:
        embedding_queue.embed_pending(s)
    assert op("memory_backfill_edges")["remaining_orphans"] == 0
