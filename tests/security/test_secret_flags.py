"""Secret-like strings are flagged on every write that stores text an agent gave, not only
memory_store's (S004 red team: flagged on write; the text is stored all the same)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.security.helpers import run

TOKEN = "github token ghp_a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
WRITES = [
    ("add_episode", lambda text: {"content": f"Kiwi Corp rotated the {text}"}),
    ("preference_set", lambda text: {"key": "deploy", "value": text}),
    ("preference_set", lambda text: {"key": "ci", "value": {"env": {"GH": text}}}),
    ("preference_set", lambda text: {"key": "db", "value": {"password": text[-20:]}}),
    ("fact_set", lambda text: {"entity": "Kiwi", "attribute": "ci", "content": text}),
    (
        "memory_observe",
        lambda text: {"envelope": {"type": "command.exec", "cmd": f"echo {text}", "exitCode": 0}},
    ),
]


@pytest.mark.parametrize(
    ("name", "args"), WRITES, ids=[f"{n}-{i}" for i, (n, _) in enumerate(WRITES)]
)
def test_a_secret_is_flagged_on_every_write_that_stores_it(
    embedder: Any, name: str, args: Any
) -> None:
    """add_episode stored a memory of the text, preference_set and fact_set stored it as
    given, and none said a word of the token in it."""
    flagged = run(name, **args(TOKEN)).warnings
    assert len(flagged) == 1 and "looks like it holds a secret" in flagged[0], flagged
    assert run(name, **args("the nightly build")).warnings == []
