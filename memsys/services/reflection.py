"""REFLECTION.md (S003): themes from tag co-occurrence, tags that span projects, the most
accessed memories, recent insights, and the consolidation history.

Projects are the `project:<name>` namespaces. "Last reflection" and "Total reflections" count
maintenance runs (`memsys maintain`), which is when memsys reflects on its memories.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from datetime import datetime
from itertools import combinations
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from memsys.models import Chunk, Event
from memsys.services import briefs, decay

THEMES = 8
THEME_EXAMPLES = 3
MOST_ACCESSED = 10
INSIGHTS = 10
PREVIEW = 80
PROJECT_PREFIX = "project:"


def _live(session: Session, namespace: str | None) -> list[Any]:
    stmt = select(*decay.SIGNALS, Chunk.content).where(
        Chunk.doc_type == "memory", Chunk.valid_to.is_(None)
    )
    if namespace:
        stmt = stmt.where(Chunk.namespace == namespace)
    return briefs.as_written(session, list(session.execute(stmt)))


def _themes(memories: list[Any]) -> list[str]:
    pairs: Counter[tuple[str, str]] = Counter()
    examples: dict[tuple[str, str], list[str]] = defaultdict(list)
    for m in sorted(memories, key=lambda m: m.created_at, reverse=True):
        for pair in combinations(sorted(set(m.tags or [])), 2):
            pairs[pair] += 1
            if len(examples[pair]) < THEME_EXAMPLES:
                examples[pair].append(briefs.title_of(m.content, 30))
    lines = []
    for (a, b), n in sorted(pairs.items(), key=lambda kv: (-kv[1], kv[0]))[:THEMES]:
        shown = ", ".join(f'"{t}"' for t in examples[(a, b)])
        lines.append(f"- **{a} + {b}**: {n} memories ({shown})")
    return lines


def _cross_project(memories: list[Any]) -> list[str]:
    by_tag: dict[str, Counter[str]] = defaultdict(Counter)
    for m in memories:
        if m.namespace.startswith(PROJECT_PREFIX):
            for tag in set(m.tags or []):
                by_tag[tag][m.namespace.removeprefix(PROJECT_PREFIX)] += 1
    spanning = [(tag, c) for tag, c in by_tag.items() if len(c) >= 2]
    spanning.sort(key=lambda tc: (-sum(tc[1].values()), tc[0]))
    lines = []
    for tag, counts in spanning[:THEMES]:
        shown = ", ".join(f"{p} ({n})" for p, n in sorted(counts.items(), key=lambda x: -x[1]))
        lines.append(f"- **{tag}**: appears in {shown}")
    return lines


def reflection_brief(session: Session, namespace: str | None, now: datetime) -> str:
    memories = _live(session, namespace)
    runs, last = briefs.reflection_count(session)
    merges_stmt = select(func.count()).where(
        Event.event_type == "episode", Event.operation == "consolidate"
    )
    if namespace:
        merges_stmt = merges_stmt.where(Event.namespace == namespace)
    merges = int(session.scalar(merges_stmt) or 0)
    last_text = last.date().isoformat() if last else "never"
    lines = [
        "# Reflection Summary (auto-generated)",
        f"> Last updated: {now.date().isoformat()} | Last reflection: {last_text} | "
        f"Total reflections: {runs}",
        "",
        "## Themes",
        "Top tag co-occurrences revealing recurring themes:",
        *(_themes(memories) or ["- (no tag pairs yet)"]),
        "",
        "## Cross-Project Patterns",
        "Tags that span multiple projects:",
        *(_cross_project(memories) or ["- (no tag spans two projects yet)"]),
        "",
        "## Most Accessed",
        f"Top {MOST_ACCESSED} memories by access count:",
    ]
    accessed = sorted(
        (m for m in memories if m.access_count > 0), key=lambda m: (-m.access_count, m.id)
    )
    lines += [
        f"{i}. {briefs.link(m)} - {m.access_count} accesses"
        for i, m in enumerate(accessed[:MOST_ACCESSED], start=1)
    ] or ["- (nothing accessed yet)"]
    insights = sorted(
        (m for m in memories if m.memory_type == "insight"),
        key=lambda m: m.created_at,
        reverse=True,
    )
    lines += ["", "## Recent Insights", "Insight-type memories:"]
    lines += [
        f"- {briefs.link(m)} - {briefs.title_of(' '.join(m.content.split()), PREVIEW)}"
        for m in insights[:INSIGHTS]
    ] or ["- (no insights yet)"]
    lines += ["", "## Consolidation History", f"- Total merges performed: {merges}"]
    return "\n".join(lines) + "\n"
