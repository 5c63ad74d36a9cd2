"""Health: the one REST route that is not an operation (it answers 503 with its own body)."""

import logging

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError

from memsys import migrator, tenancy
from memsys.db import session_scope
from memsys.dberrors import connection_lost
from memsys.embeddings import model_state
from memsys.errors import DatabaseUnavailable, MemsysError

log = logging.getLogger(__name__)
router = APIRouter(tags=["system"])


@router.get("/health")
def health(request: Request) -> JSONResponse:
    """200 when the database answers, its schema is the newest and the embedding model is
    loaded; 503 otherwise (status "starting" while the model loads)."""
    try:
        with session_scope() as session:
            session.execute(text("SELECT 1"))
        current, head = migrator.current(), migrator.head()
    except MemsysError as exc:
        return _unavailable(request, exc)
    except DBAPIError as exc:  # lost between the two checks: say so rather than crash
        lost = connection_lost(exc)
        return _unavailable(
            request, lost or DatabaseUnavailable(str(exc.orig).strip().splitlines()[0])
        )
    model = model_state()
    if current != head:
        status = "outdated"
    elif model in ("not loaded", "loading"):
        status = "starting"
    elif model != "ready":
        status = "unavailable"
    else:
        status = "ok"
    body = {"status": status, "schema": current, "head": head, "model": model}
    return JSONResponse(body, status_code=200 if status == "ok" else 503)


def _unavailable(request: Request, exc: MemsysError) -> JSONResponse:
    message = tenancy.shown(exc, request.scope.get(tenancy.ASGI_KEY))
    return JSONResponse({"status": "unavailable", "error": message}, status_code=503)
