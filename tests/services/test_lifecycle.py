"""The four stages move with a clock the test controls; aged memories come back in full;
exempt memories never age; every signal can be read as of before its change."""

from __future__ import annotations

import math
import threading
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import func, select, text, update
from sqlalchemy.orm import Session

from memsys import deferred, runner
from memsys.db import get_engine, session_scope
from memsys.models import Chunk, Edge, Event, MemoryAccess, MemoryChange, QueryTrace
from memsys.retrieval import pipeline, rank
from memsys.schemas import MemoryForgetIn, MemoryListIn, MemoryRecallIn, MemoryStoreIn
from memsys.schemas.learning import MemoryOutcomeIn
from memsys.schemas.lifecycle import DecayIn, MemoryGetIn
from memsys.schemas.query import QueryIn
from memsys.services import (
    access,
    history,
    learning,
    maintain,
    memories,
    memory_get,
    namespaces,
    query,
)
from memsys.services import decay as decay_rules
from tests.factories import index, queue_for_embedding, store

LONG = (
    "The nightly backup job copies the Postgres base backup to the storage bucket. "
    "It runs at two in the morning and keeps fourteen days of backups. "
    "If the bucket is full the job fails and pages the on-call engineer. "
    "Old backups are pruned by a lifecycle rule on the bucket, not by the job itself. "
    "Restores are tested every quarter by restoring into a scratch database and "
    "running the smoke tests against it."
)


def days(n: float) -> datetime:
    return datetime.now(UTC) + timedelta(days=n)


def row(memory_id: str) -> Chunk:
    with session_scope() as s:
        chunk = s.scalars(select(Chunk).where(Chunk.id == memory_id)).one()
        s.expunge(chunk)
        return chunk


def recall(query: str) -> Any:
    return runner.execute(memories.recall, MemoryRecallIn, {"query": query})


def test_s003_decay_formula_and_bands() -> None:
    # never accessed: usage factor 0.5; procedure weight 1.4
    assert decay_rules.score(0.8, 0, 0, "procedure") == 0.8 * 0.5 * 1.4
    # three accesses, ten days idle, a fix (weight 1.0): 0.6 · e^-0.3 · log2(4)
    assert abs(decay_rules.score(0.6, 10, 3, "fix") - 0.6 * 0.7408182 * 2) < 1e-6
    assert decay_rules.score(0.1, 400, 0, "general", pinned=True) == 999.0
    assert decay_rules.type_weight("preference") == 1.0  # a type S003 does not weigh
    bands = [decay_rules.status(v) for v in (0.5, 0.49, 0.2, 0.19, 0.05, 0.049)]
    assert bands == ["active", "fading", "fading", "dormant", "dormant", "archived"]


def test_confidence_moves_a_rank_by_at_most_the_cap() -> None:
    assert rank.confidence_factor(rank.BASE_CONFIDENCE) == 1.0
    assert rank.confidence_factor(1.0) == 1 + rank.CONFIDENCE_CAP
    assert rank.confidence_factor(0.0) == 1 - rank.CONFIDENCE_CAP
    levels = [i / 10 for i in range(11)]
    factors = [rank.confidence_factor(c) for c in levels]
    assert factors == sorted(factors)  # monotone
    assert rank.factor(0.3, "active", 0.2) == 1.0  # a fresh memory is ranked as fused
    assert rank.factor(0.3, "archived", 0.2) == 0.1 and rank.factor(0.3, "archived", 0.9) == 1.0


def test_stages_follow_the_clock_and_a_match_rekindles_in_full(embedder: Any) -> None:
    memory = store(LONG, memory_type="configuration").id
    maintain.run(now=days(3))
    assert row(memory).stage == "active"
    report = maintain.run(now=days(8))
    assert report.moved == {"demoted": 1} and report.complete
    assert row(memory).stage == "demoted" and row(memory).content == LONG
    maintain.run(now=days(31))
    archived = row(memory)
    assert archived.stage == "archived" and archived.content != LONG
    assert archived.content.startswith("The nightly backup job copies")
    assert archived.token_count <= 50 < len(LONG.split())
    maintain.run(now=days(91))
    key = row(memory)
    assert key.stage == "rehydratable" and len(key.content.split()) <= 13
    again = maintain.run(now=days(91))  # idempotent: nothing left to move
    assert again.moved == {} and again.merged == 0

    found = recall("when does the nightly Postgres backup run and how long are backups kept")
    assert found.memories[0].id == memory
    assert found.memories[0].content == LONG  # the caller gets the full text at once
    back = row(memory)
    assert (back.stage, back.content, back.lossy) == ("active", LONG, False)


def test_query_and_context_hand_out_an_archived_memory_in_full(embedder: Any) -> None:
    from memsys.schemas.memories import MemoryContextIn
    from memsys.services import context

    asked = "when does the nightly Postgres backup run and how long are backups kept"
    for tool in ("query", "context"):
        memory = store(LONG, memory_type="configuration", namespace=f"age:{tool}").id
        maintain.run(now=days(31))
        assert row(memory).stage == "archived" and row(memory).content != LONG
        if tool == "query":
            out = runner.execute(query.query, QueryIn, {"query": asked, "namespace": "age:query"})
            assert out.core_chunks[0].id == memory and LONG in out.output
        else:
            fields = {"query": asked, "namespace": "age:context", "token_budget": 400}
            shown = runner.execute(context.context, MemoryContextIn, fields).context
            assert " ".join(LONG.split()) in shown
        assert (row(memory).stage, row(memory).content) == ("active", LONG)


