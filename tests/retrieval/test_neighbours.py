"""The neighbourhood channel: a strong hit pulls in what was written next to it (the next turn
of a conversation, the next chunk of a document), under the caller's filters and as_of, and
each neighbour is ranked on its own merit plus a share of its seed's strength."""

from __future__ import annotations

import itertools
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import pytest
from sqlalchemy import select

from memsys import runner
from memsys.db import session_scope
from memsys.models import Chunk
from memsys.retrieval import fusion, neighbours, pipeline
from memsys.schemas import MemoryForgetIn, MemoryStoreBatchIn, MemoryStoreIn
from memsys.services import memories
from tests.factories import index, store

QUESTION = "Caroline: Which city did you finally pick for the team offsite next spring?"
ANSWER = "Melanie: The one by the sea with the yellow trams. We signed yesterday!"
QUERY = "which city was picked for the team offsite"
OTHER_TOPICS = [
    "Caroline: The team dinner last spring was great fun.",
    "Melanie: Which restaurant did you pick for your birthday?",
    "Caroline: My dog learned to open the fridge, which is a problem.",
    "Melanie: I finished the pottery class and made six bowls.",
    "Caroline: The new bakery on the corner sells rye bread on Fridays.",
    "Melanie: My brother is training for a marathon in October.",
    "Caroline: I repainted the kitchen a pale green colour.",
    "Melanie: The kids want to learn to play the violin this year.",
    "Caroline: I read a novel about a lighthouse keeper last week.",
    "Melanie: Our garden tomatoes finally turned red.",
    "Caroline: I switched to a standing desk at work.",
    "Melanie: The book club picked a mystery novel for next month.",
    "Caroline: We watched a documentary about octopuses.",
    "Melanie: My car needs new tyres before winter.",
]
# The channel measured alone against the same pipeline without it (the graph off in both, so
# that it cannot be what finds the answer).
WITH = replace(fusion.CURRENT, graph=0.0)
WITHOUT = replace(WITH, neighbours=0.0)


def _conversation(ns: str = "chat:a", answer_type: str = "fact") -> tuple[str, str]:
    """Other talk, the question, the answer right after it, more talk; returns both ids."""
    for line in OTHER_TOPICS[:6]:
        store(line, namespace=ns, memory_type="fact")
    asked = store(QUESTION, namespace=ns, memory_type="fact").id
    answered = store(ANSWER, namespace=ns, memory_type=answer_type).id
    for line in OTHER_TOPICS[6:]:
        store(line, namespace=ns, memory_type="fact")
    return asked, answered


def _ids(found: pipeline.Retrieval) -> list[str]:
    return [h.id for h in found.hits]


def test_the_turn_after_a_strong_hit_is_pulled_in(embedder) -> None:
    asked, answered = _conversation()
    assert fusion.CURRENT.neighbours > 0
    with session_scope() as s:
        alone = pipeline.retrieve(s, QUERY, limit=3, pool=3, weights=WITHOUT)
        found = pipeline.retrieve(s, QUERY, limit=3, pool=3, weights=WITH)
    assert asked in _ids(alone) and answered not in _ids(alone)
    # The answer shares no word with the query and is not among the channels' own 3 best,
    # yet it is written right after the best hit.
    near = {row["id"]: row["share"] for row in found.channels["neighbours"]}
    assert near.get(answered, 0) > 0
    assert _ids(found)[0] == asked and answered in _ids(found)
    # Only neighbours: nothing written far from every seed is scored by the channel.
    assert len(near) <= 2 * fusion.CURRENT.neighbour_width * fusion.CURRENT.neighbour_seeds


def test_a_conversation_stored_in_one_batch_keeps_its_order(embedder) -> None:
    """One transaction, one now(): the turns must still be neighbours in the order given."""
    lines = [*OTHER_TOPICS[:6], QUESTION, ANSWER, *OTHER_TOPICS[6:]]
    batch = MemoryStoreBatchIn(
        memories=[MemoryStoreIn(content=line, namespace="chat:b") for line in lines]
    )
    stored = runner.run(memories.store_batch, batch).results
    with session_scope() as s:
        written = s.execute(
            select(Chunk.id).where(Chunk.namespace == "chat:b").order_by(Chunk.created_at, Chunk.id)
        ).scalars()
        assert list(written) == [r.id for r in stored]
        found = pipeline.retrieve(
            s, QUERY, filters={"namespace": "chat:b"}, limit=3, pool=3, weights=WITH
        )
    asked, answered = stored[6].id, stored[7].id
    near = {row["id"]: row["share"] for row in found.channels["neighbours"]}
    assert _ids(found)[0] == asked and near.get(answered, 0) > 0


