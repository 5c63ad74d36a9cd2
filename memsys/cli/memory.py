"""How memory results read on a terminal (the commands come from memsys.operations)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import typer

from memsys.cli.output import echo, score, short, show_records, show_table

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


def stored(r: MemoryStoreOut) -> None:
    if r.duplicate:
        echo(f"Duplicate: already stored as {r.id} in namespace {r.namespace}")
    else:
        echo(f"Stored {r.id} ({r.memory_type}, namespace {r.namespace})")


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


def show_context(r: MemoryContextOut) -> None:
    typer.echo(r.context, nl=not r.context.endswith("\n"))


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
