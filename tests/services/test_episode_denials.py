"""An episode that denies a relation closes its edge (issue 10 §3: a newer statement that
contradicts an older one closes the old edge; nothing is deleted): "no longer", "does not",
"stopped", "B instead of C". The edge stays readable as of before the episode's reference time,
and an episode older than the edge does not undo it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import select

from memsys import relation_extraction
from memsys.db import session_scope
from memsys.models import Edge
from tests.services.test_edges import op

AUTH = "The auth.ts file depends on token.ts for JWT refresh handling."
DAY = timedelta(days=1)


def stated(text: str) -> set[tuple[str, str, str, bool]]:
    return {
        (f.source.name, f.target.name, f.relation, f.negated)
        for f in relation_extraction.extract(text)[1]
    }


def test_the_rules_read_denials() -> None:
    assert stated("auth.ts no longer depends on token.ts.") == {
        ("auth.ts", "token.ts", "depends_on", True)
    }
    assert stated("Alice Smith stopped using PostgreSQL") == {
        ("Alice Smith", "PostgreSQL", "uses", True)
    }
    assert ("Billing", "Redis", "depends_on", True) in stated(
        "The Billing service doesn't depend on Redis anymore."
    )
    assert stated("auth.ts now uses jwt.ts instead of token.ts.") == {
        ("auth.ts", "jwt.ts", "uses", False),
        ("auth.ts", "token.ts", "uses", True),
        ("jwt.ts", "token.ts", "alternative_to", False),
    }
    assert stated("auth.ts depends on token.ts, not session.py") == {
        ("auth.ts", "token.ts", "depends_on", False),
        ("auth.ts", "session.py", "depends_on", True),
    }
    # a denial with no relation words states nothing (it used to read as related_to)
    assert stated("Alice Smith is not Bob Jones") == set()
    assert stated(AUTH) == {
        ("auth.ts", "token.ts", "depends_on", False),
        ("token.ts", "JWT", "related_to", False),
    }


def depends_on() -> list[Edge]:
    with session_scope() as s:
        return list(
            s.scalars(select(Edge).where(Edge.relation == "depends_on").order_by(Edge.id)).all()
        )


def facts(**extra: Any) -> list[str]:
    return [f["fact"] for f in op("build_context", entity_names=["auth.ts"], **extra)["facts"]]


def test_a_denying_episode_closes_the_edge_at_its_reference_time(embedder: Any) -> None:
    week_ago = datetime.now(UTC) - 7 * DAY
    op("add_episode", content=AUTH, reference_time=week_ago.isoformat())
    # an episode older than the edge does not undo it
    older = op("add_episode", content="auth.ts does not depend on token.ts yet.",
               reference_time=(week_ago - DAY).isoformat())  # fmt: skip
    assert older["relations_closed"] == [] and older["relations"] == []
    assert [e.valid_to for e in depends_on()] == [None]

    denial = "auth.ts no longer depends on token.ts."
    then = datetime.now(UTC) - DAY
    out = op("add_episode", content=denial, reference_time=then.isoformat())
    assert out["relations"] == []
    assert out["relations_closed"] == [
        {"source": "auth.ts", "target": "token.ts", "relation_type": "depends_on", "fact": denial}
    ]
    [edge] = depends_on()  # closed, not deleted, and no denying edge written
    assert edge.valid_to == then and edge.expired_at is not None and edge.context == AUTH
    assert AUTH not in facts()
    assert AUTH in facts(as_of=(then - DAY).isoformat())
    found = op("search_edges", query="what does auth.ts depend on", num_results=5)["edges"]
    assert all(e["relation_type"] != "depends_on" for e in found)
    # saying it again finds nothing left to close
    assert op("add_episode", content=denial)["relations_closed"] == []
    # and stating it anew opens a new version; the closed one stays
    op("add_episode", content=AUTH)
    assert [e.valid_to is None for e in depends_on()] == [False, True]


def test_instead_of_replaces_one_edge_with_another(embedder: Any) -> None:
    op("add_episode", content="auth.ts uses token.ts for sessions.",
       reference_time=(datetime.now(UTC) - 3 * DAY).isoformat())  # fmt: skip
    out = op("add_episode", content="auth.ts now uses jwt.ts instead of token.ts.")
    assert [(r["source"], r["target"]) for r in out["relations_closed"]] == [
        ("auth.ts", "token.ts")
    ]
    assert ("auth.ts", "jwt.ts", "uses") in {
        (r["source"], r["target"], r["relation_type"]) for r in out["relations"]
    }
    walk = op("query_graph", query="auth.ts", depth=1, max_results=10)
    assert "auth.ts→jwt.ts" in walk["links"] and "auth.ts→token.ts" not in walk["links"]
    before = (datetime.now(UTC) - DAY).isoformat()
    earlier = op("query_graph", query="auth.ts", depth=1, max_results=10, as_of=before)
    assert "auth.ts→token.ts" in earlier["links"] and "auth.ts→jwt.ts" not in earlier["links"]


def test_an_episode_older_than_a_denial_does_not_reopen_the_relation(embedder: Any) -> None:
    """Episodes arrive out of order: a statement older than the denial that closed its edge
    wrote a new live edge, so today's graph said again what the newest episode denied."""
    now = datetime.now(UTC)
    op("add_episode", content=AUTH, reference_time=(now - 10 * DAY).isoformat())
    denied = now - 2 * DAY
    op("add_episode", content="auth.ts no longer depends on token.ts.",
       reference_time=denied.isoformat())  # fmt: skip
    # stated within the period the closed edge holds: nothing new
    out = op("add_episode", content=AUTH, reference_time=(now - 5 * DAY).isoformat())
    assert ("auth.ts", "token.ts") in {(r["source"], r["target"]) for r in out["relations"]}
    assert [(e.valid_to, e.context) for e in depends_on()] == [(denied, AUTH)]
    # stated before it: an edge up to where the known period begins, closed
    earliest = now - 20 * DAY
    op("add_episode", content=AUTH, reference_time=earliest.isoformat())
    periods = sorted((e.valid_from, e.valid_to) for e in depends_on())
    assert periods == [(earliest, now - 10 * DAY), (now - 10 * DAY, denied)]
    assert AUTH not in facts()  # the denial is still the last word
    assert AUTH in facts(as_of=(now - 15 * DAY).isoformat())
    assert AUTH in facts(as_of=(now - 3 * DAY).isoformat())