def test_context_without_a_query_hands_out_an_archived_memory_in_full(embedder: Any) -> None:
    """memory_context with no query listed an archived memory by its stored summary and left
    it archived; with a query it came back in full (the same memory, the same tool)."""
    from memsys.schemas.memories import MemoryContextIn
    from memsys.services import context

    memory = store(LONG, memory_type="configuration", namespace="age:plain").id
    maintain.run(now=days(31))
    assert row(memory).stage == "archived" and row(memory).content != LONG
    fields = {"namespace": "age:plain", "token_budget": 400}
    out = runner.execute(context.context, MemoryContextIn, fields)
    assert out.memory_ids == [memory]
    assert " ".join(LONG.split()) in out.context
    assert (row(memory).stage, row(memory).content) == ("active", LONG)
    # a budget that holds the summary but not the full text hands out nothing (weighed in full)
    maintain.run(now=days(62))
    assert row(memory).stage == "archived"
    small = runner.execute(context.context, MemoryContextIn, {**fields, "token_budget": 60})
    assert small.memory_ids == [] and row(memory).stage == "archived"


def test_only_the_archived_memories_handed_out_are_rekindled(embedder: Any) -> None:
    """memory_context rekindled all its 50 candidates and memory_query every hit that might
    be handed out, however few the budget kept."""
    from memsys.schemas.memories import MemoryContextIn
    from memsys.services import context

    asked = "when does the nightly Postgres backup run and how long are backups kept"
    kinds = ("configuration", "fact", "decision", "procedure", "fix", "insight")
    kinds += ("general", "workflow")  # one of each: consolidation merges none of them
    ids = [
        store(f"Backup note {n}. {LONG}", memory_type=kind, namespace="many").id
        for n, kind in enumerate(kinds)
    ]
    # budgets where a full text no longer fits and lets another, still aged, in
    runs = [("query", 84), ("query", 132), ("query", 150), ("context", 90), ("context", 160)]
    shown = 0
    for n, (tool, budget) in enumerate(runs, start=1):
        maintain.run(now=days(31 * n))  # every one aged again (later ones to a key)
        assert {row(m).stage for m in ids} <= {"archived", "rehydratable"}
        if tool == "query":
            fields = {"query": asked, "namespace": "many", "top_k": 1, "max_tokens": budget}
            out = runner.execute(query.query, QueryIn, fields)
            handed = {c.id for c in out.core_chunks + out.extended_chunks}
            assert all("Backup note" not in c.snippet or c.id in ids for c in out.core_chunks)
        else:
            fields = {"query": asked, "namespace": "many", "token_budget": budget}
            handed = set(runner.execute(context.context, MemoryContextIn, fields).memory_ids)
        # rekindled: exactly the memories handed out (weighed with their full texts)
        active = {m for m in ids if row(m).stage == "active"}
        assert active == handed & set(ids), (tool, budget, active, handed)
        assert all(row(m).content.startswith("Backup note") for m in active)
        shown += len(active)
    assert shown >= 3  # most runs hand out one


def test_exempt_memories_never_age(embedder: Any) -> None:
    golden = store("Never force-push to main", memory_type="golden_rule").id
    personal = store("The user likes dark themes", memory_type="preference").id
    truth = store("Water boils at 100 C at sea level", metadata={"ground_truth": True}).id
    pinned = store("The office wifi password is in the vault").id
    plain = store("The staging cluster has three nodes").id
    with session_scope() as s:
        s.execute(update(Chunk).where(Chunk.id == pinned).values(pinned=True))
    maintain.run(now=days(120))
    stages = {m: row(m).stage for m in (golden, personal, truth, pinned, plain)}
    assert stages == {
        golden: "active",
        personal: "active",
        truth: "active",
        pinned: "active",
        plain: "rehydratable",
    }
    assert row(pinned).decay_score == 999.0


def test_maintenance_writes_a_decay_score_only_when_its_band_changes(embedder: Any) -> None:
    memory = store("The test fleet reboots weekly", memory_type="general", importance=0.5).id
    # 0.5 · 0.5 · 0.8 = 0.2 (fading) when fresh; e^-0.03 a day after: 0.194 (dormant)
    maintain.run(now=days(1))
    first = row(memory).decay_score
    assert first is not None and abs(first - 0.2 * math.exp(-0.03)) < 1e-3
    maintain.run(now=days(2))  # still dormant: the stored score is not rewritten
    assert row(memory).decay_score == first
    maintain.run(now=days(60))  # 0.2 · e^-1.8 = 0.033: below 0.05, a new band
    assert abs(row(memory).decay_score - 0.2 * math.exp(-1.8)) < 1e-3


def test_decay_writes_a_score_only_when_its_band_or_its_threshold_is_crossed(
    embedder: Any,
) -> None:
    memory = store("The lab printer jams on thick paper", memory_type="general").id

    def decay_at(day: float) -> Any:
        with session_scope() as s:
            return decay_rules.decay(s, DecayIn(threshold=0.1), now=days(day))

    decay_at(1)  # 0.2 · e^-0.03 = 0.194: dormant, above 0.1
    first = row(memory).decay_score
    assert first is not None and abs(first - 0.2 * math.exp(-0.03)) < 1e-3
    # Same band, same side of the threshold: the row is not rewritten (a rewrite of every
    # memory made decay over 9,000 memories take 18 s beside writers)
    assert decay_at(2).entries_decayed == 0
    assert row(memory).decay_score == first
    # 0.2 · e^-0.75 = 0.094: still dormant but below the threshold, stored and counted once
    assert decay_at(25).entries_decayed == 1
    assert abs(row(memory).decay_score - 0.2 * math.exp(-0.75)) < 1e-3
    assert decay_at(26).entries_decayed == 0


