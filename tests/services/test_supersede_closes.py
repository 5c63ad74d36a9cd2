"""memory_check_supersedes acts on its decision (S001 B20): the older memory is linked and
closed, so recall stops returning it while a read as of an earlier time still sees it; on
MCP, REST and the CLI alike. A protected older memory and a dry check stay open."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select

from memsys.db import session_scope
from memsys.models import Chunk, Event
from tests.cli.helpers import run_json
from tests.factories import store
from tests.services.test_edges import op

OLD = "The request timeout is 30 seconds"
NEW = "The request timeout is 60 seconds"


def via_mcp(_: TestClient, memory_id: str) -> Any:
    return op("memory_check_supersedes", memory_id=memory_id)


def via_rest(client: TestClient, memory_id: str) -> Any:
    answer = client.post(f"/v1/memories/{memory_id}/supersedes", json={})
    assert answer.status_code == 200, answer.text
    body = answer.json()
    return body.get("data", body)


def via_cli(_: TestClient, memory_id: str) -> Any:
    return run_json("supersedes", memory_id)


def recalled(query: str, **extra: Any) -> list[str]:
    return [m["id"] for m in op("memory_recall", query=query, n_results=10, **extra)["memories"]]


def queried(query: str, **extra: Any) -> set[str]:
    answer = op("memory_query", query=query, **extra)
    return {c["id"] for c in answer["core_chunks"] + answer["extended_chunks"]}


@pytest.mark.parametrize("front", [via_mcp, via_rest, via_cli], ids=["mcp", "rest", "cli"])
def test_the_superseded_memory_is_closed_but_readable_as_of_before(
    client: TestClient, front: Callable[[TestClient, str], Any]
) -> None:
    old = store(OLD, memory_type="fact").id
    store("Logs are written as JSON lines to stderr")
    new = store(NEW, memory_type="fact").id
    assert old in recalled("request timeout")
    before = datetime.now(UTC)

    out = front(client, new)
    assert out["superseded_id"] == old
    assert out["edge_created"] is True and out["superseded_closed"] is True

    now_ids = recalled("request timeout")
    assert new in now_ids and old not in now_ids
    assert old not in queried("what is the request timeout")
    assert old in queried("what is the request timeout", as_of=before.isoformat())
    with session_scope() as s:
        closed = s.scalars(select(Chunk).where(Chunk.id == old)).one()
        why = s.scalars(
            select(Event.payload).where(
                Event.subject_id == old, Event.operation == "memory_check_supersedes"
            )
        ).one()
    assert closed.valid_to is not None and closed.content == OLD  # closed, not deleted
    assert why == {"superseded_by": new}
    # the decision is made once: the older one is no longer a candidate
    assert op("memory_check_supersedes", memory_id=new)["superseded_id"] is None


def test_a_dry_check_and_a_protected_memory_stay_open(embedder: Any) -> None:
    old = store(OLD, memory_type="fact").id
    new = store(NEW, memory_type="fact").id
    dry = op("memory_check_supersedes", memory_id=new, create_edge=False)
    assert dry["superseded_id"] == old
    assert dry["edge_created"] is False and dry["superseded_closed"] is False
    assert old in recalled("request timeout")

    rule = store("Deploys are allowed on Fridays", memory_type="golden_rule").id
    newer = store("Deploys are forbidden on Fridays", memory_type="fact").id
    out = op("memory_check_supersedes", memory_id=newer)
    assert out["superseded_id"] == rule and out["edge_created"] is True
    assert out["superseded_closed"] is False
    assert rule in recalled("deploys on Fridays")


def test_concurrent_checks_close_the_older_memory_once(embedder: Any) -> None:
    from concurrent.futures import ThreadPoolExecutor

    from memsys.mcp.server import call
    from memsys.operations import BY_NAME

    old = store(OLD, memory_type="fact").id
    new = store(NEW, memory_type="fact").id
    with ThreadPoolExecutor(4) as pool:
        answers = list(
            pool.map(
                lambda _: call(BY_NAME["memory_check_supersedes"], {"memory_id": new}), range(4)
            )
        )
    assert all(a["success"] for a in answers), answers  # a lost race looks further, no error
    assert [a["data"]["superseded_id"] for a in answers].count(old) == 1
    with session_scope() as s:
        deletes = s.scalars(
            select(Event.id).where(Event.subject_id == old, Event.event_type == "delete")
        ).all()
    assert len(deletes) == 1
