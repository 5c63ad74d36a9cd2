"""The operation table drives MCP, REST and the CLI: walk it and check every front end."""

from __future__ import annotations

import re
from typing import Any

import anyio
import pytest
import typer.main
from fastapi.testclient import TestClient

from memsys.api.app import create_app
from memsys.cli.commands import core_type
from memsys.cli.main import app as cli_app
from memsys.mcp.server import build_server
from memsys.operations import OPERATIONS, Operation, resolve
from tests.cli.helpers import run_json

BASE = "http://127.0.0.1:8700"
PATH_PARAM = re.compile(r"{(\w+)(?::\w+)?}")


@pytest.fixture(scope="module")
def tools() -> dict[str, Any]:
    async def listed() -> Any:
        return await build_server().list_tools()

    return {t.name: t for t in anyio.run(listed)}


@pytest.fixture(scope="module")
def openapi() -> dict[str, Any]:
    return create_app(background=False).openapi()


def cli_command(name: str) -> Any:
    command: Any = typer.main.get_command(cli_app)
    for part in name.split():
        command = command.commands[part]
    return command


def mcp_fields(op: Operation) -> set[str]:
    fields = set(op.input.model_fields) if op.input else set()
    return fields - set(op.mcp_hidden)


def test_every_reference_in_the_table_resolves() -> None:
    for op in OPERATIONS:
        assert callable(resolve(op.service)), op.name
        for ref in (op.cli.render, op.cli.command, op.after):
            if ref is not None:
                assert callable(resolve(ref)), (op.name, ref)
        for name in (*op.mcp_hidden, *op.mcp_required, *op.cli.arguments, *op.cli.flags):
            assert op.input is not None and name in op.input.model_fields, (op.name, name)


@pytest.mark.parametrize("op", OPERATIONS, ids=lambda op: op.name)
def test_mcp_tool_matches_its_row(op: Operation, tools: dict[str, Any]) -> None:
    tool = tools[op.name]
    assert tool.description == op.summary
    assert tool.annotations.read_only_hint == op.read_only
    assert tool.annotations.destructive_hint == op.destructive
    assert tool.annotations.idempotent_hint == op.idempotent
    schema = tool.input_schema
    assert set(schema.get("properties", {})) == mcp_fields(op)
    required = {
        n for n, f in (op.input.model_fields if op.input else {}).items() if f.is_required()
    }
    assert set(schema.get("required", [])) == (required | set(op.mcp_required)) - set(op.mcp_hidden)
    for name, prop in schema.get("properties", {}).items():
        assert op.input is not None
        field = op.input.model_fields[name]
        assert prop.get("description") == field.description, (op.name, name)
        extra = field.json_schema_extra if isinstance(field.json_schema_extra, dict) else {}
        for bound in ("minimum", "maximum", "enum"):
            if bound in extra:
                assert prop.get(bound) == extra[bound], (op.name, name, bound)


def test_the_table_is_every_mcp_tool(tools: dict[str, Any]) -> None:
    assert set(tools) == {op.name for op in OPERATIONS}


@pytest.mark.parametrize("op", OPERATIONS, ids=lambda op: op.name)
def test_rest_routes_are_documented_from_the_model(op: Operation, openapi: dict[str, Any]) -> None:
    components = openapi["components"]["schemas"]
    for rest in op.rest:
        path = "/v1" + re.sub(r":\w+}", "}", rest.path)
        operation = openapi["paths"][path][rest.method.lower()]
        assert operation["description"].startswith(rest.summary or op.summary), path
        offered: set[str] = set()
        for param in operation.get("parameters", []):
            assert param.get("description"), (path, param["name"])
            offered.add(param["name"])
        body = operation.get("requestBody")
        if body is not None:
            ref = body["content"]["application/json"]["schema"]["$ref"].split("/")[-1]
            for name, prop in components[ref]["properties"].items():
                assert prop.get("description"), (path, name)
                offered.add(name)
        expected = (
            set(rest.fields) if rest.fields is not None else mcp_fields(op) | set(op.mcp_hidden)
        )
        assert offered == expected, (path, offered ^ expected)


def test_the_words_an_imported_memory_id_may_not_be_are_the_routes_words() -> None:
    """A memory id in /v1/memories/{memory_id} must not be a word another route has there."""
    from memsys.ids import ROUTE_WORDS

    words = {
        rest.path.split("/")[2]
        for op in OPERATIONS
        for rest in op.rest
        if rest.path.startswith("/memories/")
        and rest.path.count("/") == 2  # /memories/by-id/{memory_id} shadows no id
        and not rest.path.split("/")[2].startswith("{")
    }
    assert words == ROUTE_WORDS


@pytest.mark.parametrize("op", OPERATIONS, ids=lambda op: op.name)
def test_cli_command_offers_every_field_with_help(op: Operation) -> None:
    if op.cli.command is not None:  # written by hand: it must exist, with --json
        assert "--json" in {o for p in cli_command(op.cli.name).params for o in p.opts}
        return
    params = {p.name: p for p in cli_command(op.cli.name).params}
    assert "as_json" in params
    expected: set[str] = set()
    for name, field in (op.input.model_fields if op.input else {}).items():
        if name == op.cli.flatten:
            expected |= set(core_type(field.annotation).model_fields)
        elif name not in op.cli.hidden:
            expected.add(name)
    if op.cli.from_file is not None:  # --from-file: many inputs from a JSON-lines file
        assert params["from_file"].help
        expected.add("from_file")
    assert set(params) - {"as_json"} == expected
    for name in expected:
        assert params[name].help, (op.cli.name, name)


READS_WITHOUT_ARGUMENTS = [
    op
    for op in OPERATIONS
    if op.read_only
    and not (op.input and any(f.is_required() for f in op.input.model_fields.values()))
]


@pytest.mark.parametrize("op", READS_WITHOUT_ARGUMENTS, ids=lambda op: op.name)
def test_read_operations_answer_alike_on_every_front_end(
    op: Operation, client: TestClient, tools: dict[str, Any]
) -> None:
    from memsys.mcp.server import call

    client.post(
        "/v1/memories", json={"content": "Deploys go out on Tuesdays", "memory_type": "fact"}
    )
    over_mcp = call(op, {})
    assert over_mcp["success"] is True, over_mcp
    rest = op.rest[0]
    body = {} if rest.method in ("POST", "PUT") else None
    over_rest = client.request(rest.method, "/v1" + rest.path, json=body).json()
    over_cli = run_json(*op.cli.name.split())
    volatile = {"created_at", "trace_id", "updated_at"}

    def stable(data: Any) -> Any:
        if isinstance(data, dict):
            return {k: stable(v) for k, v in data.items() if k not in volatile}
        if isinstance(data, list):
            return [stable(v) for v in data]
        return data

    assert stable(over_mcp["data"]) == stable(over_rest) == stable(over_cli)


def test_unknown_arguments_are_refused_everywhere(client: TestClient) -> None:
    from memsys.mcp.server import call

    refused = client.post("/v1/memories", json={"content": "x", "importnace": 0.9})
    assert refused.status_code == 422 and "importnace" in refused.json()["error"]
    listed = client.get("/v1/memories/count", params={"namepsace": "global"})
    assert listed.status_code == 422 and "namepsace" in listed.json()["error"]
    assert client.get("/v1/memories/count").json()["count"] == 0  # nothing was written
    answer = call(next(op for op in OPERATIONS if op.name == "get_index_stats"), {"x": 1})
    assert answer["success"] is False and "x" in answer["error"]
