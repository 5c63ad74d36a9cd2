"""Search commands: search, search-with-filters, search-with-budget (documents and memories)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer

from memsys.cli.output import (
    DocType,
    Json,
    MinRelevance,
    Namespace,
    NResults,
    SourceFile,
    echo,
    emit,
    given,
    score,
    short,
    show_records,
)

if TYPE_CHECKING:
    from memsys.schemas import SearchBudgetOut, SearchHit, SearchOut

Query = Annotated[str, typer.Argument(help="What to look for.")]


def search(
    query: Query,
    n_results: NResults = None,
    min_relevance: MinRelevance = None,
    as_json: Json = False,
) -> None:
    """Search every namespace, documents and memories alike (hybrid vector + full text)."""
    from memsys import runner
    from memsys.schemas import SearchIn
    from memsys.services import search as search_service

    data = given(query=query, n_results=n_results, min_relevance=min_relevance)
    emit(runner.execute(search_service.search, SearchIn, data), as_json, _found)


def search_with_filters(
    query: Query,
    namespace: Namespace = None,
    doc_type: DocType = None,
    source_file: SourceFile = None,
    n_results: NResults = None,
    as_json: Json = False,
) -> None:
    """Search within a namespace, a kind of chunk (memory or document) or one source file."""
    from memsys import runner
    from memsys.schemas import SearchWithFiltersIn
    from memsys.services import search as search_service

    filters = given(namespace=namespace, doc_type=doc_type, source_file=source_file)
    data = given(query=query, n_results=n_results, filters=filters)
    result = runner.execute(search_service.search_with_filters, SearchWithFiltersIn, data)
    emit(result, as_json, _found)


def search_with_budget(
    query: Query,
    max_tokens: Annotated[int, typer.Option(help="Token budget for all results together.")],
    namespace: Namespace = None,
    doc_type: DocType = None,
    source_file: SourceFile = None,
    as_json: Json = False,
) -> None:
    """The best results whose content fits within --max-tokens."""
    from memsys import runner
    from memsys.schemas import SearchWithBudgetIn
    from memsys.services import search as search_service

    filters = given(namespace=namespace, doc_type=doc_type, source_file=source_file)
    data = given(query=query, max_tokens=max_tokens, filters=filters or None)
    result = runner.execute(search_service.search_with_budget, SearchWithBudgetIn, data)
    emit(result, as_json, _budgeted)


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
                short(h.content, 500),
            )
            for h in results
        ]
    )


def _found(r: SearchOut) -> None:
    if not r.results:
        echo("No results.")
        return
    _hits(r.results)
    echo(f"{r.total} results, {r.total_tokens} tokens")


def _budgeted(r: SearchBudgetOut) -> None:
    if r.results:
        _hits(r.results)
    else:
        echo("No results fit the budget.")
    left_out = f"; {r.truncated_count} candidates left out" if r.truncated else ""
    echo(f"{r.tokens_used} tokens used, {r.budget_remaining} remaining{left_out}")


def register(app: typer.Typer) -> None:
    """Add the search commands to the top level of `app`."""
    app.command("search")(search)
    app.command("search-with-filters")(search_with_filters)
    app.command("search-with-budget")(search_with_budget)
