"""Every table that holds namespaced rows is guarded by PostgreSQL itself: row-level security
enabled AND forced (the owner is filtered too), a policy for each command, and the tenant role
(which scoped transactions run as) has no access to the token table.

A new table with a `namespace` column fails here until its migration calls
`SELECT memsys_protect('<table>', 'namespace', 'data'|'log'|'counted')`.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import text

from memsys.db import get_engine
from memsys.models import Base
from memsys.tenancy import TENANT_ROLE

COMMANDS = {"SELECT", "INSERT", "UPDATE", "DELETE"}


def namespaced_tables(conn: Any) -> dict[str, str]:
    """table → the column that names its namespace, from the database and from the models."""
    found = dict(
        conn.execute(
            text(
                "SELECT table_name, column_name FROM information_schema.columns "
                "WHERE table_schema = current_schema() AND column_name = 'namespace'"
            )
        ).all()
    )
    for name, table in Base.metadata.tables.items():
        if "namespace" in table.c:
            found.setdefault(name, "namespace")
    found["namespace"] = "name"  # the namespace list itself
    return found


def test_every_namespaced_table_has_forced_row_security_and_policies() -> None:
    with get_engine().connect() as conn:
        tables = namespaced_tables(conn)
        assert len(tables) >= 13
        for name, column in sorted(tables.items()):
            enabled, forced = conn.execute(
                text(
                    "SELECT relrowsecurity, relforcerowsecurity FROM pg_class "
                    "WHERE oid = CAST(:t AS regclass)"
                ),
                {"t": name},
            ).one()
            assert enabled and forced, f"{name}: row-level security not enabled and forced"
            policies = conn.execute(
                text("SELECT cmd, qual, with_check FROM pg_policies WHERE tablename = :t"),
                {"t": name},
            ).all()
            commands = {p.cmd for p in policies}
            assert commands >= COMMANDS or "ALL" in commands, f"{name}: policies {commands}"
            for p in policies:
                expression = f"{p.qual or ''} {p.with_check or ''}"
                assert "memsys_can_" in expression and column in expression, (name, p)


def test_the_tenant_role_cannot_see_tokens_or_the_schema_version() -> None:
    with get_engine().connect() as conn:
        for name in ("api_token", "alembic_version"):
            allowed = conn.execute(
                text("SELECT has_table_privilege(:r, :t, 'SELECT')"), {"r": TENANT_ROLE, "t": name}
            ).scalar_one()
            assert allowed is False, name
        for name in Base.metadata.tables:
            if name == "api_token":
                continue
            allowed = conn.execute(
                text("SELECT has_table_privilege(:r, :t, 'SELECT, INSERT, UPDATE, DELETE')"),
                {"r": TENANT_ROLE, "t": name},
            ).scalar_one()
            assert allowed, f"{TENANT_ROLE} lacks privileges on {name}"


def test_a_scoped_transaction_sees_only_its_namespaces_even_without_a_where() -> None:
    """The guarantee itself: raw SQL with no filter, run in a scoped transaction."""
    from memsys import tenancy
    from memsys.db import session_scope
    from tests.security.helpers import run

    run("memory_store", content="acme fact", namespace="project:acme")
    run("memory_store", content="beta fact", namespace="project:beta")
    scope = tenancy.Scope(read=("project:a*",), write=(), token_id="tok_t")
    with tenancy.using(scope), session_scope() as s:
        seen = s.execute(text("SELECT namespace FROM chunk")).scalars().all()
        assert seen == ["project:acme"]
        assert s.execute(text("SELECT name FROM namespace")).scalars().all() == ["project:acme"]
        deleted = s.execute(text("DELETE FROM chunk")).rowcount  # type: ignore[attr-defined]
        assert deleted == 0  # read-only: not even its own rows
    with session_scope() as s:  # the admin still sees both
        assert s.execute(text("SELECT count(*) FROM chunk")).scalar_one() == 2


def test_patterns_match_namespaces_literally_apart_from_the_star() -> None:
    """`_` and `%` are LIKE wildcards; in a token's pattern they are plain characters."""
    from memsys import tenancy
    from memsys.db import session_scope
    from tests.security.helpers import run

    for namespace in ("team_a1", "teamxa1", "team_a", "other"):
        run("memory_store", content=f"note of {namespace}", namespace=namespace)
    scope = tenancy.Scope(read=("team_a*",), write=(), token_id="tok_t")
    with tenancy.using(scope), session_scope() as s:
        seen = s.execute(text("SELECT name FROM namespace ORDER BY name")).scalars().all()
    assert seen == ["team_a", "team_a1"]


