"""Document commands: indexing (sync, async, progress), deletes, clear-index, stats."""

from __future__ import annotations

from pathlib import Path

import pytest

from memsys import runner
from memsys.cli import documents as documents_cli
from tests.cli.helpers import fails, run, run_json
from tests.conftest import table_counts
from tests.factories import write_docs

pytestmark = pytest.mark.usefixtures("embedder")


def test_index_directory_sync_then_second_run_skips_duplicates(tmp_path: Path) -> None:
    files = write_docs(tmp_path / "docs")
    first = run_json("index-directory", str(tmp_path / "docs"), "--sync", "-n", "kb")
    assert first["files_indexed"] == len(files) and first["failed_files"] == []
    assert first["total_chunks"] >= len(files) and first["pending_embeddings"] == 0
    stats = run_json("stats")
    assert stats["unique_sources"] == len(files) and stats["pending_embeddings"] == 0
    assert stats["total_documents"] == first["total_chunks"]

    second = run_json("index-directory", str(tmp_path / "docs"), "--sync", "-n", "kb")
    assert second["files_indexed"] == 0 and second["skipped_duplicates"] == len(files)
    human = run("index-directory", str(tmp_path / "docs"), "-n", "kb")
    assert human.exit_code == 0 and "4 unchanged files skipped" in human.stdout

    files["deploy"].unlink()  # gone from the folder: dropped, and said so
    files["deploy"].parent.rmdir()  # (an empty guides/ would be kept: a disk not mounted?)
    human = run("index-directory", str(tmp_path / "docs"), "-n", "kb")
    assert human.exit_code == 0 and "3 unchanged files skipped" in human.stdout
    assert "Dropped 1 deleted file (2 chunks):" in human.stdout
    assert f"removed: {files['deploy'].resolve()}" in human.stdout
    assert run_json("stats")["unique_sources"] == len(files) - 1


def test_index_directory_of_a_folder_found_empty_warns_and_keeps_its_files(
    tmp_path: Path,
) -> None:
    files = write_docs(tmp_path / "mnt")
    run_json("index-directory", str(tmp_path / "mnt"), "--sync")
    for path in files.values():
        path.unlink()
    human = run("index-directory", str(tmp_path / "mnt"))
    assert human.exit_code == 0 and "warning: Kept 4 file(s)" in human.stdout
    assert "--force" in human.stdout  # what the CLI takes (it said force=true alone)
    assert f"kept: {files['auth'].resolve()}" in human.stdout
    assert run_json("stats")["unique_sources"] == len(files)
    forced = run_json("index-directory", str(tmp_path / "mnt"), "--force")
    assert len(forced["removed_files"]) == len(files) and forced["warning"] is None
    assert run_json("stats")["unique_sources"] == 0


def test_index_directory_no_recursive(tmp_path: Path) -> None:
    write_docs(tmp_path)
    out = run_json("index-directory", str(tmp_path), "--no-recursive", "--sync")
    assert out["files_indexed"] == 3  # guides/deploy.md is one level down


def test_index_directory_async_completes_embeddings(tmp_path: Path) -> None:
    write_docs(tmp_path)
    out = run_json("index-directory", str(tmp_path))  # async is the default
    assert out["files_indexed"] == 4 and out["pending_embeddings"] == 0
    assert run_json("stats")["pending_embeddings"] == 0
    hits = run_json("search-with-filters", "token expiry", "--doc-type", "document")
    assert hits["results"] and all(h["similarity"] is not None for h in hits["results"])


def test_index_directory_no_wait_leaves_queue_for_a_later_run(tmp_path: Path) -> None:
    write_docs(tmp_path)
    out = run("index-directory", str(tmp_path), "--no-wait")
    assert out.exit_code == 0 and "wait for embeddings" in out.stdout
    queued = run_json("stats")["pending_embeddings"]
    assert queued > 0
    # Full text already finds the queued chunks.
    found = run_json("search-with-filters", "HS256", "--doc-type", "document")
    assert "HS256" in found["results"][0]["content"]

    later = run_json("index-directory", str(tmp_path))  # nothing new, but drains the queue
    assert later["skipped_duplicates"] == 4 and later["pending_embeddings"] == 0
    assert run_json("stats")["pending_embeddings"] == 0


