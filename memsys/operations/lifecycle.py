"""The rows of the lifecycle (memsys.services.decay, lifecycle, briefs, health)."""

from __future__ import annotations

from memsys.operations.spec import Cli, Operation, Rest
from memsys.schemas import lifecycle as lc

LIFECYCLE_CLI = "memsys.cli.lifecycle"

LIFECYCLE_OPERATIONS: tuple[Operation, ...] = (
    Operation(
        name="decay",
        summary="Recompute S003 decay scores (importance x e^(-0.03 days idle) x "
        "log2(accesses+1) x type weight) for the memories in scope; session (ultra tier) "
        "memories below the threshold are deleted. Returns entries_decayed / entries_deleted "
        "(S002's ENTRIES_DECAYED / ENTRIES_DELETED).",
        service="decay:decay",
        input=lc.DecayIn,
        output=lc.DecayOut,
        effect="destructive",
        rest=(Rest("POST", "/lifecycle/decay"),),
        cli=Cli("decay", render=f"{LIFECYCLE_CLI}:decayed"),
    ),
    Operation(
        name="memory_get",
        summary="Read one memory by id, with its stage, pin, decay score and temperature. "
        "Counts as an access; an archived memory read this way comes back in full.",
        service="memory_get:get",
        input=lc.MemoryGetIn,
        output=lc.MemoryGetOut,
        effect="read",
        # The second route reads any id, also one another route's word shadows in the first
        # (/memories/count is the count): a memory imported as "count" stays readable.
        rest=(
            Rest("GET", "/memories/{memory_id}"),
            Rest(
                "GET",
                "/memories/by-id/{memory_id}",
                summary="Read one memory by id; any id, also one a route's word shadows "
                "in /memories/{memory_id} (count, analyze-health)",
            ),
        ),
        cli=Cli("get", arguments=("memory_id",), render=f"{LIFECYCLE_CLI}:got"),
    ),
    Operation(
        name="debug_rehydrate",
        summary="Rehydrate (rekindle) an archived or rehydratable memory now: its full text "
        "comes back from its history, or its summary, marked lossy.",
        service="lifecycle:rehydrate",
        input=lc.RehydrateIn,
        output=lc.RehydrateOut,
        effect="write",
        rest=(Rest("POST", "/debug/rehydrate/{memory_id}"),),
        cli=Cli("rehydrate", arguments=("memory_id",), render=f"{LIFECYCLE_CLI}:rehydrated"),
    ),
    Operation(
        name="memory_pin",
        summary="Pin a memory (S003 vault): always kept, never decayed, demoted, archived or "
        "merged away; decay score 999. Pinning an aged memory brings its full text back.",
        service="pinning:pin",
        input=lc.PinIn,
        output=lc.PinOut,
        effect="idempotent",
        rest=(Rest("POST", "/memories/{memory_id}/pin"),),
        cli=Cli("pin", arguments=("memory_id",), render=f"{LIFECYCLE_CLI}:pinned"),
    ),
    Operation(
        name="memory_unpin",
        summary="Unpin a memory: it ages by its idle time again (decay, demotion, archiving).",
        service="pinning:unpin",
        input=lc.PinIn,
        output=lc.PinOut,
        effect="idempotent",
        rest=(Rest("DELETE", "/memories/{memory_id}/pin"),),
        cli=Cli("unpin", arguments=("memory_id",), render=f"{LIFECYCLE_CLI}:pinned"),
    ),
    Operation(
        name="memory_brief",
        summary="Generated markdown: CORE.md (the memories worth loading at session start), "
        "REFLECTION.md (themes, cross-project patterns, most accessed, insights, merges) or "
        "a day's episode log. The CLI writes the file; REST and MCP return the text.",
        service="briefs:brief",
        input=lc.BriefIn,
        output=lc.BriefOut,
        effect="read",
        rest=(Rest("GET", "/briefs/{kind}"),),
        cli=Cli("brief", command=f"{LIFECYCLE_CLI}:brief"),
    ),
    Operation(
        name="memory_analyze_health",
        summary="Analyze the health of memories: contradictions, low-confidence and stale "
        "memories, and recommendations.",
        service="health:analyze",
        input=lc.HealthIn,
        output=lc.HealthOut,
        effect="read",
        rest=(Rest("GET", "/memories/analyze-health"),),
        cli=Cli("health", render=f"{LIFECYCLE_CLI}:health"),
    ),
)
