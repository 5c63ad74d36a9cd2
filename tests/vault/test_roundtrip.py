"""Export → import into an empty database → export gives the same bytes, in every format;
import is idempotent and a hand edit becomes a new version."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml
from sqlalchemy import text

from memsys import runner
from memsys.db import session_scope
from memsys.errors import InvalidInput
from memsys.schemas import MemoryForgetIn
from memsys.schemas.edges import MemoryRelateIn
from memsys.services import edges, memories
from tests.conftest import table_counts
from tests.factories import set_preference, store
from tests.vault.helpers import (
    HAPPENED,
    diff,
    empty_database,
    export,
    happened,
    import_,
    live_count,
    seed,
    tree,
)


@pytest.mark.parametrize("name", ["snap.json", "snap.jsonl"])
def test_json_round_trip_is_byte_identical(tmp_path: Path, embedder: object, name: str) -> None:
    ids = seed()
    first = export(tmp_path / name)
    assert (first.memories, first.edges, first.preferences) == (4, 2, 2)
    assert f'"happened": "{HAPPENED}"' in (tmp_path / name).read_text()
    empty_database()
    report = import_(tmp_path / name)
    assert report.applied and report.problem_count == 0
    assert (report.memories.new, report.edges.new, report.preferences.new) == (4, 2, 2)
    # When a memory happened comes back (a question naming its date finds it), and only
    # on the memory that had one.
    assert happened(ids["problem"]) == HAPPENED and happened(ids["fix"]) is None
    again = export(tmp_path / f"again-{name}")
    assert (tmp_path / name).read_bytes() == (tmp_path / f"again-{name}").read_bytes()
    assert again.bytes == first.bytes


def test_vault_round_trip_is_byte_identical(tmp_path: Path, embedder: object) -> None:
    ids = seed()
    out = export(tmp_path / "vault")
    assert out.format == "vault" and out.memories == 4
    files = tree(tmp_path / "vault")
    assert ".gitignore" in files and "memsys-vault.yaml" in files
    assert any(p.startswith("graph/fixes/redis-connection-timeouts") for p in files)
    assert any(p.startswith("vault/never-commit-secrets-") for p in files)  # pinned
    assert any(p.startswith("graph/decisions/websockets-over-polling-") for p in files)
    edge_files = [p for p in files if p.startswith("graph/edges/")]
    assert len(edge_files) == 2 and any("--RELATES_TO--" in p for p in edge_files)
    fix = next(v for p, v in files.items() if p.startswith("graph/fixes/")).decode()
    assert (
        f"id: {ids['fix']}" in fix and "type: fix" in fix and 'tags: ["production", "redis"]' in fix
    )
    assert "direction: outgoing" in fix and "direction: incoming" in fix
    assert b"_state.json" in files[".gitignore"]
    # The lifecycle's briefs go in as derived files (S003): read by people, never imported.
    assert files["CORE.md"].startswith(b"# Memory Core (auto-generated)")
    assert b"redis" in files["CORE.md"].lower()  # the fix memory is listed
    links = re.findall(r"\]\(([^)\s]+\.md)\)", files["CORE.md"].decode())
    assert links and all(link in files for link in links)  # each opens the exported file
    assert "REFLECTION.md" in files
    problem = next(v for p, v in files.items() if p.startswith("graph/problems/")).decode()
    assert f"happened: {HAPPENED}" in problem and "happened" not in fix
    empty_database()
    report = import_(tmp_path / "vault")
    assert (report.memories.new, report.edges.new, report.preferences.new) == (4, 2, 2)
    assert happened(ids["problem"]) == HAPPENED
    export(tmp_path / "again")
    assert tree(tmp_path / "again") == files


def test_a_file_from_before_happened_existed_leaves_the_stored_time_alone(
    tmp_path: Path, embedder: object
) -> None:
    """A 1.0 export could not hold when a memory happened: its silence is not "never"."""
    ids = seed()
    export(tmp_path / "snap.jsonl")
    old = tmp_path / "old.jsonl"
    old.write_text(
        (tmp_path / "snap.jsonl")
        .read_text()
        .replace('"schema_version": "1.1"', '"schema_version": "1.0"')
        .replace(f'"happened": "{HAPPENED}", ', "")
    )
    assert "happened" not in old.read_text()
    assert diff(str(old)).identical
    report = import_(old)
    assert report.applied and report.memories.changed == 0 and not report.versions
    assert happened(ids["problem"]) == HAPPENED
    empty_database()  # into an empty database the file gives no time: none is stored
    assert import_(old).memories.new == 4 and happened(ids["problem"]) is None


# Where str.splitlines() breaks a line and a JSON line does not: a value may hold them.
LINE_BREAKS = "\u2028 \u2029 \u0085 \x1c \x1d \x1e \x0b \x0c"


def test_values_holding_unicode_line_breaks_round_trip(tmp_path: Path, embedder: object) -> None:
    """vault/preferences.yaml was read with splitlines(): a preference holding U+2028 was cut
    in two, and the vault memsys had just exported refused to import."""
    seed()
    set_preference("separator", f"a{LINE_BREAKS}b")
    set_preference("nested", {"text": LINE_BREAKS})
    store(f"Line one{LINE_BREAKS}still line one", memory_type="fact")
    export(tmp_path / "vault")
    empty_database()
    report = import_(tmp_path / "vault")
    assert report.applied and report.problem_count == 0, report.problems
    assert (report.memories.new, report.preferences.new) == (5, 4)
    with session_scope() as s:
        values = dict(s.execute(text("SELECT key, value FROM preference")).all())
    assert values["separator"] == f"a{LINE_BREAKS}b" and values["nested"] == {"text": LINE_BREAKS}
    export(tmp_path / "again")
    assert tree(tmp_path / "again") == tree(tmp_path / "vault")


@pytest.mark.parametrize("name", ["snap.jsonl", "vault"])
def test_an_export_is_one_snapshot_of_writes_landing_during_it(
    tmp_path: Path, embedder: object, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    """Memories, edges and preferences were read in separate statements under READ
    COMMITTED: a memory and its edge written by another client while an export was between
    its memories and its edges came out as a dangling edge, a file that refused to import.
    (The snapshot is a transaction of its own: a scoped token's export still reads its own
    namespaces alone: export_to, as the CLI runs it; memory_export, which writes the file on
    the host for a caller, is the admin's.)"""
    from memsys import tenancy
    from memsys.vault import live, service

    old = store("The billing service deploys on Tuesdays", namespace="project:race").id
    store("Not the token's to read", namespace="project:other")
    pages, written = live.edges, []

    def edges_after_a_write(session, namespace=None):  # type: ignore[no-untyped-def]
        if not written:  # another client, its own transaction, committed
            new = store("Written during the export", namespace="project:race").id
            relate = {"source_id": new, "target_id": old, "relation": "relates_to"}
            written.append(runner.execute(edges.relate, MemoryRelateIn, relate))
        yield from pages(session, namespace)

    monkeypatch.setattr(live, "edges", edges_after_a_write)
    race = ("project:race",)
    with (
        tenancy.using(tenancy.Scope(read=race, write=race, token_id="tok_race")),
        session_scope() as session,
    ):
        done = service.export_to(session, tmp_path / name, None, None)
    assert written and (done.memories, done.edges) == (1, 0)  # as before the write
    monkeypatch.setattr(live, "edges", pages)
    empty_database()
    report = import_(tmp_path / name)
    assert report.applied and report.problem_count == 0, report.problems


def test_an_archived_memory_is_exported_with_its_full_text(
    tmp_path: Path, embedder: object
) -> None:
    """Aging replaced an archived memory's text with a summary, which export wrote: a
    restore from the export lost the text for good."""
    from datetime import UTC, datetime, timedelta

    from memsys.services import maintain

    full = " ".join(
        f"Step {n}: the nightly backup copies the base backup to the bucket and checks it."
        for n in range(1, 9)
    )
    memory = store(full, memory_type="procedure").id
    maintain.run(now=datetime.now(UTC) + timedelta(days=31))
    with session_scope() as s:
        stage, stored = s.execute(
            text("SELECT stage, content FROM chunk WHERE id = :id"), {"id": memory}
        ).one()
    assert stage == "archived" and stored != full
    for name in ("a.jsonl", "vault"):
        export(tmp_path / name)
    assert full in (tmp_path / "a.jsonl").read_text()
    assert '"stage": "archived"' in (tmp_path / "a.jsonl").read_text()
    again = import_(tmp_path / "a.jsonl")  # into the same database: nothing to change
    assert again.memories.changed == 0 and again.memories.unchanged == 1
    empty_database()
    import_(tmp_path / "vault")
    export(tmp_path / "b.jsonl")
    assert (tmp_path / "b.jsonl").read_bytes() == (tmp_path / "a.jsonl").read_bytes()
    from memsys.schemas.lifecycle import MemoryGetIn
    from memsys.services import memory_get

    got = runner.execute(memory_get.get, MemoryGetIn, {"memory_id": memory})
    assert got.content == full
    # an edit imported into an archived memory is its text from then on (the history's
    # older text won: every import made another version, and export wrote the old text)
    maintain.run(now=datetime.now(UTC) + timedelta(days=62))
    edited = (tmp_path / "b.jsonl").read_text().replace("Step 8:", "Step eight:")
    (tmp_path / "c.jsonl").write_text(edited)
    assert import_(tmp_path / "c.jsonl").memories.changed == 1
    assert import_(tmp_path / "c.jsonl").memories.changed == 0
    export(tmp_path / "d.jsonl")
    assert "Step eight:" in (tmp_path / "d.jsonl").read_text()
    # and a read that rekindles it restores that text, not the one archived before it
    got = runner.execute(memory_get.get, MemoryGetIn, {"memory_id": memory})
    assert "Step eight:" in got.content and got.stage == "active"


def test_import_twice_changes_nothing(tmp_path: Path, embedder: object) -> None:
    seed()
    export(tmp_path / "snap.jsonl")
    before = table_counts()
    report = import_(tmp_path / "snap.jsonl")
    assert report.memories.unchanged == 4 and report.memories.new == 0
    assert report.edges.unchanged == 2 and report.preferences.unchanged == 2
    after = table_counts()
    assert {k: v for k, v in after.items() if k != "event"} == {
        k: v for k, v in before.items() if k != "event"
    }


def test_hand_edit_becomes_a_new_version(tmp_path: Path, embedder: object) -> None:
    ids = seed()
    export(tmp_path / "vault")
    path = next((tmp_path / "vault" / "graph" / "fixes").glob("*.md"))
    edited = path.read_text().replace(
        "socket_keepalive=True", "socket_keepalive=True and socket_timeout=300"
    )
    path.write_text(edited.replace("importance: 0.8", "importance: 0.9"))
    report = import_(tmp_path / "vault")
    assert report.memories.changed == 1 and report.memories.unchanged == 3
    (version,) = report.versions
    assert version.id == ids["fix"]
    live = "SELECT count(*) FROM chunk WHERE id = :id AND valid_to IS NULL AND content LIKE :c"
    assert live_count(live, id=ids["fix"], c="%socket_timeout=300%") == 1
    old = "SELECT count(*) FROM chunk WHERE id = :id AND valid_to IS NOT NULL AND importance = 0.8"
    assert live_count(old, id=version.previous) == 1  # the old text is kept, closed
    edge = (
        "SELECT count(*) FROM edge WHERE source_id = :a AND target_id = :b "
        "AND relation = 'supersedes' AND valid_to IS NULL"
    )
    assert live_count(edge, a=ids["fix"], b=version.previous) == 1
    assert import_(tmp_path / "vault").memories.changed == 0  # applied once, not again


def test_frontmatter_fast_path_reads_what_yaml_reads(tmp_path: Path, embedder: object) -> None:
    from memsys.vault import files, markdown, records

    seed()
    export(tmp_path / "vault")
    for path in (tmp_path / "vault").rglob("*.md"):
        if path.name in files.DERIVED:  # CORE.md, REFLECTION.md: briefs, no frontmatter
            continue
        lines = path.read_text().split("\n")
        end = lines.index("---", 1)
        fast = markdown._fast(lines[1:end])
        assert fast is not None, path  # memsys's own files never need the YAML parser
        slow = yaml.load("\n".join(lines[1:end]), Loader=markdown._Loader)
        for key in ("happened", "created", "updated"):
            if key in slow:
                slow[key] = records.timestamp(slow[key])
        assert fast == slow, path
    hand_written = ["id: mem_1", "tags: [redis, timeout]", "created: 2025-12-06"]
    assert markdown._fast(hand_written) is None  # S003's unquoted lists go through YAML


def test_export_again_removes_files_of_forgotten_memories_only(
    tmp_path: Path, embedder: object
) -> None:
    ids = seed()
    export(tmp_path / "vault")
    mine = tmp_path / "vault" / "graph" / "general" / "written-by-hand-abcdef.md"
    mine.parent.mkdir(parents=True, exist_ok=True)
    mine.write_text("---\nid: mem_00000000000000aa\n---\nnot imported yet\n")
    runner.execute(memories.forget, MemoryForgetIn, {"memory_id": ids["problem"]})
    again = export(tmp_path / "vault")
    assert again.memories == 3 and again.edges == 1
    names = list(tree(tmp_path / "vault"))
    assert not any(p.startswith("graph/problems/") for p in names)
    assert not any("--RELATES_TO--" in p for p in names)
    assert mine.exists()  # never written by an export: left alone
    with pytest.raises(InvalidInput, match="holds an export of every namespace"):
        export(tmp_path / "vault", namespace="project:game")


def test_an_index_naming_other_files_deletes_none_of_them(tmp_path: Path, embedder: object) -> None:
    """_index.json (derived, gitignored) is read back by export: one naming the user's own
    files (.git's, a note in a folder of their own) had them deleted as stale exports, and
    one whose `paths` was no list of names crashed the export (TypeError)."""
    seed()
    export(tmp_path / "v")
    theirs = {".git/config": "[core]\n", "notes/keep.md": "mine\n", "README.md": "hi\n"}
    # Files of the user's in the folders export writes memories to (an image pasted beside
    # a note, Obsidian's attachments): export writes only markdown there.
    theirs |= {"graph/diagram.png": "png\n", "vault/attachments/scan.pdf": "pdf\n"}
    for relative, body in theirs.items():
        (tmp_path / "v" / relative).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "v" / relative).write_text(body)
    index = tmp_path / "v" / "_index.json"
    listing = json.loads(index.read_text())
    for paths in ([*listing["paths"], *theirs], [[1]], 5):
        index.write_text(json.dumps({**listing, "paths": paths}))
        export(tmp_path / "v")
        assert all((tmp_path / "v" / r).read_text() == t for r, t in theirs.items())


