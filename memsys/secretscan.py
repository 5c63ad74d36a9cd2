"""Secret-like strings in text a user is about to store (S004 red team: flagged on write).

Flagging, not refusing: memsys cannot know whether `password=hunter22` is a real
credential or a note about a test fixture, so memory_store stores it and says so in its
answer's `warnings`, where an agent (or `memsys eval`) sees it.
"""

from __future__ import annotations

import re
from typing import Any

PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("AWS access key id", re.compile(r"\b(AKIA|ASIA)[0-9A-Z]{16}\b")),
    ("private key", re.compile(r"-----BEGIN (?:[A-Z]+ )?PRIVATE KEY-----")),
    ("GitHub token", re.compile(r"\bgh[pousr]_[A-Za-z0-9]{30,}\b")),
    ("API key (sk-…)", re.compile(r"\bsk-(?:ant-|proj-)?[A-Za-z0-9_-]{20,}")),
    ("Slack token", re.compile(r"\bxox[abprs]-[A-Za-z0-9-]{10,}")),
    ("JSON web token", re.compile(r"\beyJ[\w-]{8,}\.eyJ[\w-]{8,}\.[\w-]{8,}")),
    ("password in a URL", re.compile(r"\b[a-z][a-z0-9+.-]*://[^/\s:@]+:[^@\s/]{3,}@")),
    (
        "assigned secret",
        re.compile(
            r"(?i)\b(?:password|passwd|pwd|secret|api[_-]?key|access[_-]?token|auth[_-]?token)"
            r"\s*[:=]\s*['\"]?[^\s'\"]{8,}"
        ),
    ),
)


def find(text: str) -> list[str]:
    """The kinds of secret-like strings in `text` (empty when none)."""
    return [name for name, pattern in PATTERNS if pattern.search(text)]


def warnings(text: str, what: str = "content") -> list[str]:
    """The warnings of a write that stores `text` (memory_store's content, a fact's, a
    preference's value as value_text gives it)."""
    return [
        f"{what} looks like it holds a secret ({kind}): memsys stored it; forget it if it "
        "is a real credential"
        for kind in find(text)
    ]


def value_text(value: Any, key: str = "") -> str:
    """A JSON value as lines of `key: text`, so that `{"password": "…"}` reads as the
    assignment it is (its JSON text puts a quote between the name and the colon)."""
    if isinstance(value, dict):
        return "\n".join(value_text(v, str(k)) for k, v in value.items())
    if isinstance(value, list):
        return "\n".join(value_text(v, key) for v in value)
    text = value if isinstance(value, str) else str(value)
    return f"{key}: {text}" if key else text
