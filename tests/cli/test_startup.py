"""The installed `memsys` command: fast help without the database, clean database errors."""

from __future__ import annotations

import itertools
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

UNREACHABLE = "postgresql+psycopg://nobody@127.0.0.1:1/nothing"


def _memsys() -> list[str]:
    script = Path(sys.executable).parent / "memsys"
    return [str(script)] if script.exists() else [sys.executable, "-m", "memsys.cli.main"]


def _env(tmp_path: Path) -> dict[str, str]:
    # An unreachable server and an empty home: touching the database would fail or leave files.
    return {**os.environ, "MEMSYS_DATABASE_URL": UNREACHABLE, "MEMSYS_HOME": str(tmp_path)}


def test_help_never_touches_the_database(tmp_path: Path) -> None:
    for args in (["--help"], ["index-directory", "--help"], ["pref", "--help"]):
        done = subprocess.run(
            [*_memsys(), *args], env=_env(tmp_path), capture_output=True, text=True, timeout=60
        )
        assert done.returncode == 0, done.stderr
        assert "Usage" in done.stdout and done.stderr == ""
    assert list(tmp_path.iterdir()) == []


def test_a_broken_pdf_is_one_error_line_without_library_noise(tmp_path: Path) -> None:
    # In a real process: pytest's own log capture would hide pypdf's warnings in-process.
    broken = tmp_path / "broken.pdf"
    broken.write_bytes(b"%PDF-1.4 this is not really a pdf")
    done = subprocess.run(
        [*_memsys(), "index-file", str(broken)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 2
    assert done.stderr.startswith("error: Failed to read file: not a readable PDF")
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr


def test_importing_the_cli_loads_no_database_or_model_code() -> None:
    probe = (
        "import sys, memsys.cli.main; "
        "heavy = ['torch', 'sentence_transformers', 'sqlalchemy', 'memsys.db', "
        "'memsys.services', 'alembic', 'uvicorn', 'mcp']; "
        "print([m for m in heavy if m in sys.modules])"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout.strip() == "[]"


def test_unreachable_database_exits_1_with_one_line(tmp_path: Path) -> None:
    done = subprocess.run(
        [*_memsys(), "count"], env=_env(tmp_path), capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 1
    assert done.stderr.startswith("error: Cannot connect to PostgreSQL")
    assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr


def test_a_setting_that_does_not_parse_is_one_line_naming_it_not_its_value(
    tmp_path: Path,
) -> None:
    env = {**_env(tmp_path), "MEMSYS_API_TOKEN": "s3cret", "MEMSYS_BUSY_WAIT_S": "-1"}
    env["MEMSYS_HNSW_EF_SEARCH"] = "lots"
    for args in (["count"], ["mcp"]):
        done = subprocess.run(
            [*_memsys(), *args], env=env, capture_output=True, text=True, timeout=60
        )
        assert done.returncode == 2, done.stderr
        assert done.stderr.startswith("error: MEMSYS_")
        assert "MEMSYS_BUSY_WAIT_S: Input should be greater than or equal to 0" in done.stderr
        assert "MEMSYS_HNSW_EF_SEARCH: Input should be a valid integer" in done.stderr
        assert len(done.stderr.splitlines()) == 1 and "lots" not in done.stderr
    assert list(tmp_path.iterdir()) == []


def test_cli_local_is_a_setting_that_must_parse(tmp_path: Path) -> None:
    """MEMSYS_CLI_LOCAL was read as "1" or nothing: `true` or `yes` was silently "no" (the
    call went to the server) instead of parsing or being refused like every setting."""
    env = {**_env(tmp_path), "MEMSYS_CLI_LOCAL": "sometimes"}
    done = subprocess.run(
        [*_memsys(), "count"], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith("error: MEMSYS_CLI_LOCAL: Input should be a valid boolean")
    assert "sometimes" not in done.stderr
    from memsys.config import Settings

    assert Settings(cli_local="true").cli_local and not Settings(cli_local="0").cli_local


def test_a_misspelt_setting_is_named_not_ignored_without_a_word(tmp_path: Path) -> None:
    env = {**_env(tmp_path), "MEMSYS_BUSY_WAIT": "30"}  # MEMSYS_BUSY_WAIT_S meant
    env["memsys_busy_wait_s"] = "5"  # read: settings' names are read in any case
    done = subprocess.run(
        [*_memsys(), "count"], env=env, capture_output=True, text=True, timeout=120
    )
    assert "MEMSYS_BUSY_WAIT is not a memsys setting and is ignored" in done.stderr
    assert "memsys_busy_wait_s" not in done.stderr


STDIN_COMMANDS = [["store", "--from-file", "-"], ["store-batch", "-"], ["import", "-"]]
STDIN_COMMANDS += [["graph", "import", "-"]]


def _bounded() -> None:
    """The child may not fill the disk or the memory, even when the check under test fails
    (it is then killed, and the test fails on its exit code)."""
    import resource

    resource.setrlimit(resource.RLIMIT_FSIZE, (50 << 20, 50 << 20))
    resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))


def _one_line(done: subprocess.CompletedProcess[bytes], wanted: str) -> None:
    error = done.stderr.decode(errors="replace")
    assert done.returncode == 2, error[-2_000:]
    assert error.startswith(f"error: Cannot read -: {wanted}"), error[-2_000:]
    assert len(error.strip().splitlines()) == 1


def test_stdin_that_is_a_device_or_no_text_is_one_line_not_read_forever(tmp_path: Path) -> None:
    """`memsys import - < /dev/zero` spooled zeros to the disk until it was full (10 GB in
    25 s), the other commands read them into memory (MemoryError); bytes that are not UTF-8
    were a UnicodeEncodeError traceback. The database is never reached."""
    for args in STDIN_COMMANDS:
        command = [*_memsys(), *args]
        with open("/dev/zero", "rb") as zero:
            done = subprocess.run(
                command,
                env=_env(tmp_path),
                stdin=zero,
                capture_output=True,
                timeout=60,
                preexec_fn=_bounded,
            )
        _one_line(done, "stdin is a device")
        with subprocess.Popen(["cat", "/dev/zero"], stdout=subprocess.PIPE) as endless:
            done = subprocess.run(
                command,
                env=_env(tmp_path),
                stdin=endless.stdout,
                capture_output=True,
                timeout=60,
                preexec_fn=_bounded,
            )
            endless.kill()
        _one_line(done, "stdin ")  # not UTF-8 text, or a NUL character in UTF-32
        done = subprocess.run(
            command,
            env=_env(tmp_path),
            input=b'{"content": "caf\xe9"}\n',
            capture_output=True,
            timeout=60,
            preexec_fn=_bounded,
        )
        _one_line(done, "invalid continuation byte (stdin is not utf-8 text)")
    assert not any(tmp_path.iterdir())


def test_every_option_and_argument_of_every_command_has_help() -> None:
    # `memsys <command> --help` is the CLI's manual: an option listed without a word of
    # help (`graph export -n` said nothing of which namespace) leaves the user guessing.
    import typer.main

    from memsys.cli.main import app

    def commands(command: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[str, Any]]:
        if hasattr(command, "commands"):
            for name, sub in command.commands.items():
                yield from commands(sub, (*path, name))
        else:
            yield " ".join(path), command

    every = [
        (name, param)
        for name, command in commands(typer.main.get_command(app))
        for param in command.params
    ]
    silent = [(name, p.opts[0]) for name, p in every if not getattr(p, "help", None)]
    assert silent == []

    # ... and says its default once: "(default 100) (default 100)" or "(default 300)
    # [default: 300.0]" read as two settings.
    def defaults(p: Any) -> int:
        shown = (
            getattr(p, "show_default", False)
            and p.default is not None
            and not getattr(p, "is_flag", False)
        )
        return len(re.findall(r"\(default\b", p.help)) + bool(shown)

    twice = [(name, p.opts[0]) for name, p in every if p.help and defaults(p) > 1]
    assert twice == []


def test_command_lists_show_each_summary_as_flowing_text() -> None:
    # `memsys --help` drew a docstring's line breaks as they were typed ("stage changes
    # (demote 7 d, archive" / "30 d, key only 90 d), ..."): the summary is one paragraph.
    from typer.testing import CliRunner

    from memsys.cli.main import app

    for group in ([], ["graph"], ["trace"], ["bench"]):
        shown = CliRunner().invoke(app, [*group, "--help"], env={"COLUMNS": "200"}).stdout
        # A row that continues the one above starts in the description column, and the
        # row above it then reaches the panel's right edge (wrapped, not broken early).
        lines = [line for line in shown.splitlines() if line.startswith("│ ")]
        for above, below in itertools.pairwise(lines):
            if below[1:].lstrip() and below[2] == " " and not below.strip("│ ").startswith("-"):
                assert len(above.rstrip("│ ").rstrip()) > 150, (group, above, below)
        assert len(lines) > 1, shown
