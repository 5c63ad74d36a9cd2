"""Reading and writing files a user names, never blocking on what is not a regular file.

A FIFO with no writer blocks a read's open forever (with no reader, a write's), a device such
as /dev/zero never ends, and opening some devices has effects of its own. So a path is
checked with stat() before it is opened, opened without blocking, and checked again on the
open descriptor (the path may have changed in between); then the descriptor blocks as usual.
A pipe is still welcome where the command says `-` (stdin or stdout).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from memsys.errors import InvalidInput

HINT = "(a directory, pipe or device; use - for stdin or stdout)"
NOT_REGULAR = "not a regular file (a directory, pipe or device)"  # a problem inside a vault


def _refuse(shown: str) -> InvalidInput:
    return InvalidInput(f"Not a regular file: {shown} {HINT}")


def read_bytes(path: Path, shown: str | None = None) -> bytes:
    """The bytes of a regular file; InvalidInput for anything else (OSError propagates)."""
    shown = shown or str(path)
    fd = os.open(regular_or_missing(path, shown), os.O_RDONLY | os.O_NONBLOCK)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise _refuse(shown)
        os.set_blocking(fd, True)
        with os.fdopen(fd, "rb", closefd=False) as file:
            return file.read()
    finally:
        os.close(fd)


def regular_or_missing(path: Path, shown: str | None = None) -> Path:
    """`path`, when it is missing (to be written) or a regular file; InvalidInput when it is
    a directory, pipe or device — checked by stat, before anything opens it."""
    if path.exists() and not path.is_file():
        raise _refuse(shown or str(path))
    return path
