"""The optional LLM extractor for episodes: an OpenAI-compatible chat-completions endpoint
(MEMSYS_EXTRACTOR_URL, off by default) asked for the entities and relations of a text as JSON.
Relation types are mapped onto the registry (unknown ones become related_to); a relation the
text denies or ends ("negated": true) closes the live edge as the rules' denials do. Any failure —
no answer, a timeout, JSON that does not fit — returns None and the rule-based extractor is
used instead (S000 "Degraded Operation"): an episode is never refused because a model is down.
"""

from __future__ import annotations

import json
import logging
import urllib.request
from typing import Any

from memsys import extraction, relations
from memsys.config import get_settings
from memsys.relation_extraction import Found

log = logging.getLogger(__name__)
MAX_NAME = 200
PROMPT = (
    "Extract the named entities and the relations the text states between them. Answer with "
    'JSON only: {"entities": [{"name": str, "type": str}], "relations": [{"source": str, '
    '"target": str, "relation": str, "fact": str, "negated": bool}]}. Relations use one of: '
    + ", ".join(relations.PUBLIC)
    + ". `fact` is the sentence that states it. `negated` is true when the text says the "
    "relation does not hold or no longer holds."
)


def _ask(text: str) -> dict[str, Any]:
    settings = get_settings()
    assert settings.extractor_url is not None
    body = {
        "model": settings.extractor_model,
        "temperature": 0,
        "response_format": {"type": "json_object"},
        "messages": [{"role": "system", "content": PROMPT}, {"role": "user", "content": text}],
    }
    headers = {"Content-Type": "application/json"}
    if settings.extractor_api_key:
        headers["Authorization"] = f"Bearer {settings.extractor_api_key}"
    request = urllib.request.Request(
        settings.extractor_url.rstrip("/") + "/chat/completions",
        data=json.dumps(body).encode(),
        headers=headers,
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=settings.extractor_timeout) as response:
        answer = json.loads(response.read())
    content = answer["choices"][0]["message"]["content"]
    parsed = json.loads(content)
    if not isinstance(parsed, dict):
        raise ValueError("the answer is not a JSON object")
    return parsed


def _mention(name: Any) -> extraction.Mention | None:
    if not isinstance(name, str) or not name.strip() or len(name) > MAX_NAME:
        return None
    return extraction.Mention(extraction.key_for(name), name.strip())


def extract(text: str) -> tuple[list[extraction.Mention], list[Found]] | None:
    """Entities and relations from the configured model, or None (not configured, failed)."""
    if get_settings().extractor_url is None:
        return None
    try:
        data = _ask(text)
        found = {m.key: m for e in data.get("entities", []) if (m := _mention(e.get("name")))}
        stated: list[Found] = []
        for r in data.get("relations", []):
            source, target = _mention(r.get("source")), _mention(r.get("target"))
            if source is None or target is None or source.key == target.key:
                continue
            found.setdefault(source.key, source)
            found.setdefault(target.key, target)
            relation = relations.canonical(str(r.get("relation", ""))) or "related_to"
            if relations.BY_NAME[relation].internal:
                relation = "related_to"
            fact = r.get("fact") if isinstance(r.get("fact"), str) else text
            denied = r.get("negated") is True
            if denied and relation == "related_to":
                continue  # a denial with no relation type states nothing, as in the rules
            stated.append(Found(source, target, relation, fact[:2000], denied))
        return list(found.values()), stated
    except Exception as exc:
        log.warning("LLM extractor failed (%s); using the rule-based extractor", exc)
        return None
