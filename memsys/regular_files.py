"""Reading and writing files a user names, never blocking on what is not a regular file.

A FIFO with no writer blocks a read's open forever (with no reader, a write's), a device such
as /dev/zero never ends, and opening some devices has effects of its own. So a path is
checked with stat() before it is opened, opened without blocking, and checked again on the
open descriptor (the path may have changed in between); then the descriptor blocks as usual.
A pipe is still welcome where the command says `-` (stdin or stdout).
"""

from __future__ import annotations

import os
import secrets
import stat
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import TextIO

from memsys.errors import InvalidInput

HINT = "(a directory, pipe or device; use - for stdin or stdout)"
NOT_REGULAR = "not a regular file (a directory, pipe or device)"  # a problem inside a vault


def _refuse(shown: str, hint: str = HINT) -> InvalidInput:
    return InvalidInput(f"Not a regular file: {shown} {hint}")


def read_bytes(path: Path, shown: str | None = None, limit: int = -1, hint: str = HINT) -> bytes:
    """The bytes of a regular file (the first `limit` of them, if given); InvalidInput for
    anything else, `hint` saying what to do instead (OSError propagates)."""
    shown = shown or str(path)
    fd = os.open(regular_or_missing(path, shown, hint), os.O_RDONLY | os.O_NONBLOCK)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise _refuse(shown, hint)
        os.set_blocking(fd, True)
        with os.fdopen(fd, "rb", closefd=False) as file:
            return file.read(limit)
    finally:
        os.close(fd)


def regular_or_missing(path: Path, shown: str | None = None, hint: str = HINT) -> Path:
    """`path`, when it is missing (to be written) or a regular file; InvalidInput when it is
    a directory, pipe or device — checked by stat, before anything opens it."""
    if path.exists() and not path.is_file():
        raise _refuse(shown or str(path), hint)
    return path


@contextmanager
def replaced(path: Path, shown: str | None = None) -> Iterator[TextIO]:
    """Write the text of a file a user names: into a new file beside it, which takes its
    name only when the block ends without an error. A failed write (bad input found halfway,
    a full disk) leaves what was there untouched, and an output that is also the input is
    read whole before it is replaced. A path that cannot hold a file (under a file, a link
    loop, a name too long) is InvalidInput, one line."""
    shown = shown or str(path)
    try:
        if path.is_symlink():  # a link loop: ELOOP (the loop would be replaced by a file);
            with suppress(FileNotFoundError):  # a link to a file yet to be is written through
                os.stat(path)
        # A link is written through (its target is replaced, not the link itself).
        target = regular_or_missing(Path(os.path.realpath(path)), shown)
        target.parent.mkdir(parents=True, exist_ok=True)
        temporary = target.parent / f".{target.name[:40]}.{secrets.token_hex(6)}.tmp"
        # Created as open() creates a file: the umask decides who may read a new export.
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    except OSError as exc:
        raise InvalidInput(f"Cannot write {shown}: {exc.strerror or exc}") from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as out:
            yield out  # what the caller raises here (bad input found halfway) stays its own
        try:
            if target.exists():  # an existing file keeps its mode
                os.chmod(temporary, stat.S_IMODE(target.stat().st_mode))
            os.replace(temporary, target)
        except OSError as exc:  # a target gone strange meanwhile
            raise InvalidInput(f"Cannot write {shown}: {exc.strerror or exc}") from None
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
