"""`memsys pref`: set, get, list and history of versioned preferences."""

from __future__ import annotations

import json
from datetime import datetime
from typing import TYPE_CHECKING, Annotated, Any

import typer

from memsys.cli.output import Json, echo, emit, given, short, show_table

if TYPE_CHECKING:
    from memsys.schemas import (
        PreferenceHistoryOut,
        PreferenceListOut,
        PreferenceOut,
        PreferenceSetOut,
    )

app = typer.Typer(no_args_is_help=True)

Key = Annotated[str, typer.Argument(help="Preference key.")]
Namespace = Annotated[
    str | None, typer.Option("--namespace", "-n", help="Namespace (default global).")
]
Lifecycle = Annotated[str | None, typer.Option(help="personal, project or session.")]
AsOf = Annotated[
    str | None,
    typer.Option("--as-of", help="ISO 8601 moment, e.g. 2025-01-31T12:00:00Z (UTC if no zone)."),
]


def value_of(text: str) -> Any:
    """VALUE as JSON when it parses (42, true, {"a": 1}), else the text itself."""
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def _shown(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def _when(moment: datetime | None) -> str:
    return "" if moment is None else moment.isoformat(timespec="seconds")


@app.command("set")
def set_(
    key: Key,
    value: Annotated[str, typer.Argument(help="JSON value, or plain text.")],
    namespace: Namespace = None,
    lifecycle: Lifecycle = None,
    as_json: Json = False,
) -> None:
    """Set a preference (a new version; an unchanged value writes nothing)."""
    from memsys import runner
    from memsys.schemas import PreferenceSetIn
    from memsys.services import preferences

    # `value` is always sent: JSON null must reach the schema's own "cannot be null" check.
    data = {**given(key=key, namespace=namespace, lifecycle=lifecycle), "value": value_of(value)}
    emit(runner.execute(preferences.set_value, PreferenceSetIn, data), as_json, _set)


def _set(r: PreferenceSetOut) -> None:
    state = f"version {r.version}" if r.changed else f"unchanged, version {r.version}"
    echo(f"{r.key} = {_shown(r.value)} ({state}, namespace {r.namespace}, {r.lifecycle})")


@app.command("get")
def get(key: Key, namespace: Namespace = None, as_of: AsOf = None, as_json: Json = False) -> None:
    """Show a preference now, or as it was at --as-of."""
    from memsys import runner
    from memsys.schemas import PreferenceGetIn
    from memsys.services import preferences

    data = given(key=key, namespace=namespace, as_of=as_of)
    emit(runner.execute(preferences.get, PreferenceGetIn, data), as_json, _got)


def _got(r: PreferenceOut) -> None:
    echo(f"{r.key} = {_shown(r.value)} (version {r.version} since {_when(r.valid_from)})")


@app.command("list")
def list_(
    namespace: Namespace = None,
    lifecycle: Lifecycle = None,
    as_of: AsOf = None,
    as_json: Json = False,
) -> None:
    """List the preferences of a namespace, now or as of a moment."""
    from memsys import runner
    from memsys.schemas import PreferenceListIn
    from memsys.services import preferences

    data = given(namespace=namespace, lifecycle=lifecycle, as_of=as_of)
    emit(runner.execute(preferences.list_values, PreferenceListIn, data), as_json, _listed)


def _listed(r: PreferenceListOut) -> None:
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


@app.command("history")
def history(key: Key, namespace: Namespace = None, as_json: Json = False) -> None:
    """Every version of a preference, oldest first."""
    from memsys import runner
    from memsys.schemas import PreferenceKeyIn
    from memsys.services import preferences

    data = given(key=key, namespace=namespace)
    emit(runner.execute(preferences.history, PreferenceKeyIn, data), as_json, _history)


def _history(r: PreferenceHistoryOut) -> None:
    show_table(
        ["version", "value", "lifecycle", "from", "to"],
        [
            [v.version, short(_shown(v.value)), v.lifecycle, _when(v.valid_from), _when(v.valid_to)]
            for v in r.versions
        ],
    )
