"""How memory results read on a terminal (the commands come from memsys.operations), and
store-batch, written by hand: it reads a file and stores it batch by batch."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Annotated, Any

import typer

from memsys.cli.output import (
    Json,
    echo,
    emit,
    inert,
    json_lines,
    path_given,
    plural,
    progress_bar,
    progress_wanted,
    score,
    short,
    show_records,
    show_table,
    warn,
)
from memsys.errors import InvalidInput, MemsysError

if TYPE_CHECKING:
    from memsys.schemas import (
        MemoryContextOut,
        MemoryCountOut,
        MemoryForgetOut,
        MemoryListOut,
        MemoryRecallOut,
        MemoryStoreBatchOut,
        MemoryStoreOut,
        NamespaceListOut,
    )
    from memsys.schemas.learning import MemoryApplyOut, MemoryOutcomeOut, ValidationHistoryOut


def stored(r: MemoryStoreOut) -> None:
    if r.revived:
        echo(f"Duplicate: {r.id} in namespace {r.namespace}, aged, made active again")
    elif r.duplicate:
        echo(f"Duplicate: already stored as {r.id} in namespace {r.namespace}")
    else:
        echo(f"Stored {r.id} ({r.memory_type}, namespace {r.namespace})")
    for warning in r.warnings:  # a secret-like string: the user should know it is stored
        warn(warning)


def recalled(r: MemoryRecallOut) -> None:
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


def forgotten(r: MemoryForgetOut) -> None:
    verb = "Purged" if r.purged else "Forgot"
    echo(
        f"{verb} {r.deleted_count} "
        + ("memory" if r.deleted_count == 1 else "memories")
        + (f": {', '.join(r.deleted_ids)}" if r.deleted_ids else "")
    )
    if r.protected_ids:
        echo(f"Protected golden rules (use --force): {', '.join(r.protected_ids)}")
    if r.pinned_kept_ids:
        noun = "memory" if r.pinned_kept_count == 1 else "memories"
        echo(
            f"Kept {r.pinned_kept_count} pinned {noun} (use --force): "
            + ", ".join(r.pinned_kept_ids)
        )


def show_context(r: MemoryContextOut) -> None:
    typer.echo(inert(r.context), nl=not r.context.endswith("\n"))


def counted(r: MemoryCountOut) -> None:
    where = ", ".join(f"{k}={v}" for k, v in r.filters.items() if v is not None)
    noun = "memory" if r.count == 1 else "memories"
    echo(f"{r.count} {noun}" + (f" ({where})" if where else ""))


def listed(r: MemoryListOut) -> None:
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


def show_namespaces(r: NamespaceListOut) -> None:
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


FILE_BATCH = 500


def store_batch(
    path: Annotated[
        str,
        typer.Argument(
            help="A JSON-lines file, one memory per line as memory_store takes it "
            '({"content": …, "memory_type": …}); - reads stdin.',
            callback=path_given,
        ),
    ],
    namespace: Annotated[
        str | None, typer.Option("--namespace", "-n", help="For lines that name none.")
    ] = None,
    as_json: Json = False,
) -> None:
    """Store every memory of a JSON-lines file, embedded in batches. Every line is checked
    before anything is stored; then batches of 500 are stored, each all or nothing."""
    store_file(path, {"namespace": namespace} if namespace else {}, as_json)


def store_file(path: str, defaults: dict[str, Any], as_json: bool) -> None:
    """`memsys store --from-file` and `memsys store-batch`: every line of a JSON-lines file
    checked first (with `defaults` for the fields it does not set), then stored in batches
    of 500, each all or nothing."""
    from memsys.cli import remote
    from memsys.operations import BY_NAME
    from memsys.schemas import MemoryStoreBatchOut, MemoryStoreIn, parse

    items = []
    sizes = []
    for n, item in json_lines(path):
        item = {**defaults, **item}
        try:
            sizes.append(len(parse(MemoryStoreIn, item).content))
        except InvalidInput as exc:
            raise InvalidInput(f"line {n}: {exc.message}") from None
        items.append(item)
    if not items:
        raise InvalidInput(f"No memories in {path}")
    op = BY_NAME["memory_store_batch"]
    results: list[MemoryStoreOut] = []
    with progress_bar(progress_wanted(as_json)) as report:
        for start, end in _batches(sizes):
            data = {"memories": items[start:end]}
            try:
                done = remote.run(op, data)
            except MemsysError as exc:
                if not results:
                    raise
                # The batches before this one are stored; storing the file again skips them
                # (duplicates).
                stored = f"{plural(len(results), 'line')} of {len(items)} stored before this"
                raise type(exc)(f"{stored}: {exc.message}") from None
            assert isinstance(done, MemoryStoreBatchOut)
            results.extend(done.results)
            if report:
                report("store", len(results), len(items))
    duplicates = sum(r.duplicate for r in results)
    total = MemoryStoreBatchOut(
        results=results, stored=len(results) - duplicates, duplicates=duplicates
    )
    emit(total, as_json, stored_batch)


def _batches(sizes: list[int]) -> Iterator[tuple[int, int]]:
    """[start, end) of each batch of a file: at most FILE_BATCH lines, and no more content
    than one memory_store_batch call takes (memsys.schemas.memories.check_batch_load)."""
    from memsys.config import get_settings
    from memsys.schemas.memories import BATCH_CONTENT_LIMITS

    limit = BATCH_CONTENT_LIMITS * get_settings().max_content_chars
    start, held = 0, 0
    for i, size in enumerate(sizes):
        if i > start and (i - start == FILE_BATCH or held + size > limit):
            yield start, i
            start, held = i, 0
        held += size
    yield start, len(sizes)


def stored_batch(r: MemoryStoreBatchOut) -> None:
    echo(f"Stored {plural(r.stored, 'memory')}; {plural(r.duplicates, 'duplicate')} already there")
    for revived in dict.fromkeys(item.id for item in r.results if item.revived):
        echo(f"{revived}: aged, made active again")  # as `memsys store` says of one
    for item in r.results:
        for warning in item.warnings:
            warn(f"{item.id}: {warning}")


def applied(r: MemoryApplyOut) -> None:
    echo(f"Applying {r.memory_id} (event {r.event_id}); report with `memsys outcome`")


def learned(r: MemoryOutcomeOut) -> None:
    verdict = "success" if r.outcome_success else "failure"
    promoted = " — now a golden rule" if r.promoted else ""
    echo(
        f"{r.memory_id}: {verdict}, confidence {r.old_confidence:.2f} → "
        f"{r.new_confidence:.2f}{promoted}"
    )
    if r.warning:
        warn(r.warning)


def _moved(old: float | None, new: float | None) -> str:
    return "" if old is None or new is None else f"{old:.2f} → {new:.2f}"


def validations(r: ValidationHistoryOut) -> None:
    s = r.summary
    rate = "n/a" if s.success_rate is None else f"{s.success_rate:.0%}"
    echo(
        f"{s.total_applications} applications, {s.success_count} succeeded, "
        f"{s.failure_count} failed (success rate {rate})"
    )
    show_table(
        ["id", "when", "event", "confidence", "context / error"],
        [
            [
                e.id,
                f"{e.timestamp:%Y-%m-%d %H:%M}",
                e.event_type,
                ""
                if e.new_confidence is None
                else f"{e.old_confidence:.2f} → {e.new_confidence:.2f}",
                short(e.context or e.error_msg or "", 60),
            ]
            for e in r.events
        ],
    )
