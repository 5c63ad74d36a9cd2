"""Memory commands: store, recall, forget, context, count, list, namespaces."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memsys.tokens import count_tokens
from tests.cli.helpers import deadline, fails, run, run_json
from tests.conftest import table_counts

pytestmark = pytest.mark.usefixtures("embedder")


def test_store_then_recall_finds_it() -> None:
    stored = run_json(
        "store",
        "The staging database is restored from a snapshot every Monday",
        "--type",
        "fact",
        "-n",
        "project:ops",
        "--importance",
        "0.8",
        "--tag",
        "db",
        "--tag",
        "staging",
        "--metadata",
        '{"source": "runbook"}',
    )
    assert stored["id"].startswith("mem_") and stored["duplicate"] is False
    assert (stored["memory_type"], stored["namespace"], stored["importance"]) == (
        "fact",
        "project:ops",
        0.8,
    )
    recalled = run_json("recall", "when is staging restored?", "-n", "project:ops", "-k", "3")
    top = recalled["memories"][0]
    assert top["id"] == stored["id"]
    assert top["tags"] == ["db", "staging"] and top["metadata"] == {"source": "runbook"}

    human = run("recall", "staging snapshot")
    assert human.exit_code == 0 and stored["id"] in human.stdout and "Monday" in human.stdout


def test_duplicate_store_says_duplicate() -> None:
    first = run("store", "Prefer ruff over flake8")
    assert first.exit_code == 0 and "Stored mem_" in first.stdout
    second = run("store", "Prefer ruff over flake8")
    assert second.exit_code == 0 and "Duplicate" in second.stdout
    again = run_json("store", "Prefer ruff over flake8")
    assert again["duplicate"] is True
    assert run_json("count")["count"] == 1


def test_store_rejects_bad_input_and_writes_nothing() -> None:
    before = table_counts()
    assert "Invalid memory type" in fails("store", "x", "--type", "bogus")
    assert "--metadata is not valid JSON" in fails("store", "x", "--metadata", "{oops")
    assert "Content cannot be empty" in fails("store", "   ")
    assert "lifecycle" in fails("store", "x", "--lifecycle", "forever")
    assert table_counts() == before


def test_recall_errors() -> None:
    run_json("store", "something to find")
    assert fails("recall", "   ") == "error: Query cannot be empty"
    assert "Namespace not found" in fails("recall", "anything", "--namespace", "nowhere")
    assert "--n-results must be between 1 and 50" in fails("recall", "anything", "-k", "0")
    assert "Invalid memory type" in fails("recall", "anything", "--type", "bogus")


def test_typer_usage_errors_exit_2_with_one_line() -> None:
    assert fails("recall") == "error: Missing argument 'query'. (see `memsys recall --help`)"
    assert "Invalid value for '--importance'" in fails("store", "x", "--importance", "high")
    assert "No such command 'rememberr'" in fails("rememberr")
    assert run("--help").exit_code == 0


def test_an_option_given_twice_is_refused_not_the_last_taken() -> None:
    # `--success --failure` recorded a failure, `-n a -n b` read b: one must be meant
    memory = run_json("store", "Restart the worker after a config change")
    assert fails("outcome", memory["id"], "--success", "--failure") == (
        "error: Option --success / --failure given more than once; give it once "
        "(see `memsys outcome --help`)"
    )
    assert run_json("validation", memory["id"])["events"] == []
    assert "Option --namespace / -n given more than once" in fails(
        "pref", "get", "editor", "-n", "a", "--namespace", "b"
    )
    # an option that takes a list still takes it repeated
    tagged = run_json("store", "Tagged twice", "--tag", "a", "--tag", "b")
    assert run_json("get", tagged["id"])["tags"] == ["a", "b"]


def test_help_is_shown_whatever_else_the_line_holds_twice() -> None:
    # --help on a line being edited shows the help, as with a missing argument: not an error
    for args in (
        ("store", "x", "-n", "a", "-n", "b", "--help"),
        ("pref", "get", "-n", "a", "-n", "b", "--help"),
    ):
        shown = run(*args)
        assert shown.exit_code == 0, shown.stderr
        assert "Usage: memsys" in shown.stdout


def test_forget_and_store_refuse_what_they_cannot_take() -> None:
    before = table_counts()
    assert fails("forget", "   ") == "error: Query cannot be empty"
    assert "Content is too long: 32001 characters" in fails("store", "x" * 32_001)
    assert table_counts() == before


def test_forget_by_id_and_by_positional_id() -> None:
    a = run_json("store", "Lunch is at noon")
    b = run_json("store", "The build server is called hopper")
    forgot = run_json("forget", "--id", a["id"])
    assert forgot["deleted_ids"] == [a["id"]] and forgot["deleted_count"] == 1
    human = run("forget", b["id"])
    assert human.exit_code == 0 and f"Forgot 1 memory: {b['id']}" in human.stdout
    assert run_json("count")["count"] == 0
    assert "Memory not found" in fails("forget", "--id", a["id"])


def test_forget_protects_golden_rules_unless_forced() -> None:
    rule = run_json("store", "Never push to main directly", "--type", "golden_rule")
    kept = run_json("forget", "--id", rule["id"])
    assert kept["deleted_count"] == 0 and kept["protected_ids"] == [rule["id"]]
    gone = run_json("forget", "--id", rule["id"], "--force", "--purge")
    assert gone["deleted_ids"] == [rule["id"]] and gone["purged"] is True


def test_forget_by_query_says_which_pinned_memories_it_kept() -> None:
    pinned = run_json("store", "The office wifi password rotates monthly")
    assert run("pin", pinned["id"]).exit_code == 0
    human = run("forget", "--query", "office wifi password")
    assert human.exit_code == 0 and "Forgot 0 memories" in human.stdout
    assert f"Kept 1 pinned memory (use --force): {pinned['id']}" in human.stdout
    forced = run_json("forget", "--query", "office wifi password", "--force")
    assert forced["deleted_ids"] == [pinned["id"]] and forced["pinned_kept_count"] == 0


def test_forget_by_query_only_close_matches() -> None:
    target = run_json("store", "The office wifi password rotates monthly")
    other = run_json("store", "Bananas are rich in potassium")
    forgot = run_json("forget", "--query", "office wifi password", "--min-similarity", "0.6")
    assert forgot["deleted_ids"] == [target["id"]]
    assert [m["id"] for m in run_json("list")["memories"]] == [other["id"]]


def test_context_respects_token_budget() -> None:
    for i in range(12):
        run_json(
            "store",
            f"Rule {i}: deployments need a changelog entry and a rollback plan for service {i}",
            "--type",
            "procedure",
        )
    run_json("store", "Always run the tests before merging", "--type", "golden_rule")
    for budget in (40, 120, 400):
        out = run_json("context", "deployments", "--token-budget", str(budget))
        assert out["token_estimate"] <= budget
        assert count_tokens(out["context"]) <= budget
    full = run_json("context", "--token-budget", "4000")
    assert full["memory_count"] == 13 and full["golden_rule_count"] == 1
    assert full["context"].index("Always run the tests") < full["context"].index("Rule ")

    human = run("context", "--token-budget", "4000")
    assert human.exit_code == 0
    assert human.stdout.rstrip("\n") == full["context"].rstrip("\n")
    assert "--token-budget must be between" in fails("context", "--token-budget", "0")


def test_count_list_and_namespaces() -> None:
    run_json("store", "alpha fact", "-t", "fact", "-n", "a")
    run_json("store", "beta decision", "-t", "decision", "-n", "a", "--importance", "0.9")
    run_json("store", "gamma fact", "-t", "fact", "-n", "b", "--importance", "0.1")
    assert run_json("count")["count"] == 3
    assert run_json("count", "-n", "a")["count"] == 2
    assert run_json("count", "--type", "fact")["count"] == 2
    assert run("count", "-n", "a").stdout.strip() == "2 memories (namespace=a)"

    listed = run_json("list", "--order-by", "importance", "--limit", "2")
    assert [m["content"] for m in listed["memories"]] == ["beta decision", "alpha fact"]
    assert listed["total"] == 3
    ascending = run_json("list", "--order-by", "importance", "--asc", "--offset", "1")
    assert [m["content"] for m in ascending["memories"]] == ["alpha fact", "beta decision"]
    human = run("list", "-n", "b")
    assert "gamma fact" in human.stdout and "1-1 of 1" in human.stdout
    assert "Invalid --order-by" in fails("list", "--order-by", "content")

    spaces = run_json("namespaces")
    counts = {n["namespace"]: n["memory_count"] for n in spaces["namespaces"]}
    assert counts == {"a": 2, "b": 1}
    assert "namespace" in run("namespaces").stdout


def test_store_batch_from_a_json_lines_file(tmp_path) -> None:
    lines = [
        '{"content": "The API gateway times out after 30 seconds", "memory_type": "fact"}',
        "",
        '{"content": "Prefer small pull requests", "memory_type": "preference"}',
        '{"content": "The API gateway times out after 30 seconds"}',
        '{"content": "Staging lives in eu-west-1", "namespace": "project:infra"}',
    ]
    source = tmp_path / "memories.jsonl"
    source.write_text("\n".join(lines) + "\n")
    out = run_json("store-batch", str(source), "-n", "project:app")
    assert (out["stored"], out["duplicates"]) == (3, 1)
    assert out["results"][2]["id"] == out["results"][0]["id"]  # deduplicated in the batch
    assert [r["namespace"] for r in out["results"]] == ["project:app"] * 3 + ["project:infra"]
    recalled = run_json("recall", "gateway timeout", "-n", "project:app")["memories"]
    assert recalled[0]["content"] == "The API gateway times out after 30 seconds"

    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"content": "fine"}\n{"content": "x", "memory_type": "vibe"}\n{oops\n')
    before = run_json("count")["count"]
    assert fails("store-batch", str(bad)).startswith("error: line 2: Invalid memory type: vibe")
    assert run_json("count")["count"] == before  # nothing of a bad file is stored


OTHER_LONG = (
    "The release train leaves every second Thursday from the main branch. Feature flags "
    "hide what is not finished, and a release manager picked by rotation signs it off. "
    "Hotfixes go out on their own branch, are merged back the same day, and the changelog "
    "is written from the merged pull requests by a script the release manager runs."
)


def test_storing_aged_memories_again_says_they_are_active_again(tmp_path) -> None:
    """`memsys store` said so of a memory aging had archived, made active again by storing
    its text; `memsys store-batch` (and `store --from-file`) counted it as one more
    duplicate and said nothing of it."""
    from memsys.services import maintain
    from tests.services.test_lifecycle import LONG, days

    first = run_json("store", LONG, "--type", "configuration", "-n", "age:cli")
    other = run_json("store", OTHER_LONG, "--type", "configuration", "-n", "age:cli")
    maintain.run(now=days(40))  # both archived
    again = run("store", LONG, "--type", "configuration", "-n", "age:cli")
    assert f"Duplicate: {first['id']} in namespace age:cli, aged, made active again" in again.stdout
    source = tmp_path / "again.jsonl"
    item = {"content": OTHER_LONG, "memory_type": "configuration"}
    source.write_text(json.dumps(item) + "\n")
    batch = run("store-batch", str(source), "-n", "age:cli")
    assert batch.exit_code == 0, batch.output
    assert "Stored 0 memories; 1 duplicate already there" in batch.stdout
    assert f"{other['id']}: aged, made active again" in batch.stdout


def test_store_from_file_applies_the_options_to_every_line(tmp_path) -> None:
    source = tmp_path / "notes.jsonl"
    source.write_text(
        '{"content": "Deploys freeze on Fridays after 3 pm"}\n'
        '{"content": "Rollbacks go through the release channel", "memory_type": "decision"}\n'
    )
    out = run_json("store", "--from-file", str(source), "-n", "project:rel", "--type", "fact")
    assert (out["stored"], out["duplicates"]) == (2, 0)
    listed = run_json("list", "-n", "project:rel", "--order-by", "created_at")["memories"]
    kinds = {m["content"]: m["memory_type"] for m in listed}
    assert kinds == {
        "Deploys freeze on Fridays after 3 pm": "fact",
        "Rollbacks go through the release channel": "decision",  # the line's own value wins
    }
    again = run("store", "--from-file", str(source), "-n", "project:rel")
    assert again.stdout.strip() == "Stored 0 memories; 2 duplicates already there"
    before = run_json("count")["count"]
    assert "not both" in fails("store", "Also this", "--from-file", str(source))
    assert "Missing argument CONTENT" in fails("store", "-n", "project:rel")
    # the export's field name for a type is refused, naming the one a line takes
    (tmp_path / "typed.jsonl").write_text('{"content": "Typed by hand", "type": "fact"}\n')
    said = fails("store", "--from-file", str(tmp_path / "typed.jsonl"))
    assert said.endswith("line 1: type: Extra inputs are not permitted (did you mean memory_type?)")
    assert run_json("count")["count"] == before


def test_a_json_lines_file_whose_content_holds_a_unicode_line_break(tmp_path) -> None:
    """store-batch and store --from-file split the file with splitlines(): content holding
    U+2028 (raw, as JSON allows and json.dumps(ensure_ascii=False) writes it) was refused
    as two broken lines."""
    content = "First half \u2028 second half \u0085 and \x1c the rest"
    source = tmp_path / "odd.jsonl"
    source.write_text(json.dumps({"content": content}, ensure_ascii=False) + "\r\n")
    out = run_json("store", "--from-file", str(source), "-n", "project:odd")
    assert out["stored"] == 1
    assert run_json("get", out["results"][0]["id"])["content"] == content
    again = run_json("store-batch", str(source), "-n", "project:odd")
    assert (again["stored"], again["duplicates"]) == (0, 1)


def test_a_file_that_fails_halfway_says_how_much_was_stored(tmp_path, monkeypatch) -> None:
    from memsys.cli import remote
    from memsys.errors import TimedOut

    source = tmp_path / "many.jsonl"
    source.write_text(
        "".join(f'{{"content": "Runbook step {i} of the failover"}}\n' for i in range(501))
    )
    real, calls = remote.run, []

    def second_batch_times_out(op, data):  # type: ignore[no-untyped-def]
        calls.append(len(data["memories"]))
        if len(calls) == 2:
            raise TimedOut("The database cancelled a statement of this call.")
        return real(op, data)

    monkeypatch.setattr(remote, "run", second_batch_times_out)
    line = fails("store", "--from-file", str(source), "-n", "project:halfway", code=1)
    assert line == (
        "error: 500 lines of 501 stored before this: "
        "The database cancelled a statement of this call."
    )
    monkeypatch.setattr(remote, "run", real)
    assert run_json("count", "-n", "project:halfway")["count"] == 500
    again = run_json("store", "--from-file", str(source), "-n", "project:halfway")
    assert (again["stored"], again["duplicates"]) == (1, 500)  # storing it again completes it


def test_a_file_of_long_memories_is_stored_in_batches_a_call_takes(tmp_path) -> None:
    """One memory_store_batch call embeds at most ten memories' worth of content: the file's
    batches are cut by size as well as by count, so a file of long memories is stored."""
    from memsys.config import get_settings

    size = get_settings().max_content_chars
    source = tmp_path / "long.jsonl"
    # One "word" this long is a single (unknown) token: cheap to embed at any length.
    source.write_text(
        "".join(json.dumps({"content": f"{i:03d}" + "x" * (size - 3)}) + "\n" for i in range(21))
    )
    out = run_json("store", "--from-file", str(source), "-n", "project:long")
    assert (out["stored"], out["duplicates"]) == (21, 0)
    assert run_json("count", "-n", "project:long")["count"] == 21


def test_a_file_argument_that_is_not_a_regular_file_is_refused(tmp_path) -> None:
    import os

    fifo = tmp_path / "pipe.jsonl"
    os.mkfifo(fifo)  # no writer: reading it would block forever
    loop = tmp_path / "loop.jsonl"
    loop.symlink_to(tmp_path / "loop.jsonl")
    before = run_json("count")["count"]
    with deadline(20):  # a regression blocks on the FIFO: fail, do not hang the suite
        refused_every_way(fifo, loop, tmp_path)
    assert run_json("count")["count"] == before


def refused_every_way(fifo, loop, folder) -> None:  # type: ignore[no-untyped-def]
    for path, reason in (
        (fifo, "Not a regular file"),
        ("/dev/zero", "Not a regular file"),  # a device that never ends
        (folder, "Not a regular file"),
        (loop, "Too many levels of symbolic links"),
    ):
        assert reason in fails("store", "--from-file", str(path)), path
        assert reason in fails("store-batch", str(path)), path


def test_forget_takes_an_imported_id_given_as_its_argument(tmp_path: Path) -> None:
    """`memsys forget ID` (input_value: an id or a query) took only ids shaped as memsys
    makes them (mem_ + 16 hex): an imported memory's own id ran as a query instead, which
    forgot nothing and said so with success."""
    snapshot = tmp_path / "snap.json"
    memory = {
        "kind": "memory",
        "id": "mem_release7",
        "namespace": "global",
        "type": "decision",
        "content": "Release 7 ships on a Friday",
        "importance": 0.5,
        "created": "2026-01-05T10:00:00Z",
        "updated": "2026-01-05T10:00:00Z",
    }
    doc = {"format": "memsys-export", "schema_version": "1.1", "memories": [memory]}
    snapshot.write_text(json.dumps(doc))
    assert run("import", str(snapshot)).exit_code == 0
    # Named with another namespace, the value is no id there: it runs as a query of that
    # namespace (forgetting nothing), not as "not found" of the other namespace's memory.
    run("store", "Unrelated note", "-n", "project:other")
    elsewhere = run_json("forget", "mem_release7", "-n", "project:other")
    assert elsewhere["deleted_ids"] == []
    gone = run_json("forget", "mem_release7")
    assert gone["deleted_ids"] == ["mem_release7"]
    assert "Memory not found: mem_release7" in fails("forget", "mem_release7")


def test_store_shows_the_secret_warning_it_answers_with(tmp_path: Path) -> None:
    """memory_store answers with `warnings` when the content looks like a secret; the
    CLI's plain output printed only "Stored …", so the user never learned of it."""
    one = run("store", "The deploy user's key is AKIAIOSFODNN7EXAMPLE")
    assert one.exit_code == 0
    assert "warning: content looks like it holds a secret (AWS access key id)" in one.stderr
    assert "warning" not in one.stdout  # stdout keeps the command's own output
    lines = tmp_path / "notes.jsonl"
    lines.write_text(
        '{"content": "Backups run nightly"}\n'
        '{"content": "The CI token is ghp_abcdefghijklmnopqrstuvwxyz0123456789"}\n'
    )
    batch = run("store-batch", str(lines))
    assert batch.exit_code == 0
    assert "warning: mem_" in batch.stderr and "GitHub token" in batch.stderr


