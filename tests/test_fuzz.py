"""Random inputs to every operation, over REST and through the MCP call path: never a 5xx,
never an error outside the envelope, and a refused request writes nothing."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memsys.api.app import create_app
from memsys.mcp.server import call
from memsys.operations import OPERATIONS, Operation
from tests.conftest import table_counts
from tests.factories import fuzz_root

NASTY_TEXT = st.one_of(
    st.text(max_size=40),
    st.sampled_from(["", " ", "\x00", "\ud800", "global", "project:a", "mem_0123456789abcdef"]),
)
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    NASTY_TEXT,
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(NASTY_TEXT, inner, max_size=4),
    max_leaves=12,
)


def arguments(op: Operation) -> st.SearchStrategy[dict[str, Any]]:
    names = sorted(op.input.model_fields) if op.input else []
    keys = st.sampled_from([*names, "unknown_field"]) if names else st.just("unknown_field")
    return st.dictionaries(keys, VALUES, max_size=len(names) + 1)


@pytest.fixture(scope="module")
def client(embedder: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[TestClient]:
    with (
        fuzz_root(tmp_path_factory.mktemp("fuzz-root")),
        TestClient(create_app(background=False), base_url="http://127.0.0.1:8700") as c,
    ):
        yield c


def send(client: TestClient, op: Operation, args: dict[str, Any]) -> Any:
    rest = op.rest[0]
    path = "/v1" + rest.path.replace("{key:path}", "fuzz-key").replace("{memory_id}", "mem_x")
    if rest.method == "GET":
        # Percent-encoded by hand: a lone surrogate goes out as the bytes a broken client sends.
        pairs = []
        for key, value in args.items():
            if value is None:
                continue
            text = json.dumps(value) if isinstance(value, dict | list) else str(value)
            encoded = (
                quote(key.encode("utf-8", "surrogatepass")),
                quote(text.encode("utf-8", "surrogatepass")),
            )
            pairs.append("=".join(encoded))
        return client.get(path + ("?" + "&".join(pairs) if pairs else ""))
    body = json.dumps(args)  # escapes lone surrogates as a JSON client would
    headers = {"content-type": "application/json"}
    return client.request(rest.method, path, content=body, headers=headers)


@pytest.mark.parametrize("op", OPERATIONS, ids=lambda op: op.name)
def test_random_input_never_breaks_an_operation(client: TestClient, op: Operation) -> None:
    @settings(
        max_examples=25,
        deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )
    @given(args=arguments(op))
    def check(args: dict[str, Any]) -> None:
        before = table_counts()
        response = send(client, op, args)
        assert response.status_code < 500, (args, response.text)
        if response.status_code >= 400:
            assert response.json()["success"] is False, response.text
            assert table_counts() == before, args
        answer = call(op, args)  # the MCP path: an envelope, never an exception
        assert set(answer) in ({"success", "data"}, {"success", "error"})

    check()


def test_the_fuzzer_reaches_past_validation(client: TestClient) -> None:
    """A fuzz that only ever meets validation errors tests nothing: valid calls succeed."""
    response = send(client, OPERATIONS[0], {"file_path": str(Path(__file__))})
    assert response.status_code == 422  # outside the fuzz root: refused
    count = next(op for op in OPERATIONS if op.name == "memory_count")
    assert send(client, count, {}).status_code == 200
