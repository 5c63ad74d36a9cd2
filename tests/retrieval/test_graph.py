"""The graph channel: Personalized PageRank on the chunk–entity graph, checked against the
closed form on a small known graph, and the second hop it exists for — a chunk that mentions a
name leads to the chunk that is *about* that name, not to every chunk naming it in passing."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

import numpy as np
import pytest
from sqlalchemy import func, select, update

from memsys import extraction
from memsys.db import session_scope
from memsys.models import Edge, Entity
from memsys.retrieval import fusion, graph, pipeline
from memsys.services import mentions
from tests.factories import store


def _closed_form(
    edges: dict[tuple[str, str], float], seeds: dict[str, float], chunks: list[str]
) -> dict[str, float]:
    """r = α·s + (1 − α)·Pᵀr solved directly: chunk → entity uniform, entity → chunk by
    weight; no node here is dangling."""
    entities = sorted({e for _, e in edges})
    nodes = chunks + entities
    at = {n: i for i, n in enumerate(nodes)}
    p = np.zeros((len(nodes), len(nodes)))
    for (c, e), w in edges.items():
        p[at[c], at[e]] = 1.0
        p[at[e], at[c]] = w
    p /= p.sum(axis=1, keepdims=True)
    s = np.zeros(len(nodes))
    for e, w in seeds.items():
        s[at[e]] = w
    s /= s.sum()
    a = graph.RESTART
    r = np.linalg.solve(np.eye(len(nodes)) - (1 - a) * p.T, a * s)
    return {c: float(r[at[c]]) for c in chunks}


def test_pagerank_matches_the_closed_form_on_a_small_graph() -> None:
    ns = "t"
    # c1 mentions X and Y; c2 is about Y (weight 4) and mentions Z; c3 mentions Y in passing
    # and Z; c4 mentions only Z.
    plain = {
        ("c1", "X"): 1.0,
        ("c1", "Y"): 1.0,
        ("c2", "Y"): mentions.SUBJECT_WEIGHT,
        ("c2", "Z"): 1.0,
        ("c3", "Y"): 1.0,
        ("c3", "Z"): 1.0,
        ("c4", "Z"): 1.0,
    }
    edges = {((ns, c), (ns, e)): w for (c, e), w in plain.items()}
    scores = graph.personalized_pagerank(edges, {(ns, "X"): 1.0})
    expected = _closed_form(plain, {"X": 1.0}, ["c1", "c2", "c3", "c4"])
    for chunk, value in expected.items():
        assert scores[(ns, chunk)] == pytest.approx(value, abs=1e-12)
    # The walk from X reaches Y through c1; Y's mass goes mostly to the chunk about Y.
    assert scores[(ns, "c1")] > scores[(ns, "c2")] > scores[(ns, "c3")] > scores[(ns, "c4")]


def _walked(
    edges: dict[tuple[tuple[str, str], tuple[str, str]], float],
    seeds: dict[tuple[str, str], float],
    steps: int = 400,
) -> dict[tuple[str, str], float]:
    """The walk step by step over every node (the definition, not the solver): restart to
    the seeds, mass on a node without edges back to the seeds."""
    nodes = sorted({c for c, _ in edges} | {e for _, e in edges} | set(seeds))
    at = {n: i for i, n in enumerate(nodes)}
    step = np.zeros((len(nodes), len(nodes)))
    for (c, e), w in edges.items():
        step[at[c], at[e]] = 1.0
        step[at[e], at[c]] = w
    out = step.sum(axis=1, keepdims=True)
    step = np.divide(step, out, out=np.zeros_like(step), where=out > 0)
    restart = np.zeros(len(nodes))
    for n, w in seeds.items():
        restart[at[n]] = w
    restart /= restart.sum()
    rank = restart.copy()
    a = graph.RESTART
    for _ in range(steps):
        lost = rank[out.ravel() == 0].sum()
        rank = a * restart + (1 - a) * (step.T @ rank + lost * restart)
    return {c: float(rank[at[c]]) for c, _ in edges}


def test_the_walk_over_two_namespaces_and_an_edgeless_seed_is_the_step_by_step_walk() -> None:
    # Two namespaces (no edge between them) and a seed with no edges (a hub the walk skips):
    # its share of the restart comes back to every seed, in both namespaces.
    edges = {
        (("a", "c1"), ("a", "X")): 1.0,
        (("a", "c1"), ("a", "Y")): 1.0,
        (("a", "c2"), ("a", "Y")): mentions.SUBJECT_WEIGHT,
        (("a", "c3"), ("a", "Y")): 1.0,
        (("b", "d1"), ("b", "X")): mentions.SUBJECT_WEIGHT,
        (("b", "d2"), ("b", "X")): 1.0,
        (("b", "d2"), ("b", "Z")): 1.0,
    }
    seeds = {("a", "X"): 1.0, ("b", "X"): 0.5, ("a", "hub"): 2.0}
    scores = graph.personalized_pagerank(edges, seeds)
    for chunk, value in _walked(edges, seeds).items():
        assert scores[chunk] == pytest.approx(value, abs=1e-12)
    assert scores[("b", "d1")] > scores[("b", "d2")]  # the entry about X, not the mention


def test_a_mention_in_passing_weighs_the_same_as_before_without_a_subject() -> None:
    ns = "t"
    plain = {("c1", "X"): 1.0, ("c1", "Y"): 1.0, ("c2", "Y"): 1.0, ("c3", "Y"): 1.0}
    edges = {((ns, c), (ns, e)): w for (c, e), w in plain.items()}
    scores = graph.personalized_pagerank(edges, {(ns, "X"): 1.0})
    assert scores[(ns, "c2")] == pytest.approx(scores[(ns, "c3")])
    assert sum(scores.values()) < 1.0  # the entities hold the rest of the mass


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ("Young, New South Wales: Young is a town in the Hilltops Region", "concept#young"),
        ("# Release Process\nRun the migrations first.", "concept#release process"),
        ("Caroline: I went to the support group yesterday.", "concept#caroline"),
        ("The Drew Pearson Show: a radio programme", "concept#drew pearson show"),
        ("In 1986 the film was shot near Leland.", None),
        ("When Paris fell, the government moved south.", None),
        ("user prefers dark mode in the editor", None),
        ("Kerry Saxby-Junna (born 1961) is a race walker.", "concept#kerry saxby-junna"),
        ("Rapamycin delays aging in fruit flies.", None),  # a sentence's first word
        ("Effect of Vitamin D on bone density", None),
        # A title joined to its entry by a space, the entry opening with the same name:
        ("Demon Dice Demon Dice, originally published as Chaos Progenitus", "concept#demon dice"),
        (
            "The Hythrun Chronicles The Hythrun Chronicles is a fantasy series",
            "concept#hythrun chronicles",
        ),
        ("Leyenda de Azul The Leyenda de Azul is a tournament", "concept#leyenda de azul"),
        ("Duran Duran: an English band", "concept#duran duran"),  # a one-word name twice is a name
    ],
)
def test_the_subject_is_the_name_a_text_opens_with(text: str, key: str | None) -> None:
    assert extraction.subject(text) == key


def test_a_title_written_before_its_entry_is_one_mention_not_a_doubled_name() -> None:
    text = "Maha Sona Maha Sona or Maha Sohona is a demon of Sinhala folklore."
    keys = [m.key for m in extraction.extract(text)]
    assert keys[:2] == ["concept#maha sona", "concept#maha sohona"]
    assert not any("maha sona maha" in k for k in keys)
    assert extraction.subject(text) == "concept#maha sona"
    # What follows the second copy stays part of its name, never a name of its own.
    keys = [m.key for m in extraction.extract("Bank of America Bank of America Tower is tall.")]
    assert keys == ["concept#bank of america", "concept#bank of america tower"]


BRIDGE = (
    "Kerry Saxby-Junna: Kerry Saxby-Junna (born 2 June 1961) is a retired Australian race "
    "walker who was born in Young, New South Wales."
)
TOWN = "Young: a town in the Hilltops Region. At the 2011 census it had 7,014 inhabitants."
# Chunks naming Young in passing share more names with the bridge than the town's own entry
# does: only the weight of the town's subject edge can put the town above them.
PASSING = [
    "Harvest festival: Cherry pickers travel to Young, New South Wales every December.",
    "Railway history: The branch line once ran through Young, New South Wales.",
    "Regional radio: A station in Young, New South Wales plays country music.",
]
QUERY = "At the 2011 census, what was the population of the city where Kerry Saxby-Junna was born?"


def test_a_hit_leads_to_the_memory_about_the_name_it_mentions(embedder) -> None:
    ns = "hops"
    bridge = store(BRIDGE, namespace=ns).id
    town = store(TOWN, namespace=ns).id
    passing = [store(text, namespace=ns).id for text in PASSING]
    for i in range(12):  # unrelated memories, so the channels have a population to rank
        store(f"Note {i}: the quarterly report {i} lists office supplies.", namespace=ns)
    with session_scope() as s:
        weights = dict(
            s.execute(
                select(Entity.key, Edge.weight)
                .join(Entity, (Entity.namespace == Edge.namespace) & (Entity.id == Edge.target_id))
                .where(Edge.namespace == ns, Edge.relation == "mentions", Edge.source_id == town)
            ).all()
        )
        found = pipeline.retrieve(s, QUERY, filters={"namespace": ns}, limit=5)
    # Stored: the town memory is about Young and mentions the rest in passing.
    assert weights.pop("concept#young") == mentions.SUBJECT_WEIGHT
    assert set(weights.values()) == {1.0}
    walked = [h["id"] for h in found.channels["graph"]]
    assert walked.index(town) < min(walked.index(p) for p in passing if p in walked)
    assert [h.id for h in found.hits][:2] == [bridge, town]


def test_a_replay_walks_the_graph_as_it_was(embedder) -> None:
    """Close the name the walk went through (as deleting an entity does); a read as of
    before walks the same graph as the query did then, a read now does not."""
    ns = "hops-asof"
    store(BRIDGE, namespace=ns)
    town = store(TOWN, namespace=ns).id
    for text in PASSING:
        store(text, namespace=ns)
    with session_scope() as s:
        seen = pipeline.retrieve(s, QUERY, filters={"namespace": ns}, limit=5)
    before = datetime.now(UTC)
    with session_scope() as s:
        young = s.scalar(
            select(Entity.id).where(Entity.namespace == ns, Entity.key == "concept#young")
        )
        s.execute(
            update(Edge)
            .where(Edge.namespace == ns, Edge.target_id == young)
            .values(valid_to=func.now(), expired_at=func.now())
        )
        s.execute(
            update(Entity)
            .where(Entity.namespace == ns, Entity.id == young)
            .values(valid_to=func.now())
        )
    with session_scope() as s:
        now = pipeline.retrieve(s, QUERY, filters={"namespace": ns}, limit=5)
        then = pipeline.retrieve(s, QUERY, filters={"namespace": ns}, limit=5, as_of=before)

    def walk(found: pipeline.Retrieval) -> dict[str, float]:
        return {h["id"]: h["ppr"] for h in found.channels["graph"]}

    assert walk(then) == walk(seen)
    assert walk(now)[town] < walk(seen)[town]  # now only its other names lead there


def test_a_query_about_a_stored_entry_trusts_the_walk_more(embedder) -> None:
    """A name the query gives that some memory opens with (an entry about it) raises the
    graph's weight by `graph_subject`; a name only mentioned in passing does not."""
    ns = "hops-subject"
    store(BRIDGE, namespace=ns)
    store(TOWN, namespace=ns)
    for text in PASSING:
        store(text, namespace=ns)
    with session_scope() as s:
        about = graph.named(s, QUERY, ns)
        passing = graph.named(s, "Which festival happens in New South Wales?", ns)
        found = pipeline.retrieve(s, QUERY, filters={"namespace": ns}, limit=5)
        plain = pipeline.retrieve(
            s, "Which festival happens in New South Wales?", filters={"namespace": ns}, limit=5
        )
    assert len(about.keys) == 1 and about.subjects == 1  # Kerry Saxby-Junna has an entry
    assert len(passing.keys) == 1 and passing.subjects == 0  # New South Wales has none
    base = fusion.CURRENT.graph
    assert found.fusion["graph"] == base * fusion.CURRENT.graph_subject
    assert found.fusion["query_subjects"] == 1
    assert plain.fusion["graph"] == base and plain.fusion["query_subjects"] == 0


