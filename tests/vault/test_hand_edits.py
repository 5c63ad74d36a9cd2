"""A vault edited by hand (Obsidian, an editor, a script): what a person writes into it is
read, refused by name, or reported with its file and line — never silently dropped, and
never a traceback."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from sqlalchemy import text

from memsys import runner
from memsys.db import session_scope
from memsys.errors import InvalidInput
from tests.cli.helpers import fails, run, run_json
from tests.conftest import table_counts
from tests.factories import store
from tests.vault.helpers import (
    HAPPENED,
    diff,
    empty_database,
    export,
    happened,
    import_,
    seed,
    tree,
)


def one(root: Path, folder: str) -> Path:
    return next((root / folder).glob("*.md"))


def exported(tmp_path: Path, folder: str) -> Path:
    """The seeded store exported as a vault at tmp_path/v; a file of `folder` in it."""
    seed()
    export(tmp_path / "v")
    return one(tmp_path / "v", folder)


def edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert re.search(old, text, flags=re.M), (old, text)
    path.write_text(re.sub(old, new, text, count=1, flags=re.M))


def strength_edited(root: Path) -> Path:
    """A memory note whose first relation's strength is edited to 0.25 by hand."""
    noted = next(
        p
        for p in (root / "graph").rglob("*.md")
        if "edges" not in p.parts and "strength:" in p.read_text()
    )
    edit(noted, r"^(\s+)strength: .*$", r"\1strength: 0.25")
    return noted


def preference_added(root: Path) -> Path:
    """vault/preferences.yaml with a preference `by_hand` added by hand (a copy of the first)."""
    prefs = root / "vault" / "preferences.yaml"
    line = next(x for x in prefs.read_text().splitlines() if x.startswith("- "))
    prefs.write_text(prefs.read_text() + re.sub(r'"key": "[^"]*"', '"key": "by_hand"', line) + "\n")
    return prefs


def problems(root: Path) -> str:
    """Every problem import reports, as `file:line message` lines; nothing was imported."""
    before = table_counts()
    report = import_(root)
    assert not report.applied and report.problems
    assert table_counts() == before
    return "\n".join(f"{p.source}:{p.line} {p.message}" for p in report.problems)


def test_a_field_memsys_does_not_read_is_refused_by_name(tmp_path: Path, embedder: object) -> None:
    """`tag:` for `tags:` made a new version without tags, lint and import both clean: the
    tags were gone from the database and, on the next export, from the file."""
    fix = exported(tmp_path, "graph/fixes")
    edit(fix, r"^tags:", "tag:")
    found = problems(tmp_path / "v")
    assert f"{fix.relative_to(tmp_path / 'v')}:6" in found and "tag: unknown field" in found
    assert "under metadata" in found
    linted = run("lint", str(tmp_path / "v"), "--json")
    assert linted.exit_code == 1 and "tag: unknown field" in linted.stdout
    # the same in a relation (a weight memsys calls strength) and in an edge file
    edit(fix, r"^tag:", "tags:")
    edit(fix, r"^  strength:", "  weight:")
    edge = one(tmp_path / "v", "graph/edges")
    edit(edge, r"^strength:", "weight: 0.2\nstrength:")
    found = problems(tmp_path / "v")
    assert found.count("weight: unknown field of a edge record") == 2, found
    # a field named like one the file holds elsewhere is refused, never taken for it
    edit(fix, r"^  weight:", "  strength:")
    edit(edge, r"^weight: 0.2\n", "")
    edit(fix, r"^tags:", "content: not the body\nkind: edge\ntags:")
    found = problems(tmp_path / "v")
    assert "content (in the frontmatter): unknown field of a memory record" in found, found
    assert "kind (in the frontmatter): unknown field" in found, found


def test_a_problem_in_a_relation_is_at_its_own_line(tmp_path: Path, embedder: object) -> None:
    """A relation spans several lines, and its problems were put at `relations:` + 1 + its
    index: the second relation's bad type was said to be on line 8, the first relation's
    type, and the third one's misspelt weight on line 9."""
    head = "---\nid: mem_00000000000000{}\ntype: fact\nimportance: 0.5\n"
    head += "created: 2025-12-06T16:25:58+00:00\n"
    folder = tmp_path / "v" / "graph" / "facts"
    folder.mkdir(parents=True)
    (folder / "b2.md").write_text(head.format("b2") + "---\nThe other end\n")
    relation = "- target: mem_00000000000000b2\n  type: {}\n  direction: outgoing\n  {}: 0.5\n"
    (folder / "a1.md").write_text(
        head.format("a1")
        + "relations:\n"
        + relation.format("RELATES_TO", "strength")  # lines 7-10
        + relation.format("NOT_A_RELATION", "strength")  # lines 11-14
        + relation.format("SOLVES", "weight")  # lines 15-18
        + "---\nOne end\n"
    )
    found = problems(tmp_path / "v")
    assert "graph/facts/a1.md:12 type: 'NOT_A_RELATION' is not a relation" in found, found
    assert "graph/facts/a1.md:18 weight: unknown field of a edge record" in found, found
    linted = run("lint", str(tmp_path / "v"), "--json")
    assert linted.exit_code == 1, linted.output
    findings = json.loads(linted.stdout)["findings"]
    assert {(f["line"], f["message"].split(":")[0]) for f in findings} >= {
        (12, "type"),
        (18, "weight"),
    }, findings


