"""Who the current call runs for, and how a transaction tells PostgreSQL.

A `Scope` is the set of namespaces a caller may read and write (glob patterns such as
`project:acme*`). The HTTP auth layer sets it for the request (a contextvar, carried into the
worker threads that run services); local front ends (CLI in process, MCP stdio) and the admin
token keep the default, every namespace. `session_scope()` calls `apply()` at the start of each
transaction: for a scoped caller it switches to the `memsys_tenant` role and sets the patterns
with `set_config(…, true)`, which last until the transaction ends, and the row-level security
policies of the migration `5d2f8e61c0a7` filter every statement by them. Admin transactions
send nothing: their connections carry `memsys.read=*` / `memsys.write=*` as options.
"""

from __future__ import annotations

import fnmatch
import logging
import re
import threading
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

from sqlalchemy import Engine, text
from sqlalchemy.orm import Session

from memsys.errors import DatabaseUnavailable, MemsysError, Protected

log = logging.getLogger(__name__)

TENANT_ROLE = "memsys_tenant"
ALL = "*"
PATTERN = re.compile(r"^(\*|[A-Za-z0-9*][A-Za-z0-9_.:/@*-]{0,127})$")
# Connection options of every memsys connection: outside a scoped transaction, all namespaces.
CONNECTION_OPTIONS = "-c memsys.read=* -c memsys.write=*"
# Where the HTTP auth layer leaves the caller's Scope in the ASGI scope (read by MCP tools).
ASGI_KEY = "memsys.scope"


@dataclass(frozen=True)
class Scope:
    """Namespaces (glob patterns) a caller may read and write; token_id None is an admin."""

    read: tuple[str, ...]
    write: tuple[str, ...]
    token_id: str | None = None

    @property
    def admin(self) -> bool:
        return self.token_id is None and ALL in self.read and ALL in self.write


ADMIN = Scope(read=(ALL,), write=(ALL,))
_current: ContextVar[Scope] = ContextVar("memsys_scope", default=ADMIN)


def current() -> Scope:
    return _current.get()


# What a caller without the admin token reads instead of a database error: that names the
# server's database (address, port, user). The server log has it.
UNSHOWN = "The database does not answer; the server log (or the admin token) says why"


def shown(exc: MemsysError, scope: Scope | None) -> str:
    """The message of `exc` as `scope`'s caller may read it (None: a caller not known, as
    before authentication): a database error only for the admin, logged for the operator."""
    if isinstance(exc, DatabaseUnavailable) and (scope is None or not scope.admin):
        log.warning("database unavailable: %s", exc.message)
        return UNSHOWN
    return exc.message


def may_read(namespace: str) -> bool:
    """Whether the caller's scope may read rows of `namespace`: for what the policies do not
    filter, a snapshot file's records (memory_diff)."""
    return any(fnmatch.fnmatchcase(namespace, p) for p in current().read)


def may_write(namespace: str) -> bool:
    """Whether the caller's scope may change rows of `namespace` (the policies decide; this
    lets a read skip optional writes — rekindling — that the policies would refuse)."""
    return any(fnmatch.fnmatchcase(namespace, p) for p in current().write)


def require_write(namespace: str) -> None:
    """Refuse (Protected, 403) a change of `namespace` the caller may not make, before it is
    tried: the policies would drop a read-only token's UPDATE of rows it can read without a
    word, and the call would answer as if it had done it (or fail on the row it missed)."""
    if not may_write(namespace):
        raise Protected(denied_message())


@contextmanager
def using(scope: Scope) -> Iterator[Scope]:
    """Run the block (and the threads it starts with a copied context) under `scope`."""
    token = _current.set(scope)
    try:
        yield scope
    finally:
        _current.reset(token)


def check_pattern(pattern: str) -> str:
    """A namespace pattern: a namespace's characters, with `*` for any run of them."""
    if not PATTERN.match(pattern):
        raise ValueError(
            f"Invalid namespace pattern: {pattern!r}. Use a namespace, optionally with * "
            "(e.g. 'project:acme', 'project:acme*', '*')"
        )
    return pattern


def like_patterns(patterns: tuple[str, ...]) -> str:
    """The glob patterns as the comma-separated LIKE patterns the policies read."""
    if ALL in patterns:
        return ALL
    out = []
    for p in patterns:
        escaped = p.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
        out.append(escaped.replace("*", "%"))
    return ",".join(out)


_SCOPE = text(
    "SELECT set_config('memsys.read', :read, true), set_config('memsys.write', :write, true), "
    "set_config('memsys.token', :token, true)"
)
_SCOPE_AS_TENANT = text(
    f"SELECT set_config('role', '{TENANT_ROLE}', true), set_config('memsys.read', :read, true), "
    "set_config('memsys.write', :write, true), set_config('memsys.token', :token, true)"
)
_ROLE_CHECK = text(
    f"""
    SELECT r.rolsuper OR r.rolbypassrls AS bypasses,
           EXISTS (SELECT 1 FROM pg_roles t WHERE t.rolname = '{TENANT_ROLE}'
                   AND pg_has_role(current_user, t.oid, 'MEMBER')) AS tenant
    FROM pg_roles r WHERE r.rolname = current_user
    """
)
_switch_role: weakref.WeakKeyDictionary[Engine, bool] = weakref.WeakKeyDictionary()
_switch_lock = threading.Lock()


def _needs_role(session: Session, engine: Engine) -> bool:
    """Whether scoped transactions switch to the tenant role on this engine (checked once).
    A user that bypasses row-level security and cannot become the tenant role cannot serve
    scoped tokens at all: refused rather than run unfiltered."""
    if engine not in _switch_role:
        row = session.execute(_ROLE_CHECK).one()
        if row.bypasses and not row.tenant:
            raise DatabaseUnavailable(
                f"Scoped tokens need the role {TENANT_ROLE} (created by `memsys db upgrade` "
                "when the database user may create roles): this user bypasses row-level "
                "security. Use the admin token, or create the role and grant it to this user."
            )
        with _switch_lock:
            _switch_role[engine] = bool(row.tenant)
    return _switch_role[engine]


def apply(session: Session) -> None:
    """Start the session's transaction under the current scope (nothing to do for admins)."""
    scope = current()
    if scope.admin:
        return
    engine = session.get_bind()
    assert isinstance(engine, Engine)
    statement = _SCOPE_AS_TENANT if _needs_role(session, engine) else _SCOPE
    session.execute(
        statement,
        {
            "read": like_patterns(scope.read) or "",
            "write": like_patterns(scope.write) or "",
            "token": scope.token_id or "scoped",
        },
    )


def denied_message() -> str:
    """What a caller is told when PostgreSQL refused a change outside its namespaces."""
    scope = current()
    writable = ", ".join(scope.write) or "none (a read-only token)"
    return f"Not allowed: this token may not change that namespace (it may write: {writable})"
