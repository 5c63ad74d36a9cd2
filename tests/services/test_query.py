"""memory_query: routing to preferences and entities, verification, the curated core within
the budget, the trace it writes, and refusals of bad input — on MCP, REST and the CLI."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import func, select

from memsys import runner
from memsys.api.app import create_app
from memsys.db import session_scope
from memsys.errors import InvalidInput
from memsys.models import QueryTrace
from memsys.operations import BY_NAME
from memsys.schemas.query import QueryIn, QueryOut
from memsys.services import query as query_service
from memsys.tokens import count_tokens
from tests.cli.helpers import run, run_json
from tests.factories import set_preference, store


def ask(text: str, **fields: Any) -> QueryOut:
    return runner.execute(query_service.query, QueryIn, {"query": text, **fields})


def returned_text(out: QueryOut) -> str:
    """Everything the answer hands back that the budget covers."""
    return "\n".join([out.output] + [c.snippet for c in out.core_chunks + out.extended_chunks])


DEPLOY_NOTES = [
    "Deploys go out on Tuesdays after the release review",
    "We deploy on Tuesday mornings once the release review is done",
    "Release review happens Tuesday, then the deploy goes out",
    "Production deploys are scheduled for Tuesdays following review",
    "The staging cluster runs on three spot instances",
    "Our CI pipeline caches wheels between runs",
]


@pytest.fixture
def notes(embedder) -> list[str]:  # type: ignore[no-untyped-def]
    return [store(text, namespace="project:ops", memory_type="fact").id for text in DEPLOY_NOTES]


def test_kv_question_is_answered_from_preferences_and_verified(embedder) -> None:  # type: ignore[no-untyped-def]
    set_preference("coding_style", "Python with type hints, functions under 60 lines")
    store("The team reviews every pull request within a day", memory_type="fact")
    out = ask("What's my coding style?", mode="execution")
    assert out.stores_queried == ["kv"]
    top = out.core_chunks[0]
    assert top.source == "preference" and top.ground_truth
    assert "type hints" in out.output
    assert out.verification is not None and out.verification.verified
    assert out.verification.method == "ground_truth"
    assert out.verification.ground_truth_match == top.id


def test_verification_speaks_of_the_answer_the_budget_let_through(embedder) -> None:  # type: ignore[no-untyped-def]
    # The ground truth too large for the budget is not in the answer: it verifies nothing.
    set_preference("editor", "Neovim with the lazy.nvim plugin manager and a dark theme")
    out = ask("Which editor do I use?", mode="execution", max_tokens=5)
    assert out.core_chunks == [] and out.output == ""
    assert out.verification is not None and not out.verification.verified
    assert out.verification.method == "none" and out.verification.ground_truth_match is None
    assert "the budget left out pref:global:editor" in out.verification.reason
    # the terminal says the budget cut it, not that memory holds nothing
    shown = run("query", "Which editor do I use?", "--max-tokens", "5")
    assert shown.exit_code == 0 and "Nothing found" not in shown.stdout
    assert "Nothing fits in 5 tokens: 1 left out by the budget." in shown.stdout
    rule = store(
        "Never push directly to main: open a pull request, wait for a review, then merge it",
        memory_type="golden_rule",
        namespace="project:gt",
    )
    store("Push after review", namespace="project:gt")
    small = ask("Never push to main?", namespace="project:gt", mode="execution", max_tokens=12)
    shown = [c.id for c in small.core_chunks + small.extended_chunks]
    assert rule.id not in shown and shown
    assert small.verification is not None and not small.verification.verified
    roomy = ask("Never push to main?", namespace="project:gt", mode="execution")
    assert roomy.verification is not None and roomy.verification.ground_truth_match == rule.id


def test_a_namespace_preference_hides_the_global_one_of_its_key(embedder) -> None:  # type: ignore[no-untyped-def]
    """Both values of one key were handed back as ground truth ("theme: solarized" and
    "theme: light"): the namespace's own setting is the answer there."""
    set_preference("theme", "light")
    set_preference("editor", "helix")
    set_preference("theme", "dark", namespace="project:p")
    before = datetime.now(UTC)
    set_preference("theme", "solarized", namespace="project:p")
    out = ask("what's my theme?", namespace="project:p")
    assert [c.id for c in out.core_chunks] == ["pref:project:p:theme"]
    assert out.output == "theme: solarized"
    assert ask("what's my theme?").output == "theme: light"
    # a key the namespace does not set still answers from global; as of a past time, the
    # namespace's value of then
    assert ask("what's my editor?", namespace="project:p").output == "editor: helix"
    assert ask("what's my theme?", namespace="project:p", as_of=before).output == "theme: dark"


