"""Indexing files and folders, the embedding queue, deletes and stats."""

from __future__ import annotations

import functools
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select, update

from memsys import chunking, runner
from memsys.db import session_scope, take_turns
from memsys.errors import InvalidInput, NotFound
from memsys.mcp.server import call
from memsys.models import Chunk, Document, Event
from memsys.operations import BY_NAME
from memsys.schemas import (
    ClearIndexIn,
    DeleteChunksIn,
    DeleteFileIn,
    IndexDirectoryIn,
    SearchWithFiltersIn,
)
from memsys.services import documents, folders, index_stats, namespaces
from memsys.services import search as search_service
from tests.conftest import lock_waiters, table_counts, until
from tests.factories import index, queue_for_embedding, store, write_docs, write_pdf


def live_chunks(source: Path) -> list[Chunk]:
    with session_scope() as s:
        return list(
            s.scalars(
                select(Chunk)
                .where(Chunk.source_file == str(source.resolve()), Chunk.valid_to.is_(None))
                .order_by(Chunk.chunk_index)
            )
        )


def index_dir(path: Path, **fields):  # type: ignore[no-untyped-def]
    return runner.execute(
        folders.index_directory, IndexDirectoryIn, {"dir_path": str(path), **fields}
    )


def test_markdown_chunks_record_their_header_path(tmp_path, embedder) -> None:
    files = write_docs(tmp_path)
    out = index(files["auth"], namespace="docs")
    assert out.chunks_created == 3 and out.namespace == "docs"
    assert out.source_file == str(files["auth"].resolve())
    chunks = live_chunks(files["auth"])
    assert [c.header_path for c in chunks] == [
        "Configuration",
        "Configuration > Authentication",
        "Configuration > Logging",
    ]
    assert chunks[1].content.startswith("## Authentication")
    assert all(c.embedding is not None for c in chunks)


def test_python_is_chunked_by_top_level_definition(tmp_path, embedder) -> None:
    files = write_docs(tmp_path)
    index(files["code"])
    labels = [c.header_path for c in live_chunks(files["code"])]
    assert labels == ["module", "def connect", "class RateLimiter"]


def test_pdf_is_chunked_by_page(tmp_path, embedder) -> None:
    pdf = write_pdf(
        tmp_path / "report.pdf", ["Revenue grew twelve percent.", "Churn fell in March."]
    )
    out = index(pdf)
    assert out.chunks_created == 2
    chunks = live_chunks(pdf)
    assert [c.header_path for c in chunks] == ["page 1", "page 2"]
    assert chunks[1].content == "Churn fell in March."


def test_a_pdf_pages_line_breaks_are_stored_as_newlines(tmp_path, embedder) -> None:
    """Text files had their \\r\\n and \\r made \\n; a PDF's page text kept them."""
    pdf = write_pdf(tmp_path / "memo.pdf", ["Line one\r\nline two\rthree\n\nPara two"])
    index(pdf)
    assert [c.content for c in live_chunks(pdf)] == ["Line one\nline two\nthree\n\nPara two"]


def test_reindexing_an_unchanged_file_does_nothing(tmp_path, embedder) -> None:
    files = write_docs(tmp_path)
    first = index(files["auth"])
    before = table_counts()
    again = index(files["auth"])
    assert again.skipped_unchanged and again.chunks_created == 0
    assert again.chunk_ids == first.chunk_ids
    assert table_counts() == before


def test_a_changed_file_replaces_its_chunks(tmp_path, embedder) -> None:
    files = write_docs(tmp_path)
    first = index(files["notes"])
    files["notes"].write_text("Only one paragraph now: the queue is drained hourly.\n")
    second = index(files["notes"])
    assert second.replaced_chunks == first.chunks_created and second.chunks_created == 1
    assert [c.id for c in live_chunks(files["notes"])] == second.chunk_ids
    with session_scope() as s:  # the old version is closed, not lost
        old = s.scalars(select(Chunk).where(Chunk.id.in_(first.chunk_ids))).all()
        assert len(old) == first.chunks_created and all(c.valid_to is not None for c in old)


def test_reindexing_a_file_whose_chunks_were_deleted_restores_them(tmp_path, embedder) -> None:
    """delete_chunks closes chunks and leaves their file's document: indexing the unchanged
    file again answered skipped_unchanged with fewer chunk ids (none at all once every
    chunk was deleted), and search never found those parts of the file again."""
    files = write_docs(tmp_path)
    first = index(files["auth"])
    runner.execute(documents.delete_chunks, DeleteChunksIn, {"ids": first.chunk_ids[1:]})
    again = index(files["auth"])
    assert not again.skipped_unchanged
    assert again.chunks_created == first.chunks_created and again.replaced_chunks == 1
    assert [c.id for c in live_chunks(files["auth"])] == again.chunk_ids
    assert all(c.embedding is not None for c in live_chunks(files["auth"]))
    hits = runner.execute(
        search_service.search_with_filters,
        SearchWithFiltersIn,
        {"query": "HS256 token expiry", "filters": {"source_file": str(files["auth"])}},
    )
    assert "Configuration > Authentication" in [h.metadata["header_path"] for h in hits.results]
    assert index(files["auth"]).skipped_unchanged  # whole again: skipped as before


def test_reindexing_a_file_chunked_by_an_older_chunker_rechunks_it(tmp_path, embedder) -> None:
    """A Windows text file indexed before \\r\\n became \\n kept its old chunks, \\r and all,
    and a setext-headed file its chunks without header_path: the file's bytes had not
    changed, so indexing it again answered skipped_unchanged. Unchanged now means the same
    bytes and the chunks today's chunker makes of them."""
    crlf = tmp_path / "windows.txt"
    crlf.write_bytes(
        b"Backups run nightly.\r\nThey go to the cold bucket.\r\n\r\nRestores: ask ops.\r\n"
    )
    setext = tmp_path / "runbook.md"
    setext.write_text("Runbook\n=======\n\nRestart the worker first.\n")
    first = index(crlf), index(setext)
    with session_scope() as s:  # what the chunker of an older memsys stored
        for chunk in s.scalars(select(Chunk).where(Chunk.id.in_(first[0].chunk_ids))):
            chunk.content = chunk.content.replace("\n", "\r\n")
        for chunk in s.scalars(select(Chunk).where(Chunk.id.in_(first[1].chunk_ids))):
            chunk.header_path = None
        forget_the_chunker(s, [out.document_id for out in first])  # none said which it was
    again = index(crlf), index(setext)
    assert not any(out.skipped_unchanged for out in again)
    assert [out.replaced_chunks for out in again] == [out.chunks_created for out in first]
    assert all("\r" not in c.content for c in live_chunks(crlf))
    assert [c.header_path for c in live_chunks(setext)] == ["Runbook"]
    assert all(c.embedding is not None for c in live_chunks(crlf) + live_chunks(setext))
    out = index_dir(tmp_path, async_mode=False)  # now current: skipped, by a folder too
    assert out.skipped_duplicates == 2 and out.files_indexed == 0
    assert index(crlf).skipped_unchanged


