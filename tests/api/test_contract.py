"""The REST contract, fuzzed: schemathesis generates requests from the OpenAPI document
(valid ones and ones that break it) for every route and runs all its checks on the answers,
in process against the app on the test database. A 5xx, a refused valid request, an accepted
invalid one, an undocumented status, header or body shape each fail the test. Rules JSON
Schema cannot state are named in tests/api/fuzz/hooks.py; the long run (>= 10,000 cases over
a real server) is benchmarks/fuzz_api.py, documented in README.md "API fuzzing".

Bounded for the suite: a few cases per route and mode, derandomized (the same cases on every
run, so a failure here is reproducible), no shrinking."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import schemathesis
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode
from schemathesis.checks import CHECKS, load_all_checks
from schemathesis.core.failures import FailureGroup

import tests.api.fuzz.hooks  # noqa: F401  (registers filter_failure)
from memsys.api.app import create_app
from tests.conftest import table_counts
from tests.factories import fuzz_root

load_all_checks()
ALL_CHECKS = CHECKS.get_all()
CASES = 3  # per route and mode: 73 routes x 2 modes x 3, about 420 requests


@pytest.fixture  # one app per mode: a crash in one cannot stop the other
def contract(embedder: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    with fuzz_root(tmp_path_factory.mktemp("contract-root")):
        app = create_app(extra_hosts=["testserver"], background=False)  # the ASGI client's host
        yield schemathesis.openapi.from_asgi("/openapi.json", app)


PLAIN = {"content-type": "text/plain"}
JSON_TYPE = {"content-type": "application/json"}


def broken(operation: Any, mode: GenerationMode) -> str | None:
    """The first contract failure of `operation`'s cases in `mode`, or None."""

    @settings(
        max_examples=CASES,
        deadline=None,
        derandomize=True,
        database=None,
        phases=[Phase.explicit, Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(case=operation.as_strategy(generation_mode=mode))
    def run(case: Any) -> None:
        case.call_and_validate(checks=ALL_CHECKS)

    try:
        run()
    except Unsatisfiable:  # nothing to break (no parameters, or only a free-form path id)
        return None
    except (Exception, FailureGroup) as exc:
        lines = str(exc).splitlines()[:24]  # the check, the request and the answer
        return f"{operation.label} ({mode}):\n" + "\n".join(lines)
    return None


@pytest.mark.parametrize("mode", [GenerationMode.POSITIVE, GenerationMode.NEGATIVE])
def test_every_route_keeps_its_contract(contract: Any, mode: GenerationMode) -> None:
    operations = [result.ok() for result in contract.get_all_operations()]
    assert len(operations) >= 40  # every route of the operation table and the extra routers
    failures = [f for f in (broken(op, mode) for op in operations) if f]
    assert not failures, "\n\n".join(failures)


def test_the_document_states_the_rules(client: TestClient) -> None:
    document = client.get("/openapi.json").json()
    store = document["paths"]["/v1/memories"]["post"]
    for code in ("400", "401", "404", "422"):  # every error is the envelope
        body = store["responses"][code]["content"]["application/json"]["schema"]
        assert body == {"$ref": "#/components/schemas/ErrorOut"}
    assert "200" in store["responses"]  # identical content already stored
    schemas = document["components"]["schemas"]
    content = schemas["MemoryStoreIn"]["properties"]["content"]
    assert content["minLength"] == 1 and "\\x00" in content["pattern"]  # no blank, no NUL
    metadata = schemas["MemoryStoreIn"]["properties"]["metadata"]["anyOf"][0]
    assert metadata["additionalProperties"] == {"$ref": "#/components/schemas/TextJson"}
    assert "\\x00" in schemas["TextJson"]["anyOf"][0]["pattern"]  # nested text too
    listing = {
        p["name"]: p["schema"] for p in document["paths"]["/v1/memories"]["get"]["parameters"]
    }
    assert listing["offset"]["maximum"] == 1_000_000_000
    assert "created_at" in listing["order_by"]["enum"]
    export = document["paths"]["/v1/graph/export"]["get"]["responses"]["200"]["content"]
    assert "application/x-ndjson" in export


def test_json_bodies_have_the_types_the_document_states(client: TestClient) -> None:
    refused = client.post("/v1/search", json={"query": "q", "n_results": "5"})
    assert refused.status_code == 422 and "n_results" in refused.json()["error"]
    refused = client.post("/v1/memories", json={"content": "x", "importance": True})
    assert refused.status_code == 422 and "importance" in refused.json()["error"]
    assert client.post("/v1/search", json={"query": "q", "n_results": 5.0}).status_code == 200


def test_a_key_route_does_not_swallow_its_history(client: TestClient) -> None:
    answer = client.put("/v1/preferences/editor/history", json={"value": "vim"})
    assert answer.status_code == 405 and answer.headers["allow"] == "GET"
    assert client.get("/v1/preferences/editor").status_code == 404  # nothing was written


def test_the_key_history_is_a_key_like_any_other(client: TestClient) -> None:
    """The route's look-behind for "/history" also saw the slash before the key, so the
    key "history" could not be set (a redirect to "history/") nor read over REST, nor by
    the CLI while a server ran; MCP stored it. A key ending in "/history", which REST
    cannot address, is refused on every front end."""
    assert client.put("/v1/preferences/history", json={"value": "off"}).status_code == 200
    assert client.get("/v1/preferences/history").json()["value"] == "off"
    versions = client.get("/v1/preferences/history/history").json()["versions"]
    assert [v["value"] for v in versions] == ["off"]
    assert client.delete("/v1/preferences/history").status_code == 200
    from memsys.mcp.server import call
    from memsys.operations import BY_NAME

    refused = call(BY_NAME["preference_set"], {"key": "notes/history", "value": 1})
    assert refused["success"] is False and "ends in '/history'" in refused["error"]


def test_import_and_migrate_refuse_clearly(client: TestClient) -> None:
    answer = client.post(
        "/v1/import", content=b"`\xff\xfe", headers={"content-type": "application/json"}
    )
    assert answer.status_code == 400 and answer.json()["error"] == "The body is not UTF-8 text"
    answer = client.post("/v1/graph/import", content=b'{"type": "entity"\xff}\n')
    assert answer.status_code == 400 and answer.json()["error"] == "The body is not UTF-8 text"
    answer = client.post("/v1/migrate", json={"revision": "abcdefabcdef", "dry_run": True})
    assert answer.status_code == 404 and "No such revision" in answer.json()["error"]
    answer = client.post("/v1/migrate", json={"revision": "head; drop", "dry_run": True})
    assert answer.status_code == 422 and "Invalid revision" in answer.json()["error"]


def test_a_body_that_is_not_json_says_why_and_where(client: TestClient) -> None:
    """It said "request: Input should be a valid dictionary…" for a text/plain body, "5: JSON
    decode error" for bad JSON and "There was an error parsing the body" for Latin-1."""
    before = table_counts()
    as_text = client.post("/v1/memories", content=b'{"content": "x"}', headers=PLAIN)
    assert as_text.status_code == 415
    assert as_text.json()["error"] == (
        "Send the body as JSON (Content-Type: application/json), not 'text/plain'"
    )
    broken = client.post("/v1/memories", content=b'{"content": x}', headers=JSON_TYPE)
    assert broken.status_code == 422
    assert broken.json()["error"] == "The body is not valid JSON: Expecting value at character 12"
    for body in ('{"content": "caf\xe9"}'.encode("latin-1"), b"[" * 10_000 + b"]" * 10_000):
        unread = client.post("/v1/memories", content=body, headers=JSON_TYPE)
        assert unread.status_code == 400
        assert unread.json()["error"].startswith("The body could not be read as JSON")
    assert table_counts() == before
