"""Run the `memsys` app in process, as a user would type it."""

from __future__ import annotations

import json
import signal
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from typer.testing import CliRunner, Result

from memsys.cli.main import app

_runner = CliRunner()


class Hung(Exception):
    """A command did not return within its deadline."""


@contextmanager
def deadline(seconds: int) -> Iterator[None]:
    """Fail, not hang: a command still blocked after `seconds` (an open() on a FIFO) is
    interrupted with Hung, which the command's run reports as its error."""

    def expired(signum: int, frame: object) -> None:
        raise Hung(f"still running after {seconds} s")

    previous = signal.signal(signal.SIGALRM, expired)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def run(*args: str) -> Result:
    return _runner.invoke(app, list(args))


def run_json(*args: str) -> Any:
    """Run with --json; the command must succeed and print one JSON document on stdout."""
    result = run(*args, "--json")
    assert result.exit_code == 0, (result.exit_code, result.stdout, result.stderr, result.exception)
    return json.loads(result.stdout)


def fails(*args: str, code: int = 2) -> str:
    """Run a command that must fail; return its one error line (no traceback)."""
    result = run(*args)
    assert result.exit_code == code, (result.exit_code, result.stdout, result.stderr)
    assert "Traceback" not in result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    return lines[0]
