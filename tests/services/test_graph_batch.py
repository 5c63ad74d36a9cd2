"""The set-wise writes behind create_entities, add_observations and memory_store_batch keep
memory_store's rules: content dedup (also within a call and against memories stored before),
order, mention links, one event per new memory, and safety with real concurrent connections
(overlapping calls in opposite orders queue instead of deadlocking or writing twice)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

from sqlalchemy import func, select

from memsys.db import session_scope
from memsys.models import Chunk, Edge, Entity, Event
from tests.services.test_edges import fails, op

NAMES = [f"Service {c}" for c in "ABCDEFGH"]


def live_count(model: Any, *where: Any) -> int:
    with session_scope() as s:
        return int(s.scalar(select(func.count()).select_from(model).where(*where)) or 0)


def test_create_entities_in_one_call_dedups_links_and_logs_like_memory_store(
    embedder: Any,
) -> None:
    before = op("memory_store", content="Deploys need a green CI run", memory_type="fact")
    out = op(
        "create_entities",
        entities=[
            {"name": "Billing", "entityType": "service", "observations": [
                "Owned by the payments team", "Deploys need a green CI run",
                "Owned by the payments team"]},
            {"name": "Ledger", "entityType": "service", "observations": [
                "Owned by the payments team", "Stores balances in PostgreSQL"]},
            {"name": "Billing", "entityType": "team", "observations": ["never written"]},
        ],
    )  # fmt: skip
    assert out["entities"] == [
        {"name": "Billing", "entityType": "service", "observations": [
            "Owned by the payments team", "Deploys need a green CI run"]},
        {"name": "Ledger", "entityType": "service", "observations": [
            "Owned by the payments team", "Stores balances in PostgreSQL"]},
    ]  # fmt: skip
    with session_scope() as s:
        memories = dict(
            s.execute(select(Chunk.content, Chunk.id).where(Chunk.valid_to.is_(None))).all()
        )
        created = s.scalars(select(Event.subject_id).where(Event.operation == "memory_store")).all()
        mention = s.scalar(
            select(func.count())
            .select_from(Edge)
            .join(Entity, Entity.id == Edge.target_id)
            .where(Edge.source_id == memories["Stores balances in PostgreSQL"])
            .where(Edge.relation == "mentions", Entity.name == "PostgreSQL")
        )
    # one memory per distinct text; the one stored before is reused, not copied
    assert sorted(memories) == [
        "Deploys need a green CI run", "Owned by the payments team",
        "Stores balances in PostgreSQL",
    ]  # fmt: skip
    assert memories["Deploys need a green CI run"] == before["id"]
    assert sorted(created) == sorted(memories.values())  # one create event per new memory
    assert mention == 1  # the new memory is linked to the entity it names
    assert live_count(Edge, Edge.relation == "observation_of", Edge.valid_to.is_(None)) == 4
    graph = op("read_graph")
    assert [e["name"] for e in graph["entities"]] == ["Billing", "Ledger"]

    again = op("create_entities", entities=[{"name": "Billing", "entityType": "service"}])
    assert again["entities"] == []
    added = op(
        "add_observations",
        observations=[
            {"entityName": "Ledger", "contents": ["Owned by the payments team", "Audited yearly"]},
            {"entityName": "Ledger", "contents": ["Audited yearly", "Runs in eu-west"]},
        ],
    )
    assert added["results"] == [
        {"entityName": "Ledger", "addedObservations": ["Audited yearly"]},
        {"entityName": "Ledger", "addedObservations": ["Runs in eu-west"]},
    ]
    assert "Entity with name Nobody not found" in fails(
        "add_observations", observations=[{"entityName": "Nobody", "contents": ["x"]}]
    )


def test_overlapping_calls_in_opposite_orders_write_each_entity_and_link_once(
    embedder: Any,
) -> None:
    from memsys.mcp.server import call
    from memsys.operations import BY_NAME

    def entities(order: list[str]) -> list[dict[str, Any]]:
        return [
            {"name": n, "entityType": "service", "observations": [f"{n} is on call", "Shared"]}
            for n in order
        ]

    def create(i: int) -> Any:
        order = NAMES if i % 2 else NAMES[::-1]
        return call(BY_NAME["create_entities"], {"entities": entities(order)})

    def observe(i: int) -> Any:
        order = NAMES if i % 2 else NAMES[::-1]
        items = [{"entityName": n, "contents": ["Pages at night", f"{n} v2"]} for n in order]
        return call(BY_NAME["add_observations"], {"observations": items})

    with ThreadPoolExecutor(6) as pool:
        made = list(pool.map(create, range(6)))
        added = list(pool.map(observe, range(6)))
    assert all(a["success"] for a in made + added), made + added
    assert sum(len(a["data"]["entities"]) for a in made) == len(NAMES)
    assert sum(len(r["addedObservations"]) for a in added for r in a["data"]["results"]) == 2 * len(
        NAMES
    )
    assert live_count(Entity, Entity.key.startswith("kg#"), Entity.valid_to.is_(None)) == 8
    # 8 entities × (own text, "Shared", "Pages at night", own v2), each linked once
    assert live_count(Edge, Edge.relation == "observation_of", Edge.valid_to.is_(None)) == 32
    with session_scope() as s:
        texts = s.scalars(select(Chunk.content).where(Chunk.valid_to.is_(None))).all()
    assert len(texts) == len(set(texts)) == 2 * len(NAMES) + 2


def test_store_batch_answers_in_order_and_concurrent_batches_store_each_text_once(
    embedder: Any,
) -> None:
    from memsys.mcp.server import call
    from memsys.operations import BY_NAME

    first = op("memory_store", content="Tokens expire after an hour", memory_type="fact")
    texts = ["Cache keys carry the tenant", "Tokens expire after an hour", "Retries back off"]
    out = op("memory_store_batch", memories=[{"content": t} for t in [*texts, texts[0]]])
    ids = [r["id"] for r in out["results"]]
    assert [r["duplicate"] for r in out["results"]] == [False, True, False, True]
    assert ids[1] == first["id"] and ids[3] == ids[0] and out["stored"] == 2
    with session_scope() as s:
        order = s.scalars(
            select(Chunk.id).where(Chunk.id.in_([ids[0], ids[2]])).order_by(Chunk.created_at)
        ).all()
    assert order == [ids[0], ids[2]]  # created in the order given

    pool_texts = [f"Runbook step {i} is checked" for i in range(12)]

    def store(i: int) -> Any:
        batch = pool_texts if i % 2 else pool_texts[::-1]
        return call(BY_NAME["memory_store_batch"], {"memories": [{"content": t} for t in batch]})

    with ThreadPoolExecutor(6) as pool:
        answers = list(pool.map(store, range(6)))
    assert all(a["success"] for a in answers), answers
    assert sum(a["data"]["stored"] for a in answers) == len(pool_texts)
    assert live_count(Chunk, Chunk.content.startswith("Runbook"), Chunk.valid_to.is_(None)) == 12


def test_an_observation_longer_than_a_memory_may_be_is_refused_before_anything_runs(
    embedder: Any,
) -> None:
    entity = {"name": "Runbook", "entityType": "document", "observations": ["x" * 40_000]}
    assert "Content is too long" in fails("create_entities", entities=[entity])


def test_an_error_names_the_field_it_is_about(embedder: Any) -> None:
    """Every name-like field said "An entity name cannot be empty": a caller with a blank
    entityType or a long relationType was told to fix a name that was fine."""
    blank_type = {"name": "Runbook", "entityType": "  ", "observations": []}
    assert "entityType cannot be empty" in fails("create_entities", entities=[blank_type])
    blank_name = {"name": "", "entityType": "document", "observations": []}
    assert "An entity name cannot be empty" in fails("create_entities", entities=[blank_name])
    long_relation = {"from": "A", "to": "B", "relationType": "r" * 600}
    said = fails("create_relations", relations=[long_relation])
    assert "relationType is at most 512 characters, got 600" in said
    assert "attribute cannot be empty" in fails(
        "fact_set", entity="Redis", attribute=" ", value="6379"
    )


def test_one_call_embeds_a_bounded_amount_of_text(embedder: Any) -> None:
    """Embedding is what a batch costs: a batch of 1,000 memories at the content limit, or
    one entity with tens of thousands of observations, kept the model busy for hours in one
    call. A call holds at most 1,000 texts and ten memories' worth of characters in all;
    beyond that it is refused before anything is embedded or written."""
    from memsys.config import get_settings

    limit = 10 * get_settings().max_content_chars
    # One "word" this long is a single (unknown) token: cheap to embed at any length.
    long = [f"{i:05d}" + "x" * (get_settings().max_content_chars - 5) for i in range(11)]
    said = fails("memory_store_batch", memories=[{"content": c} for c in long])
    assert f"hold {11 * len(long[0]):,} characters (limit {limit:,}" in said
    assert "split them over several calls" in said
    stored = op("memory_store_batch", memories=[{"content": c} for c in long[:10]])
    assert stored["stored"] == 10  # at the limit: stored

    op("create_entities", entities=[{"name": "Runbook", "entityType": "doc"}])
    many = [f"Step {i} of the runbook" for i in range(1001)]
    said = fails("create_entities", entities=[
        {"name": "Big", "entityType": "doc", "observations": many}])  # fmt: skip
    assert "At most 1,000 observations per call, got 1,001" in said
    said = fails("add_observations", observations=[
        {"entityName": "Runbook", "contents": many}])  # fmt: skip
    assert "At most 1,000 observations per call, got 1,001" in said
    said = fails("add_observations", observations=[
        {"entityName": "Runbook", "contents": [f"y{c[1:]}" for c in long]}])  # fmt: skip
    assert f"hold {11 * len(long[0]):,} characters (limit {limit:,}" in said
