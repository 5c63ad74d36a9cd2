"""Deterministic replay: an unchanged database reproduces a trace exactly, scores included;
after edits, as-of replay still does, and replay-now shows what changed and where."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import text, update

from memsys import runner
from memsys.db import session_scope
from memsys.embeddings import _queries
from memsys.errors import InvalidInput, NotFound
from memsys.models import QueryTrace
from memsys.operations import BY_NAME
from memsys.retrieval import fusion
from memsys.schemas import MemoryContextIn, MemoryForgetIn, MemoryRecallIn
from memsys.schemas.debug import TraceIn
from memsys.schemas.debug_replay import ReplayIn, ReplayOut
from memsys.schemas.learning import MemoryOutcomeIn
from memsys.services import context, debug, debug_replay, learning, memories
from tests.factories import store

FACTS = [
    "Backups run nightly at 02:00 UTC",
    "Backups are kept for 30 days in the eu-west bucket",
    "The office plant needs water on Mondays",
    "Restore drills happen every quarter from the backup bucket",
    "Deploys go out on Tuesdays after the standup",
    "The VPN certificate expires in March",
]


def recall(query: str, **fields: Any) -> str:
    out = runner.execute(memories.recall, MemoryRecallIn, {"query": query, **fields})
    return out.trace_id


def replay(trace_id: str, now: bool = False) -> ReplayOut:
    return runner.execute(debug_replay.replay, ReplayIn, {"trace_id": trace_id, "now": now})


def shown(trace_id: str) -> Any:
    return runner.execute(debug.trace, TraceIn, {"trace_id": trace_id})


def clear_query_cache() -> None:
    _queries.clear()


@pytest.fixture
def stored(embedder: Any) -> list[str]:
    return [store(text, memory_type="fact").id for text in FACTS]


def test_replay_on_an_unchanged_database_is_exact(stored: list[str]) -> None:
    trace_id = recall("when do backups run", n_results=3)
    original = shown(trace_id)
    with session_scope() as s:
        accessed = accesses(s)
    assert accessed[0] == 3  # the recall's own three
    clear_query_cache()  # the replay embeds the query again: the vector must be the same
    again = replay(trace_id)
    assert again.identical and again.changed_stage is None and again.diff == {}
    assert again.as_of == original.created_at and again.fusion_version == fusion.FUSION_VERSION
    # Every channel's ids, ranks and scores, the fused candidates and the output, to the digit.
    for name in ("dense", "lexical", "graph", "neighbours"):
        assert again.replay.channels[name] == original.channels[name], name
    assert original.channels["dense"] and original.channels["lexical"]
    assert again.replay.candidates == original.candidates
    assert again.replay.retrieved == original.retrieved
    assert again.replay.fusion["embedding"] == original.fusion["embedding"]
    # The replay wrote nothing: still one trace, no access counted.
    with session_scope() as s:
        assert len(s.query(QueryTrace).all()) == 1
        assert accesses(s) == accessed


def accesses(session: Any) -> tuple[int, int]:
    """Rows of the access log, and the sum of the access counters."""
    return (
        session.scalar(text("SELECT count(*) FROM memory_access")),
        session.scalar(text("SELECT coalesce(sum(access_count), 0) FROM chunk")),
    )


def test_the_tools_own_cut_is_replayed_too(stored: list[str]) -> None:
    out = BY_NAME["search_with_budget"].run({"query": "backup bucket", "max_tokens": 25})
    again = replay(out.trace_id)  # type: ignore[attr-defined]
    assert again.identical
    assert again.replay.output == {"max_tokens": 25, "tokens_used": out.tokens_used}  # type: ignore[attr-defined]


def test_after_edits_as_of_replays_the_past_and_now_shows_the_change(stored: list[str]) -> None:
    trace_id = recall("when do backups run", n_results=2)
    first = shown(trace_id).retrieved[0]["id"]
    assert first == stored[0]
    runner.execute(memories.forget, MemoryForgetIn, {"memory_id": first})
    newer = store("Backups now run every hour, on the hour", memory_type="fact").id

    past = replay(trace_id)
    assert past.identical, (past.changed_stage, past.diff)  # the memories as they were then

    today = replay(trace_id, now=True)
    assert not today.identical and today.as_of is None
    assert today.changed_stage == "dense"
    assert first in [r["id"] for r in today.diff["dense"]["removed"]]
    assert newer in [r["id"] for r in today.diff["dense"]["added"]]
    assert first in [r["id"] for r in today.diff["output"]["removed"]]
    assert today.replay.retrieved[0]["id"] == newer


def test_a_context_replays_with_the_confidence_its_memories_had_then(
    stored: list[str],
) -> None:
    """memory_context files a memory under Golden Rules by its confidence: a replay as of
    the trace read today's, so a failed outcome since moved the memory to another section
    and the replay differed from a trace of an unchanged database."""
    restore = stored[3]
    for _ in range(6):  # 0.3 → 0.9: a golden rule
        runner.execute(learning.outcome, MemoryOutcomeIn, {"memory_id": restore, "success": True})
    fields = {"query": "backup bucket", "token_budget": 200}
    out = runner.execute(context.context, MemoryContextIn, fields)
    assert out.memory_ids[0] == restore and out.golden_rule_count == 1
    runner.execute(learning.outcome, MemoryOutcomeIn, {"memory_id": restore, "success": False})
    again = replay(out.trace_id)
    assert again.identical, (again.changed_stage, again.diff)
    assert not replay(out.trace_id, now=True).identical  # today it is a plain fact


def test_a_purge_shows_in_the_as_of_replay(stored: list[str]) -> None:
    trace_id = recall("office plant", n_results=2)
    plant = stored[2]
    assert shown(trace_id).retrieved[0]["id"] == plant
    runner.execute(memories.forget, MemoryForgetIn, {"memory_id": plant, "purge": True})
    again = replay(trace_id)
    assert not again.identical and again.changed_stage == "dense"
    assert [r["id"] for r in again.diff["dense"]["removed"]] == [plant]
    assert plant in [r["id"] for r in again.diff["output"]["removed"]]


def test_unknown_fusion_versions_are_refused_not_guessed(stored: list[str]) -> None:
    trace_id = recall("backups")
    with session_scope() as s:
        row = debug.find(s, trace_id)
        s.execute(
            update(QueryTrace)
            .where(QueryTrace.id == trace_id)
            .values(fusion={**row.fusion, "version": "zfuse-0"})
        )
    with pytest.raises(InvalidInput, match="zfuse-0, whose weights this memsys no longer knows"):
        replay(trace_id)
    assert replay(trace_id, now=True).fusion_version == fusion.FUSION_VERSION  # today works


def test_changed_weights_under_a_known_version_are_refused(stored: list[str]) -> None:
    trace_id = recall("backups")
    with session_scope() as s:
        row = debug.find(s, trace_id)
        s.execute(
            update(QueryTrace)
            .where(QueryTrace.id == trace_id)
            .values(fusion={**row.fusion, "lexical": 0.25})
        )
    with pytest.raises(InvalidInput, match="other values for lexical"):
        replay(trace_id)


def test_unknown_and_pre_debugger_traces(stored: list[str]) -> None:
    with pytest.raises(NotFound, match="Trace not found: qry_nope"):
        replay("qry_nope")
    trace_id = recall("backups")
    with session_scope() as s:
        s.execute(update(QueryTrace).where(QueryTrace.id == trace_id).values(fusion={}))
    with pytest.raises(InvalidInput, match="does not hold the call it traced"):
        replay(trace_id)


def test_a_query_replays_the_past_it_asked_for_and_its_preferences_then(embedder: Any) -> None:
    """memory_query with its own as_of replays as of that time (not the trace's), and its
    preferences are read as of the replayed time too."""
    from datetime import UTC, datetime

    from memsys.schemas.query import QueryIn
    from memsys.services import query as query_service
    from tests.factories import set_preference

    def ask(**fields: Any) -> str:
        return runner.execute(query_service.query, QueryIn, fields).query_id

    store("The API gateway timeout is 30 seconds", namespace="project:t")
    then = datetime.now(UTC).isoformat()
    store("The API gateway timeout was raised to 60 seconds for uploads", namespace="project:t")
    past = ask(query="what is the API gateway timeout", namespace="project:t", as_of=then)
    again = replay(past)
    assert again.identical, again.diff
    assert again.as_of is not None and again.as_of.isoformat() == then
    assert replay(past, now=True).identical  # the past it asked for has not changed

    set_preference("editor", "helix")
    before = ask(query="what's my editor?")
    set_preference("editor", "vim")
    replayed = replay(before)
    assert replayed.identical, replayed.diff
    assert "helix" in replayed.replay.output["text"]


def test_a_query_about_the_past_week_replays_exactly(embedder: Any) -> None:
    """ "the past week" runs back from the call's own time, which its trace records: it ran
    from the clock, and the replay (from the trace's time) differed by microseconds."""
    from memsys.schemas.query import QueryIn
    from memsys.services import query as query_service

    store("We deployed the billing service on Monday", namespace="project:w")
    asked = {"query": "what did we deploy in the past week", "namespace": "project:w"}
    trace_id = runner.execute(query_service.query, QueryIn, asked).query_id
    again = replay(trace_id)
    assert again.identical, again.diff
