"""Namespaces: created by writes, required by reads, listed with their counts."""

import time
from collections.abc import Iterable
from typing import Any

from sqlalchemy import ColumnElement, SQLColumnExpression, String, func, literal, select, text
from sqlalchemy.exc import OperationalError
from sqlalchemy.orm import Session

from memsys.config import get_settings
from memsys.db import Statement, in_one_trip, remember_transaction_time, take_turns_all
from memsys.errors import Busy, NotFound
from memsys.models import Chunk
from memsys.schemas import NamespaceInfo, NamespaceListOut

_LIST = text(
    """
    SELECT n.name AS namespace, n.created_at,
           coalesce(c.memories, 0) AS memory_count,
           coalesce(c.chunks, 0) AS chunk_count,
           coalesce(d.documents, 0) AS document_count,
           coalesce(p.preferences, 0) AS preference_count
    FROM namespace n
    LEFT JOIN (
        SELECT namespace,
               count(*) FILTER (WHERE doc_type = 'memory') AS memories,
               count(*) FILTER (WHERE doc_type = 'document') AS chunks
        FROM chunk WHERE valid_to IS NULL GROUP BY namespace
    ) c ON c.namespace = n.name
    LEFT JOIN (
        -- as get_index_stats: not a file whose chunks delete_chunks closed, every one
        SELECT namespace, count(*) AS documents FROM document d
        WHERE valid_to IS NULL AND (chunk_count = 0 OR EXISTS (
            SELECT 1 FROM chunk c WHERE c.namespace = d.namespace AND c.document_id = d.id
              AND c.valid_to IS NULL))
        GROUP BY namespace
    ) d ON d.namespace = n.name
    LEFT JOIN (
        SELECT namespace, count(*) AS preferences FROM preference
        WHERE valid_to IS NULL GROUP BY namespace
    ) p ON p.namespace = n.name
    ORDER BY n.name
    """
)


# A namespace's writers share its write turn; an import takes it alone, for every namespace of
# its snapshot at once, before it writes (write_alone). An import holds a namespace's BM25
# statistics (corpus_stat, kept by triggers) from its first row to its commit, and creates the
# entities its rows name after writing them. A writer that created one of those entities and
# then waited for the statistics would deadlock with it, and PostgreSQL rolls back whichever
# waited second: the import, minutes of work. With the turn a writer waits at its start,
# holding nothing the import needs.
_WRITERS = "memsys:namespace-writers"
_LOCK_NOT_AVAILABLE = "55P03"
TURN_PREFIX = f"{_WRITERS}\x1f"  # + a namespace's name: the key of its turn (for SQL)
# The common case in one round trip: the turn is tried, not waited for, and the namespace
# made only once it is taken; when an import holds it, ensure waits for it (_wait_for_turns).
_ENSURE = text(
    """
    WITH turn AS (SELECT pg_try_advisory_xact_lock_shared(hashtextextended(:turn, 0)) AS taken),
    made AS (INSERT INTO namespace (name) SELECT :name FROM turn WHERE taken ON CONFLICT DO NOTHING)
    SELECT taken FROM turn
    """
)


def ensure(session: Session, name: str, *then: Statement) -> list[list[Any]] | None:
    """Create the namespace if it does not exist yet (idempotent, safe under concurrency),
    and take a writer's share of its write turn until the transaction ends. Writers call it
    before their first write in the namespace; one that writes in several namespaces calls
    it for each, in sorted order (as write_alone takes them).

    `then`: statements sent in the same round trip (with the BEGIN that opens the
    transaction); their rows when the share was taken at once. None when it had to be
    waited for: they ran before the caller held it, so a lock among them must be taken only
    under the share (db.turns_statement's `holding`, turn_key), and the caller runs them
    again."""
    params = {"name": name, "turn": _turn(name)}
    first, *rest = in_one_trip(session, (_ENSURE, params), *then)
    if first[0].taken:
        return rest
    _wait_for_turns(session, [name])
    session.execute(_ENSURE, params)  # the share is held now: taken again at once
    return None


def turn_key(name: str) -> str:
    """The key of a namespace's write turn (for db.turns_statement's `holding`)."""
    return _turn(name)


_TRY_SHARE = text("SELECT pg_try_advisory_xact_lock_shared(hashtextextended(:turn, 0))")


def share(session: Session, names: Iterable[str]) -> None:
    """A writer's share of these namespaces' write turns (as ensure takes, without creating
    them): for a change of rows that exist, before it reads them FOR UPDATE or writes them.
    One namespace is tried first (one round trip); several are waited for in sorted order
    (a share tried out of order and kept could close a cycle with an import that waits)."""
    wanted = sorted(set(names))
    if len(wanted) == 1 and session.scalar(_TRY_SHARE, {"turn": _turn(wanted[0])}):
        return
    if wanted:
        _wait_for_turns(session, wanted)


# The limits a wait for turns sets for itself, and gives back after (the transaction's own).
_LIMITS = text(
    "SELECT current_setting('lock_timeout') AS lock, current_setting('statement_timeout') "
    "AS statement, (SELECT setting::bigint FROM pg_settings WHERE name = 'statement_timeout') "
    "AS statement_ms"
)
_SET_LIMITS = text(
    "SELECT set_config('lock_timeout', :lock, true), "
    "set_config('statement_timeout', :statement, true)"
)
_QUERY_CANCELED = "57014"  # statement_timeout