def test_an_outcome_that_makes_an_aged_memory_golden_brings_it_back_in_full(
    embedder: Any,
) -> None:
    memory = store(LONG, memory_type="configuration").id
    maintain.run(now=days(40))
    assert row(memory).stage == "archived"
    for _ in range(6):  # 0.3 → 0.9: a golden rule, exempt and always active
        answer = runner.execute(
            learning.outcome, MemoryOutcomeIn, {"memory_id": memory, "success": True}
        )
    assert answer.promoted
    # was left archived, its summary standing for a golden rule until the next maintenance
    assert (row(memory).stage, row(memory).content) == ("active", LONG)


def test_storing_an_aged_memory_again_brings_it_back_in_full(embedder: Any) -> None:
    """Storing the exact text of an archived memory deduplicated onto it and left it
    archived: the user said it again, and it stayed out of recall's full strength with its
    summary for text. It comes back active and in full now, and the answer says so; so does
    a batch's, for a rehydratable one (a key for text)."""
    from memsys.schemas import MemoryStoreBatchIn

    memory = store(LONG, memory_type="configuration", namespace="age:again").id
    maintain.run(now=days(40))
    assert row(memory).stage == "archived"
    again = store(LONG, memory_type="configuration", namespace="age:again")
    assert (again.id, again.duplicate, again.revived) == (memory, True, True)
    back = row(memory)
    assert (back.stage, back.content, back.lossy) == ("active", LONG, False)
    assert not store(LONG, namespace="age:again").revived  # active already: nothing to do

    maintain.run(now=days(100))
    assert row(memory).stage == "rehydratable"
    items = [{"content": LONG, "namespace": "age:again"}, {"content": "A new note"}]
    out = runner.execute(memories.store_batch, MemoryStoreBatchIn, {"memories": items})
    assert [(r.duplicate, r.revived) for r in out.results] == [(True, True), (False, False)]
    assert (row(memory).stage, row(memory).content) == ("active", LONG)


def test_briefs_name_an_aged_memory_by_its_full_text(embedder: Any) -> None:
    """CORE.md, REFLECTION.md and the episode log titled an archived or rehydratable memory
    by what aging left of it (a summary, a 12-word key), and CORE.md linked to a file named
    after that stub, which the export (it writes the full text) never makes."""
    from memsys.services import briefs, reflection
    from memsys.vault import markdown

    ns = "age:briefs"
    memory = store(LONG, memory_type="insight", namespace=ns, importance=1.0).id
    maintain.run(now=days(100))
    aged = row(memory)
    assert aged.stage == "rehydratable" and aged.content != LONG
    title, stub = briefs.title_of(LONG), briefs.title_of(aged.content)
    now = datetime.now(UTC)
    with session_scope() as s:
        core = briefs.core_brief(s, ns, now)
        log = briefs.episode_log(s, ns, now.date())
        reflected = reflection.reflection_brief(s, ns, now)
    record = {"pinned": False, "type": "insight", "content": LONG, "metadata": {}, "id": memory}
    assert f"- [{title}]({markdown.memory_path(record)})" in core
    assert f" - {title}\n" in log
    assert f"[{title}](" in reflected
    for text_ in (core, log, reflected):
        assert stub not in text_


def test_confidence_and_stage_read_as_of_before_their_change(embedder: Any) -> None:
    memory = store("Cache keys include the tenant id").id
    key = (row(memory).namespace, memory)
    before = datetime.now(UTC)
    runner.execute(learning.outcome, MemoryOutcomeIn, {"memory_id": memory, "success": True})
    maintain.run(now=days(10))
    with session_scope() as s:
        now = history.signals_as_of(s, [key], None)[key]
        then = history.signals_as_of(s, [key], before)[key]
    assert (now["confidence"], now["stage"]) == (0.4, "demoted")
    assert (then["confidence"], then["stage"]) == (0.3, "active")


def test_an_archived_memory_reads_in_full_as_of_before_its_archiving(embedder: Any) -> None:
    memory = store(LONG, memory_type="configuration").id
    before = datetime.now(UTC)
    maintain.run(now=days(40))
    assert row(memory).stage == "archived" and row(memory).content != LONG
    question = "when does the nightly Postgres backup run and how long are backups kept"
    with session_scope() as s:
        then = pipeline.retrieve(s, question, limit=3, as_of=before).hits
        now = pipeline.retrieve(s, question, limit=3).hits
    assert (then[0].id, then[0].content) == (memory, LONG)
    assert then[0].token_count > row(memory).token_count  # counted for the text it gives
    assert (now[0].id, now[0].content) == (memory, row(memory).content)
    answer = runner.execute(query.query, QueryIn, {"query": question, "as_of": before})
    assert "Restores are tested every quarter" in answer.output
    assert row(memory).stage == "archived"  # reading the past changed nothing
    today = runner.execute(query.query, QueryIn, {"query": question})
    assert "Restores are tested every quarter" in today.output  # rekindled by today's read
    assert (row(memory).stage, row(memory).content) == ("active", LONG)


def test_reads_log_accesses_and_a_fold_counts_them_into_the_row(embedder: Any) -> None:
    memory = store("The CDN caches images for a week").id
    recall("how long does the CDN cache images")
    recall("CDN image cache duration")
    key = (row(memory).namespace, memory)
    with session_scope() as s:
        logged = s.execute(
            select(MemoryAccess.hits, MemoryAccess.counted).where(MemoryAccess.memory_id == memory)
        )
        assert [tuple(r) for r in logged] == [(1, False), (1, False)]
    # A read never rewrites the memory's row (its indexes, HNSW included, stay as they were)…
    assert row(memory).access_count == 0
    with session_scope() as s:
        assert access.live(s, [key])[key].access_count == 2  # …yet callers are shown both
        assert access.fold(s) == 1  # one counter moved
    assert row(memory).access_count == 2
    with session_scope() as s:
        assert access.live(s, [key])[key].access_count == 2  # not counted twice
        assert access.temperatures(s, [key], datetime.now(UTC)) == {key: "warm"}
        assert access.temperatures(s, [key], days(40)) == {key: "cold"}


