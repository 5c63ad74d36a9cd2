"""Leakage suite: with a scoped token, every operation aimed at another namespace (by name,
by id, or across all namespaces), over REST and over MCP on streamable HTTP. Nothing of the
other namespace may be read (no answer carries its content, ids or name), written or deleted
(its rows are byte-for-byte the same afterwards), and whatever the token wrote lies in its own
namespaces. PostgreSQL's row-level security is what holds this, not the services' filters.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest

from memsys.operations import BY_NAME, OPERATIONS
from tests.security.helpers import (
    ACME,
    BETA,
    SECRET,
    Answer,
    Tenants,
    mcp_calls,
    namespaces_in_use,
    rest_call,
    rows_of,
    run,
    token,
)

Z = "zebra launch codes"


def attacks(t: Tenants) -> list[tuple[str, dict[str, Any]]]:
    """Calls at beta's rows for every operation (several for most)."""
    beta_entity = {"name": "ZebraCorp", "entityType": "org", "observations": ["x"]}
    table: dict[str, list[dict[str, Any]]] = {
        "index_file": [
            {"file_path": t.beta_file, "namespace": BETA},
            {"file_path": t.beta_file},
        ],
        "index_directory": [{"dir_path": t.beta_dir, "namespace": BETA}],
        "delete_chunks": [{"ids": [t.beta_chunk, t.beta_memory]}],
        "delete_file": [
            {"source_file": t.beta_file, "namespace": BETA},
            {"source_file": t.beta_file},
        ],
        "clear_index": [{"confirm": True, "namespace": BETA}, {"confirm": True}],
        "get_index_stats": [{}],
        "search": [{"query": Z}, {"query": Z, "namespace": BETA}],
        "search_with_filters": [
            {"query": Z, "filters": {"namespace": BETA}},
            {"query": Z, "filters": {}},
        ],
        "search_with_budget": [
            {"query": Z, "max_tokens": 2000},
            {"query": Z, "max_tokens": 2000, "filters": {"namespace": BETA}},
        ],
        "memory_store": [{"content": "planted in beta", "namespace": BETA}],
        "memory_store_batch": [
            {
                "memories": [
                    {"content": "half in acme", "namespace": ACME},
                    {"content": "half in beta", "namespace": BETA},
                ]
            }
        ],
        "memory_recall": [{"query": Z}, {"query": Z, "namespace": BETA}],
        "memory_forget": [
            {"memory_id": t.beta_memory},
            {"memory_id": t.beta_memory, "force": True, "purge": True},
            {"query": Z, "force": True},
            {"input_value": t.beta_memory_2, "force": True},
            {"query": Z, "namespace": BETA, "force": True},
        ],
        "memory_context": [{"query": Z}, {"query": Z, "namespace": BETA}],
        "memory_count": [{}, {"namespace": BETA}],
        "memory_list": [{}, {"namespace": BETA}],
        "memory_list_namespaces": [{}],
        "preference_set": [{"key": "theme", "value": "hijacked", "namespace": BETA}],
        "preference_get": [{"key": "theme", "namespace": BETA}],
        "preference_list": [{}, {"namespace": BETA}],
        "preference_delete": [{"key": "theme", "namespace": BETA}],
        "preference_history": [{"key": "theme", "namespace": BETA}],
        "memory_apply": [{"memory_id": t.beta_memory, "context": "using it"}],
        "memory_outcome": [{"memory_id": t.beta_memory, "success": False, "error_msg": "bad"}],
        "validation_history": [{"memory_id": t.beta_memory}],
        "memory_relate": [
            {"source_id": t.beta_memory, "target_id": t.beta_memory_2, "relation": "contradicts"},
            {"source_id": t.acme_memory, "target_id": t.beta_memory, "relation": "relates_to"},
        ],
        "memory_edge_forget": [{"edge_id": t.beta_edge}, {"memory_id": t.beta_memory}],
        "memory_inspect_graph": [{"memory_id": t.beta_memory}],
        "create_entities": [{"entities": [beta_entity], "namespace": BETA}],
        "create_relations": [
            {
                "relations": [{"from": "Kiwi", "to": "ZebraCorp", "relationType": "x"}],
                "namespace": BETA,
            }
        ],
        "add_observations": [
            {"observations": [{"entityName": "ZebraCorp", "contents": ["y"]}], "namespace": BETA}
        ],
        "delete_entities": [{"entityNames": ["ZebraCorp"], "namespace": BETA}],
        "delete_observations": [
            {
                "deletions": [
                    {"entityName": "ZebraCorp", "observations": [f"{SECRET} observation"]}
                ],
                "namespace": BETA,
            }
        ],
        "delete_relations": [
            {
                "relations": [{"from": "ZebraCorp", "to": "Kiwi", "relationType": "grows"}],
                "namespace": BETA,
            }
        ],
        "read_graph": [{"namespace": BETA}, {}],
        "search_nodes": [{"query": "ZebraCorp", "namespace": BETA}],
        "open_nodes": [{"names": ["ZebraCorp", "Kiwi"], "namespace": BETA}],
        "debug_trace": [{"trace_id": t.beta_trace}],
        "debug_query_log": [{}, {"namespace": BETA}],
        "debug_feedback": [{"trace_id": t.beta_trace, "verdict": "wrong", "note": "n"}],
        # lifecycle
        "decay": [{"namespace": BETA, "threshold": 0.99}, {"threshold": 0.99}],
        "debug_rehydrate": [{"memory_id": t.beta_memory}],
        "memory_pin": [{"memory_id": t.beta_memory}],
        "memory_unpin": [{"memory_id": t.beta_memory}],
        "memory_get": [{"memory_id": t.beta_memory}],
        "memory_brief": [{"kind": "core", "namespace": BETA}, {"kind": "reflection"}],
        "memory_analyze_health": [{"namespace": BETA}, {}],
        # knowledge graph
        "memory_observe": [
            {
                "envelope": {"type": "concept", "name": "zebra"},
                "namespace": BETA,
            }
        ],
        "memory_detect_contradictions": [{"memory_id": t.beta_memory}],
        "memory_check_supersedes": [{"memory_id": t.beta_memory}],
        "memory_backfill_edges": [{"namespace": BETA}, {}],
        "add_episode": [{"content": "ZebraCorp acquired Kiwi", "namespace": BETA}],
        "search_entities": [{"query": "ZebraCorp", "group_ids": [BETA]}],
        "search_edges": [{"query": "ZebraCorp", "group_ids": [BETA]}],
        "query_graph": [{"query": "ZebraCorp", "namespace": BETA}],
        "build_context": [{"entity_names": ["ZebraCorp"], "namespace": BETA}],
        "fact_set": [
            {"entity": "ZebraCorp", "attribute": "owner", "content": "x", "namespace": BETA}
        ],
        "fact_get": [{"entity": "ZebraCorp", "namespace": BETA}],
        "fact_history": [{"entity": "ZebraCorp", "namespace": BETA}],
        "fact_verify": [{"fact_id": "fct_0000000000000000", "namespace": BETA}],
        # debugger
        "debug_why": [{"trace_id": t.beta_trace, "memory_id": t.beta_memory}],
        "debug_replay": [{"trace_id": t.beta_trace}, {"trace_id": t.beta_trace, "now": True}],
        "debug_error_attribution": [{}],
        "debug_monitoring_alerts": [{}],
        "debug_prune_traces": [{"older_than_days": 1}],
        # query
        "memory_query": [{"query": Z}, {"query": Z, "namespace": BETA}],
        # memory as code
        "memory_export": [
            {"path": str(Path(t.beta_dir).parent / "exported.json"), "namespace": BETA},
            {"path": str(Path(t.beta_dir).parent / "everything.jsonl"), "format": "jsonl"},
        ],
        "memory_import": [{"path": t.beta_file, "dry_run": False}],
        "memory_diff": [{"snapshot_a": str(Path(t.beta_dir).parent / "everything.jsonl")}],
    }
    missing = {op.name for op in OPERATIONS} - set(table)
    assert not missing, f"operations without a leakage case: {sorted(missing)}"
    return [(name, args) for name, cases in table.items() for args in cases]