def test_a_relation_edited_in_a_note_but_not_in_its_edge_file_is_a_problem(
    tmp_path: Path, embedder: object
) -> None:
    """The edge file won silently: a strength edited under a note's `relations:` imported as
    "unchanged" and the next export put the old value back."""
    seed()
    root = tmp_path / "v"
    export(root)
    noted = strength_edited(root)
    line = (
        noted.read_text()
        .splitlines()
        .index(next(x for x in noted.read_text().splitlines() if "strength: 0.25" in x))
    )
    found = problems(root)
    where = f"{noted.relative_to(root).as_posix()}:{line + 1} edge edge_"
    assert where in found and "strength 0.25 here" in found, found
    # lint and diff say so too (diff let the edge file win and said "identical")
    assert run("lint", str(root)).exit_code == 1
    with pytest.raises(InvalidInput, match=r"strength 0\.25 here"):
        diff(str(root))


def test_an_edge_file_with_a_blank_or_numeric_namespace_is_a_problem_not_a_crash(
    tmp_path: Path, embedder: object
) -> None:
    edge = exported(tmp_path, "graph/edges")
    edit(edge, r"^namespace: .*$", "namespace:")
    assert "namespace: missing or empty" in problems(tmp_path / "v")
    edit(edge, r"^namespace:$", "namespace: 42")
    assert "namespace: 42 is not text (quote it)" in problems(tmp_path / "v")
    linted = run("lint", str(tmp_path / "v"))
    assert linted.exit_code == 1 and "Traceback" not in linted.output
    assert run("diff", str(tmp_path / "v")).exit_code == 2


def test_an_incoming_relation_written_by_hand_is_the_edge_it_names(
    tmp_path: Path, embedder: object
) -> None:
    """A relation marked incoming was skipped (the other file was trusted to carry it): one
    written by hand into one file only was lost."""
    ids = seed()
    export(tmp_path / "v")
    problem = one(tmp_path / "v", "graph/problems")
    rule = ids["rule"]
    edit(
        problem,
        r"^relations:$",
        f"relations:\n- target: {rule}\n  type: DEPENDS_ON\n  direction: incoming",
    )
    report = import_(tmp_path / "v")
    assert report.edges.new == 1, report
    assert diff(str(tmp_path / "v")).changed == []
    found = run("inspect", rule, "--json")
    assert found.exit_code == 0 and ids["problem"] in found.stdout
    # the same edge named in both memories' files (as export writes it) is one edge
    export(tmp_path / "again")
    assert import_(tmp_path / "again").edges.new == 0


def test_hand_written_files_get_the_lifecycle_memory_store_gives_their_type(
    tmp_path: Path, embedder: object
) -> None:
    (tmp_path / "v" / "graph" / "sessions").mkdir(parents=True)
    for name, kind in (("s", "session"), ("p", "preference"), ("f", "fact")):
        (tmp_path / "v" / "graph" / "sessions" / f"{name}.md").write_text(
            f"---\nid: mem_hand_{name}\ntype: {kind}\nimportance: 0.5\n"
            f"created: 2026-11-20T10:00:00+00:00\n---\nWritten by hand: {kind}\n"
        )
    linted = run("lint", str(tmp_path / "v"))
    assert linted.exit_code == 0, linted.stdout  # what import fills in is not missing
    import_(tmp_path / "v")
    lines = run("export", "--format", "jsonl").stdout.splitlines()[1:]
    lifecycles = {r["id"][-1]: r["lifecycle"] for r in map(json.loads, lines)}
    assert lifecycles == {"s": "session", "p": "personal", "f": "project"}


def test_lint_fix_writes_an_obsidian_date_as_text(tmp_path: Path) -> None:
    """`created: 2026-11-20 10:00:00` (YAML reads a datetime) and no `updated`: lint --fix
    crashed writing the datetime as JSON."""
    folder = tmp_path / "v" / "graph" / "facts"
    folder.mkdir(parents=True)
    (folder / "f.md").write_text(
        "---\nid: f1\ntype: fact\nnamespace: global\ncreated: 2026-11-20 10:00:00\n---\nDated\n"
    )
    fixed = run("lint", str(tmp_path / "v"), "--fix")
    assert fixed.exit_code == 0 and "Traceback" not in fixed.output, fixed.output
    assert "importance: 0.5" in (folder / "f.md").read_text()
    assert run("lint", str(tmp_path / "v")).exit_code == 0


def test_lint_fix_changes_the_fixed_field_and_keeps_an_unknown_one(tmp_path: Path) -> None:
    """lint --fix rewrote a JSON line with the known fields only: a misspelt field, which
    lint reports so that its value can be moved, was deleted with its value."""
    from tests.vault.test_import_problems import memory_line

    header = '{"kind": "header", "format": "memsys-export", "schema_version": "1.0"}'
    full = {"namespace": "global", "lifecycle": "project", "stage": "active"}
    line = memory_line(1, **full, updated="2026-01-01T00:00:00+00:00", importance=1.7, tag=["x"])
    path = tmp_path / "snap.jsonl"
    path.write_text(f"{header}\n{line}\n")
    fixed = run("lint", str(path), "--fix", "--json")
    assert fixed.exit_code == 1, fixed.output  # the unknown field is still an error
    record = json.loads(path.read_text().splitlines()[1])
    assert record == {**json.loads(line), "importance": 1.0}
    (error,) = [f for f in json.loads(fixed.stdout)["findings"] if f["severity"] == "error"]
    assert error["message"].startswith("tag: unknown field"), error


