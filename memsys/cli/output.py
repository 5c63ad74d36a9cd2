"""Shared helpers for every command: options, JSON or human output, tables, progress bars."""

from __future__ import annotations

import codecs
import json
import os
import re
import stat
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer
from rich.console import Console
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

from memsys import jsonvalue, regular_files
from memsys.errors import InvalidInput

if TYPE_CHECKING:
    from pydantic import BaseModel

M = TypeVar("M", bound="BaseModel")

# Options shared by several commands. Defaults stay None so that the schemas' own defaults
# apply: the CLI sends only what the user gave.
Json = Annotated[bool, typer.Option("--json", help="Print the result as JSON on stdout.")]
Namespace = Annotated[
    str | None,
    typer.Option("--namespace", "-n", help="Only this namespace (default: every namespace)."),
]


def path_given(value: str | None) -> str | None:
    """A typer callback for a path argument or option: blank text is refused, one line,
    exit 2. Taken as a path it is ".", the working folder: `memsys import ""` read the
    folder as a vault (its error lost every "."), `export " "` made a folder named " ",
    `diff "$SNAP"` with SNAP unset compared the working folder."""
    if value is not None and not value.strip():
        raise typer.BadParameter("a path cannot be empty or blank")
    return value


def given(**fields: Any) -> dict[str, Any]:
    """The fields the user set (None means 'not given': the schema default applies)."""
    return {k: v for k, v in fields.items() if v is not None}


def parse_json(text: str, option: str) -> Any:
    """Parse an option's JSON value or fail with a one-line reason."""
    try:
        return jsonvalue.loads(text)
    except json.JSONDecodeError as exc:
        raise InvalidInput(
            f"{option} is not valid JSON: {exc.msg} (at character {exc.pos})"
        ) from None
    except jsonvalue.KeyTwice as exc:  # json would keep the last without a word
        raise InvalidInput(f"{option} is not valid JSON: {exc}; give it once") from None


def value_of(text: str) -> Any:
    """A value given as text: JSON when it parses (42, true, {"a": 1}), else the text itself;
    JSON that gives a key twice is refused (json would keep the last without a word)."""
    try:
        return jsonvalue.loads(text)
    except json.JSONDecodeError:
        return text
    except jsonvalue.KeyTwice as exc:
        raise InvalidInput(f"The value is JSON that is not valid: {exc}; give it once") from None


STDIN_PIECE = 1 << 16


def stdin_bytes(encodings: tuple[str, ...] = ("utf-8",)) -> Iterator[bytes]:
    """stdin's bytes, piece by piece, each checked as text as it comes. A device
    (`< /dev/zero`) is refused before a byte is read, as a device named as a file is; a
    stream that is not text in the encoding its first bytes show (JSON's rule, one of
    `encodings`) or that holds a NUL character (no JSON text does) is refused where that
    shows. Read whole, /dev/zero filled the memory (MemoryError) and, spooled by `import -`,
    the disk (10 GB in 25 s); bytes that are not UTF-8 were a UnicodeEncodeError traceback.
    A terminal is welcome (the user types the input)."""
    try:
        device = stat.S_ISCHR(os.fstat(sys.stdin.fileno()).st_mode) and not sys.stdin.isatty()
    except (OSError, ValueError):  # no descriptor (a test runner's stdin): no device either
        device = False
    if device:
        raise InvalidInput("Cannot read -: stdin is a device, not a file or a pipe")
    decoder: codecs.IncrementalDecoder | None = None
    head = b""  # the first bytes, until there are enough to show the encoding
    try:
        while piece := sys.stdin.buffer.read(STDIN_PIECE):
            if decoder is None:
                head += piece
                if len(head) < 4:
                    continue
                decoder, piece, head = _decoder(head, encodings), head, b""
            _text(decoder.decode(piece))
            yield piece
        if decoder is None and head:  # fewer than 4 bytes in all
            decoder = _decoder(head, encodings)
            _text(decoder.decode(head))
            yield head
        if decoder is not None:
            _text(decoder.decode(b"", final=True))
    except UnicodeDecodeError as exc:
        raise InvalidInput(
            f"Cannot read -: {exc.reason} (stdin is not {exc.encoding} text)"
        ) from None


def _decoder(head: bytes, encodings: tuple[str, ...]) -> codecs.IncrementalDecoder:
    encoding = json.detect_encoding(head)
    if encoding.removesuffix("-sig") not in encodings:
        raise InvalidInput(f"Cannot read -: stdin is not {' or '.join(encodings)} text")
    return codecs.getincrementaldecoder(encoding)()


def _text(text: str) -> None:
    if "\0" in text:
        raise InvalidInput("Cannot read -: stdin holds a NUL character (a binary file?)")


def read_input(path: str) -> str:
    """The text of a regular file (- is stdin), or a one-line error naming it; a pipe or
    device is refused, never read (memsys.regular_files)."""
    if path == "-":
        return b"".join(stdin_bytes()).decode("utf-8")
    try:
        return regular_files.read_bytes(Path(path).expanduser(), path).decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InvalidInput(f"Cannot read {path}: {exc}") from None


