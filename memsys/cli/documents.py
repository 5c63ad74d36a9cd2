"""Document commands: how their results read, and index-directory, the one command written
by hand (progress bars on a terminal, and it drains the embedding queue itself)."""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Annotated

import typer

from memsys.cli.output import (
    Json,
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


def indexed_file(r: IndexFileOut) -> None:
    if r.skipped_unchanged:
        echo(f"Unchanged: {r.source_file} ({plural(len(r.chunk_ids), 'chunk')}, {r.document_id})")
        return
    replaced = f", replaced {r.replaced_chunks}" if r.replaced_chunks else ""
    echo(
        f"Indexed {r.source_file}: {plural(r.chunks_created, 'chunk')}{replaced} "
        f"({r.document_id}, namespace {r.namespace})"
    )
    if r.pending_embeddings:
        echo(
            f"{plural(r.pending_embeddings, 'chunk')} wait for embeddings (the server's worker "
            "embeds them); full-text search finds them already."
        )


def index_directory(
    directory: Annotated[str, typer.Argument(help="The folder to index.")],
    namespace: Annotated[
        str | None,
        typer.Option("--namespace", "-n", help="Namespace to index into (default: default)."),
    ] = None,
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
    force: Annotated[
        bool,
        typer.Option(
            "--force",
            help="Drop the files indexed from the folder before even when it, or a subfolder "
            "still there, now holds none (without it an empty folder, a disk not mounted, "
            "keeps them).",
        ),
    ] = False,
    as_json: Json = False,
) -> None:
    """Index every supported file below a folder, with progress bars on a terminal."""
    from memsys import runner
    from memsys.schemas import IndexDirectoryIn
    from memsys.services import folders, indexing

    data = given(
        dir_path=directory,
        namespace=namespace,
        recursive=recursive,
        async_mode=async_mode,
        force=force,
    )
    with progress_bar(progress_wanted(as_json)) as report, indexing.callers_own_paths():
        service = functools.partial(folders.index_directory, progress=report)
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

    worker = EmbeddingWorker(batch=32)  # small batches: the bar moves every second or so
    total = _pending()
    if not total:
        return 0
    done = 0
    try:
        for _ in range(3):  # bounded: rows another process holds and never embeds stay queued
            while batch := worker.run_once():
                done += batch
                if report:
                    report("embed", done, max(total, done))
            if not _others_finish(report, total):
                break
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


OTHERS_WAIT_S = 30.0  # how long the queue may stand still while another process holds it


def _others_finish(report: Report | None, total: int) -> bool:
    """When what is left is being embedded by another process (a running server takes
    batches too, locked from this one): wait while it shrinks, so the bar and the answer
    tell the end, not a batch in flight. True when rows came free for this process to take
    (the other one stopped), False when the queue is empty or stands still."""
    import time

    left, still_since = _pending(), time.monotonic()
    while left:
        time.sleep(0.25)
        now = _pending()
        if now < left:
            left, still_since = now, time.monotonic()
            if report:
                report("embed", total - left, total)
        elif time.monotonic() - still_since > OTHERS_WAIT_S:
            return True  # nobody is moving it: try to take the rows again (once more)
    return False


def _pending() -> int:
    """Chunks in the embedding queue (every namespace)."""
    from memsys import runner
    from memsys.services import embedding_queue

    return runner.execute_bare(embedding_queue.pending_count)


def _indexed_directory(r: IndexDirectoryOut, waited: bool) -> None:
    echo(
        f"Indexed {plural(r.files_indexed, 'file')} ({plural(r.total_chunks, 'chunk')}) into "
        f"namespace {r.namespace}; {plural(r.skipped_duplicates, 'unchanged file')} skipped"
    )
    for failed in r.failed_files:
        echo(f"failed: {failed.file}: {failed.error}")
    if r.removed_files:
        echo(
            f"Dropped {plural(len(r.removed_files), 'deleted file')} "
            f"({plural(r.removed_chunks, 'chunk')}):"
        )
        for removed in r.removed_files:
            echo(f"removed: {removed}")
    if r.warning:
        echo(f"warning: {r.warning}")
        for kept in r.kept_files:
            echo(f"kept: {kept}")
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


def deleted_chunks(r: DeleteChunksOut) -> None:
    echo(f"Deleted {plural(r.deleted_count, 'chunk')}")
    if r.not_found_ids:
        echo(f"Not found: {', '.join(r.not_found_ids)}")
    if r.protected_ids:
        echo(f"Protected golden rules (use `memsys forget --force`): {', '.join(r.protected_ids)}")


def deleted_file(r: DeleteFileOut) -> None:
    echo(f"Deleted {plural(r.deleted_count, 'chunk')} from {r.source_file}")


def cleared(r: ClearIndexOut) -> None:
    echo(
        f"Deleted {plural(r.deleted_count, 'chunk')} from {plural(r.documents_deleted, 'document')}"
    )


def show_stats(r: IndexStatsOut) -> None:
    echo(f"document chunks:    {r.total_documents}")
    echo(f"source files:       {r.unique_sources}")
    echo(f"memories:           {r.memory_count} ({r.golden_rule_count} golden rules)")
    echo(f"pending embeddings: {r.pending_embeddings}")
    echo(f"namespaces:         {', '.join(r.namespaces) or '-'}")
    for source in r.source_files[:SHOWN_SOURCES]:
        echo(f"  {source}")
    if len(r.source_files) > SHOWN_SOURCES:
        echo(f"  … and {len(r.source_files) - SHOWN_SOURCES} more (--json lists all)")
