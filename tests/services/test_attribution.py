"""Attribution of wrong answers (which stage lost the expected memory), the statistics over N
days, monitoring alerts, and `why` on a real traced recall."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import select, update

from memsys import runner
from memsys.config import get_settings
from memsys.db import session_scope
from memsys.errors import InvalidInput, NotFound
from memsys.models import QueryTrace
from memsys.schemas import MemoryForgetIn, MemoryRecallIn
from memsys.schemas.debug import TraceFeedbackIn, TraceFeedbackOut, TraceIn, TraceWhyIn, TraceWhyOut
from memsys.schemas.debug_replay import AlertsIn, AlertsOut, ErrorAttributionIn
from memsys.services import debug, debug_attribution, memories
from tests.factories import store


def recall(query: str, **fields: Any) -> str:
    return runner.execute(memories.recall, MemoryRecallIn, {"query": query, **fields}).trace_id


def judge(trace_id: str, verdict: str = "wrong", **fields: Any) -> TraceFeedbackOut:
    data = {"trace_id": trace_id, "verdict": verdict, **fields}
    return runner.execute(debug.feedback, TraceFeedbackIn, data)


def why(trace_id: str, memory_id: str) -> TraceWhyOut:
    return runner.execute(debug.why, TraceWhyIn, {"trace_id": trace_id, "memory_id": memory_id})


def alerts(days: int = 1) -> AlertsOut:
    return runner.execute(debug_attribution.monitoring_alerts, AlertsIn, {"days": days})


@pytest.fixture
def ids(embedder: Any) -> dict[str, str]:
    return {
        "nightly": store("Backups run nightly at 02:00 UTC", memory_type="fact").id,
        "kept": store("Backups are kept for 30 days in the eu-west bucket", memory_type="fact").id,
        "pref": store("I like backups verified by a restore drill", memory_type="preference").id,
        "plant": store("The office plant needs water on Mondays").id,
        "home": store("Home backups go to the NAS in the attic", namespace="home").id,
    }


def test_why_follows_a_memory_through_the_stages(ids: dict[str, str]) -> None:
    trace_id = recall("when do backups run", n_results=1)
    returned = why(trace_id, ids["nightly"])
    assert returned.stage == "returned" and returned.returned_rank == 1
    assert returned.channels["dense"]["rank"] is not None and returned.fused_rank == 1
    cut = why(trace_id, ids["kept"])
    assert cut.stage == "fusion" and cut.returned_rank is None
    assert cut.fused_rank is not None and cut.fused_rank > 1
    assert f"fused rank {cut.fused_rank}" in cut.reason
    assert cut.channels["dense"]["rank"] >= 1 and cut.channels["dense"]["score"] > 0
    elsewhere = why(recall("backups", namespace="global"), ids["home"])
    assert elsewhere.stage == "scope" and "namespace home" in elsewhere.reason
    unknown = why(trace_id, "mem_0000000000000000")
    assert unknown.stage == "scope" and unknown.memory is None


def test_a_ranking_error_names_where_the_memory_was_lost(ids: dict[str, str]) -> None:
    trace_id = recall("when do backups run", n_results=1)
    judged = judge(trace_id, expected_ids=[ids["kept"]], note="wanted the retention")
    assert (judged.error_type, judged.error_subtype) == ("context_bug", "retrieval_ranking_error")
    assert judged.where_lost[ids["kept"]]["stage"] == "fusion"
    assert judged.attribution == {ids["kept"]: "not returned"}
    with session_scope() as s:  # the trace carries its attribution
        row = debug.find(s, trace_id)
        assert (row.error_type, row.error_subtype) == ("context_bug", "retrieval_ranking_error")


def test_a_memory_the_query_router_never_searched_for_is_the_wrong_store(
    ids: dict[str, str],
) -> None:
    """memory_query routed "what editor do I use" to the preferences (kv) alone and ran no
    retrieval; a memory the answer needed was then called a ranking error ("no channel had
    it in its candidate pool"), though no store holding memories was queried (S004's
    wrong_store_queried)."""
    from memsys.schemas.query import QueryIn
    from memsys.services import query
    from tests.factories import set_preference

    set_preference("editor", "helix")
    noted = store("I switched my editor to neovim last week", memory_type="fact").id
    asked = runner.execute(query.query, QueryIn, {"query": "what editor do I use"})
    shown = runner.execute(debug.trace, TraceIn, {"trace_id": asked.query_id})
    assert shown.stores_queried == ["kv"]
    judged = judge(asked.query_id, expected_ids=[noted])
    assert (judged.error_type, judged.error_subtype) == ("context_bug", "wrong_store_queried")
    assert "kv" in (judged.reason or "")


def test_wrong_store_wrong_filter_and_lifecycle(ids: dict[str, str]) -> None:
    in_global = recall("backups", namespace="global")
    judged = judge(in_global, expected_ids=[ids["home"]])
    assert judged.error_subtype == "wrong_store_queried" and "home" in (judged.reason or "")

    facts_only = recall("backups", memory_type="fact")
    judged = judge(facts_only, expected_ids=[ids["pref"]])
    assert judged.error_subtype == "wrong_lifecycle_filter"
    assert "memory_type=fact" in (judged.reason or "")

    runner.execute(memories.forget, MemoryForgetIn, {"memory_id": ids["plant"]})
    after_forget = recall("office plant")
    judged = judge(after_forget, expected_ids=[ids["plant"]])
    assert judged.error_subtype == "wrong_lifecycle_filter" and "closed" in (judged.reason or "")


def test_a_query_as_of_the_past_is_judged_by_the_rows_valid_then(ids: dict[str, str]) -> None:
    """A memory forgotten after the time a query asked for (as_of) was in its view: `why`
    must not blame the lifecycle filter for it."""
    from datetime import UTC, datetime

    from memsys.schemas.query import QueryIn
    from memsys.services import query as query_service

    then = datetime.now(UTC).isoformat()
    runner.execute(memories.forget, MemoryForgetIn, {"memory_id": ids["plant"]})
    asked = {"query": "when does the office plant need water", "as_of": then}
    trace_id = runner.execute(query_service.query, QueryIn, asked).query_id
    found = why(trace_id, ids["plant"])
    assert found.stage != "scope" and "closed" not in found.reason
    assert judge(trace_id, expected_ids=[ids["plant"]]).error_subtype != "wrong_lifecycle_filter"


def test_a_memory_stored_after_the_query_is_not_said_to_have_been_returned(
    ids: dict[str, str],
) -> None:
    """The reason read "every expected memory was returned: the context was right" beside an
    attribution of "not returned" for a memory stored after the call ran."""
    trace_id = recall("when do backups run", n_results=1)
    later = store("Backups also run at noon on Fridays", memory_type="fact").id
    judged = judge(trace_id, expected_ids=[later])
    assert judged.attribution == {later: "not returned"}
    assert (judged.error_type, judged.error_subtype) == ("model_bug", None)
    assert judged.reason is not None and "was returned" not in judged.reason
    assert f"{later}: it was stored after the query ran" in judged.reason


def test_model_bug_system_error_and_right(ids: dict[str, str]) -> None:
    trace_id = recall("when do backups run", n_results=2)
    judged = judge(trace_id, expected_ids=[ids["nightly"]])
    assert (judged.error_type, judged.error_subtype) == ("model_bug", None)
    assert judge(trace_id, "right").error_type is None  # judged again: right
    with session_scope() as s:
        s.execute(
            update(QueryTrace)
            .where(QueryTrace.id == trace_id)
            .values(error="QueryCanceled: timeout", error_type="system_error")
        )
    assert judge(trace_id, expected_ids=[ids["kept"]]).error_type == "system_error"
    assert judge(trace_id, "right").error_type == "system_error"  # a failed call stays failed


def test_a_mistyped_expected_id_is_refused_not_counted_as_a_model_bug(
    ids: dict[str, str],
) -> None:
    trace_id = recall("when do backups run", n_results=1)
    with pytest.raises(NotFound, match="No memory has the expected id mem_nonexistent_zz"):
        judge(trace_id, expected_ids=[ids["kept"], "mem_nonexistent_zz"])
    with session_scope() as s:  # nothing recorded
        assert s.scalar(select(QueryTrace.error_type).where(QueryTrace.id == trace_id)) is None
    forgotten = ids["plant"]  # a memory forgotten since is still one that existed
    runner.execute(memories.forget, MemoryForgetIn, {"memory_id": forgotten})
    assert judge(trace_id, expected_ids=[forgotten]).attribution == {forgotten: "not returned"}


def test_statistics_over_days(ids: dict[str, str]) -> None:
    judge(recall("when do backups run", n_results=1), expected_ids=[ids["kept"]])
    judge(recall("backups", namespace="global"), expected_ids=[ids["home"]])
    judge(recall("when do backups run", n_results=2), expected_ids=[ids["nightly"]])
    recall("office plant")
    stats = runner.execute(debug_attribution.error_attribution, ErrorAttributionIn, {"days": 7})
    assert stats.total_queries == 4 and stats.failed_queries == 3 and stats.judged_queries == 3
    assert stats.failure_breakdown == {"context_bugs": 2, "model_bugs": 1, "system_errors": 0}
    assert stats.context_bug_breakdown["wrong_store_queried"] == 1
    assert stats.context_bug_breakdown["retrieval_ranking_error"] == 1
    assert stats.context_bug_rate == pytest.approx(2 / 3, abs=1e-3)
    with pytest.raises(InvalidInput, match="days must be between 1 and 365"):
        runner.execute(debug_attribution.error_attribution, ErrorAttributionIn, {"days": 0})


def test_alerts_fire_past_their_thresholds(ids: dict[str, str], monkeypatch: Any) -> None:
    quiet = recall("when do backups run", n_results=1)
    assert alerts().alerts == []  # one fast, unjudged query: nothing to report
    judge(quiet, expected_ids=[ids["kept"]])  # a context bug: 1 of 1 failures
    with session_scope() as s:
        s.execute(
            update(QueryTrace)
            .where(QueryTrace.id == quiet)
            .values(verification={"passed": False}, mode_detected="execution")
        )
    judge(quiet, expected_ids=[ids["kept"]], expected_mode="planning")
    monkeypatch.setenv("MEMSYS_ALERT_LATENCY_P95_MS", "0.001")
    get_settings.cache_clear()
    try:
        fired = alerts()
    finally:
        monkeypatch.delenv("MEMSYS_ALERT_LATENCY_P95_MS")
        get_settings.cache_clear()
    kinds = {a.type: a for a in fired.alerts}
    assert set(kinds) == {
        "latency_high",
        "verification_failure_high",
        "mode_detection_low",
        "context_bug_rate_high",
    }
    assert kinds["verification_failure_high"].severity == "critical"
    assert fired.metrics["verification_failure_rate"] == 1.0
    assert fired.metrics["mode_accuracy"] == 0.0
    assert fired.metrics["context_bug_rate"] == 1.0
    assert alerts().alerts and "latency_high" not in {a.type for a in alerts().alerts}


def test_expected_ids_are_read_as_why_reads_an_id(ids: dict[str, str]) -> None:
    """`why` trims the memory id it is given; feedback refused the same id pasted with a
    space ("No memory has the expected id  mem_… "), and an id given twice was recorded
    twice in the feedback's expected ids."""
    trace_id = recall("when do backups run", n_results=1)
    pasted = f" {ids['nightly']}\t"
    assert why(trace_id, pasted).stage == "returned"
    judged = judge(trace_id, expected_ids=[pasted, ids["nightly"], ids["kept"]])
    assert list(judged.attribution) == [ids["nightly"], ids["kept"]]
    shown = runner.execute(debug.trace, TraceIn, {"trace_id": trace_id})
    assert shown.feedback[-1].expected_ids == [ids["nightly"], ids["kept"]]


