"""One error hierarchy; each front end maps it once (HTTP status, MCP envelope, CLI exit 2)."""

import errno


class MemsysError(Exception):
    """Base error: `message` tells the caller what went wrong and what to do next."""

    status_code = 400

    def __init__(self, message: str) -> None:
        message = bounded(message)
        super().__init__(message)
        self.message = message


class InvalidInput(MemsysError):
    status_code = 422


# How a path outside MEMSYS_INDEX_ROOTS is refused (the CLI reads such a file itself).
OUTSIDE_ROOTS = "is outside the folders memsys may index"
# How a destructive call without its confirmation is refused (the CLI names its flag).
SET_CONFIRM = "Set confirm=True"


class BadSetting(InvalidInput):
    """A MEMSYS_ environment variable memsys cannot read (CLI exit 2, before any work)."""


class NotFound(MemsysError):
    status_code = 404


class Conflict(MemsysError):
    status_code = 409


class Protected(MemsysError):
    status_code = 403


class TimedOut(MemsysError):
    """A statement or a lock wait passed its limit (MEMSYS_STATEMENT_TIMEOUT_S,
    MEMSYS_LOCK_TIMEOUT_S); the transaction was rolled back."""

    status_code = 503


class Contended(TimedOut):
    """PostgreSQL rolled this call's transaction back to let another one through (a deadlock
    it broke, a serialization failure); running it again is safe. The runner does so a few
    times before a caller sees it."""


class Busy(TimedOut):
    """An import (or a folder's indexing, or a purge) writes alone in the namespace this
    call would write; the call waited MEMSYS_BUSY_WAIT_S for it, wrote nothing, and may be
    tried again when the import ends. Not run again by the runner: an import can take minutes."""


class Cancelled(MemsysError):
    """The call was cancelled (its MCP client cancelled it, or went away) before its
    transaction committed: rolled back, nothing of it written. Nobody waits for this answer."""

    status_code = 409


class DatabaseUnavailable(MemsysError):
    """The database cannot be reached or lacks what memsys needs (e.g. pgvector)."""

    status_code = 503


class SystemRefused(MemsysError):
    """The machine refused what the call needed (a full disk, too many open files)."""

    status_code = 503


# What an OSError says about the path a caller gave: bad input. Anything else is the system's.
_PATH_ERRNOS = frozenset(
    {
        errno.ENAMETOOLONG,
        errno.ELOOP,
        errno.ENOENT,
        errno.ENOTDIR,
        errno.EISDIR,
        errno.EACCES,
        errno.EPERM,
        errno.EINVAL,
        errno.ENXIO,
        errno.EROFS,
        errno.EEXIST,
    }
)


def from_os_error(exc: OSError) -> MemsysError:
    """An OSError a service let through, as one line, never a traceback: about a path (a
    name too long for the file system, a link loop), the reason and the path; else the
    machine's reason alone (a full disk), the path left to the server's log."""
    reason = exc.strerror or str(exc) or type(exc).__name__
    if exc.errno in _PATH_ERRNOS:
        name = "" if exc.filename is None else f": {shortened(str(exc.filename))}"
        return InvalidInput(f"{reason}{name}")
    return SystemRefused(f"{reason} (the system refused this call)")


def shortened(value: str, limit: int = 200) -> str:
    """A value echoed in a message, cut to `limit` characters (inputs can be megabytes)."""
    return value if len(value) <= limit else f"{value[:limit]}… ({len(value):,} characters)"


MESSAGE_LIMIT = 2_000  # characters of an error message; the rest of a huge echo is cut
CLAUSE_LIMIT = 10  # problems listed in one message (of a list of 20,000 bad items, say)


def encodable(text: str) -> str:
    """`text` as UTF-8 can carry it: a lone surrogate (how Python reads a byte of a file
    name that is not UTF-8) written as its escape, \\udcff, where a JSON answer holding it
    failed to encode (HTTP 500)."""
    return text if text.isascii() else text.encode("utf-8", "backslashreplace").decode()


def bounded(message: str) -> str:
    """`message` whole when short; else its start and its end (the hint of what to do
    instead) around a note of what was cut: an echoed input can be megabytes."""
    message = encodable(message)
    if len(message) <= MESSAGE_LIMIT:
        return message
    cut = len(message) - 1_500 - 300
    return f"{message[:1_500]} … ({cut:,} characters cut) … {message[-300:]}"


def clauses(parts: list[str]) -> str:
    """Problems joined by "; ", the first CLAUSE_LIMIT of them and how many more there are."""
    shown = "; ".join(parts[:CLAUSE_LIMIT])
    more = len(parts) - CLAUSE_LIMIT
    return f"{shown}; … and {more:,} more" if more > 0 else shown