def test_lint_fix_keeps_a_windows_files_line_breaks_and_bom(tmp_path: Path) -> None:
    """lint --fix read a file with universal newlines and wrote it back with \n and no BOM:
    every line of a note saved on Windows changed (a whole-file diff in git), where the fix
    is one line."""
    folder = tmp_path / "v" / "graph" / "facts"
    folder.mkdir(parents=True)
    note = "---\nid: f1\ntype: fact\nnamespace: global\ncreated: 2026-11-20T10:00:00Z\n"
    (folder / "f.md").write_bytes(
        b"\xef\xbb\xbf" + (note + "---\nDated\n").replace("\n", "\r\n").encode()
    )
    (folder / "g.md").write_bytes(
        (note.replace("f1", "f2") + "importance: 7\n---\nx\n").replace("\n", "\r\n").encode()
    )
    assert run("lint", str(tmp_path / "v"), "--fix").exit_code == 0
    fixed = (folder / "f.md").read_bytes()
    assert fixed.startswith(b"\xef\xbb\xbf---\r\n") and b"\r\nimportance: 0.5\r\n---\r\n" in fixed
    assert fixed.count(b"\n") == fixed.count(b"\r\n") == 8
    assert b"\r\nimportance: 1.0\r\n" in (folder / "g.md").read_bytes()


def test_windows_line_breaks_are_stored_as_the_file_reads_them(
    tmp_path: Path, embedder: object
) -> None:
    """Text with \\r\\n was stored as given; read back from its file it came as \\n: every
    re-import of an unchanged export made a new version."""
    first = store("pasted line one\r\nline two\rline three")
    assert store("pasted line one\nline two\nline three").id == first.id  # one memory
    export(tmp_path / "v")
    report = import_(tmp_path / "v")
    assert report.memories.changed == 0 and report.memories.unchanged == 1
    lines = run("export", "--format", "jsonl").stdout.splitlines()
    assert json.loads(lines[1])["content"] == "pasted line one\nline two\nline three"


def test_an_edge_context_with_windows_line_breaks_round_trips(
    tmp_path: Path, embedder: object
) -> None:
    """An edge's context kept its \r\n; its edge file read back as \n: every import of the
    unchanged vault replaced the edge, and its round trip did not give the same bytes."""
    first, second = store("Deploys freeze on Fridays").id, store("Rollbacks need a ticket").id
    reason = "pasted line one\r\nline two\rline three"
    run_json("relate", first, second, "relates_to", "--context", reason)
    export(tmp_path / "v")
    report = import_(tmp_path / "v")
    assert (report.edges.changed, report.edges.unchanged) == (0, 1), report
    empty_database()
    assert import_(tmp_path / "v").edges.new == 1
    export(tmp_path / "again")
    assert tree(tmp_path / "again") == tree(tmp_path / "v")
    lines = run("export", "--format", "jsonl").stdout.splitlines()
    assert json.loads(lines[3])["context"] == "pasted line one\nline two\nline three"


def test_a_next_line_character_survives_a_frontmatter_read_as_yaml(
    tmp_path: Path, embedder: object
) -> None:
    """NEL (U+0085) was written raw in a quoted value; a frontmatter the fast reader leaves
    to YAML (a comment added, tags as a block list) read it as a line break folded into a
    space: the metadata imported changed and the relation disagreed with its edge file."""
    first = store("Deploys freeze on Fridays", metadata={"note": "p\x85q"}).id
    second = store("Rollbacks need a ticket").id
    run_json("relate", first, second, "relates_to", "--context", "before \x85 after")
    export(tmp_path / "v")
    noted = next(p for p in (tmp_path / "v/graph").rglob("deploys-*.md") if "edges" not in p.parts)
    edit(noted, r"^pinned: false$", "pinned: false\n# read by YAML now")
    report = import_(tmp_path / "v", dry_run=True)
    assert report.problems == [] and report.memories.changed == 0, report


def test_json_values_compare_as_stored_not_as_python_compares_them(
    tmp_path: Path, embedder: object
) -> None:
    """A value edited from 1 to true imported as "unchanged" (and diff saw nothing, and an
    export wrote over the edit), while a file's 1e300, which jsonb keeps as 10^300, made a
    new version on every import of the unchanged file."""
    from tests.vault.test_import_problems import memory_line

    header = '{"kind": "header", "format": "memsys-export", "schema_version": "1.0"}'
    pref = '{"kind": "preference", "namespace": "global", "key": "k", "value": %s}'
    path = tmp_path / "snap.jsonl"

    def imported(value: str, meta: object) -> tuple[int, int]:
        path.write_text(f"{header}\n{memory_line(1, metadata={'m': meta})}\n{pref % value}\n")
        report = import_(path)
        drift = [set(c.fields) for c in diff(str(path)).changed]
        assert report.problems == [] and drift in ([], [{"updated"}]), (report, drift)
        return report.memories.changed, report.preferences.changed

    imported("1", 1)
    assert imported("true", True) == (1, 1)
    assert imported("1e300", 1e300) == (1, 1)
    assert imported("1e300", 1e300) == (0, 0)