def test_reads_leave_the_memory_row_as_it_was(embedder: Any) -> None:
    """Not even a new row version: an approximate index (HNSW) that changes under reads
    would answer a replayed query differently from the original."""
    memory = store("The release train leaves every other Wednesday").id

    def version() -> str:
        with session_scope() as s:
            where = {"id": memory}
            return str(
                s.scalar(text("SELECT xmin::text || ctid::text FROM chunk WHERE id = :id"), where)
            )

    before = version()
    recall("when does the release train leave")
    runner.execute(memory_get.get, MemoryGetIn, {"memory_id": memory})
    assert version() == before


def test_decisions_see_accesses_not_folded_yet(embedder: Any) -> None:
    """Decay, stages and CORE.md read the live figure: a memory in daily use is not judged
    by counters maintenance has not folded yet."""
    memory = store("The on-call rota is in the ops wiki").id
    for _ in range(3):
        recall("where is the on-call rota")
    assert row(memory).access_count == 0  # nothing folded
    with session_scope() as s:
        [seen] = [r for r in decay_rules.batch_after(s, None, ("", ""), 50) if r.id == memory]
    assert seen.access_count == 3 and seen.last_accessed_at is not None


def test_the_listing_shows_and_orders_by_accesses_not_folded_yet(embedder: Any) -> None:
    quiet = store("The build cache lives in S3", namespace="project:list").id
    busy = store("The release train leaves on Tuesdays", namespace="project:list").id
    uncounted(busy, 6)
    uncounted(quiet, 1)
    with session_scope() as s:  # one counter folded, the other's accesses still in the log
        s.execute(update(Chunk).where(Chunk.id == quiet).values(access_count=4))
    # Stored counters say quiet (4) before busy (0); the live figures say busy (6) first.
    listing = runner.execute(
        memories.list_memories,
        MemoryListIn,
        {"namespace": "project:list", "order_by": "access_count", "descending": True},
    )
    assert [(m.id, m.access_count) for m in listing.memories] == [(busy, 6), (quiet, 5)]


def test_a_fold_takes_the_log_a_bounded_batch_at_a_time(embedder: Any) -> None:
    memory = store("The staging VPN uses port 1194").id
    uncounted(memory, 3)
    with session_scope() as s:
        assert access.fold_batch(s, limit=2) == (2, 1)  # two log rows, one counter
    with session_scope() as s:
        assert access.fold_batch(s, limit=2) == (1, 1)  # the rest: fewer than a batch
        assert access.fold_batch(s, limit=2) == (0, 0)
    assert row(memory).access_count == 3


def uncounted(memory_id: str, n: int) -> None:
    """Log accesses the way a read whose bump was skipped leaves them."""
    namespace = row(memory_id).namespace
    with session_scope() as s:
        for _ in range(n):
            s.add(MemoryAccess(namespace=namespace, memory_id=memory_id, counted=False))


def log_total(memory_id: str) -> int:
    with session_scope() as s:
        hits = s.scalars(select(MemoryAccess.hits).where(MemoryAccess.memory_id == memory_id))
        return sum(hits)


def test_fold_takes_only_new_accesses_and_counts_each_once(embedder: Any) -> None:
    a = store("The search cluster reindexes on Sundays").id
    b = store("The mail relay rejects attachments over 20 MB").id
    recall("when does the search cluster reindex")  # logged (one or both hits)
    with session_scope() as s:
        access.fold(s)
    read = {m: row(m).access_count for m in (a, b)}
    assert read[a] == 1
    uncounted(a, 2)
    uncounted(b, 3)
    with session_scope() as s:
        assert access.fold(s) == 2  # two counters moved
    after = {m: row(m).access_count for m in (a, b)}
    assert after == {a: read[a] + 2, b: read[b] + 3} == {m: log_total(m) for m in (a, b)}
    with session_scope() as s:
        assert access.fold(s) == 0  # a second run finds nothing new…
        pending = s.scalars(select(MemoryAccess.id).where(MemoryAccess.counted.is_(False)))
        assert list(pending) == []
    assert {m: row(m).access_count for m in (a, b)} == after  # …and counts nothing twice

    uncounted(a, 1)
    with session_scope() as first:  # a fold in flight…
        assert access.fold(first) == 1
        with session_scope() as second:  # …and one beside it, which leaves the work to it
            assert access.fold(second) == 0
    assert row(a).access_count == log_total(a) == after[a] + 1
    with session_scope() as s:
        assert access.fold(s) == 0


def test_near_duplicates_are_consolidated_once(embedder: Any) -> None:
    first = store("The deploy script lives in tools/deploy.sh", memory_type="fact").id
    second = store("The deploy script lives in tools/deploy.sh.", memory_type="fact").id
    other = store("Grafana dashboards are provisioned from JSON files", memory_type="fact").id
    report = maintain.run(now=days(0))
    assert report.merged == 1
    with session_scope() as s:
        live = set(s.scalars(memories.live_memories().with_only_columns(Chunk.id)))
        assert other in live and len(live & {first, second}) == 1
        survivor = (live & {first, second}).pop()
        gone = ({first, second} - {survivor}).pop()
        edge = s.scalars(select(Edge).where(Edge.relation == "supersedes")).one()
        assert (edge.source_id, edge.target_id) == (survivor, gone)
        episode = s.scalars(select(Event).where(Event.event_type == "episode")).one()
        assert episode.payload["merged"] == [gone]
    assert maintain.run(now=days(0)).merged == 0


