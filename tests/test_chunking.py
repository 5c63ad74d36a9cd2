"""Chunking rules users see in their search hits: every piece fits the model's window and
carries its text, never a bare heading."""

from __future__ import annotations

import time

import pytest

from memsys.chunking import pieces_from_bytes
from memsys.errors import InvalidInput
from memsys.tokens import count_tokens

SENTENCE = "Refresh tokens rotate on every use and expire after fifteen minutes of idle time. "


def markdown(*sections: str) -> bytes:
    return "\n\n".join(sections).encode()


def test_a_long_section_keeps_its_heading_with_the_first_piece_of_body() -> None:
    body = SENTENCE * 40  # one paragraph of ~600 tokens, over the 256-token window
    pieces = pieces_from_bytes(
        markdown("# Guide", f"## Authentication\n{body}", "## Logging\nJSON lines."),
        "markdown",
        256,
    )
    auth = [p for p in pieces if p.header_path == "Guide > Authentication"]
    assert len(auth) >= 3
    assert auth[0].content.startswith("## Authentication\nRefresh tokens")
    for piece in pieces:
        assert count_tokens(piece.content) <= 256
        lines = [line for line in piece.content.splitlines() if line.strip()]
        assert not (len(lines) == 1 and lines[0].startswith("#")), piece.content
    # Nothing of the body is lost or repeated, and no word is cut in two.
    words = " ".join(auth[0].content.split("\n", 1)[1:] + [p.content for p in auth[1:]]).split()
    assert words == body.split()


def test_a_heading_with_a_blank_line_before_its_long_body_is_not_a_chunk_alone() -> None:
    paragraphs = "\n\n".join([SENTENCE * 10] * 3)  # three paragraphs of ~150 tokens
    pieces = pieces_from_bytes(markdown(f"## Tokens\n\n{paragraphs}"), "markdown", 256)
    assert pieces[0].content.startswith("## Tokens\n")
    assert "Refresh tokens" in pieces[0].content
    assert all(count_tokens(p.content) <= 256 for p in pieces)


def test_short_sections_stay_whole_and_empty_headings_are_dropped() -> None:
    pieces = pieces_from_bytes(
        markdown("# Top", "## Empty", "### Child\nOnly line."), "markdown", 256
    )
    assert [(p.header_path, p.content) for p in pieces] == [
        ("Top > Empty > Child", "### Child\nOnly line.")
    ]


def test_a_heading_with_nothing_under_it_and_no_sections_below_is_kept() -> None:
    """A heading with no body was dropped even when no section below carried its title in
    header_path: a file of only "# TODO: write the failover runbook" had no chunk at all,
    nor a note whose last paragraph sits over a `---` (a setext heading)."""
    outline = markdown("# Runbooks", "## Failover", "## Restore\nFrom the nightly dump.")
    pieces = pieces_from_bytes(outline, "markdown", 256)
    assert [(p.header_path, p.content) for p in pieces] == [
        ("Runbooks > Failover", "## Failover"),
        ("Runbooks > Restore", "## Restore\nFrom the nightly dump."),
    ]
    todo = pieces_from_bytes(b"# TODO: write the failover runbook\n", "markdown", 256)
    assert [p.content for p in todo] == ["# TODO: write the failover runbook"]
    note = b"The replica failed over at 3am.\nNobody was paged.\n---\n"
    assert [p.content for p in pieces_from_bytes(note, "markdown", 256)] == [note.decode().strip()]


def test_a_long_line_without_breaks_is_cut_between_words_within_the_budget() -> None:
    words = [
        f"{w}{i % 97}"
        for i, w in enumerate(
            ["alpha", "Üñíçødé", "日本語の", "가나다라마바사아자차카타파하한", "x" * 40] * 1600
        )
    ]
    line = " ".join(words)
    pieces = pieces_from_bytes(line.encode(), "one-line.txt", 64)
    texts = [p.content for p in pieces]
    assert len(texts) > 100
    assert all(count_tokens(t) <= 64 for t in texts)
    assert " ".join(t.strip() for t in texts).split() == words  # nothing lost, no word cut


