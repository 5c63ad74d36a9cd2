"""Versioned facts: supersede with a semver bump and a link, old versions readable, the fact
as of a time, contradiction closes the old version and its edges, verification."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import select

from memsys.db import session_scope
from memsys.models import Edge, Fact
from tests.services.test_edges import fails, op

DAYS_AGO = [(datetime.now(UTC) - timedelta(days=d)).isoformat() for d in range(10)]


def test_a_new_statement_supersedes_the_live_version(embedder: Any) -> None:
    first = op("fact_set", entity="billing", attribute="timeout", content="30 seconds",
               valid_from=DAYS_AGO[5])  # fmt: skip
    assert first["created"] and first["fact"]["version"] == "1.0.0"
    assert first["superseded"] is None
    same = op("fact_set", entity="billing", attribute="timeout", content="30 seconds")
    assert not same["created"] and same["fact"]["fact_id"] == first["fact"]["fact_id"]
    second = op("fact_set", entity="billing", attribute="timeout", content="60 seconds",
                valid_from=DAYS_AGO[2], verified=True)  # fmt: skip
    new, old = second["fact"], second["superseded"]
    assert new["version"] == "1.1.0" and new["supersedes_id"] == first["fact"]["fact_id"]
    assert new["verified"] and new["verified_at"] is not None
    assert old["valid_to"] == new["valid_from"]
    major = op("fact_set", entity="billing", attribute="timeout", content="90 seconds",
               bump="major")  # fmt: skip
    assert major["fact"]["version"] == "2.0.0"
    # the fact as of a time; the whole history; nothing deleted
    then = op("fact_get", entity="billing", attribute="timeout", as_of=DAYS_AGO[3])["facts"]
    assert [f["content"] for f in then] == ["30 seconds"]
    now = op("fact_get", entity="billing")["facts"]
    assert [f["content"] for f in now] == ["90 seconds"]
    before = op("fact_get", entity="billing", as_of=DAYS_AGO[8])["facts"]
    assert before == []
    versions = op("fact_history", entity="billing", attribute="timeout")["facts"]
    assert [f["version"] for f in versions] == ["1.0.0", "1.1.0", "2.0.0"]
    with session_scope() as s:
        assert len(s.scalars(select(Fact)).all()) == 3
        links = s.scalars(select(Edge).where(Edge.relation == "supersedes")).all()
        assert {(e.source_kind, e.target_kind) for e in links} == {("fact", "fact")}
        assert len(links) == 2


def test_superseding_closes_the_edges_of_the_old_version(embedder: Any) -> None:
    old = op("fact_set", entity="api", attribute="owner", content="Alice")["fact"]
    new = op("fact_set", entity="api", attribute="owner", content="Bob")["fact"]
    with session_scope() as s:
        link = s.scalars(select(Edge).where(Edge.target_id == old["fact_id"])).one()
        assert link.source_id == new["fact_id"] and link.valid_to is None
    third = op("fact_set", entity="api", attribute="owner", content="Carol")["fact"]
    with session_scope() as s:
        closed = s.scalars(select(Edge).where(Edge.source_id == new["fact_id"])).one()
        assert closed.valid_to is not None and closed.expired_at is not None
        live = s.scalars(select(Edge).where(Edge.source_id == third["fact_id"])).one()
        assert live.valid_to is None
    ctx = op("build_context", entity_names=["api"])
    assert [f["fact"] for f in ctx["facts"] if f["kind"] == "fact"] == ["Carol"]


def test_concurrent_versions_keep_one_live_fact(embedder: Any) -> None:
    from concurrent.futures import ThreadPoolExecutor

    from memsys.mcp.server import call
    from memsys.operations import BY_NAME

    def write(n: int) -> Any:
        args = {"entity": "queue", "attribute": "size", "content": f"{n} items"}
        return call(BY_NAME["fact_set"], args)

    with ThreadPoolExecutor(6) as pool:
        answers = list(pool.map(write, range(6)))
    assert all(a["success"] for a in answers), [a for a in answers if not a["success"]]
    history = op("fact_history", entity="queue")["facts"]
    assert len(history) == 6 and sum(f["valid_to"] is None for f in history) == 1
    assert sorted(f["version"] for f in history)[-1] == "1.5.0"


def test_verification_and_bad_fact_input(embedder: Any) -> None:
    made = op("fact_set", entity="db", attribute="engine", content="PostgreSQL 18")["fact"]
    checked = op("fact_verify", fact_id=made["fact_id"])["facts"][0]
    assert checked["verified"] and checked["verified_at"] is not None
    assert "Fact not found: fact_nope" in fails("fact_verify", fact_id="fact_nope")
    assert "Entity with name ghost not found" in fails("fact_get", entity="ghost")
    assert "is not after the live version" in fails(
        "fact_set", entity="db", attribute="engine", content="MySQL", valid_from=DAYS_AGO[9]
    )
    assert "A fact cannot be empty" in fails("fact_set", entity="db", attribute="x", content=" ")
    assert "bump" in fails("fact_set", entity="db", attribute="engine", content="x", bump="huge")


def test_deleting_an_entity_closes_its_facts(embedder: Any) -> None:
    """delete_entities closed the entity, its observations and relations, but left its facts
    live: rows stating what a deleted thing is, pointing at an entity no read can reach."""
    op("fact_set", entity="billing", attribute="timeout", content="30 seconds")
    op("fact_set", entity="billing", attribute="owner", content="payments team")
    op("fact_set", entity="search", attribute="timeout", content="5 seconds")
    op("delete_entities", entityNames=["billing"])
    with session_scope() as s:
        live = s.scalars(select(Fact.content).where(Fact.valid_to.is_(None))).all()
    assert live == ["5 seconds"]
    # The name stated anew starts its own history; the deleted one's stays readable as of then.
    again = op("fact_set", entity="billing", attribute="timeout", content="45 seconds")
    assert again["superseded"] is None
    assert [f["content"] for f in op("fact_get", entity="billing")["facts"]] == ["45 seconds"]


def test_a_deleted_entitys_facts_stay_readable_as_of_then_and_in_history(
    embedder: Any,
) -> None:
    """fact_get as_of a time before delete_entities and fact_history looked for a live entity
    only: the closed versions were kept but no read could reach them."""
    op("fact_set", entity="ledger", attribute="owner", content="finance",
       valid_from=DAYS_AGO[5])  # fmt: skip
    op("fact_set", entity="ledger", attribute="owner", content="platform",
       valid_from=DAYS_AGO[3])  # fmt: skip
    op("delete_entities", entityNames=["ledger"])
    then = op("fact_get", entity="ledger", as_of=DAYS_AGO[4])["facts"]
    assert [f["content"] for f in then] == ["finance"]
    history = op("fact_history", entity="ledger")["facts"]
    assert [f["content"] for f in history] == ["finance", "platform"]
    assert "Entity with name ledger not found" in fails("fact_get", entity="ledger")
    # made again, the name answers for now; the deleted one still for its own time
    op("fact_set", entity="ledger", attribute="owner", content="audit")
    assert [f["content"] for f in op("fact_get", entity="ledger")["facts"]] == ["audit"]
    then = op("fact_get", entity="ledger", as_of=DAYS_AGO[4])["facts"]
    assert [f["content"] for f in then] == ["finance"]
    assert [f["content"] for f in op("fact_history", entity="ledger")["facts"]] == ["audit"]