# Census figures of other cities: they share the question's words ("2011 census",
# "population", "city") far more than the town's own entry does.
CENSUS = [
    f"Census figures: At the 2011 census the city of {city} had a population of {n} people."
    for city, n in [
        ("Orange", "39,000"),
        ("Dubbo", "38,000"),
        ("Bathurst", "33,000"),
        ("Albury", "47,000"),
        ("Tamworth", "41,000"),
        ("Goulburn", "22,000"),
        ("Wagga Wagga", "46,000"),
        ("Lismore", "28,000"),
        ("Armidale", "24,000"),
        ("Queanbeyan", "37,000"),
        ("Broken Hill", "19,000"),
        ("Griffith", "25,000"),
    ]
]
UNNAMED = (
    "At the 2011 census, what was the population of the city where the retired Australian "
    "race walker born in 1961 was born?"
)


def _hops_with_census(ns: str) -> tuple[str, str]:
    # Unrelated notes after the town's entry: written next to the bridge, the town would
    # come in through the neighbourhood channel instead of the walk.
    town = store(TOWN, namespace=ns).id
    for i in range(3):
        store(f"Note {i}: the quarterly report {i} lists office supplies.", namespace=ns)
    bridge = store(BRIDGE, namespace=ns).id
    for text in PASSING + CENSUS:
        store(text, namespace=ns)
    return bridge, town


