"""The four stages of S004, driven by time since last access, and rekindling.

  active ──7 d unused──▶ demoted ──30 d──▶ archived ──90 d──▶ rehydratable
    ▲                                         │                   │
    └──────────── a matching query, or debug_rehydrate ───────────┘

demoted: ranked at half strength (memsys.retrieval.rank), content untouched.
archived: content replaced by an extractive summary (memsys.services.summary); the full text
  stays in the memory's history (memory_change, operation "archive"), where rekindling and
  replay find it. Ranked at a tenth, its embedding kept, so a query that means it still finds it
  (a memory still waiting on the embedding queue is archived once it has its vector).
rehydratable: content cut to a key (the summary's first words); ranked at 1 %.
A query whose hits include an archived or rehydratable memory rekindles it in that read:
full text restored from history when it is there, else the summary (marked `lossy`).
Exempt, always active: personal lifecycle, pinned, golden rules, ground truth (decay.exempt).
Every change writes history rows (stage, content, lossy) in its transaction.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal, Protocol

from sqlalchemy import select, text
from sqlalchemy.orm import Session

from memsys.errors import NotFound
from memsys.models import Chunk
from memsys.models.chunk import AGED, STAGES
from memsys.schemas.lifecycle import RehydrateIn, RehydrateOut
from memsys.services import access, decay, events, history, namespaces, summary
from memsys.tenancy import may_write
from memsys.tokens import count_tokens

Restored = Literal["full", "summary", "none"]
STAGE_AFTER_DAYS = (("rehydratable", 90.0), ("archived", 30.0), ("demoted", 7.0))
ROW = (*decay.SIGNALS, Chunk.content, Chunk.lossy, Chunk.embedding.is_(None).label("queued"))


class Handed(Protocol):
    """A chunk a read hands out (a retrieval hit, a listed memory): what finds an aged
    memory among them and gives its full text back."""

    namespace: str
    id: str
    doc_type: str
    stage: str
    content: str
    token_count: int


def due_stage(memory: Any, now: datetime) -> str:
    """The stage a memory's idle time calls for (exempt memories are always active)."""
    if decay.exempt(memory):
        return "active"
    idle = decay.idle_days(memory, now)
    for stage, days in STAGE_AFTER_DAYS:
        if idle >= days:
            return stage
    return "active"


# One statement for a batch of stage changes (content, token count and lossy only where
# given). Aging is not an edit by anyone: updated_at stays.
_APPLY = text(
    """
    UPDATE chunk c
    SET stage = v.stage, stage_changed_at = v.at,
        content = coalesce(v.content, c.content),
        token_count = coalesce(v.tokens, c.token_count),
        lossy = coalesce(v.lossy, c.lossy)
    FROM unnest(CAST(:namespaces AS text[]), CAST(:ids AS text[]), CAST(:stages AS text[]),
                CAST(:contents AS text[]), CAST(:tokens AS int[]), CAST(:lossy AS boolean[]),
                CAST(:at AS timestamptz[])) AS v(namespace, id, stage, content, tokens, lossy, at)
    WHERE c.namespace = v.namespace AND c.id = v.id
    """
)
_APPLY_COLUMNS = ("namespaces", "ids", "stages", "contents", "tokens", "lossy", "at")


@dataclass
class Writes:
    """Stage changes and their history rows, written by `flush` in two statements: a
    maintenance batch moves hundreds of memories, and a statement or three each was most of
    its time."""

    changes: list[dict[str, Any]] = field(default_factory=list)
    moves: list[tuple[Any, ...]] = field(default_factory=list)

    def log(self, memory: Any, name: str, old: Any, new: Any, operation: str, at: datetime) -> None:
        row = history.change_row(memory, name, old, new, operation, at)
        if row is not None:
            self.changes.append(row)

    def move(
        self,
        memory: Any,
        now: datetime,
        operation: str,
        stage: str,
        content: str | None = None,
        lossy: bool | None = None,
    ) -> None:
        """Set a memory's stage (and content, lossy), logging stage and lossy (content
        changes are logged by the caller, which knows what the text was)."""
        self.log(memory, "stage", memory.stage, stage, operation, now)
        if lossy is not None:
            self.log(memory, "lossy", memory.lossy, lossy, operation, now)
        tokens = None if content is None else count_tokens(content)
        self.moves.append((memory.namespace, memory.id, stage, content, tokens, lossy, now))

    def flush(self, session: Session) -> None:
        history.record_rows(session, self.changes)
        if self.moves:
            columns = zip(*self.moves, strict=True)
            session.execute(_APPLY, dict(zip(_APPLY_COLUMNS, map(list, columns), strict=True)))
        self.changes, self.moves = [], []


