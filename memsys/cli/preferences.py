"""`memsys pref`: how preferences read on a terminal (the set, get, list and history
commands come from memsys.operations)."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

import typer

from memsys.cli.output import echo, json_dumps, short, show_table, warn

if TYPE_CHECKING:
    from memsys.schemas import (
        PreferenceDeleteOut,
        PreferenceHistoryOut,
        PreferenceListOut,
        PreferenceOut,
        PreferenceSetOut,
    )

app = typer.Typer(no_args_is_help=True)


def _shown(value: Any) -> str:
    return json_dumps(value, indent=None)


def _when(moment: datetime | None) -> str:
    return "" if moment is None else moment.isoformat(timespec="seconds")


def was_set(r: PreferenceSetOut) -> None:
    state = f"version {r.version}" if r.changed else f"unchanged, version {r.version}"
    echo(f"{r.key} = {_shown(r.value)} ({state}, namespace {r.namespace}, {r.lifecycle})")
    for warning in r.warnings:  # a secret-like string: stored, and the user should know
        warn(warning)


def got(r: PreferenceOut) -> None:
    echo(f"{r.key} = {_shown(r.value)} (version {r.version} since {_when(r.valid_from)})")


def listed(r: PreferenceListOut) -> None:
    if not r.preferences:
        echo(f"No preferences in namespace {r.namespace}.")
        return
    show_table(
        ["key", "value", "lifecycle", "version", "since"],
        [
            [p.key, short(_shown(p.value)), p.lifecycle, p.version, _when(p.valid_from)]
            for p in r.preferences
        ],
    )


def history(r: PreferenceHistoryOut) -> None:
    show_table(
        ["version", "value", "lifecycle", "from", "to"],
        [
            [v.version, short(_shown(v.value)), v.lifecycle, _when(v.valid_from), _when(v.valid_to)]
            for v in r.versions
        ],
    )


def deleted(r: PreferenceDeleteOut) -> None:
    echo(f"Deleted {r.key} in namespace {r.namespace} (version {r.version} kept in history)")
