"""Fuzzed tool inputs from a scoped token: every operation, arguments that start as real
attacks on another namespace and are then mutated (namespaces, ids, nasty text, wrong types).
Never a 5xx, never an error outside the envelope, never a partial write (a refused call leaves
every table as it was), and the other namespace's rows never change. Over REST and through
the MCP call path under the token's scope."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memsys import tenancy
from memsys.api.app import create_app
from memsys.mcp.server import call
from memsys.operations import BY_NAME
from tests.conftest import table_counts
from tests.security.helpers import ACME, BETA, SECRET, rest_call, rows_of, seed, token
from tests.security.test_tenancy import attacks

FILE_TEXT = f"{SECRET} the zebra document says kiwi"
ROW_NAMESPACE = re.compile(r"""["']namespace["']:\s*["']([^"']*)["']""")


def values(t: Any) -> st.SearchStrategy[Any]:
    return st.one_of(
        st.sampled_from([ACME, BETA, "project:acme-x", "*", "global", "", None]),
        st.sampled_from([t.beta_memory, t.acme_memory, t.beta_chunk, t.beta_trace, t.beta_edge]),
        st.sampled_from(["\x00", "\ud800", "%", "_", "project:%", "' OR 1=1 --", "zebra"]),
        st.integers(min_value=-(2**64), max_value=2**64),
        st.booleans(),
        st.text(max_size=20),
        st.lists(st.sampled_from([t.beta_memory, t.beta_chunk, "x"]), max_size=3),
    )


def test_fuzzed_calls_from_a_scoped_token(embedder: Any, tmp_path: Path) -> None:
    t = seed(tmp_path)
    token_id, secret = token("read-write", "project:acme*")
    scope = tenancy.Scope(read=("project:acme*",), write=("project:acme*",), token_id=token_id)
    cases = attacks(t)
    own = f"*@{token_id}"  # the token's own cross-namespace traces
    beta = rows_of(BETA)
    with TestClient(create_app(background=False), base_url="http://127.0.0.1:8700") as client:
        client.headers["Authorization"] = f"Bearer {secret}"

        @settings(
            max_examples=60,
            deadline=None,
            suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
        )
        @given(
            case=st.sampled_from(cases),
            changes=st.dictionaries(
                st.sampled_from(
                    [
                        "namespace",
                        "memory_id",
                        "ids",
                        "query",
                        "key",
                        "trace_id",
                        "filters",
                        "confirm",
                        "force",
                        "source_id",
                    ]
                ),
                values(t),
                max_size=2,
            ),
        )
        def check(case: tuple[str, dict[str, Any]], changes: dict[str, Any]) -> None:
            name, args = case
            op = BY_NAME[name]
            fields = set(op.input.model_fields) if op.input else set()
            args = {**args, **{k: v for k, v in changes.items() if k in fields}}
            for front in ("rest", "mcp"):
                before = table_counts()
                if front == "rest":
                    answer = rest_call(client, op, args)
                    failed, shown, status = not answer.ok, answer.text, answer.status
                else:
                    with tenancy.using(scope):
                        env = call(op, args)
                    failed, shown, status = not env["success"], repr(env), 200
                assert status < 500 and "Internal error" not in shown, (front, name, args, shown)
                # The beta file's text is on disk too: a token may index it into its own
                # namespace (files are bounded by MEMSYS_INDEX_ROOTS, not by tenancy). Rows
                # shown must be the token's; BETA's rows carry SECRET anywhere else.
                foreign = [
                    ns
                    for ns in ROW_NAMESPACE.findall(shown)
                    if not ns.startswith(ACME) and ns != own
                ]
                assert not foreign, (front, name, args, shown)
                assert SECRET not in shown.replace(FILE_TEXT, ""), (front, name, args)
                if failed:
                    assert table_counts() == before, (front, name, args, shown)
                assert rows_of(BETA) == beta, (front, name, args)

        check()