def test_an_update_of_a_row_gone_meanwhile_is_a_conflict_and_a_read_only_change_is_refused() -> (
    None
):
    """An ORM update that matched no row (StaleDataError) was reported, under any scoped
    token, as "Not allowed: this token may not change that namespace" — also when the token
    may write there and another call had deleted the row meanwhile (an admin got a 500)."""
    import pytest

    from memsys import tenancy
    from memsys.db import session_scope
    from memsys.errors import Conflict, Protected
    from memsys.models import Chunk
    from tests.security.helpers import run

    stored = run("memory_store", content="acme fact", namespace="project:acme")
    key = ("project:acme", stored.id)
    writer = tenancy.Scope(read=("project:a*",), write=("project:a*",), token_id="tok_w")
    for scope in (writer, tenancy.ADMIN):
        conflict = pytest.raises(Conflict, match="changed or deleted")
        with conflict, tenancy.using(scope), session_scope() as s:
            chunk = s.get(Chunk, key)
            assert chunk is not None
            with get_engine().begin() as other:  # another call's purge, meanwhile
                other.execute(text("UPDATE chunk SET id = 'gone' WHERE id = :id"), {"id": key[1]})
            chunk.importance = 0.9
        with get_engine().begin() as other:
            other.execute(text("UPDATE chunk SET id = :id WHERE id = 'gone'"), {"id": key[1]})
    reader = tenancy.Scope(read=("project:a*",), write=(), token_id="tok_r")
    refused = pytest.raises(Protected, match="may not change")
    with refused, tenancy.using(reader), session_scope() as s:
        chunk = s.get(Chunk, key)
        assert chunk is not None
        chunk.importance = 0.1


def test_pruning_traces_counts_what_went_and_a_read_only_token_may_not() -> None:
    """debug_prune_traces counted the traces it could read as deleted: a read-only token
    (or one that may write elsewhere) was told `deleted: 1` while the policies had dropped
    every DELETE and the trace stayed."""
    import pytest

    from memsys import runner, tenancy
    from memsys.db import session_scope
    from memsys.errors import Protected
    from memsys.schemas.debug_replay import PruneTracesIn
    from memsys.services import debug
    from tests.security.helpers import run

    run("memory_store", content="acme deploys on Fridays", namespace="project:acme")
    run("memory_recall", query="when does acme deploy", namespace="project:acme")

    def prune() -> int:
        return runner.execute(debug.prune, PruneTracesIn, {"older_than_days": 30}).deleted

    def left() -> int:
        with session_scope() as s:  # the trace is written beside the call: waited for here
            return int(s.execute(text("SELECT count(*) FROM query_trace")).scalar_one())

    assert left() == 1
    with get_engine().begin() as conn:
        conn.execute(text("UPDATE query_trace SET created_at = now() - interval '40 days'"))

    reader = tenancy.Scope(read=("project:a*",), write=(), token_id="tok_r")
    with tenancy.using(reader), pytest.raises(Protected, match="may not change"):
        prune()
    elsewhere = tenancy.Scope(read=("project:*",), write=("project:b*",), token_id="tok_b")
    with tenancy.using(elsewhere):
        assert prune() == 0
    assert left() == 1
    pruned = prune()
    assert (pruned, left()) == (1, 0)


def test_a_read_only_token_rehydrating_an_archived_memory_is_refused() -> None:
    """debug_rehydrate changes a memory (its stage, its text back from its history)."""
    from datetime import UTC, datetime, timedelta

    import pytest

    from memsys import runner, tenancy
    from memsys.errors import Protected
    from memsys.schemas.lifecycle import RehydrateIn
    from memsys.services import lifecycle, maintain
    from tests.factories import RELEASE_WORKFLOW
    from tests.security.helpers import run

    content = RELEASE_WORKFLOW
    memory = run("memory_store", content=content, namespace="project:acme", memory_type="workflow")
    maintain.run(now=datetime.now(UTC) + timedelta(days=40))
    reader = tenancy.Scope(read=("project:a*",), write=(), token_id="tok_r")
    with tenancy.using(reader), pytest.raises(Protected, match="may not change"):
        runner.execute(lifecycle.rehydrate, RehydrateIn, {"memory_id": memory.id})
    shown = run("memory_list", namespace="project:acme").memories[0]
    assert shown.id == memory.id