def forget_the_chunker(session: Any, document_ids: list[str]) -> None:
    """As an older memsys left its documents: no chunker fingerprint in their events."""
    session.execute(
        update(Event)
        .where(Event.subject_id.in_(document_ids))
        .values(payload=Event.payload.op("-")("chunker"))
    )


def never_chunk(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    def refuse(*args: Any) -> Any:
        raise AssertionError("chunked again")

    monkeypatch.setattr(chunking, "pieces_from_bytes", refuse)


def test_reindexing_an_unchanged_file_does_not_chunk_it_again(
    tmp_path, monkeypatch, embedder
) -> None:
    """Telling an unchanged file's chunks current meant chunking it again to compare: as
    slow as indexing it (~370 KB/s). The fingerprint of the chunker that made them (its
    code, the libraries it reads with, MEMSYS_CHUNK_MAX_TOKENS) is kept with the document;
    while it is today's, the file is skipped unchunked."""
    files = write_docs(tmp_path)
    first = index_dir(tmp_path, async_mode=False)
    alone = index(files["auth"])
    never_chunk(monkeypatch)
    before = table_counts()
    again = index(files["auth"])
    assert again.skipped_unchanged and again.chunk_ids == alone.chunk_ids
    out = index_dir(tmp_path, async_mode=False)
    assert out.skipped_duplicates == first.files_indexed and out.files_indexed == 0
    assert table_counts() == before


def test_a_new_chunk_size_rechunks_unchanged_files(tmp_path, monkeypatch, embedder) -> None:
    """Under another MEMSYS_CHUNK_MAX_TOKENS (or another chunker) the stored fingerprint is
    not today's: the file is chunked again and compared, replaced when its chunks differ,
    and noted as current when they do not (the next index then skips it unchunked)."""
    from memsys.config import get_settings

    long = tmp_path / "long.md"
    long.write_text("# Guide\n\n" + "Rotate the keys and then restart every worker. " * 60)
    short = tmp_path / "short.md"
    short.write_text("# Short\n\nOne line.\n")
    first = index(long), index(short)
    monkeypatch.setattr(get_settings(), "chunk_max_tokens", 64)
    again = index(long), index(short)
    assert not again[0].skipped_unchanged
    assert again[0].replaced_chunks == first[0].chunks_created < again[0].chunks_created
    assert again[1].skipped_unchanged and again[1].chunk_ids == first[1].chunk_ids
    never_chunk(monkeypatch)
    assert index(long).skipped_unchanged and index(short).skipped_unchanged


def test_another_python_rechunks_unchanged_files(tmp_path, monkeypatch, embedder) -> None:  # type: ignore[no-untyped-def]
    """The chunker reads with Python's own modules too: its parser (a file of a newer
    syntax is cut at its definitions only once Python reads it) and its Unicode tables (the
    composed form). Under another Python the stored fingerprint is not today's: an unchanged
    file is chunked again and compared, not skipped on a fingerprint that no longer says
    what made its chunks."""
    import unicodedata

    note = tmp_path / "note.md"
    note.write_text("# Note\n\nThe deploy key rotates monthly.\n")
    first = index(note)
    chunked: list[int] = []
    real = chunking.pieces_from_bytes

    def counted(*args: Any) -> Any:
        chunked.append(1)
        return real(*args)

    monkeypatch.setattr(chunking, "pieces_from_bytes", counted)
    monkeypatch.setattr(unicodedata, "unidata_version", "99.0.0")
    chunking._code.cache_clear()
    try:
        again = index(note)
    finally:
        monkeypatch.undo()
        chunking._code.cache_clear()
    assert chunked, "skipped on the fingerprint another Python's chunker left"
    assert again.skipped_unchanged and again.chunk_ids == first.chunk_ids


@pytest.mark.parametrize(
    ("name", "content", "error", "message"),
    [
        ("missing.md", None, NotFound, "File not found: "),
        ("image.png", b"\x89PNG", InvalidInput, "Unsupported file type: .png"),
        ("Makefile", b"all:", InvalidInput, r"Unsupported file type: \(no extension\)"),
        (
            "latin1.txt",
            "café".encode("latin-1"),
            InvalidInput,
            "Failed to read file: not valid UTF-8",
        ),
        (
            "broken.pdf",
            b"%PDF-1.4 garbage",
            InvalidInput,
            "Failed to read file: not a readable PDF",
        ),
    ],
)
def test_bad_files_are_rejected_and_write_nothing(tmp_path, name, content, error, message) -> None:
    path = tmp_path / name
    if content is not None:
        path.write_bytes(content)
    before = table_counts()
    with pytest.raises(error, match=message):
        index(path)
    assert table_counts() == before


def test_files_over_the_size_limit_are_refused(tmp_path, monkeypatch) -> None:
    from memsys.config import get_settings

    monkeypatch.setattr(get_settings(), "max_file_bytes", 100)
    big = tmp_path / "big.txt"
    big.write_text("x" * 101)
    with pytest.raises(InvalidInput, match="over the 100-byte limit"):
        index(big)


def test_a_file_growing_past_the_size_limit_while_read_is_refused(tmp_path, monkeypatch) -> None:
    """The size was checked by stat() and then the whole file read: a log still being
    written could grow past MEMSYS_MAX_FILE_BYTES in between, and all of it was indexed.
    At most one byte past the limit is read now, and that byte refuses the file."""
    from memsys.config import get_settings

    monkeypatch.setattr(get_settings(), "max_file_bytes", 100)
    log = tmp_path / "growing.txt"
    log.write_text("x" * 60)
    target, measure = log.resolve(), Path.stat
    measured = measure(log)

    def measured_before_it_grew(path: Path, **kwargs: Any) -> Any:
        # What stat() told memsys when it looked; a writer appended right after.
        return measured if path == target else measure(path, **kwargs)

    with open(log, "a") as out:
        out.write("y" * 60)
    monkeypatch.setattr(Path, "stat", measured_before_it_grew)
    before = table_counts()
    with pytest.raises(InvalidInput, match="over the 100-byte limit"):
        index(log)
    assert table_counts() == before


def test_index_directory_continues_past_bad_files(tmp_path, embedder) -> None:
    files = write_docs(tmp_path)
    (tmp_path / "bad.txt").write_bytes(b"\xc3\x28bad")  # not UTF-8 (nor a UTF-16 BOM)
    (tmp_path / "ignored.png").write_bytes(b"png")
    (tmp_path / ".hidden").mkdir()
    (tmp_path / ".hidden" / "secret.md").write_text("# hidden")
    out = index_dir(tmp_path, async_mode=False)
    assert out.files_indexed == len(files)
    assert [f.file for f in out.failed_files] == [str((tmp_path / "bad.txt").resolve())]
    assert out.failed_files[0].error.startswith("Failed to read file")
    assert out.pending_embeddings == 0
    with session_scope() as s:
        assert s.scalar(select(Chunk).where(Chunk.embedding.is_(None))) is None
    again = index_dir(tmp_path, async_mode=False)
    assert again.files_indexed == 0 and again.skipped_duplicates == len(files)


def test_a_file_name_that_is_not_utf8_is_a_failed_file_not_a_crash(tmp_path, embedder) -> None:
    """A name with a byte that is not UTF-8 (Python reads it as a lone surrogate) failed
    IndexFileIn's check, a ValidationError that was no MemsysError: HTTP 500, nothing
    indexed. It is a failed file, named so that a JSON answer can carry it."""
    import os

    files = write_docs(tmp_path)
    with open(os.path.join(os.fsencode(tmp_path), b"\xff-notes.md"), "w") as f:
        f.write("# Notes\nA file whose name is Latin-1.\n")
    out = index_dir(tmp_path, async_mode=False)
    assert out.files_indexed == len(files)
    (failed,) = out.failed_files
    assert failed.file.endswith("\\udcff-notes.md") and "not UTF-8" in failed.error
    out.model_dump_json().encode("utf-8")  # what the REST answer writes


def test_index_directory_not_recursive(tmp_path, embedder) -> None:
    write_docs(tmp_path)
    out = index_dir(tmp_path, recursive=False, async_mode=False)
    assert out.files_indexed == 3  # guides/deploy.md is below


def test_reindexing_a_folder_drops_the_files_deleted_from_it(tmp_path, embedder) -> None:
    """index_directory kept the chunks of files deleted from the folder since the last run:
    search went on finding them. Now a run closes the documents of files it would have
    indexed (under the folder, of a supported type, not hidden, below it only if recursive)
    that no longer exist, and names them; other files' documents are not its business."""
    root = tmp_path / "docs"
    files = write_docs(root)
    hidden = root / ".drafts" / "idea.md"
    hidden.parent.mkdir()
    hidden.write_text("# Idea\n\nA draft indexed on its own.\n")
    outside = tmp_path / "elsewhere.md"
    outside.write_text("# Elsewhere\n\nNot under the folder.\n")
    index_dir(root, async_mode=False)
    index_dir(root, namespace="other", async_mode=False)
    index(hidden), index(outside)
    for path in (files["deploy"], files["notes"], hidden, outside):
        path.unlink()
    files["deploy"].parent.rmdir()  # left empty, guides/ would look like a disk not mounted

    flat = index_dir(root, recursive=False, async_mode=False)
    assert flat.removed_files == [str(files["notes"].resolve())] and flat.removed_chunks == 1
    assert flat.skipped_duplicates == 2 and flat.files_indexed == 0
    deep = index_dir(root, async_mode=False)
    assert deep.removed_files == [str(files["deploy"].resolve())] and deep.removed_chunks == 2
    assert index_dir(root, async_mode=False).removed_files == []
    with session_scope() as s:  # another namespace, a hidden file, a file elsewhere: kept
        kept = s.execute(
            select(Document.namespace, Document.source_file).where(Document.valid_to.is_(None))
        ).all()
    assert sorted(kept) == sorted(
        [("default", str(p.resolve())) for p in (files["auth"], files["code"], hidden, outside)]
        + [("other", str(p.resolve())) for p in files.values()]
    )
    with session_scope() as s:
        assert not s.scalars(
            select(Chunk.id).where(
                Chunk.namespace == "default",
                Chunk.source_file.in_(
                    [str(files["deploy"].resolve()), str(files["notes"].resolve())]
                ),
                Chunk.valid_to.is_(None),
            )
        ).all()
    hits = runner.execute(
        search_service.search_with_filters,
        SearchWithFiltersIn,
        {"query": "roll back the previous wheel", "filters": {"namespace": "default"}},
    )
    assert str(files["deploy"].resolve()) not in {h.metadata["source_file"] for h in hits.results}


def test_a_folder_found_empty_keeps_its_files_unless_forced(tmp_path, embedder) -> None:
    """A folder with no file in it looked like one whose files were all deleted: indexing
    a mount point whose disk was not mounted dropped its whole index. Its files are kept
    now, named with a warning; `force` drops them, as a folder really emptied wants."""
    root = tmp_path / "mnt"
    files = write_docs(root)
    first = index_dir(root, async_mode=False)
    for path in files.values():  # the disk goes away: an empty mount point is left
        path.unlink()
    (root / "guides").rmdir()
    before = table_counts()
    out = index_dir(root, async_mode=False)
    assert out.removed_files == [] and out.removed_chunks == 0
    assert out.kept_files == sorted(str(p.resolve()) for p in files.values())
    assert out.warning and "force" in out.warning and str(root) in out.warning
    assert table_counts() == before
    assert runner.execute_bare(index_stats.stats).unique_sources == len(files)
    mcp = call(BY_NAME["index_directory"], {"dir_path": str(root)})  # the tool says so too
    assert mcp["success"] and mcp["data"]["warning"] == out.warning
    assert mcp["data"]["kept_files"] == out.kept_files

    (root / "unrelated.png").write_bytes(b"png")  # no file to index still
    forced = index_dir(root, force=True, async_mode=False)
    assert forced.removed_files == out.kept_files and forced.kept_files == []
    assert forced.removed_chunks == first.total_chunks and forced.warning is None
    assert index_dir(root).model_dump(include={"kept_files", "warning"}) == {
        "kept_files": [],
        "warning": None,
    }


def test_an_empty_subfolder_keeps_its_files_a_subfolder_gone_drops_them(tmp_path, embedder) -> None:
    """With `recursive`, a mount point inside an indexed folder (archive/) whose disk was not
    mounted lost all its files from the index, because the folder around it still held
    others. A subfolder that exists and holds no file to index now keeps the files indexed
    from it, named with the same warning, unless forced; a subfolder gone altogether was
    deleted or renamed (as `rsync --delete` does), and its files are dropped as before."""
    import shutil

    root = tmp_path / "docs"
    files = write_docs(root)
    archive = root / "archive"
    (archive / "2024").mkdir(parents=True)
    (archive / "2024" / "old.md").write_text("# Old\n\nThe 2024 budget closed in March.\n")
    (archive / "top.md").write_text("# Top\n\nThe archive's own index page.\n")
    (root / "scratch").mkdir()
    (root / "scratch" / "draft.md").write_text("# Draft\n\nA draft the user threw away.\n")
    index_dir(root, async_mode=False)
    shutil.rmtree(archive / "2024"), (archive / "top.md").unlink()  # unmounted: archive/ empty
    shutil.rmtree(root / "scratch")  # deleted by the user, folder and all
    files["notes"].unlink()

    out = index_dir(root, async_mode=False)
    assert out.removed_files == [str(files["notes"]), str(root / "scratch" / "draft.md")]
    assert out.kept_files == [str(archive / "2024" / "old.md"), str(archive / "top.md")]
    assert out.warning and str(archive) in out.warning and "force=true" in out.warning
    sources = runner.execute_bare(index_stats.stats).source_files
    assert set(out.kept_files) <= set(sources)
    mcp = call(BY_NAME["index_directory"], {"dir_path": str(root)})
    assert mcp["success"] and mcp["data"]["kept_files"] == out.kept_files
    assert mcp["data"]["warning"] == out.warning

    forced = index_dir(root, force=True, async_mode=False)
    assert forced.removed_files == out.kept_files and forced.kept_files == []
    assert forced.warning is None
    assert not set(out.kept_files) & set(runner.execute_bare(index_stats.stats).source_files)


def test_a_folder_of_many_files_writes_its_chunks_in_few_statements(tmp_path, embedder) -> None:
    """Every file's chunks were one INSERT, and each INSERT runs the full-text statistics
    trigger, which updates the counts of the same common terms again in the one transaction:
    each run walked the row versions the earlier ones left, and 5,000 small files took five
    minutes instead of fifteen seconds (the figures in benchmarks/README.md). The chunks of
    many files are written together now; what is stored and counted is the same."""
    from sqlalchemy import event

    from memsys.db import get_engine
    from memsys.models import CorpusStat

    for i in range(60):
        (tmp_path / f"note{i:02d}.md").write_text(f"# Note {i}\n\nThe cache server note {i}.\n")
    inserts: list[str] = []

    def count(conn, cursor, statement, *args) -> None:  # type: ignore[no-untyped-def]
        if statement.startswith("INSERT INTO chunk"):
            inserts.append(statement)

    event.listen(get_engine(), "before_cursor_execute", count)
    try:
        out = index_dir(tmp_path, async_mode=False)
    finally:
        event.remove(get_engine(), "before_cursor_execute", count)
    assert out.files_indexed == 60 and out.total_chunks == 60 and out.pending_embeddings == 0
    assert len(inserts) == 1
    with session_scope() as s:
        stat = s.scalars(select(CorpusStat).where(CorpusStat.namespace == "default")).one()
        assert stat.doc_count == 60
    hits = runner.execute(
        search_service.search_with_filters,
        SearchWithFiltersIn,
        {"query": "cache server note 42", "filters": {"namespace": "default"}},
    )
    assert hits.results[0].metadata["source_file"] == str(tmp_path / "note42.md")


def test_a_file_deleted_while_its_folder_is_indexed_is_dropped_not_failed(
    tmp_path, embedder
) -> None:
    """A file listed and then deleted before the run read it was reported as a failure
    ("File not found") and, indexed before, as removed too: it is only gone."""
    files = write_docs(tmp_path)
    index_dir(tmp_path, async_mode=False)
    files["deploy"].write_text("# Deployment\n\nChanged, then deleted mid-run.\n")
    (tmp_path / "guides" / "new.md").write_text("# New\n\nListed, then deleted.\n")

    def delete_the_guides(phase: str, done: int, total: int) -> None:
        if phase == "read" and done == 1:  # the root's files come first, then guides/
            files["deploy"].unlink()
            (tmp_path / "guides" / "new.md").unlink()

    out = runner.execute(
        functools.partial(folders.index_directory, progress=delete_the_guides),
        IndexDirectoryIn,
        {"dir_path": str(tmp_path), "async_mode": False},
    )
    assert out.failed_files == []
    assert out.removed_files == [str(files["deploy"].resolve())]
    assert out.skipped_duplicates == 3 and out.files_indexed == 0


def test_a_deleted_file_another_writer_closed_meanwhile_is_not_dropped_again(
    tmp_path, embedder
) -> None:
    """drop_deleted read the live documents, then waited for the file's turn and closed the
    one it had read: a document another writer closed meanwhile was closed again (its
    valid_to overwritten, a second delete event, the file listed in removed_files)."""
    files = write_docs(tmp_path)
    index_dir(tmp_path, async_mode=False)
    files["notes"].unlink()
    source = str(files["notes"].resolve())
    out: list[Any] = []
    with session_scope() as s:  # the other writer: holds the file's turn, closes it
        take_turns(s, "default", source)
        doc = documents.live_document(s, "default", source)
        assert doc is not None
        documents.close_document(s, doc)
        run = threading.Thread(target=lambda: out.append(index_dir(tmp_path)))
        run.start()
        assert until(lambda: lock_waiters() == 1, 30)
    run.join(30)
    assert out and out[0].removed_files == [] and out[0].removed_chunks == 0
    with session_scope() as s:
        closed = s.scalars(select(Document.valid_to).where(Document.source_file == source))
        assert len(closed.all()) == 1
        assert not s.scalars(select(Event.id).where(Event.operation == "index_directory")).all()


def test_async_mode_queues_embeddings_and_full_text_works_at_once(tmp_path, embedder) -> None:
    write_docs(tmp_path)
    out = index_dir(tmp_path, namespace="docs", async_mode=True)
    assert out.pending_embeddings == out.total_chunks > 0
    stats = runner.execute_bare(index_stats.stats)
    assert stats.pending_embeddings == out.total_chunks
    found = runner.execute(
        search_service.search_with_filters,
        SearchWithFiltersIn,
        {"query": "keepalive", "filters": {"namespace": "docs"}},
    )
    assert "keepalive" in found.results[0].content  # lexical channel, before any embedding
    from memsys.background import EmbeddingWorker

    assert EmbeddingWorker().drain() == out.total_chunks
    assert runner.execute_bare(index_stats.stats).pending_embeddings == 0
    with session_scope() as s:
        assert set(s.scalars(select(Document.status))) == {"ready"}


def test_missing_directory_is_an_error(tmp_path) -> None:
    with pytest.raises(NotFound, match="Directory not found"):
        index_dir(tmp_path / "nope")
    (tmp_path / "file.md").write_text("# x")
    with pytest.raises(InvalidInput, match="Not a directory"):
        index_dir(tmp_path / "file.md")


@pytest.mark.parametrize("path", ["", "   "])
def test_an_empty_path_is_refused_not_taken_as_the_working_directory(path, monkeypatch) -> None:
    before = table_counts()
    with pytest.raises(InvalidInput, match="Directory path cannot be empty"):
        index_dir(path)
    with pytest.raises(InvalidInput, match="File path cannot be empty"):
        index(path)
    with pytest.raises(InvalidInput, match="Source file path cannot be empty"):
        runner.execute(documents.delete_file, DeleteFileIn, {"source_file": path})
    assert table_counts() == before


def test_delete_chunks_file_and_clear(tmp_path, embedder) -> None:
    files = write_docs(tmp_path)
    index_dir(tmp_path, async_mode=False)
    rule = store("Never force-push to main", memory_type="golden_rule")
    auth = live_chunks(files["auth"])
    out = runner.execute(
        documents.delete_chunks, DeleteChunksIn, {"ids": [auth[0].id, "chk_missing", rule.id]}
    )
    assert out.deleted_ids == [auth[0].id]
    assert out.not_found_ids == ["chk_missing"] and out.protected_ids == [rule.id]

    out = runner.execute(documents.delete_file, DeleteFileIn, {"source_file": str(files["deploy"])})
    assert out.deleted_count == 2 and live_chunks(files["deploy"]) == []
    with pytest.raises(NotFound, match="No indexed file"):
        runner.execute(documents.delete_file, DeleteFileIn, {"source_file": str(files["deploy"])})

    before = table_counts()
    with pytest.raises(
        InvalidInput, match="Safety check: Set confirm=True to delete all documents"
    ):
        runner.execute(documents.clear_index, ClearIndexIn, {"confirm": False})
    assert table_counts() == before
    cleared = runner.execute(documents.clear_index, ClearIndexIn, {"confirm": True})
    assert cleared.deleted_count > 0
    stats = runner.execute_bare(index_stats.stats)
    assert stats.total_documents == 0 and stats.memory_count == 1  # memories are kept


def test_stats_describe_the_collection(tmp_path, embedder) -> None:
    files = write_docs(tmp_path)
    index(files["auth"], namespace="docs")
    index(files["notes"])
    store("rule", memory_type="golden_rule", namespace="project:x")
    stats = runner.execute_bare(index_stats.stats)
    assert stats.total_documents == 3 + 1  # notes.txt: two short paragraphs, one chunk
    assert stats.unique_sources == 2
    assert stats.source_files == sorted(str(files[k].resolve()) for k in ("auth", "notes"))
    assert stats.namespaces == ["default", "docs", "project:x"]
    assert stats.memory_count == 1 and stats.golden_rule_count == 1


def test_stats_leave_out_a_file_whose_chunks_were_all_deleted(tmp_path, embedder) -> None:
    """delete_chunks closes chunks, not their file's document: stats still listed a file
    with nothing left of it to find among the indexed sources (and memory_list_namespaces
    counted it among the namespace's documents)."""
    files = write_docs(tmp_path)
    auth, deploy = index(files["auth"]), index(files["deploy"])
    (tmp_path / "empty.md").write_text("")
    index(tmp_path / "empty.md")  # indexed, with nothing in it to chunk: still a source
    runner.execute(documents.delete_chunks, DeleteChunksIn, {"ids": auth.chunk_ids})
    runner.execute(documents.delete_chunks, DeleteChunksIn, {"ids": deploy.chunk_ids[:1]})
    stats = runner.execute_bare(index_stats.stats)
    assert stats.source_files == sorted(
        str(p.resolve()) for p in (files["deploy"], tmp_path / "empty.md")
    )
    assert stats.unique_sources == 2 and stats.total_documents == len(deploy.chunk_ids) - 1
    listed = runner.execute_bare(namespaces.list_with_counts).namespaces
    assert [(n.namespace, n.document_count) for n in listed] == [("default", 2)]


def test_pipes_devices_and_symlink_loops_are_refused_without_hanging(tmp_path, embedder) -> None:
    import os

    os.mkfifo(tmp_path / "pipe.md")  # reading it would block forever
    (tmp_path / "zero.txt").symlink_to("/dev/zero")  # a device never ends
    (tmp_path / "loop.md").symlink_to(tmp_path / "loop.md")
    (tmp_path / "real.md").write_text("# Real\n\nThe only file worth indexing.\n")
    before = table_counts()
    for name, message in (
        ("pipe.md", "Not a regular file"),
        ("zero.txt", "outside the folders memsys may index"),  # resolves to /dev/zero
        ("loop.md", "Cannot resolve path"),
    ):
        with pytest.raises(InvalidInput, match=message):
            index(tmp_path / name)
    assert table_counts() == before
    out = index_dir(tmp_path, async_mode=False)
    assert out.files_indexed == 1
    assert sorted(Path(f.file).name for f in out.failed_files) == ["loop.md", "pipe.md", "zero.txt"]


def test_a_file_swapped_for_a_pipe_after_its_check_is_refused_in_indexing_words(
    tmp_path, embedder, monkeypatch
) -> None:
    """A file replaced by a FIFO between the first check and the read was refused with
    "use - for stdin or stdout", the CLI's words for its own file arguments: indexing takes
    no `-`. The refusal says what is wrong for indexing."""
    import os

    real = tmp_path / "notes.md"
    real.write_text("# Notes\n\nSwapped for a pipe while it was being indexed.\n")
    file_type = chunking.file_type

    def swapped(suffix: str) -> str:  # runs between _read's check and the read itself
        real.unlink()
        os.mkfifo(real)
        return file_type(suffix)

    monkeypatch.setattr(chunking, "file_type", swapped)
    before = table_counts()
    with pytest.raises(InvalidInput) as refused:
        index(real)
    assert refused.value.message.startswith(f"Not a regular file: {real}")
    assert "stdin" not in refused.value.message and "indexed" in refused.value.message
    assert table_counts() == before


@contextmanager
def without_root_powers(tree: Path) -> Iterator[None]:
    """Within the block, file permissions hold for this thread as they do for any user: run
    as root, its file accesses are checked as `nobody`'s (setfsuid), the owner of `tree`
    then. (A connection to the database opened before goes on being used.)"""
    import ctypes
    import os

    if os.geteuid() != 0:
        yield
        return
    for folder, dirs, files in os.walk(tree):
        for name in [folder, *(os.path.join(folder, n) for n in dirs + files)]:
            os.chown(name, 65534, 65534, follow_symlinks=False)
    libc = ctypes.CDLL(None, use_errno=True)
    libc.setfsuid(65534)
    try:
        yield
    finally:
        libc.setfsuid(0)


def test_files_and_folders_it_may_not_read_fail_one_by_one_not_the_folder(embedder) -> None:
    """A file in a folder that can be listed but not entered (`chmod -R 644 docs/`) raised
    the system's PermissionError out of index_directory: the whole folder failed, nothing
    was indexed. A folder that cannot be listed at all was skipped without a word. Each is
    now a failed file of its own, the rest of the folder is indexed, and what was indexed
    from them before is not dropped (it may still be there)."""
    import shutil
    import tempfile

    tree = Path(tempfile.mkdtemp(dir="/tmp"))  # outside pytest's folders, which root owns
    try:
        docs = tree / "docs"
        files = write_docs(docs)
        (docs / "locked.md").write_text("# Locked\n\nNo one may read this note.\n")
        for name in ("half", "shut"):
            (docs / name).mkdir()
            (docs / name / "inside.md").write_text(f"# {name}\n\nA note in {name}.\n")
        index_dir(docs, async_mode=False)  # all readable yet
        (docs / "locked.md").chmod(0o000)
        (docs / "half").chmod(0o644)  # listed, not entered
        (docs / "shut").chmod(0o000)  # not even listed
        with without_root_powers(tree):
            (docs / "guides" / "new.md").write_text("# New\n\nWritten since.\n")
            out = index_dir(docs, async_mode=False)
        assert out.files_indexed == 1 and out.skipped_duplicates == len(files)
        failed = {f.file: f.error for f in out.failed_files}
        assert sorted(failed) == [str(docs / p) for p in ("half/inside.md", "locked.md", "shut")]
        assert all("Permission denied" in error for error in failed.values()), failed
        assert out.removed_files == [] and out.kept_files == []
        assert len(runner.execute_bare(index_stats.stats).source_files) == len(files) + 4
    finally:
        for name in ("half", "shut"):
            (tree / "docs" / name).chmod(0o755)
        shutil.rmtree(tree)


def linked_plan(tmp_path: Path) -> tuple[Path, Path, Path]:
    """A folder `notes` holding a note of its own and `plan.md`, a link to a file outside it:
    (the link's target, the folder, the link)."""
    shared = tmp_path / "shared" / "plan.md"
    shared.parent.mkdir()
    shared.write_text("# Plan\n\nThe migration window opens on Sunday at dawn.\n")
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "own.md").write_text("# Own\n\nA note of the folder's own.\n")
    link = notes / "plan.md"
    link.symlink_to(shared)
    return shared, notes, link


