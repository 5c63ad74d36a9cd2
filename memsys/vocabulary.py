"""The words memsys's data is made of, shared by the models, the schemas and the services.

Plain tuples and one rule, importing nothing: the CLI builds its options from the schemas
without loading SQLAlchemy.
"""

from __future__ import annotations

LIFECYCLES = ("personal", "project", "session")
# A memory's lifecycle when none is given (memory_store, import): by its type, else project.
DEFAULT_LIFECYCLE = {"preference": "personal", "session": "session"}
DOC_TYPES = ("memory", "document")
# S001 memory types, S003 memory types, and S001's golden_rule.
MEMORY_TYPES = (
    "preference",
    "decision",
    "pattern",
    "session",
    "fact",
    "golden_rule",
    "solution",
    "fix",
    "configuration",
    "problem",
    "workflow",
    "code_pattern",
    "error",
    "general",
    "procedure",
    "insight",
)

# A memory is a golden rule when it is typed so or when its confidence reached this (S001).
GOLDEN_RULE = "golden_rule"
GOLDEN_CONFIDENCE = 0.9


def is_golden(memory_type: str | None, confidence: float) -> bool:
    """The golden-rule rule; `Chunk.golden` is the same rule in SQL."""
    return memory_type == GOLDEN_RULE or confidence >= GOLDEN_CONFIDENCE


# The context of the `supersedes` edge from a memory an import edited to the closed copy of
# its previous fields: what marks that copy as the memory's own earlier version (a purge
# erases it with the memory; memory_check_supersedes' edges join two different memories).
EDITED_COPY = "an imported edit; the target holds the fields before it"
