"""`memsys pref`: set (JSON or text), get, list, history and as-of reads."""

from __future__ import annotations

from tests.cli.helpers import fails, run, run_json


def test_set_parses_json_values_and_keeps_text() -> None:
    assert run_json("pref", "set", "tabs", "4")["value"] == 4
    assert run_json("pref", "set", "wrap", "true")["value"] is True
    assert run_json("pref", "set", "editor", '{"name": "vim"}')["value"] == {"name": "vim"}
    assert run_json("pref", "set", "theme", "dark mode")["value"] == "dark mode"
    human = run("pref", "set", "theme", "dark mode")
    assert human.exit_code == 0 and "unchanged" in human.stdout
    assert "cannot be null" in fails("pref", "set", "theme", "null")


def test_get_history_and_as_of() -> None:
    v1 = run_json("pref", "set", "editor", "vim", "-n", "me")
    v2 = run_json("pref", "set", "editor", "nano", "-n", "me", "--lifecycle", "project")
    assert (v1["version"], v2["version"], v2["changed"]) == (1, 2, True)

    now = run_json("pref", "get", "editor", "-n", "me")
    assert (now["value"], now["version"], now["lifecycle"]) == ("nano", 2, "project")
    then = run_json("pref", "get", "editor", "-n", "me", "--as-of", v1["valid_from"])
    assert (then["value"], then["version"]) == ("vim", 1)
    assert "Preference not found" in fails(
        "pref", "get", "editor", "-n", "me", "--as-of", "2001-01-01T00:00:00Z"
    )
    assert "Invalid --as-of" in fails("pref", "get", "editor", "-n", "me", "--as-of", "yesterday")

    history = run_json("pref", "history", "editor", "-n", "me")
    assert [v["value"] for v in history["versions"]] == ["vim", "nano"]
    assert history["versions"][0]["valid_to"] == v2["valid_from"]
    table = run("pref", "history", "editor", "-n", "me")
    assert table.exit_code == 0 and "vim" in table.stdout and "nano" in table.stdout
    assert 'editor = "nano"' in run("pref", "get", "editor", "-n", "me").stdout


def test_list_now_as_of_and_by_lifecycle() -> None:
    first = run_json("pref", "set", "a", "1")
    run_json("pref", "set", "b", "2", "--lifecycle", "session")
    listed = run_json("pref", "list")
    assert [(p["key"], p["value"]) for p in listed["preferences"]] == [("a", 1), ("b", 2)]
    only = run_json("pref", "list", "--lifecycle", "session")
    assert [p["key"] for p in only["preferences"]] == ["b"]
    earlier = run_json("pref", "list", "--as-of", first["valid_from"])
    assert [p["key"] for p in earlier["preferences"]] == ["a"]
    assert "Namespace not found" in fails("pref", "list", "-n", "nobody")
    assert "Preference not found" in fails("pref", "history", "zzz")


def test_delete_closes_the_value_and_keeps_its_history() -> None:
    first = run_json("pref", "set", "editor", "vim", "-n", "me")
    run_json("pref", "set", "editor", "helix", "-n", "me")
    gone = run_json("pref", "delete", "editor", "-n", "me")
    assert gone == {"key": "editor", "namespace": "me", "version": 2}
    assert "Preference not found" in fails("pref", "get", "editor", "-n", "me")
    assert run_json("pref", "list", "-n", "me")["total"] == 0
    history = run_json("pref", "history", "editor", "-n", "me")["versions"]
    assert [v["value"] for v in history] == ["vim", "helix"] and history[1]["valid_to"]
    then = run_json("pref", "get", "editor", "-n", "me", "--as-of", first["valid_from"])
    assert then["value"] == "vim"  # as-of reads still see what was
    assert "Preference not found" in fails("pref", "delete", "editor", "-n", "me")
    again = run_json("pref", "set", "editor", "emacs", "-n", "me")
    assert again["version"] == 3  # a new value continues the history


def test_set_warns_on_stderr_of_a_value_that_looks_like_a_secret() -> None:
    human = run("pref", "set", "aws", '{"id": "AKIAIOSFODNN7EXAMPLE"}')
    assert human.exit_code == 0 and human.stdout.startswith("aws = ")
    assert human.stderr.startswith("warning: value looks like it holds a secret (AWS access key")
    assert "warning" not in run("pref", "set", "tabs", "4").stderr