def test_a_symlinked_file_is_indexed_under_the_path_its_folder_holds(tmp_path, embedder) -> None:
    """A link's chunks were stored under its target's path: deleting or filtering by the
    path the user's folder holds found nothing, and removing the link from the folder left
    its chunks in the index for good (the target is not under the folder). Every front door
    now knows the file by the link's own path; the target is what is read."""
    shared, notes, link = linked_plan(tmp_path)
    shown = str(link)  # tmp_path is resolved: the path the user sees

    first = index_dir(notes, async_mode=False)
    assert first.files_indexed == 2
    sources = runner.execute_bare(index_stats.stats).source_files
    assert shown in sources and str(shared) not in sources
    again = index(link)
    assert again.skipped_unchanged and again.source_file == shown
    hits = runner.execute(
        search_service.search_with_filters,
        SearchWithFiltersIn,
        {"query": "migration window", "filters": {"source_file": shown}},
    )
    assert hits.results and {h.metadata["source_file"] for h in hits.results} == {shown}
    gone = runner.execute(documents.delete_file, DeleteFileIn, {"source_file": shown})
    assert gone.source_file == shown and gone.deleted_count == 1

    assert index_dir(notes, async_mode=False).files_indexed == 1  # back again
    link.unlink()  # the link leaves the folder: so do its chunks
    out = index_dir(notes, async_mode=False)
    assert out.removed_files == [shown] and out.removed_chunks == 1
    assert runner.execute_bare(index_stats.stats).source_files == [str(notes / "own.md")]


