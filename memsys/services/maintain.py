"""`memsys maintain`: vectors the embedding queue waits for, access counters, decay scores,
stage changes, consolidation.

Decay scores are written when a memory's S003 band changes (decay.moved_bands), not on every
run. Each step works in small transactions (a batch of memories each), so it can run beside
live traffic: rows a reader or writer holds are skipped (`SKIP LOCKED`) and picked up by the next
run. The queue comes first: chunks an upgrade queued to be embedded again, or indexed with
`--no-wait`, get their vectors here when no `memsys serve` / `memsys mcp` worker did it, and
consolidation compares memories by those vectors (it leaves a namespace where a memory still
has none to a later run). Every step is idempotent — a second run
right after the first changes nothing — and the whole run stops starting new batches once
its time budget is spent (the report says whether it finished, and why the queue failed
when the model did). `now` is injectable: tests
and the lifecycle benchmark move the clock instead of waiting. Run it daily from cron, e.g.

    15 3 * * *  /path/to/.venv/bin/memsys maintain --budget 300 >> ~/.memsys-maintain.log 2>&1
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import Any

from memsys.db import session_scope
from memsys.errors import BadSetting, shortened
from memsys.services import (
    access,
    consolidate,
    debug,
    decay,
    embedding_queue,
    events,
    lifecycle,
    namespaces,
)

log = logging.getLogger(__name__)

BATCH = 500
CANDIDATE_BATCH = 200


@dataclass
class Report:
    now: str
    embedded: int = 0
    counters_folded: int = 0
    rescored: int = 0
    moved: dict[str, int] = field(default_factory=dict)
    merged: int = 0
    traces_pruned: int = 0
    batches: int = 0
    seconds: float = 0.0
    complete: bool = False
    stages: dict[str, int] = field(default_factory=dict)
    # Why the queue was not drained when it failed (the model, usually): the CLI exits 1.
    queue_error: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def run(
    now: datetime | None = None,
    budget_s: float = 300.0,
    namespace: str | None = None,
    batch: int = BATCH,
) -> Report:
    """One maintenance pass; see the module docstring."""
    now = now or datetime.now(UTC)
    started = time.monotonic()
    report = Report(now=now.isoformat())

    def time_left() -> bool:
        return time.monotonic() - started < budget_s

    queue_done = False
    try:
        while time_left():  # chunks waiting for their vectors, a batch per transaction
            with session_scope() as session:
                embedded = embedding_queue.embed_pending(session, namespace=namespace)
                # Nothing taken: the queue is empty, or another process holds what is left
                # (a worker embedding it), which the run does not see done.
                left = 0 if embedded else embedding_queue.pending_count(session, namespace)
            report.embedded += embedded
            if not embedded:
                queue_done = not left
                break
    except BadSetting:  # MEMSYS_EMBEDDING_PROVIDER: the caller's to fix, before any step ran
        raise
    except Exception as exc:  # the model failed: the other steps need no model, and still run
        log.debug("maintenance: the embedding queue was not drained", exc_info=True)
        report.queue_error = shortened(f"{type(exc).__name__}: {exc}")
    while time_left():  # the day's accesses into the counters, a batch per transaction
        with session_scope() as session:
            taken, counters = access.fold_batch(session)
        report.counters_folded += counters
        if taken < access.FOLD_BATCH:
            break
    if namespace is None:  # traces older than the retention (MEMSYS_TRACE_RETENTION_DAYS)
        with session_scope() as session:
            report.traces_pruned = debug.prune_traces(session, now)

    moved: Counter[str] = Counter()
    after: tuple[str, str] = ("", "")
    stages_done = False
    while time_left():
        with session_scope() as session:
            rows = decay.batch_after(
                session, namespace, after, batch, columns=lifecycle.ROW, lock=True
            )
            if not rows:
                stages_done = True
                break
            decay.store_scores(session, decay.moved_bands(rows, decay.rescore(rows, now)))
            moved += lifecycle.transition(session, rows, now)
            report.rescored += len(rows)
            report.batches += 1
        after = (rows[-1].namespace, rows[-1].id)
    report.moved = dict(moved)

    merges_done = False
    closed: set[str] = set()
    while stages_done and time_left():
        with session_scope() as session:
            since = consolidate.watermark(session, namespace)
            chunks, waiting = consolidate.candidates(session, since, namespace, CANDIDATE_BATCH)
            if not chunks:
                merges_done = not waiting  # else the next one waits for its vector
                break
            merged_now = 0
            near = consolidate.near_duplicates(session, chunks)
            done = []  # the candidates gone through, up to one whose namespace is imported
            for chunk in chunks:
                if not namespaces.share_if_free(session, chunk.namespace):
                    break
                if chunk.id not in closed:
                    gone = consolidate.merge_one(session, chunk, now, near.get(chunk.id, []))
                    if gone is None:  # held by a writer: the next run starts from it
                        break
                    closed.update(gone)
                    merged_now += len(gone)
                done.append(chunk)
            if done:  # the watermark stops before a skipped candidate: the next run takes it
                consolidate.advance(session, done[-1], merged_now, namespace)
            report.merged += merged_now
            report.batches += 1
            if len(done) < len(chunks):
                break

    report.complete = queue_done and stages_done and merges_done
    report.seconds = round(time.monotonic() - started, 3)
    with session_scope() as session:
        report.stages = lifecycle.stage_counts(session, namespace)
        events.record(
            session,
            namespace=namespace or "*",
            event_type="maintenance",
            operation="maintain",
            payload=report.as_dict(),
        )
    return report