def test_index_directory_progress_bars_on_stderr(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_docs(tmp_path)
    monkeypatch.setattr(documents_cli, "progress_wanted", lambda as_json: True)
    out = run("index-directory", str(tmp_path), "--sync")
    assert out.exit_code == 0
    assert "Reading files" in out.stderr and "Embedding chunks" in out.stderr
    assert "Indexed 4 files" in out.stdout and "Reading" not in out.stdout


def test_progress_is_off_for_json_and_pipes() -> None:
    # In the test runner stderr is not a terminal.
    assert documents_cli.progress_wanted(False) is False
    assert documents_cli.progress_wanted(True) is False


def test_index_file_and_errors(tmp_path: Path) -> None:
    files = write_docs(tmp_path)
    out = run_json("index-file", str(files["auth"]), "-n", "kb")
    assert out["chunks_created"] >= 2 and out["skipped_unchanged"] is False
    again = run("index-file", str(files["auth"]), "-n", "kb")
    assert again.exit_code == 0 and "Unchanged" in again.stdout
    assert "File not found" in fails("index-file", str(tmp_path / "missing.md"))
    assert "Directory not found" in fails("index-directory", str(tmp_path / "nope"))
    assert "Not a file" in fails("index-file", str(tmp_path))
    assert fails("index-directory", "") == "error: Directory path cannot be empty"
    one = run("index-file", str(files["notes"]))  # a one-chunk file: "1 chunk", not "1 chunks"
    assert ": 1 chunk (" in one.stdout
    assert "(1 chunk, " in run("index-file", str(files["notes"])).stdout


def test_delete_chunks_and_delete_file(tmp_path: Path) -> None:
    files = write_docs(tmp_path)
    indexed = run_json("index-file", str(files["auth"]))
    notes = run_json("index-file", str(files["notes"]))
    first, *rest = indexed["chunk_ids"]
    deleted = run_json("delete-chunks", first, "chk_missing")
    assert deleted["deleted_ids"] == [first] and deleted["not_found_ids"] == ["chk_missing"]
    by_file = run_json("delete-file", str(files["auth"]))
    assert by_file["deleted_count"] == len(rest)
    assert "No indexed file" in fails("delete-file", str(files["auth"]))
    stats = run_json("stats")
    assert stats["total_documents"] == notes["chunks_created"]
    assert run("delete-chunks").exit_code == 2  # at least one id


def test_clear_index_needs_confirm(tmp_path: Path) -> None:
    write_docs(tmp_path)
    run_json("index-directory", str(tmp_path), "--sync")
    memory = run_json("store", "keep me")
    before = table_counts()
    assert fails("clear-index") == "error: Safety check: Pass --confirm to delete all documents"
    assert table_counts() == before
    cleared = run_json("clear-index", "--confirm")
    assert cleared["documents_deleted"] == 4 and cleared["deleted_count"] > 0
    stats = run_json("stats")
    assert stats["total_documents"] == 0 and stats["memory_count"] == 1
    assert run_json("recall", "keep me")["memories"][0]["id"] == memory["id"]


def test_stats_human(tmp_path: Path) -> None:
    files = write_docs(tmp_path)
    run_json("index-file", str(files["notes"]))
    out = run("stats")
    assert out.exit_code == 0
    assert "pending embeddings: 0" in out.stdout and str(files["notes"]) in out.stdout


def test_the_cli_indexes_its_users_own_files_outside_the_index_roots(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """MEMSYS_INDEX_ROOTS guards what a server reads for a caller; the CLI in its own process
    reads its user's files (README), and refused them."""
    from memsys.config import get_settings
    from memsys.errors import InvalidInput
    from memsys.schemas import IndexFileIn
    from memsys.services import indexing

    files = write_docs(tmp_path / "docs")
    monkeypatch.setenv("MEMSYS_INDEX_ROOTS", str(tmp_path / "elsewhere"))
    get_settings.cache_clear()
    try:
        assert run_json("index-file", str(files["auth"]))["chunks_created"] >= 2
        folder = run_json("index-directory", str(tmp_path / "docs"), "--sync", "-n", "d")
        assert folder["files_indexed"] >= 2 and not folder["failed_files"]
        # the service a server runs for its callers still holds them to the roots
        with pytest.raises(InvalidInput, match="outside the folders memsys may index"):
            runner.execute(indexing.index_file, IndexFileIn, {"file_path": str(files["notes"])})
    finally:
        monkeypatch.delenv("MEMSYS_INDEX_ROOTS")
        get_settings.cache_clear()


def test_index_directory_waits_for_the_chunks_another_process_is_embedding(
    tmp_path: Path,
) -> None:
    """A running server's worker takes queued chunks too (locked from this process): the
    command ended with "64 chunks wait for embeddings" after a full bar. It now waits while
    the other one embeds them, and says nothing is left."""
    import threading
    import time

    from memsys.db import session_scope
    from memsys.services import embedding_queue

    write_docs(tmp_path)
    assert run("index-directory", str(tmp_path), "--no-wait").exit_code == 0
    queued = run_json("stats")["pending_embeddings"]
    taken = threading.Event()

    def other_process() -> None:  # takes every queued chunk, embeds them slowly, commits
        with session_scope() as session:
            embedding_queue.embed_pending(session, limit=queued)
            taken.set()
            time.sleep(1.5)

    worker = threading.Thread(target=other_process)
    worker.start()
    assert taken.wait(60)
    (tmp_path / "new.md").write_text("# Release\n\nReleases are cut on Thursdays.\n")
    out = run_json("index-directory", str(tmp_path))  # the new file's chunks, and the wait
    worker.join()
    assert out["pending_embeddings"] == 0
    assert run_json("stats")["pending_embeddings"] == 0
