"""Freshness (S004 suite 1): the share of live memories updated in the last 30 days, per
lifecycle — personal >= 0.90, project >= 0.70, session >= 0.50."""

from __future__ import annotations

from sqlalchemy import text
from sqlalchemy.orm import Session

from memsys.vault.evals.base import Context, Figure, ratio

THRESHOLDS = {"personal": 0.90, "project": 0.70, "session": 0.50}
WINDOW_DAYS = 30

_FRESH = text(
    """
    SELECT lifecycle, count(*) AS total,
           count(*) FILTER (WHERE updated_at >= now() - make_interval(days => :days)) AS fresh
    FROM chunk
    WHERE doc_type = 'memory' AND valid_to IS NULL
      AND (CAST(:namespace AS text) IS NULL OR namespace = :namespace)
    GROUP BY lifecycle
    """
)


def run(session: Session, ctx: Context) -> list[Figure]:
    rows = {
        r.lifecycle: r
        for r in session.execute(_FRESH, {"days": WINDOW_DAYS, "namespace": ctx.namespace})
    }
    figures = []
    for lifecycle, threshold in THRESHOLDS.items():
        row = rows.get(lifecycle)
        total, fresh = (row.total, row.fresh) if row else (0, 0)
        figures.append(
            Figure(
                f"{lifecycle} memories updated in {WINDOW_DAYS} days",
                ratio(fresh, total),
                threshold,
                detail=f"{fresh}/{total}",
            )
        )
    return figures
