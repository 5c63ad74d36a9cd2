"""The rows of typed observations (S000), S001's graph maintenance tools (B19, B20, B22),
S002's temporal-graph operations and versioned facts."""

from __future__ import annotations

from memsys.operations.spec import Cli, Operation, Rest
from memsys.schemas import observe as ob

GRAPH_CLI = "memsys.cli.graph"

KNOWLEDGE_OPERATIONS: tuple[Operation, ...] = (
    Operation(
        name="memory_observe",
        summary="Record an S000 observation envelope (command.exec, error.capture, "
        "warning.capture, fix.apply, fix.outcome, doc.note, run.summary) under the entity "
        "its stable key names (err#…, fix#…, doc#…), created on first sight; the same "
        "envelope twice is one observation. Links use the relation registry.",
        service="observations:observe",
        input=ob.MemoryObserveIn,
        output=ob.MemoryObserveOut,
        effect="idempotent",
        rest=(Rest("POST", "/graph/observe"),),
        cli=Cli("graph observe", render=f"{GRAPH_CLI}:show"),
    ),
)