def test_a_question_about_the_user_in_the_third_person_is_answered_from_preferences(  # type: ignore[no-untyped-def]
    embedder,
) -> None:
    set_preference("editor", "helix")
    store("The team reviews every pull request within a day", memory_type="fact")
    out = ask("Which editor does the user use?")
    assert out.stores_queried == ["kv"] and out.output == "editor: helix"
    assert out.core_chunks[0].ground_truth


def test_kv_question_with_no_matching_preference_falls_back_to_retrieval(notes) -> None:  # type: ignore[no-untyped-def]
    out = ask("what's my deploy day?", namespace="project:ops")
    assert out.stores_queried == ["kv", "vector"]
    assert any("fell back" in n for n in out.routing.notes)
    assert "Tuesday" in out.core_chunks[0].snippet


def test_a_preference_key_named_in_part_does_not_answer_alone(embedder) -> None:  # type: ignore[no-untyped-def]
    set_preference("test_runner", "pytest")
    plan_id = store(
        "My test plan for the release: run the smoke suite, then the full regression on "
        "staging, then a manual check of checkout",
        memory_type="decision",
    ).id
    out = ask("what is my test plan for the release?", mode="execution")
    assert out.stores_queried == ["kv", "vector"]
    assert any("no exact match" in n for n in out.routing.notes)
    assert out.core_chunks[0].id == plan_id
    pref = next(c for c in out.core_chunks if c.source == "preference")
    assert not pref.ground_truth
    assert out.verification is not None and out.verification.method != "ground_truth"
    # the key named in full still answers alone, as ground truth
    whole = ask("which test runner do I use?", mode="execution")
    assert whole.stores_queried == ["kv"] and whole.core_chunks[0].ground_truth


def test_a_question_about_more_than_a_whole_key_does_not_answer_alone(embedder) -> None:  # type: ignore[no-untyped-def]
    set_preference("editor", "Neovim with LazyVim")
    font = store("My editor font size is 15 pt, JetBrains Mono", memory_type="preference").id
    out = ask("what is my editor font size?", mode="execution")
    assert out.stores_queried == ["kv", "vector"]
    assert out.core_chunks[0].id == font
    pref = next(c for c in out.core_chunks if c.source == "preference")
    assert not pref.ground_truth
    assert out.verification is not None and out.verification.method != "ground_truth"
    # asking for the key itself, in any of the usual ways, is still answered alone
    for question in ("what editor do I use?", "which is my preferred editor", "what's my editor?"):
        whole = ask(question, mode="execution")
        assert whole.stores_queried == ["kv"], question
        assert whole.core_chunks[0].ground_truth and "Neovim" in whole.output


@pytest.mark.parametrize(
    ("key", "question"),
    [
        ("editor", "what is my favorite editor?"),  # favourite's US spelling
        ("dark-mode", "do I use dark-mode?"),  # the key as it is written
        ("café_order", "what is my café order?"),  # a letter beyond ASCII
        ("editor", "what's my default editor?"),  # the router's own preference words
        ("theme", "what is my chosen theme?"),
    ],
)
def test_a_key_named_in_full_answers_alone_however_the_question_spells_it(  # type: ignore[no-untyped-def]
    embedder, key: str, question: str
) -> None:
    """The rule that a question asking more than a key does not answer alone read these as
    asking more: `favorite` was not among the asking words (`favourite` was), a hyphenated
    word was an extra lexeme (`dark-mod`), and a key's letters beyond ASCII were dropped
    from its words (`caf`) but not from the question's (`café`)."""
    set_preference(key, "the value asked for")
    out = ask(question, mode="execution")
    assert out.stores_queried == ["kv"], out.routing.notes
    assert out.core_chunks[0].ground_truth and "the value asked for" in out.output


def test_an_entity_type_in_the_question_does_not_hide_the_memories(embedder) -> None:  # type: ignore[no-untyped-def]
    from memsys.schemas.graph import CreateEntitiesIn
    from memsys.services import knowledge

    names = ["billing-service", "auth-service", "search-api", "mailer", "scheduler", "gateway"]
    entities = [{"name": n, "entityType": "service", "observations": []} for n in names]
    runner.execute(knowledge.create_entities, CreateEntitiesIn, {"entities": entities})
    cache = store("The search service keeps its hot queries in Redis").id
    out = ask("which services use Redis?")
    assert "vector" in out.stores_queried
    assert out.core_chunks[0].id == cache  # not behind six services the question did not name