def test_a_link_whose_target_is_deleted_leaves_the_index(tmp_path, embedder) -> None:  # type: ignore[no-untyped-def]
    """A symlinked file is indexed under the link's path; when its target was deleted the
    link stayed in the folder, pointing at nothing, and the target's chunks stayed in the
    index for good (the link itself was there, so the file did not look gone), found by
    every search. A link to nothing holds no file: its chunks go, as a deleted file's do."""
    shared, notes, link = linked_plan(tmp_path)
    assert index_dir(notes, async_mode=False).files_indexed == 2
    shared.unlink()  # the target is deleted; the link dangles
    out = index_dir(notes, async_mode=False)
    assert out.removed_files == [str(link)] and out.removed_chunks == 1
    assert out.failed_files == []  # a file gone, not one that failed
    assert runner.execute_bare(index_stats.stats).source_files == [str(notes / "own.md")]


def test_concurrent_reindexing_of_a_changed_file_lets_the_last_writer_win(
    tmp_path, embedder
) -> None:
    from concurrent.futures import ThreadPoolExecutor

    doc = tmp_path / "shared.md"
    doc.write_text("# Shared\n\nFirst version.\n")
    index(doc)
    doc.write_text("# Shared\n\nSecond version, written while eight clients re-index it.\n")
    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(lambda _: index(doc), range(8)))
    assert sum(not r.skipped_unchanged for r in results) == 1  # one wrote, seven saw it done
    with session_scope() as s:
        live = s.scalars(select(Document).where(Document.valid_to.is_(None))).all()
    assert len(live) == 1
    chunks = live_chunks(doc)
    assert len(chunks) == 1 and "Second version" in chunks[0].content


