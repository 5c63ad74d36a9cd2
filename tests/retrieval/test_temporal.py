"""The temporal channel: time expressions resolved against a fixed reference now, and
memories matched by when they happened (memory_store's reference_time)."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

import pytest

from memsys.db import session_scope
from memsys.retrieval import pipeline, timephrases
from tests.factories import queue_for_embedding, store

NOW = datetime(2024, 3, 13, 15, 30, tzinfo=UTC)  # a Wednesday
EARLIEST = datetime(1, 1, 1, tzinfo=UTC)  # "before …" reaches back to year 1


def day(y: int, m: int, d: int) -> datetime:
    return datetime(y, m, d, tzinfo=UTC)


@pytest.mark.parametrize(
    ("query", "text", "start", "end"),
    [
        ("what did we do yesterday", "yesterday", day(2024, 3, 12), day(2024, 3, 13)),
        ("notes from last May", "last may", day(2023, 5, 1), day(2023, 6, 1)),
        ("in May", "in may", day(2023, 5, 1), day(2023, 6, 1)),
        ("what happened in March", "in march", day(2024, 3, 1), day(2024, 4, 1)),
        ("changes in 2023", "in 2023", day(2023, 1, 1), day(2024, 1, 1)),
        ("on 2023-05-07", "2023-05-07", day(2023, 5, 7), day(2023, 5, 8)),
        ("dinner on 8 May, 2023", "8 may, 2023", day(2023, 5, 8), day(2023, 5, 9)),
        ("the week after May 7", "the week after may 7", day(2023, 5, 8), day(2023, 5, 15)),
        (
            "the day before 2024-01-10",
            "the day before 2024-01-10",
            day(2024, 1, 9),
            day(2024, 1, 10),
        ),
        ("last week", "last week", day(2024, 3, 4), day(2024, 3, 11)),
        ("two weeks ago", "two weeks ago", day(2024, 2, 26), day(2024, 3, 4)),
        ("3 days ago", "3 days ago", day(2024, 3, 10), day(2024, 3, 11)),
        ("last tuesday", "last tuesday", day(2024, 3, 12), day(2024, 3, 13)),
        ("last wednesday", "last wednesday", day(2024, 3, 6), day(2024, 3, 7)),
        ("early June 2023", "early june 2023", day(2023, 6, 1), datetime(2023, 6, 11, tzinfo=UTC)),
        (
            "between March 1 and March 5",
            "between march 1 and march 5",
            day(2024, 3, 1),
            day(2024, 3, 6),
        ),
        ("since January", "since january", day(2024, 1, 1), NOW),
        # "the past year" is twelve months back from now; "last year" the calendar one
        (
            "adopted in the past year",
            "in the past year",
            datetime(2023, 3, 13, 15, 30, tzinfo=UTC),
            NOW,
        ),
        ("in the last month", "in the last month", datetime(2024, 2, 13, 15, 30, tzinfo=UTC), NOW),
        ("last year", "last year", day(2023, 1, 1), day(2024, 1, 1)),
        ("the outage at 2023-05-14T10:00", "2023-05-14", day(2023, 5, 14), day(2023, 5, 15)),
        ("we shipped on 7 May", "on 7 may", day(2023, 5, 7), day(2023, 5, 8)),
        # "may" after a number is the month wherever the verb cannot be
        ("between 3 May and 7 May", "between 3 may and 7 may", day(2023, 5, 3), day(2023, 5, 8)),
        ("7 May at 10am was the outage", "7 may", day(2023, 5, 7), day(2023, 5, 8)),
        ("by 7 May the build was green", "7 may", day(2023, 5, 7), day(2023, 5, 8)),
    ],
)
def test_expressions_resolve_against_the_reference_now(query, text, start, end) -> None:  # type: ignore[no-untyped-def]
    spans = timephrases.find(query, NOW)
    assert [(s.text, s.start, s.end) for s in spans] == [(text, start, end)]


@pytest.mark.parametrize(
    "query",
    [
        "I may need help",
        "march the tests forward",
        "what is 2023 in binary",
        "the move",
        "version 7 may break the build",
        "the test 3 may fail",
        "the last day of the sprint",
        "the last 2 weeks of the sprint",  # a part of something else, not the 2 weeks to now
    ],
)
def test_words_that_are_not_dates_are_left_alone(query: str) -> None:
    assert timephrases.find(query, NOW) == []


@pytest.mark.parametrize(
    ("query", "now"),
    [
        ("what happened on 9999-12-31", NOW),
        ("in the last 999999999 days", NOW),
        ("99999999 years ago", NOW),
        ("the day after 9999-12-30", NOW),
        ("the day before 0001-01-01", NOW),
        ("what happened yesterday", day(1, 1, 1)),
    ],
)
def test_a_range_past_the_calendar_is_no_range(query: str, now: datetime) -> None:
    # was OverflowError: memory_query and memory_recall answered "Internal error"
    assert timephrases.find(query, now) == []


def test_an_impossible_day_falls_back_to_its_month() -> None:
    spans = timephrases.find("on 31 February, 2023", NOW)
    assert [(s.start, s.end) for s in spans] == [(day(2023, 2, 1), day(2023, 3, 1))]


@pytest.mark.parametrize(
    ("query", "now", "start"),
    [
        ("what happened on Feb 29", NOW, day(2024, 2, 29)),
        ("what happened on Feb 29", day(2026, 3, 10), day(2024, 2, 29)),
        ("the outage on 29 February", day(2024, 1, 10), day(2020, 2, 29)),
    ],
)
def test_a_leap_day_without_a_year_is_the_latest_one(
    query: str, now: datetime, start: datetime
) -> None:
    # was no range at all: the 29th of February of `now`'s year (or the year before) does
    # not exist, so the date was dropped and the question matched any time
    spans = timephrases.find(query, now)
    assert [(s.start, s.end) for s in spans] == [(start, start + timedelta(days=1))]


@pytest.mark.parametrize(
    ("query", "text", "start", "end"),
    [
        ("what did we decide before 2024-03-01", "before 2024-03-01", EARLIEST, day(2024, 3, 1)),
        ("decisions before March 2024", "before march 2024", EARLIEST, day(2024, 3, 1)),
        # was from 1970: a memory that happened in 1965 was not "before 1990"
        ("what happened before 1990", "before 1990", EARLIEST, day(1990, 1, 1)),
        ("what changed after March 1", "after march 1", day(2024, 3, 2), NOW),
        ("notes after 8 May, 2023", "after 8 may, 2023", day(2023, 5, 9), NOW),
        # the order the two ends are named in does not matter
        ("between March 5 and March 1", "between march 5 and march 1", day(2024, 3, 1),
         day(2024, 3, 6)),
    ],
)  # fmt: skip
def test_before_and_after_a_date_are_open_ranges(
    query: str, text: str, start: datetime, end: datetime
) -> None:
    # was the date itself: "before 2024-03-01" matched only what happened on that day
    spans = timephrases.find(query, NOW)
    assert [(s.text, s.start, s.end) for s in spans] == [(text, start, end)]


@pytest.mark.parametrize(
    ("query", "text", "start", "end"),
    [
        # were no range: "the" was required before "last/past N days"
        ("what changed in the last 7 days", "in the last 7 days", datetime(2024, 3, 6, 15, 30,
         tzinfo=UTC), NOW),
        ("incidents last 7 days", "last 7 days", datetime(2024, 3, 6, 15, 30, tzinfo=UTC), NOW),
        ("past 2 weeks", "past 2 weeks", datetime(2024, 2, 28, 15, 30, tzinfo=UTC), NOW),
        # was the week itself
        ("what did we run until last week", "until last week", EARLIEST, day(2024, 3, 11)),
        # were the two end days only (or, with "until", everything up to the second)
        ("from May 1 until May 5", "from may 1 until may 5", day(2023, 5, 1), day(2023, 5, 6)),
        ("logs from 2024-01-01 to 2024-01-31", "from 2024-01-01 to 2024-01-31", day(2024, 1, 1),
         day(2024, 2, 1)),
        # early / mid / late were dropped before this / last month and year
        ("early last year", "early last year", day(2023, 1, 1), datetime(2023, 5, 2, 16,
         tzinfo=UTC)),
        ("late last month", "late last month", datetime(2024, 2, 20, 8, tzinfo=UTC),
         day(2024, 3, 1)),
    ],
)  # fmt: skip
def test_more_ways_to_say_a_range(query: str, text: str, start: datetime, end: datetime) -> None:
    spans = timephrases.find(query, NOW)
    assert [(s.text, s.start, s.end) for s in spans] == [(text, start, end)]


def test_only_the_words_just_before_an_expression_open_its_range(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Range words ("between", "the week after", "until") are read in the few characters
    before each expression, not in the whole text before it (which made a long query's
    reading quadratic): on queries made of every such word, the answer is the same as when
    the whole text before is read."""
    # words and whole phrases, so that range words come right before dates often
    words = [
        "between",
        "and",
        "from",
        "to",
        "until",
        "since",
        "before",
        "after",
        "the week after",
        "the month before",
        "the day after",
        "last may",
        "march 3",
        "2024",
        "early last year",
        "two weeks ago",
        "yesterday",
        "2023-05-01",
        "we met",
        "in",
    ]
    rng = random.Random(7)
    now = datetime(2026, 11, 26, 12, tzinfo=UTC)
    queries = [" ".join(rng.choice(words) for _ in range(rng.randint(3, 60))) for _ in range(300)]
    windowed = [timephrases.find(q, now) for q in queries]
    monkeypatch.setattr(timephrases, "_LEAD_CHARS", 10**9)
    assert windowed == [timephrases.find(q, now) for q in queries]
    assert sum(map(len, windowed)) > 300  # the queries hold expressions to find


