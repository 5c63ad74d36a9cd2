"""What a suite returns (figures against thresholds) and the scratch transaction probes use."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy.orm import Session

from memsys.db import get_engine


@dataclass
class Figure:
    """One measured figure. `threshold` None: reported, never failing (no S004 target)."""

    name: str
    value: float | None  # None: nothing to measure (no memories of that kind)
    threshold: float | None
    higher_is_better: bool = True
    detail: str = ""

    @property
    def passed(self) -> bool:
        if self.value is None or self.threshold is None:
            return True
        if self.higher_is_better:
            return self.value >= self.threshold
        return self.value < self.threshold

    def line(self) -> str:
        shown = "n/a" if self.value is None else f"{self.value:.3f}"
        if self.threshold is None:
            target = "(reported)"
        else:
            target = f"{'>=' if self.higher_is_better else '<'} {self.threshold:g}"
        verdict = "PASS" if self.passed else "FAIL"
        return f"  {verdict}  {self.name}: {shown} {target}" + (
            f"  ({self.detail})" if self.detail else ""
        )


@dataclass
class SuiteResult:
    name: str
    figures: list[Figure] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return all(f.passed for f in self.figures)

    def lines(self) -> list[str]:
        head = f"{self.name}: {'PASS' if self.passed else 'FAIL'}"
        return [head] + [f.line() for f in self.figures]

    def as_dict(self) -> dict[str, Any]:
        return {
            "suite": self.name,
            "passed": self.passed,
            "figures": [
                {
                    "name": f.name,
                    "value": f.value,
                    "threshold": f.threshold,
                    "higher_is_better": f.higher_is_better,
                    "passed": f.passed,
                    "detail": f.detail,
                }
                for f in self.figures
            ],
        }


@dataclass
class Context:
    namespace: str | None = None
    locomo: str | None = None


@contextmanager
def scratch() -> Iterator[Session]:
    """A session whose writes are always rolled back: probes plant data here."""
    with get_engine().connect() as conn:
        outer = conn.begin()
        session = Session(bind=conn)
        try:
            yield session
        finally:
            session.close()
            outer.rollback()


def probe_namespace(label: str) -> str:
    return f"eval:{label}-{uuid.uuid4().hex[:8]}"


def ratio(part: int, whole: int) -> float | None:
    return None if whole == 0 else part / whole