def test_a_preference_a_memory_query_needed_can_be_named_as_expected(
    ids: dict[str, str],
) -> None:
    """memory_query answers with preferences too (items `pref:<namespace>:<key>`), yet
    feedback refused one the answer left out ("No memory has the expected id
    pref:global:editor") and `why` said "no such memory"."""
    from memsys.schemas.query import QueryIn
    from memsys.services import query
    from tests.factories import set_preference

    set_preference("editor", "helix")
    set_preference("web:theme", "dark", namespace="project:web")  # a ':' in both
    asked = runner.execute(query.query, QueryIn, {"query": "when do backups run"})
    judged = judge(asked.query_id, expected_ids=["pref:global:editor"])
    assert (judged.error_type, judged.error_subtype) == ("context_bug", "wrong_store_queried")
    assert "preference" in (judged.reason or "") and "vector" in (judged.reason or "")
    shown = why(asked.query_id, "pref:project:web:web:theme")
    assert shown.stage == "scope" and shown.memory is not None
    assert shown.memory["namespace"] == "project:web"
    with pytest.raises(NotFound, match="pref:global:nope"):
        judge(asked.query_id, expected_ids=["pref:global:nope"])


def test_a_preference_the_kv_store_found_and_the_budget_cut_is_named_so(embedder) -> None:  # type: ignore[no-untyped-def]
    """The kv store found the preference and the token budget left it out, yet `why` said
    "no channel had it in its candidate pool", as if nothing had found it."""
    from memsys.schemas.query import QueryIn
    from memsys.services import query
    from tests.factories import set_preference

    set_preference("editor", "Neovim with the lazy.nvim plugin manager and a dark theme")
    set_preference("shell", "zsh")
    cut = runner.execute(query.query, QueryIn, {"query": "Which editor do I use?", "max_tokens": 5})
    assert cut.core_chunks == [] and cut.left_out == 1
    shown = why(cut.query_id, "pref:global:editor")
    assert shown.stage == "output" and "the kv store found it" in shown.reason
    judged = judge(cut.query_id, expected_ids=["pref:global:editor"])
    assert judged.error_subtype == "retrieval_ranking_error"
    assert "the kv store found it" in (judged.reason or "")
    # one the kv store did not find for the question is named so, not as a budget cut
    other = why(cut.query_id, "pref:global:shell")
    assert other.stage == "retrieval" and "the kv store did not find it" in other.reason