def test_stored_terminal_controls_are_shown_not_acted_on() -> None:
    """A memory's text reached the terminal raw in list, recall and context: an escape
    sequence a writer stored (ESC [ 8 m hides text, ESC ] 0 ; retitles, OSC 52 writes the
    clipboard) acted on the user's terminal. Human output shows controls as \\xNN."""
    stored = run_json("store", "Deploy notes \x1b[8mhidden\x1b[0m \x1b]0;owned\x07 end")
    for args in (("list",), ("recall", "deploy notes"), ("context", "deploy notes")):
        shown = run(*args)
        assert shown.exit_code == 0, shown.output
        assert "\x1b" not in shown.stdout and "\x07" not in shown.stdout, args
        assert "Deploy notes \\x1b[8mhidden\\x1b[0m \\x1b]0;owned\\x07 end" in shown.stdout, args
    raw = run_json("get", stored["id"])  # --json keeps the text, JSON-escaped
    assert raw["content"] == "Deploy notes \x1b[8mhidden\x1b[0m \x1b]0;owned\x07 end"
    # --json escapes DEL and the C1 controls too (json escapes only C0): U+009B is a CSI.
    c1 = run_json("store", "Eight-bit \x9b8m hidden \x7f end")
    printed = run("get", c1["id"], "--json").stdout
    assert "\x9b" not in printed and "\x7f" not in printed and "\\u009b" in printed
    assert json.loads(printed)["content"] == "Eight-bit \x9b8m hidden \x7f end"
    chart = run("inspect", stored["id"], "--output-format", "mermaid")  # labels hold the text
    assert chart.exit_code == 0, chart.output
    assert "\x1b" not in chart.stdout and "\x07" not in chart.stdout, chart.stdout
    assert "\\x1b" in chart.stdout