def test_a_denial_dated_inside_a_closed_period_keeps_the_later_denial(embedder: Any) -> None:
    """Out-of-order denials: shortening the closed period to an earlier denial lost the later
    one (its end was the only record of it), so a statement dated between the two then made
    the relation live again although the newest word denied it. The closed period stays."""
    now = datetime.now(UTC)
    denial = "auth.ts no longer depends on token.ts."
    op("add_episode", content=AUTH, reference_time=(now - 10 * DAY).isoformat())
    op("add_episode", content=denial, reference_time=(now - 2 * DAY).isoformat())
    op("add_episode", content=denial, reference_time=(now - 6 * DAY).isoformat())
    op("add_episode", content=AUTH, reference_time=(now - 4 * DAY).isoformat())
    assert [(e.valid_from, e.valid_to) for e in depends_on()] == [(now - 10 * DAY, now - 2 * DAY)]
    assert AUTH not in facts()  # the denial of two days ago is still the last word


def test_an_episode_older_than_a_live_edge_dates_the_relation_back(embedder: Any) -> None:
    """A relation stated before the live edge of its triple began (episodes arrive out of
    order) was answered as extracted, but wrote nothing: the graph as of then did not know
    it. It gets the period up to where the live edge begins, as before a closed one."""
    now = datetime.now(UTC)
    op("add_episode", content=AUTH, reference_time=(now - 10 * DAY).isoformat())
    out = op("add_episode", content=AUTH, reference_time=(now - 20 * DAY).isoformat())
    assert ("auth.ts", "token.ts") in {(r["source"], r["target"]) for r in out["relations"]}
    periods = sorted((e.valid_from, e.valid_to) for e in depends_on())
    assert periods == [(now - 20 * DAY, now - 10 * DAY), (now - 10 * DAY, None)]
    assert AUTH in facts(as_of=(now - 15 * DAY).isoformat())
    assert AUTH not in facts(as_of=(now - 25 * DAY).isoformat())
    # stated again within either period: nothing new
    op("add_episode", content=AUTH, reference_time=(now - 15 * DAY).isoformat())
    op("add_episode", content=AUTH, reference_time=(now - 5 * DAY).isoformat())
    assert len(depends_on()) == 2