def age(memory: Any, target: str, now: datetime, writes: Writes) -> None:
    """Move a memory forward to `target`, archiving and cutting its content on the way."""
    content = memory.content
    if target in AGED and memory.stage not in AGED:
        shorter = summary.summarize(content)
        writes.log(memory, "content", content, shorter, "archive", now)
        content = shorter
    if target == "rehydratable" and memory.stage != "rehydratable":
        key = summary.key_of(content)
        writes.log(memory, "content", content, key, "key_only", now)
        content = key
    changed = content if content != memory.content else None
    writes.move(memory, now, f"lifecycle:{target}", target, content=changed)


def rekindle(
    session: Session, memory: Any, now: datetime, operation: str, writes: Writes | None = None
) -> tuple[str, Restored]:
    """Bring a memory back to active; returns (content, how: full | summary | none).
    Its writes go into `writes` when given (the caller flushes), else are made now."""
    pending = writes if writes is not None else Writes()
    how: Restored = "full"
    content = memory.content
    if memory.stage not in AGED:
        if memory.stage != "active":
            pending.move(memory, now, operation, "active")
    else:
        full = history.full_text(session, memory)
        if full is not None:
            content, lossy = full, False
        else:
            lossy = True
            how = "summary" if memory.stage == "archived" else "none"
        pending.log(memory, "content", memory.content, content, operation, now)
        changed = content if content != memory.content else None
        pending.move(memory, now, operation, "active", content=changed, lossy=lossy)
        events.record(
            session,
            namespace=memory.namespace,
            event_type="rehydrate",
            operation=operation,
            subject_kind="memory",
            subject_id=memory.id,
            payload={"from_stage": memory.stage, "restored": how},
        )
    if writes is None:
        pending.flush(session)
    return content, how


def revive(session: Session, namespace: str, memory_ids: list[str], operation: str) -> set[str]:
    """Bring back to active the aged (demoted, archived, rehydratable) memories among these
    live ones, full text restored, and count each as accessed now so that the next
    maintenance does not age it again at once; the ids it revived. A store that restates
    an aged memory's text calls it: the user said it again, so it belongs in recall in full.
    Rows are locked after the caller's turns, as forget and pinning lock them."""
    if not memory_ids:
        return set()
    now = datetime.now(UTC)
    rows = session.execute(
        select(*ROW)
        .where(
            Chunk.namespace == namespace,
            Chunk.id.in_(memory_ids),
            Chunk.doc_type == "memory",
            Chunk.valid_to.is_(None),
            Chunk.stage != "active",
        )
        .order_by(Chunk.id)
        .with_for_update()
    ).all()
    writes = Writes()
    for row in rows:
        rekindle(session, row, now, operation, writes)
    writes.flush(session)
    revived = {r.id for r in rows}
    access.record(session, sorted(revived), at=now)
    return revived


def full_texts_of(session: Session, hits: Sequence[Handed]) -> dict[tuple[str, str], str]:
    """The full texts of the aged memories among `hits` that this caller may rekindle (a
    read-only caller gets what is stored), read from their history without rekindling: an
    answer weighed with them rekindles only the memories it hands out (rekindle_hits)."""
    aged = [
        (h.namespace, h.id, h.content)
        for h in hits
        if h.doc_type == "memory" and h.stage in AGED and may_write(h.namespace)
    ]
    return history.full_texts(session, aged)