def test_the_channel_finds_what_happened_in_the_range(embedder) -> None:  # type: ignore[no-untyped-def]
    ns = "project:trips"
    may = store(
        "We hiked the coastal trail and camped by the lake",
        namespace=ns,
        reference_time="2023-05-20T10:00:00Z",
    )
    store(
        "We hiked up the mountain and camped near the summit",
        namespace=ns,
        reference_time="2023-08-02T10:00:00Z",
    )
    store("Bought new hiking boots for the camping season", namespace=ns)
    with session_scope() as s:
        found = pipeline.retrieve(
            s, "where did we go camping last May?", filters={"namespace": ns}, limit=3, now=NOW
        )
    assert found.hits[0].id == may.id
    assert found.channels["temporal"]["hits"] == [may.id]
    assert found.channels["temporal"]["ranges"][0]["text"] == "last may"
    assert found.hits[0].happened_at == datetime(2023, 5, 20, 10, tzinfo=UTC)


def test_without_reference_time_a_memory_happened_when_written(embedder) -> None:  # type: ignore[no-untyped-def]
    kept = store("Standup: decided to freeze the schema", namespace="project:t2")
    with session_scope() as s:
        found = pipeline.retrieve(
            s, "what did we decide today", filters={"namespace": "project:t2"}, limit=3
        )
    assert found.channels["temporal"]["hits"] == [kept.id]