def check_no_leak(
    t: Tenants, calls: list[tuple[str, dict[str, Any]]], answers: list[Answer]
) -> None:
    assert len(answers) == len(calls)
    for (name, args), answer in zip(calls, answers, strict=True):
        where = f"{name} {args} -> {answer.status} {answer.text[:300]}"
        assert answer.status < 500 and "Internal error" not in answer.text, where
        assert SECRET not in answer.text, where
        given = repr(args)
        if BETA not in given:
            assert BETA not in answer.text, where
        for beta_id in t.ids:
            if beta_id not in given:
                assert beta_id not in answer.text, where


def check_untouched(before: dict[str, list[str]], token_id: str) -> None:
    assert rows_of(BETA) == before, "a row of project:beta was changed, added or removed"
    allowed = {ACME, BETA, "*", f"*@{token_id}"}
    assert namespaces_in_use() <= allowed


def sweep_rest(base: str, secret: str, calls: list[tuple[str, dict[str, Any]]]) -> list[Answer]:
    headers = {"Authorization": f"Bearer {secret}"}
    with httpx.Client(base_url=base, headers=headers, timeout=120) as http:
        return [rest_call(http, BY_NAME[name], args) for name, args in calls]


@pytest.mark.parametrize("mode", ["read", "read-write"])
def test_no_operation_over_rest_reaches_another_namespace(
    tenants: Tenants, base: str, mode: str
) -> None:
    token_id, secret = token(mode, "project:acme*")
    before = rows_of(BETA)
    calls = attacks(tenants)
    answers = sweep_rest(base, secret, calls)
    check_no_leak(tenants, calls, answers)
    check_untouched(before, token_id)
    # The refused batch wrote nothing, not even its half in the token's own namespace.
    assert not any("half in acme" in r for rows in rows_of(ACME).values() for r in rows)


