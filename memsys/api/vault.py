"""The memory-as-code routes that stream or carry a file as their body (S004's memory
management endpoints); GET /v1/diff comes from the operation table like every other route.

- GET /v1/export streams the JSON document or JSON lines as the database pages through.
- POST /v1/import takes such a document as the request body (spooled to a temporary file:
  an import reads it twice, checking before writing).
- POST /v1/migrate upgrades the schema, or with dry_run returns the SQL it would run.
"""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import itertools
import logging
import re
import tempfile
from collections.abc import Generator
from contextvars import ContextVar
from pathlib import Path
from typing import Annotated, Any, Literal

import anyio
from fastapi import APIRouter, Query, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse, StreamingResponse
from pydantic import Field
from starlette.types import Receive, Scope, Send

from memsys import envelope, migrator, tenancy
from memsys.api.deps import JsonBodyRoute, declared_length, unread_body
from memsys.api.operations import strict
from memsys.config import get_settings
from memsys.db import session_scope
from memsys.errors import InvalidInput, NotFound, Protected
from memsys.schemas.common import Input, NamespaceFilter, Output
from memsys.schemas.vault import ImportOut
from memsys.services import namespaces
from memsys.vault import jsonforms, live, service

log = logging.getLogger(__name__)
router = APIRouter(tags=["vault"], route_class=JsonBodyRoute)
PIECE = 256 * 1024  # bytes per streamed piece
# How long one piece of a streamed export may wait for the client to take it (its socket
# full: a client connected but reading no more) before the response is cut off; until then
# the export's transaction and pooled connection stay held.
EXPORT_SEND_TIMEOUT_S = 60.0
MEDIA = {"json": "application/json", "jsonl": "application/x-ndjson"}


def _pieces(form: str, namespace: str | None) -> Generator[bytes, None, None]:
    with session_scope() as session:
        records = live.records(session, namespace)
        text = jsonforms.jsonl_text(records) if form == "jsonl" else jsonforms.json_text(records)
        buffer: list[str] = []
        size = 0
        for piece in text:
            buffer.append(piece)
            size += len(piece)
            if size >= PIECE:
                yield "".join(buffer).encode("utf-8")
                buffer, size = [], 0
        yield "".join(buffer).encode("utf-8")


class _ClosingStream(StreamingResponse):
    """A stream that ends its generator when the response ends, however it ends. Starlette
    stops reading a generator whose client hung up and leaves it paused in its `yield`:
    the export's transaction stayed open (idle in transaction, a pooled connection and a
    snapshot held) until the garbage collector happened to free the generator."""

    def __init__(self, pieces: Generator[bytes, None, None], **kwargs: Any) -> None:
        # The first piece now, in the route: the export's first statements (its snapshot,
        # the first page) fail before the answer begins, as an error with its status (503
        # for a database that cannot answer), not as a 200 whose body breaks off.
        first = next(pieces)
        super().__init__(itertools.chain((first,), pieces), **kwargs)
        self._pieces = pieces

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        async def bounded(message: Any) -> None:
            with anyio.fail_after(EXPORT_SEND_TIMEOUT_S):  # TimeoutError: the client stalled
                await send(message)

        closed = False
        try:
            await super().__call__(scope, receive, bounded)
        except TimeoutError:
            # Returning with the body unfinished: the server breaks the connection off, so
            # the client sees a cut transfer, never an export that reads as whole.
            _cut(scope, f"the client took nothing for {EXPORT_SEND_TIMEOUT_S:g} s")
        except anyio.get_cancelled_exc_class():
            # The server stopping past its grace. The generator is closed here, not below:
            # the event loop's own end cancels that wait too, and the export's transaction
            # was then left to the garbage collector, after the database had gone.
            _cut(scope, "the server is stopping")
            with contextlib.suppress(ValueError):  # running in a thread: it ends there
                self._pieces.close()
            closed = True
            raise
        finally:
            if not closed:
                with anyio.CancelScope(shield=True):  # also when the request was cancelled
                    await anyio.to_thread.run_sync(self._pieces.close)


# Set in a request's task when its export was cut off and said so: uvicorn's own report of
# that response (an ERROR, "returned without completing response", or with a traceback
# when the stop cancelled it) is not logged (QuietCuts).
_was_cut: ContextVar[bool] = ContextVar("memsys_export_cut", default=False)


def _cut(scope: Scope, why: str) -> None:
    log.warning("%s %s: %s; the export was cut off", scope.get("method"), scope.get("path"), why)
    _was_cut.set(True)


class QuietCuts(logging.Filter):
    """On uvicorn's error logger: drops its report of a response an export cut off itself
    (memsys logged that as a warning, without a traceback; it is not a server error): the
    response left incomplete, or the stop's cancellation. Any other error of that request
    (one while the export's transaction closed, say) is logged as ever."""

    def filter(self, record: logging.LogRecord) -> bool:
        if not _was_cut.get():
            return True
        error = record.exc_info[1] if record.exc_info else None
        if error is None:
            return not record.getMessage().startswith(_INCOMPLETE)
        return not _cancelled(error)


_INCOMPLETE = "ASGI callable returned without completing response"


def _cancelled(error: BaseException) -> bool:
    """Whether `error` is the stop's cancellation (alone, or all of an exception group)."""
    if isinstance(error, BaseExceptionGroup):
        return error.split(asyncio.CancelledError)[1] is None
    return isinstance(error, asyncio.CancelledError)


QUIET_CUTS = QuietCuts()