def test_relational_question_lists_entities_by_type(embedder) -> None:  # type: ignore[no-untyped-def]
    from memsys.schemas.graph import CreateEntitiesIn
    from memsys.services import knowledge

    entities = [
        {"name": "Acme Corp", "entityType": "client", "observations": ["Pays net 30"]},
        {"name": "Globex", "entityType": "client", "observations": ["Renewal in June"]},
        {"name": "Billing dashboard", "entityType": "project", "observations": ["Built for Acme"]},
    ]
    runner.execute(knowledge.create_entities, CreateEntitiesIn, {"entities": entities})
    out = ask("List all clients")
    assert out.stores_queried == ["relational", "vector"]  # a type is no exact match
    listed = [c for c in out.core_chunks if c.source == "entity"]
    assert {c.snippet.split(" (")[0] for c in listed} == {"Acme Corp", "Globex"}

    # the observations they quote are not handed out a second time as memories
    assert not {"Pays net 30", "Renewal in June"} & {c.snippet for c in out.core_chunks}
    named = ask("who is Globex?")
    assert named.core_chunks[0].snippet.startswith("Globex (client); Renewal in June")
    # As of a time, the entities, observations and relations of that time.
    from memsys.schemas.graph import AddObservationsIn

    before_note = datetime.now(UTC)
    observed = [{"entityName": "Globex", "contents": ["Churn risk flagged"]}]
    runner.execute(knowledge.add_observations, AddObservationsIn, {"observations": observed})
    assert "Churn risk" in ask("who is Globex?").core_chunks[0].snippet
    then = ask("who is Globex?", as_of=before_note.isoformat())
    assert then.core_chunks[0].snippet == "Globex (client); Renewal in June"
    assert ask("List all clients", as_of=entities_made_before_them()).core_chunks == []


@pytest.mark.parametrize(
    ("question", "entity_type", "names"),
    [
        ("which companies do we work with?", "company", ["Initech", "Umbrella"]),
        ("list all people", "person", ["Ada", "Grace"]),
        ("list all entities", "entity", ["Thing one", "Thing two"]),
    ],
)
def test_a_type_asked_for_in_a_plural_not_ending_in_s_lists_its_entities(  # type: ignore[no-untyped-def]
    embedder, question: str, entity_type: str, names: list[str]
) -> None:
    """The router read "companies" and "people" as asking for entities of a type, but only
    the word less its "s" was compared with the types: no company or person was listed."""
    from memsys.schemas.graph import CreateEntitiesIn
    from memsys.services import knowledge

    entities = [{"name": n, "entityType": entity_type, "observations": []} for n in names]
    runner.execute(knowledge.create_entities, CreateEntitiesIn, {"entities": entities})
    out = ask(question)
    listed = [c for c in out.core_chunks if c.source == "entity"]
    assert {c.snippet.split(" (")[0] for c in listed} == set(names), out.core_chunks


def entities_made_before_them() -> str:
    from memsys.models import Entity

    with session_scope() as s:
        first = s.scalar(select(func.min(Entity.created_at)))
    assert first is not None
    return (first - timedelta(seconds=1)).isoformat()


def test_execution_mode_checks_top_three_agreement(notes) -> None:  # type: ignore[no-untyped-def]
    agreed = ask("when do deploys go out?", namespace="project:ops", mode="execution")
    v = agreed.verification
    assert v is not None and v.method == "agreement" and v.verified
    assert v.agreement is not None and v.agreement >= 0.6 and len(v.checked) == 3
    assert not any(c.ground_truth for c in agreed.core_chunks)
    loose = ask("spot instances wheels review", namespace="project:ops", mode="execution")
    assert loose.verification is not None and not loose.verification.verified
    assert "agreement" in loose.verification.reason
    planning = ask("when do deploys go out?", namespace="project:ops", mode="planning")
    assert planning.verification is None


def test_curated_core_and_extended_sizes_follow_the_mode(embedder) -> None:  # type: ignore[no-untyped-def]
    for i in range(45):
        store(
            f"Sprint note {i}: the search service handled ticket {i * 7} today",
            namespace="project:big",
        )
    sizes = {}
    for mode in ("execution", "planning", "brainstorming"):
        out = ask("search service tickets", namespace="project:big", mode=mode, max_tokens=200000)
        sizes[mode] = (len(out.core_chunks), len(out.extended_chunks))
    assert sizes == {"execution": (5, 15), "planning": (5, 25), "brainstorming": (5, 30)}
    wider = ask("search service tickets", namespace="project:big", top_k=8, max_tokens=200000)
    assert len(wider.core_chunks) == 8