def test_a_long_block_split_by_lines_keeps_the_files_line_breaks() -> None:
    """A paragraph over the window was split by line and its lines joined with blank lines:
    a search hit showed SQL or code double-spaced, not as the file has it."""
    rows = [f"    SELECT count(*) AS c{i} FROM chunk WHERE valid_to IS NULL" for i in range(60)]
    source = "def report():\n    return '''\n" + "\n".join(rows) + "\n    '''\n"
    pieces = pieces_from_bytes(source.encode(), "python", 256)
    assert len(pieces) >= 2
    for piece in pieces:
        assert "\n\n" not in piece.content, piece.content[:200]
        assert piece.content in source  # each piece is a stretch of the file, unchanged
        assert count_tokens(piece.content) <= 256


def test_a_text_over_the_window_is_cut_into_even_pieces_not_a_stray_last_line() -> None:
    """Filling each piece to the budget left the last line or two (a `)`, `return x`) as a
    chunk of its own, which matched nothing and crowded search results."""
    lines = [f"    total += weight_{i} * score_{i}  # step {i}" for i in range(40)]
    source = "def fold():\n" + "\n".join(lines) + "\n    return total\n"
    sizes = [count_tokens(p.content) for p in pieces_from_bytes(source.encode(), "python", 256)]
    assert len(sizes) >= 2 and max(sizes) <= 256
    assert min(sizes) >= sum(sizes) / len(sizes) / 2, sizes


def test_python_comments_between_statements_are_indexed_with_what_they_describe() -> None:
    """Comments are no statements: chunks were cut from the statements' own lines, so a
    licence or module note, a comment on a definition and notes at the end of a file were
    in no chunk, and a search for their words never found the file."""
    source = (
        "# The frobnicator leaks memory on retry.\n"
        "import os; import sys\n"
        "\n"
        "# The wombat cache is flushed nightly by cron.\n"
        "@staticmethod\n"
        "def flush():\n"
        "    return os.sync()\n"
        "# A closing note about pelicans.\n"
    )
    pieces = pieces_from_bytes(source.encode(), "python", 254)
    texts = [p.content for p in pieces]
    assert texts == [
        "# The frobnicator leaks memory on retry.\nimport os; import sys",
        "# The wombat cache is flushed nightly by cron.\n@staticmethod\n"
        "def flush():\n    return os.sync()",
        "# A closing note about pelicans.",
    ]
    assert [p.header_path for p in pieces] == ["module", "def flush", "module"]
    assert pieces[1].metadata == {"line": 5}  # where the definition starts, as before


def test_form_feeds_and_unicode_line_separators_do_not_shift_python_definitions() -> None:
    """Lines were cut with str.splitlines, which breaks at a form feed, U+2028 and the
    like, where Python does not: after one of those (a page break between functions, a
    separator in a string) every definition's chunk was cut lines off, "def a" ended at
    its signature and "def b" was filed as module text. Markdown lost those characters."""
    source = '"""Mod."""\n\x0c\ndef a():\n    return "x\u2028y"\n\n\ndef b():\n    return 2\n'
    pieces = pieces_from_bytes(source.encode(), "python", 254)
    assert [(p.header_path, p.content) for p in pieces] == [
        ("module", '"""Mod."""'),
        ("def a", 'def a():\n    return "x\u2028y"'),
        ("def b", "def b():\n    return 2"),
    ]
    text = "# T\n\npage one\x0cpage two, a next line\x85in a paragraph\n"
    markdown_piece = pieces_from_bytes(text.encode(), "markdown", 254)[0].content
    assert markdown_piece == "# T\npage one\x0cpage two, a next line\x85in a paragraph"
    long = "\n".join(["a line\x0cwith a page break " * 10] * 10)  # over the budget
    assert "\x0c" in "".join(p.content for p in pieces_from_bytes(long.encode(), "text", 64))


def test_a_utf16_text_file_with_its_byte_order_mark_is_read() -> None:
    """Windows tools (PowerShell's `>`, Notepad's "Unicode") write UTF-16 with a byte order
    mark: such a notes.txt was refused as "not valid UTF-8"."""
    text = "# Notes\r\n\r\nThe café opens at nine.\r\n"
    for encoding in ("utf-16", "utf-16-le", "utf-16-be"):
        data = text.encode(encoding)
        if encoding != "utf-16":  # the codec without an endianness writes the BOM itself
            data = ("\ufeff" + text).encode(encoding)
        pieces = pieces_from_bytes(data, "markdown", 254)
        assert [(p.header_path, p.content) for p in pieces] == [
            ("Notes", "# Notes\nThe café opens at nine.")
        ], encoding
    with pytest.raises(InvalidInput, match=r"not valid UTF-16 \(truncated data at byte 2\)"):
        pieces_from_bytes(b"\xff\xfeA", "text", 254)
    with pytest.raises(InvalidInput, match=r"not valid UTF-8 \(unexpected end of data at byte 3\)"):
        pieces_from_bytes("café".encode("latin-1"), "text", 254)


