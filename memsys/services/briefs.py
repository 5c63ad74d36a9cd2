"""S003's generated markdown: CORE.md (loaded into a prompt at session start) and the daily
episode log. REFLECTION.md is in memsys.services.reflection. Plain functions returning text:
the CLI writes the files, REST and MCP return the text, the vault export calls them too.

Links point where `memsys export` writes a memory's file (`memory_path`, the vault's own
rule), so the text reads the same inside an exported vault.
"""

from __future__ import annotations

import re
from collections import defaultdict
from datetime import UTC, date, datetime, time, timedelta
from types import SimpleNamespace
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from memsys.models import Chunk, Event
from memsys.models.chunk import AGED
from memsys.schemas.lifecycle import BriefIn, BriefOut
from memsys.services import decay, history, namespaces, summary
from memsys.vault import markdown
from memsys.vocabulary import is_golden

CORE_CHARS = 12_000  # S003: ~3K tokens
CORE_MIN_SCORE = 0.2
CORE_PER_SECTION = 15
EPISODE_ENTRIES = 500  # a day's log lists this many (a bulk load stores thousands in a day)
# (heading, memory types); golden rules (by type or earned confidence) come first.
CORE_SECTIONS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("Golden Rules", ("golden_rule",)),
    ("Critical Solutions", ("solution",)),
    ("Active Decisions", ("decision",)),
    ("Key Fixes", ("fix",)),
    ("Configurations", ("configuration",)),
    ("Patterns & Workflows", ("code_pattern", "workflow", "pattern", "procedure")),
    ("Preferences", ("preference",)),
    ("Facts", ("fact",)),
    ("Insights", ("insight",)),
    ("Problems & Errors", ("problem", "error")),
    ("General", ("general", "session")),
)
_ENTRY = {
    "core": re.compile(r"- \["),
    "reflection": re.compile(r"- \*\*|- \[|\d+\. \["),
    "episodes": re.compile(r"## "),
}


def title_of(content: str, width: int = 80) -> str:
    line = content.strip().splitlines()[0] if content.strip() else ""
    return line if len(line) <= width else line[: width - 1].rstrip() + summary.ELLIPSIS


def memory_path(memory: Any) -> str:
    """Where `memsys export` writes a memory's file (S003's `graph/<type folder>/<slug>-<6
    hex>.md`, `vault/…` when pinned) — unless two memories share that name or the user
    moved the file: the CORE.md an export writes links to the file itself."""
    record = {
        "pinned": bool(memory.pinned),
        "type": memory.memory_type or "general",
        "content": memory.content,
        "metadata": memory.meta,
        "id": memory.id,
    }
    return markdown.memory_path(record)


def link(memory: Any, prefix: str = "") -> str:
    path = memory_path(memory)
    return f"[{title_of(memory.content).replace(']', ')')}]({prefix}{path})"


def as_written(session: Session, rows: list[Any]) -> list[Any]:
    """The rows with an aged memory's (archived, rehydratable) full text for its content,
    where its history holds it: a title cut from aging's summary or key named the memory by
    a stub, and linked to a file the export, which writes the full text, never makes."""
    aged = [(r.namespace, r.id, r.content) for r in rows if r.stage in AGED]
    full = history.full_texts(session, aged) if aged else {}
    if not full:
        return rows
    return [
        SimpleNamespace(**{**r._asdict(), "content": full[r.namespace, r.id]})
        if (r.namespace, r.id) in full
        else r
        for r in rows
    ]


def _live(session: Session, namespace: str | None) -> list[Any]:
    rows: list[Any] = []
    columns = (*decay.SIGNALS, Chunk.content)
    after = ("", "")
    while batch := decay.batch_after(session, namespace, after, columns=columns):
        rows += as_written(session, batch)
        after = (batch[-1].namespace, batch[-1].id)
    return rows


def _section(memory: Any) -> str:
    if is_golden(memory.memory_type, memory.confidence):
        return "Golden Rules"
    for heading, types in CORE_SECTIONS:
        if memory.memory_type in types:
            return heading
    return "General"


def core_brief(session: Session, namespace: str | None, now: datetime) -> str:
    """CORE.md: memories with decay ≥ 0.2, grouped by type, ≤ 15 per section, ~12K chars."""
    memories = _live(session, namespace)
    scored = [(decay.score_of(m, now), m) for m in memories]
    kept = [(s, m) for s, m in scored if s >= CORE_MIN_SCORE]
    groups: dict[str, list[tuple[float, Any]]] = defaultdict(list)
    for s, m in kept:
        groups[_section(m)].append((s, m))
    lines = [
        "# Memory Core (auto-generated)",
        f"> Last updated: {now.date().isoformat()} | Active memories: {len(kept)}/"
        f"{len(memories)} | Next refresh: daily (cron: memsys maintain && memsys brief core)",
    ]
    size = sum(len(x) + 1 for x in lines)
    for heading, _ in CORE_SECTIONS:
        entries = sorted(groups.get(heading, []), key=lambda sm: (-sm[0], sm[1].id))
        block = [f"\n## {heading}"]
        for _, m in entries[:CORE_PER_SECTION]:
            tags = f" ({', '.join(m.tags)})" if m.tags else ""
            block.append(f"- {link(m)}{tags}")
        cost = sum(len(x) + 1 for x in block)
        if len(block) == 1 or size + cost > CORE_CHARS:
            continue
        lines += block
        size += cost
    return "\n".join(lines) + "\n"