def test_a_falsy_value_for_tags_or_metadata_is_a_problem_not_an_empty_one(
    tmp_path: Path, embedder: object
) -> None:
    """`tags: no` (YAML's false), `tags: ''`, `metadata: []` were read as no tags and no
    metadata without a word (lint called them errors; import took them)."""
    folder = tmp_path / "v" / "graph" / "facts"
    folder.mkdir(parents=True)
    head = "---\nid: f{n}\ntype: fact\nimportance: 0.5\ncreated: 2026-11-20T10:00:00Z\n"
    for n, field in enumerate(("tags: no", "tags: ''", "metadata: []", "metadata: 0")):
        (folder / f"f{n}.md").write_text(head.format(n=n) + field + "\n---\nFact {n}\n")
    found = import_(tmp_path / "v").problems
    assert sorted((p.source, p.line) for p in found) == [
        (f"graph/facts/f{n}.md", 6) for n in range(4)
    ], found


def test_a_field_given_twice_is_a_problem_not_the_last_one_silently(
    tmp_path: Path, embedder: object
) -> None:
    fix = exported(tmp_path, "graph/fixes")
    edit(fix, r"^importance: .*$", "importance: 0.1\nimportance: 0.9")
    found = problems(tmp_path / "v")
    assert "the field 'importance' is given twice" in found and ":8 " in found, found


def test_an_edit_to_a_text_another_memory_holds_is_a_problem_not_a_lost_edit(
    tmp_path: Path, embedder: object
) -> None:
    """The edit was counted as a duplicate, exit 0: its importance change was lost with it
    and the next export wrote the old file back."""
    fix = exported(tmp_path, "graph/fixes")
    edit(fix, r"^importance: .*$", "importance: 0.2")
    edit(fix, r"^Redis connection timeouts.*$", "Redis connections drop under load")
    other = one(tmp_path / "v", "graph/decisions")
    edit(other, r"^importance: .*$", "importance: 0.9")
    found = problems(tmp_path / "v")  # the other file's edit is held back with it
    assert "holds, and one memory holds a text" in found
    assert str(fix.relative_to(tmp_path / "v")) in found
    assert diff(str(tmp_path / "v")).changed  # both edits still wait in the files
    partial = import_(tmp_path / "v", partial=True)
    assert partial.applied and partial.memories.changed == 1 and partial.problems


def test_a_creation_time_edited_by_hand_is_a_problem_not_ignored(
    tmp_path: Path, embedder: object
) -> None:
    """Import said "unchanged" while diff kept showing the edit: nothing told the user that
    a memory's creation time cannot change."""
    fix = exported(tmp_path, "graph/fixes")
    edit(fix, r"^created: .*$", "created: 2026-01-02T03:04:05+00:00")
    found = problems(tmp_path / "v")
    assert "created: 2026-01-02T03:04:05+00:00 is not when" in found and ":12 " in found, found


def test_when_a_memory_happened_edited_by_hand_is_a_new_version(
    tmp_path: Path, embedder: object
) -> None:
    problem = exported(tmp_path, "graph/problems")
    memory_id = problem.read_text().split("id: ", 1)[1].split("\n", 1)[0]
    edit(problem, r"^happened: .*$", "happened: 2026-02-14T08:00:00+01:00")
    report = import_(tmp_path / "v")
    assert report.applied and [v.id for v in report.versions] == [memory_id]
    assert happened(memory_id) == "2026-02-14T07:00:00+00:00"
    # The version before keeps when it said the memory happened.
    with session_scope() as s:
        before = s.execute(
            text("SELECT occurred_at FROM chunk WHERE id = :id"),
            {"id": report.versions[0].previous},
        ).scalar_one()
    assert before.isoformat() == HAPPENED


def test_a_happened_time_that_is_no_time_or_in_the_future_is_a_problem(
    tmp_path: Path, embedder: object
) -> None:
    problem = exported(tmp_path, "graph/problems")
    edit(problem, r"^happened: .*$", "happened: next tuesday")
    found = problems(tmp_path / "v")
    assert "happened: expected an ISO 8601 timestamp" in found, found
    edit(problem, r"^happened: .*$", "happened: 2999-01-01T00:00:00+00:00")
    found = problems(tmp_path / "v")
    assert "happened: 2999-01-01T00:00:00+00:00 is in the future" in found, found


