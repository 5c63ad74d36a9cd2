"""The `memsys mcp` subprocess writes its answers' traces after answering (memsys.deferred):
a test that used it lets it finish them before the tables are wiped for the next test."""

from __future__ import annotations

from collections.abc import Iterator

import pytest


@pytest.fixture(autouse=True)
def settled_server(request: pytest.FixtureRequest) -> Iterator[None]:
    yield
    if "mcp" in request.fixturenames:
        request.getfixturevalue("mcp").settle()