def test_a_neighbour_on_another_subject_gets_a_smaller_share(embedder) -> None:
    store("Caroline: My car needs new tyres before winter.", namespace="chat:a")
    asked = store(QUESTION, namespace="chat:a").id
    after = store("Melanie: We chose Lisbon for the offsite, near the sea.", namespace="chat:a")
    before_id = None
    with session_scope() as s:
        coherent = replace(WITH, neighbour_coherence=1.0)
        found = pipeline.retrieve(s, QUERY, limit=3, weights=coherent)
        for row in found.features:
            if row[0] not in (asked, after.id):
                before_id = row[0]
    near = {row["id"]: row["share"] for row in found.channels["neighbours"]}
    # Both sit right next to the question; the one on its subject gets more of its strength.
    assert before_id is not None and near[after.id] > near[before_id] > 0


def test_scores_stay_non_increasing_with_neighbours(embedder) -> None:
    _conversation()
    with session_scope() as s:
        found = pipeline.retrieve(s, QUERY, limit=10)
    assert len(found.hits) == 10
    for above, below in itertools.pairwise(found.hits):
        assert below.fused <= above.fused
        assert below.score <= above.score


def test_filters_and_other_namespaces_restrict_the_neighbours(embedder) -> None:
    asked, answered = _conversation(answer_type="decision")
    # The same question in another namespace, written between nothing of ours.
    elsewhere = store("Lisbon is where the other team holds its offsite", namespace="chat:b").id
    with session_scope() as s:
        typed = pipeline.retrieve(
            s, QUERY, filters={"memory_type": "fact"}, limit=5, pool=3, weights=WITH
        )
        scoped = pipeline.retrieve(s, QUERY, filters={"namespace": "chat:a"}, limit=14)
    assert asked in _ids(typed)
    assert answered not in _ids(typed)
    assert answered not in {row["id"] for row in typed.channels["neighbours"]}
    assert elsewhere not in _ids(scoped) and answered in _ids(scoped)


def test_as_of_restricts_the_neighbours(embedder) -> None:
    asked, answered = _conversation()
    before_forget = datetime.now(UTC)
    runner.execute(memories.forget, MemoryForgetIn, {"memory_id": answered})
    with session_scope() as s:
        now = pipeline.retrieve(s, QUERY, limit=3, pool=3, weights=WITH)
        then = pipeline.retrieve(s, QUERY, limit=3, pool=3, as_of=before_forget, weights=WITH)
    assert _ids(now)[0] == asked and answered not in _ids(now)
    assert answered not in {row["id"] for row in now.channels["neighbours"]}
    assert answered in _ids(then)


def test_adjacent_chunks_of_a_document_are_neighbours(embedder, tmp_path: Path) -> None:
    topics = ["Venue", "Travel", "Meals", "Budget", "Safety", "Weather", "Rooms", "Agenda"]
    topics += ["Photos", "Wifi", "Badges", "Return"]
    body = [
        f"## {t}\n\nNotes about {t.lower()} for the spring trip, item {i}."
        for i, t in enumerate(topics)
    ]
    body[0] = "## Venue\n\nThe offsite takes place in Lisbon at the old tram depot."
    guide = tmp_path / "offsite.md"
    guide.write_text("# Offsite guide\n\n" + "\n\n".join(body) + "\n")
    other = tmp_path / "other.md"
    other.write_text("# Unrelated\n\n## Printers\n\nThe office printer jams on glossy paper.\n")
    index(guide)
    index(other)
    with session_scope() as s:
        found = pipeline.retrieve(
            s, "where does the offsite take place", limit=2, pool=2, weights=WITH
        )
        seeds = {row["id"] for row in found.channels["dense"]}
        seeds |= {row["id"] for row in found.channels["lexical"]["hits"]}
        near = [row["id"] for row in found.channels["neighbours"]]
        place = {
            c.id: (c.source_file, c.chunk_index)
            for c in s.scalars(select(Chunk).where(Chunk.id.in_(seeds | set(near))))
        }
    top = found.hits[0]
    assert top.source_file is not None and top.source_file.endswith("offsite.md")
    assert top.chunk_index == 0
    # The chunk after the best one is pulled in; every neighbour lies in the same document
    # within the window of a seed (the others are not neighbours of anything found).
    assert (top.source_file, 1) in {place[i] for i in near}
    for i in near:
        source, at = place[i]
        assert source == top.source_file and at is not None
        assert any(
            abs(at - (place[j][1] or 0)) <= WITH.neighbour_width
            for j in seeds
            if place[j][0] == source
        )