def test_an_untouched_file_does_not_undo_what_the_database_learned_since(
    tmp_path: Path, embedder: object
) -> None:
    """An outcome raised a memory's confidence after the export; importing the vault again,
    that memory's file untouched, set it back (a "new version" nobody wrote)."""
    from memsys.schemas.learning import MemoryOutcomeIn
    from memsys.services import learning

    ids = seed()
    export(tmp_path / "v")
    runner.execute(learning.outcome, MemoryOutcomeIn, {"memory_id": ids["fix"], "success": True})

    def confidence() -> float:
        with session_scope() as s:
            query = "SELECT confidence FROM chunk WHERE id = :id AND valid_to IS NULL"
            return float(s.execute(text(query), {"id": ids["fix"]}).scalar_one())

    learned = confidence()
    assert learned > 0.3
    report = import_(tmp_path / "v")
    assert report.applied and not report.versions and report.memories.unchanged == 4
    assert confidence() == learned
    # An edited file is an edit still: the whole file, as the person left it.
    edit(one(tmp_path / "v", "graph/fixes"), r"^importance: .*$", "importance: 0.9")
    report = import_(tmp_path / "v")
    assert [v.id for v in report.versions] == [ids["fix"]]
    assert import_(tmp_path / "v").memories.unchanged == 4  # imported, it is no edit again


def prefs(namespace: str = "global") -> dict[str, object]:
    found = run_json("pref", "list", "--namespace", namespace)
    return {p["key"]: p["value"] for p in found["preferences"]}


def test_an_untouched_preference_line_does_not_undo_what_the_database_set_since(
    tmp_path: Path, embedder: object
) -> None:
    """One preferences file holds them all: re-importing it set back every preference changed
    after the export, and brought back one deleted since — whether the file was touched or
    only another line of it was edited."""
    seed()
    export(tmp_path / "v")
    assert run("pref", "set", "editor", '"vim"').exit_code == 0
    report = import_(tmp_path / "v")
    assert report.applied and report.preferences.unchanged == 2
    assert prefs()["editor"] == "vim"
    # One line edited by hand: that line applies, the untouched one still does not.
    edit(tmp_path / "v/vault/preferences.yaml", r'"size": 14', '"size": 16')
    assert run("pref", "delete", "editor").exit_code == 0
    report = import_(tmp_path / "v")
    assert (report.preferences.changed, report.preferences.unchanged) == (1, 1)
    assert prefs("project:game")["theme"] == {"dark": True, "size": 16}
    assert "editor" not in prefs()
    assert import_(tmp_path / "v").preferences.unchanged == 2  # imported: no edit again
    # Into an empty database the same vault, index and all, restores every line; into one
    # that set the key to a value of its own, an untouched line is no stale copy: it applies.
    empty_database()
    assert import_(tmp_path / "v").preferences.new == 2
    assert prefs()["editor"] == "helix"
    empty_database()
    assert run("pref", "set", "editor", '"emacs"').exit_code == 0
    report = import_(tmp_path / "v")
    assert (report.preferences.changed, report.preferences.new) == (1, 1)
    assert prefs()["editor"] == "helix"


def test_an_untouched_file_does_not_bring_back_an_edge_or_memory_deleted_since(
    tmp_path: Path, embedder: object
) -> None:
    """An edge deleted after the export came back with the next import of the untouched
    vault, and a memory forgotten since made the whole import fail ("was forgotten in this
    database") although nobody had touched its file."""
    ids = seed()
    export(tmp_path / "v")
    forgot = run("edge-forget", "--source-id", ids["rule"], "--target-id", ids["fix"])
    assert forgot.exit_code == 0, forgot.output
    assert run("forget", ids["problem"]).exit_code == 0
    report = import_(tmp_path / "v")
    assert report.applied and not report.problems, report.problems
    assert report.edges.new == 0 and report.memories.new == 0
    with session_scope() as s:
        live = s.execute(
            text(
                "SELECT source_id, target_id FROM edge"
                " WHERE relation = 'caused_by' AND valid_to IS NULL"
            )
        ).all()
        back = s.execute(
            text("SELECT count(*) FROM chunk WHERE id = :id AND valid_to IS NULL"),
            {"id": ids["problem"]},
        ).scalar_one()
    assert (live, back) == ([], 0)
    # An edge file edited by hand to the forgotten memory is an edit that cannot apply.
    (edge_file,) = [
        p for p in (tmp_path / "v/graph/edges").glob("*.md") if ids["problem"] in p.read_text()
    ]
    edge_file.write_text(edge_file.read_text() + "\n")  # saved again: no longer as written
    found = problems(tmp_path / "v")
    assert f"memory {ids['problem']} was forgotten in this database: an edge" in found, found
    # The forgotten memory's file, edited, is an edit of a forgotten memory: refused by name.
    edit(one(tmp_path / "v", "graph/problems"), r"^importance: .*$", "importance: 0.9")
    found = problems(tmp_path / "v")
    assert f"memory {ids['problem']} was forgotten in this database: import" in found, found


def test_an_untouched_file_still_applies_over_another_text_under_its_id(
    tmp_path: Path, embedder: object
) -> None:
    """The index travels with a synced vault: in a database where the id holds another text,
    an untouched file is no proof that nothing changed, so it is compared as usual."""
    ids = seed()
    export(tmp_path / "v")
    with session_scope() as s:
        s.execute(
            text("UPDATE chunk SET content = 'Another text under the same id' WHERE id = :id"),
            {"id": ids["problem"]},
        )
    report = import_(tmp_path / "v")
    assert [v.id for v in report.versions] == [ids["problem"]]
    assert report.memories.unchanged == 3