def test_only_files_under_the_index_roots_are_read(tmp_path, monkeypatch, embedder) -> None:
    from memsys.config import get_settings

    inside = tmp_path / "allowed"
    inside.mkdir()
    (inside / "ok.md").write_text("# Ok\n\nInside the root.\n")
    secret = tmp_path / "creds.txt"
    secret.write_text("password=hunter2")
    monkeypatch.setenv("MEMSYS_INDEX_ROOTS", str(inside))
    get_settings.cache_clear()
    try:
        assert index(inside / "ok.md").chunks_created == 1
        before = table_counts()
        for target in (secret, inside / ".." / "creds.txt", tmp_path / "missing.txt"):
            # the same answer whether the file outside exists or not
            with pytest.raises(InvalidInput, match="outside the folders memsys may index"):
                index(target)
        with pytest.raises(InvalidInput, match="outside the folders"):
            index_dir(tmp_path)
        (inside / "link.txt").symlink_to(secret)  # a link out of the root is outside too
        with pytest.raises(InvalidInput, match="outside the folders"):
            index(inside / "link.txt")
        assert table_counts() == before
        for roots in ("", str(tmp_path / "loop")):  # none, or one whose links loop
            (tmp_path / "loop").symlink_to(tmp_path / "loop", target_is_directory=True)
            monkeypatch.setenv("MEMSYS_INDEX_ROOTS", roots)
            get_settings.cache_clear()
            with pytest.raises(InvalidInput, match="none: indexing is off"):
                index(inside / "ok.md")
            (tmp_path / "loop").unlink()
    finally:
        monkeypatch.undo()
        get_settings.cache_clear()