@pytest.mark.parametrize("name", ["snap.jsonl", "vault"])
def test_ids_and_keys_a_database_holds_from_before_their_rules_round_trip(
    tmp_path: Path, embedder: object, name: str
) -> None:
    """A memory imported as "count" (before import refused ids a REST route shadows) and a
    preference key "notes/history" (set before keys ending in '/history' were refused) are
    in the database: its own export must import again, into it and into an empty one."""
    ids = seed()
    with session_scope() as s:
        s.execute(text("UPDATE chunk SET id = 'count' WHERE id = :id"), {"id": ids["decision"]})
        s.execute(text("UPDATE preference SET key = 'notes/history' WHERE key = 'editor'"))
        # stored before a lone combining mark counted as no visible character
        s.execute(text("UPDATE chunk SET content = U&'\\0301' WHERE id = :id"), {"id": ids["fix"]})
        s.execute(text("UPDATE preference SET key = U&'\\0301' WHERE key = 'theme'"))
    export(tmp_path / name)
    again = import_(tmp_path / name)
    assert again.applied and again.problem_count == 0, again.problems
    assert again.memories.unchanged == 4 and again.preferences.unchanged == 2
    empty_database()
    report = import_(tmp_path / name)
    assert report.applied and report.problem_count == 0, report.problems
    assert (report.memories.new, report.preferences.new) == (4, 2)
    with session_scope() as s:
        assert s.execute(text("SELECT count(*) FROM chunk WHERE id = 'count'")).scalar_one() == 1
        keys = set(s.execute(text("SELECT key FROM preference")).scalars())
    assert {"notes/history", "\u0301"} <= keys