def test_the_entry_a_hit_leads_to_gets_the_seat(embedder) -> None:
    """The question never names the town: dense and BM25 agree on the bridge and on other
    cities' census figures, and the town's entry ranks below them. The walk goes from the
    bridge to the one memory about Young; the seat gives it the fifth place."""
    ns = "hops-seat"
    bridge, town = _hops_with_census(ns)
    with session_scope() as s:
        seated = pipeline.retrieve(s, UNNAMED, filters={"namespace": ns}, limit=8)
        short = pipeline.retrieve(s, UNNAMED, filters={"namespace": ns}, limit=4)
        plain = pipeline.retrieve(
            s,
            UNNAMED,
            filters={"namespace": ns},
            limit=8,
            weights=replace(fusion.CURRENT, entry_seat=0),
        )
    unseated = [i for i, _ in plain.ranked]
    assert unseated[0] == bridge and unseated.index(town) >= fusion.CURRENT.entry_seat
    assert plain.fusion["seated"] is None
    got = [h.id for h in seated.hits]
    assert got[fusion.CURRENT.entry_seat - 1] == town
    assert seated.fusion["seated"] == {"id": town, "from": unseated.index(town) + 1}
    # Fewer results asked for than the seat's place: nothing moves, nothing is recorded.
    assert short.fusion["seated"] is None
    assert [h.id for h in short.hits] == [h.id for h in plain.hits][:4]
    # Everything else keeps its order; the seated hit's score is its own, capped by the one
    # above, and the hits below it are not lowered by it.
    assert [i for i in got if i != town] == [i for i in unseated if i != town][: len(got) - 1]
    scores = {h.id: h.score for h in plain.hits}
    after = seated.hits[fusion.CURRENT.entry_seat :]
    assert after and all(h.score == scores[h.id] for h in after)
    above = seated.hits[fusion.CURRENT.entry_seat - 2]
    assert seated.hits[fusion.CURRENT.entry_seat - 1].score <= above.score


def test_turns_opening_with_the_same_speaker_are_not_entries(embedder) -> None:
    """A conversation's turns all open with their speaker: none is *the* entry about them."""
    ns = "hops-turns"
    turns = [
        "Caroline: I went to the LGBTQ support group yesterday.",
        "Caroline: The support group meets every Tuesday in Boston.",
        "Caroline: I am researching adoption agencies now.",
    ]
    for text in turns:
        store(text, namespace=ns)
    with session_scope() as s:
        walk = graph.search(
            s, graph.seeds(s, graph.named(s, "Caroline", ns).keys, []), {"namespace": ns}, None, 10
        )
    assert len(walk.hits) == 3 and walk.entries == set()
