"""The rows of TRY/LEARN (memsys.services.learning), as S001 names them."""

from __future__ import annotations

from memsys.operations.spec import Cli, Operation, Rest
from memsys.schemas import learning as lr

LEARNING_CLI = "memsys.cli.memory"

LEARNING_OPERATIONS: tuple[Operation, ...] = (
    Operation(
        name="memory_apply",
        summary="Record that a memory is being applied (TRY phase of validation loop).",
        service="learning:apply",
        input=lr.MemoryApplyIn,
        output=lr.MemoryApplyOut,
        effect="write",
        rest=(Rest("POST", "/memories/{memory_id}/apply"),),
        cli=Cli("apply", arguments=("memory_id", "context"), render=f"{LEARNING_CLI}:applied"),
    ),
    Operation(
        name="memory_outcome",
        summary="Record the outcome of a memory application (LEARN phase) and adjust "
        "confidence: +0.10 on success, -0.15 on failure; 0.9 makes it a golden rule.",
        service="learning:outcome",
        input=lr.MemoryOutcomeIn,
        output=lr.MemoryOutcomeOut,
        effect="write",
        rest=(Rest("POST", "/memories/{memory_id}/outcome"),),
        cli=Cli(
            "outcome",
            arguments=("memory_id",),
            flags={"success": ("--success/--failure",)},
            render=f"{LEARNING_CLI}:learned",
        ),
    ),
    Operation(
        name="validation_history",
        summary="Get validation event history for a memory, with its success rate.",
        service="learning:history",
        input=lr.ValidationHistoryIn,
        output=lr.ValidationHistoryOut,
        effect="read",
        rest=(Rest("GET", "/memories/{memory_id}/validation"),),
        cli=Cli("validation", arguments=("memory_id",), render=f"{LEARNING_CLI}:validations"),
    ),
)