def test_a_new_memory_was_updated_when_it_was_created_not_before(embedder: object) -> None:
    """updated_at took the transaction's clock and created_at the statement's: every export
    showed a memory updated a few milliseconds before it was created."""
    store("The deploy runs from the release branch", memory_type="fact")
    lines = run("export", "--format", "jsonl").stdout.splitlines()[1:]
    (record,) = map(json.loads, lines)
    assert record["updated"] == record["created"]


def test_an_export_writes_a_renamed_or_moved_file_where_the_user_put_it(
    tmp_path: Path, embedder: object
) -> None:
    """Export wrote the standard file again beside the user's renamed one: the next import
    refused the whole vault (a duplicate id for each)."""
    fix = exported(tmp_path, "graph/fixes")
    root = tmp_path / "v"
    renamed = fix.with_name("Redis keepalive.md")
    fix.rename(renamed)
    edge = one(root, "graph/edges")
    moved = root / "graph" / "edges" / "mine" / "link.md"
    moved.parent.mkdir()
    edge.rename(moved)
    edit(renamed, r"^importance: .*$", "importance: 0.3")
    assert import_(root).memories.changed == 1
    for _ in range(2):  # and again on the next export (the first kept it only once)
        export(root)
        assert renamed.exists() and moved.exists() and not fix.exists() and not edge.exists()
        again = import_(root, dry_run=True)
        assert not again.problems and again.memories.changed == 0, again.problems
    # a renamed file holding an edit not imported yet is never written over
    edit(renamed, r"^Redis connection timeouts.*$", "Keepalive fixed the Redis timeouts")
    later = renamed.with_name("Later name.md")
    renamed.rename(later)
    export(root)
    assert "Keepalive fixed the Redis timeouts" in later.read_text()
    assert fix.exists()  # the database's version, beside it: import names both
    assert "duplicate id" in problems(root)
    fix.unlink()
    assert import_(root).memories.changed == 1
    export(root)
    assert later.exists() and not fix.exists()
    renamed = later
    # a copy beside the file export wrote is a copy: export keeps writing its own file
    copy = root / "graph" / "fixes" / "copy of it.md"
    copy.write_text(renamed.read_text())
    export(root)
    assert renamed.exists() and copy.exists()
    assert "duplicate id" in problems(root)


def test_an_export_never_writes_over_an_edit_not_imported_yet(
    tmp_path: Path, embedder: object
) -> None:
    """A note edited in place (Obsidian) and exported again before an import kept nothing of
    the edit: export wrote the database's version over it."""
    fix = exported(tmp_path, "graph/fixes")
    root = tmp_path / "v"
    edit(fix, r"^Redis connection timeouts.*$", "Keepalive fixed the Redis timeouts")
    for _ in range(2):  # and again on the next export
        export(root)
        assert "Keepalive fixed the Redis timeouts" in fix.read_text()
        beside = [p for p in fix.parent.glob("*.md") if p != fix]
        assert len(beside) == 1  # the database's version, beside it: import names both
        assert "duplicate id" in problems(root)
    beside[0].unlink()
    assert import_(root).memories.changed == 1  # the edit, a new version
    export(root)
    assert [p.name for p in fix.parent.glob("*.md")] == [fix.name]
    assert "Keepalive fixed the Redis timeouts" in fix.read_text()
    # an edited file of a memory forgotten since is left too (its edit is not imported)
    edit(fix, r"^Keepalive fixed the Redis timeouts.*$", "Keepalive, and a shorter timeout")
    memory_id = re.search(r"^id: (\S+)$", fix.read_text(), flags=re.M)
    assert memory_id is not None
    run("forget", memory_id.group(1).strip('"'))
    export(root)
    assert "a shorter timeout" in fix.read_text()


def test_an_export_keeps_a_relation_or_a_preference_edited_and_not_imported(
    tmp_path: Path, embedder: object
) -> None:
    """A relation edited under a note's `relations:` and a preference added by hand were
    written over: the note's memory fields were unchanged, and the preferences file was
    written whatever it held."""
    seed()
    root = tmp_path / "v"
    export(root)
    noted = strength_edited(root)
    export(root)
    assert "strength: 0.25" in noted.read_text()
    preference_added(root)
    held = tree(root)
    with pytest.raises(InvalidInput, match="edited since the last export"):
        export(root)
    assert tree(root) == held  # nothing written


def test_an_imported_edit_is_no_edit_for_the_next_export(tmp_path: Path, embedder: object) -> None:
    """Once imported, an edited note or preferences file is the database's: an export after
    the database changed again (a relation added, a preference set) writes over it. It kept
    the note with a copy beside it (a duplicate id for the next import) and refused for the
    preferences, for good."""
    from memsys.schemas.edges import MemoryRelateIn
    from memsys.services import edges
    from tests.factories import set_preference

    fix = exported(tmp_path, "graph/fixes")
    root = tmp_path / "v"
    edit(fix, r"^Redis connection timeouts.*$", "Keepalive fixed the Redis timeouts")
    prefs = preference_added(root)
    report = import_(root)
    assert report.applied and report.memories.changed == 1 and report.preferences.new == 1
    memory_id = re.search(r"^id: (\S+)$", fix.read_text(), flags=re.M)
    other = store("The Redis client library is redis-py 5").id
    assert memory_id is not None
    relate = {
        "source_id": memory_id.group(1).strip('"'),
        "target_id": other,
        "relation": "RELATES_TO",
    }
    runner.execute(edges.relate, MemoryRelateIn, relate)
    set_preference("font", "mono")
    export(root)
    assert [p.name for p in fix.parent.glob("*.md")] == [fix.name]
    assert "Keepalive fixed the Redis timeouts" in fix.read_text()
    assert '"by_hand"' in prefs.read_text() and '"font"' in prefs.read_text()
    assert not import_(root, dry_run=True).problems