# Five subjects, four lines each: written subject by subject (a conversation moves on from one
# thing to the next) or dealt out one line of each in turn (unrelated notes jotted down).
SUBJECTS = [
    [
        "We picked Lisbon for the offsite next spring.",
        "The offsite hotel in Lisbon is near the sea.",
        "Flights to Lisbon for the offsite are booked.",
        "The offsite agenda has a day for the old town.",
    ],
    [
        "My dog learned to open the fridge.",
        "The dog now steals cheese from the fridge.",
        "We put a child lock on the fridge for the dog.",
        "The vet says the dog is eating too much cheese.",
    ],
    [
        "I repainted the kitchen a pale green.",
        "The green kitchen walls needed two coats of paint.",
        "Next I will paint the kitchen cupboards white.",
        "The paint smell in the kitchen lasted a week.",
    ],
    [
        "My brother trains for the October marathon.",
        "He runs thirty kilometres every Sunday for the marathon.",
        "The marathon route goes along the river.",
        "He bought new running shoes for the marathon.",
    ],
    [
        "Our garden tomatoes finally turned red.",
        "The tomato plants in the garden need more water.",
        "We made sauce from the garden tomatoes.",
        "Next year the garden gets more tomato plants.",
    ],
]


def _recall(ns: str, weights: fusion.Weights = fusion.CURRENT) -> pipeline.Retrieval:
    with session_scope() as s:
        return pipeline.retrieve(
            s, "where is the team offsite", filters={"namespace": ns}, limit=8, weights=weights
        )


def test_write_order_counts_only_where_rows_written_together_are_alike(embedder) -> None:
    for line in [line for subject in SUBJECTS for line in subject]:
        store(line, namespace="chat:subjects")
    for line in [subject[i] for i in range(4) for subject in SUBJECTS]:
        store(line, namespace="notes:dealt")
    told = _recall("chat:subjects")
    # Rows written together are clearly more alike than rows written apart: full weight.
    assert told.fusion["neighbour_lift"] > neighbours.GATE_HIGH
    assert told.fusion["neighbour_gate"] == 1.0
    assert told.fusion["neighbours"] == fusion.CURRENT.neighbours
    jotted = _recall("notes:dealt")
    # No more alike than any two rows: the order is noise and the channel is silent, so the
    # result is what the other channels give without it.
    assert jotted.fusion["neighbour_lift"] < neighbours.GATE_LOW
    assert jotted.fusion["neighbour_gate"] == 0.0 and jotted.fusion["neighbours"] == 0.0
    assert jotted.channels["neighbours"]  # the channel still ran (the trace shows its rows)
    without = _recall("notes:dealt", replace(fusion.CURRENT, neighbours=0.0))
    assert _ids(jotted) == _ids(without)


def test_the_gate_ramps_between_its_bounds() -> None:
    low, high = neighbours.GATE_LOW, neighbours.GATE_HIGH
    assert neighbours.gate(None) == 1.0  # one seed: nothing to compare with, as before
    assert neighbours.gate(low - 0.05) == 0.0 and neighbours.gate(low) == 0.0
    assert neighbours.gate((low + high) / 2) == pytest.approx(0.5)
    assert neighbours.gate(high) == 1.0 and neighbours.gate(high + 0.3) == 1.0
