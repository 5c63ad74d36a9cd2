"""A purge erases what repeats the memory's text: episodes, drawn relations, the entities
its words introduced, the text of traces that quoted it — and leaves what is the user's own."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select

from memsys.db import session_scope
from memsys.models import Chunk, Edge, Entity, Episode, Event, QueryTrace
from tests.services.test_edges import op

SECRET = "Orbitron.ts depends on Vaultkey.ts. Orbitron uses the secret SALT-99812 from Vaultkey."


def names(namespace: str = "global") -> set[str]:
    with session_scope() as s:
        return set(s.scalars(select(Entity.name).where(Entity.namespace == namespace)))


def test_a_purged_episode_leaves_no_sentence_entity_or_edge_behind(embedder: Any) -> None:
    kept = op("add_episode", content="Orbitron.ts is part of the Billing service.")
    episode = op("add_episode", content=SECRET)
    assert "SALT-99812" in names()
    op("memory_forget", memory_id=episode["memory_id"], purge=True)
    assert "SALT-99812" not in names() and "Vaultkey.ts" not in names()
    assert "Orbitron.ts" in names()  # another memory still names it
    with session_scope() as s:
        assert s.get(Episode, ("global", episode["episode_id"])) is None
        assert s.get(Episode, ("global", kept["episode_id"])) is not None
        contexts = [e.context or "" for e in s.scalars(select(Edge))]
    assert not any("SALT-99812" in c for c in contexts)
    found = op("search_edges", query="Orbitron secret from Vaultkey", num_results=10)["edges"]
    assert not any("SALT" in str(e) for e in found)
    assert "SALT" not in str(op("query_graph", query="Orbitron"))


def test_a_purge_keeps_the_users_own_entities(embedder: Any) -> None:
    """Entities made with create_entities are the user's, even when the purged memory is
    all that links them; concept entities only its words named go."""
    op("create_entities", entities=[{"name": "Q7-ZEBRA", "entityType": "code"}])
    memory = op("memory_store", content="Nightjar pays Veltrix Holdings with code Q7-ZEBRA.")
    with session_scope() as s:
        own = s.scalars(select(Entity).where(Entity.key.startswith("kg#"))).one()
    op("memory_relate", source_id=memory["id"], target_id=own.id, target_kind="entity",
       relation="references")  # fmt: skip
    assert {"Veltrix Holdings", "Nightjar"} <= names()
    op("memory_forget", memory_id=memory["id"], purge=True)
    left = names()
    assert "Veltrix Holdings" not in left and "Nightjar" not in left  # only its text named them
    assert "Q7-ZEBRA" in left  # made with create_entities, linked by the purged memory alone
    hits = op("search_entities", query="Veltrix Holdings", num_results=5)["entities"]
    assert not any(e["name"] == "Veltrix Holdings" for e in hits)


def test_a_relation_another_memory_states_stays_without_the_purged_sentence(
    embedder: Any,
) -> None:
    first = op("add_episode", content="Orbitron.ts depends on Vaultkey.ts (key SALT-1).")
    op("add_episode", content="We confirmed again: Orbitron.ts depends on Vaultkey.ts.")
    op("memory_forget", memory_id=first["memory_id"], purge=True)
    with session_scope() as s:
        [edge] = s.scalars(select(Edge).where(Edge.relation == "depends_on")).all()
    assert edge.valid_to is None and first["memory_id"] not in edge.evidence_chunk_ids
    assert edge.evidence_chunk_ids and "SALT-1" not in (edge.context or "")


def test_a_purge_takes_the_earlier_versions_an_edit_left(embedder: Any, tmp_path: Any) -> None:
    from tests.vault.helpers import export, import_
    from tests.vault.test_hand_edits import edit

    op("memory_store", content="The vault password is HUNTER2-SECRET, kept by Kafka ops")
    export(tmp_path / "v")
    path = next(p for p in (tmp_path / "v" / "graph").rglob("*.md") if "HUNTER2" in p.read_text())
    edit(path, r"^The vault password is.*$", "The vault password lives in the secrets manager")
    (version,) = import_(tmp_path / "v").versions
    op("memory_forget", memory_id=version.id, purge=True)
    with session_scope() as s:
        assert s.get(Chunk, ("global", version.previous)) is None
        assert not [c for c in s.scalars(select(Chunk.content)) if "HUNTER2" in c]
    assert "HUNTER2-SECRET" not in names()


def test_a_purge_waits_for_a_store_naming_the_same_entity(embedder: Any) -> None:
    """The purge removes an entity nothing names any more; a store naming it, not yet
    committed, made it wait, and its mention keeps the entity (no edge to a deleted one)."""
    import threading

    from memsys.schemas import MemoryStoreIn
    from memsys.services import memories

    doomed = op("memory_store", content="Veltrix Holdings pays its invoices late")
    with session_scope() as store:
        params = MemoryStoreIn(content="Veltrix Holdings moved to net 60 terms")
        kept = memories.store(store, params)
        worker = threading.Thread(
            target=lambda: op("memory_forget", memory_id=doomed["id"], purge=True)
        )
        worker.start()
        worker.join(0.5)
        assert worker.is_alive()  # the purge waits for the store (it tries its turn)
    worker.join(30)
    assert not worker.is_alive()
    with session_scope() as s:
        [entity] = s.scalars(select(Entity).where(Entity.name == "Veltrix Holdings")).all()
        edge = s.scalars(select(Edge).where(Edge.source_id == kept.id)).all()
    assert entity.id in {e.target_id for e in edge}


def test_a_purge_erases_the_text_of_answers_that_quoted_it(embedder: Any) -> None:
    memory = op("memory_store", content="The Ostrava escrow password is PURGEME-5150")
    other = op("memory_query", query="what is the Ostrava escrow password")
    op("memory_store", content="Dana writes the release notes", namespace="project:docs")
    unrelated = op("memory_query", query="who writes the release notes", namespace="project:docs")
    assert "PURGEME-5150" in other["output"]
    op("memory_forget", memory_id=memory["id"], purge=True)
    with session_scope() as s:
        trace = s.scalars(select(QueryTrace).where(QueryTrace.id == other["query_id"])).one()
        spared = s.scalars(select(QueryTrace).where(QueryTrace.id == unrelated["query_id"])).one()
        assert "PURGEME" not in str(trace.output) and trace.output["erased"]
        assert memory["id"] in str(trace.retrieved)  # the debugger's record of what it did
        assert spared.output is not None and "erased" not in spared.output
    shown = op("debug_trace", trace_id=other["query_id"])
    assert "PURGEME" not in str(shown)


def test_a_purge_takes_the_edges_that_point_at_the_memory(embedder: Any) -> None:
    first = op("memory_store", content="The billing job retries three times")
    secret = op("memory_store", content="The billing job's API key is sk-live-0000")
    op("memory_relate", source_id=first["id"], target_id=secret["id"], relation="relates_to",
       context="uses sk-live-0000")  # fmt: skip
    op("memory_forget", memory_id=secret["id"], purge=True)
    with session_scope() as s:
        left = [e for e in s.scalars(select(Edge)) if secret["id"] in (e.source_id, e.target_id)]
    assert left == []
    assert op("memory_inspect_graph", memory_id=first["id"])["edges"] == []


def test_a_purge_takes_the_near_duplicates_consolidation_merged_into_it(embedder: Any) -> None:
    from memsys.services import maintain

    texts = [
        "The vault root token is ZEBRA-4412-SECRET",
        "The vault root token is ZEBRA-4412-SECRET.",
    ]
    ids = [op("memory_store", content=t, memory_type="fact")["id"] for t in texts]
    assert maintain.run().merged == 1
    with session_scope() as s:
        live = select(Chunk.id).where(Chunk.id.in_(ids), Chunk.valid_to.is_(None))
        survivor = s.scalars(live).one()
    op("memory_forget", memory_id=survivor, purge=True)
    with session_scope() as s:
        assert not [c for c in s.scalars(select(Chunk.content)) if "ZEBRA-4412" in c]
        # nor the merge's episode event (it kept the survivor's first 80 characters)
        assert not [e for e in s.scalars(select(Event.payload)) if "ZEBRA-4412" in str(e)]
    assert "ZEBRA-4412" not in op("memory_brief", kind="episodes")["text"]


def test_a_purge_leaves_a_version_another_memory_absorbed(embedder: Any) -> None:
    """A follows B (memory_relate supersedes); B is later merged into C by consolidation.
    B is C's version, not A's: purging A leaves it."""
    from datetime import UTC, datetime

    from memsys.schemas.edges import MemoryRelateIn
    from memsys.services import decay, edges, namespaces

    a = op("memory_store", content="Deploys happen on Tuesdays now")["id"]
    b = op("memory_store", content="Deploys happen on Mondays")["id"]
    c = op("memory_store", content="Deploys happen every Monday")["id"]
    op("memory_relate", source_id=a, target_id=b, relation="supersedes")
    with session_scope() as s:  # what consolidate.merge_one does when B merges into C
        namespaces.share(s, ["global"])
        edges.relate(s, MemoryRelateIn(source_id=c, target_id=b, relation="supersedes"))
        merged = s.get(Chunk, ("global", b))
        assert merged is not None
        decay.close(s, merged, datetime.now(UTC), "consolidate", superseded_by=c)
    op("memory_forget", memory_id=a, purge=True)
    with session_scope() as s:
        assert s.get(Chunk, ("global", b)) is not None
