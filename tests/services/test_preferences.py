"""Preferences: versions, history and "as of" reads."""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime

import pytest

from memsys import runner
from memsys.errors import InvalidInput, NotFound
from memsys.schemas import PreferenceGetIn, PreferenceKeyIn, PreferenceListIn
from memsys.services import preferences
from tests.conftest import table_counts
from tests.factories import set_preference


def get(key: str, **fields):  # type: ignore[no-untyped-def]
    return runner.execute(preferences.get, PreferenceGetIn, {"key": key, **fields})


def test_set_get_and_versions() -> None:
    first = set_preference("coding_style", "Python, type hints")
    assert first.version == 1 and first.changed
    second = set_preference("coding_style", {"language": "Python", "max_loc": 60})
    assert second.version == 2
    assert get("coding_style").value == {"language": "Python", "max_loc": 60}
    same = set_preference("coding_style", {"language": "Python", "max_loc": 60})
    assert not same.changed and same.version == 2
    history = runner.execute(preferences.history, PreferenceKeyIn, {"key": "coding_style"})
    assert [v.version for v in history.versions] == [1, 2]
    assert history.versions[0].valid_to == history.versions[1].valid_from


def test_a_value_changes_by_json_not_by_python_equality() -> None:
    """1 -> true was "unchanged" (Python's True == 1: the new value was dropped), and a
    number jsonb keeps as another Python value (1e300 reads back as the int 10^300) was a
    new version every time it was set again."""
    set_preference("flag", 1)
    turned = set_preference("flag", True)
    assert turned.changed and turned.version == 2 and get("flag").value is True
    set_preference("huge", 1e300)
    assert not set_preference("huge", 1e300).changed
    assert set_preference("huge", {"a": [1e23]}).changed
    assert not set_preference("huge", {"a": [1e23]}).changed


def test_a_value_of_other_scripts_is_measured_by_its_characters() -> None:
    """The 32,000-character limit counted the value as ASCII-escaped JSON: a 6,000-character
    Chinese value (\\uXXXX each) was "too large: 36002 characters"."""
    value = "你好" * 3_000 + "👋"
    assert set_preference("greeting", value).changed
    assert get("greeting").value == value


def test_value_as_of_a_past_time() -> None:
    set_preference("response_tone", "friendly")
    time.sleep(0.05)
    between = datetime.now(UTC)
    time.sleep(0.05)
    set_preference("response_tone", "concise")
    assert get("response_tone").value == "concise"
    assert get("response_tone", as_of=between.isoformat()).value == "friendly"
    listing = runner.execute(preferences.list_values, PreferenceListIn, {"as_of": between})
    assert [(p.key, p.value) for p in listing.preferences] == [("response_tone", "friendly")]
    with pytest.raises(NotFound, match="as of"):
        get("response_tone", as_of="2001-01-01T00:00:00Z")


def test_list_by_namespace_and_lifecycle() -> None:
    set_preference("editor", "vim", lifecycle="personal")
    set_preference("project:current", "memsys", lifecycle="session")
    set_preference("db", "postgres", namespace="project:memsys", lifecycle="project")
    listing = runner.execute(preferences.list_values, PreferenceListIn, {"lifecycle": "session"})
    assert [p.key for p in listing.preferences] == ["project:current"]
    other = runner.execute(
        preferences.list_values, PreferenceListIn, {"namespace": "project:memsys"}
    )
    assert [p.value for p in other.preferences] == ["postgres"]


def test_missing_key_and_namespace_are_errors() -> None:
    set_preference("editor", "vim")
    with pytest.raises(NotFound, match="Preference not found: theme in namespace global"):
        get("theme")
    with pytest.raises(NotFound, match="Namespace not found: project:ghost"):
        get("editor", namespace="project:ghost")


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"key": " ", "value": 1}, "Preference key cannot be empty"),
        ({"key": "k", "value": None}, "Preference value cannot be null"),
        ({"key": "k", "value": "x" * 40_000}, "Preference value is too large"),
        ({"key": "k", "value": 1, "lifecycle": "forever"}, "lifecycle"),
    ],
)
def test_bad_preference_input_writes_nothing(fields, message) -> None:
    from memsys.schemas import PreferenceSetIn

    before = table_counts()
    with pytest.raises(InvalidInput, match=message):
        runner.execute(preferences.set_value, PreferenceSetIn, fields)
    assert table_counts() == before


def test_concurrent_writers_get_distinct_versions() -> None:
    barrier = threading.Barrier(5)
    errors: list[BaseException] = []

    def writer(i: int) -> None:
        barrier.wait()
        try:
            set_preference("counter", i)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(5)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    history = runner.execute(preferences.history, PreferenceKeyIn, {"key": "counter"})
    assert [v.version for v in history.versions] == [1, 2, 3, 4, 5]
    assert sum(v.valid_to is None for v in history.versions) == 1