def test_a_merge_into_an_aged_memory_is_titled_by_its_full_text(embedder: Any) -> None:
    """The merge's episode event took its title from the survivor's row: for an archived
    survivor, aging's summary, not the memory."""
    kept = store(LONG, memory_type="configuration", namespace="age:merge").id
    runner.execute(learning.outcome, MemoryOutcomeIn, {"memory_id": kept, "success": True})
    maintain.run(now=days(40))
    assert row(kept).stage == "archived"
    store(LONG + " Ask the on-call engineer.", memory_type="configuration", namespace="age:merge")
    assert maintain.run(now=days(40)).merged == 1
    with session_scope() as s:
        episode = s.scalars(
            select(Event).where(Event.event_type == "episode", Event.namespace == "age:merge")
        ).one()
    assert episode.subject_id == kept
    assert episode.payload["title"] == LONG[:80]


def test_a_merge_keeps_the_tags_metadata_and_importance_of_what_it_closes(
    embedder: Any,
) -> None:
    """The survivor kept only its own fields: the closed twin's tags, metadata keys and
    higher importance were gone from every live read (a tag filter, decay's score)."""
    closed = store(
        "The deploy script lives in tools/deploy.sh",
        memory_type="fact",
        tags=["deploy"],
        metadata={"ticket": "OPS-1", "owner": "ops"},
        importance=0.9,
    ).id
    kept = store(
        "The deploy script lives in tools/deploy.sh.",
        memory_type="fact",
        tags=["scripts"],
        metadata={"owner": "platform"},
    ).id
    runner.execute(learning.outcome, MemoryOutcomeIn, {"memory_id": kept, "success": True})
    assert maintain.run(now=days(0)).merged == 1
    survivor = row(kept)
    assert survivor.valid_to is None and row(closed).valid_to is not None
    assert survivor.tags == ["scripts", "deploy"]
    assert survivor.meta == {"owner": "platform", "ticket": "OPS-1"}  # its own value first
    assert survivor.importance == 0.9
    assert maintain.run(now=days(0)).merged == 0


def test_a_merge_moves_the_relations_of_what_it_closes_to_the_survivor(
    embedder: Any,
) -> None:
    """A relation of the closed twin stayed on it: the graph walks live memories only, so
    it was gone from every read (memory_inspect_graph from either end found nothing)."""
    from memsys.schemas.edges import MemoryInspectIn, MemoryRelateIn
    from memsys.services import edges

    closed = store("The deploy script lives in tools/deploy.sh", memory_type="fact").id
    kept = store("The deploy script lives in tools/deploy.sh.", memory_type="fact").id
    other = store("Deploys need the VPN to be up", memory_type="fact").id
    related = {"relation": "related_to", "context": "both about deploys"}
    runner.execute(edges.relate, MemoryRelateIn, {"source_id": closed, "target_id": other,
                                                  **related})  # fmt: skip
    runner.execute(learning.outcome, MemoryOutcomeIn, {"memory_id": kept, "success": True})
    before = datetime.now(UTC)
    assert maintain.run(now=days(0)).merged == 1
    graph = runner.execute(edges.inspect, MemoryInspectIn, {"memory_id": other})
    assert [(e.source, e.relation, e.target) for e in graph.edges] == [(kept, "related_to", other)]
    with session_scope() as s:
        moved = s.scalars(select(Edge).where(Edge.source_id == kept, Edge.target_id == other))
        assert [e.context for e in moved] == ["both about deploys"]
    then = runner.execute(edges.inspect, MemoryInspectIn, {"memory_id": other, "as_of": before})
    assert [(e.source, e.target) for e in then.edges] == [(closed, other)]  # as it was
    assert maintain.run(now=days(0)).merged == 0


def test_a_merge_moves_relations_at_the_time_the_pass_runs_at(embedder: Any) -> None:
    """The memory a merge closes ended at the pass's `now`, its relations at the
    transaction's: as of a time between the two, the relation was on neither end."""
    from memsys.schemas.edges import MemoryRelateIn
    from memsys.services import edges

    closed = store("The deploy script lives in tools/deploy.sh", memory_type="fact").id
    kept = store("The deploy script lives in tools/deploy.sh.", memory_type="fact").id
    other = store("Deploys need the VPN to be up", memory_type="fact").id
    runner.execute(edges.relate, MemoryRelateIn, {"source_id": closed, "target_id": other,
                                                  "relation": "related_to"})  # fmt: skip
    runner.execute(learning.outcome, MemoryOutcomeIn, {"memory_id": kept, "success": True})
    at = days(1)
    assert maintain.run(now=at).merged == 1
    assert row(closed).valid_to == at
    with session_scope() as s:
        old = s.scalars(select(Edge).where(Edge.source_id == closed, Edge.target_id == other))
        new = s.scalars(select(Edge).where(Edge.source_id == kept, Edge.target_id == other))
        assert [e.valid_to for e in old] == [at]
        assert [(e.valid_from, e.valid_to) for e in new] == [(at, None)]


def test_a_project_memory_is_never_merged_into_session_scratch(embedder: Any) -> None:
    """The survivor had the most accesses: the session copy, which decay then deleted as
    scratch — the project memory was gone with it, though decay never deletes one."""
    kept = store("The deploy script lives in tools/deploy.sh", memory_type="fact").id
    scratch = store(
        "The deploy script lives in tools/deploy.sh.", memory_type="fact", lifecycle="session"
    ).id
    recall("where does the deploy script live")  # both handed out…
    runner.execute(memory_get.get, MemoryGetIn, {"memory_id": scratch})  # …the scratch twice
    assert maintain.run(now=days(0)).merged == 1
    with session_scope() as s:
        live = set(s.scalars(memories.live_memories().with_only_columns(Chunk.id)))
    assert live == {kept}


