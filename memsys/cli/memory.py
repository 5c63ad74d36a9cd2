"""Memory commands: store, recall, forget, context, count, list, namespaces."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from memsys.cli.output import (
    Json,
    MemoryType,
    MinRelevance,
    Namespace,
    NResults,
    echo,
    emit,
    given,
    parse_json,
    score,
    short,
    show_records,
    show_table,
)

if TYPE_CHECKING:
    from memsys.schemas import (
        MemoryContextOut,
        MemoryCountOut,
        MemoryForgetOut,
        MemoryListOut,
        MemoryRecallOut,
        MemoryStoreOut,
        NamespaceListOut,
    )


def store(
    content: Annotated[str, typer.Argument(help="The memory text.")],
    memory_type: MemoryType = None,
    namespace: Namespace = None,
    importance: Annotated[
        float | None, typer.Option(help="0.0-1.0, default 0.5.", show_default=False)
    ] = None,
    tag: Annotated[list[str] | None, typer.Option("--tag", help="A tag (repeatable).")] = None,
    metadata: Annotated[str | None, typer.Option(help="A JSON object of extra fields.")] = None,
    lifecycle: Annotated[
        str | None, typer.Option(help="personal, project or session (default by type).")
    ] = None,
    as_json: Json = False,
) -> None:
    """Store a memory (identical content in the same namespace is stored once)."""
    from memsys import runner
    from memsys.schemas import MemoryStoreIn
    from memsys.services import memories

    data = given(
        content=content,
        memory_type=memory_type,
        namespace=namespace,
        importance=importance,
        tags=tag or None,
        metadata=None if metadata is None else parse_json(metadata, "--metadata"),
        lifecycle=lifecycle,
    )
    emit(runner.execute(memories.store, MemoryStoreIn, data), as_json, _stored)


def _stored(r: MemoryStoreOut) -> None:
    if r.duplicate:
        echo(f"Duplicate: already stored as {r.id} in namespace {r.namespace}")
    else:
        echo(f"Stored {r.id} ({r.memory_type}, namespace {r.namespace})")


def recall(
    query: Annotated[str, typer.Argument(help="What to remember.")],
    n_results: NResults = None,
    namespace: Namespace = None,
    memory_type: MemoryType = None,
    min_importance: Annotated[float | None, typer.Option(help="0.0-1.0.")] = None,
    min_confidence: Annotated[float | None, typer.Option(help="0.0-1.0.")] = None,
    min_relevance: MinRelevance = None,
    as_json: Json = False,
) -> None:
    """Recall the memories most relevant to a query."""
    from memsys import runner
    from memsys.schemas import MemoryRecallIn
    from memsys.services import memories

    data = given(
        query=query,
        n_results=n_results,
        namespace=namespace,
        memory_type=memory_type,
        min_importance=min_importance,
        min_confidence=min_confidence,
        min_relevance=min_relevance,
    )
    emit(runner.execute(memories.recall, MemoryRecallIn, data), as_json, _recalled)


def _recalled(r: MemoryRecallOut) -> None:
    if not r.memories:
        echo("No memories found.")
        return
    show_records(
        [
            (
                f"{m.id}  relevance {score(m.score)}  similarity {score(m.similarity)}  "
                f"{m.memory_type}  {m.namespace}",
                m.content,
            )
            for m in r.memories
        ]
    )


def forget(
    input_value: Annotated[
        str | None, typer.Argument(help="A memory id, or a query for similar memories.")
    ] = None,
    memory_id: Annotated[str | None, typer.Option("--id", help="Forget this memory id.")] = None,
    query: Annotated[str | None, typer.Option(help="Forget memories close to this.")] = None,
    namespace: Namespace = None,
    n_results: NResults = None,
    force: Annotated[bool, typer.Option(help="Also forget golden rules.")] = False,
    purge: Annotated[bool, typer.Option(help="Erase rows and history, not just close.")] = False,
    min_similarity: Annotated[
        float | None, typer.Option(help="Query mode: only matches this close (default 0.5).")
    ] = None,
    as_json: Json = False,
) -> None:
    """Forget memories by id or by query (golden rules need --force)."""
    from memsys import runner
    from memsys.schemas import MemoryForgetIn
    from memsys.services import memories

    data = given(
        input_value=input_value,
        memory_id=memory_id,
        query=query,
        namespace=namespace,
        n_results=n_results,
        force=force,
        purge=purge,
        min_similarity=min_similarity,
    )
    emit(runner.execute(memories.forget, MemoryForgetIn, data), as_json, _forgotten)


def _forgotten(r: MemoryForgetOut) -> None:
    verb = "Purged" if r.purged else "Forgot"
    echo(
        f"{verb} {r.deleted_count} "
        + ("memory" if r.deleted_count == 1 else "memories")
        + (f": {', '.join(r.deleted_ids)}" if r.deleted_ids else "")
    )
    if r.protected_ids:
        echo(f"Protected golden rules (use --force): {', '.join(r.protected_ids)}")


def context(
    query: Annotated[str | None, typer.Argument(help="Focus the context on this.")] = None,
    namespace: Namespace = None,
    token_budget: Annotated[
        int | None, typer.Option("--token-budget", "-b", help="Token limit (default 4000).")
    ] = None,
    as_json: Json = False,
) -> None:
    """Print markdown context for a prompt: golden rules first, within the token budget."""
    from memsys import runner
    from memsys.schemas import MemoryContextIn
    from memsys.services import memories

    data = given(query=query, namespace=namespace, token_budget=token_budget)
    emit(runner.execute(memories.context, MemoryContextIn, data), as_json, _context)


def _context(r: MemoryContextOut) -> None:
    typer.echo(r.context, nl=not r.context.endswith("\n"))


def count(
    namespace: Namespace = None, memory_type: MemoryType = None, as_json: Json = False
) -> None:
    """Count memories."""
    from memsys import runner
    from memsys.schemas import MemoryCountIn
    from memsys.services import memories

    data = given(namespace=namespace, memory_type=memory_type)
    emit(runner.execute(memories.count, MemoryCountIn, data), as_json, _counted)


def _counted(r: MemoryCountOut) -> None:
    where = ", ".join(f"{k}={v}" for k, v in r.filters.items() if v is not None)
    noun = "memory" if r.count == 1 else "memories"
    echo(f"{r.count} {noun}" + (f" ({where})" if where else ""))


def list_memories(
    namespace: Namespace = None,
    memory_type: MemoryType = None,
    limit: Annotated[int | None, typer.Option(help="1-1000, default 100.")] = None,
    offset: Annotated[int | None, typer.Option(help="Skip this many.")] = None,
    order_by: Annotated[
        str | None,
        typer.Option(help="created_at, updated_at, importance, confidence or access_count."),
    ] = None,
    asc: Annotated[bool, typer.Option("--asc", help="Oldest / lowest first.")] = False,
    as_json: Json = False,
) -> None:
    """List memories, newest first."""
    from memsys import runner
    from memsys.schemas import MemoryListIn
    from memsys.services import memories

    data = given(
        namespace=namespace,
        memory_type=memory_type,
        limit=limit,
        offset=offset,
        order_by=order_by,
        descending=not asc,
    )
    emit(runner.execute(memories.list_memories, MemoryListIn, data), as_json, _listed)


def _listed(r: MemoryListOut) -> None:
    if not r.memories:
        echo(f"No memories (total {r.total}).")
        return
    show_records(
        [
            (
                f"{m.id}  {m.memory_type}  {m.namespace}  importance {m.importance:.2f}  "
                f"confidence {m.confidence:.2f}  {m.created_at:%Y-%m-%d %H:%M}",
                short(m.content, 500),
            )
            for m in r.memories
        ]
    )
    last = r.offset + len(r.memories)
    echo(f"{r.offset + 1}-{last} of {r.total}")


def namespaces(as_json: Json = False) -> None:
    """List namespaces with their memory, chunk, document and preference counts."""
    from memsys import runner
    from memsys.services import namespaces as namespace_service

    emit(runner.execute_bare(namespace_service.list_with_counts), as_json, _namespaces)


def _namespaces(r: NamespaceListOut) -> None:
    if not r.namespaces:
        echo("No namespaces yet.")
        return
    show_table(
        ["namespace", "memories", "chunks", "documents", "preferences", "created"],
        [
            [
                n.namespace,
                n.memory_count,
                n.chunk_count,
                n.document_count,
                n.preference_count,
                n.created_at.strftime("%Y-%m-%d %H:%M"),
            ]
            for n in r.namespaces
        ],
    )


def register(app: typer.Typer) -> None:
    """Add the memory commands to the top level of `app`."""
    for fn, name in (
        (store, "store"),
        (recall, "recall"),
        (forget, "forget"),
        (context, "context"),
        (count, "count"),
        (list_memories, "list"),
        (namespaces, "namespaces"),
    ):
        app.command(name)(fn)