@pytest.mark.parametrize("mode", ["read", "read-write"])
def test_no_tool_over_mcp_http_reaches_another_namespace(
    tenants: Tenants, base: str, mode: str
) -> None:
    token_id, secret = token(mode, "project:acme*")
    before = rows_of(BETA)
    calls = attacks(tenants)
    answers = mcp_calls(base, secret, calls)
    check_no_leak(tenants, calls, answers)
    check_untouched(before, token_id)
    assert not any("half in acme" in r for rows in rows_of(ACME).values() for r in rows)


def test_a_token_works_in_its_own_namespaces(tenants: Tenants, base: str) -> None:
    """The boundary is not a wall around everything: reads and writes inside it succeed."""
    _, rw = token("read-write", "project:acme*")
    _, ro = token("read", "project:acme")
    with httpx.Client(base_url=base, timeout=120) as http:
        as_rw = {"Authorization": f"Bearer {rw}"}
        stored = http.post(
            "/v1/memories",
            json={"content": "ACME ships on Fridays too", "namespace": "project:acme-ops"},
            headers=as_rw,
        )
        assert stored.status_code == 201, stored.text
        found = http.post("/v1/search", json={"query": "acme ships deploys"}, headers=as_rw).json()
        assert found["results"] and {r["namespace"] for r in found["results"]} <= {
            ACME,
            "project:acme-ops",
        }
        as_ro = {"Authorization": f"bearer {ro}"}  # the scheme is case-insensitive
        [before] = run("memory_list", namespace=ACME).memories
        recalled = http.post(
            "/v1/memories/recall", json={"query": "when do acme deploys go out"}, headers=as_ro
        )
        assert recalled.status_code == 200, recalled.text
        hits = recalled.json()["memories"]
        assert [h["id"] for h in hits] == [tenants.acme_memory]  # not acme-ops: not in scope
        refused = http.post(
            "/v1/memories", json={"content": "read-only may not", "namespace": ACME}, headers=as_ro
        )
        assert refused.status_code == 403 and "may not change" in refused.json()["error"]
        listed = http.get("/v1/namespaces", headers=as_ro).json()
        assert [n["namespace"] for n in listed["namespaces"]] == [ACME]
    # A read is bookkeeping in the reader's namespace: the access counted, the trace kept.
    [memory] = run("memory_list", namespace=ACME).memories
    assert memory.access_count == before.access_count + 1


def test_a_search_over_all_namespaces_is_logged_for_its_token_alone(
    tenants: Tenants, base: str
) -> None:
    token_id, mine = token("read", "project:acme*")
    _, other = token("read", "project:acme*")
    with httpx.Client(base_url=base, timeout=120) as http:
        found = http.post(
            "/v1/search", json={"query": "deploys"}, headers={"Authorization": f"Bearer {mine}"}
        )
        assert found.status_code == 200, found.text
        path = f"/v1/debug/trace/{found.json()['trace_id']}"
        own = http.get(path, headers={"Authorization": f"Bearer {mine}"})
        assert own.status_code == 200 and own.json()["namespace"] == f"*@{token_id}"
        assert http.get(path, headers={"Authorization": f"Bearer {other}"}).status_code == 404
        assert http.get(path).status_code == 200  # the local user (admin) sees every trace
        feedback = http.post(
            path + "/feedback",
            json={"verdict": "right"},
            headers={"Authorization": f"Bearer {mine}"},
        )
        assert feedback.status_code == 200, feedback.text