def test_a_correction_is_never_merged_into_the_statement_it_corrects(embedder: Any) -> None:
    """As alike in meaning as a repeat, but the opposite: a merge kept the older, stale one."""
    stale = store("auth.ts depends on token.ts", memory_type="fact").id
    fixed = store("auth.ts no longer depends on token.ts", memory_type="fact").id
    twin = store("auth.ts no longer depends on token.ts.", memory_type="fact").id
    report = maintain.run(now=days(0))
    assert report.merged == 1  # the repeat of the correction still goes
    with session_scope() as s:
        live = set(s.scalars(memories.live_memories().with_only_columns(Chunk.id)))
    assert stale in live and len(live & {fixed, twin}) == 1


def test_maintain_embeds_queued_memories_then_consolidates_them(embedder: Any) -> None:
    """Where no server's worker runs (the CLI alone, after an upgrade queued long memories),
    `memsys maintain` gives queued memories their vectors first; consolidation, which compares
    by vectors, then merges the near-duplicates among them rather than passing them by."""
    first = store("The deploy script lives in tools/deploy.sh", memory_type="fact").id
    second = store("The deploy script lives in tools/deploy.sh.", memory_type="fact").id
    queue_for_embedding(first, second)
    report = maintain.run(now=days(0))
    assert report.embedded == 2 and report.merged == 1
    with session_scope() as s:
        assert s.scalar(text("SELECT count(*) FROM chunk WHERE embedding IS NULL")) == 0


def test_consolidation_stops_before_a_namespace_still_waiting_for_a_vector(embedder: Any) -> None:
    """The watermark moves past every candidate a run looks at, so a memory of a namespace
    where one still has no vector (it, or a twin the nearest search cannot see yet) must end
    the run's candidates: it is merged later, once embedded, never skipped for good."""
    from memsys.services import consolidate

    other = store("Grafana dashboards are provisioned from JSON files", namespace="ns-y").id
    store("The deploy script lives in tools/deploy.sh", memory_type="fact", namespace="ns-x")
    waiting = store("The deploy script lives in tools/deploy.sh.", namespace="ns-x").id
    store("Alerts go to the on-call channel", memory_type="fact", namespace="ns-y")
    queue_for_embedding(waiting)
    with session_scope() as s:
        chunks, waiting_seen = consolidate.candidates(s, None, None, 10)
        assert [c.id for c in chunks] == [other] and waiting_seen


def run_while_embedding_elsewhere(memory_id: str) -> maintain.Report:
    """A maintenance run while another worker holds the queued row as it embeds it."""
    with Session(get_engine()) as worker:
        worker.execute(text("SELECT 1 FROM chunk WHERE id = :id FOR UPDATE"), {"id": memory_id})
        held = maintain.run(now=days(0))
        worker.rollback()
    return held


def test_a_run_that_cannot_embed_a_queued_memory_says_it_is_not_complete(embedder: Any) -> None:
    """A queued memory another process is embedding (its row locked) holds consolidation
    back: the report says the run did not finish, and the next run merges it."""
    store("The deploy script lives in tools/deploy.sh", memory_type="fact")
    twin = store("The deploy script lives in tools/deploy.sh.", memory_type="fact").id
    queue_for_embedding(twin)
    held = run_while_embedding_elsewhere(twin)
    assert (held.embedded, held.merged, held.complete) == (0, 0, False)
    after = maintain.run(now=days(0))
    assert (after.embedded, after.merged, after.complete) == (1, 1, True)


def test_a_merge_waits_for_an_older_twin_still_on_the_queue(embedder: Any) -> None:
    """The nearest search sees no memory without a vector: a new memory whose older twin was
    on the queue (held by a worker embedding it) found no duplicate, the watermark moved past
    it, and the pair was never merged."""
    first = store("The deploy script lives in tools/deploy.sh", memory_type="fact").id
    assert maintain.run(now=days(0)).complete  # the watermark is past it
    queue_for_embedding(first)
    store("The deploy script lives in tools/deploy.sh.", memory_type="fact")
    held = run_while_embedding_elsewhere(first)
    assert (held.embedded, held.merged, held.complete) == (0, 0, False)
    after = maintain.run(now=days(0))
    assert (after.embedded, after.merged, after.complete) == (1, 1, True)


def test_a_run_is_complete_only_once_the_queue_is_empty(tmp_path: Any, embedder: Any) -> None:
    """Rows another process is embedding are skipped: a run that could take none of them
    said it was complete with chunks still waiting for their vectors."""
    (tmp_path / "notes.md").write_text("# Notes\n\nThe cache warms at startup.\n")
    chunk = index(tmp_path / "notes.md", namespace="docs").chunk_ids[0]
    queue_for_embedding(chunk)
    with Session(get_engine()) as worker:
        worker.execute(text("SELECT 1 FROM chunk WHERE id = :id FOR UPDATE"), {"id": chunk})
        held = maintain.run(now=days(0))
        elsewhere = maintain.run(now=days(0), namespace="global")  # its queue is empty
        worker.rollback()
    assert (held.embedded, held.complete) == (0, False) and elsewhere.complete
    after = maintain.run(now=days(0))
    assert (after.embedded, after.complete) == (1, True)


def test_a_run_over_one_namespace_leaves_the_others_for_a_full_run(embedder: Any) -> None:
    """The consolidation watermark of a `--namespace` run is its own: it used to move the
    one mark every run reads past the other namespaces' memories, unmerged for good."""
    store("The deploy script lives in tools/deploy.sh", memory_type="fact", namespace="ns-x")
    store("The deploy script lives in tools/deploy.sh.", memory_type="fact", namespace="ns-x")
    store("Grafana dashboards are provisioned from JSON", memory_type="fact", namespace="ns-y")
    assert maintain.run(now=days(0), namespace="ns-y").merged == 0
    assert maintain.run(now=days(0)).merged == 1