def test_sync_indexing_reports_embedding_progress_block_by_block(tmp_path, embedder) -> None:
    sections = "\n\n".join(f"## Topic {i}\n\nNotes about topic number {i}." for i in range(80))
    (tmp_path / "big.md").write_text(f"# Big\n\n{sections}\n")
    seen: list[tuple[str, int, int]] = []
    runner.execute(
        functools.partial(folders.index_directory, progress=lambda *a: seen.append(a)),
        IndexDirectoryIn,
        {"dir_path": str(tmp_path), "async_mode": False},
    )
    embedded = [(done, total) for phase, done, total in seen if phase == "embed"]
    assert len(embedded) >= 3  # the bar moves while the model works, not only at the end
    assert [d for d, _ in embedded] == sorted(d for d, _ in embedded)
    assert embedded[-1][0] == embedded[-1][1] >= 80


def test_sync_indexing_embeds_every_chunk_past_the_queue_token_budget(
    tmp_path, embedder, monkeypatch
) -> None:
    """A block of chunks passes the queue's token budget (on real folders, ~70 chunks of a
    full window): --sync left the rest without vectors and still said none were pending."""
    from memsys.services import embedding_queue

    write_docs(tmp_path)
    monkeypatch.setattr(embedding_queue, "EMBED_TOKENS", 40)  # a block takes several calls
    out = index_dir(tmp_path, async_mode=False)
    assert out.total_chunks > 4 and out.pending_embeddings == 0
    with session_scope() as s:
        assert s.scalar(select(Chunk).where(Chunk.embedding.is_(None))) is None
        assert set(s.scalars(select(Document.status))) == {"ready"}


