"""sql/graph_walks.sql runs as it is against a real database and answers the temporal
questions it promises."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from tests.services.test_edges import op
from tests.test_sql_scripts import psql as run_script


@pytest.fixture
def history(embedder: Any) -> datetime:
    week_ago = (datetime.now(UTC) - timedelta(days=7)).isoformat()
    op("add_episode", content="The auth.ts file depends on token.ts.", reference_time=week_ago)
    op("add_episode", content="token.ts uses session.py for refresh tokens.")
    op("fact_set", entity="auth.ts", attribute="owner", content="Alice",
       valid_from=(datetime.now(UTC) - timedelta(days=3)).isoformat())  # fmt: skip
    op("fact_set", entity="auth.ts", attribute="owner", content="Bob")
    return datetime.now(UTC)


def test_graph_walks_script_answers_as_of_questions(history: datetime) -> None:
    now = run_script("graph_walks.sql", ns="'global'", name="'auth.ts'", depth="2",
                     at=f"'{history.isoformat()}'", days="7")  # fmt: skip
    assert "session.py" in now and "token.ts" in now  # two hops away now
    assert "| Bob" in now and "1.0.0" in now  # the change Alice → Bob, last week
    earlier = (history - timedelta(days=2)).isoformat()
    then = run_script("graph_walks.sql", ns="'global'", name="'auth.ts'", depth="2",
                      at=f"'{earlier}'", days="1")  # fmt: skip
    believed = then.split("what we believed")[1].split("--- facts that changed")[0]
    assert "Alice" in believed and "Bob" not in believed
    walked = then.split("what we believed")[0]
    assert "token.ts" in walked and "session.py" not in walked  # not related yet then
