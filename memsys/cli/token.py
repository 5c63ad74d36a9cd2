"""`memsys token`: scoped API tokens for the HTTP server (REST and MCP over HTTP).

These commands work on the database directly (they are admin commands and never go
through a running server): a token is usable by the server as soon as it is created.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Annotated

import typer

from memsys.cli.output import Json, echo, emit, show_table
from memsys.errors import InvalidInput

if TYPE_CHECKING:
    from memsys.schemas.tokens import TokenCreated, TokenInfo, TokenListOut

app = typer.Typer(no_args_is_help=True)
_DURATION = re.compile(r"^(\d+)([mhd])$")
_UNITS = {"m": "minutes", "h": "hours", "d": "days"}


def expiry(text: str | None) -> datetime | None:
    """'30d', '12h', '90m' from now, or an ISO 8601 time (UTC unless it says otherwise)."""
    if text is None:
        return None
    match = _DURATION.match(text.strip())
    if match:
        try:
            return datetime.now(UTC) + timedelta(**{_UNITS[match[2]]: int(match[1])})
        except (OverflowError, ValueError):
            raise InvalidInput(f"--expires {text!r} is too far in the future") from None
    try:
        moment = datetime.fromisoformat(text.strip())
    except ValueError:
        raise InvalidInput(
            f"--expires {text!r} is neither a duration (30d, 12h, 90m) nor an ISO 8601 time"
        ) from None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def _when(moment: datetime | None) -> str:
    return "" if moment is None else moment.isoformat(timespec="seconds")


def _created(r: TokenCreated) -> None:
    echo(f"{r.id}  {r.name}  {r.mode}  {', '.join(r.namespaces)}")
    if r.expires_at:
        echo(f"expires {_when(r.expires_at)}")
    echo(f"secret (shown once; send it as 'Authorization: Bearer <secret>'):\n{r.secret}")


def _listed(r: TokenListOut) -> None:
    show_table(
        ["id", "name", "mode", "namespaces", "expires", "last used", "state"],
        [
            [
                t.id,
                t.name,
                t.mode,
                ", ".join(t.namespaces),
                _when(t.expires_at),
                _when(t.last_used_at),
                "active" if t.active else ("revoked" if t.revoked_at else "expired"),
            ]
            for t in r.tokens
        ],
    )


def _revoked(r: TokenInfo) -> None:
    echo(f"Revoked {r.id} ({r.name}) at {_when(r.revoked_at)}")


@app.command()
def create(
    name: Annotated[str, typer.Argument(help="A label for the token (who or what uses it).")],
    namespace: Annotated[
        list[str],
        typer.Option(
            "--namespace",
            "-n",
            help="A namespace pattern the token may use ('project:acme', 'project:acme*', "
            "'*'); repeat for several.",
        ),
    ],
    write: Annotated[
        bool, typer.Option("--write", help="Read-write (default: read only).")
    ] = False,
    expires: Annotated[
        str | None,
        typer.Option("--expires", help="Lifetime (30d, 12h, 90m) or an ISO 8601 time."),
    ] = None,
    as_json: Json = False,
) -> None:
    """Create a scoped token; its secret is printed once and stored only as a hash."""
    from memsys import runner
    from memsys.schemas.tokens import TokenCreateIn
    from memsys.services import tokens

    data = {
        "name": name,
        "namespaces": namespace,
        "mode": "read-write" if write else "read",
        "expires_at": expiry(expires),
    }
    emit(runner.execute(tokens.create, TokenCreateIn, data), as_json, _created)


@app.command("list")
def list_tokens(as_json: Json = False) -> None:
    """List tokens (never their secrets)."""
    from memsys import runner
    from memsys.services import tokens

    emit(runner.execute_bare(tokens.list_all), as_json, _listed)


@app.command()
def revoke(
    token_id: Annotated[str, typer.Argument(help="The token's id (tok_…).")],
    as_json: Json = False,
) -> None:
    """Revoke a token: requests that carry it are refused from now on."""
    from memsys import runner
    from memsys.services import tokens

    emit(runner.execute_bare(lambda s: tokens.revoke(s, token_id)), as_json, _revoked)