def test_a_queue_batch_stops_at_its_token_budget(embedder, monkeypatch) -> None:
    """A batch's rows stay locked while it embeds, and a writer of one of them waits: long
    memories queued by an upgrade are taken a few at a time (by tokens), not 64 at once."""
    from sqlalchemy import text
    from sqlalchemy.exc import OperationalError

    from memsys.db import get_engine
    from memsys.services import embedding_queue

    notes = [
        " ".join(f"Note {k}, paragraph {n}: the queue embeds long memories." for n in range(30))
        for k in range(3)
    ]
    ids = [store(note).id for note in notes]
    with session_scope() as s:
        tokens = s.scalars(select(Chunk.token_count).where(Chunk.id.in_(ids))).all()
    queue_for_embedding(*ids)
    assert all(400 < t < 450 for t in tokens)
    monkeypatch.setattr(embedding_queue, "EMBED_TOKENS", 900)
    model = embedding_queue.get_embedder()
    free_while_embedding = []

    class Probe:  # the real model, and a writer's try at the row the batch leaves out
        def embed(self, texts: list[str]):  # type: ignore[no-untyped-def]
            with get_engine().connect() as writer:
                try:
                    writer.execute(
                        text("SELECT 1 FROM chunk WHERE id = :id FOR UPDATE NOWAIT"),
                        {"id": ids[2]},
                    )
                    free_while_embedding.append(True)
                except OperationalError:
                    free_while_embedding.append(False)
                writer.rollback()
            return model.embed(texts)

    monkeypatch.setattr(embedding_queue, "get_embedder", Probe)
    with session_scope() as s:
        assert embedding_queue.embed_pending(s) == 2  # a third would pass 900 tokens
    assert free_while_embedding == [True]  # the row left out was not locked meanwhile
    with session_scope() as s:
        assert embedding_queue.embed_pending(s) == 1
        assert embedding_queue.pending_count(s) == 0