@router.get(
    "/export", responses={200: {"content": {MEDIA["jsonl"]: {"schema": {"type": "string"}}}}}
)
def export(
    format: Annotated[
        Literal["json", "jsonl"], Query(description="json (one document) or jsonl (JSON lines)")
    ] = "json",
    namespace: Annotated[NamespaceFilter, Query()] = None,
) -> StreamingResponse:
    """Export memories, edges and preferences as they are now, streamed page by page (MCP:
    memory_export writes a file or a vault folder instead)."""
    with session_scope() as session:
        namespaces.require(session, namespace)
    suffix = "jsonl" if format == "jsonl" else "json"
    return _ClosingStream(
        _pieces(format, namespace),
        media_type=MEDIA[format],
        headers={"Content-Disposition": f'attachment; filename="memsys-export.{suffix}"'},
    )


IMPORT_BODY = {
    "required": True,
    "description": "A memsys export: the JSON document, or JSON lines",
    "content": {
        "application/json": {"schema": {"type": "object"}},
        MEDIA["jsonl"]: {"schema": {"type": "string"}},
    },
}


@router.post(
    "/import",
    summary="Import",  # not the function's name, import_, which reads "Import " on /docs
    response_model=ImportOut,
    responses={
        413: {"description": "A body over MEMSYS_MAX_IMPORT_BYTES"},
        422: {"description": "Problems"},
    },
    openapi_extra={"requestBody": IMPORT_BODY},
)
async def import_(
    request: Request,
    dry_run: Annotated[
        bool, Query(description="Check and count what would change; write nothing")
    ] = False,
    partial: Annotated[
        bool, Query(description="Import the valid records even when others have problems")
    ] = False,
    restore: Annotated[
        bool,
        Query(
            description="Drop the vector index first and build it once after the writes; "
            "every other call on memories waits until the import commits (admin only)"
        ),
    ] = False,
) -> Any:
    """Import a memsys export sent as the body (the JSON document or JSON lines). Every
    record is checked first; with problems nothing is written (422, each problem with its
    line) unless partial=true (MCP: memory_import, dry run by default)."""
    limit = get_settings().max_import_bytes
    if declared_length(request) > limit:  # refused before a byte of it is read
        return unread_body(413, _too_large(limit))
    with tempfile.TemporaryDirectory(prefix="memsys-import-") as folder:
        spool = Path(folder) / "body.json"
        text = codecs.getincrementaldecoder("utf-8")()
        size = 0
        try:
            with spool.open("wb") as out:
                async for chunk in request.stream():
                    size += len(chunk)
                    if size > limit:  # a body without a Content-Length, or a false one
                        return unread_body(413, _too_large(limit))
                    _no_nul(text.decode(chunk))
                    out.write(chunk)
            _no_nul(text.decode(b"", final=True))
        except UnicodeDecodeError:
            return unread_body(400, "The body is not UTF-8 text")
        except InvalidInput as exc:
            return unread_body(422, exc.message)
        result = await run_in_threadpool(_import, spool, dry_run, partial, restore)
    if result.problem_count and not partial:
        body = envelope.failure(service.refusal(result))
        return JSONResponse({**body, "data": result.model_dump(mode="json")}, status_code=422)
    return result


def _too_large(limit: int) -> str:
    return (
        f"The body is over the {limit}-byte limit of an import (MEMSYS_MAX_IMPORT_BYTES): "
        "nothing was imported. Import the snapshot in parts (by namespace), or raise the limit"
    )


def _no_nul(text: str) -> None:
    """No JSON text holds a NUL character: a body of them (/dev/zero sent as a file) is
    refused as it arrives, not spooled to the disk for as long as the client sends."""
    if "\0" in text:
        raise InvalidInput("The body holds a NUL character: it is no memsys export")


def _import(spool: Path, dry_run: bool, partial: bool, restore: bool) -> ImportOut:
    with session_scope() as session:  # the client never saw the temporary file's name
        return service.import_spooled(session, spool, "body", dry_run, partial, restore)


REVISION = r"^(head|[0-9a-f]{12})$"


class MigrateIn(Input):
    revision: Annotated[
        str,
        Field(
            description="Target revision: 'head' (the newest) or a revision id",
            json_schema_extra={"pattern": REVISION},
        ),
    ] = "head"
    dry_run: Annotated[bool, Field(description="Return the SQL instead of running it")] = False


class MigrateOut(Output):
    from_revision: str | None
    to_revision: str | None
    dry_run: bool
    sql: str | None = Field(description="The SQL an upgrade would run (dry run only)")


@router.post("/migrate", response_model=MigrateOut)
def migrate(params: Annotated[MigrateIn, strict(MigrateIn)]) -> MigrateOut:
    """Upgrade the database schema through Alembic; dry_run returns the SQL (Alembic's
    offline mode) and changes nothing. An unknown revision is 404. The schema is every
    namespace's: the admin token (or the local user) only."""
    if not tenancy.current().admin:
        raise Protected("Not allowed: migrating the schema needs the admin token")
    if not re.match(REVISION, params.revision):
        raise InvalidInput(f"Invalid revision {params.revision!r}: 'head' or a revision id")
    versions = migrator.migrations_dir() / "versions"
    if params.revision != "head" and not any(versions.glob(f"*_{params.revision}_*.py")):
        raise NotFound(f"No such revision: {params.revision}")
    return MigrateOut.model_validate(service.migrate(params.revision, params.dry_run))
