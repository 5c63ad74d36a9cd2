"""/docs works with no network: Swagger UI comes from packaged assets, never a CDN."""

from __future__ import annotations

import re
import socket

import pytest
from fastapi.testclient import TestClient


@pytest.fixture
def offline(monkeypatch: pytest.MonkeyPatch) -> None:
    """Any connection to a non-loopback address fails, as on a machine with no network."""
    real_connect = socket.socket.connect

    def connect(self: socket.socket, address: object) -> None:
        host = address[0] if isinstance(address, tuple) else ""
        if host and not str(host).startswith(("127.", "::1", "localhost")):
            raise OSError(f"network blocked in this test: {address}")
        real_connect(self, address)  # type: ignore[arg-type]

    monkeypatch.setattr(socket.socket, "connect", connect)


@pytest.fixture
def client(offline: None, client: TestClient) -> TestClient:
    """The shared REST client, with the network blocked first."""
    return client


def test_docs_page_and_its_assets_load_offline(client: TestClient) -> None:
    page = client.get("/docs")
    assert page.status_code == 200
    urls = re.findall(r"""(?:src|href|url)\s*[:=]\s*['"]([^'"]+)['"]""", page.text)
    assert urls, page.text
    assert not [u for u in urls if u.startswith(("http:", "https:", "//"))], urls
    for url in urls:
        response = client.get(url)
        assert response.status_code == 200, url
        assert len(response.content) > 100, url
    assert any(u.endswith(".js") for u in urls) and any(u.endswith(".css") for u in urls)
    assert client.get("/openapi.json").json()["openapi"].startswith("3.1")


def test_health_reports_the_model_loaded_at_start(client: TestClient) -> None:
    body = client.get("/v1/health").json()
    assert body["status"] == "ok" and body["model"] == "ready"