def test_a_python_file_is_read_in_the_encoding_its_coding_line_declares() -> None:
    """Python reads a file in the encoding of its `# -*- coding: latin-1 -*-` line: such a
    file, valid Python, was refused as not UTF-8."""
    source = "# -*- coding: latin-1 -*-\ndef greet():\n    return 'café'\n"
    pieces = pieces_from_bytes(source.encode("latin-1"), "python", 254)
    assert [(p.header_path, p.content) for p in pieces] == [("def greet", source.strip())]
    with pytest.raises(InvalidInput, match="not valid UTF-8"):  # no coding line: UTF-8
        pieces_from_bytes("x = 'café'\n".encode("latin-1"), "python", 254)
    with pytest.raises(InvalidInput, match=r"not valid cp1252 \(character maps to"):
        pieces_from_bytes(b"# coding: cp1252\nx = '\x81'\n", "python", 254)
    for odd in (b"rot13", b"base64", b"no-such-codec"):  # no text encoding: read as UTF-8
        odd_source = b"# coding: " + odd + b"\nx = 1\n"
        assert [p.content for p in pieces_from_bytes(odd_source, "python", 254)] == [
            odd_source.decode().strip()
        ]


def test_a_fence_shown_inside_a_longer_fence_does_not_close_it() -> None:
    """Any ``` or ~~~ line toggled the code block: a ```python shown inside a ````markdown
    example closed it, so the example's `# comment` became a heading and every section
    after it carried that comment in its header_path."""
    source = markdown(
        "# Writing docs",
        "Show a fenced block inside a fence:",
        "````markdown\n```python\n# a comment, not a heading\n```\n# an example heading\n````",
        "## Next",
        "~~~\n```\n# still inside the tildes\n~~~",
        "## Last\n\nDone.",
    )
    pieces = pieces_from_bytes(source, "markdown", 254)
    assert [p.header_path for p in pieces] == [
        "Writing docs",
        "Writing docs > Next",
        "Writing docs > Last",
    ]
    assert "# an example heading\n````" in pieces[0].content


def test_inline_code_at_the_start_of_a_line_opens_no_code_block() -> None:
    """A line "```make test``` runs the suite." is inline code (a backtick fence's info string has
    no backtick): read as a fence it hid every heading after it in a code block."""
    source = markdown("# A", "```make test``` runs the suite.", "## B", "Body of B.")
    pieces = pieces_from_bytes(source, "markdown", 254)
    assert [p.header_path for p in pieces] == ["A", "A > B"]
    tilde = markdown("# A", "~~~ `info` may hold backticks", "## not a heading", "~~~")
    assert [p.header_path for p in pieces_from_bytes(tilde, "markdown", 254)] == ["A"]


def test_a_heading_ending_in_a_hash_keeps_it_in_the_header_path() -> None:
    """Trailing #s were stripped whether or not a space set them apart, so a section
    "## Using C#" was filed under "Using C" (a closing "##" after a space still goes)."""
    source = markdown("# Languages", "## Using C#\n\nAsync streams.", "## F# notes ##\n\nPipes.")
    paths = [p.header_path for p in pieces_from_bytes(source, "markdown", 254)]
    assert paths == ["Languages > Using C#", "Languages > F# notes"]


def test_a_heading_line_with_a_long_run_of_blanks_is_read_in_linear_time() -> None:
    """The heading pattern backtracked over every blank of a heading line for every other
    one: "# a", 20,000 spaces and a word took five seconds, a 1 MB such line hours."""
    line = "# Title" + " \t" * 50_000 + "end ##"
    started = time.perf_counter()
    pieces = pieces_from_bytes(f"{line}\n\nBody text.\n".encode(), "markdown", 254)
    assert time.perf_counter() - started < 5
    assert pieces[0].header_path == "Title" + " \t" * 50_000 + "end"
    for heading, path in [("# #", "#"), ("## Title ##  ", "Title"), ("# a#", "a#"), ("#\t", None)]:
        found = pieces_from_bytes(f"{heading}\n\nBody.".encode(), "markdown", 254)
        assert found[0].header_path == path, heading