def test_a_json_lines_file_saved_with_a_byte_order_mark(tmp_path) -> None:
    """Windows Notepad saves UTF-8 with a byte-order mark: store-batch and store --from-file
    refused such a file ("line 1: not valid JSON: Unexpected UTF-8 BOM"), as import did not."""
    source = tmp_path / "notepad.jsonl"
    lines = '{"content": "Saved by Notepad"}\r\n{"content": "Second line"}\r\n'
    source.write_bytes(b"\xef\xbb\xbf" + lines.encode())
    out = run_json("store-batch", str(source), "-n", "project:bom")
    assert out["stored"] == 2
    contents = {m["content"] for m in run_json("list", "-n", "project:bom")["memories"]}
    assert contents == {"Saved by Notepad", "Second line"}
    again = run_json("store", "--from-file", str(source), "-n", "project:bom")
    assert (again["stored"], again["duplicates"]) == (0, 2)


def test_bad_input_names_the_option_the_user_typed() -> None:
    # The services and models name their fields (output_format, filters.doc_type); on the
    # command line those are options, and the error named no option the user could find.
    assert fails("inspect", "mem_x", "--output-format", "svg").startswith(
        "error: --output-format: Input should be 'json' or 'mermaid'"
    )
    assert fails("search-with-filters", "x", "--doc-type", "pdf").startswith(
        "error: --doc-type: Input should be 'memory' or 'document'"
    )
    assert fails("decay", "--scope", "bogus").startswith("error: --scope: Input should be")
    assert "Invalid --order-by: bogus" in fails("list", "--order-by", "bogus")
    assert "--edge-id, --memory-id, or --source-id with --target-id" in fails("edge-forget")
    # input_value is forget's positional argument: the usage line names it so.
    assert "Give --id, --query or input_value to say what to forget" in fails("forget")
    assert fails("graph", "query", "x", "--depth", "5") == (
        "error: --depth must be between 1 and 3, got 5"
    )