def test_an_edge_known_only_from_a_relation_is_no_change_in_a_diff(
    tmp_path: Path, embedder: object
) -> None:
    """With its edge file gone, the edge read from a memory's relations took the memory's
    time: `memsys diff vault/ live` (the shipped CI step) failed on a change nobody made."""
    exported(tmp_path, "graph/edges").unlink()
    assert diff(str(tmp_path / "v")).changed == []
    assert import_(tmp_path / "v", dry_run=True).edges.unchanged == 2


def test_a_number_for_an_id_is_refused_not_rewritten(tmp_path: Path, embedder: object) -> None:
    """`id: 007` was imported as the id "7" (YAML reads a number), and a BOM made a file
    "no YAML frontmatter"."""
    folder = tmp_path / "v" / "graph" / "facts"
    folder.mkdir(parents=True)
    body = "type: fact\nimportance: 0.5\ncreated: 2026-11-20T10:00:00+00:00\n---\nA fact\n"
    (folder / "a.md").write_text(f"---\nid: 007\n{body}")
    assert "a.md:2 id: 7 is not text (quote it)" in problems(tmp_path / "v")
    (folder / "a.md").write_text(f"\ufeff---\nid: '007'\n{body}")  # with a BOM
    assert import_(tmp_path / "v").memories.new == 1
    assert run("get", "007").exit_code == 0


def test_lint_refuses_an_edge_given_twice_in_json_lines(tmp_path: Path, embedder: object) -> None:
    seed()
    lines = run("export", "--format", "jsonl").stdout.splitlines()
    edge = next(line for line in lines if '"kind": "edge"' in line)
    (tmp_path / "snap.jsonl").write_text("\n".join([*lines, edge]) + "\n")
    linted = run("lint", str(tmp_path / "snap.jsonl"))
    assert linted.exit_code == 1 and "duplicate edge" in linted.stdout, linted.stdout
    assert "duplicate edge" in problems(tmp_path / "snap.jsonl")


def test_yaml_merge_keys_are_read_as_yaml_reads_them(tmp_path: Path, embedder: object) -> None:
    """Refusing a field given twice must not refuse `<<: *base`, where a field may repeat."""
    folder = tmp_path / "v" / "graph" / "facts"
    folder.mkdir(parents=True)
    (folder / "m.md").write_text(
        "---\nid: mem_merge\ntype: fact\nimportance: 0.5\ncreated: 2026-11-20T10:00:00+00:00\n"
        "metadata: {<<: {team: core, tier: 1}, tier: 2}\n---\nMerged metadata\n"
    )
    assert import_(tmp_path / "v").memories.new == 1
    lines = run("export", "--format", "jsonl").stdout.splitlines()[1:]
    assert json.loads(lines[0])["metadata"] == {"team": "core", "tier": 2}


def test_lint_warns_of_a_note_import_never_reads(tmp_path: Path, embedder: object) -> None:
    """Obsidian creates a new note at the vault's root, where import reads nothing: it was
    skipped without a word."""
    exported(tmp_path, "graph/fixes")
    (tmp_path / "v" / "Untitled.md").write_text("A note written in Obsidian\n")
    (tmp_path / "v" / ".obsidian").mkdir()
    (tmp_path / "v" / ".obsidian" / "workspace.md").write_text("editor state\n")
    (tmp_path / "v" / "README.md").write_text("# Our team's memory vault\n")  # the repo's
    linted = run("lint", str(tmp_path / "v"), "--json")
    assert linted.exit_code == 0, linted.stdout  # a warning; --strict fails on it
    findings = json.loads(linted.stdout)["findings"]
    assert [(f["source"], f["severity"]) for f in findings] == [("Untitled.md", "warning")]
    assert run("lint", str(tmp_path / "v"), "--strict").exit_code == 1


def test_a_diff_of_a_namespace_nothing_holds_is_refused(tmp_path: Path, embedder: object) -> None:
    """A typo in `--namespace` compared nothing with nothing: "identical", and a CI job read
    it as no drift."""
    seed()
    export(tmp_path / "v")
    lines = run("export", "--format", "jsonl").stdout
    (tmp_path / "a.jsonl").write_text(lines)
    assert "Namespace not found" in fails("diff", str(tmp_path / "v"), "-n", "project:gmae")
    # a namespace the snapshot holds and the database does not is drift, not a typo
    (tmp_path / "b.jsonl").write_text(lines.replace('"project:game"', '"project:restored"'))
    drift = run("diff", str(tmp_path / "b.jsonl"), "live", "-n", "project:restored")
    assert drift.exit_code == 1 and "2 removed" in drift.stdout, drift.output
    said = fails("diff", str(tmp_path / "a.jsonl"), str(tmp_path / "a.jsonl"), "-n", "nope")
    assert "Neither snapshot holds namespace nope" in said
    same = run("diff", str(tmp_path / "v"), "-n", "project:game")
    assert same.exit_code == 0 and "0 changed" in same.stdout


