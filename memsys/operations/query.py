"""The row of memory_query (memsys.services.query): S004's POST /query as memsys serves it."""

from __future__ import annotations

from memsys.operations.spec import Cli, Operation, Rest
from memsys.schemas import query as q

QUERY_OPERATIONS: tuple[Operation, ...] = (
    Operation(
        name="memory_query",
        summary="Answer a question from memory the way S004's query router does: picks the "
        "stores (preferences, entities, semantic, graph, timeline), detects the mode "
        "(execution / planning / brainstorming), verifies in execution mode, and returns a "
        "curated core of 5 plus 15-30 extended chunks within a token budget. Use it when "
        "you want an answer with its context; use memory_recall for a plain ranked list.",
        service="query:query",
        input=q.QueryIn,
        output=q.QueryOut,
        effect="read",
        rest=(Rest("POST", "/query"),),
        cli=Cli("query", arguments=("query",), render="memsys.cli.query:answered"),
    ),
)
