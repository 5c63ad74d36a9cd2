"""Schemathesis hooks for memsys (loaded through schemathesis.toml next to this file).

The OpenAPI document states every rule JSON Schema can state: types, bounds, patterns (no
NUL, no blank text), enums, which of several fields must be given. A few rules it cannot
state: they depend on the server's configuration, on the clock, on what is stored, or relate
fields to each other. A request breaking one of them is valid per the schema and refused
with 422 and a message naming the rule, which schemathesis would report as "schema-valid
request rejected". Those refusals, and only those (matched by the message memsys gives), are
not failures. Every other check, and this one for every other message, stays on.
"""

from __future__ import annotations

from typing import Any

import schemathesis

# A fragment of memsys's message → the rule it names (kept for the reader and the report).
UNSTATABLE = {
    "is outside the folders memsys may index": "paths are limited to MEMSYS_INDEX_ROOTS",
    "cannot be related to itself": "an edge's source_id and target_id differ",
    "is in the future": "as_of and reference times are past times, by the server's clock",
    "is not after the live version": "a fact's new version starts after the live one",
    "has no words to route": "a query holds a word (a Unicode letter or digit)",
    "S000": "an observation envelope has the fields of its S000 type",
    "observation is not valid JSON": "an observation starting with '{' is an S000 envelope",
    "schema_version missing": "an import body is a memsys export",
    "not JSON": "an import body is a memsys export",
}


def unstatable(status: int, error: str) -> bool:
    return status == 422 and any(fragment in error for fragment in UNSTATABLE)


@schemathesis.hook
def filter_failure(ctx: Any, failure: Any, case: Any, response: Any) -> bool:
    """Keep every failure except a 422 for a rule the schema cannot state."""
    if getattr(failure, "code", None) != "ST202":
        return True
    try:
        error = str(response.json().get("error", ""))
    except Exception:
        return True
    return not unstatable(response.status_code, error)