def test_the_previous_version_an_import_names_can_be_read(tmp_path: Path, embedder: object) -> None:
    """Import answered "previous fields kept as mem_…", and `get` of that id said "Memory
    not found": the history it promised could not be read."""
    fix = exported(tmp_path, "graph/fixes")
    before = fix.read_text()
    edit(fix, r"^Redis connection timeouts.*$", "Keepalive settings fixed the Redis timeouts")
    report = import_(tmp_path / "v")
    (version,) = report.versions
    earlier = run_json("get", version.previous)
    assert earlier["superseded_by"] == version.id and earlier["valid_to"] is not None
    assert earlier["content"] in before and "Keepalive settings" not in earlier["content"]
    assert run_json("get", version.id)["superseded_by"] is None  # the live memory
    shown = run("get", version.previous)
    assert f"an earlier version: {version.id} holds its fields" in shown.stdout
    # a forgotten memory is gone, not a version
    run("forget", "--id", version.id)
    assert "Memory not found" in fails("get", version.id)


def test_an_edited_text_names_what_it_says_now_not_what_it_said(
    tmp_path: Path, embedder: object
) -> None:
    """After an edit the live memory kept the names of its old text, so a query naming
    only the old text's names pulled it in through the graph; those names go with the
    closed copy, which said them."""
    from sqlalchemy import select

    from memsys.db import session_scope
    from memsys.models import Edge, Entity

    store("Kafka consumers lag behind during the Black Friday peak")
    export(tmp_path / "v")
    path = next(p for p in (tmp_path / "v" / "graph").rglob("*.md") if "Kafka" in p.read_text())
    edit(path, r"^Kafka consumers lag.*$", "RabbitMQ queues grow during the Cyber Monday rush")
    (version,) = import_(tmp_path / "v").versions

    def named(chunk_id: str) -> set[str]:
        with session_scope() as s:
            targets = select(Edge.target_id).where(
                Edge.source_id == chunk_id, Edge.relation == "mentions"
            )
            return set(s.scalars(select(Entity.name).where(Entity.id.in_(targets))))

    assert "Kafka" not in named(version.id) and "RabbitMQ" in named(version.id)
    assert "Kafka" in named(version.previous)


def test_an_edit_saved_while_an_import_runs_is_no_file_the_database_holds(
    tmp_path: Path, embedder: object
) -> None:
    """After an import commits, the index takes each file for the database's: it took the
    bytes the file held then, not the ones the import read, so an edit saved meanwhile (in
    Obsidian, during a long import) was skipped by the next import as unedited and written
    over by the next export."""
    from memsys.vault import service

    ids = seed()
    export(tmp_path / "v")
    fix = one(tmp_path / "v", "graph/fixes")
    with session_scope() as s:
        report = service.import_from(s, tmp_path / "v", dry_run=False, partial=False)
        assert report.applied and report.memories.unchanged == 4
        edit(fix, r"^importance: .*$", "importance: 0.9")  # saved before the commit
    report = import_(tmp_path / "v")
    assert [v.id for v in report.versions] == [ids["fix"]]


BILLION_LAUGHS = "".join(
    f"  {name}: &{name} [{', '.join([f'*{prev}'] * 9) if prev else ', '.join(['lol'] * 9)}]\n"
    for prev, name in zip(["", *"abcdefgh"], "abcdefghi", strict=True)
)  # nine lines that YAML's aliases (*a) expand to 9^9 values


def test_yaml_aliases_that_expand_past_any_memory_are_refused(
    tmp_path: Path, embedder: object
) -> None:
    """Nine lines of nested aliases spell a third of a billion values: the import's checks
    walked them for hours (the call never answered). Such a file is refused by its line, and
    so is a manifest of that kind; an alias that stays small is read as YAML reads it."""
    folder = tmp_path / "v" / "graph" / "facts"
    folder.mkdir(parents=True)
    note = folder / "m.md"
    head = "---\nid: mem_laughs\ntype: fact\nimportance: 0.5\ncreated: 2026-11-20T10:00:00+00:00\n"
    note.write_text(f"{head}metadata:\n{BILLION_LAUGHS}---\nLaughs\n")
    report = import_(tmp_path / "v")
    (problem,) = report.problems
    assert problem.source == "graph/facts/m.md" and not report.applied
    assert "expands to more than 100,000 values through its aliases" in problem.message
    note.write_text(f"{head}metadata:\n  a: &a [1, 2]\n  b: *a\n---\nShared\n")
    assert import_(tmp_path / "v").memories.new == 1
    (tmp_path / "v" / "memsys-vault.yaml").write_text(f"laughs:\n{BILLION_LAUGHS}")
    with pytest.raises(InvalidInput, match="expands to more than 100,000 values"):
        import_(tmp_path / "v")