def rekindle_hits(session: Session, hits: Sequence[Handed], now: datetime | None = None) -> int:
    """Rekindle the aged memories among a read's hits and hand back their restored text.
    A memory another transaction holds is left for the next read (reads never wait)."""
    # A read-only caller still gets its hits, but cannot rekindle (restore) them.
    # Only aged hits need the locking read below (most reads have none: no statement at all).
    keys = [
        (h.namespace, h.id)
        for h in hits
        if h.doc_type == "memory" and h.stage in AGED and may_write(h.namespace)
    ]
    if not keys:
        return 0
    now = now or datetime.now(UTC)
    aged = session.execute(
        select(*ROW)
        .where(
            Chunk.doc_type == "memory",
            Chunk.stage.in_(AGED),
            Chunk.namespace.in_({k[0] for k in keys}),
            Chunk.id.in_([k[1] for k in keys]),
            namespaces.free_to_write(Chunk.namespace),  # a read never waits for an import
        )
        .with_for_update(skip_locked=True)
    ).all()
    restored = {}
    for memory in aged:
        restored[(memory.namespace, memory.id)], _ = rekindle(session, memory, now, "rekindle")
    for h in hits:
        if (h.namespace, h.id) in restored:
            h.content = restored[(h.namespace, h.id)]
            h.token_count = count_tokens(h.content)
    return len(restored)


def live_row(session: Session, memory_id: str, lock: bool = False, turn: bool = False) -> Any:
    """A live memory's lifecycle row; `lock` holds it, after (with `turn`) its namespace's
    write turn: a change that may rekindle it rewrites its text (namespaces.share)."""
    live = (Chunk.doc_type == "memory", Chunk.valid_to.is_(None), Chunk.id == memory_id)
    stmt = select(*ROW).where(*live)
    if turn:
        namespaces.share_of_memory(session, memory_id)
    row = session.execute(stmt.with_for_update() if lock else stmt).first()
    if row is None:
        raise NotFound(f"Memory not found: {memory_id}")
    return row


def rehydrate(session: Session, params: RehydrateIn, now: datetime | None = None) -> RehydrateOut:
    """S004 POST /debug/rehydrate/{id}: rekindle one memory now, whatever its stage."""
    now = now or datetime.now(UTC)
    memory = live_row(session, params.memory_id, lock=True, turn=True)
    content, how = rekindle(session, memory, now, "debug_rehydrate")
    access.record(session, [memory.id], at=now)
    temperature = access.temperatures(session, [(memory.namespace, memory.id)], now)
    return RehydrateOut(
        memory_id=memory.id,
        stage_before=memory.stage,
        stage="active",
        restored=how,
        lossy=how != "full",
        content=content,
        temperature=temperature.get((memory.namespace, memory.id), "cold"),
    )


def transition(session: Session, memories: list[Any], now: datetime) -> Counter[str]:
    """Move each memory to the stage its idle time calls for; counts what moved where."""
    moved: Counter[str] = Counter()
    writes = Writes()
    for memory in memories:
        target = due_stage(memory, now)
        if memory.queued and target in AGED:
            # Aging cuts the text, and the embedding queue would then embed the cut for good:
            # a memory still waiting for its vector ages once it has one (maintain drains the
            # queue first; else a later run).
            target = max(memory.stage, "demoted", key=STAGES.index)
        if target == memory.stage:
            continue
        if STAGES.index(target) > STAGES.index(memory.stage):
            age(memory, target, now, writes)
            moved[target] += 1
        else:  # used again, or now exempt: back to active
            rekindle(session, memory, now, "maintain", writes)
            moved["rekindled"] += 1
    writes.flush(session)
    return moved


def stage_counts(session: Session, namespace: str | None = None) -> dict[str, int]:
    from sqlalchemy import func

    stmt = (
        select(Chunk.stage, func.count())
        .where(Chunk.doc_type == "memory", Chunk.valid_to.is_(None))
        .group_by(Chunk.stage)
    )
    if namespace:
        stmt = stmt.where(Chunk.namespace == namespace)
    counts = dict(session.execute(stmt).tuples().all())
    return {stage: int(counts.get(stage, 0)) for stage in STAGES}
