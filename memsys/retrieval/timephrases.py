"""Time phrases in a query, read as UTC ranges (the temporal channel's reading).

`find(query, now)` resolves the time expressions of a query to half-open UTC ranges
[start, end) relative to a reference `now` (the caller's clock, the `as_of` of a replay, or a
benchmark's last session date):
- days: "today", "yesterday", "the day before yesterday", "3 days ago", "2 days back",
  "last Tuesday", "on Friday" (the most recent one), "May 7", "7 May 2023", "2023-05-07",
  "2023/05/07", "on the 14th" (the most recent 14th), "the 5th of last month";
- weeks, months, quarters, years: "last week", "this month", "two weeks ago", "couple weeks
  ago", "the week before last", "last May", "in May" (the most recent May that has begun),
  "May 2023", "2023-05", "in Q3" (the most recent Q3 that has begun; a bare "q3" only after
  a time word or before another quarter: "q1 = x" is a name), "Q3 2023", "the third
  quarter of 2023", "last quarter", "in 2023", "last year" (the calendar year before this),
  "the past year" / "in the last month" (that long back from now), "last weekend", "over the
  weekend" (the most recent one that has begun);
- "early/mid/late" narrow a month or year to its thirds ("late last month" too);
- "last 7 days" / "the past few weeks" / "the last 24 hours": that long back from now;
- ranges: "from 2023 to 2024", "in 2019-2021" (two bare years are a range after a time word
  or when they follow each other, "the 2022-2023 season"; "ports 2000-2010" are numbers),
  "between January and March" (without a year: the most recent such range whose first
  month has begun, as "in May"), "Jan-Mar 2023", "from November to February" (across the
  new year), "March 3-5", "3rd to 5th of May"; a year named at the end of a range only
  holds its start too ("from May 7 to June 2, 2022", "Q1-Q3 2024");
- relative to another expression: "the week/day/month after …", "the week/day/month
  before …", "since …" (to now), "before …" (from year 1), "until …" (it included),
  "after …" (to now), "between … and …" / "from … to (until) …" (in either order), and
  "… to …", "… through …", "… - …", "…..…" between two dates ("2024-03-01..2024-03-15").
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from dateutil.relativedelta import relativedelta

MONTHS = {
    name: n
    for n, names in enumerate(
        [
            ("january", "jan"), ("february", "feb"), ("march", "mar"), ("april", "apr"),
            ("may",), ("june", "jun"), ("july", "jul"), ("august", "aug"),
            ("september", "sep", "sept"), ("october", "oct"), ("november", "nov"),
            ("december", "dec"),
        ],
        start=1,
    )
    for name in names
}  # fmt: skip
WEEKDAYS = {d: i for i, d in enumerate(("monday", "tuesday", "wednesday", "thursday", "friday",
                                        "saturday", "sunday"))}  # fmt: skip
NUMBERS = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6,
           "seven": 7, "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12,
           "a couple of": 2, "a couple": 2, "couple of": 2, "couple": 2, "a few": 3, "few": 3,
           "several": 3}  # fmt: skip
QUARTERS = {"first": 1, "second": 2, "third": 3, "fourth": 4, "1st": 1, "2nd": 2, "3rd": 3,
            "4th": 4}  # fmt: skip

_MONTH = r"(?P<month>" + "|".join(sorted(MONTHS, key=len, reverse=True)) + r")\.?"
_DAY = r"(?P<day>[0-3]?\d)(?:st|nd|rd|th)?"
_YEAR = r"(?P<year>(?:19|20)\d\d)"
_NUM = r"(?P<num>\d+|" + "|".join(sorted(NUMBERS, key=len, reverse=True)) + r")"
_WEEKDAY = r"(?P<weekday>" + "|".join(WEEKDAYS) + r")"
_PART = r"(?:(?P<part>early|mid|late)[- ](?:in )?)?"
_UNIT = r"(?P<unit>day|week|month|quarter|year)"


def _named(pattern: str, suffix: str) -> str:
    """`pattern` with its groups renamed (`month` -> `month2`): one expression may name two."""
    return re.sub(r"\(\?P<([a-z]+)>", rf"(?P<\g<1>{suffix}>", pattern)


# The words that join the two ends of a range: "and" only after "between"; the others with
# or without "from" before ("Jan-Mar", "January through March", "2023 to 2024").
_CONN = r" ?(?P<conn>and|to|until|till|through|thru|\.\.|-|–|—) ?"
_OPENER = r"(?:(?P<word>between|from) )?"
# the second month of a range, perhaps with a day ("between January and March 5") and a year
_MONTH_END = (
    rf"{_named(_MONTH, '2')}(?: {_named(_DAY, '2')}\b(?!:))?"
    rf"(?:,? (?:of )?{_named(_YEAR, '2')})?"
)


# One pattern per kind of expression, tried in this order; a later one may not overlap an
# earlier match. Month names alone need context ("may" is also a verb).
_PATTERNS: list[tuple[str, re.Pattern[str]]] = [
    ("iso", re.compile(r"\b(?P<y>\d{4})(?P<sep>[-/])(?P<m>\d\d)(?P=sep)(?P<d>\d\d)"
                       r"(?:\b|(?=t\d))")),
    ("iso_month", re.compile(r"(?<![\w/-])(?P<y>(?:19|20)\d\d)-(?P<m>0[1-9]|1[0-2])(?![\w/-])")),
    ("year_range", re.compile(rf"\b{_OPENER}(?:the years )?{_YEAR}{_CONN}{_named(_YEAR, '2')}\b")),
    ("month_day_range", re.compile(rf"\b{_OPENER}{_MONTH} {_DAY}{_CONN}(?:the )?"
                                   rf"{_named(_DAY, '2')}\b(?!:)(?:,? {_YEAR}\b)?")),
    ("day_month_range", re.compile(rf"\b{_OPENER}(?:the )?{_DAY}{_CONN}(?:the )?"
                                   rf"{_named(_DAY, '2')} (?:of )?{_MONTH}\b(?:,? {_YEAR}\b)?")),
    ("month_range", re.compile(rf"\b{_OPENER}{_MONTH}(?:,? (?:of )?{_YEAR})?{_CONN}{_MONTH_END}"
                               rf"\b(?! ?[0-3]?\d\b)")),
    ("quarter", re.compile(rf"\bq(?P<q>[1-4])(?:,? (?:of )?{_YEAR})?\b|\b(?:the )?(?P<nth>"
                           rf"first|second|third|fourth|1st|2nd|3rd|4th) quarter,? (?:of )?"
                           rf"{_named(_YEAR, '2')}\b")),
    ("day_month_year", re.compile(rf"\b{_DAY} (?:of )?{_MONTH},? {_YEAR}\b")),
    ("month_day_year", re.compile(rf"\b{_MONTH} {_DAY},? {_YEAR}\b")),
    ("month_year", re.compile(rf"\b{_PART}{_MONTH},? (?:of )?{_YEAR}\b")),
    ("month_day", re.compile(rf"\b{_MONTH} {_DAY}\b(?!:)")),
    ("day_month", re.compile(rf"\b(?:on )?(?:the )?{_DAY} (?:of )?{_MONTH}\b")),
    # a day of the month alone, where nothing but a date can follow ("on the 2nd attempt" is
    # no date); "the 5th of this / last month"
    ("day_of_month", re.compile(r"\b(?:on )?the (?P<day>[0-3]?\d)(?:st|nd|rd|th) of "
                                r"(?P<rel>this|last) month\b|\bon the (?P<day2>[0-3]?\d)"
                                r"(?:st|nd|rd|th)(?=$|[,.;:!?)]| (?:at|we|i|you|they|he|she|"
                                r"when|while|did|was|were)\b)")),
    ("day_before_yesterday", re.compile(r"\bthe day before yesterday\b")),
    ("today", re.compile(r"\b(?P<word>today|tonight|this morning|this afternoon|this evening)\b")),
    ("yesterday", re.compile(r"\b(?:yesterday|last night)\b")),
    ("ago", re.compile(rf"\b{_NUM} {_UNIT}s? (?:ago|back)\b")),
    ("past_n", re.compile(rf"\b(?:(?:in|over|during) )?(?:the )?(?:past|last) {_NUM} "
                          rf"(?P<unit>hour|day|week|month|quarter|year)s\b(?! of\b)")),
    # "the past year", "in the last month", "past week": the unit back from now, not the
    # calendar one before this ("last year" is 2025 in 2026; "the past year" is 12 months)
    # ("the last week of May", "the last day of the sprint": a part of something else)
    ("past_one", re.compile(r"\b(?:(?:in|over|during) )?(?:the )?past "
                            r"(?P<unit>hour|day|week|month|quarter|year)\b(?! of\b)|"
                            r"\b(?:(?:in|over|during) )?the last "
                            r"(?P<unit2>hour|day|week|month|quarter|year)\b(?! of\b)")),
    # "the week before last", not "the week before last May" (the week before that May)
    ("before_last", re.compile(rf"\bthe {_UNIT} before last\b(?! (?:{'|'.join(MONTHS)}|"
                               rf"{'|'.join(WEEKDAYS)}|day|week|weekend|month|quarter|year|"
                               rf"night)\b)")),
    ("weekend", re.compile(r"\b(?P<rel>last|this|past) weekend\b|\b(?:over|on|at|during) the "
                           r"weekend\b")),
    ("earlier", re.compile(r"\bearlier this (?P<unit>week|month|quarter|year)\b")),
    ("rel_unit", re.compile(rf"\b{_PART}(?P<rel>last|this|previous) "
                            r"(?P<unit>week|month|quarter|year)\b")),
    ("rel_weekday", re.compile(rf"\b(?:(?P<rel>last|this|past|on|since|before|after|until|till) )"
                               rf"{_WEEKDAY}\b")),
    ("rel_month", re.compile(rf"\b{_PART}(?P<rel>last|this|in|during|since|of|before|after) "
                             rf"{_MONTH}\b")),
    ("part_month", re.compile(rf"\b(?P<part>early|mid|late)[- ]{_MONTH}\b")),
    ("year", re.compile(rf"\b{_PART}(?P<rel>in|during|since|of|from|before|after) {_YEAR}\b")),
    ("year", re.compile(rf"\b(?P<part>early|mid|late)[- ]{_YEAR}\b")),
]  # fmt: skip
_RELATIVE = re.compile(
    r"\bthe (?P<unit>day|week|month|year) (?P<dir>after|before)\s*$|"
    r"\b(?P<since>since)\s*$|\b(?P<open>before|after|until|till)\s*$"
)
_BETWEEN = re.compile(r"\b(?P<word>between|from)\s*$")
# "from X to Y"; "X to Y", "X - Y", "X..Y" without "from" too
_TO = frozenset({"to", "until", "till", "through", "thru", "..", "-", "–", "—"})
# Longer than the longest words _RELATIVE and _BETWEEN read before an expression ("the month
# after "), with room for the word boundary before them.
_LEAD_CHARS = 24


class _Taken:
    """The spans of the text the expressions found so far hold (they never overlap): whether a
    new one overlaps any, by bisection, not by a look at each."""

    def __init__(self) -> None:
        self._starts: list[int] = []
        self._ends: dict[int, int] = {}

    def overlaps(self, start: int, end: int) -> bool:
        at = bisect.bisect_right(self._starts, start)
        if at and self._ends[self._starts[at - 1]] > start:
            return True
        return at < len(self._starts) and self._starts[at] < end

    def add(self, start: int, end: int) -> None:
        bisect.insort(self._starts, start)
        self._ends[start] = end


@dataclass(frozen=True)
class Span:
    text: str
    start: datetime
    end: datetime  # exclusive

    def contains(self, moment: datetime) -> bool:
        return self.start <= moment < self.end

    def as_dict(self) -> dict[str, str]:
        return {"text": self.text, "start": self.start.isoformat(), "end": self.end.isoformat()}


def _day(moment: datetime) -> datetime:
    return moment.replace(hour=0, minute=0, second=0, microsecond=0)


def _month_start(year: int, month: int) -> datetime:
    return datetime(year, month, 1, tzinfo=UTC)


def _part(start: datetime, end: datetime, part: str | None) -> tuple[datetime, datetime]:
    """early / mid / late: the first, middle or last third of a range."""
    if not part:
        return start, end
    third = (end - start) / 3
    index = {"early": 0, "mid": 1, "late": 2}[part]
    return start + third * index, start + third * (index + 1)


def _number(word: str) -> int:
    return int(word) if word.isdigit() else NUMBERS[word]


def _step(unit: str, count: int) -> relativedelta:
    """`count` hours / days / weeks / months / quarters / years."""
    if unit == "quarter":
        return relativedelta(months=3 * count)
    return relativedelta(**{unit + "s": count})


def _unit_range(anchor: datetime, unit: str) -> tuple[datetime, datetime]:
    """The calendar day / week (Monday first) / month / quarter / year holding `anchor`."""
    day = _day(anchor)
    if unit == "day":
        return day, day + timedelta(days=1)
    if unit == "week":
        start = day - timedelta(days=day.weekday())
        return start, start + timedelta(days=7)
    if unit == "month":
        start = day.replace(day=1)
        return start, start + relativedelta(months=1)
    if unit == "quarter":
        start = day.replace(month=(day.month - 1) // 3 * 3 + 1, day=1)
        return start, start + relativedelta(months=3)
    start = day.replace(month=1, day=1)
    return start, start + relativedelta(years=1)


def _recent_month(month: int, now: datetime, strictly_before: bool) -> datetime:
    """The most recent `month` that has begun (before this month if `strictly_before`)."""
    year = (
        now.year
        if month < now.month or (month == now.month and not strictly_before)
        else now.year - 1
    )
    return _month_start(year, month)


def _recent_day(month: int, day: int, now: datetime) -> datetime:
    """The most recent `month` `day` that has begun: 29 February is the last leap year's
    (up to eight years back); a day no year has raises ValueError."""
    for year in range(now.year, now.year - 9, -1):
        try:
            start = datetime(year, month, day, tzinfo=UTC)
        except ValueError:  # 29 February in a common year
            continue
        if start <= now:
            return start
    raise ValueError(f"no {month}/{day} in the eight years before {now:%Y}")


# Words around "7 may" that make it a date: before it, a preposition; after it, a word that
# does not follow the verb "may" ("at 10am", "and 9 may", "we shipped", "the build").
_DATE_BEFORE = frozenset({
    "on", "by", "before", "after", "from", "since", "until", "till", "to", "between", "and",
    "of", "the", "through", "during", "was", "is", "as",
})  # fmt: skip
_DATE_AFTER = frozenset({
    "and", "or", "to", "at", "in", "on", "the", "we", "i", "you", "they", "he", "she", "it",
    "our", "my", "his", "her", "their", "was", "is", "were", "until", "till", "through",
    "when", "while",
})  # fmt: skip


def _may_is_a_month(m: re.Match[str]) -> bool:
    """ "7 may" is the verb after a word that is no preposition and before one that can
    follow "may" ("version 7 may break", "test 3 may fail"); a date otherwise: after "on",
    "before", "between 3 may and", at the end of a clause, before "at 10am" or "we"."""
    said = m.group(0)
    if said.startswith(("on ", "the ")):
        return True
    before = _word_before(m.string, m.start())
    after = _WORD_AFTER.match(m.string, m.end())
    if before is None or before in _DATE_BEFORE:
        return True
    return after is None or after.group(1) in _DATE_AFTER


_WORD_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789'")
_WORD_AFTER = re.compile(r"\s*([a-z0-9']+)")


def _word_before(text: str, at: int) -> str | None:
    """The last word of `text` before `at`, read backwards from there: only the characters
    between it and `at` (the whole text before, read for each "7 may", made a long query's
    reading quadratic)."""
    end = at
    while end and text[end - 1] not in _WORD_CHARS:
        end -= 1
    start = end
    while start and text[start - 1] in _WORD_CHARS:
        start -= 1
    return text[start:end] or None


def _month_range(g: dict[str, Any], now: datetime) -> tuple[datetime, datetime]:
    """ "between January and March", "Jan-Mar 2023", "from November 2022 to February": a year
    named on one end places the other next to it (November before February, across the new
    year); with none, the range is the latest whose first month has begun, as "in May" is."""
    first, last = MONTHS[g["month"]], MONTHS[g["month2"]]
    if g["year"] and g["year2"]:
        start, end = _month_start(int(g["year"]), first), _month_start(int(g["year2"]), last)
        start, end = min(start, end), max(start, end)
    elif g["year2"]:
        end = _month_start(int(g["year2"]), last)
        start = _month_start(end.year - (first > last), first)
    else:
        start = (
            _month_start(int(g["year"]), first)
            if g["year"]
            else _recent_month(first, now, strictly_before=False)
        )
        end = _month_start(start.year + (last < first), last)
    if g["day2"]:  # "between January and March 5"
        return start, end.replace(day=int(g["day2"])) + timedelta(days=1)
    return start, end + relativedelta(months=1)


def _day_range(g: dict[str, Any], now: datetime) -> tuple[datetime, datetime] | None:
    """ "March 3-5", "3rd to 5th of May 2023": days of one month; without a year, the latest
    such range whose first day has begun."""
    month, first, last = MONTHS[g["month"]], int(g["day"]), int(g["day2"])
    if last < first:
        return None
    if g["year"]:
        start = datetime(int(g["year"]), month, first, tzinfo=UTC)
    else:
        start = _recent_day(month, first, now)
    return start, start.replace(day=last) + timedelta(days=1)


def _recent_day_of_month(day: int, now: datetime) -> datetime:
    """ "on the 14th": the most recent 14th that has begun (a 31st: the last month with one)."""
    this_month = _month_start(now.year, now.month)
    for back in range(12):
        month: datetime = this_month - relativedelta(months=back)
        try:
            start = month.replace(day=day)
        except ValueError:  # no 31st in April
            continue
        if start <= now:
            return start
    raise ValueError(f"no day {day} in any month")


# Words before a bare "q3" that make it a quarter ("revenue in Q3", "between Q1 and Q3"); a
# bare one right before another ("Q1-Q3 2024") is one too. Anywhere else "q1" is as likely a
# name (a variable, a model, a queue) as a quarter.
_QUARTER_BEFORE = frozenset(
    {"in", "during", "for", "since", "before", "after", "until", "till", "by", "from",
     "between", "and", "to", "through", "thru", "of", "over"}
)  # fmt: skip
_QUARTER_NEXT = re.compile(r" ?(?:and|to|until|till|through|thru|\.\.|-|–|—) ?q[1-4]\b")
_CODE_AFTER = re.compile(r" ?[=<>+*/%(\[{]")  # "in q1 = 3": an expression


_LOOP_AFTER = re.compile(r" in\b")  # "for q1 in queries": a loop's variable


def _bare_quarter_is_one(m: re.Match[str]) -> bool:
    """A "q3" without a year is a quarter after a time word or before another quarter."""
    if _CODE_AFTER.match(m.string, m.end()):
        return False
    before = _word_before(m.string, m.start())
    if before == "for" and _LOOP_AFTER.match(m.string, m.end()):
        return False
    return before in _QUARTER_BEFORE or bool(_QUARTER_NEXT.match(m.string, m.end()))


# The kinds of expression that name no year and are read as the latest that has begun: at
# the start of a range whose end names a year, the latest that has begun by that end.
_YEARLESS = frozenset({"month_day", "day_month", "quarter", "part_month"})
_A_YEAR = re.compile(r"\b(?:19|20)\d\d\b")


# Words before two bare years that make them a range ("in 2019-2021"), as a bare year needs
# one ("in 2023"; "what is 2023 in binary" names none).
_YEARS_BEFORE = frozenset(
    {"in", "during", "for", "since", "of", "over", "through", "throughout", "across", "until",
     "till", "by", "before", "after"}
)  # fmt: skip


def _years_meant(m: re.Match[str], apart: int) -> bool:
    """Two years joined are a range after "from", "between" or "the years", after a time
    word, or when they follow each other ("the 2022-2023 season", a fiscal year); else they
    are as likely numbers ("ports 2000-2010", "ids 2015 to 2019")."""
    if m.group("word") or m.group(0).startswith("the years") or apart == 1:
        return True
    return _word_before(m.string, m.start()) in _YEARS_BEFORE


def _ranged(g: dict[str, Any]) -> bool:
    """The two ends of a range expression are joined: "and" only after "between"."""
    return bool(g["conn"] != "and" or g["word"] == "between")


def _resolve(kind: str, m: re.Match[str], now: datetime) -> tuple[datetime, datetime] | None:
    g = m.groupdict()
    today = _day(now)
    if kind == "iso":
        start = datetime(int(g["y"]), int(g["m"]), int(g["d"]), tzinfo=UTC)
        return start, start + timedelta(days=1)
    if kind == "iso_month":
        start = _month_start(int(g["y"]), int(g["m"]))
        return start, start + relativedelta(months=1)
    if kind.endswith("_range") and not _ranged(g):
        return None  # "2023 and 2024 were busy": two years, no range asked
    if kind == "year_range":
        first, last = sorted((int(g["year"]), int(g["year2"])))
        if not _years_meant(m, last - first):
            return None  # "ports 2000-2010": two numbers
        return datetime(first, 1, 1, tzinfo=UTC), datetime(last + 1, 1, 1, tzinfo=UTC)
    if kind == "month_range":
        return _month_range(g, now)
    if kind == "day_month_range" and g["month"] == "may" and not _may_is_a_month(m):
        return None  # "tests 3-5 may fail"
    if kind in ("month_day_range", "day_month_range"):
        return _day_range(g, now)
    if kind == "quarter":
        if g["q"] and not g["year"] and not _bare_quarter_is_one(m):
            return None  # "q1 = compute(x)", "the q3 model": a name
        quarter = int(g["q"]) if g["q"] else QUARTERS[g["nth"]]
        year = g["year"] or g["year2"]
        if year:
            start = _month_start(int(year), 3 * quarter - 2)
        else:  # the latest that has begun, as a bare month
            start = _recent_month(3 * quarter - 2, now, strictly_before=False)
        return start, start + relativedelta(months=3)
    if kind == "before_last":
        return _unit_range(now - _step(g["unit"], 2), g["unit"])
    if kind == "day_of_month":
        if g["rel"]:
            month = _month_start(now.year, now.month) - relativedelta(
                months=1 if g["rel"] == "last" else 0
            )
            start = month.replace(day=int(g["day"]))
        else:
            start = _recent_day_of_month(int(g["day2"]), now)
        return start, start + timedelta(days=1)
    if kind == "day_month" and g["month"] == "may" and not _may_is_a_month(m):
        return None  # "version 7 may break the build": the verb
    if kind in ("day_month_year", "month_day_year", "month_day", "day_month"):
        month, day = MONTHS[g["month"]], int(g["day"])
        if g.get("year"):
            start = datetime(int(g["year"]), month, day, tzinfo=UTC)
        else:
            start = _recent_day(month, day, now)
        return start, start + timedelta(days=1)
    if kind == "month_year":
        start = _month_start(int(g["year"]), MONTHS[g["month"]])
        return _part(start, start + relativedelta(months=1), g["part"])
    if kind == "day_before_yesterday":
        return today - timedelta(days=2), today - timedelta(days=1)
    if kind == "today":
        return today, today + timedelta(days=1)
    if kind == "yesterday":
        return today - timedelta(days=1), today
    if kind == "ago":
        back = now - _step(g["unit"], _number(g["num"]))
        return _unit_range(back, g["unit"])
    if kind == "past_n":
        return now - _step(g["unit"], _number(g["num"])), now
    if kind == "past_one":
        return now - _step(g["unit"] or g["unit2"], 1), now
    if kind == "weekend":
        monday = today - timedelta(days=today.weekday())
        saturday = monday + timedelta(days=5)
        if g["rel"] in ("last", "past") or saturday > now:
            saturday -= timedelta(days=7) if g["rel"] != "this" else timedelta(0)
        return saturday, saturday + timedelta(days=2)
    if kind == "rel_unit":
        unit = g["unit"]
        back = 0 if g["rel"] == "this" else 1
        start, end = _unit_range(now - _step(unit, back), unit)
        return _part(start, end, g["part"])
    if kind == "earlier":
        start, _ = _unit_range(now, g["unit"])
        return start, now
    if kind == "rel_weekday":
        delta = (today.weekday() - WEEKDAYS[g["weekday"]]) % 7
        if g["rel"] == "last" and delta == 0:
            delta = 7
        start = today - timedelta(days=delta)
        return _open(g["rel"], start, start + timedelta(days=1), now)  # "since Monday" to now
    if kind in ("rel_month", "part_month"):
        rel = g.get("rel")
        month = MONTHS[g["month"]]
        if rel == "this":
            start = _month_start(now.year, month)
        else:
            start = _recent_month(month, now, strictly_before=rel == "last")
        start, end = _part(start, start + relativedelta(months=1), g["part"])
        return _open(rel, start, end, now)
    if kind == "year":
        start = datetime(int(g["year"]), 1, 1, tzinfo=UTC)
        start, end = _part(start, start + relativedelta(years=1), g["part"])
        return _open(g.get("rel"), start, end, now)
    return None


def _open(
    rel: str | None, start: datetime, end: datetime, now: datetime
) -> tuple[datetime, datetime]:
    """ "since X" runs to now, "before X" up to X, "after X" from its end to now."""
    if rel == "since":
        return start, max(now, end)
    if rel == "before":  # from year 1: a memory may have happened before 1970
        return datetime.min.replace(tzinfo=UTC), start
    if rel in ("until", "till"):  # X included
        return datetime.min.replace(tzinfo=UTC), end
    if rel == "after":
        return end, max(now, end)
    return start, end


def find(query: str, now: datetime | None = None) -> list[Span]:
    """The time expressions of `query`, resolved against `now` (default: the clock), in order
    of appearance; "between A and B" becomes one span from A's start to B's end."""
    now = (now or datetime.now(UTC)).astimezone(UTC)
    text_ = " ".join(query.replace("’", "'").lower().split())
    found: list[tuple[int, int, datetime, datetime, str, re.Match[str]]] = []
    taken = _Taken()
    for kind, pattern in _PATTERNS:
        for m in pattern.finditer(text_):
            if taken.overlaps(m.start(), m.end()):
                continue
            try:
                resolved = _resolve(kind, m, now)
            except (ValueError, KeyError):  # "31 February": not a date
                resolved = None
            except OverflowError:  # "9999-12-31", "the last 99999999 days": past year 9999 or 1
                resolved = None
            if resolved is not None:
                found.append((m.start(), m.end(), *resolved, kind, m))
                taken.add(m.start(), m.end())
    found.sort()
    spans: list[Span] = []
    i = 0
    while i < len(found):
        a, b, start, end, kind, m = found[i]
        # The words that open a range end right before it: only the few characters there are
        # read (the whole text before each expression made a long query's reading quadratic).
        near = max(0, a - _LEAD_CHARS)
        opened = _BETWEEN.search(text_, near, a)
        if i + 1 < len(found):
            gap = text_[b : found[i + 1][0] + 1]
            # "2024-03-01 to 2024-03-05", "May 7 - June 2" are ranges without "from" too;
            # "from May 1 we moved to …" is none
            joined = gap[:-1].strip() in _TO
            if opened and opened.group("word") == "between":
                joined = " and " in gap
            if joined:
                a2, b2, start2, end2, _, _ = found[i + 1]  # in either order
                if (
                    kind in _YEARLESS
                    and not _A_YEAR.search(text_, a, b)
                    and _A_YEAR.search(text_, a2, b2)
                ):  # "from May 7 to June 2, 2022": that year's May 7
                    start, end = _resolve(kind, m, end2 - timedelta(microseconds=1)) or (
                        start,
                        end,
                    )
                a = opened.start() if opened else a
                spans.append(Span(text_[a:b2], min(start, start2), max(end, end2)))
                i += 2
                continue
        rel = _RELATIVE.search(text_, near, a)
        if rel is not None:
            a = rel.start()
            if rel.group("since"):
                end = max(now, end)
            elif rel.group("open"):  # "before 2024-03-01", "after May 7"
                start, end = _open(rel.group("open"), start, end, now)
            else:
                step = _step(rel.group("unit"), 1)
                try:
                    start, end = (
                        (end, end + step) if rel.group("dir") == "after" else (start - step, start)
                    )
                except OverflowError:  # "the day after 9999-12-30": no such day
                    i += 1
                    continue
        spans.append(Span(text_[a:b], start, end))
        i += 1
    return spans
