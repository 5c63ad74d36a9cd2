"""What memsys says about a database it cannot use."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack

import psycopg
import pytest
from sqlalchemy import text

from memsys.db import get_engine
from memsys.dberrors import check_pgvector, pgvector_problem
from memsys.errors import DatabaseUnavailable


def test_the_test_server_passes_the_check() -> None:
    with get_engine().connect() as conn:
        check_pgvector(conn)  # raises if the real server lacked what memsys needs
        available = conn.execute(
            text("SELECT default_version FROM pg_available_extensions WHERE name = 'vector'")
        ).scalar()
    assert pgvector_problem(available, 180000) is None


def test_a_server_without_pgvector_gets_the_fix_named() -> None:
    message = pgvector_problem(None, 160004)
    assert message is not None
    assert "no pgvector extension" in message and "pgvector/pgvector" in message


@pytest.mark.parametrize(
    ("available", "server", "expected"),
    [
        ("0.6.2", 160000, "pgvector 0.6.2 is too old"),
        ("0.8.5", 140011, "PostgreSQL 140011 is too old"),
    ],
)
def test_old_versions_are_refused(available: str, server: int, expected: str) -> None:
    assert expected in (pgvector_problem(available, server) or "")


def test_an_unreachable_server_is_reported_with_its_address(monkeypatch) -> None:
    from memsys import db
    from memsys.config import get_settings

    monkeypatch.setenv("MEMSYS_DATABASE_URL", "postgresql://memsys:pw@127.0.0.1:1/nowhere")
    get_settings.cache_clear()
    saved = db._engine
    db._engine = None
    try:
        with pytest.raises(
            DatabaseUnavailable, match=r"Cannot connect to PostgreSQL at .*127\.0\.0\.1:1/nowhere"
        ):
            db.get_engine()
    finally:
        db._engine = saved
        get_settings.cache_clear()


@pytest.fixture
def server_gone(embedder) -> Iterator[None]:
    """memsys is up, then its PostgreSQL stops answering (nothing listens on port 1)."""
    from memsys import db

    db.set_engine(db.make_engine("postgresql+psycopg://memsys@127.0.0.1:1/memsys"))
    try:
        yield
    finally:
        db.set_engine(None)  # the next session reconnects to the test database


def test_a_server_that_went_away_is_reported_by_every_front_end(server_gone: None) -> None:
    from fastapi.testclient import TestClient

    from memsys.api.app import create_app
    from memsys.mcp.server import call
    from memsys.operations import BY_NAME
    from tests.cli.helpers import fails

    with TestClient(create_app(background=False), base_url="http://127.0.0.1:8700") as c:
        health = c.get("/v1/health")
        assert health.status_code == 503 and health.json()["status"] == "unavailable"
        for answer in (
            c.get("/v1/memories/count"),
            c.post("/v1/memories", json={"content": "kept for later"}),
            c.post("/v1/memories/recall", json={"query": "later"}),
        ):
            assert answer.status_code == 503
            body = answer.json()
            assert body["success"] is False
            assert body["error"].startswith("Database unavailable: ")
            assert "Connection refused" in body["error"]

    mcp_answer = call(BY_NAME["memory_count"], {})
    assert mcp_answer["success"] is False
    assert mcp_answer["error"].startswith("Database unavailable: ")
    assert fails("count", code=1).startswith("error: Database unavailable: ")


def test_a_query_error_is_not_mistaken_for_a_lost_connection() -> None:
    from sqlalchemy.exc import DBAPIError

    from memsys.db import session_scope
    from memsys.dberrors import connection_lost

    with pytest.raises(DBAPIError) as raised, session_scope() as session:
        session.execute(text("SELECT 1 / 0"))
    assert connection_lost(raised.value) is None


@pytest.fixture
def short_limits(embedder, monkeypatch) -> Iterator[None]:
    """memsys with a 0.5 s statement limit and a 0.3 s lock-wait limit."""
    from memsys import db
    from memsys.config import get_settings

    monkeypatch.setenv("MEMSYS_STATEMENT_TIMEOUT_S", "0.5")
    monkeypatch.setenv("MEMSYS_LOCK_TIMEOUT_S", "0.3")
    get_settings.cache_clear()
    db.set_engine(db.make_engine(db.database_url()))
    try:
        yield
    finally:
        monkeypatch.undo()
        get_settings.cache_clear()
        db.set_engine(None)  # the next session reconnects with the usual limits


def test_a_call_waiting_on_another_transactions_lock_gives_up_and_says_so(
    short_limits: None,
) -> None:
    from fastapi.testclient import TestClient

    from memsys import db
    from memsys.api.app import create_app
    from memsys.mcp.server import call
    from memsys.operations import BY_NAME
    from tests.cli.helpers import fails

    other = db.make_engine(db.database_url())  # another client, holding a table lock
    try:
        with TestClient(create_app(background=False), base_url="http://127.0.0.1:8700") as c:
            before = c.get("/v1/memories/count").json()["count"]
            with other.connect() as holder:
                holder.execute(text("LOCK TABLE chunk IN SHARE MODE"))  # writers must wait
                answer = c.post("/v1/memories", json={"content": "written while locked"})
                assert answer.status_code == 503
                assert answer.json()["success"] is False
                assert "held what this call needs for more than 0.3 s" in answer.json()["error"]
                envelope = call(BY_NAME["memory_store"], {"content": "written while locked"})
                assert envelope["success"] is False
                assert "MEMSYS_LOCK_TIMEOUT_S" in envelope["error"]
                line = fails("store", "written while locked", code=1)
                assert "MEMSYS_LOCK_TIMEOUT_S" in line and "SELECT" not in line
                # Readers are not held up by it.
                assert c.get("/v1/memories/count").json()["count"] == before
                holder.rollback()
            assert c.get("/v1/memories/count").json()["count"] == before  # nothing written
            assert c.post("/v1/memories", json={"content": "written after"}).status_code == 201
    finally:
        other.dispose()


def test_a_store_waiting_for_its_contents_turn_gives_up_and_says_so(short_limits: None) -> None:
    # memory_store sends its turns and its duplicate read in one round trip (db.in_one_trip):
    # a lock wait there ends as any other does, in the error every front end shows.
    from memsys import db, ids, runner
    from memsys.errors import TimedOut
    from memsys.schemas import MemoryCountIn, MemoryStoreIn
    from memsys.services import memories

    content = "written while its turn was held"
    key = "\x1f".join(("global", "memory", ids.content_hash(content)))
    other = db.make_engine(db.database_url())
    try:
        before = runner.execute(memories.count, MemoryCountIn, {}).count
        with other.connect() as holder:  # another writer of the same text, not done yet
            holder.execute(
                text("SELECT pg_advisory_xact_lock(hashtextextended(:k, 0))"), {"k": key}
            )
            with pytest.raises(TimedOut) as raised:
                runner.execute(memories.store, MemoryStoreIn, {"content": content})
            holder.rollback()
        assert "held what this call needs for more than 0.3 s" in raised.value.message
        assert runner.execute(memories.count, MemoryCountIn, {}).count == before
        assert not runner.execute(memories.store, MemoryStoreIn, {"content": content}).duplicate
    finally:
        other.dispose()


def test_a_statement_past_the_limit_is_cancelled_with_a_clear_error(short_limits: None) -> None:
    from memsys.db import session_scope
    from memsys.errors import TimedOut

    with pytest.raises(TimedOut) as raised, session_scope() as session:
        session.execute(text("SELECT pg_sleep(5)"))
    assert raised.value.message.startswith(
        "The database cancelled a statement of this call: it ran past the statement timeout "
        "(MEMSYS_STATEMENT_TIMEOUT_S, 0.5 s;"
    )
    with session_scope() as session:  # the connection is fine afterwards
        assert session.execute(text("SELECT 1")).scalar() == 1


def test_connections_the_server_ended_are_replaced_before_anyone_uses_them() -> None:
    # A restart or an administrator's pg_terminate_backend ends every pooled connection;
    # the next calls must get fresh ones, not errors (no round trip per checkout checks it).
    engine = get_engine()

    def pids() -> set[int]:  # as many connections at once as the pool keeps
        with ExitStack() as stack:
            conns = [stack.enter_context(engine.connect()) for _ in range(engine.pool.size())]
            found = {c.execute(text("SELECT pg_backend_pid()")).scalar() for c in conns}
            for c in conns:
                c.rollback()
        return found

    before = pids()
    url = engine.url.set(drivername="postgresql").render_as_string(hide_password=False)
    with psycopg.connect(url, autocommit=True) as admin:
        for pid in before:
            assert admin.execute("SELECT pg_terminate_backend(%s, 5000)", (pid,)).fetchone()
    after = pids()
    assert len(after) == engine.pool.size() and not after & before


def test_only_a_connection_at_rest_for_long_is_pinged_and_a_failed_ping_replaces_it(
    monkeypatch,
) -> None:
    from memsys import db

    engine = get_engine()

    def pid() -> int:
        with engine.connect() as conn:
            found = conn.execute(text("SELECT pg_backend_pid()")).scalar()
            conn.rollback()
        return int(found)

    pings: list[int] = []

    def unanswered(dbapi_connection) -> None:  # a peer that vanished without a word
        pings.append(dbapi_connection.pgconn.backend_pid)
        raise psycopg.OperationalError("no answer")

    monkeypatch.setattr(engine.dialect, "do_ping", unanswered)
    first = pid()
    assert pid() and pings == []  # in steady use: the socket check alone, no round trip
    monkeypatch.setattr(db, "IDLE_PING_S", 0.0)  # now every connection rested "too long"
    pool = engine.pool.checkedin()
    replaced = {pid() for _ in range(pool)}
    assert len(pings) == pool and first in pings and first not in replaced


def test_a_call_that_finds_every_connection_in_use_is_refused_not_left_waiting(
    embedder: object,
) -> None:
    """More calls at once than the server has connections (long imports hold one each): a
    call waits for one a while, then gets a clear "try again", not an internal error."""
    from fastapi.testclient import TestClient

    from memsys import db
    from memsys.api.app import create_app
    from memsys.mcp.server import call
    from memsys.operations import BY_NAME

    engine = db.make_engine(db.database_url(), pool_wait_s=0.2)
    db.set_engine(engine)
    held = [engine.connect() for _ in range(db.POOL_SIZE + db.POOL_OVERFLOW)]
    try:
        with TestClient(create_app(background=False), base_url="http://127.0.0.1:8700") as c:
            answer = c.get("/v1/memories/count")
        assert answer.status_code == 503
        assert "stayed in use for 0.2 s" in answer.json()["error"], answer.json()
        mcp_answer = call(BY_NAME["memory_count"], {})
        assert mcp_answer["success"] is False and "Try again" in mcp_answer["error"]
    finally:
        for connection in held:
            connection.close()
        db.set_engine(None)


def test_a_failing_statement_sent_in_one_trip_is_reported_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """psycopg logged a failed pipeline's error a second time, as a warning, about half the
    time it left the pipeline: the CLI's first use printed `error ignored terminating
    <psycopg.Pipeline …>: pipeline aborted` on stderr while it created the schema."""
    from sqlalchemy.exc import ProgrammingError

    from memsys.db import in_one_trip, session_scope

    caplog.set_level("WARNING")
    for _ in range(20):
        with pytest.raises(ProgrammingError), session_scope() as session:
            in_one_trip(
                session,
                (text("SELECT * FROM no_such_table WHERE id = :a"), {"a": 1}),
                (text("SELECT CAST(:b AS int)"), {"b": 2}),
            )
    assert [r.getMessage() for r in caplog.records if r.name.startswith("psycopg")] == []