def test_embedding_a_queued_memory_is_not_an_edit(embedder) -> None:
    """The queue gives a memory the vector an upgrade cleared: its updated_at (what
    memory_list shows and orders by) stays when it was last edited, not when it was embedded."""
    from memsys.schemas import MemoryListIn
    from memsys.services import embedding_queue, memories

    def listed() -> list[tuple[str, object]]:
        out = runner.execute(memories.list_memories, MemoryListIn, {"order_by": "updated_at"})
        return [(m.id, m.updated_at) for m in out.memories]

    old = store("The deploy script lives in tools/deploy.sh").id
    store("Grafana dashboards are provisioned from JSON files")
    before = listed()
    queue_for_embedding(old)
    with session_scope() as s:
        assert embedding_queue.embed_pending(s) == 1
    assert listed() == before and before[-1][0] == old


def test_a_decomposed_document_is_found_by_its_words_typed_either_way(tmp_path, embedder) -> None:
    """Queries are read composed (NFC): a document indexed with an accent as a letter and a
    combining mark matched neither way of typing its words in full text. Indexing composes
    it, as memories are stored."""
    note = tmp_path / "notes.md"
    note.write_text("# Offsite\n\nThe re\u0301union in Montre\u0301al moved to Thursday.\n")
    index(note, namespace="docs")
    (chunk,) = live_chunks(note)
    assert "r\u00e9union" in chunk.content and "\u0301" not in chunk.content

    def lexical_hit(query: str) -> float:
        found = runner.execute(
            search_service.search_with_filters,
            SearchWithFiltersIn,
            {"query": query, "filters": {"namespace": "docs"}},
        )
        return found.results[0].score

    assert lexical_hit("r\u00e9union Montr\u00e9al") == lexical_hit("re\u0301union Montre\u0301al")


def test_a_long_file_indexed_where_a_worker_runs_leaves_the_rest_to_it(
    tmp_path, embedder, monkeypatch
) -> None:
    """index_file embedded every chunk inside the call: a file at the 20 MiB limit kept one
    call busy for half an hour. Where a worker drains the queue (memsys serve, memsys mcp) the
    call embeds the opening chunks that fit one of its batches and leaves the rest queued; in a
    process without one (the CLI on its own) it still embeds them all."""
    from memsys.background import EmbeddingWorker, worker
    from memsys.services import embedding_queue

    monkeypatch.setattr(embedding_queue, "EMBED_TOKENS", 300)  # a worker's batch: ~2 chunks
    paragraphs = [
        f"Section {i} of the runbook: restart the queue and check its lag." for i in range(6)
    ]
    text = "\n\n".join(f"{p} " * 20 for p in paragraphs)  # ~8,000 characters, several chunks
    source = tmp_path / "long.md"
    source.write_text(text)
    alone = index(source, namespace="kb")
    assert alone.chunks_created > 2 and alone.pending_embeddings == 0

    source.write_text(text + "\n\nA changed ending.")
    worker().start()
    try:
        out = index(source, namespace="kb")
    finally:
        worker().stop()
    assert 0 < out.pending_embeddings < out.chunks_created
    with session_scope() as s:
        unembedded = [c for c in live_chunks(source) if c.embedding is None]
        status = s.scalar(select(Document.status).where(Document.id == out.document_id))
    assert len(unembedded) <= out.pending_embeddings  # the worker may have taken some already
    if unembedded:
        assert status == "pending"
    EmbeddingWorker().drain()
    assert all(c.embedding is not None for c in live_chunks(source))
    with session_scope() as s:
        assert s.scalar(select(Document.status).where(Document.id == out.document_id)) == "ready"


def test_a_file_it_may_not_read_is_named_in_the_refusal(embedder) -> None:
    """index_file of a file the server may not read said "Failed to read file: Permission
    denied" without saying which file, though every other refusal of a path names it."""
    import shutil
    import tempfile

    tree = Path(tempfile.mkdtemp(dir="/tmp"))  # outside pytest's folders, which root owns
    try:
        locked = tree / "locked.md"
        locked.write_text("# Locked\n\nNo one may read this note.\n")
        locked.chmod(0o000)
        before = table_counts()
        with without_root_powers(tree), pytest.raises(InvalidInput) as refused:
            index(locked)
        assert refused.value.message == f"Failed to read file {locked}: Permission denied"
        assert table_counts() == before
    finally:
        shutil.rmtree(tree)


def test_a_file_system_refusal_is_logged_under_the_operation_s_name(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """`memsys index` runs index_directory with its progress bar bound (functools.partial):
    the server log's line for a path the file system refused named the call
    `functools.partial(<function index_directory at 0x…>, progress=…)`."""
    import logging

    service = functools.partial(folders.index_directory, progress=None)
    with caplog.at_level(logging.WARNING, logger="memsys.runner"), pytest.raises(InvalidInput):
        runner.execute(service, IndexDirectoryIn, {"dir_path": str(tmp_path / ("a" * 256))})
    [line] = [r.getMessage() for r in caplog.records if r.name == "memsys.runner"]
    assert line.startswith("index_directory: refused by the system: "), line
    assert "partial" not in line and "File name too long" in line