def test_a_memory_waiting_for_its_vector_is_found_by_its_time(embedder) -> None:  # type: ignore[no-untyped-def]
    """A memory on the embedding queue (an upgrade cleared its vector) that shares no word
    with the question, nor a namespace with the other hits: its time is all that finds it,
    and the channel used to ask for a vector too."""
    waiting = store(
        "Migrated the billing cluster to Postgres 16",
        namespace="project:ops",
        reference_time="2023-05-20T10:00:00Z",
    )
    for i in range(3):
        store(f"Unrelated note number {i} about the coffee machine", namespace="project:office")
    queue_for_embedding(waiting.id)
    with session_scope() as s:
        found = pipeline.retrieve(s, "what happened last May?", limit=3, now=NOW)
    assert found.channels["temporal"]["hits"] == [waiting.id]
    assert found.hits[0].id == waiting.id and found.hits[0].similarity is None


@pytest.mark.parametrize(
    ("query", "text", "start", "end"),
    [
        # were the first year alone ("from 2023") or nothing
        ("what did we ship from 2023 to 2024", "from 2023 to 2024", day(2023, 1, 1),
         day(2025, 1, 1)),
        ("between 2021 and 2023", "between 2021 and 2023", day(2021, 1, 1), day(2024, 1, 1)),
        ("in 2022-2023", "2022-2023", day(2022, 1, 1), day(2024, 1, 1)),
        ("the 2022-2023 season", "2022-2023", day(2022, 1, 1), day(2024, 1, 1)),
        ("during 2019-2021", "2019-2021", day(2019, 1, 1), day(2022, 1, 1)),
        # a month range without a year is the latest one that has begun, as "in May" is
        ("between January and March", "between january and march", day(2024, 1, 1),
         day(2024, 4, 1)),
        ("from May to July", "from may to july", day(2023, 5, 1), day(2023, 8, 1)),
        ("from November to February", "from november to february", day(2023, 11, 1),
         day(2024, 3, 1)),
        ("Jan-Mar 2023", "jan-mar 2023", day(2023, 1, 1), day(2023, 4, 1)),
        ("between Jan and Mar 2023", "between jan and mar 2023", day(2023, 1, 1),
         day(2023, 4, 1)),
        ("from November 2022 through February", "from november 2022 through february",
         day(2022, 11, 1), day(2023, 3, 1)),
        # a day named after the second month keeps the two dates a range of days
        ("between January and March 5", "between january and march 5", day(2024, 1, 1),
         day(2024, 3, 6)),
    ],
)  # fmt: skip
def test_ranges_of_years_and_of_months(
    query: str, text: str, start: datetime, end: datetime
) -> None:
    spans = timephrases.find(query, NOW)
    assert [(s.text, s.start, s.end) for s in spans] == [(text, start, end)]


