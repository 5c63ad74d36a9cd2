"""What every front end does with a call: validate the input, run the service in one
transaction, hand back the output schema. Errors propagate as MemsysError."""

from collections.abc import Callable
from typing import Any, TypeVar

from pydantic import BaseModel
from sqlalchemy.orm import Session

from memsys.db import session_scope
from memsys.schemas import parse

In = TypeVar("In", bound=BaseModel)
Out = TypeVar("Out")


def execute(service: Callable[[Session, In], Out], model: type[In], data: dict[str, Any]) -> Out:
    return run(service, parse(model, data))


def run(service: Callable[[Session, In], Out], params: In) -> Out:
    """Run a service on input that is already validated."""
    with session_scope() as session:
        return service(session, params)


def execute_bare(service: Callable[[Session], Out]) -> Out:
    """A service that takes no input (stats, namespace list)."""
    with session_scope() as session:
        return service(session)
