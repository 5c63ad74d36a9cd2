"""The assemble stage: snippets of at most 200 characters, the curated core and extended
context by mode, and a token budget that is never exceeded."""

from __future__ import annotations

from memsys.retrieval import assemble
from memsys.retrieval.assemble import Item
from memsys.tokens import count_tokens


def items(n: int, words: int = 12) -> list[Item]:
    return [
        Item(
            id=f"mem_{i}",
            source="memory",
            namespace="global",
            content=" ".join(f"word{i}x{j}" for j in range(words)),
            score=1 - i / 100,
        )
        for i in range(n)
    ]


def test_snippets_are_cut_at_a_word_and_marked() -> None:
    text = "alpha beta gamma " * 40
    short = assemble.snippet(text)
    assert len(short) <= 200 and short.endswith("…")
    assert short[:-1].split()[-1] in ("alpha", "beta", "gamma")
    assert assemble.snippet("  two\nlines  ") == "two lines"


POSTMORTEM = (
    "Checkout outage postmortem. "
    + " ".join(
        f"Step {n}: the on-call engineer checks the dashboards and the queue depth."
        for n in range(1, 8)
    )
    + " Action items are owned by Priya, due Friday. Thanks all."
)


def test_a_long_texts_snippet_shows_the_part_the_query_asks_about() -> None:
    near = assemble.focus_words("who owns the action items")
    shown = assemble.snippet(POSTMORTEM, near=near)
    assert shown == "… Action items are owned by Priya, due Friday. Thanks all."
    # the opening holds as much of the query: it stays; no query: the opening
    opening = assemble.snippet(POSTMORTEM)
    assert opening.startswith("Checkout outage postmortem.") and len(opening) <= 200
    assert assemble.snippet(POSTMORTEM, near=assemble.focus_words("checkout queue")) == opening
    # offsets of the text itself: "İ" lowers to two characters, which moved every match
    turkish = "İ" * 250 + ". Priya owns the action items. " + "Other words here. " * 30
    assert assemble.snippet(turkish, near=near).startswith("… Priya owns the action items.")
    # the query's output, cut to its snippet by a small budget, is the answer's part
    item = Item(id="mem_p", source="memory", namespace="global", content=POSTMORTEM, score=1)
    out = assemble.curated([item], "execution", 5, 40, "who owns the action items")
    assert "Priya" in out.output and out.tokens_used <= 40


def test_core_and_extended_by_mode_with_room_to_spare() -> None:
    for mode, extended in assemble.EXTENDED.items():
        out = assemble.curated(items(60), mode, 5, 200_000)
        assert (len(out.core), len(out.extended)) == (5, extended)
        assert [p.item.id for p in out.core] == [f"mem_{i}" for i in range(5)]
        assert out.left_out == 0


def test_the_budget_is_never_exceeded_and_skips_what_does_not_fit() -> None:
    pool = items(3, words=400) + items(40, words=5)
    for budget in (1, 10, 50, 400, 3000):
        out = assemble.curated(pool, "planning", 5, budget)
        pieces = out.core + out.extended
        total = count_tokens(out.output) + sum(count_tokens(p.snippet) for p in pieces)
        assert total == out.tokens_used <= budget
    small = assemble.curated(pool, "execution", 5, 120)
    # The long items do not fit whole: their snippets stand in for them in the output.
    assert small.core and all(len(p.snippet) <= 200 for p in small.core)
    assert len(small.output.split("\n\n")[0]) <= 200


def test_a_chunks_stored_count_assembles_exactly_as_counting_does() -> None:
    # A chunk carries its content's token count; assembly trusts it for the whole content
    # and for a snippet that cut nothing, and must come out token for token the same.
    # Whitespace the snippet flattens; characters str.split() takes for spaces but the
    # tokenizer deletes, gluing words (a form feed from a PDF, a unit separator).
    odd = [
        " tabs\tand\n\nlines ",
        "base\x0bball game",
        "to\x0cday we ship",
        "a" * 50 + "\x1f" + "b" * 60,
    ]
    pool = [
        Item(id=f"odd{i}", source="document", namespace="global", content=text, score=1)
        for i, text in enumerate(odd)
    ]
    pool += items(3, words=400) + items(30, words=5)
    known = [
        Item(**{**vars(it), "tokens": count_tokens(it.content)})  # type: ignore[arg-type]
        for it in pool
    ]
    for budget in (10, 60, 500, 5000):
        for mode in assemble.EXTENDED:
            counted = assemble.curated(pool, mode, 5, budget)
            stored = assemble.curated(known, mode, 5, budget)
            assert stored.output == counted.output
            assert stored.tokens_used == counted.tokens_used <= budget
            assert [(p.item.id, p.snippet, p.tokens) for p in stored.core + stored.extended] == [
                (p.item.id, p.snippet, p.tokens) for p in counted.core + counted.extended
            ]


NUMBERS = " ".join(str(n) for n in range(1000, 1300))


def test_left_out_counts_what_the_budget_cut_from_the_answer() -> None:
    # 60 candidates, room for 5 + 15: a budget that holds the core alone cut the 15
    # extended snippets, never the 40 candidates no budget would have returned.
    pool = items(60, words=5)
    core_only = sum(2 * count_tokens(it.content) for it in pool[:5])
    out = assemble.curated(pool, "execution", 5, core_only)
    assert (len(out.core), len(out.extended), out.left_out) == (5, 0, 15)
    # nothing fits: the whole answer, 20 items, was cut
    assert assemble.curated(pool, "execution", 5, 1).left_out == 20
    # a large snippet skipped for smaller ones further down is one of the cut
    big = Item(id="big", source="memory", namespace="global", score=0.5, content=NUMBERS)
    extra = 3 * count_tokens(pool[5].content)
    assert count_tokens(assemble.snippet(NUMBERS)) > extra
    out = assemble.curated([*pool[:5], big, *pool[5:]], "execution", 5, core_only + extra)
    returned = [p.item.id for p in out.core + out.extended]
    assert "big" not in returned and len(returned) == 8
    assert len(returned) + out.left_out == 20
    # fewer candidates than room: no more can be cut than there were
    assert assemble.curated(pool[:8], "execution", 5, 1).left_out == 8