def test_maintenance_runs_its_other_steps_when_the_model_fails(embedder: Any, monkeypatch) -> None:
    """Only the queue needs the model: a model that will not load leaves the queue for the
    next run (the report says the run is not complete) and ages memories all the same."""
    from memsys.services import embedding_queue

    waiting = store("The deploy script lives in tools/deploy.sh", memory_type="fact").id
    store("Grafana dashboards are provisioned from JSON", memory_type="fact")
    queue_for_embedding(waiting)

    def broken() -> Any:
        raise RuntimeError("the model could not be loaded")

    monkeypatch.setattr(embedding_queue, "get_embedder", broken)
    report = maintain.run(now=days(8))
    assert report.embedded == 0 and not report.complete
    assert report.rescored == 2 and report.moved.get("demoted") == 2


def test_a_memory_waiting_for_its_vector_is_archived_once_it_has_one(
    embedder: Any, monkeypatch
) -> None:
    """Archiving cuts the text to a summary: a queued memory archived while the model failed
    was then embedded from the summary by the queue, and kept that vector for good."""
    from memsys.services import embedding_queue

    memory = store(LONG, memory_type="fact").id
    vector = row(memory).embedding
    queue_for_embedding(memory)

    def broken() -> Any:
        raise RuntimeError("the model could not be loaded")

    monkeypatch.setattr(embedding_queue, "get_embedder", broken)
    held = maintain.run(now=days(31))
    assert not held.complete and held.moved == {"demoted": 1}
    assert (row(memory).stage, row(memory).content) == ("demoted", LONG)
    monkeypatch.undo()
    after = maintain.run(now=days(31))  # the vector first, of the whole text; then the summary
    assert after.embedded == 1 and after.moved == {"archived": 1} and after.complete
    archived = row(memory)
    assert archived.stage == "archived" and archived.content != LONG
    cosine = sum(a * b for a, b in zip(archived.embedding, vector, strict=True))
    assert cosine > 0.999  # the whole text's vector, not the summary's


def test_consolidation_leaves_a_memory_a_client_is_forgetting(embedder: Any) -> None:
    """A run merged into a memory a client was forgetting at that moment and then failed
    ("Memory not found", the whole batch rolled back): the candidate is held too, and one
    in use is left for a later run."""
    first = store("The deploy script lives in tools/deploy.sh", memory_type="fact").id
    second = store("The deploy script lives in tools/deploy.sh.", memory_type="fact").id
    out: list[Any] = []
    with session_scope() as client:
        memories.forget(client, MemoryForgetIn(memory_id=first))  # not committed yet
        worker = threading.Thread(target=lambda: out.append(maintain.run(now=days(0))))
        worker.start()
        worker.join(60)
        assert not worker.is_alive()  # it did not wait for the forget
    assert out[0].merged == 0
    with session_scope() as s:
        live = set(s.scalars(memories.live_memories().with_only_columns(Chunk.id)))
    assert live == {second}


def test_a_candidate_held_by_a_writer_is_the_next_runs_first(embedder: Any) -> None:
    """A run stops before a candidate another writer holds; the next run takes it (the
    watermark had moved past it, and the pair was never merged)."""
    first = store("The deploy script lives in tools/deploy.sh", memory_type="fact").id
    store("The deploy script lives in tools/deploy.sh.", memory_type="fact")
    out: list[Any] = []
    with session_scope() as client:
        memories.live_memory(client, first, lock=True)  # an edit in flight
        worker = threading.Thread(target=lambda: out.append(maintain.run(now=days(0))))
        worker.start()
        worker.join(60)
        assert not worker.is_alive()
        client.rollback()
    assert out[0].merged == 0
    assert maintain.run(now=days(0)).merged == 1


def test_a_memory_committed_after_a_run_passed_its_time_is_still_consolidated(
    embedder: Any,
) -> None:
    """A memory is stamped when its row is written, and its transaction may commit later (a
    batch of 500 being embedded): a run meanwhile moved the watermark past a newer memory
    committed before it, and the repeat was never looked at, its twin left unmerged."""
    store("The deploy script lives in tools/deploy.sh", memory_type="fact")
    assert maintain.run(now=days(0)).merged == 0
    with session_scope() as writer:  # written now, committed after the next run
        memories.store(writer, MemoryStoreIn(content="The deploy script lives in tools/deploy.sh.",
                                             memory_type="fact"))  # fmt: skip
        store("Grafana dashboards are provisioned from JSON", namespace="project:ops")
        out: list[Any] = []
        worker = threading.Thread(target=lambda: out.append(maintain.run(now=days(0))))
        worker.start()
        worker.join(60)
        assert not worker.is_alive() and out[0].merged == 0
    assert maintain.run(now=days(0)).merged == 1


def test_a_run_with_no_other_transaction_open_still_stops_at_its_own_time(
    embedder: Any,
) -> None:
    """With no other transaction open the horizon was NULL and bound nothing: a memory stamped
    after the run's clock (by a writer that began meanwhile) was taken, the watermark moved
    past it, and a memory stamped before it but committed later was passed over for good.
    The bound is now the run's clock at most, and the run says memories are left."""
    store("The deploy script lives in tools/deploy.sh", memory_type="fact")
    later = store("Grafana dashboards are provisioned from JSON", namespace="project:ops").id
    with session_scope() as s:  # stamped after the next run's clock
        s.execute(
            update(Chunk)
            .where(Chunk.id == later)
            .values(created_at=func.now() + timedelta(minutes=10))
        )
    assert not maintain.run(now=days(0)).complete  # it waits for a later run
    store("The deploy script lives in tools/deploy.sh.", memory_type="fact")  # before `later`
    assert maintain.run(now=days(0)).merged == 1


