"""Maintenance leaves the memory server's graph as it was written: an observation is a memory
that ages like any other, yet the graph's reads, deletes and adds see its text as written,
and consolidation never merges one entity's observation into another's."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from memsys.services import maintain
from tests.services.test_edges import op

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