@pytest.mark.parametrize(
    "query",
    [
        "2023 and 2024 were busy years for the team",  # two years named, no range asked
        "I may - or may not - go",
        "tests 3-5 may fail on CI",
        "on the 2nd attempt it worked",
        # a bare q1 in code or a name is no quarter: "in Q3" and "Q3 2024" are
        "q1 = compute(x) + q2",
        "where q1 > 3 and q2 < 5",
        "the q3 model",
        "for q1 in queries: print(q1)",
        # two years bare, not next to each other, with no time word before: numbers
        "open ports 2000-2010 on the firewall",
        "ids 2015 to 2019 were reissued",
    ],
)
def test_more_words_that_are_not_dates_are_left_alone(query: str) -> None:
    assert timephrases.find(query, NOW) == []


@pytest.mark.parametrize(
    ("query", "text", "start", "end"),
    [
        # quarters: a bare one is the latest that has begun, as a bare month is
        ("revenue in Q3", "q3", day(2023, 7, 1), day(2023, 10, 1)),
        ("Q1 2024 goals", "q1 2024", day(2024, 1, 1), day(2024, 4, 1)),
        ("the third quarter of 2022", "the third quarter of 2022", day(2022, 7, 1),
         day(2022, 10, 1)),
        ("what did we close last quarter", "last quarter", day(2023, 10, 1), day(2024, 1, 1)),
        ("this quarter", "this quarter", day(2024, 1, 1), day(2024, 4, 1)),
        # the latest weekend that has begun
        ("what did I do over the weekend", "over the weekend", day(2024, 3, 9),
         day(2024, 3, 11)),
        # counts without "a" and "back" for "ago"
        ("couple weeks ago", "couple weeks ago", day(2024, 2, 26), day(2024, 3, 4)),
        ("few days ago", "few days ago", day(2024, 3, 10), day(2024, 3, 11)),
        ("2 days back", "2 days back", day(2024, 3, 11), day(2024, 3, 12)),
        ("in the past few days", "in the past few days", datetime(2024, 3, 10, 15, 30,
         tzinfo=UTC), NOW),
        ("the last couple of weeks", "the last couple of weeks", datetime(2024, 2, 28, 15, 30,
         tzinfo=UTC), NOW),
        ("errors in the last 24 hours", "in the last 24 hours", datetime(2024, 3, 12, 15, 30,
         tzinfo=UTC), NOW),
        ("the week before last", "the week before last", day(2024, 2, 26), day(2024, 3, 4)),
        ("the month before last", "the month before last", day(2024, 1, 1), day(2024, 2, 1)),
        ("since Monday", "since monday", day(2024, 3, 11), NOW),
        # ISO dates with slashes, ISO months, and ranges of dates without "from"
        ("on 2024/03/05", "2024/03/05", day(2024, 3, 5), day(2024, 3, 6)),
        ("the 2024-02 invoices", "2024-02", day(2024, 2, 1), day(2024, 3, 1)),
        ("logs 2024-03-01..2024-03-05", "2024-03-01..2024-03-05", day(2024, 3, 1),
         day(2024, 3, 6)),
        ("2024-03-01 to 2024-03-05", "2024-03-01 to 2024-03-05", day(2024, 3, 1),
         day(2024, 3, 6)),
        ("May 7 through June 2", "may 7 through june 2", day(2023, 5, 7), day(2023, 6, 3)),
        # days of one month
        ("the offsite March 3rd–5th", "march 3rd–5th", day(2024, 3, 3), day(2024, 3, 6)),
        ("Feb 3-5 2023", "feb 3-5 2023", day(2023, 2, 3), day(2023, 2, 6)),
        ("between March 3 and 5", "between march 3 and 5", day(2024, 3, 3), day(2024, 3, 6)),
        ("3-5 May", "3-5 may", day(2023, 5, 3), day(2023, 5, 6)),
        ("from the 3rd to the 5th of March", "from the 3rd to the 5th of march",
         day(2024, 3, 3), day(2024, 3, 6)),
        # a day of the month alone: the latest one that has begun
        ("what happened on the 14th?", "on the 14th", day(2024, 2, 14), day(2024, 2, 15)),
        ("on the 2nd we met", "on the 2nd", day(2024, 3, 2), day(2024, 3, 3)),
        ("the 5th of last month", "the 5th of last month", day(2024, 2, 5), day(2024, 2, 6)),
    ],
)  # fmt: skip
def test_common_phrases_people_write(query: str, text: str, start: datetime, end: datetime) -> None:
    spans = timephrases.find(query, NOW)
    assert [(s.text, s.start, s.end) for s in spans] == [(text, start, end)]