def json_lines(path: str) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, object) of a JSON-lines file (- is stdin); blank lines are skipped, and
    a line that is not a JSON object is an error naming it."""
    from memsys.schemas.graph_jsonl import objects

    return objects(read_input(path))


PIPE_WIDTH = 120


def console() -> Console:
    """A console on the current stdout (created per call so test runners can swap stdout)."""
    piped = not sys.stdout.isatty() and "COLUMNS" not in os.environ
    return Console(highlight=False, width=PIPE_WIDTH if piped else None)


def err_console() -> Console:
    return Console(stderr=True, highlight=False)


# Terminal controls (C0 but tab and newline, DEL, C1): stored text holds what a writer put
# there, and ESC [ … or ESC ] … printed raw would recolour, hide or retitle the user's
# terminal (OSC 52 even writes the clipboard). Human output shows them as \xNN; --json
# escapes them anyway.
_CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def inert(text: str) -> str:
    """The text with every terminal control shown as \\xNN instead of acted on."""
    return _CONTROLS.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


_UNESCAPED = re.compile(r"[\x7f-\x9f]")  # what json.dumps(ensure_ascii=False) leaves raw


def json_dumps(data: Any, indent: int | None = 2) -> str:
    """JSON as the CLI prints it: non-ASCII text as itself, but DEL and the C1 controls
    escaped like the C0 ones (json escapes only those): a stored ESC-less CSI (U+009B)
    printed raw is a terminal control too. Only strings can hold them: the JSON is the
    same value."""
    text = json.dumps(data, indent=indent, ensure_ascii=False)
    return _UNESCAPED.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def warn(message: str) -> None:
    """`warning: <message>` as one line on stderr, as errors go there: stdout keeps the
    command's own output (a script reading it, `> file`)."""
    typer.echo(f"warning: {inert(' '.join(message.split()))}", err=True)


def echo(line: str) -> None:
    """Print plain text without rich markup (user content may contain brackets)."""
    console().print(inert(line), markup=False, highlight=False, soft_wrap=True)


def emit(result: M | dict[str, Any], as_json: bool, human: Callable[[M], None] | None) -> None:
    """Print the result: its JSON dump with --json, else the command's human rendering."""
    if as_json or human is None:
        data = result if isinstance(result, dict) else result.model_dump(mode="json")
        sys.stdout.write(json_dumps(data) + "\n")
        sys.stdout.flush()
    else:
        assert not isinstance(result, dict)
        human(result)


def table(columns: list[str], rows: list[list[Any]]) -> Table:
    """A plain table of short values (cells are text, never rich markup)."""
    grid = Table(show_edge=False, header_style="bold", pad_edge=False)
    for name in columns:
        grid.add_column(name, overflow="fold")
    for row in rows:
        grid.add_row(*(Text("" if v is None else inert(str(v))) for v in row))
    return grid


def show_table(columns: list[str], rows: list[list[Any]]) -> None:
    console().print(table(columns, rows))


def show_records(records: list[tuple[str, str]]) -> None:
    """Content-heavy results: a bold header line per record, its text indented below."""
    out = console()
    for header, body in records:
        out.print(Text(inert(header), style="bold"), soft_wrap=True)
        out.print(Padding(Text(inert(body)), (0, 0, 0, 2), expand=False))


def short(text: str, limit: int = 200) -> str:
    """One line of at most `limit` characters."""
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


def excerpt(text: str, max_lines: int = 12, limit: int = 800) -> str:
    """The start of a text with its line breaks (code stays readable), marked when cut."""
    lines = text.strip("\n").splitlines()
    cut = "\n".join(lines[:max_lines])
    if len(cut) > limit:
        cut = cut[: limit - 1]
    return cut + ("…" if cut != text.strip("\n") else "")


def plural(n: int, word: str) -> str:
    """`n word` or `n words` (memory → memories, entry → entries)."""
    if n == 1:
        return f"{n} {word}"
    if word.endswith("y") and word[-2:-1] not in "aeiou":
        return f"{n} {word[:-1]}ies"
    return f"{n} {word}s"


def score(value: float | None) -> str:
    return "" if value is None else f"{value:.3f}"


def progress_wanted(as_json: bool) -> bool:
    """Progress bars only for a person watching: not with --json, not when stderr is piped."""
    return not as_json and sys.stderr.isatty()


Report = Callable[[str, int, int], None]

PHASES = {"read": "Reading files", "embed": "Embedding chunks", "store": "Storing memories"}


@contextmanager
def progress_bar(enabled: bool, out: Console | None = None) -> Iterator[Report | None]:
    """Yield a `progress(phase, done, total)` callback drawing one bar per phase on stderr."""
    if not enabled:
        yield None
        return
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        ProgressColumn,
        SpinnerColumn,
        Task,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    class Rate(ProgressColumn):
        """Items per second (files, chunks), once there is a rate to show."""

        def render(self, task: Task) -> Text:
            speed = task.finished_speed or task.speed
            return Text("" if speed is None else f"{speed:,.1f}/s", style="progress.data.speed")

    bars = Progress(
        SpinnerColumn(),
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        Rate(),
        TimeElapsedColumn(),
        TextColumn("eta"),
        TimeRemainingColumn(),
        console=out or err_console(),
        transient=False,
    )
    tasks: dict[str, Any] = {}

    def report(phase: str, done: int, total: int) -> None:
        if phase not in tasks:
            tasks[phase] = bars.add_task(PHASES.get(phase, phase), total=total)
        bars.update(tasks[phase], completed=done, total=total)

    with bars:
        yield report
