"""The optional LLM extractor of episodes, against a stub OpenAI-compatible server on
127.0.0.1: its answer becomes entities and registry relations; a broken answer falls back to
the rule-based extractor; unset (the default), no request is made."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Any

import pytest

from memsys.config import get_settings
from tests.services.test_edges import op

ANSWER = {
    "entities": [{"name": "Billing", "type": "service"}, {"name": "Ledger", "type": "service"}],
    "relations": [
        {
            "source": "Billing",
            "target": "Ledger",
            "relation": "DEPENDS_ON",
            "fact": "Billing writes every charge to the Ledger.",
        },
        {"source": "Ledger", "target": "Audit Log", "relation": "feeds", "fact": "x"},
    ],
}


class Stub(BaseHTTPRequestHandler):
    requests: list[dict[str, Any]] = []
    reply: Any = ANSWER

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        Stub.requests.append({"path": self.path, "auth": self.headers.get("Authorization"), **body})
        content = Stub.reply if isinstance(Stub.reply, str) else json.dumps(Stub.reply)
        payload = json.dumps({"choices": [{"message": {"content": content}}]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def stub(monkeypatch: pytest.MonkeyPatch) -> Iterator[type[Stub]]:
    server = HTTPServer(("127.0.0.1", 0), Stub)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    monkeypatch.setenv("MEMSYS_EXTRACTOR_URL", f"http://127.0.0.1:{server.server_port}/v1")
    monkeypatch.setenv("MEMSYS_EXTRACTOR_API_KEY", "sk-test")
    get_settings.cache_clear()
    Stub.requests, Stub.reply = [], ANSWER
    yield Stub
    server.shutdown()
    monkeypatch.delenv("MEMSYS_EXTRACTOR_URL")
    get_settings.cache_clear()


def test_the_model_answer_becomes_entities_and_relations(stub: type[Stub], embedder: Any) -> None:
    out = op("add_episode", content="Billing writes every charge to the Ledger.")
    assert out["extractor"] == "llm"
    assert set(out["entities"]) == {"Billing", "Ledger", "Audit Log"}
    kinds = {(r["source"], r["target"]): r["relation_type"] for r in out["relations"]}
    assert kinds == {("Billing", "Ledger"): "depends_on", ("Ledger", "Audit Log"): "related_to"}
    sent = stub.requests[0]
    assert sent["path"] == "/v1/chat/completions" and sent["auth"] == "Bearer sk-test"
    assert sent["messages"][1]["content"] == "Billing writes every charge to the Ledger."


def test_a_relation_the_model_denies_closes_the_edge(stub: type[Stub], embedder: Any) -> None:
    op("add_episode", content="Billing writes every charge to the Ledger.")
    stub.reply = {
        "entities": [{"name": "Billing"}, {"name": "Ledger"}],
        "relations": [
            {"source": "Billing", "target": "Ledger", "relation": "depends_on",
             "fact": "Billing no longer writes to the Ledger.", "negated": True},
            {"source": "Billing", "target": "Ledger", "relation": "knows", "negated": True},
        ],
    }  # fmt: skip
    out = op("add_episode", content="Billing no longer writes to the Ledger.")
    assert out["relations"] == []
    assert [(r["source"], r["target"], r["relation_type"]) for r in out["relations_closed"]] == [
        ("Billing", "Ledger", "depends_on")
    ]
    assert '"negated": bool' in stub.requests[0]["messages"][0]["content"]
    assert op("build_context", entity_names=["Billing"])["facts"] == []


def test_a_broken_answer_falls_back_to_the_rules(stub: type[Stub], embedder: Any) -> None:
    stub.reply = "not json at all"
    out = op("add_episode", content="The auth.ts file depends on token.ts.")
    assert out["extractor"] == "rules" and len(stub.requests) == 1
    assert out["relations"][0]["relation_type"] == "depends_on"


def test_off_by_default(embedder: Any) -> None:
    assert get_settings().extractor_url is None
    assert op("add_episode", content="Billing uses Ledger.")["extractor"] == "rules"
