"""`memsys eval`: run the chosen suites on the live database, one read transaction each."""

from __future__ import annotations

from collections.abc import Callable

from sqlalchemy.orm import Session

from memsys.db import session_scope
from memsys.errors import InvalidInput
from memsys.services import namespaces
from memsys.vault.evals import freshness, leakage, precision, redteam, staleness
from memsys.vault.evals.base import Context, Figure, SuiteResult

SUITES: dict[str, Callable[[Session, Context], list[Figure]]] = {
    "freshness": freshness.run,
    "leakage": leakage.run,
    "precision_recall": precision.run,
    "staleness": staleness.run,
    "red_team": redteam.run,
}


def run(
    names: list[str], namespace: str | None = None, locomo: str | None = None
) -> list[SuiteResult]:
    unknown = [n for n in names if n not in SUITES]
    if unknown:
        raise InvalidInput(f"Unknown suite(s): {', '.join(unknown)}; use {', '.join(SUITES)}")
    if namespace is not None:  # a misspelt one would pass every suite on no data
        with session_scope() as session:
            namespaces.require(session, namespace)
    ctx = Context(namespace=namespace, locomo=locomo)
    results = []
    for name in names:
        with session_scope() as session:
            results.append(SuiteResult(name, SUITES[name](session, ctx)))
            session.rollback()  # a suite reads; anything it touched is not kept
    return results
