"""`memsys bench retrieval`: retrieval quality on the evaluation sets, through the same
pipeline the tools call (memsys/benchmark/). Runs against the configured database inside a
transaction that is rolled back, so it can run beside real memories."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from memsys.cli.output import Json, echo, emit
from memsys.errors import InvalidInput

app = typer.Typer(no_args_is_help=True, add_completion=False)
HALVES = ("all", "tune", "report")


@app.command("retrieval")
def retrieval(
    data_dir: Annotated[
        Path,
        typer.Option(
            "--data-dir",
            help="Folder holding locomo/, hotpotqa/ and scifact/ (see its README); "
            "the agent set ships with memsys",
        ),
    ] = Path("../shared/data"),
    sets: Annotated[
        str,
        typer.Option(
            "--sets", help="Comma-separated: locomo, hotpotqa, hotpotqa_2wiki, scifact, agent"
        ),
    ] = "locomo,hotpotqa,hotpotqa_2wiki,scifact",
    quick: Annotated[bool, typer.Option("--quick", help="A slice of every set")] = False,
    half: Annotated[
        str,
        typer.Option("--half", help="all, tune (odd-numbered questions) or report (even)"),
    ] = "all",
    as_json: Json = False,
) -> None:
    """Recall@k / nDCG of every channel, the fused order and its ablations, with the dense
    and plain-BM25 baselines computed in the same run; exit 1 when fused ranks below its best
    single channel on any metric of any set (for `agent`, of any of its stores)."""
    from memsys.benchmark import harness
    from memsys.benchmark.sets import SETS

    names = [s.strip() for s in sets.split(",") if s.strip()]
    unknown = [n for n in names if n not in SETS]
    if not names or unknown:
        raise InvalidInput(
            f"--sets: unknown {unknown or 'nothing given'}; known: {', '.join(SETS)}"
        )
    if half not in HALVES:
        raise InvalidInput(f"--half must be one of {', '.join(HALVES)}, got {half!r}")
    if any(n != "agent" for n in names) and not data_dir.is_dir():
        raise InvalidInput(f"--data-dir: no such folder: {data_dir}")
    results = {}
    for name in names:
        results[name] = harness.run_set(name, data_dir, quick=quick, which=half)
        if not as_json:
            for line in harness.render(name, results[name]):
                echo(line)
            echo("")
    if as_json:
        emit({"sets": results}, True, None)
    if not all(harness.floor_holds(r) for r in results.values()):
        raise typer.Exit(1)
