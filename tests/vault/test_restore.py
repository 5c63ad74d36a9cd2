"""Restore mode: the vector index dropped at the start of the import's transaction and built
once after the writes, from its own definition; a failed import gives it back with the
rollback; refused for a dry run and for a scoped token; the same flag on every front."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import event, text

from memsys import runner, tenancy
from memsys.config import get_settings
from memsys.db import get_engine, session_scope
from memsys.errors import Conflict, InvalidInput, Protected
from memsys.mcp.server import call
from memsys.operations import BY_NAME
from memsys.retrieval import pipeline
from memsys.schemas.vault import ImportIn
from memsys.vault import apply, restore, service
from tests.cli.helpers import run
from tests.conftest import table_counts
from tests.vault.helpers import import_
from tests.vault.test_import_batches import TOPICS, memory, write_jsonl


def vector_indexes() -> list[tuple[str, str]]:
    with session_scope() as s:
        rows = s.execute(
            text(
                "SELECT indexname, indexdef FROM pg_indexes WHERE tablename = 'chunk' "
                "AND schemaname = current_schema() AND indexdef LIKE '% USING hnsw %' "
                "ORDER BY indexname"
            )
        )
        return [(r.indexname, r.indexdef) for r in rows]


def snapshot(path: Path) -> Path:
    write_jsonl(path, [memory(i, body) for i, body in enumerate(TOPICS)])
    return path


def test_restore_builds_the_vector_index_once_after_the_writes(
    tmp_path: Path, embedder: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = vector_indexes()
    assert before  # the migrations made one
    statements: list[str] = []

    def seen(conn: Any, cursor: Any, sql: str, *args: Any) -> None:
        head = sql.lstrip()[:40].upper()
        if head.startswith(("DROP INDEX", "CREATE INDEX", "INSERT INTO CHUNK")):
            statements.append(head.split(" (")[0].split()[0] + " " + head.split()[1])

    monkeypatch.setattr("memsys.vault.importer.BATCH", 4)  # several batches of memories
    event.listen(get_engine(), "before_cursor_execute", seen)
    try:
        report = import_(snapshot(tmp_path / "snap.jsonl"), restore=True)
    finally:
        event.remove(get_engine(), "before_cursor_execute", seen)
    assert report.applied and report.memories.new == len(TOPICS)
    drops, builds = statements.count("DROP INDEX"), statements.count("CREATE INDEX")
    assert drops == builds == len(before)
    inserts = [i for i, s in enumerate(statements) if s == "INSERT INTO"]
    assert len(inserts) > 1
    dropped, built = statements.index("DROP INDEX"), statements.index("CREATE INDEX")
    assert dropped < inserts[0] < inserts[-1] < built
    assert vector_indexes() == before  # built again from its own definition
    with session_scope() as s:
        found = pipeline.retrieve(s, "which editor theme does Alice like", limit=3)
    assert found.hits[0].content == TOPICS[2]


@pytest.fixture
def own_server(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Settings as `memsys serve` has them on its embedded server: no MEMSYS_DATABASE_URL
    (the tests reach the same server through one)."""
    monkeypatch.delenv("MEMSYS_DATABASE_URL")
    get_settings.cache_clear()
    yield
    get_settings.cache_clear()  # read again once monkeypatch has put the URL back


