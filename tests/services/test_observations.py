"""Typed observations (S000): envelopes gated before write, stable keys, exactly-once writes
from threads with their own connections and from two `memsys mcp` processes."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import anyio
from sqlalchemy import func, select

from memsys import keys
from memsys.db import session_scope
from memsys.models import Edge, Entity
from tests.mcp.test_stdio import _connected
from tests.services.test_edges import fails, op

ERROR = {
    "type": "error.capture",
    "kind": "ModuleNotFound",
    "message": "Cannot find module 'ts-node/esm' (lodash 4.17.21)",
    "detector": "stderr",
}
ERR_KEY = "err#cannot find module 'ts-node/esm' (lodash x.y.z)"
DEP = {"relation": "CAUSED_BY", "target": "dep#lodash@4.17.21"}


def live(name: str) -> list[Entity]:
    with session_scope() as s:
        rows = s.scalars(select(Entity).where(Entity.name == name, Entity.valid_to.is_(None)))
        return list(rows)


def edge_count(relation: str) -> int:
    with session_scope() as s:
        stmt = select(func.count()).where(Edge.relation == relation, Edge.valid_to.is_(None))
        return int(s.scalar(stmt) or 0)


def test_an_envelope_lands_under_its_stable_key_once(embedder: Any) -> None:
    first = op("memory_observe", envelope=ERROR, links=[DEP])
    assert first["entity"] == ERR_KEY and first["entityType"] == "error"
    assert first["created"] and first["observation_added"] and first["links_created"] == 1
    again = op("memory_observe", envelope={**ERROR, "ts": None}, links=[DEP])
    assert not again["created"] and not again["observation_added"]
    assert again["links_created"] == 0
    graph = op("open_nodes", names=[ERR_KEY, "dep#lodash@4.17.21"])
    error = graph["entities"][0]
    assert error["entityType"] == "error" and len(error["observations"]) == 1
    stored = json.loads(error["observations"][0])
    assert stored["normalizedKey"] == ERR_KEY.removeprefix("err#")
    assert graph["relations"] == [
        {"from": ERR_KEY, "to": "dep#lodash@4.17.21", "relationType": "caused_by"}
    ]
    # the same error on another version of lodash is the same entity (semver collapsed)
    upgraded = {**ERROR, "message": ERROR["message"].replace("4.17.21", "4.18.0")}
    newer = op("memory_observe", envelope=upgraded)
    assert newer["entity"] == ERR_KEY and not newer["created"] and newer["observation_added"]


def test_each_envelope_type_gets_its_s000_key(embedder: Any) -> None:
    url = "https://nodejs.org/api/esm.html"
    made = {
        "command.exec": {"cmd": "npm  test", "exitCode": 1},
        "warning.capture": {"kind": "W", "message": "Deprecated API", "detector": "lint"},
        "fix.apply": {
            "strategy": "pin",
            "changes": ["package.json"],
            "result": "applied",
            "issueName": ERR_KEY,
        },
        "fix.outcome": {
            "status": "verified_successful",
            "verificationMethod": "ci",
            "durationToVerify": 42,
            "fixId": "fix#x#00000000",
        },
        "doc.note": {"url": url, "accessed_at": "2026-11-23T10:00:00Z"},
        "run.summary": {"summary": "green", "ts": "2026-11-23T10:00:00+01:00"},
    }
    prefixes = {}
    for kind, fields in made.items():
        out = op("memory_observe", envelope={"type": kind, **fields})
        assert keys.check(out["entity"]) == out["entityType"], out
        prefixes[kind] = out["entity"]
    assert prefixes["command.exec"].startswith("cmd#npm test#")
    assert prefixes["doc.note"] == keys.doc_key(url)
    assert prefixes["run.summary"].startswith("run#2026-11-23T09:00:00.000Z#")
    assert prefixes["fix.apply"] == keys.fix_key(ERR_KEY, "pin", ["package.json"])


def test_bad_envelopes_keys_and_relations_are_refused_and_write_nothing(embedder: Any) -> None:
    assert "envelope.exitCode: Field required" in fails(
        "memory_observe", envelope={"type": "command.exec", "cmd": "ls"}
    )
    assert "is not an S000 observation type" in fails(
        "memory_observe", envelope={"type": "note", "text": "x"}
    )
    # JSON's types, not what could be made of them: true and 1 gave one key
    for code in ("0", True, 1.0, 10**30):
        shown = fails(
            "memory_observe", envelope={"type": "command.exec", "cmd": "ls", "exitCode": code}
        )
        assert "envelope.exitCode" in shown, code
    for ts in (1_700_000_000, "2999-01-01T00:00:00Z"):
        run = {"type": "run.summary", "summary": "tests", "ts": ts}
        assert "envelope.ts" in fails("memory_observe", envelope=run), ts
    assert "Unknown relation type: blames" in fails(
        "memory_observe", envelope=ERROR, links=[{"relation": "blames", "target": "dep#x"}]
    )
    assert "not in the S000 vocabulary" in fails(
        "memory_observe", envelope=ERROR, links=[{"relation": "RESOLVES", "target": "dep#x"}]
    )
    assert "not an S000 stable key" in fails(
        "memory_observe", envelope=ERROR, links=[{"relation": "ABOUT", "target": "lodash"}]
    )
    # the drop-in tools apply the same gates to keyed names and JSON observations
    assert "Malformed doc key" in fails(
        "create_entities", entities=[{"name": "doc#nope", "entityType": "doc"}]
    )
    assert "does not match the key" in fails(
        "create_entities", entities=[{"name": "dep#lodash", "entityType": "person"}]
    )
    # JSON text inside an input gets the same checks as the input itself
    for observation, message in [
        (
            '{"type": "run.summary", "summary": "tests", "exitCode": NaN}',
            "NaN and Infinity are not JSON numbers",
        ),
        ('{"type": "error.capture", "message": "x"}', "observation.kind: Field required"),
    ]:
        alice = {"name": "Alice", "entityType": "person", "observations": [observation]}
        assert message in fails("create_entities", entities=[alice])
    op(
        "create_entities",
        entities=[
            {"name": "dep#a", "entityType": "dependency"},
            {"name": "file#a.py", "entityType": "file"},
        ],
    )
    assert "Unknown relation type: owns" in fails(
        "create_relations", relations=[{"from": "dep#a", "to": "file#a.py", "relationType": "owns"}]
    )
    # plain names keep the memory server's free relation types
    op(
        "create_entities",
        entities=[
            {"name": "Bob", "entityType": "person"},
            {"name": "Repo", "entityType": "project"},
        ],
    )
    out = op("create_relations", relations=[{"from": "Bob", "to": "Repo", "relationType": "owns"}])
    assert out["relations"][0]["relationType"] == "owns"


def test_concurrent_connections_write_one_entity_one_observation_one_edge(embedder: Any) -> None:
    from memsys.mcp.server import call
    from memsys.operations import BY_NAME

    def observe(_: int) -> Any:
        return call(BY_NAME["memory_observe"], {"envelope": ERROR, "links": [DEP]})

    with ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(observe, range(8)))
    assert all(a["success"] for a in answers), answers
    assert sum(a["data"]["created"] for a in answers) == 1
    assert sum(a["data"]["observation_added"] for a in answers) == 1
    assert sum(a["data"]["links_created"] for a in answers) == 1
    assert len(live(ERR_KEY)) == 1 and len(live("dep#lodash@4.17.21")) == 1
    assert edge_count("observation_of") == 1 and edge_count("caused_by") == 1


def test_two_mcp_processes_on_one_database_write_each_key_once(embedder: Any) -> None:
    """Two `memsys mcp` stdio servers (MEMSYS_DATABASE_URL points both at the test database)
    send the same envelopes at the same time."""
    envelopes = [{**ERROR, "message": f"Build step {n} failed"} for n in range(6)]
    results: list[dict[str, Any]] = []

    async def writer() -> None:
        async with _connected() as session:
            for env in envelopes:
                answer = await session.call_tool(
                    "memory_observe", {"envelope": env, "links": [DEP]}
                )
                results.append(json.loads(answer.content[0].text))

    async def both() -> None:
        async with anyio.create_task_group() as tg:
            tg.start_soon(writer)
            tg.start_soon(writer)

    anyio.run(both)
    assert len(results) == 12 and all(r["success"] for r in results), results
    assert sum(r["data"]["created"] for r in results) == 6
    assert sum(r["data"]["observation_added"] for r in results) == 6
    for n in range(6):
        assert len(live(keys.err_key(f"Build step {n} failed"))) == 1
    assert len(live("dep#lodash@4.17.21")) == 1
    assert edge_count("caused_by") == 6 and edge_count("observation_of") == 6


def test_an_envelope_typed_decomposed_files_under_the_composed_key(embedder: Any) -> None:
    """Graph names are read composed (NFC), but an envelope's key was built from its text as
    sent: "café" with a combining accent keyed a second entity no name could open."""
    decomposed = {**ERROR, "message": "Cafe\u0301 service refused the token"}
    composed = {**ERROR, "message": "Caf\u00e9 service refused the token"}
    first = op("memory_observe", envelope=decomposed,
               links=[{"relation": "CAUSED_BY", "target": "dep#cafe\u0301@1.0"}])  # fmt: skip
    assert first["entity"] == "err#caf\u00e9 service refused the token"
    again = op("memory_observe", envelope=composed)
    assert not again["created"] and not again["observation_added"]
    opened = op("open_nodes", names=[first["entity"], "dep#caf\u00e9@1.0"])["entities"]
    assert len(opened) == 2


def test_an_envelope_with_a_key_in_two_unicode_forms_is_refused(embedder: Any) -> None:
    """Keys are read composed: a context giving "cafe\u0301" and "caf\u00e9" kept one of
    the two values without a word; a key given twice is refused, naming it."""
    context = {"cafe\u0301": "decomposed", "caf\u00e9": "composed"}
    shown = fails("memory_observe", envelope={**ERROR, "context": context})
    assert "the key 'caf\u00e9' is given twice" in shown
