"""Health and namespaces."""

from fastapi import APIRouter
from fastapi.responses import JSONResponse
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError

from memsys import runner, schema
from memsys.db import connection_lost, session_scope
from memsys.errors import MemsysError
from memsys.schemas import NamespaceListOut
from memsys.services import namespaces

router = APIRouter(tags=["system"])


@router.get("/health")
def health() -> JSONResponse:
    """Checks the database answers and its schema is the newest; 503 otherwise."""
    try:
        with session_scope() as session:
            session.execute(text("SELECT 1"))
        current, head = schema.current(), schema.head()
    except MemsysError as exc:
        return JSONResponse({"status": "unavailable", "error": exc.message}, status_code=503)
    except DBAPIError as exc:  # lost between the two checks: say so rather than crash
        lost = connection_lost(exc)
        message = lost.message if lost else str(exc.orig).strip().splitlines()[0]
        return JSONResponse({"status": "unavailable", "error": message}, status_code=503)
    body = {"status": "ok" if current == head else "outdated", "schema": current, "head": head}
    return JSONResponse(body, status_code=200 if current == head else 503)


@router.get("/namespaces", response_model=NamespaceListOut)
def list_namespaces() -> NamespaceListOut:
    """Every namespace with its counts (MCP: memory_list_namespaces)."""
    return runner.execute_bare(namespaces.list_with_counts)