def episode_log(session: Session, namespace: str | None, day: date) -> str:
    """episodes/YYYY-MM-DD.md: the memories stored that day and the merges made, by time; the
    first EPISODE_ENTRIES of them, then how many more there are."""
    start = datetime.combine(day, time(), tzinfo=UTC)
    # 9999-12-31 has no next day in Python (OverflowError, HTTP 500): its log ends with time
    end = start + timedelta(days=1) if day < date.max else datetime.max.replace(tzinfo=UTC)
    stmt = select(*decay.SIGNALS, Chunk.content).where(
        Chunk.doc_type == "memory", Chunk.created_at >= start, Chunk.created_at < end
    )
    merges = select(Event).where(
        Event.event_type == "episode", Event.occurred_at >= start, Event.occurred_at < end
    )
    if namespace:
        stmt = stmt.where(Chunk.namespace == namespace)
        merges = merges.where(Event.namespace == namespace)
    total = sum(
        session.scalar(select(func.count()).select_from(q.subquery())) or 0 for q in (stmt, merges)
    )
    stmt = stmt.order_by(Chunk.created_at, Chunk.id).limit(EPISODE_ENTRIES)
    merges = merges.order_by(Event.occurred_at, Event.id).limit(EPISODE_ENTRIES)
    entries: list[tuple[datetime, list[str]]] = []
    for m in as_written(session, list(session.execute(stmt))):
        entries.append(
            (
                m.created_at,
                [
                    f"## {m.created_at.astimezone(UTC):%H:%M} - {title_of(m.content)}",
                    f"- **Type:** {m.memory_type}",
                    f"- **Tags:** {', '.join(m.tags) if m.tags else '-'}",
                    f"- **Memory:** {link(m, '../')}",
                    f"- **Summary:** {summary.summarize(m.content, 40)}",
                ],
            )
        )
    for e in session.scalars(merges):
        merged = e.payload.get("merged", [])
        entries.append(
            (
                e.occurred_at,
                [
                    f"## {e.occurred_at.astimezone(UTC):%H:%M} - Consolidated "
                    f"{len(merged) + 1} near-duplicates",
                    "- **Type:** consolidation",
                    f"- **Tags:** {', '.join(e.payload.get('tags') or []) or '-'}",
                    f"- **Memory:** {e.subject_id}",
                    f"- **Summary:** kept {e.subject_id}, superseded {', '.join(merged)}",
                ],
            )
        )
    entries.sort(key=lambda t: t[0])
    body = [f"# {day.isoformat()}"]
    for _, block in entries[:EPISODE_ENTRIES]:
        body += ["", *block]
    if total > EPISODE_ENTRIES:
        more = total - EPISODE_ENTRIES
        body += ["", f"… and {more:,} more entries this day (memory_list lists every memory)"]
    return "\n".join(body) + "\n"


def reflection_brief(session: Session, namespace: str | None, now: datetime) -> str:
    """REFLECTION.md (written in memsys.services.reflection; here beside core_brief)."""
    from memsys.services import reflection

    return reflection.reflection_brief(session, namespace, now)


def reflection_count(session: Session) -> tuple[int, datetime | None]:
    """How many maintenance runs there have been, and the last one (REFLECTION.md header)."""
    row = session.execute(
        select(func.count(), func.max(Event.occurred_at)).where(
            Event.event_type == "maintenance", Event.operation == "maintain"
        )
    ).one()
    return int(row[0]), row[1]


def brief(session: Session, params: BriefIn, now: datetime | None = None) -> BriefOut:
    """One brief as text (the CLI writes it to `filename`)."""
    now = now or datetime.now(UTC)
    namespaces.require(session, params.namespace)
    if params.kind == "core":
        text, filename = core_brief(session, params.namespace, now), "CORE.md"
    elif params.kind == "reflection":
        text = reflection_brief(session, params.namespace, now)
        filename = "REFLECTION.md"
    else:
        day = params.day or now.date()
        text, filename = episode_log(session, params.namespace, day), f"episodes/{day}.md"
    entries = sum(bool(_ENTRY[params.kind].match(line)) for line in text.splitlines())
    return BriefOut(kind=params.kind, filename=filename, text=text, entries=entries)
