"""How search results read on a terminal (the commands come from memsys.operations)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from memsys.cli.output import echo, excerpt, score, show_records

if TYPE_CHECKING:
    from memsys.schemas import SearchBudgetOut, SearchHit, SearchOut


def _where(hit: SearchHit) -> str:
    meta: dict[str, Any] = hit.metadata
    if hit.doc_type == "document":
        header = meta.get("header_path")
        return f"{meta.get('source_file')}" + (f" › {header}" if header else "")
    return f"{meta.get('memory_type')} memory"


def _hits(results: list[SearchHit]) -> None:
    show_records(
        [
            (
                f"{h.id}  relevance {score(h.score)}  similarity {score(h.similarity)}  "
                f"{h.tokens} tokens  {h.namespace}  {_where(h)}",
                excerpt(h.content),
            )
            for h in results
        ]
    )


def found(r: SearchOut) -> None:
    if not r.results:
        echo("No results.")
        return
    _hits(r.results)
    echo(f"{r.total} results, {r.total_tokens} tokens")


def budgeted(r: SearchBudgetOut) -> None:
    if r.results:
        _hits(r.results)
    else:
        echo("No results fit the budget.")
    left_out = f"; {r.truncated_count} candidates left out" if r.truncated else ""
    echo(f"{r.tokens_used} tokens used, {r.budget_remaining} remaining{left_out}")
