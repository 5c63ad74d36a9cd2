"""Document commands: index-file, index-directory, delete-chunks, delete-file, clear-index,
stats."""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Annotated

import typer

from memsys.cli.output import (
    Json,
    Namespace,
    Report,
    echo,
    emit,
    err_console,
    given,
    plural,
    progress_bar,
    progress_wanted,
)

SHOWN_SOURCES = 20

if TYPE_CHECKING:
    from memsys.schemas import (
        ClearIndexOut,
        DeleteChunksOut,
        DeleteFileOut,
        IndexDirectoryOut,
        IndexFileOut,
        IndexStatsOut,
    )


def index_file(
    path: Annotated[str, typer.Argument(help="The file to index (markdown, text, code, PDF).")],
    namespace: Namespace = None,
    as_json: Json = False,
) -> None:
    """Index one file; an unchanged file is skipped, a changed one replaces its chunks."""
    from memsys import runner
    from memsys.schemas import IndexFileIn
    from memsys.services import documents

    data = given(file_path=path, namespace=namespace)
    emit(runner.execute(documents.index_file, IndexFileIn, data), as_json, _indexed_file)


def _indexed_file(r: IndexFileOut) -> None:
    if r.skipped_unchanged:
        echo(f"Unchanged: {r.source_file} ({len(r.chunk_ids)} chunks, {r.document_id})")
        return
    replaced = f", replaced {r.replaced_chunks}" if r.replaced_chunks else ""
    echo(
        f"Indexed {r.source_file}: {r.chunks_created} chunks{replaced} "
        f"({r.document_id}, namespace {r.namespace})"
    )


def index_directory(
    directory: Annotated[str, typer.Argument(help="The folder to index.")],
    namespace: Namespace = None,
    recursive: Annotated[
        bool, typer.Option("--recursive/--no-recursive", help="Include subfolders.")
    ] = True,
    async_mode: Annotated[
        bool,
        typer.Option(
            "--async/--sync",
            help="--async stores chunks first and embeds them after the commit (full-text "
            "search finds them at once); --sync embeds inside the one transaction.",
        ),
    ] = True,
    no_wait: Annotated[
        bool,
        typer.Option(
            "--no-wait",
            help="With --async: return at once and leave the embeddings queued for a running "
            "`memsys serve` / `memsys mcp` or a later index run.",
        ),
    ] = False,
    as_json: Json = False,
) -> None:
    """Index every supported file below a folder, with progress bars on a terminal."""
    from memsys import runner
    from memsys.schemas import IndexDirectoryIn
    from memsys.services import documents

    data = given(
        dir_path=directory, namespace=namespace, recursive=recursive, async_mode=async_mode
    )
    with progress_bar(progress_wanted(as_json)) as report:
        service = functools.partial(documents.index_directory, progress=report)
        result = runner.execute(service, IndexDirectoryIn, data)
        if async_mode and not no_wait:  # also finishes what earlier --no-wait runs queued
            remaining = drain_queue(report)
            result = result.model_copy(
                update={"pending_embeddings": min(result.pending_embeddings, remaining)}
            )
    emit(result, as_json, functools.partial(_indexed_directory, waited=not no_wait))


def drain_queue(report: Report | None) -> int:
    """Embed queued chunks in this process until the queue is empty; return what is left."""
    from memsys.background import EmbeddingWorker

    worker = EmbeddingWorker()
    total = _pending()
    if not total:
        return 0
    done = 0
    try:
        while batch := worker.run_once():
            done += batch
            if report:
                report("embed", done, max(total, done))
    except KeyboardInterrupt:
        left = _pending()
        err_console().print(
            f"interrupted: {left} chunks stay queued (committed and found by full-text "
            "search); `memsys serve`, `memsys mcp` or the next index run embeds them",
            markup=False,
        )
        raise typer.Exit(130) from None
    if report:  # others may have drained part of it: show the queue as finished
        report("embed", max(total, done), max(total, done))
    return _pending()


def _pending() -> int:
    """Chunks in the embedding queue (every namespace)."""
    from memsys import runner
    from memsys.services import documents

    # runner's Out is bound to BaseModel; pending_count returns a plain int.
    return runner.execute_bare(documents.pending_count)