def test_the_build_gets_a_helper_per_spare_core_where_shared_memory_holds_it(
    own_server: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    room = {"bytes": 24 * 2**30}
    cores = {0, 1, 2, 3}
    monkeypatch.setattr(restore.os, "sched_getaffinity", lambda pid: cores)
    monkeypatch.setattr(
        restore.os,
        "statvfs",
        lambda path: SimpleNamespace(f_bavail=room["bytes"] // 4096, f_frsize=4096),
    )
    assert restore.build_workers(1024) == 3
    room["bytes"] = 64 * 2**20  # a container's usual /dev/shm: a parallel build would fail
    assert restore.build_workers(1024) == 0
    assert restore.build_workers(16) == 3
    room["bytes"], cores = 24 * 2**30, {0}
    assert restore.build_workers(1024) == 0


def test_a_server_elsewhere_builds_without_helpers() -> None:
    assert get_settings().database_url  # how the tests reach their server
    assert restore.build_workers(64) == 0


def test_restore_on_its_own_server_builds_the_index_in_parallel(
    tmp_path: Path, embedder: Any, own_server: None
) -> None:
    """The build's helpers work inside the import's transaction, beside its uncommitted rows."""
    workers = restore.build_workers(restore.build_memory())
    notices: list[str] = []
    with session_scope() as s:
        # A test's table is far below the size that earns a parallel build by default.
        s.execute(text("SET LOCAL min_parallel_table_scan_size = 0"))
        s.execute(text("SET LOCAL client_min_messages = debug1"))
        raw = s.connection().connection.driver_connection
        heard = lambda d: notices.append(d.message_primary or "")  # noqa: E731
        raw.add_notice_handler(heard)
        try:
            report = service.import_from(
                s, snapshot(tmp_path / "snap.jsonl"), dry_run=False, partial=False, restore=True
            )
        finally:
            raw.remove_notice_handler(heard)
    assert report.applied and report.memories.new == len(TOPICS)
    built = [n for n in notices if n.startswith("building index") and "chunk" in n]
    wanted = f"with request for {workers} parallel workers" if workers else "serially"
    assert built and all(wanted in n for n in built), built
    with session_scope() as s:
        found = pipeline.retrieve(s, "which editor theme does Alice like", limit=3)
    assert found.hits[0].content == TOPICS[2]


def test_restore_rebuilds_a_partial_index_whose_definition_holds_a_percent_sign(
    tmp_path: Path, embedder: Any
) -> None:
    """An operator's own HNSW index, partial on a LIKE pattern: built again as written."""
    with session_scope() as s:
        s.execute(
            text(
                "CREATE INDEX ix_test_project_hnsw ON chunk USING hnsw (embedding "
                "vector_cosine_ops) WHERE namespace LIKE 'project:%'"
            )
        )
    try:
        before = vector_indexes()
        assert len(before) == 2
        assert import_(snapshot(tmp_path / "snap.jsonl"), restore=True).applied
        assert vector_indexes() == before
    finally:
        with session_scope() as s:
            s.execute(text("DROP INDEX IF EXISTS ix_test_project_hnsw"))


def test_a_failed_restore_gives_the_index_back_and_writes_nothing(
    tmp_path: Path, embedder: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    before, counts = vector_indexes(), table_counts()
    written = apply.Plan.memories

    def fail_on_second(self: apply.Plan, batch: list[Any]) -> None:
        if self.report.memories.new:
            raise InvalidInput("the disk filled up")
        written(self, batch)

    monkeypatch.setattr("memsys.vault.importer.BATCH", 4)
    monkeypatch.setattr(apply.Plan, "memories", fail_on_second)
    with pytest.raises(InvalidInput, match="the disk filled up"):
        import_(snapshot(tmp_path / "snap.jsonl"), restore=True)
    assert vector_indexes() == before
    assert table_counts() == counts


def test_restore_gives_up_quickly_while_another_call_uses_the_memories(
    tmp_path: Path, embedder: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The drop waits a moment for calls in flight, then refuses: new calls would queue
    behind a drop that waits, for as long as it waits."""
    path = snapshot(tmp_path / "snap.jsonl")
    before, counts = vector_indexes(), table_counts()
    monkeypatch.setattr(restore, "LOCK_WAIT", "300ms")
    with get_engine().connect() as reader:
        reader.execute(text("SELECT count(*) FROM chunk"))  # its transaction stays open
        with pytest.raises(Conflict, match="needs the memories to itself"):
            import_(path, restore=True)
    assert vector_indexes() == before
    assert table_counts() == counts
    assert import_(path, restore=True).memories.new == len(TOPICS)  # once it is alone


def restore_both(*paths: Path) -> list[Any]:
    """Restore-mode imports of the files at once, one thread each: their reports or errors."""
    outcomes: list[Any] = []

    def run_one(path: Path) -> None:
        try:
            outcomes.append(import_(path, restore=True))
        except Exception as exc:  # the outcome is what the test checks
            outcomes.append(exc)

    threads = [threading.Thread(target=run_one, args=(p,)) for p in paths]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    return outcomes


def test_two_restores_at_once_end_in_one_import_and_one_conflict(
    tmp_path: Path, embedder: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each has read the table (its checks) when it asks for it alone: a deadlock, which the
    one PostgreSQL picks is refused like a lock wait (409), and the other goes on. Their
    files write in different namespaces: into the same one, the second waits for the first
    before it reads anything (the test below)."""
    first = snapshot(tmp_path / "a.jsonl")
    second = tmp_path / "b.jsonl"
    records = [memory(100 + i, f"{body} (copy two)") for i, body in enumerate(TOPICS)]
    write_jsonl(second, [{**r, "namespace": "project:two"} for r in records])
    both_checked = threading.Barrier(2, timeout=60)
    original = restore.vector_index_built_after

    @contextmanager
    def together(session: Any, wanted: Any) -> Iterator[None]:
        both_checked.wait()
        with original(session, wanted):
            yield

    monkeypatch.setattr(restore, "vector_index_built_after", together)
    outcomes = restore_both(first, second)
    assert len(outcomes) == 2, outcomes
    refused = [o for o in outcomes if isinstance(o, Conflict)]
    done = [o for o in outcomes if not isinstance(o, Exception)]
    assert len(refused) == 1 and len(done) == 1, outcomes
    assert "needs the memories to itself" in refused[0].message
    assert done[0].memories.new == len(TOPICS)
    assert vector_indexes()


def test_two_restores_into_the_same_namespace_run_one_after_the_other(
    tmp_path: Path, embedder: Any
) -> None:
    first = snapshot(tmp_path / "a.jsonl")
    second = tmp_path / "b.jsonl"
    write_jsonl(second, [memory(100 + i, f"{body} (copy two)") for i, body in enumerate(TOPICS)])
    outcomes = restore_both(first, second)
    assert [getattr(o, "memories", o).new for o in outcomes] == [len(TOPICS)] * 2, outcomes
    assert vector_indexes()


def test_restore_is_refused_for_a_dry_run_and_for_a_scoped_token(tmp_path: Path) -> None:
    path = snapshot(tmp_path / "snap.jsonl")
    counts = table_counts()
    with pytest.raises(InvalidInput, match="a dry run writes nothing"):
        import_(path, restore=True, dry_run=True)
    scope = tenancy.Scope(read=("project:*",), write=("project:*",), token_id="tok_restore")
    with tenancy.using(scope), pytest.raises(Protected, match="needs the admin token"):
        runner.execute(
            service.import_, ImportIn, {"path": str(path), "dry_run": False, "restore": True}
        )
    assert table_counts() == counts
    assert vector_indexes()


def test_every_front_takes_the_restore_flag(
    tmp_path: Path, embedder: Any, client: TestClient
) -> None:
    path = snapshot(tmp_path / "snap.jsonl")
    mcp = call(BY_NAME["memory_import"], {"path": str(path), "restore": True})
    assert not mcp["success"] and "dry run" in mcp["error"]  # MCP imports are dry by default
    mcp = call(BY_NAME["memory_import"], {"path": str(path), "restore": True, "dry_run": False})
    assert mcp["success"] and mcp["data"]["memories"]["new"] == len(TOPICS)
    body = path.read_bytes().replace(b'"mem_0', b'"mem_1')  # other ids, the same texts
    rest = client.post("/v1/import", params={"restore": True}, content=body)
    assert rest.status_code == 200 and rest.json()["memories"]["duplicate"] == len(TOPICS)
    refused = client.post("/v1/import", params={"restore": True, "dry_run": True}, content=body)
    assert refused.status_code == 422 and "dry run" in refused.json()["error"]
    cli = run("import", str(path), "--restore")
    assert cli.exit_code == 0 and "unchanged" in cli.stdout, cli.output
    dry = run("import", str(path), "--restore", "--dry-run")
    assert dry.exit_code == 2 and "drop --dry-run" in dry.output
    assert vector_indexes()


def test_the_helpers_are_counted_for_the_memory_the_build_will_have(
    own_server: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """build_memory() raises maintenance_work_mem, never lowers it: on a small machine the
    embedded server's own 512 MB (embedded.py) is what the build gets, and a parallel build holds
    all of it in /dev/shm. Counted for build_memory()'s 128 MB, a /dev/shm of 300 MB took
    helpers whose build then failed for want of shared memory, after the whole import."""
    monkeypatch.setattr(restore, "build_memory", lambda: 128)
    monkeypatch.setattr(restore.os, "sched_getaffinity", lambda pid: {0, 1, 2, 3})
    monkeypatch.setattr(
        restore.os,
        "statvfs",
        lambda path: SimpleNamespace(f_bavail=300 * 2**20 // 4096, f_frsize=4096),
    )
    with session_scope() as s:
        s.execute(text("SET LOCAL maintenance_work_mem = '512MB'"))
        with restore.vector_index_built_after(s, lambda: True):
            pass
        workers = s.execute(text("SHOW max_parallel_maintenance_workers")).scalar_one()
        s.rollback()
    assert workers == "0"
