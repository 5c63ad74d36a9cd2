"""Fixtures of the tests that put tenants side by side: two namespaces seeded with data and
files, and a real HTTP server (REST + /mcp) for their tokens."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.security.helpers import Tenants, http_server, seed


@pytest.fixture
def tenants(embedder: Any, tmp_path: Path) -> Tenants:
    return seed(tmp_path)


@pytest.fixture(scope="module")
def base() -> Iterator[str]:
    with http_server() as url:
        yield url