def test_a_heading_indented_by_up_to_three_spaces_is_a_heading_and_four_is_code() -> None:
    """CommonMark lets an ATX heading stand up to three spaces in: "  ## Setup" gave its
    section no header_path; four spaces in, it is indented code, no heading."""
    source = markdown("# Guide", "  ## Setup\nRun make.", "    # not a heading, code")
    pieces = pieces_from_bytes(source, "markdown", 254)
    assert [(p.header_path, p.content) for p in pieces] == [
        ("Guide > Setup", "## Setup\nRun make.\n\n    # not a heading, code")
    ]


def test_a_windows_text_file_is_chunked_by_its_paragraphs_without_carriage_returns() -> None:
    """Plain text was split as read: a file saved with \\r\\n line breaks gave chunks holding
    \\r (shown in every hit) and a heading line glued to the next paragraph."""
    source = b"Release notes\r\n\r\nline one\r\nline two\r\n\r\nlast paragraph\r\n"
    pieces = pieces_from_bytes(source, "text", 254)
    assert [p.content for p in pieces] == ["Release notes\n\nline one\nline two\n\nlast paragraph"]


def test_setext_headings_are_headings_and_breaks_and_frontmatter_are_not() -> None:
    """`Title` over a line of `=` (or `-`) is a heading as `# Title` is: such a file's chunks
    had no header_path at all. A `---` after a blank line is a thematic break, `---` after a
    list item ends the list, and YAML frontmatter's `---` lines are no heading either."""
    source = (
        "---\ntitle: Runbook\n# owner: ops\n---\n\n"
        "Runbook\n=======\n\nWhat to do when the pager rings.\n\n"
        "Database\n--------\nCheck replication lag first.\n\n"
        "---\n\nAfter a break, still the database section.\n\n"
        "- a list item\n---\n\nStill the database section too.\n\n"
        "```\ncode\n---\n```\n\n"
        "Network\n---\n\nCheck the load balancer.\n"
    )
    pieces = pieces_from_bytes(source.encode(), "markdown", 256)
    paths = {p.header_path for p in pieces}
    assert paths == {None, "Runbook", "Runbook > Database", "Runbook > Network"}
    front = next(p for p in pieces if p.header_path is None)
    assert front.content == "---\ntitle: Runbook\n# owner: ops\n---"
    database = next(p for p in pieces if p.header_path == "Runbook > Database")
    assert database.content.startswith("Database\n--------\nCheck replication lag first.")
    assert "Still the database section too." in database.content
    assert "code\n---" in database.content
    network = next(p for p in pieces if p.header_path == "Runbook > Network")
    assert network.content == "Network\n---\nCheck the load balancer."  # as "## Network" is


@pytest.mark.parametrize(
    ("note", "paths"),
    [
        (
            "---\n\n# Release notes\n\nThe queue drains hourly.\n\n---\n\n## Fixes\n\nNone.\n",
            [None, "Release notes", "Release notes > Fixes"],
        ),
        (
            "---\n\nSet it as:\n\n```yaml\n---\nretries: 3\n```\n\n# Limits\n\nTen per second.\n",
            [None, "Limits"],
        ),
    ],
)
def test_a_leading_rule_that_is_no_yaml_mapping_is_markdown_not_frontmatter(
    note: str, paths: list[str | None]
) -> None:
    """A note opening with a `---` rule was read as frontmatter down to its next `---`: the
    headings above it were no headings (their text lost its header_path), and a `---` inside
    a code block ended the "frontmatter" so that the block's closing fence opened one that
    swallowed the rest of the note. Frontmatter is a closed `---` block holding a YAML
    mapping; anything else is markdown, every line of it indexed."""
    pieces = pieces_from_bytes(note.encode(), "markdown", 256)
    assert [p.header_path for p in pieces] == paths
    text = "\n".join(p.content for p in pieces)
    assert all(line in text for line in note.split("\n"))
