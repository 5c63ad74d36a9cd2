"""One error hierarchy; each front end maps it once (HTTP status, MCP envelope, CLI exit 2)."""


class MemsysError(Exception):
    """Base error: `message` tells the caller what went wrong and what to do next."""

    status_code = 400

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class InvalidInput(MemsysError):
    status_code = 422


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
    """An import (or a folder's indexing) writes alone in the namespace this call would
    write; the call waited MEMSYS_BUSY_WAIT_S for it, wrote nothing, and may be tried again
    when the import ends. Not run again by the runner: an import can take minutes."""


class DatabaseUnavailable(MemsysError):
    """The database cannot be reached or lacks what memsys needs (e.g. pgvector)."""

    status_code = 503
