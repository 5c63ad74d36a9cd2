"""Pinning: exempt from decay, demotion, archiving and merges; score 999; in the history."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from sqlalchemy import select

from memsys import runner
from memsys.db import session_scope
from memsys.errors import NotFound
from memsys.models import Chunk, MemoryChange
from memsys.schemas import MemoryForgetIn
from memsys.schemas.lifecycle import DecayIn, PinIn
from memsys.services import access, decay, maintain, memories, pinning
from tests.factories import store
from tests.services.test_lifecycle import days, row

PINNED_TEXT = (
    "The disaster recovery runbook lives in the ops wiki under DR. "
    "It lists the order in which services come back: database, queue, API, then the web. "
    "Each step names its owner and the command that checks it is healthy. "
    "The runbook is rehearsed twice a year with the whole on-call rota."
)


def pin(memory_id: str, now: datetime | None = None) -> Any:
    with session_scope() as s:
        return pinning.pin(s, PinIn(memory_id=memory_id), now=now)


def unpin(memory_id: str, now: datetime | None = None) -> Any:
    with session_scope() as s:
        return pinning.unpin(s, PinIn(memory_id=memory_id), now=now)


def test_a_pinned_memory_never_ages_nor_decays_and_scores_999(embedder: Any) -> None:
    kept = store(PINNED_TEXT, memory_type="procedure", importance=0.2).id
    twin = store(PINNED_TEXT.replace("ops wiki", "team wiki"), memory_type="general").id
    answer = pin(kept)
    assert (answer.pinned, answer.changed, answer.decay_score) == (True, True, 999.0)
    assert answer.temperature == "pinned"
    assert pin(kept).changed is False  # pinning twice is pinning once

    report = maintain.run(now=days(120))
    assert report.complete
    assert (row(kept).stage, row(kept).content, row(kept).decay_score) == (
        "active",
        PINNED_TEXT,
        999.0,
    )
    assert row(twin).stage == "rehydratable"  # the same text, unpinned, aged away
    with session_scope() as s:
        out = decay.decay(s, DecayIn(threshold=0.99, scope="long"), now=days(200))
        assert (out.entries_scanned, out.entries_decayed, out.by_status) == (1, 0, {"active": 1})
        assert access.temperature_counts(s, None, days(200))["pinned"] == 1


def test_a_pinned_near_duplicate_is_never_merged_away(embedder: Any) -> None:
    pinned = store("The deploy script lives in tools/deploy.sh", memory_type="fact").id
    other = store("The deploy script lives in tools/deploy.sh.", memory_type="fact").id
    with session_scope() as s:  # the unpinned one has more standing but for the pin
        s.execute(Chunk.__table__.update().where(Chunk.id == other).values(confidence=0.85))
    pin(pinned)
    assert maintain.run(now=days(0)).merged == 1
    assert row(pinned).valid_to is None and row(other).valid_to is not None


def test_pinning_an_archived_memory_brings_its_text_back_and_unpinning_lets_it_age(
    embedder: Any,
) -> None:
    memory = store(PINNED_TEXT, memory_type="configuration").id
    maintain.run(now=days(40))
    assert row(memory).stage == "archived" and row(memory).content != PINNED_TEXT
    answer = pin(memory, now=days(41))
    assert (answer.stage, row(memory).stage, row(memory).content) == (
        "active",
        "active",
        PINNED_TEXT,
    )
    assert row(memory).lossy is False
    off = unpin(memory, now=days(42))
    assert (off.pinned, off.changed) == (False, True) and off.decay_score < 1
    assert row(memory).pinned is False
    maintain.run(now=days(42 + 40))  # unpinned: aged again by its idle time
    assert row(memory).stage == "archived"


def test_pin_and_unpin_are_in_the_history_as_of_any_time(embedder: Any) -> None:
    memory = store("The VPN config is rotated monthly").id
    before = datetime.now(UTC)
    pin(memory, now=days(1))
    unpin(memory, now=days(3))
    with session_scope() as s:
        changes = s.execute(
            select(MemoryChange.old_value, MemoryChange.new_value, MemoryChange.operation)
            .where(MemoryChange.memory_id == memory, MemoryChange.field == "pinned")
            .order_by(MemoryChange.changed_at)
        ).all()
        assert [tuple(c) for c in changes] == [
            (False, True, "memory_pin"),
            (True, False, "memory_unpin"),
        ]
        current = row(memory)
        was = [pinning.pinned_as_of(s, current, t) for t in (before, days(2), days(4))]
    assert was == [False, True, False]


def test_pinning_an_unknown_memory_is_refused(embedder: Any) -> None:
    with pytest.raises(NotFound, match="Memory not found: mem_nope"):
        pin("mem_nope")
    gone = store("A memory about to be forgotten").id
    runner.execute(memories.forget, MemoryForgetIn, {"memory_id": gone, "force": True})
    with pytest.raises(NotFound):
        unpin(gone)