def test_the_budget_covers_everything_returned(embedder) -> None:  # type: ignore[no-untyped-def]
    long = " ".join(f"The ingestion worker retried batch {i} after a timeout." for i in range(40))
    store(long, namespace="project:budget")
    for i in range(10):
        store(
            f"Ingestion worker note {i}: batches are retried three times",
            namespace="project:budget",
        )
    for budget in (30, 120, 600):
        out = ask("ingestion worker retries", namespace="project:budget", max_tokens=budget)
        assert out.tokens_used <= budget
        assert (
            count_tokens(out.output) + sum(c.tokens for c in out.core_chunks + out.extended_chunks)
            == out.tokens_used
        )
        assert all(len(c.snippet) <= 200 for c in out.core_chunks + out.extended_chunks)
        assert count_tokens(returned_text(out)) <= budget
    tight = ask("ingestion worker retries", namespace="project:budget", max_tokens=30)
    assert tight.left_out > 0


def test_the_trace_records_plan_mode_routing_and_verification(notes) -> None:  # type: ignore[no-untyped-def]
    out = ask("Why do we deploy after the release review?", namespace="project:ops")
    with session_scope() as s:
        trace = s.scalars(select(QueryTrace).where(QueryTrace.id == out.query_id)).one()
    assert trace.operation == "memory_query"
    assert trace.mode_detected == out.mode == "execution"
    assert trace.mode_confidence == out.mode_confidence
    assert trace.stores_queried == out.stores_queried == ["graph"]
    assert "graph" in (trace.routing_logic or "")
    assert trace.verification is not None and trace.verification["method"] in ("agreement", "none")
    assert trace.output is not None and trace.output["text"] == out.output
    assert [r["id"] for r in trace.retrieved] == [
        c.id for c in out.core_chunks + out.extended_chunks
    ]


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"query": "   "}, "Query cannot be empty"),
        ({"query": "?! …"}, "no words to route"),
        ({"query": "x", "mode": "dreaming"}, "Unknown mode"),
        ({"query": "x", "top_k": 0}, "top_k must be between 1 and 20"),
        ({"query": "x", "top_k": 21}, "top_k must be between 1 and 20"),
        ({"query": "x", "max_tokens": 0}, "max_tokens must be between 1"),
        ({"query": "x", "as_of": (datetime.now(UTC) + timedelta(days=1)).isoformat()}, "future"),
    ],
)
def test_bad_input_is_refused(fields: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidInput, match=message):
        runner.execute(query_service.query, QueryIn, fields)


def test_as_of_a_moment_ahead_is_a_clock_apart_not_the_future(embedder) -> None:  # type: ignore[no-untyped-def]
    """A client's clock a minute ahead of the server's: every other tool takes its as_of as
    now (CLOCK_SKEW); memory_query refused it."""
    store("The cache TTL is 30 seconds", namespace="project:skew")
    ahead = (datetime.now(UTC) + timedelta(minutes=1)).isoformat()
    assert ask("cache TTL", namespace="project:skew", as_of=ahead).core_chunks


def test_as_of_answers_from_the_past(embedder) -> None:  # type: ignore[no-untyped-def]
    before = datetime.now(UTC)
    store("The cache TTL is 30 seconds", namespace="project:past")
    assert ask("cache TTL", namespace="project:past").core_chunks
    assert ask("cache TTL", namespace="project:past", as_of=before.isoformat()).core_chunks == []


def test_every_front_end_answers_and_refuses(notes) -> None:  # type: ignore[no-untyped-def]
    from memsys.mcp.server import call

    op = BY_NAME["memory_query"]
    args = {"query": "when do deploys go out?", "namespace": "project:ops", "mode": "planning"}
    over_mcp = call(op, args)
    assert over_mcp["success"] is True
    with TestClient(create_app(background=False), base_url="http://127.0.0.1:8700") as client:
        over_rest = client.post("/v1/query", json=args).json()
        refused = client.post("/v1/query", json={"query": "x", "mode": "dreaming"})
    assert refused.status_code == 422 and "Unknown mode" in refused.json()["error"]
    over_cli = run_json("query", args["query"], "--namespace", "project:ops", "--mode", "planning")
    ids = [[c["id"] for c in r["core_chunks"]] for r in (over_mcp["data"], over_rest, over_cli)]
    assert ids[0] == ids[1] == ids[2] and ids[0]
    bad = call(op, {"query": "x", "top_k": 99})
    assert bad["success"] is False and "top_k" in bad["error"]
    shown = run("query", "when do deploys go out?", "--namespace", "project:ops")
    assert shown.exit_code == 0 and "mode execution" in shown.stdout and "core:" in shown.stdout
    assert run("query", "x", "--mode", "dreaming").exit_code == 2
