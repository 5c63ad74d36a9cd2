"""JSON values as memsys reads them (each key once) and as PostgreSQL's jsonb keeps them."""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any


def same(a: Any, b: Any) -> bool:
    """Whether two JSON values are the same once stored. jsonb keeps a number as the
    exact decimal it is written as (1e+300 reads back as the int 10^300, not the float
    1e300, which compared unequal: every import of the file made a new version), and JSON's
    true is no 1 (Python's True == 1 took an edit from 1 to true for no change)."""
    return bool(_exact(a) == _exact(b))


def _exact(value: Any) -> Any:
    if isinstance(value, bool) or value is None:
        return (value,)  # never equal to a number
    if isinstance(value, float):
        return Decimal(repr(value))
    if isinstance(value, int):
        return Decimal(value)
    if isinstance(value, dict):
        return {k: _exact(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_exact(v) for v in value]
    return value


class KeyTwice(ValueError):
    """An object that gives a key twice."""


def _once(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for key, value in pairs:
        if key in found:
            raise KeyTwice(f"the key {key[:80]!r} is given twice")
        found[key] = value
    return found


def loads(text: str | bytes) -> Any:
    """json.loads refusing an object that gives a key twice (KeyTwice): json keeps the last
    one, so what came before it (a second `"value"` in a preference line, a second
    `"content"` in a request body) would be lost without a word."""
    return json.loads(text, object_pairs_hook=_once)
