"""`memsys serve` refuses an open address without a token before it starts anything."""

from __future__ import annotations

from tests.cli.helpers import fails


def test_serve_refuses_public_bind_without_token() -> None:
    line = fails("serve", "--host", "0.0.0.0", "--port", "8799", "--json")
    assert "Refusing to serve on 0.0.0.0 without MEMSYS_API_TOKEN" in line
