"""memory_context: the memories to put into a prompt, as markdown grouped by type, golden
rules first, never over the token budget (the count is of what is returned)."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy.orm import Session

from memsys.models import Chunk
from memsys.runner import before_transaction, retrieval_only
from memsys.schemas import MemoryContextIn, MemoryContextOut
from memsys.services import lifecycle, memories, namespaces, search, tracing
from memsys.tokens import count_tokens
from memsys.vocabulary import GOLDEN_RULE, is_golden

# memory_context: section titles in output order (S001's first, then S003's types).
SECTIONS: dict[str, str] = {
    GOLDEN_RULE: "Golden Rules (High Confidence)",
    "preference": "Preferences",
    "decision": "Decisions",
    "pattern": "Patterns",
    "fact": "Facts",
    "procedure": "Procedures",
    "solution": "Solutions",
    "fix": "Fixes",
    "configuration": "Configurations",
    "workflow": "Workflows",
    "code_pattern": "Code Patterns",
    "problem": "Problems",
    "error": "Errors",
    "insight": "Insights",
    "general": "General",
    "session": "Session",
}
CONTEXT_HEADER = "## Relevant Memories\n"
CONTEXT_CANDIDATES = 50


@dataclass
class Listed:
    """A memory of the listing without a query, apart from the session: handing out an aged
    memory's full text must not write it back through the ORM (rekindling does, if picked)."""

    namespace: str
    id: str
    doc_type: str
    stage: str
    memory_type: str | None
    confidence: float
    content: str
    token_count: int


Candidate = search.Hit | Listed


def _pick(ordered: list[Candidate], budget: int) -> dict[str, list[tuple[str, str]]]:
    """The memories whose lines fit `budget`, by section, in order (a shorter one further
    down may still fit where a longer one did not)."""
    chosen: dict[str, list[tuple[str, str]]] = {}
    used = count_tokens(CONTEXT_HEADER)
    for item in ordered:
        section = GOLDEN_RULE if is_golden(item.memory_type, item.confidence) else item.memory_type
        assert section is not None
        line = f"- {' '.join(item.content.split())} [confidence: {item.confidence:.2f}]\n"
        cost = count_tokens(line)
        if section not in chosen:
            cost += count_tokens(f"\n### {SECTIONS[section]}\n")
        if used + cost > budget:
            continue
        chosen.setdefault(section, []).append((item.id, line))
        used += cost
    return chosen


def _context_candidates(session: Session, params: MemoryContextIn) -> list[Candidate]:
    found: list[Candidate]
    if params.query:
        found = list(
            memories.recall_hits(
                session,
                params.query,
                {"namespace": params.namespace},
                CONTEXT_CANDIDATES,
                count_access=False,  # counted below for the memories the budget keeps
            ).hits
        )
    else:
        found = _listed(session, params.namespace)
    # An aged memory is weighed (and handed out) with its full text, as recall gives it.
    full = lifecycle.full_texts_of(session, found)
    for c in found:
        c.content = full.get((c.namespace, c.id), c.content)
    return found


def _listed(session: Session, namespace: str | None) -> list[Candidate]:
    """Without a query: live memories by importance, each text once (the same text stored in
    several namespaces is one memory to the reader, as retrieval's dedup has it)."""
    namespaces.require(session, namespace)
    stmt = memories.live_memories()
    if namespace:
        stmt = stmt.where(Chunk.namespace == namespace)
    stmt = stmt.order_by(
        Chunk.golden.desc(),
        Chunk.importance.desc(),
        Chunk.confidence.desc(),
        Chunk.created_at.desc(),
    ).limit(200)
    seen: set[str] = set()
    out: list[Candidate] = []
    for c in session.scalars(stmt):
        if c.content_hash in seen:
            continue
        seen.add(c.content_hash)
        out.append(
            Listed(
                **{f: getattr(c, f) for f in Listed.__dataclass_fields__}  # the same names
            )
        )
    return out


@retrieval_only
@before_transaction(search.embed_query_of)
def context(session: Session, params: MemoryContextIn) -> MemoryContextOut:
    """Markdown grouped by type (golden rules first) that never exceeds `token_budget`."""
    filters = {"namespace": params.namespace, "token_budget": params.token_budget}
    with tracing.traced(
        "memory_context",
        params.query or "",
        namespace=params.namespace,
        filters=filters,
        params=params,
    ) as t:
        return _context(session, params, t)


def _context(session: Session, params: MemoryContextIn, t: tracing.Draft) -> MemoryContextOut:
    candidates = _context_candidates(session, params)
    # Golden rules first, then in retrieval (or importance) order.
    ordered = sorted(
        candidates, key=lambda c: not is_golden(c.memory_type, c.confidence)
    )  # stable sort keeps the rank order within each group
    if count_tokens(CONTEXT_HEADER) > params.token_budget:
        ordered = []
    chosen = _pick(ordered, params.token_budget)
    # The archived memories handed out come back in full, as recall's do, and only those:
    # the budget was applied to their full texts (read from history beforehand).
    picked = {mid for lines in chosen.values() for mid, _ in lines}
    lifecycle.rekindle_hits(session, [c for c in ordered if c.id in picked])

    def render(picked: dict[str, list[tuple[str, str]]]) -> str:
        if not picked:
            return ""
        parts = [CONTEXT_HEADER]
        for key, title in SECTIONS.items():
            if key in picked:
                parts.append(f"\n### {title}\n")
                parts.extend(line for _, line in picked[key])
        return "".join(parts)

    rendered = render(chosen)
    # The budget is a promise: count what is returned, and drop from the end if ever over.
    while rendered and count_tokens(rendered) > params.token_budget:
        last = next(k for k in reversed(SECTIONS) if chosen.get(k))
        chosen[last].pop()
        if not chosen[last]:
            del chosen[last]
        rendered = render(chosen)

    memory_ids = [mid for key in SECTIONS for mid, _ in chosen.get(key, [])]
    search.touch(session, memory_ids)
    trace_id = tracing.write(
        session,
        t,
        retrieved=[{"id": mid} for mid in memory_ids],
        output={"tokens": count_tokens(rendered), "considered": [c.id for c in ordered]},
        stores=None if params.query else ["relational"],
        routing=None if params.query else "importance order (no query)",
    )
    return MemoryContextOut(
        context=rendered,
        token_estimate=count_tokens(rendered),
        memory_count=len(memory_ids),
        golden_rule_count=len(chosen.get(GOLDEN_RULE, [])),
        memory_ids=memory_ids,
        trace_id=trace_id,
    )