def _indexed_directory(r: IndexDirectoryOut, waited: bool) -> None:
    echo(
        f"Indexed {plural(r.files_indexed, 'file')} ({plural(r.total_chunks, 'chunk')}) into "
        f"namespace {r.namespace}; {plural(r.skipped_duplicates, 'unchanged file')} skipped"
    )
    for failed in r.failed_files:
        echo(f"failed: {failed.file}: {failed.error}")
    if r.pending_embeddings:
        where = (
            "another process is embedding them"
            if waited
            else "a running `memsys serve` or `memsys mcp` drains the queue, or a later index run"
        )
        echo(
            f"{plural(r.pending_embeddings, 'chunk')} wait for embeddings ({where}); "
            "full-text search finds them already."
        )


def delete_chunks(
    ids: Annotated[list[str], typer.Argument(help="Chunk or memory ids.")],
    as_json: Json = False,
) -> None:
    """Delete chunks by id (golden-rule memories are protected)."""
    from memsys import runner
    from memsys.schemas import DeleteChunksIn
    from memsys.services import documents

    result = runner.execute(documents.delete_chunks, DeleteChunksIn, {"ids": ids})
    emit(result, as_json, _deleted_chunks)


def _deleted_chunks(r: DeleteChunksOut) -> None:
    echo(f"Deleted {plural(r.deleted_count, 'chunk')}")
    if r.not_found_ids:
        echo(f"Not found: {', '.join(r.not_found_ids)}")
    if r.protected_ids:
        echo(f"Protected golden rules (use `memsys forget --force`): {', '.join(r.protected_ids)}")


def delete_file(
    source_file: Annotated[str, typer.Argument(help="The indexed file's path.")],
    namespace: Namespace = None,
    as_json: Json = False,
) -> None:
    """Delete every chunk indexed from one file."""
    from memsys import runner
    from memsys.schemas import DeleteFileIn
    from memsys.services import documents

    data = given(source_file=source_file, namespace=namespace)
    emit(runner.execute(documents.delete_file, DeleteFileIn, data), as_json, _deleted_file)


def _deleted_file(r: DeleteFileOut) -> None:
    echo(f"Deleted {plural(r.deleted_count, 'chunk')} from {r.source_file}")


def clear_index(
    confirm: Annotated[bool, typer.Option("--confirm", help="Required: really delete.")] = False,
    namespace: Namespace = None,
    as_json: Json = False,
) -> None:
    """Delete every indexed document (memories are kept)."""
    from memsys import runner
    from memsys.schemas import ClearIndexIn
    from memsys.services import documents

    data = given(confirm=confirm, namespace=namespace)
    emit(runner.execute(documents.clear_index, ClearIndexIn, data), as_json, _cleared)


def _cleared(r: ClearIndexOut) -> None:
    echo(
        f"Deleted {plural(r.deleted_count, 'chunk')} from {plural(r.documents_deleted, 'document')}"
    )


def stats(as_json: Json = False) -> None:
    """Show index statistics: documents, sources, namespaces, memories, queued embeddings."""
    from memsys import runner
    from memsys.services import documents

    emit(runner.execute_bare(documents.stats), as_json, _stats)


def _stats(r: IndexStatsOut) -> None:
    echo(f"document chunks:    {r.total_documents}")
    echo(f"source files:       {r.unique_sources}")
    echo(f"memories:           {r.memory_count} ({r.golden_rule_count} golden rules)")
    echo(f"pending embeddings: {r.pending_embeddings}")
    echo(f"namespaces:         {', '.join(r.namespaces) or '-'}")
    for source in r.source_files[:SHOWN_SOURCES]:
        echo(f"  {source}")
    if len(r.source_files) > SHOWN_SOURCES:
        echo(f"  … and {len(r.source_files) - SHOWN_SOURCES} more (--json lists all)")


def register(app: typer.Typer) -> None:
    """Add the document commands to the top level of `app`."""
    for fn, name in (
        (index_file, "index-file"),
        (index_directory, "index-directory"),
        (delete_chunks, "delete-chunks"),
        (delete_file, "delete-file"),
        (clear_index, "clear-index"),
        (stats, "stats"),
    ):
        app.command(name)(fn)