def test_decay_leaves_a_memory_forgotten_meanwhile_as_it_was_forgotten(embedder: Any) -> None:
    """Decay read a session memory live, then waited for the row a client was forgetting:
    once the forget committed, decay closed it again — its valid_to moved to decay's time
    (an as-of read then showed it alive after it was forgotten) and a second delete event
    was logged and counted."""
    from tests.conftest import lock_waits, until

    scratch = store("Scratch: the test run id is 42", lifecycle="session").id  # scores 0.25
    out: list[Any] = []
    with session_scope() as client:
        memories.forget(client, MemoryForgetIn(memory_id=scratch))
        worker = threading.Thread(
            target=lambda: out.append(
                runner.execute(decay_rules.decay, DecayIn, {"threshold": 0.3})
            )
        )
        worker.start()
        assert until(lambda: "transactionid" in lock_waits(), 20)  # decay waits for the row
        forgotten_at = client.scalar(select(Chunk.valid_to).where(Chunk.id == scratch))
    worker.join(60)
    assert not worker.is_alive() and out[0].entries_deleted == 0
    assert row(scratch).valid_to == forgotten_at
    with session_scope() as s:
        deletes = s.scalars(
            select(Event.operation).where(Event.subject_id == scratch, Event.event_type == "delete")
        ).all()
    assert deletes == ["memory_forget"]


def test_two_decays_take_turns_instead_of_deadlocking(embedder: Any) -> None:
    """Concurrent decays rescored the same rows in batches and deadlocked each other (503s
    after four attempts): the second now waits for the first to commit."""
    from memsys.schemas.lifecycle import DecayIn
    from tests.conftest import lock_waits, until

    for n in range(3):
        store(f"Scratch note number {n} about the release", memory_type="fact")
    out: list[Any] = []
    with session_scope() as first:
        decay_rules.decay(first, DecayIn(), now=days(0))
        worker = threading.Thread(
            target=lambda: out.append(runner.execute(decay_rules.decay, DecayIn, {}))
        )
        worker.start()
        # the second waits for its turn, before it locks any row the first may want
        assert until(lambda: lock_waits() == ["advisory"], 20)
    worker.join(60)
    assert not worker.is_alive() and out[0].entries_scanned == 3


def during_an_import(call: Callable[[], Any]) -> Any:
    """What `call` returns, run on a thread of its own while an import holds the global
    namespace (its write turn) — it must not wait for the import to end."""
    out: list[Any] = []
    with Session(get_engine()) as importer:
        namespaces.write_alone(importer, ["global"])
        worker = threading.Thread(target=lambda: out.append(call()))
        worker.start()
        worker.join(timeout=30)
        assert out, "the call waited for the import"
        importer.commit()
    return out[0]


def test_near_duplicates_in_a_namespace_being_imported_are_merged_by_the_next_run(
    embedder: Any,
) -> None:
    store("The deploy script lives in tools/deploy.sh", memory_type="fact")
    store("The deploy script lives in tools/deploy.sh.", memory_type="fact")
    during = during_an_import(lambda: maintain.run(now=days(0)))
    assert during.merged == 0 and not during.complete  # left, not passed over
    assert maintain.run(now=days(0)).merged == 1


def test_a_read_never_waits_for_a_held_memory_and_its_access_is_kept(embedder: Any) -> None:
    memory = store("The message broker retains events for seven days").id
    done = threading.Event()
    with session_scope() as holder:  # a writer holds the row (e.g. an outcome in flight)
        holder.execute(select(Chunk).where(Chunk.id == memory).with_for_update()).one()
        reader = threading.Thread(
            target=lambda: (recall("how long does the broker keep events"), done.set())
        )
        reader.start()
        reader.join(timeout=30)
        assert done.is_set()  # the read finished while the row was still locked
        # Its access, written after it answered, did not wait for the row either.
        assert deferred.settle(timeout=10)
    assert row(memory).access_count == 0  # the read never touches the row
    with session_scope() as s:
        assert access.fold(s) == 1  # …and the log still had it
    assert row(memory).access_count == 1


def test_neither_a_read_nor_maintenance_waits_for_an_import_of_the_namespace(
    embedder: Any,
) -> None:
    memory = store(LONG, memory_type="configuration").id
    question = "when does the nightly Postgres backup run and how long are backups kept"
    aged = during_an_import(lambda: maintain.run(now=days(40)))
    assert aged.moved == {}  # its memories are left for the next run
    maintain.run(now=days(40))
    assert row(memory).stage == "archived"
    found = during_an_import(lambda: recall(question))
    assert found.memories[0].id == memory and found.memories[0].content != LONG
    assert row(memory).stage == "archived"  # rekindled by a later read instead
    assert recall(question).memories[0].content == LONG
    assert row(memory).stage == "active"


def test_purge_takes_the_history_with_it(embedder: Any) -> None:
    memory = store("The old admin password was hunter2").id
    recall("old admin password")
    runner.execute(learning.outcome, MemoryOutcomeIn, {"memory_id": memory, "success": False})
    runner.execute(
        memories.forget, MemoryForgetIn, {"memory_id": memory, "purge": True, "force": True}
    )
    with session_scope() as s:
        for log in (MemoryAccess, MemoryChange):
            assert s.scalars(select(log).where(log.memory_id == memory)).all() == []


def test_maintenance_prunes_traces_past_their_retention(embedder: Any) -> None:
    store("Deploys go out on Tuesdays after the review.", namespace="default")
    traced = runner.run(memories.recall, MemoryRecallIn(query="when do deploys go out")).trace_id
    with session_scope() as s:
        kept_ids = set(s.scalars(select(QueryTrace.id)))
    assert traced in kept_ids
    assert maintain.run(now=datetime.now(UTC) + timedelta(days=1)).traces_pruned == 0
    report = maintain.run(now=datetime.now(UTC) + timedelta(days=31))  # default retention 30
    assert report.traces_pruned == len(kept_ids)
    with session_scope() as s:
        assert traced not in set(s.scalars(select(QueryTrace.id)))
