"""The operation table: one row per tool, and the three front ends are built from it.

A row names the S001 tool, the service that does the work, its input and output models,
its MCP annotations, its REST route(s) and its CLI command. The MCP server
(`memsys.mcp.server`), the FastAPI routers (`memsys.api.operations`) and the typer app
(`memsys.cli.commands`) read this table; descriptions, defaults and bounds come from the
input model's fields, so they are written once and shown alike in the MCP input schema,
in OpenAPI and in `memsys <command> --help`.

Services and CLI renderers are named by "module:function" and imported on first call, so
that `memsys --help` loads neither the database layer nor the embedding model.

Adding a tool: write the service (`def op(session, params: OpIn) -> OpOut`), its two
models in `memsys/schemas/`, and one row here (plus, if the default JSON-ish output will not
do, a renderer in the CLI module of its concept).
"""

from __future__ import annotations

from memsys.operations.core import CORE_OPERATIONS
from memsys.operations.debug import DEBUG_OPERATIONS
from memsys.operations.graph import EDGE_OPERATIONS, GRAPH_OPERATIONS
from memsys.operations.knowledge import KNOWLEDGE_OPERATIONS
from memsys.operations.learning import LEARNING_OPERATIONS
from memsys.operations.lifecycle import LIFECYCLE_OPERATIONS
from memsys.operations.query import QUERY_OPERATIONS
from memsys.operations.spec import Cli, Effect, Operation, Rest, resolve
from memsys.operations.vault import VAULT_OPERATIONS

OPERATIONS: tuple[Operation, ...] = (
    CORE_OPERATIONS
    + LEARNING_OPERATIONS
    + LIFECYCLE_OPERATIONS
    + EDGE_OPERATIONS
    + GRAPH_OPERATIONS
    + KNOWLEDGE_OPERATIONS
    + DEBUG_OPERATIONS
    + QUERY_OPERATIONS
    + VAULT_OPERATIONS
)
BY_NAME: dict[str, Operation] = {op.name: op for op in OPERATIONS}

__all__ = ["BY_NAME", "OPERATIONS", "Cli", "Effect", "Operation", "Rest", "resolve"]