class _CountingText(str):
    """A query text that counts the characters read from it by slicing and indexing."""

    read = 0

    def __getitem__(self, key):  # type: ignore[no-untyped-def]
        piece = super().__getitem__(key)
        _CountingText.read += len(piece)
        return piece


def test_telling_the_month_may_from_the_verb_reads_only_the_words_around_it() -> None:
    """ "version 7 may break": the words just before and after "7 may" tell the verb from the
    month. All the text before it was read (and all the text after it copied) for each
    "<number> may", so a long query full of them took quadratic time (1M characters: ~10 s)."""
    query = _CountingText("notes " * 200_000 + "version 7 may break the build")
    found = next(p for kind, p in timephrases._PATTERNS if kind == "day_month").search(query)
    assert found is not None and found.group(0) == "7 may"
    _CountingText.read = 0
    assert timephrases._may_is_a_month(found) is False  # the verb
    assert _CountingText.read < 100


@pytest.mark.parametrize(
    ("query", "text", "start", "end"),
    [
        ("from May 7 to June 2, 2022", "from may 7 to june 2, 2022", day(2022, 5, 7),
         day(2022, 6, 3)),
        ("May 7 - June 2 2022", "may 7 - june 2 2022", day(2022, 5, 7), day(2022, 6, 3)),
        ("between Nov 3 and Feb 2, 2023", "between nov 3 and feb 2, 2023", day(2022, 11, 3),
         day(2023, 2, 3)),
        ("Q1-Q3 2022", "q1-q3 2022", day(2022, 1, 1), day(2022, 10, 1)),
        ("from Q4 to Q1 2023", "from q4 to q1 2023", day(2022, 10, 1), day(2023, 4, 1)),
        # a year on both ends: as written
        ("from 2022-05-07 to 2022-06-02", "from 2022-05-07 to 2022-06-02", day(2022, 5, 7),
         day(2022, 6, 3)),
    ],
)  # fmt: skip
def test_a_range_s_year_named_at_its_end_holds_its_start_too(
    query: str, text: str, start: datetime, end: datetime
) -> None:
    """ "from May 7 to June 2, 2022" is May 7, 2022 to June 2, 2022: the first end without a
    year was read as the latest May 7 (2023's), so the range ran from June 2022 to May 2023,
    a year of memories nobody asked for."""
    spans = timephrases.find(query, NOW)
    assert [(s.text, s.start, s.end) for s in spans] == [(text, start, end)]