def _wait_for_turns(session: Session, names: list[str]) -> None:
    """An import may write alone in (some of) these namespaces: wait for it up to
    MEMSYS_BUSY_WAIT_S in all (not for each turn), in sorted order as write_alone takes them,
    else refuse (Busy) — the caller's transaction is then rolled back, nothing of it
    written."""
    wait = get_settings().busy_wait_s
    ms = max(1, round(wait * 1000))
    before = session.execute(_LIMITS).one()
    # lock_timeout bounds each turn's wait; statement_timeout the statement that takes them
    # all (several namespaces), unless the transaction's own limit is shorter.
    statement, ours = before.statement, {_LOCK_NOT_AVAILABLE}
    if wait > 0 and (before.statement_ms == 0 or before.statement_ms > ms):
        statement, ours = f"{ms}ms", {_LOCK_NOT_AVAILABLE, _QUERY_CANCELED}
    session.execute(_SET_LIMITS, {"lock": f"{ms}ms", "statement": statement})
    try:
        take_turns_all(session, [(_turn(name),) for name in names], shared=True)
    except OperationalError as exc:
        if getattr(exc.orig, "sqlstate", None) not in ours:  # else the runner's own error
            raise
        shown = ", ".join(repr(n) for n in names[:5])
        if len(names) > 5:
            shown += f" and {len(names) - 5} more"
        raise Busy(
            f"An import (or a folder's indexing, or a purge) is writing namespace {shown} "
            f"and holds it until it commits; this call waited {wait:g} s (MEMSYS_BUSY_WAIT_S) "
            "and wrote nothing. Try again when the import ends."
        ) from None
    session.execute(_SET_LIMITS, {"lock": before.lock, "statement": before.statement})


def share_of_memory(session: Session, memory_id: str) -> None:
    """`share` for the namespace of a live memory (nothing when there is none: the caller's
    own read then says it is not found)."""
    found = session.scalar(
        select(Chunk.namespace).where(
            Chunk.doc_type == "memory", Chunk.valid_to.is_(None), Chunk.id == memory_id
        )
    )
    if found is not None:
        share(session, [found])


def share_scope(session: Session, namespace: str | None) -> None:
    """`share` for one namespace, or for every namespace when the call names none."""
    share(session, [namespace] if namespace else names(session))


def share_if_free(session: Session, name: str) -> bool:
    """The writer's share of one namespace's turn if no import holds it now, else False:
    for a read's optional write (rekindling), which never waits."""
    return bool(session.scalar(_TRY_SHARE, {"turn": _turn(name)}))


def free_to_write(namespace: SQLColumnExpression[str]) -> ColumnElement[bool]:
    """A condition for a read that locks rows to change them and never waits (SKIP LOCKED):
    true, with the writer's share of the row's namespace taken, unless an import writes in
    that namespace now (its rows are left for the next run, as locked rows are)."""
    turn = literal(TURN_PREFIX, String) + namespace
    return func.pg_try_advisory_xact_lock_shared(func.hashtextextended(turn, 0))


_TRY_ALONE = text("SELECT pg_try_advisory_xact_lock(hashtextextended(:turn, 0))")
_POLL_S = 0.05


def write_alone_briefly(session: Session, names: Iterable[str]) -> None:
    """write_alone for a call that takes milliseconds (a purge), without queueing: a waiting
    exclusive request would hold up every writer that comes after it, so the turn is tried
    every 50 ms while writers in flight finish, up to MEMSYS_BUSY_WAIT_S, else Busy."""
    wait = get_settings().busy_wait_s
    deadline = time.monotonic() + wait
    for name in sorted(set(names)):
        while not session.scalar(_TRY_ALONE, {"turn": _turn(name)}):
            if time.monotonic() >= deadline:
                raise Busy(
                    f"Other calls are writing in namespace {name!r} (a store, a decay, "
                    f"maintenance or an import); the purge waited {wait:g} s "
                    "(MEMSYS_BUSY_WAIT_S) and erased nothing. Try again shortly."
                )
            time.sleep(_POLL_S)


def write_alone(session: Session, names: Iterable[str]) -> None:
    """Wait until no other transaction writes in these namespaces, and keep others from
    starting to until this one ends (an import): all at once, in sorted order."""
    take_turns_all(session, [(_turn(name),) for name in names])


def _turn(name: str) -> str:
    return TURN_PREFIX + name


def names(session: Session) -> list[str]:
    return list(session.scalars(text("SELECT name FROM namespace ORDER BY name")))


# The transaction's time comes along: most reads that check their namespace record an
# access or a trace at that time next (db.transaction_time), and one round trip is saved.
_KNOWN = text("SELECT now() AS now, EXISTS (SELECT 1 FROM namespace WHERE name = :name) AS known")


def require(session: Session, name: str | None) -> None:
    """Fail with the list of known namespaces when a read names one that does not exist."""
    if name is None:
        return
    row = session.execute(_KNOWN, {"name": name}).one()
    remember_transaction_time(session, row.now)
    if row.known:
        return
    known = names(session)
    hint = f"Known namespaces: {', '.join(known)}." if known else "No namespaces exist yet."
    raise NotFound(f"Namespace not found: {name}. {hint}")


def list_with_counts(session: Session) -> NamespaceListOut:
    rows = session.execute(_LIST).mappings().all()
    items = [NamespaceInfo(**row) for row in rows]
    return NamespaceListOut(namespaces=items, total=len(items))
