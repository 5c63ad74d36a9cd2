"""Bad snapshots: every problem reported with its file and line, nothing written unless
partial; a dry run writes nothing; a file from a future schema version is refused."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from memsys.errors import InvalidInput
from memsys.vault import files, lint
from tests.conftest import table_counts
from tests.vault.helpers import diff, empty_database, export, import_, live_count, seed

GOOD = """---
id: mem_00000000000000a1
type: solution
title: "Keepalive"
tags: [redis]
importance: 0.8
created: 2025-12-06T16:25:58+00:00
updated: 2025-12-06T16:25:58+00:00
relations:
- target: mem_000000000000dead
  type: SOLVES
  direction: outgoing
  strength: 0.8
---
Added socket_keepalive=True to the Redis client.
"""


def write(root: Path, relative: str, text: str) -> None:
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def broken_vault(root: Path) -> None:
    write(root, "graph/solutions/keepalive-aaaaaa.md", GOOD)
    write(root, "graph/solutions/copy-bbbbbb.md", GOOD.replace("Added", "Also added"))
    write(root, "graph/fixes/bad-yaml-cccccc.md", "---\nid: [unclosed\ntype: fix\n---\nbody\n")
    write(root, "graph/fixes/no-frontmatter-dddddd.md", "just text\n")
    write(
        root,
        "graph/fixes/bad-fields-eeeeee.md",
        "---\nid: mem_00000000000000e1\ntype: spell\nimportance: 7\n"
        "created: yesterday\n---\nbody\n",
    )
    write(
        root,
        "graph/general/fine-ffffff.md",
        GOOD.replace("a1", "f1").split("relations:")[0] + "---\nA memory with nothing wrong.\n",
    )


def test_every_problem_is_reported_with_file_and_line(tmp_path: Path, embedder: object) -> None:
    broken_vault(tmp_path / "v")
    before = table_counts()
    report = import_(tmp_path / "v")
    assert not report.applied
    where = {(p.source, p.line) for p in report.problems}
    text = " | ".join(f"{p.source}:{p.line} {p.message}" for p in report.problems)
    assert ("graph/solutions/keepalive-aaaaaa.md", 2) in where or (
        "graph/solutions/copy-bbbbbb.md",
        2,
    ) in where, text
    assert "duplicate id mem_00000000000000a1" in text
    assert ("graph/fixes/bad-yaml-cccccc.md", 3) in where, text  # the YAML error's line
    assert "graph/fixes/no-frontmatter-dddddd.md:1 no YAML frontmatter" in text
    assert ("graph/fixes/bad-fields-eeeeee.md", 3) in where  # type: spell
    assert ("graph/fixes/bad-fields-eeeeee.md", 4) in where  # importance: 7
    assert ("graph/fixes/bad-fields-eeeeee.md", 5) in where  # created: yesterday
    assert report.problem_count == len(report.problems) >= 6
    assert table_counts() == before  # nothing imported


def test_values_json_cannot_hold_are_problems(tmp_path: Path, embedder: object) -> None:
    # YAML reads an unquoted date as a date and Python's JSON reads NaN: neither would come
    # back from the database as the file has it, so each is a problem with its line.
    dated = GOOD.replace("tags: [redis]", "tags: [redis]\nmetadata: {reviewed: 2024-05-01}")
    write(tmp_path / "v", "graph/solutions/keepalive-aaaaaa.md", dated.split("relations:")[0])
    (tmp_path / "v" / "graph/solutions/keepalive-aaaaaa.md").write_text(
        dated.split("relations:")[0] + "---\nBody.\n"
    )
    before = table_counts()
    report = import_(tmp_path / "v")
    (problem,) = report.problems
    assert (problem.source, problem.line) == ("graph/solutions/keepalive-aaaaaa.md", 6)
    assert "metadata.reviewed is a date, not a JSON value (quote it)" in problem.message
    lines = [
        '{"kind": "header", "format": "memsys-export", "schema_version": "1.0"}',
        '{"kind": "memory", "id": "mem_00000000000000b1", "type": "fact", "content": "x",'
        ' "importance": 0.5, "confidence": 0.5, "metadata": {"score": NaN},'
        ' "created": "2026-01-01T00:00:00+00:00"}',
        '{"kind": "preference", "key": "limit", "value": [Infinity]}',
    ]
    (tmp_path / "nan.jsonl").write_text("\n".join(lines) + "\n")
    report = import_(tmp_path / "nan.jsonl")
    found = {(p.line, p.message.split(":")[0]) for p in report.problems}
    assert found == {(2, "metadata.score is nan"), (3, "value is inf")}, report.problems
    assert table_counts() == before


def test_dangling_edge_is_a_problem(tmp_path: Path, embedder: object) -> None:
    write(tmp_path / "v", "graph/solutions/keepalive-aaaaaa.md", GOOD)
    report = import_(tmp_path / "v")
    (problem,) = report.problems
    assert problem.source == "graph/solutions/keepalive-aaaaaa.md"
    assert problem.line == 10  # its `- target` line
    assert "dangling edge" in problem.message and "mem_000000000000dead" in problem.message
    assert report.memories.new == 0 and not report.applied


def test_partial_imports_what_is_valid(tmp_path: Path, embedder: object) -> None:
    broken_vault(tmp_path / "v")
    report = import_(tmp_path / "v", partial=True)
    assert report.applied and report.problem_count >= 6
    assert report.memories.new == 1  # only the file with nothing wrong
    assert report.edges.new == 0


def test_dry_run_counts_and_writes_nothing(tmp_path: Path, embedder: object) -> None:
    seed()
    export(tmp_path / "snap.json")
    path = tmp_path / "snap.json"
    lines = path.read_text().splitlines()
    edited = [line.replace("Redis connections drop under load", "Redis drops") for line in lines]
    path.write_text("\n".join(edited) + "\n")
    before = table_counts()
    report = import_(path, dry_run=True)
    assert report.dry_run and not report.applied
    assert report.memories.changed == 1 and report.memories.unchanged == 3
    assert table_counts() == before


def test_a_dry_run_beside_problems_counts_what_the_valid_records_change(
    tmp_path: Path, embedder: object
) -> None:
    """With a problem in the file, a dry run said "0 new, 0 changed, 0 unchanged"."""
    seed()
    export(tmp_path / "snap.jsonl")
    empty_database()
    lines = (tmp_path / "snap.jsonl").read_text().splitlines()
    lines[1] = lines[1].replace('"importance": ', '"importance": 7, "was": ', 1)
    (tmp_path / "snap.jsonl").write_text("\n".join(lines) + "\n")
    before = table_counts()
    report = import_(tmp_path / "snap.jsonl", dry_run=True)
    assert report.problems and not report.applied
    assert report.memories.new == 3  # the four seeded memories but the broken one
    assert table_counts() == before


def test_future_schema_version_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "future.json"
    path.write_text(json.dumps({"format": "memsys-export", "schema_version": "9.0"}))
    with pytest.raises(InvalidInput, match=r"future.json:1: .*9.0, newer than this memsys"):
        import_(path)


def test_a_vault_manifest_that_is_no_mapping_is_refused_not_a_crash(tmp_path: Path) -> None:
    """memsys-vault.yaml holding a list or a word: AttributeError in import, lint and diff."""
    write(tmp_path / "v", "graph/general/fine-ffffff.md", GOOD.split("relations:")[0] + "---\nx\n")
    for text in ("[1, 2]\n", "hello\n"):
        (tmp_path / "v/memsys-vault.yaml").write_text(text)
        with pytest.raises(InvalidInput, match=r"memsys-vault.yaml:1: expected fields"):
            files.open_snapshot(tmp_path / "v")


def test_older_schema_version_is_upgraded_on_read(tmp_path: Path, embedder: object) -> None:
    path = tmp_path / "old.jsonl"
    rows = [
        {"kind": "header", "format": "memsys-export", "schema_version": "0.9"},
        {
            "kind": "memory",
            "id": "mem_0000000000000001",
            "memory_type": "fact",
            "content": "The API listens on port 8700",
            "importance": 0.5,
            "created_at": "2026-01-01T00:00:00+00:00",
            "access_count": 3,  # a `memsys list` item's field, which 1.0 has not
            "last_accessed_at": "2026-01-02T00:00:00+00:00",
        },
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    report = import_(path)
    assert report.applied and report.memories.new == 1, report.problems


def test_a_reformatted_json_document_is_read_whole(tmp_path: Path, embedder: object) -> None:
    seed()
    export(tmp_path / "snap.json")
    data = json.loads((tmp_path / "snap.json").read_text())
    before = data["memories"][0]["importance"]
    data["memories"][0]["importance"] = 3  # pretty-printed by an editor, one value broken
    (tmp_path / "pretty.json").write_text(json.dumps(data, indent=2))
    report = import_(tmp_path / "pretty.json")
    (problem,) = report.problems
    assert problem.source.endswith("pretty.json memories[0]")
    assert "importance: 3 is outside 0.0..1.0" in problem.message
    data["memories"][0]["importance"] = 0.25 if before != 0.25 else 0.75  # a real change
    (tmp_path / "pretty.json").write_text(json.dumps(data, indent=2))
    assert import_(tmp_path / "pretty.json").memories.changed == 1


def test_a_document_headed_like_an_export_but_laid_out_otherwise_is_read_whole(
    tmp_path: Path, embedder: object
) -> None:
    """A header line like an export's, then `"memories": [{…}, …],` on a line: valid JSON,
    refused as "unexpected line in a memsys JSON export" (read line by line)."""
    seed()
    export(tmp_path / "snap.json")
    data = json.loads((tmp_path / "snap.json").read_text())
    head = json.dumps({"format": data["format"], "schema_version": data["schema_version"]})
    arrays = ",\n".join(f'"{k}": {json.dumps(data[k])}' for k in TOP_ARRAYS)
    # or a record per line with the bracket closing on the last one: `{…}],`
    closed = ",\n".join(
        f'"{k}": [\n' + ",\n".join(json.dumps(r) for r in data[k]) + "]" for k in TOP_ARRAYS
    )
    for body in (arrays, closed):
        (tmp_path / "laid.json").write_text(head[:-1] + ",\n" + body + "}\n")
        report = import_(tmp_path / "laid.json", dry_run=True)
        assert report.problems == [] and report.memories.unchanged == len(data["memories"])
        assert diff(str(tmp_path / "laid.json")).identical


TOP_ARRAYS = ("memories", "edges", "preferences")


def test_a_document_whose_first_record_shares_the_header_line_is_read_whole(
    tmp_path: Path, embedder: object
) -> None:
    """The header and `"memories": [` with the first record on line 1 (an export's lines
    joined by a script), a record per line after it: read line by line, as an export, the
    first memory was passed over without a word (not imported, not in the diff)."""
    seed()
    export(tmp_path / "snap.json")
    data = json.loads((tmp_path / "snap.json").read_text())
    head, opening, first, *rest = (tmp_path / "snap.json").read_text().split("\n")
    assert opening == '"memories": [' and first.endswith(",")
    (tmp_path / "joined.json").write_text("\n".join([f"{head} {opening}{first}", *rest]))
    report = import_(tmp_path / "joined.json", dry_run=True)
    assert report.problems == [] and report.memories.unchanged == len(data["memories"])
    assert diff(str(tmp_path / "joined.json")).identical


def test_a_misspelt_key_of_a_json_document_is_a_problem_not_its_records_dropped(
    tmp_path: Path, embedder: object
) -> None:
    """`memorys` for `memories` in a reformatted document: every memory under it was left
    out without a word (the file linted clean and imported as "nothing new")."""
    seed()
    export(tmp_path / "snap.json")
    data = json.loads((tmp_path / "snap.json").read_text())
    data = {"memorys" if key == "memories" else key: value for key, value in data.items()}
    text = json.dumps(data, indent=2)
    (tmp_path / "typo.json").write_text(text)
    line = text[: text.index('"memorys"')].count("\n") + 1
    report = import_(tmp_path / "typo.json", dry_run=True)
    found = [p for p in report.problems if p.message.startswith("memorys")]
    assert [(p.source, p.line) for p in found] == [(str(tmp_path / "typo.json"), line)], report
    assert "unknown key of a memsys export" in found[0].message
    linted = lint.lint(files.open_snapshot(tmp_path / "typo.json").items(), lint.load_schema())
    assert any(f.message.startswith("memorys: unknown key") for f in linted.findings)
    with pytest.raises(InvalidInput, match=rf"typo.json:{line}: memorys: unknown key"):
        diff(str(tmp_path / "typo.json"))
    # saved as UTF-16 (PowerShell's Out-File): the same problem at the same line, no crash
    (tmp_path / "u16.json").write_bytes(text.encode("utf-16"))
    wide = import_(tmp_path / "u16.json", dry_run=True)
    assert [p.line for p in wide.problems if p.message.startswith("memorys")] == [line]


def memory_line(n: int, **fields: object) -> str:
    record = {
        "kind": "memory",
        "id": f"mem_{n:016x}",
        "type": "fact",
        "content": f"Fact number {n}",
        "importance": 0.5,
        "confidence": 0.5,
        "created": "2026-01-01T00:00:00+00:00",
        **fields,
    }
    return json.dumps(record)


def test_what_memory_store_refuses_is_a_problem_in_a_file_too(
    tmp_path: Path, embedder: object
) -> None:
    # Each line is one problem at its own line, and nothing is written: text PostgreSQL
    # cannot hold, the limits memory_store applies, and JSON Python cannot read.
    lines = [
        '{"kind": "header", "format": "memsys-export", "schema_version": "1.0"}',
        memory_line(1, content="edited\u0000nul"),
        memory_line(2, content="lone \ud800 surrogate"),
        memory_line(3, content="x" * 40_000),
        memory_line(4, tags=[f"t{i}" for i in range(51)]),
        memory_line(5, metadata={"blob": "y" * 70_000}),
        '{"kind": "memory", "id": "mem_0000000000000006", "importance": 1' + "0" * 5000 + "}",
        '{"kind": "memory", "deep": ' + "[" * 100_000 + "]" * 100_000 + "}",
    ]
    path = tmp_path / "bad.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8", errors="surrogatepass")
    with path.open("ab") as f:
        f.write(memory_line(9).encode().replace(b"Fact", b"F\xffct") + b"\n")
    before = table_counts()
    report = import_(path)
    by_line = {p.line: p.message for p in report.problems}
    assert sorted(by_line) == [2, 3, 4, 5, 6, 7, 8, 9], report.problems
    assert "NUL" in by_line[2] and "lone surrogate" in by_line[3]
    assert "too long" in by_line[4] and "Too many tags" in by_line[5]
    assert "too large" in by_line[6] and "not valid JSON" in by_line[7]
    assert "nested too deeply" in by_line[8] and "not UTF-8" in by_line[9]
    assert not report.applied and table_counts() == before
    assert import_(path, dry_run=True).problem_count == 8  # a dry run finds the same


def test_a_key_given_twice_is_a_problem_not_the_last_one_kept(
    tmp_path: Path, embedder: object
) -> None:
    """JSON keeps the last of two equal keys: a second `"value"` typed into a line of
    vault/preferences.yaml, a metadata key repeated in a frontmatter, a record of an export
    edited by hand, imported the other value without a word (YAML's were refused)."""
    seed()
    export(tmp_path / "v")
    prefs = tmp_path / "v/vault/preferences.yaml"
    text = prefs.read_text()
    prefs.write_text(text.replace('"value": "helix"', '"value": "vim", "value": "helix"'))
    line = text[: text.index('"helix"')].count("\n") + 1
    note = next((tmp_path / "v/graph/fixes").glob("*.md"))
    note.write_text(
        note.read_text().replace("pinned: false", 'pinned: false\nmetadata: {"a": 1, "a": 2}')
    )
    before = table_counts()
    report = import_(tmp_path / "v")
    found = {(p.source, p.line): p.message for p in report.problems}
    assert "given twice" in found[("vault/preferences.yaml", line)], report.problems
    assert "'a' is given twice" in found[(str(note.relative_to(tmp_path / "v")), 12)], found
    assert len(found) == 2 and not report.applied and table_counts() == before
    lines = ['{"kind": "header", "format": "memsys-export", "schema_version": "1.0"}']
    lines.append(memory_line(1)[:-1] + ', "importance": 0.9}')
    (tmp_path / "twice.jsonl").write_text("\n".join(lines) + "\n")
    (problem,) = import_(tmp_path / "twice.jsonl").problems
    assert problem.line == 2 and "the key 'importance' is given twice" in problem.message
    with pytest.raises(InvalidInput, match="the key 'memories' is given twice"):
        diff(_two_arrays(tmp_path / "twice.json"))


def _two_arrays(path: Path) -> str:
    """A JSON document with two `memories` arrays: json kept the second, the first's
    records left out."""
    path.write_text('{"schema_version": "1.0",\n"memories": [],\n"memories": []}\n')
    return str(path)


def test_a_time_outside_the_years_utc_holds_is_a_problem_not_a_crash(
    tmp_path: Path, embedder: object
) -> None:
    """Year 1 east of UTC (or 9999 west of it) is no moment in UTC: converting it raised
    OverflowError through import, lint and diff (a traceback, HTTP 500)."""
    lines = ['{"kind": "header", "format": "memsys-export", "schema_version": "1.0"}']
    lines.append(memory_line(1, created="0001-01-01T00:00:00+05:00"))
    lines.append(memory_line(2, created="2026-01-01T00:00:00Z", updated="9999-12-31T23:00-05:00"))
    path = tmp_path / "far.jsonl"
    path.write_text("\n".join(lines) + "\n")
    report = import_(path)
    assert [(p.line, p.message.split(":")[0]) for p in report.problems] == [
        (2, "created"),
        (2, "updated"),  # it takes created's time when it has none
        (3, "updated"),
    ], report.problems
    assert not report.applied and table_counts()["chunk"] == 0
    linted = lint.lint(files.open_snapshot(path).items(), lint.load_schema())
    assert len([f for f in linted.findings if f.severity == "error"]) == 3
    with pytest.raises(InvalidInput, match="expected an ISO 8601 timestamp"):
        diff(str(path))


def test_a_list_where_a_name_is_meant_is_a_problem_not_a_crash(
    tmp_path: Path, embedder: object
) -> None:
    """`"kind": [1, 2]` in a record and `type: [a, b]` in a frontmatter: TypeError
    (unhashable type) in import, lint, diff and migrate --file, where a word was looked up."""
    path = tmp_path / "kind.jsonl"
    header = '{"kind": "header", "format": "memsys-export", "schema_version": "0.9"}'
    path.write_text(header + "\n" + memory_line(1, kind=[1, 2]) + "\n")
    (problem,) = import_(path).problems
    assert problem.line == 2 and problem.message.startswith("kind: expected memory"), problem
    linted = lint.lint(files.open_snapshot(path).items(), lint.load_schema())
    assert [f.line for f in linted.findings] == [2]
    with pytest.raises(InvalidInput, match="kind: expected memory"):
        diff(str(path))
    write(tmp_path / "v", "graph/general/a-aaaaaa.md", GOOD.replace("type: solution", "type: [a]"))
    linted = lint.lint(files.open_snapshot(tmp_path / "v").items(), lint.load_schema())
    assert any("unknown memory type ['a']" in f.message for f in linted.findings), linted


def test_lint_checks_an_edges_memories_as_import_does(tmp_path: Path, embedder: object) -> None:
    """An edge in one namespace between memories of another linted clean, and import refused
    it; an edge to a memory the snapshot lacks said nothing (import needs it stored)."""
    edge = {"kind": "edge", "type": "relates_to", "created": "2026-01-01T00:00:00+00:00"}
    lines = ['{"kind": "header", "format": "memsys-export", "schema_version": "1.0"}']
    lines += [memory_line(1), memory_line(2)]
    lines.append(
        json.dumps(
            {**edge, "namespace": "other", "from_id": "mem_0000000000000001"}
            | {"to_id": "mem_0000000000000002"}
        )
    )
    lines.append(
        json.dumps(
            {**edge, "namespace": "global", "from_id": "mem_0000000000000001"}
            | {"to_id": "mem_0000000000000009"}
        )
    )
    path = tmp_path / "edges.jsonl"
    path.write_text("\n".join(lines) + "\n")
    linted = lint.lint(files.open_snapshot(path).items(), lint.load_schema())
    said = {(f.line, f.severity): f.message for f in linted.findings}
    assert said[(4, "error")].startswith("edge in namespace other but memory"), said
    assert "mem_0000000000000009 is not in this snapshot" in said[(5, "warning")], said
    assert {p.line for p in import_(path, dry_run=True).problems} == {4, 5}


def test_a_vault_file_name_that_is_not_utf8_is_named_so_json_can_carry_it(
    tmp_path: Path, embedder: object
) -> None:
    """A note whose name holds a byte that is not UTF-8, with a problem: its name (a lone
    surrogate as Python reads it) in the problem failed the JSON answer (HTTP 500)."""
    import os

    write(tmp_path / "v", "graph/general/fine-ffffff.md", GOOD.split("relations:")[0] + "---\nx\n")
    folder = os.path.join(os.fsencode(tmp_path), b"v", b"graph", b"general")
    with open(os.path.join(folder, b"\xfe-note.md"), "w") as f:
        f.write("---\nid: [\n---\nbody\n")
    report = import_(tmp_path / "v", dry_run=True)
    (problem,) = report.problems
    assert problem.source == "graph/general/\\udcfe-note.md", problem
    report.model_dump_json().encode("utf-8")  # what POST /v1/import/file answers
    with pytest.raises(InvalidInput) as refused:
        diff(str(tmp_path / "v"))
    refused.value.message.encode("utf-8")


def test_a_memory_under_a_document_chunks_id_is_a_problem_not_a_crash(
    tmp_path: Path, embedder: object
) -> None:
    """A document's chunk holds the (namespace, id) a snapshot's memory names: the dry run
    counted it new, and the import failed on the key (UniqueViolation, SQL in a traceback)."""
    from tests.factories import index

    (tmp_path / "doc.md").write_text("# Runbook\nRestart the worker.\n")
    taken = index(tmp_path / "doc.md", namespace="global").chunk_ids[0]
    path = tmp_path / "snap.jsonl"
    header = '{"kind": "header", "format": "memsys-export", "schema_version": "1.0"}'
    path.write_text(f"{header}\n{memory_line(1, id=taken, namespace='global')}\n")
    before = table_counts()
    for dry_run in (True, False):
        (problem,) = import_(path, dry_run=dry_run).problems
        assert problem.line == 2 and f"id {taken} is a document chunk's" in problem.message
    assert table_counts() == before


def test_a_memory_id_that_names_a_rest_route_imports_and_reads_over_rest(
    tmp_path: Path, client: Any
) -> None:
    """A database could hold a memory "count" (import took it once), so its own export must
    import again; GET /v1/memories/count stays the count, and /v1/memories/by-id/count reads
    the memory (refusing the id on import broke that export's restore)."""
    path = tmp_path / "snap.jsonl"
    header = '{"kind": "header", "format": "memsys-export", "schema_version": "1.0"}'
    path.write_text(f"{header}\n{memory_line(1, id='count')}\n{memory_line(2, id='counts')}\n")
    report = import_(path, dry_run=False)
    assert report.applied and report.problem_count == 0, report.problems
    assert client.get("/v1/memories/count").json()["count"] == 2
    read = client.get("/v1/memories/by-id/count")
    assert read.status_code == 200 and read.json()["id"] == "count"
    assert client.get("/v1/memories/by-id/counts").json()["id"] == "counts"
    assert client.get("/v1/memories/counts").json()["id"] == "counts"
    from memsys.cli import remote
    from memsys.operations import BY_NAME

    # `memsys get count` with a server running took GET /v1/memories/count (a traceback)
    for memory_id, path in (("count", "/v1/memories/by-id/count"), ("x", "/v1/memories/x")):
        sent = remote._request(BY_NAME["memory_get"], {"memory_id": memory_id}, "http://h")
        assert sent.full_url.split("?")[0] == f"http://h{path}"


def test_a_vault_link_to_a_file_outside_it_is_not_read(tmp_path: Path, embedder: object) -> None:
    outside = tmp_path / "secret.md"
    outside.write_text(GOOD.split("relations:")[0] + "---\nNot the vault's.\n")
    (tmp_path / "v/graph/solutions").mkdir(parents=True)
    (tmp_path / "v/graph/solutions/link-aaaaaa.md").symlink_to(outside)
    report = import_(tmp_path / "v")
    (problem,) = report.problems
    assert problem.source == "graph/solutions/link-aaaaaa.md"
    assert "outside the vault" in problem.message


def test_a_linked_folder_in_a_vault_is_a_problem_not_passed_over(
    tmp_path: Path, embedder: object
) -> None:
    """graph/facts -> elsewhere: import, lint and diff read none of its files, and said
    nothing (a vault clean in CI had memories it never imported)."""
    elsewhere = tmp_path / "elsewhere"
    write(elsewhere, "keepalive-aaaaaa.md", GOOD.split("relations:")[0] + "---\nElsewhere.\n")
    write(tmp_path / "v", "graph/general/fine-ffffff.md", GOOD.split("relations:")[0] + "---\nx\n")
    (tmp_path / "v/graph/facts").symlink_to(elsewhere)
    report = import_(tmp_path / "v")
    (problem,) = report.problems
    assert (problem.source, problem.line) == ("graph/facts", None), problem
    assert "a link to a folder: not read" in problem.message
    assert not report.applied and table_counts()["chunk"] == 0
    linted = lint.lint(files.open_snapshot(tmp_path / "v").items(), lint.load_schema())
    assert [f.source for f in linted.findings if f.severity == "error"] == ["graph/facts"]
    with pytest.raises(InvalidInput, match="graph/facts: a link to a folder"):
        diff(str(tmp_path / "v"))


def test_a_link_to_nothing_as_the_preferences_or_manifest_is_a_problem_not_absent(
    tmp_path: Path, embedder: object
) -> None:
    """vault/preferences.yaml or memsys-vault.yaml as a link loop or a link to a missing
    file: exists() calls it absent, so import, lint and diff read a vault without
    preferences (or of the current format) without a word, where a pipe there is refused."""
    write(tmp_path / "v", "graph/general/fine-ffffff.md", GOOD.split("relations:")[0] + "---\nx\n")
    prefs = tmp_path / "v" / files.PREFERENCES_FILE
    prefs.parent.mkdir(parents=True)
    for target in (prefs, tmp_path / "v" / "vault" / "gone.yaml"):  # a loop, then dangling
        prefs.unlink(missing_ok=True)
        prefs.symlink_to(target)
        (problem,) = import_(tmp_path / "v", dry_run=True).problems
        assert problem.source == files.PREFERENCES_FILE, problem
        assert "not a regular file" in problem.message
        linted = lint.lint(files.open_snapshot(tmp_path / "v").items(), lint.load_schema())
        errors = [f.source for f in linted.findings if f.severity == "error"]
        assert errors == [files.PREFERENCES_FILE], linted.findings
        with pytest.raises(InvalidInput, match=r"vault/preferences\.yaml: not a regular file"):
            diff(str(tmp_path / "v"))
    prefs.unlink()
    manifest = tmp_path / "v" / files.MANIFEST
    manifest.symlink_to(manifest)
    with pytest.raises(InvalidInput, match=r"memsys-vault\.yaml:1: not a regular file"):
        import_(tmp_path / "v", dry_run=True)
    assert table_counts()["chunk"] == 0


def test_what_the_other_writers_refuse_is_a_problem_in_a_file_too(
    tmp_path: Path, embedder: object
) -> None:
    """A preference preference_set refuses was a 500 after a clean dry run; unknown fields
    were dropped; a future time, a relation memsys does not know, a weight or a context
    memory_relate refuses were stored."""
    edge = {"kind": "edge", "from_id": "mem_0000000000000001", "to_id": "mem_0000000000000002"}
    edge |= {"type": "solves", "created": "2026-01-01T00:00:00+00:00"}
    lines = [
        '{"kind": "header", "format": "memsys-export", "schema_version": "1.0"}',
        memory_line(1),
        memory_line(2),
        memory_line(3, colour="blue"),
        memory_line(4, created="2999-01-01T00:00:00+00:00"),
        json.dumps({**edge, "type": "zzz"}),
        json.dumps({**edge, "strength": 1e30}),
        json.dumps({**edge, "context": "c" * 2_001}),
        json.dumps({**edge, "note": "x"}),
        json.dumps({"kind": "preference", "key": "k" * 65, "value": "v"}),
        json.dumps({"kind": "preference", "key": "a\tb", "value": "v"}),
        json.dumps({"kind": "preference", "key": "theme", "value": None}),
        json.dumps({"kind": "preference", "key": "theme", "value": "v", "namespace": "bad ns"}),
        json.dumps({"kind": "preference", "key": "editor", "value": "helix", "zz": 1}),
    ]
    path = tmp_path / "bad.jsonl"
    path.write_text("\n".join(lines) + "\n")
    before = table_counts()
    dry = import_(path, dry_run=True)
    report = import_(path)
    by_line = {p.line: p.message for p in report.problems}
    assert sorted(by_line) == list(range(4, 15)), report.problems
    assert {p.line for p in dry.problems} == set(by_line)  # the dry run finds the same
    assert "colour: unknown field" in by_line[4] and "in the future" in by_line[5]
    assert "'zzz' is not a relation memsys knows" in by_line[6]
    assert "strength" in by_line[7] and "context is at most 2000" in by_line[8]
    assert "note: unknown field" in by_line[9] and "too long" in by_line[10]
    assert "control character" in by_line[11] and "null" in by_line[12]
    assert "namespace" in by_line[13] and "zz: unknown field" in by_line[14]
    assert not report.applied and table_counts() == before
    # Spelled another way, a relation of the registry is that relation.
    path.write_text("\n".join([*lines[:3], json.dumps({**edge, "type": "SOLVES"})]) + "\n")
    assert import_(path).edges.new == 1


def test_a_time_outside_the_calendar_in_utc_is_a_problem(tmp_path: Path, embedder: object) -> None:
    """'0001-01-01T00:00:00+14:00' is a year BC in UTC: import, lint and diff stopped with an
    OverflowError (a traceback from the CLI, "Internal error" from MCP and REST)."""
    lines = [
        '{"kind": "header", "format": "memsys-export", "schema_version": "1.0"}',
        memory_line(1, created="0001-01-01T00:00:00+14:00"),
        memory_line(2, updated="9999-12-31T23:00:00-05:00"),
    ]
    path = tmp_path / "calendar.jsonl"
    path.write_text("\n".join(lines) + "\n")
    before = table_counts()
    report = import_(path)
    by_line = {p.line: p.message for p in report.problems}
    assert sorted(by_line) == [2, 3], report.problems
    assert "timestamp in the years 1-9999 (UTC), got '0001-01-01T00:00:00+14:00'" in by_line[2]
    assert "updated: expected an ISO 8601 timestamp in the years 1-9999" in by_line[3]
    assert not report.applied and table_counts() == before
    linted = lint.lint(files.open_snapshot(path).items(), lint.load_schema())
    assert {f.line for f in linted.findings if f.severity == "error"} == {2, 3}
    with pytest.raises(InvalidInput, match=r"calendar\.jsonl:2: created: expected an ISO 8601"):
        diff(str(path))


def test_a_purged_memory_is_not_brought_back_by_an_older_snapshot(
    tmp_path: Path, embedder: object
) -> None:
    """A purge erases; importing an export made before it restored the memory under its old
    id, counted as new. It is a problem now, as a forgotten memory is."""
    from tests.factories import store
    from tests.services.test_memories import forget

    secret = store("The staging database password is PURGEME-5150").id
    store("The staging database lives in eu-west-1")
    export(tmp_path / "v")
    forget(memory_id=secret, purge=True)
    before = table_counts()
    report = import_(tmp_path / "v")
    assert not report.applied and table_counts() == before
    assert any(f"memory {secret} was purged" in p.message for p in report.problems)


@pytest.mark.parametrize("name", ["snap.jsonl", "snap.json", "vault"])
def test_a_field_named_like_a_readers_mark_is_an_unknown_field(
    tmp_path: Path, embedder: object, name: str
) -> None:
    """`unedited` and `happened_unknown` are marks memsys's readers set on a record (a vault
    file as memsys wrote it, an older file's silence about `happened`); given in a file they
    were taken for the mark: an edit beside `"unedited": true` was skipped as "unchanged",
    and `happened_unknown` skipped the check of `happened` (a new memory with a bad one
    raised a ValueError from the write, a traceback, where a dry run had said all was well)."""
    ids = seed()
    export(tmp_path / name)
    if name == "vault":
        edited = next((tmp_path / name / "graph" / "fixes").glob("*.md"))
        text = edited.read_text().replace("Redis connection timeouts", "Redis timeouts")
        edited.write_text(text.replace("\ncreated:", "\nunedited: true\ncreated:", 1))
    else:
        lines = (tmp_path / name).read_text().split("\n")
        at = next(i for i, line in enumerate(lines) if ids["fix"] in line and '"memory"' in line)
        record = json.loads(lines[at].rstrip(","))
        record |= {"content": "Redis timeouts fixed", "unedited": True}
        fresh = {**record, "id": "mem_00000000000000f2", "content": "A memory the file adds"}
        fresh |= {"happened": "yesterday", "happened_unknown": True}
        comma = "," if lines[at].endswith(",") else ""
        between = "," if name == "snap.json" else ""  # records of a JSON document's array
        lines[at] = json.dumps(record) + between + "\n" + json.dumps(fresh) + comma
        (tmp_path / name).write_text("\n".join(lines))
    report = import_(tmp_path / name)
    found = " | ".join(p.message for p in report.problems)
    assert not report.applied and "unedited (in the" in found, found
    assert "unknown field of a memory record" in found, found
    if name != "vault":
        assert "happened_unknown (in the file): unknown field" in found, found
    assert live_count("SELECT count(*) FROM chunk WHERE content LIKE 'Redis timeouts%'") == 0
