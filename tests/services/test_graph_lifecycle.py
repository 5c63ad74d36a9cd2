"""Maintenance leaves the memory server's graph as it was written: an observation is a memory
that ages like any other, yet the graph's reads, deletes and adds see its text as written,
and consolidation never merges one entity's observation into another's."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from memsys.services import maintain
from tests.services.test_edges import fails, op

LONG = (
    "Gina maintains the nightly backup job that copies the Postgres base backup to the "
    "storage bucket and pages on-call when it fails"
)


def later(days: float) -> datetime:
    return datetime.now(UTC) + timedelta(days=days)


def test_an_aged_observation_reads_deletes_and_exports_as_written(embedder: Any) -> None:
    gina = {"name": "Gina", "entityType": "person", "observations": [LONG]}
    op("create_entities", entities=[gina])
    report = maintain.run(now=later(100))
    assert report.moved == {"rehydratable": 1}  # its memory row now holds a 12-word key
    assert op("read_graph")["entities"] == [gina]
    assert op("open_nodes", names=["Gina"])["entities"] == [gina]
    # adding it again adds nothing: it is there
    added = op("add_observations", observations=[{"entityName": "Gina", "contents": [LONG]}])
    assert added["results"] == [{"entityName": "Gina", "addedObservations": []}]
    assert op("open_nodes", names=["Gina"])["entities"] == [gina]
    # deleting it by its text deletes it
    op("delete_observations", deletions=[{"entityName": "Gina", "observations": [LONG]}])
    assert op("open_nodes", names=["Gina"])["entities"] == [{**gina, "observations": []}]


def test_consolidation_never_merges_away_an_entitys_observation(embedder: Any) -> None:
    erin = {"name": "Erin", "entityType": "person", "observations": ["Prefers dark mode"]}
    frank = {"name": "Frank", "entityType": "person", "observations": ["prefers dark mode."]}
    op("create_entities", entities=[erin, frank])
    maintain.run()
    assert op("read_graph")["entities"] == [erin, frank]


def test_s002_decay_never_deletes_a_session_memory_that_is_an_observation(
    embedder: Any,
) -> None:
    """memory_store's default type is session, and an observation of the same text is linked
    to that memory (dedup): decay's ultra tier then deleted it off the entity."""
    text = "Lena prefers green tea in the morning"
    stored = op("memory_store", content=text)
    assert stored["memory_type"] == "session"
    lena = {"name": "Lena", "entityType": "person", "observations": [text]}
    op("create_entities", entities=[lena])
    scratch = op("memory_store", content="Remember to rerun the flaky test")["id"]
    out = op("decay", threshold=1.0, scope="ultra")
    assert out["entries_deleted"] == 1  # the scratch note, not the observation
    assert op("open_nodes", names=["Lena"])["entities"] == [lena]
    assert op("memory_get", memory_id=stored["id"])["id"] == stored["id"]
    assert "not found" in fails("memory_get", memory_id=scratch)


def test_restating_an_aged_observation_brings_its_memory_back(embedder: Any) -> None:
    """memory_store of an aged memory's text brings it back active in full and says so
    (`revived`); add_observations of the same text left it aged and said nothing, both when
    the entity had the observation already and when the text was another memory's (the
    observation deduplicates onto it), and so did create_entities. They revive them now and
    list them in `revived`, a field left out when empty (the memory server's answer shape)."""
    from sqlalchemy import text

    from memsys.db import session_scope

    other = "Hank rotates the backup bucket's keys every quarter and files the change ticket"
    third = "Ivy reviews the restore drill's results and signs off on the quarterly report"
    gina = {"name": "Gina", "entityType": "person", "observations": [LONG]}
    op("create_entities", entities=[gina])
    stored = [
        op("memory_store", content=t, memory_type="configuration")["id"] for t in (other, third)
    ]
    maintain.run(now=later(100))
    stage = text("SELECT id, stage FROM chunk WHERE doc_type = 'memory' AND valid_to IS NULL")

    def stages() -> dict[str, str]:
        with session_scope() as s:
            return dict(s.execute(stage).tuples().all())

    assert set(stages().values()) == {"rehydratable"} and len(stages()) == 3
    [observation] = set(stages()) - set(stored)
    added = op("add_observations", observations=[{"entityName": "Gina", "contents": [LONG, other]}])
    assert added["results"] == [{"entityName": "Gina", "addedObservations": [other]}]
    assert added["revived"] == sorted([observation, stored[0]])
    back = stages()
    assert (back[observation], back[stored[0]], back[stored[1]]) == (
        "active",
        "active",
        "rehydratable",
    )
    again = op("add_observations", observations=[{"entityName": "Gina", "contents": [LONG]}])
    assert "revived" not in again  # active already: nothing to say
    ivy = {"name": "Ivy", "entityType": "person", "observations": [third]}
    assert op("create_entities", entities=[ivy]) == {"entities": [ivy], "revived": [stored[1]]}
    assert set(stages().values()) == {"active"}