def test_token_patterns_never_match_another_callers_cross_namespace_traces(
    tenants: Tenants, base: str
) -> None:
    """'*' ("read everything") and '*@*' (no namespace at all) read their own
    cross-namespace traces, not the admin's ('*') nor another token's ('*@tok_…')."""
    _, writer = token("read", "project:acme*")
    with httpx.Client(base_url=base, timeout=120) as http:
        traces = [
            http.post("/v1/search", json={"query": "deploys"}, headers=headers).json()["trace_id"]
            for headers in ({}, {"Authorization": f"Bearer {writer}"})
        ]
        for pattern in ("*", "*@*"):
            _, reader = token("read", pattern)
            as_reader = {"Authorization": f"Bearer {reader}"}
            for trace_id in traces:
                shown = http.get(f"/v1/debug/trace/{trace_id}", headers=as_reader)
                assert shown.status_code == 404, (pattern, shown.text)
            logged = http.get("/v1/debug/query-log", headers=as_reader).json()
            assert not {t["id"] for t in logged["traces"]} & set(traces), pattern
            own = http.post("/v1/search", json={"query": "deploys"}, headers=as_reader)
            mine = own.json()["trace_id"]
            assert http.get(f"/v1/debug/trace/{mine}", headers=as_reader).status_code == 200


def test_a_query_quoting_global_preferences_is_not_the_namespaces_trace(
    tenants: Tenants, base: str
) -> None:
    """memory_query in a namespace also answers from the user's `global` preferences; its
    trace then holds `global` text, which a token reading that namespace alone may not see."""
    with httpx.Client(base_url=base, timeout=120) as http:
        put = http.put("/v1/preferences/editor_theme", json={"value": "solarized-zz"})
        assert put.status_code == 200, put.text
        asked = http.post("/v1/query", json={"query": "what is my editor theme", "namespace": ACME})
        answer = asked.json()
        assert any(c["namespace"] == "global" for c in answer["core_chunks"]), answer
        _, reader = token("read", ACME)
        path = f"/v1/debug/trace/{answer['query_id']}"
        assert http.get(path, headers={"Authorization": f"Bearer {reader}"}).status_code == 404
        assert http.get(path).json()["namespace"] == "*"  # the local user still reads it
        # cut by the budget, the preference is still named in the trace's items found
        cut = http.post(
            "/v1/query",
            json={"query": "what is my editor theme", "namespace": ACME, "max_tokens": 1},
        ).json()
        assert cut["core_chunks"] == [] and cut["left_out"] > 0, cut
        path = f"/v1/debug/trace/{cut['query_id']}"
        assert http.get(path, headers={"Authorization": f"Bearer {reader}"}).status_code == 404
        assert http.get(path).json()["namespace"] == "*"


def test_a_read_only_token_is_refused_the_writes_it_can_see_not_told_they_worked(
    tenants: Tenants, base: str
) -> None:
    """In its own namespace a read-only token was answered "Entities deleted successfully"
    (the policies had dropped the UPDATE), "Entity with name … not found" for an entity it
    can read, had its memory_apply recorded, and a wrong verdict on its own trace was a 500
    (for a read-write token too, on its own cross-namespace trace)."""
    anvil = {"name": "Anvil", "entityType": "product", "observations": ["Made of iron"]}
    relation = {"from": "Anvil", "to": "Roadrunner", "relationType": "falls_on"}
    run("create_entities", entities=[anvil, {**anvil, "name": "Roadrunner"}], namespace=ACME)
    run("create_relations", relations=[relation], namespace=ACME)
    _, ro = token("read", ACME)
    _, rw = token("read-write", "project:acme*")
    gone = {"entityName": "Anvil", "observations": ["Made of iron"]}
    writes = [
        ("delete_entities", {"entityNames": ["Anvil"]}),
        ("delete_observations", {"deletions": [gone]}),
        ("delete_relations", {"relations": [relation]}),
        ("add_observations", {"observations": [{"entityName": "Anvil", "contents": ["Heavy"]}]}),
        ("create_relations", {"relations": [{**relation, "relationType": "misses"}]}),
    ]
    before = rows_of(ACME)
    clients = {
        secret: httpx.Client(
            base_url=base, timeout=120, headers={"Authorization": f"Bearer {secret}"}
        )
        for secret in (ro, rw)
    }
    with clients[ro] as as_ro, clients[rw] as as_rw:
        for name, args in writes:
            answer = rest_call(as_ro, BY_NAME[name], {**args, "namespace": ACME})
            assert answer.status == 403 and "may not change" in answer.text, (name, answer.text)
        applied = as_ro.post(f"/v1/memories/{tenants.acme_memory}/apply", json={"context": "x"})
        assert applied.status_code == 403, applied.text
        assert rows_of(ACME) == before  # nothing written, nothing closed
        for http in (as_ro, as_rw):  # its own traces: in ACME, and across namespaces
            for scope in ({"namespace": ACME}, {}):
                found = http.post("/v1/search", json={"query": "deploys", **scope})
                judged = http.post(
                    f"/v1/debug/trace/{found.json()['trace_id']}/feedback",
                    json={"verdict": "wrong", "expected_ids": [tenants.acme_memory]},
                )
                assert judged.status_code == 200, judged.text
                assert judged.json()["error_type"] is not None
    assert run("open_nodes", names=["Anvil"], namespace=ACME).entities[0].observations == [
        "Made of iron"
    ]


