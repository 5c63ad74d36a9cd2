"""How a memory_query answer reads on a terminal (the command comes from memsys.operations)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from memsys.cli.output import echo, score, show_records

if TYPE_CHECKING:
    from memsys.schemas.query import QueryChunk, QueryOut


def _chunks(title: str, chunks: list[QueryChunk]) -> None:
    if not chunks:
        return
    echo(title)
    show_records(
        [
            (
                f"{c.id}  {c.source}  relevance {score(c.score)}  {c.tokens} tokens"
                + ("  ground truth" if c.ground_truth else ""),
                c.snippet,
            )
            for c in chunks
        ]
    )


def answered(r: QueryOut) -> None:
    how = "detected" if r.mode_detected else "given"
    echo(
        f"mode {r.mode} ({how}, confidence {r.mode_confidence:.2f}); stores "
        f"{', '.join(r.stores_queried)}"
    )
    echo(f"routing: {r.routing.reasoning}")
    for note in r.routing.notes:
        echo(f"note: {note}")
    if r.verification is not None:
        v = r.verification
        echo(f"verification: {'verified' if v.verified else 'not verified'} — {v.reason}")
    _chunks("core:", r.core_chunks)
    _chunks("extended:", r.extended_chunks)
    cut = f"{r.left_out} left out by the budget"
    if not r.core_chunks:
        echo(f"Nothing fits in {r.max_tokens} tokens: {cut}." if r.left_out else "Nothing found.")
    echo(
        f"{r.tokens_used} of {r.max_tokens} tokens{f' ({cut})' if r.left_out else ''}; "
        f"{r.latency_ms:.0f} ms; query {r.query_id}"
    )
