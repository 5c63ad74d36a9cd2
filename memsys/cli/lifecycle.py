"""Lifecycle on a terminal: renderers for decay, rehydrate and health; `memsys brief`, which
writes CORE.md / REFLECTION.md / episodes/<day>.md; and `memsys maintain`."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from memsys import regular_files
from memsys.cli import remote
from memsys.cli.output import Json, echo, emit, given, plural, short, show_table
from memsys.errors import InvalidInput

if TYPE_CHECKING:
    from memsys.schemas.lifecycle import (
        BriefOut,
        DecayOut,
        HealthOut,
        MemoryGetOut,
        PinOut,
        RehydrateOut,
    )


def decayed(r: DecayOut) -> None:
    """S002's answer, as its protocol prints it, then the bands."""
    echo(f"STATUS {r.status}")
    echo(f"ENTRIES_DECAYED {r.entries_decayed}")
    echo(f"ENTRIES_DELETED {r.entries_deleted}")
    bands = ", ".join(f"{k} {v}" for k, v in sorted(r.by_status.items()))
    echo(f"({plural(r.entries_scanned, 'memory')} scored: {bands or 'none'})")


def got(r: MemoryGetOut) -> None:
    marks = [r.memory_type or "memory", r.stage]
    marks += [m for m, on in (("pinned", r.pinned), ("golden", r.golden)) if on]
    marks += [m for m, on in (("rekindled", r.rekindled), ("lossy", r.lossy)) if on]
    echo(f"{r.id} [{', '.join(marks)}] {r.namespace}")
    if r.superseded_by:
        echo(f"an earlier version: {r.superseded_by} holds its fields since {r.valid_to}")
    echo(
        f"confidence {r.confidence}, importance {r.importance}, "
        f"{r.access_count} access{'' if r.access_count == 1 else 'es'}, {r.temperature}"
    )
    echo(r.content)


def rehydrated(r: RehydrateOut) -> None:
    if r.stage_before == r.stage:  # nothing to bring back: say so, not "restored"
        text = "its text a summary (lossy)" if r.lossy else "nothing to restore"
        echo(f"{r.memory_id}: already {r.stage}, {text}, {r.temperature}")
        echo(short(r.content, 400))
        return
    how = "full text restored" if r.restored == "full" else f"lossy ({r.restored})"
    echo(f"{r.memory_id}: {r.stage_before} → {r.stage}, {how}, {r.temperature}")
    echo(short(r.content, 400))


def pinned(r: PinOut) -> None:
    state = "pinned" if r.pinned else "unpinned"
    news = "" if r.changed else f" (already {state})"
    echo(f"{r.memory_id}: {state}{news}, {r.stage}, decay score {r.decay_score}, {r.temperature}")


def health(r: HealthOut) -> None:
    echo(", ".join(f"{k} {v}" for k, v in r.totals.items()))
    if r.contradictions:
        show_table(
            ["memory", "contradicts", "similarity"],
            [[c.id1, c.id2, c.similarity] for c in r.contradictions],
        )
    if r.low_confidence:
        show_table(["low confidence", ""], [[m.id, m.confidence] for m in r.low_confidence])
    if r.stale:
        show_table(
            ["stale", "last validated"],
            [[m.id, m.last_validated or "never"] for m in r.stale],
        )
    for advice in r.recommendations:
        echo(f"- {advice}")


def brief(
    kind: Annotated[
        str,
        typer.Argument(
            help="core (CORE.md), reflection (REFLECTION.md) or episodes (a day's log)",
            show_default=False,
        ),
    ],
    namespace: Annotated[
        str | None,
        typer.Option(
            "--namespace", "-n", help="Only this namespace (e.g. 'global', 'project:myapp')"
        ),
    ] = None,
    day: Annotated[
        str | None,
        typer.Option("--day", help="The day of the episode log (YYYY-MM-DD; default today)"),
    ] = None,
    out: Annotated[Path, typer.Option("--out", "-o", help="Folder to write the file into.")] = Path(
        "."
    ),
    as_json: Json = False,
) -> None:
    """Write CORE.md, REFLECTION.md or episodes/YYYY-MM-DD.md into a folder."""
    from memsys.operations import BY_NAME

    result: BriefOut = remote.run(  # type: ignore[assignment]
        BY_NAME["memory_brief"], given(kind=kind, namespace=namespace, day=day)
    )
    target = out / result.filename
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        regular_files.regular_or_missing(target).write_text(result.text, encoding="utf-8")
    except OSError as exc:
        raise InvalidInput(f"Cannot write {target}: {exc.strerror}") from None
    emit(result, as_json, lambda r: echo(f"Wrote {target} ({plural(r.entries, 'entry')})"))


MAX_BUDGET_S = 86_400  # a day: a pass that needs more runs again tomorrow


def maintain(
    budget: Annotated[
        float,
        typer.Option("--budget", help="Seconds after which no new batch starts."),
    ] = 300.0,
    namespace: Annotated[
        str | None, typer.Option("--namespace", "-n", help="Only this namespace")
    ] = None,
    as_json: Json = False,
) -> None:
    """Vectors the embedding queue waits for, decay scores, stage changes (demote 7 d, archive
    30 d, key only 90 d), consolidation of near-duplicates; small transactions, safe beside
    live traffic and to run twice."""
    from memsys.services import maintain as maintenance

    if not 0 < budget <= MAX_BUDGET_S:  # NaN too: a cron job with a bad value did nothing
        raise InvalidInput(
            f"--budget must be more than 0 and at most {MAX_BUDGET_S:,} seconds, got {budget}"
        )
    if namespace is not None:
        from memsys.schemas.common import check_namespace

        try:
            check_namespace(namespace)
        except ValueError as exc:
            raise InvalidInput(str(exc)) from None
    report = maintenance.run(budget_s=budget, namespace=namespace).as_dict()
    if as_json:
        emit(report, True, None)
    else:
        _maintained(report)
    if report["queue_error"]:  # the other steps ran; the queue waits for a working model
        from memsys.cli.main import fail

        reason = report["queue_error"]
        raise fail(f"the embedding queue was not drained ({reason}); the other steps ran", 1)


def _maintained(r: dict[str, Any]) -> None:
    moved = ", ".join(f"{k} {v}" for k, v in sorted(r["moved"].items())) or "nothing moved"
    stages = ", ".join(f"{k} {v}" for k, v in r["stages"].items())
    # Not complete: the time budget ran out, or a memory still waits for its vector (another
    # process is embedding it, or the model failed: an error line says so, exit 1).
    state = "complete" if r["complete"] else "not finished (run again)"
    echo(
        f"Maintenance {state} in {r['seconds']:.1f} s: {r['embedded']} embedded, "
        f"{r['rescored']} rescored, {moved}, "
        f"{r['merged']} merged, {r['counters_folded']} counters folded, "
        f"{r['traces_pruned']} traces pruned"
    )
    echo(f"Stages: {stages}")


def register(app: typer.Typer) -> None:
    app.command("maintain")(maintain)