def test_a_read_only_token_changing_a_row_it_can_read_is_refused_not_a_crash(
    tenants: Tenants, base: str
) -> None:
    """preference_delete was a 500 (the ORM's UPDATE matched no row the policies let it
    change), fact_verify answered "Fact not found" and memory_edge_forget "Edge not found" or
    0 deleted for rows the token had just read; memory_forget with purge answered "purged"
    (a 500 here, where SQLAlchemy's warning of a DELETE that matched nothing is an error)."""
    run("preference_set", key="editor", value="helix", namespace=ACME)
    fact = run("fact_set", entity="Anvil", attribute="weight", content="100 kg", namespace=ACME)
    other = run("memory_store", content="ACME ships rockets on Fridays", namespace=ACME).id
    edge = run(
        "memory_relate", source_id=tenants.acme_memory, target_id=other, relation="relates_to"
    )
    _, ro = token("read", ACME)
    before = rows_of(ACME)
    calls = [
        ("preference_delete", {"key": "editor", "namespace": ACME}),
        ("fact_verify", {"fact_id": fact.fact.fact_id, "namespace": ACME}),
        ("memory_edge_forget", {"edge_id": edge.edge_id}),
        ("memory_edge_forget", {"memory_id": tenants.acme_memory}),
        # the policies dropped its DELETEs: "purged", a purge event logged, nothing erased
        ("memory_forget", {"memory_id": tenants.acme_memory, "purge": True, "force": True}),
    ]
    headers = {"Authorization": f"Bearer {ro}"}
    with httpx.Client(base_url=base, timeout=120, headers=headers) as http:
        for name, args in calls:
            answer = rest_call(http, BY_NAME[name], args)
            assert answer.status == 403 and "may not change" in answer.text, (name, answer.text)
    assert rows_of(ACME) == before


def test_an_admin_replays_a_tokens_search_over_its_namespaces_as_it_ran(
    tenants: Tenants, base: str
) -> None:
    """A scoped token's search over all its namespaces, replayed by the admin, searched every
    namespace: the replay differed from the trace (beta's memories added), nothing changed."""
    _, secret = token("read", "project:acme*")
    as_token = {"Authorization": f"Bearer {secret}"}
    with httpx.Client(base_url=base, timeout=120) as http:
        found = http.post("/v1/memories/recall", json={"query": "zebra launch codes deploys"},
                          headers=as_token)  # fmt: skip
        trace_id = found.json()["trace_id"]
        for headers in ({}, as_token):  # the admin (local user), and the token itself
            replayed = http.post(f"/v1/debug/replay/{trace_id}", json={}, headers=headers)
            assert replayed.status_code == 200, replayed.text
            body = replayed.json()
            assert body["identical"], (body["changed_stage"], body["diff"])
        # the replay's scope went with its savepoint: the admin still sees every namespace
        logged = http.get("/v1/debug/query-log", params={"namespace": BETA}).json()
        assert logged["total"] >= 1


def test_a_memory_outside_a_tokens_namespaces_is_the_wrong_store_of_its_search(
    tenants: Tenants, base: str
) -> None:
    """A token's search over all its namespaces could never find beta's memory, yet the
    attribution said no channel had ranked it: a ranking error, not the store it searched."""
    _, secret = token("read-write", "project:acme*")
    as_token = {"Authorization": f"Bearer {secret}"}
    with httpx.Client(base_url=base, timeout=120) as http:
        found = http.post("/v1/search", json={"query": "zebra launch codes"}, headers=as_token)
        trace_id = found.json()["trace_id"]
        judged = http.post(
            f"/v1/debug/trace/{trace_id}/feedback",
            json={"verdict": "wrong", "expected_ids": [tenants.beta_memory]},
        ).json()  # the admin judges the token's trace
        assert judged["error_subtype"] == "wrong_store_queried", judged
        assert "the query searched project:acme*" in judged["reason"]
        why = http.get(f"/v1/debug/trace/{trace_id}/why/{tenants.acme_memory}", headers=as_token)
        assert why.status_code == 200 and why.json()["stage"] != "scope", why.text
