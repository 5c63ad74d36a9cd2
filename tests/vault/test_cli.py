"""`memsys export | import | diff | lint | migrate`: files and folders as a user types them,
exit codes a CI job can rely on."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.cli.helpers import deadline, fails, run, run_json
from tests.conftest import table_counts
from tests.vault.helpers import empty_database, seed


def test_export_to_stdout_and_import_from_a_file(tmp_path: Path, embedder: object) -> None:
    seed()
    out = run("export", "--format", "jsonl")
    assert out.exit_code == 0, out.output
    lines = out.stdout.splitlines()
    assert json.loads(lines[0])["schema_version"] == "1.1"
    assert sum(json.loads(line)["kind"] == "memory" for line in lines[1:]) == 4
    (tmp_path / "snap.jsonl").write_text(out.stdout)
    empty_database()
    dry = run_json("import", str(tmp_path / "snap.jsonl"), "--dry-run")
    assert dry["memories"]["new"] == 4 and not dry["applied"]
    done = run("import", str(tmp_path / "snap.jsonl"))
    assert done.exit_code == 0 and "Imported memories: 4 new" in done.stdout


def test_export_vault_and_diff_against_live(tmp_path: Path, embedder: object) -> None:
    ids = seed()
    made = run_json("export", str(tmp_path / "vault"))
    assert made["format"] == "vault" and made["memories"] == 4
    same = run("diff", str(tmp_path / "vault"))
    assert same.exit_code == 0 and "0 added, 0 removed, 0 changed" in same.stdout
    run("forget", ids["problem"])
    changed = run("diff", str(tmp_path / "vault"), "live")
    assert changed.exit_code == 1
    assert f"- memory {ids['problem']}" in changed.stdout
    assert "- edge edge_" in changed.stdout  # the edge to it went with it


def test_diff_reports_changed_fields(tmp_path: Path, embedder: object) -> None:
    seed()
    run("export", str(tmp_path / "a.json"))
    text = (tmp_path / "a.json").read_text().replace('"importance": 0.8', '"importance": 0.4')
    (tmp_path / "b.json").write_text(text)
    result = run("diff", str(tmp_path / "a.json"), str(tmp_path / "b.json"), "--json")
    assert result.exit_code == 1
    data = json.loads(result.stdout)
    (change,) = data["changed"]
    assert change["kind"] == "memory"
    assert change["fields"] == {"importance": {"before": 0.8, "after": 0.4}}
    assert data["counts"]["unchanged"] == 7


def test_import_with_problems_exits_2_and_writes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text(
        '{"kind": "header", "format": "memsys-export", "schema_version": "1.0"}\n'
        '{"kind": "memory", "id": "mem_1", "type": "nonsense", "content": "x", '
        '"importance": 0.5, "created": "2026-01-01T00:00:00+00:00"}\n'
        "not json\n"
    )
    before = table_counts()
    result = run("import", str(path))
    assert result.exit_code == 2
    assert f"{path}:2: type: unknown memory type 'nonsense'" in result.stdout
    assert f"{path}:3: not valid JSON" in result.stdout
    # No counts: a refused import computed none ("Checked memories: 0 new, 0 changed,
    # 0 unchanged" read as if the file held nothing).
    assert "Checked" not in result.stdout and " 0 new" not in result.stdout
    assert result.stderr.strip().startswith("error: 2 problems in")
    assert table_counts() == before


def test_import_of_a_missing_file_is_one_error_line(tmp_path: Path) -> None:
    assert "Snapshot not found" in fails("import", str(tmp_path / "nope.json"))


def test_a_path_the_file_system_refuses_is_bad_input(tmp_path: Path) -> None:
    long_name = str(tmp_path / ("a" * 300))
    for command in ("import", "diff", "lint"):
        assert "File name too long" in fails(command, long_name), command  # exit 2


def test_a_folder_that_is_no_vault_is_refused(tmp_path: Path, embedder: object) -> None:
    empty = tmp_path / "empty"
    (empty / "notes").mkdir(parents=True)  # a mistyped path: it imported as "0 new", exit 0
    for command in ("import", "diff", "lint"):
        assert "is not a vault" in fails(command, str(empty)), command
    # A vault in S003's layout needs no manifest (one written by hand has none).
    seed()
    vault = tmp_path / "vault"
    assert run("export", str(vault)).exit_code == 0
    (vault / "memsys-vault.yaml").unlink()
    empty_database()
    done = run("import", str(vault))
    assert done.exit_code == 0 and "Imported memories: 4 new" in done.stdout, done.output


def test_lint_live_database_and_a_vault_with_fix(tmp_path: Path, embedder: object) -> None:
    seed()
    clean = run("lint")
    assert clean.exit_code == 0, clean.stdout
    assert "4 memorys" not in clean.stdout and "0 errors" in clean.stdout
    run("export", str(tmp_path / "vault"))
    path = next((tmp_path / "vault" / "graph" / "fixes").glob("*.md"))
    text = path.read_text().replace("importance: 0.8", "importance: 1.7")
    path.write_text(text.replace("lifecycle: project\n", ""))
    other = next((tmp_path / "vault" / "graph" / "problems").glob("*.md"))
    other.write_text(re.sub(r"importance: .*\n", "", other.read_text()))
    found = run("lint", str(tmp_path / "vault"), "--json")
    assert found.exit_code == 1
    messages = {f["message"]: f for f in json.loads(found.stdout)["findings"]}
    assert messages["importance: 1.7 above maximum 1.0"]["line"] == 7
    assert messages["importance: required field missing"]["fixable"]  # import refuses it too
    # a field import fills in itself (the lifecycle, by type) is no finding: import takes it
    assert not any(m.startswith("lifecycle") for m in messages), messages
    fixed = run("lint", str(tmp_path / "vault"), "--fix")
    assert fixed.exit_code == 0, fixed.stdout
    assert "Fixed 2 findings" in fixed.stdout
    assert "importance: 1.0" in path.read_text() and "importance: 0.5" in other.read_text()


def test_lint_refuses_what_import_refuses_and_passes_what_it_takes(
    tmp_path: Path, embedder: object
) -> None:
    """lint passed files import refused (a duplicate id, a NUL, an unknown field) and failed
    exports import takes (content of 25,000 characters, over the shipped schema's 20,000)."""
    from tests.vault.test_import_problems import memory_line as line

    def memory_line(n: int, **fields: object) -> str:  # every field an export writes
        full = {"namespace": "global", "lifecycle": "project", "stage": "active"}
        return line(n, **full, updated="2026-01-01T00:00:00+00:00", **fields)

    header = '{"kind": "header", "format": "memsys-export", "schema_version": "1.0"}'
    lines = [
        header,
        memory_line(1),
        memory_line(1, content="the same id again"),
        memory_line(2, content="half\u0000way"),
        memory_line(3, importnace=0.9),
        memory_line(4, content="word " * 5_000),
    ]
    snap = tmp_path / "snap.jsonl"
    snap.write_text("\n".join(lines) + "\n")
    found = run("lint", str(snap), "--json")
    assert found.exit_code == 1
    findings = json.loads(found.stdout)["findings"]
    errors = {
        (f["line"], f["message"].split(" (")[0]) for f in findings if f["severity"] == "error"
    }
    assert errors == {
        (3, "duplicate id mem_0000000000000001"),
        (4, "content contains a NUL character"),
        (5, "importnace: unknown field of a memory record"),
    }, errors
    refused = run("import", str(snap))
    assert refused.exit_code == 2
    # The schema's edge types only warn; import refuses a relation it does not know.
    edge = {"kind": "edge", "from_id": "mem_0000000000000001", "to_id": "mem_0000000000000004"}
    edge |= {"type": "zzz", "strength": 1.0, "created": "2026-01-01T00:00:00+00:00"}
    snap.write_text("\n".join([header, lines[1], lines[5], json.dumps(edge)]) + "\n")
    assert run("lint", str(snap)).exit_code == 1
    snap.write_text("\n".join([header, lines[1], lines[5]]) + "\n")
    assert run("lint", str(snap)).exit_code == 0  # 25,000 characters: import takes them
    assert run("import", str(snap)).exit_code == 0


def test_an_export_of_every_relation_lints_clean_strictly(tmp_path: Path, embedder: object) -> None:
    """The shipped schema takes every relation memory_relate accepts: an untouched export
    of a valid database passes `lint --strict` (a CI step)."""
    from memsys import relations

    ids = [run_json("store", f"Memory number {n} about relation kinds")["id"] for n in range(2)]
    for relation in relations.PUBLIC:
        made = run("relate", ids[0], ids[1], relation)
        assert made.exit_code == 0, made.stdout
    run("export", str(tmp_path / "vault"))
    linted = run("lint", str(tmp_path / "vault"), "--strict")
    assert linted.exit_code == 0, linted.stdout
    assert run("lint", "--strict").exit_code == 0


def test_lint_with_a_missing_schema_file(tmp_path: Path) -> None:
    assert "Schema file not found" in fails("lint", "--schema", str(tmp_path / "none.yaml"))
    (tmp_path / "loop.yaml").symlink_to(tmp_path / "loop.yaml")  # said "not found"
    assert "symbolic links" in fails("lint", "--schema", str(tmp_path / "loop.yaml"))
    assert "Not a regular file" in fails("lint", "--schema", str(tmp_path))


def test_lint_refuses_a_schema_whose_rules_cannot_be_checked(tmp_path: Path) -> None:
    from memsys.vault.lint import default_schema_path

    shipped = default_schema_path().read_text()
    for wrong, said in (
        ("min: 0.0, max: 1.0, default: 0.5", 'min: "abc", max: 1.0, default: 0.5'),
        ("type: boolean, default: false", "type: quaternion"),
        ("max_items: 50", "max_items: -3"),
    ):
        schema = tmp_path / "schema.yaml"
        schema.write_text(shipped.replace(wrong, said))
        assert "preference." in fails("lint", "--schema", str(schema)), said


def test_lint_refuses_a_schema_it_would_crash_on_or_fix_by(tmp_path: Path) -> None:
    """What load_schema let through: a retention that is no number of days (a TypeError or
    OverflowError mid-lint, exit 1 with a traceback), an edge or preference section that is
    no mapping (AttributeError), min above max (--fix clamped a valid 0.5 to 0.0), a default
    that breaks its own rule (--fix would write it)."""
    from memsys.vault.lint import default_schema_path

    shipped = default_schema_path().read_text()
    vault = tmp_path / "v" / "graph" / "facts"
    vault.mkdir(parents=True)
    (vault / "a-aaaaaa.md").write_text(
        "---\nid: mem_0000000000000001\ntype: fact\nimportance: 0.5\n"
        "created: 2020-01-01T00:00:00+00:00\n---\nA fact\n"
    )
    for wrong, said, where in (
        ("retention_days: 30", 'retention_days: "30"', "fact: retention_days"),
        ("retention_days: 30", "retention_days: 99999999999", "fact: retention_days"),
        ("relationship:\n", "relationship: 5\nunused:\n", "relationship: expected"),
        ("min: 0.0, max: 1.0, default: 0.5", "min: 1.0, max: 0.0", "min 1.0 is above max"),
        ("min: 0.0, max: 1.0, default: 0.5", 'min: 0.0, max: 1.0, default: "x"', "default"),
    ):
        assert wrong in shipped, wrong
        schema = tmp_path / "schema.yaml"
        schema.write_text(shipped.replace(wrong, said, 1))
        assert where in fails("lint", str(tmp_path / "v"), "--schema", str(schema)), said


def test_lint_flags_retention_and_a_user_schema(tmp_path: Path) -> None:
    vault = tmp_path / "v" / "graph" / "facts"
    vault.mkdir(parents=True)
    (vault / "old-aaaaaa.md").write_text(
        "---\nid: mem_0000000000000001\ntype: fact\nnamespace: global\nimportance: 0.5\n"
        "confidence: 0.5\nlifecycle: project\nstage: active\n"
        "created: 2020-01-01T00:00:00+00:00\nupdated: 2020-01-01T00:00:00+00:00\n---\nOld fact\n"
    )
    warned = run("lint", str(tmp_path / "v"))
    assert warned.exit_code == 0 and "past retention" in warned.stdout
    assert run("lint", str(tmp_path / "v"), "--strict").exit_code == 1
    schema = tmp_path / "schema.yaml"
    schema.write_text(
        'version: "2.0"\nmemory_types:\n  decision:\n    schema:\n'
        "      content: {type: string, required: true}\n"
    )
    custom = run("lint", str(tmp_path / "v"), "--schema", str(schema))
    assert custom.exit_code == 1 and "unknown memory type 'fact'" in custom.stdout


def test_migrate_dry_run_prints_sql_and_migrate_upgrades_files(tmp_path: Path) -> None:
    current = run("migrate", "--dry-run")
    assert current.exit_code == 0 and current.stdout.startswith("-- already at")
    # an older revision is refused, not reported as done (it printed "X -> X", exit 0)
    older = "a6c4e2b9d173"  # the whole-text vectors: an ancestor of every later head
    for args in (("migrate", older), ("migrate", older, "--dry-run")):
        said = fails(*args)
        assert f"past {older}: migrate only upgrades" in said, said
    # a database at a revision this memsys does not know: one line, not a traceback
    from sqlalchemy import text

    from memsys.db import session_scope

    with session_scope() as s:
        real = s.scalar(text("SELECT version_num FROM alembic_version"))
        s.execute(text("UPDATE alembic_version SET version_num = 'ffffffffffff'"))
    try:
        for args in (("migrate", older), ("migrate", older, "--dry-run")):
            assert fails(*args).startswith("error: migration failed:")
    finally:
        with session_scope() as s:
            s.execute(text("UPDATE alembic_version SET version_num = :v"), {"v": real})
    old = tmp_path / "old.json"
    old.write_text(
        json.dumps({"format": "memsys-export", "schema_version": "0.9"})[:-1]
        + ',\n"memories": [\n'
        + json.dumps(
            {
                "kind": "memory",
                "id": "mem_0000000000000001",
                "memory_type": "fact",
                "content": "x",
                "importance": 0.5,
                "created_at": "2026-01-01T00:00:00+00:00",
            }
        )
        + "\n]}\n"
    )
    result = run("migrate", "--file", str(old), "--output", str(tmp_path / "new.json"))
    assert result.exit_code == 0 and "from schema 0.9 to 1.1" in result.stdout
    text = (tmp_path / "new.json").read_text()
    assert '"schema_version": "1.1"' in text and '"type": "fact"' in text
    assert '"memory_type"' not in text
    # An output that is some other file is refused, as export refuses it (was overwritten).
    notes = tmp_path / "notes.txt"
    notes.write_text("precious\n")
    said = fails("migrate", "--file", str(old), "--output", str(notes))
    assert said == (
        f"error: {notes} exists and is not a memsys export: give a new file name (an earlier "
        "export is replaced; any other file is left alone)"
    )
    assert notes.read_text() == "precious\n"
    again = run("migrate", "--file", str(old), "--output", str(tmp_path / "new.json"))
    assert again.exit_code == 0, again.output  # an earlier export is replaced


def test_migrate_writes_the_form_its_output_is_named_for(tmp_path: Path, embedder: object) -> None:
    """`-o new.jsonl` of a JSON document wrote a JSON document into new.jsonl (the input's
    form), which a tool reading JSON lines cannot read; export goes by the name."""
    seed()
    run("export", str(tmp_path / "snap.json"))
    run("export", str(tmp_path / "snap.jsonl"))
    for source, target in (("snap.json", "new.jsonl"), ("snap.jsonl", "new.json")):
        done = run("migrate", "--file", str(tmp_path / source), "-o", str(tmp_path / target))
        assert done.exit_code == 0, done.output
        assert (tmp_path / target).read_bytes() == (
            tmp_path / f"snap{Path(target).suffix}"
        ).read_bytes()


def test_migrate_refuses_what_it_would_leave_out_of_the_file(tmp_path: Path) -> None:
    """A field of no 1.0 record (a misspelt `tgas`) was dropped from the upgraded file
    without a word, and a record of no kind crashed the write (KeyError)."""
    header = '{"kind": "header", "format": "memsys-export", "schema_version": "1.0"}\n'
    record = {"kind": "memory", "id": "mem_0000000000000001", "type": "fact", "content": "x"}
    for extra, said in (
        ({"tgas": ["a"]}, "tgas: unknown field"),
        ({"kind": "x"}, "kind: expected"),
    ):
        old = tmp_path / "old.jsonl"
        old.write_text(header + json.dumps({**record, **extra}) + "\n")
        error = fails("migrate", "--file", str(old), "--output", str(tmp_path / "new.jsonl"))
        assert f"old.jsonl:2: {said}" in error, error
        assert not (tmp_path / "new.jsonl").exists()


def test_a_failed_migrate_or_export_leaves_the_file_it_would_replace(
    tmp_path: Path, embedder: object
) -> None:
    seed()
    snap = tmp_path / "snap.jsonl"
    run("export", str(snap))
    kept = snap.read_bytes()
    bad = tmp_path / "bad.json"
    bad.write_bytes(b'{"format": "memsys-export", "schema_version": "1.0",\n"memories": [\n\xff]}')
    assert "not UTF-8" in fails("migrate", "--file", str(bad), "--output", str(snap))
    assert snap.read_bytes() == kept
    # The output may be the input: it is read whole before it is replaced.
    done = run("migrate", "--file", str(snap), "--output", str(snap))
    assert done.exit_code == 0 and snap.read_bytes() == kept
    assert "Cannot write" in fails("export", str(snap / "under-a-file.jsonl"))
    assert snap.read_bytes() == kept
    link = tmp_path / "latest.jsonl"
    link.symlink_to(snap)
    run("export", str(link))  # a link is written through: it stays a link to the new file
    assert link.is_symlink() and snap.read_bytes() == kept


def test_pipes_and_devices_are_refused_never_read(tmp_path: Path, embedder: object) -> None:
    with deadline(60):  # a regression blocks on a FIFO: fail, do not hang the suite
        pipes_and_devices_refused(tmp_path)


def pipes_and_devices_refused(tmp_path: Path) -> None:
    import os

    seed()
    pipe = tmp_path / "snap.jsonl"
    os.mkfifo(pipe)  # no writer: reading it would block forever
    good = tmp_path / "good.jsonl"
    run("export", str(good))
    for args in (
        ["import", str(pipe)],
        ["import", "/dev/zero"],
        ["diff", str(pipe)],
        ["export", str(pipe), "--format", "jsonl"],  # no reader: opening it would block
        ["migrate", "--file", str(good), "--output", str(pipe)],
    ):
        assert "Not a regular file" in fails(*args), args
    loop = tmp_path / "loop.jsonl"
    loop.symlink_to(loop)  # was replaced by the export, exit 0
    assert "symbolic links" in fails("export", str(loop)) and loop.is_symlink()
    assert "name a .json or .jsonl file" in fails("export", str(tmp_path / "notes.txt"))
    assert not (tmp_path / "notes.txt").exists()  # not made a vault folder
    assert "Namespace not found: typo" in fails("export", "-", "-n", "typo")
    vault = tmp_path / "vault"
    run("export", str(vault))
    memory = next((vault / "graph").rglob("*.md"))
    os.mkfifo(memory.parent / "pipe.md")
    (vault / "vault" / "preferences.yaml").unlink(missing_ok=True)
    os.mkfifo(vault / "vault" / "preferences.yaml")
    before = table_counts()
    refused = run("import", str(vault))
    assert refused.exit_code == 2
    for name in (f"{memory.parent.relative_to(vault)}/pipe.md", "vault/preferences.yaml"):
        assert f"{name}: not a regular file" in refused.stdout + refused.stderr, name
    assert table_counts() == before
    lint = run("lint", str(vault))
    assert lint.exit_code == 1 and "pipe.md: error: not a regular file" in lint.stdout
    memory.unlink()
    os.mkfifo(memory)  # where the export writes that memory again: it would block reading it
    rel = memory.relative_to(vault).as_posix()
    assert f"Not a regular file: {rel}" in fails("export", str(vault))


def test_an_output_the_system_refuses_is_one_line_or_a_quiet_exit(embedder: object) -> None:
    import os
    import subprocess

    from tests.cli.test_startup import _memsys

    seed()  # the process reads the test database (MEMSYS_DATABASE_URL is inherited)
    with open("/dev/full", "w") as full:
        done = subprocess.run(
            [*_memsys(), "export", "-"], stdout=full, stderr=subprocess.PIPE, timeout=120
        )
    assert done.returncode == 1
    line = done.stderr.decode().strip()
    assert line.startswith("error: No space left on device (the system") and "\n" not in line
    # A reader that stopped reading (`memsys export - | head -c 10` on a large store): no
    # traceback and no complaint, the exit says the output was cut.
    read, write = os.pipe()
    os.close(read)
    try:
        done = subprocess.run(
            [*_memsys(), "export", "-"], stdout=write, stderr=subprocess.PIPE, timeout=120
        )
    finally:
        os.close(write)
    assert (done.returncode, done.stderr.decode()) == (1, "")


def test_problems_of_stdin_name_it_and_lines_without_a_header_say_so(
    tmp_path: Path, embedder: object
) -> None:
    from typer.testing import CliRunner

    from memsys.cli.main import app
    from tests.vault.test_import_problems import memory_line

    header = '{"kind": "header", "format": "memsys-export", "schema_version": "1.0"}'
    body = "\n".join([header, memory_line(1), memory_line(1, content="again")]) + "\n"
    piped = CliRunner().invoke(app, ["import", "-"], input=body)
    assert piped.exit_code == 2
    assert "-:3: duplicate id mem_0000000000000001 (also at -:2)" in piped.stdout, piped.stdout
    assert "memsys-import-" not in piped.stdout + piped.stderr  # the temporary file's name
    headless = tmp_path / "lines.jsonl"
    headless.write_text("\n".join([memory_line(1), memory_line(2)]) + "\n")  # said "Extra data"
    assert "JSON lines without their header" in fails("import", str(headless))


def test_migrating_a_1_0_file_warns_that_its_memories_lose_when_they_happened(
    tmp_path: Path, embedder: object
) -> None:
    """A 1.0 file cannot say when a memory happened, and import keeps the stored time for
    it; `migrate --file` writes it as 1.1, where no `happened` says "no time", so importing
    the upgraded file cleared the stored time — without a word from migrate."""
    seed()
    run("export", str(tmp_path / "new.jsonl"))
    header, *lines = (tmp_path / "new.jsonl").read_text().splitlines()
    old = [json.dumps({**json.loads(header), "schema_version": "1.0"})]
    for line in lines:
        rec = json.loads(line)
        rec.pop("happened", None)
        old.append(json.dumps(rec))
    (tmp_path / "old.jsonl").write_text("\n".join(old) + "\n")
    memories = sum(1 for line in lines if json.loads(line)["kind"] == "memory")
    done = run("migrate", "--file", str(tmp_path / "old.jsonl"), "-o", str(tmp_path / "up.jsonl"))
    assert done.exit_code == 0, done.output
    assert done.stderr.startswith(
        f"warning: {memories} memories of this 1.0 file do not say when they happened"
    )
    assert "import the 1.0 file itself" in done.stderr
    found = run_json("migrate", "--file", str(tmp_path / "old.jsonl"), "-o", str(tmp_path / "u2"))
    assert len(found["warnings"]) == 1
    # A file that says it (1.1) is upgraded without a warning.
    same = str(tmp_path / "same.jsonl")
    quiet = run("migrate", "--file", str(tmp_path / "new.jsonl"), "-o", same)
    assert quiet.exit_code == 0 and quiet.stderr == ""


def test_a_blank_path_is_refused_not_taken_for_the_working_folder(
    tmp_path: Path, embedder: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Path("") is ".": in a folder that is a vault, `memsys import ""` read it (its error
    in another folder had lost every "."), `diff ""` and `lint ""` compared and checked it,
    and `export " "` made a vault in a new folder named " " (MCP and REST refuse these)."""
    seed()
    run("export", str(tmp_path / "vault"))
    monkeypatch.chdir(tmp_path / "vault")
    before = table_counts()
    for args in (
        ("import", ""),
        ("import", " "),
        ("diff", ""),
        ("diff", "live", " "),
        ("lint", ""),
        ("lint", "--schema", ""),
        ("export", " "),
        ("migrate", "--file", "", "-o", "-"),
        ("store", "--from-file", " "),
        ("store-batch", ""),
        ("graph", "import", ""),
        ("graph", "export", " "),
    ):
        assert "a path cannot be empty or blank" in fails(*args), args
    assert table_counts() == before
    assert not (tmp_path / "vault" / " ").exists()


def test_lint_counts_one_record_in_the_singular(tmp_path: Path, embedder: object) -> None:
    # It printed "1 memories, 1 preferences checked against schema …".
    assert run("store", "Deploys run on Tuesdays", "--type", "fact").exit_code == 0
    assert run("pref", "set", "editor", "helix").exit_code == 0
    assert run("export", str(tmp_path / "snap.json")).exit_code == 0
    linted = run("lint", str(tmp_path / "snap.json"))
    assert linted.exit_code == 0, linted.output
    assert "1 memory, 1 preference checked against schema" in linted.stdout
