"""The probabilistic channel (FEATURES D9): P(X | Y) estimated from what memory holds.

The query names X and Y ("P(deploy fails | friday)", "probability of a rollback given a
schema change", "how likely is X when Y"). The estimate counts live chunks:
- n_y: chunks that match Y (PostgreSQL full text, every word of Y);
- n_xy: those that also match X;
- when X is nothing but an outcome ("success", "it works", "failure"), the recorded TRY/LEARN
  outcomes of the memories matching Y instead (validation_event: succeeded / failed).
With the stated prior Beta(PRIOR_ALPHA, PRIOR_BETA) (uniform) the posterior mean is
(hits + α) / (trials + α + β). The answer carries every count. A Y that matches nothing is
"unknown" with zero counts — never a made-up 0.5 —, and so is an X or Y of nothing but
words full text does not index ("the", "it is"): such words match no chunk, so any count
would be made up.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import text
from sqlalchemy.orm import Session

from memsys.retrieval import filters as sql_filters

PRIOR_ALPHA = 1.0
PRIOR_BETA = 1.0
_END = r"\s*[?.!]*\s*$"
_FORMS = (
    re.compile(r"\bp\(\s*(?P<x>[^|()]+?)\s*\|\s*(?P<y>[^|()]+?)\s*\)"),
    re.compile(rf"probability (?:of|that) (?P<x>.+?) (?:given|when|if|after) (?P<y>.+?){_END}"),
    re.compile(
        r"(?:how likely|likelihood|chances?|odds) (?:is |are |of |that |for )*(?P<x>.+?) "
        rf"(?:given|when|if|after) (?P<y>.+?){_END}"
    ),
)
SUCCESS = {"success", "succeed", "succeeds", "successful", "works", "work", "pass", "passes"}
FAILURE = {"fail", "fails", "failure", "failed", "break", "breaks"}
FILLER = {"a", "an", "the", "it", "they", "of"}

# How many searchable words X and Y hold (0: none full text indexes), read with the counts:
# one statement for an estimate.
_TERMS = """numnode(plainto_tsquery('english', :x)) AS x_terms,
       numnode(plainto_tsquery('english', :y)) AS y_terms"""
_COUNTS = f"""
SELECT count(*) AS n_y,
       count(*) FILTER (WHERE c.tsv @@ plainto_tsquery('english', :x)) AS n_xy,
       {_TERMS}
FROM chunk c
WHERE {{where}} AND c.tsv @@ plainto_tsquery('english', :y)
"""
_OUTCOMES = f"""
SELECT count(DISTINCT c.id) AS n_y,
       count(v.id) FILTER (WHERE v.event_type = 'succeeded') AS succeeded,
       count(v.id) FILTER (WHERE v.event_type = 'failed') AS failed,
       {_TERMS}
FROM chunk c
LEFT JOIN validation_event v ON v.namespace = c.namespace AND v.memory_id = c.id {{recorded}}
WHERE {{where}} AND c.doc_type = 'memory' AND c.tsv @@ plainto_tsquery('english', :y)
"""


@dataclass
class Estimate:
    x: str
    y: str
    method: str  # co-occurrence | outcomes
    given: int  # chunks matching Y
    hits: int  # of the trials, those where X holds
    trials: int
    probability: float | None
    known: bool
    unsearchable: str | None = None  # X or Y when it holds no indexed word

    @property
    def answer(self) -> str:
        if self.unsearchable is not None:
            return (
                f"P({self.x} | {self.y}) unknown: "
                f"{self.unsearchable!r} has no word memory is searched by"
            )
        if not self.known:
            return f"P({self.x} | {self.y}) unknown: nothing in memory matches {self.y!r}"
        return (
            f"P({self.x} | {self.y}) ≈ {self.probability:.2f} ({self.method}: {self.hits} of "
            f"{self.trials}, {self.given} chunks match {self.y!r}; "
            f"prior Beta({PRIOR_ALPHA:g}, {PRIOR_BETA:g}))"
        )

    def as_dict(self) -> dict[str, Any]:
        return {
            "x": self.x,
            "y": self.y,
            "method": self.method,
            "given": self.given,
            "hits": self.hits,
            "trials": self.trials,
            "prior": {"alpha": PRIOR_ALPHA, "beta": PRIOR_BETA},
            "probability": self.probability,
            "known": self.known,
        }


def parse(query: str) -> tuple[str, str] | None:
    """(X, Y) of a probabilistic question, or None when the query does not name both."""
    lowered = " ".join(query.lower().split())
    for form in _FORMS:
        m = form.search(lowered)
        if m:
            x, y = m.group("x").strip(), m.group("y").strip()
            return (x, y) if x and y else None  # "P( | )" names neither, as "P(|)"
    return None


def estimate(
    session: Session, x: str, y: str, filters: dict[str, Any], as_of: datetime | None
) -> Estimate:
    """P(x | y) from the live chunks under `filters` (as of `as_of`), Beta prior stated."""
    where = sql_filters.where(filters, as_of)
    params = {**sql_filters.binds(filters, as_of), "x": x, "y": y}
    words = set(re.findall(r"[a-z]+", x)) - FILLER
    outcome = words & (SUCCESS | FAILURE)
    if outcome and outcome == words:
        # As of a time, the outcomes recorded by then (a replay counts what the call saw).
        recorded = "" if as_of is None else "AND v.created_at <= :as_of"
        statement = text(_OUTCOMES.format(where=where, recorded=recorded))
        row = session.execute(statement, params).one()
        good = bool(outcome & SUCCESS)
        hits = row.succeeded if good else row.failed
        given, trials, method = row.n_y, row.succeeded + row.failed, "outcomes"
    else:
        row = session.execute(text(_COUNTS.format(where=where)), params).one()
        given, hits, trials, method = row.n_y, row.n_xy, row.n_y, "co-occurrence"
    for part, terms in ((x, row.x_terms), (y, row.y_terms)):
        if not terms:  # (an outcome's words are all indexed: X is never this one then)
            return Estimate(x, y, "co-occurrence", 0, 0, 0, None, False, unsearchable=part)
    if given == 0:
        return Estimate(x, y, method, 0, 0, 0, None, False)
    probability = (hits + PRIOR_ALPHA) / (trials + PRIOR_ALPHA + PRIOR_BETA)
    return Estimate(x, y, method, given, hits, trials, round(probability, 4), True)
