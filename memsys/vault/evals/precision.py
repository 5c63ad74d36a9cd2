"""Precision/recall (S004 suite 3) on labelled sets, with memsys's own retrieval:
execution precision (the right memory first) >= 0.90, planning recall (every relevant
memory in the top 10) >= 0.70. The labelled set shipped here always runs; LoCoMo (evidence
recall@10 on one conversation) runs when its file is given (`--locomo`).
"""

from __future__ import annotations

import json
import re
from importlib import resources
from pathlib import Path
from typing import Any

import yaml
from sqlalchemy.orm import Session

from memsys import regular_files
from memsys.embeddings import get_embedder
from memsys.errors import InvalidInput
from memsys.schemas import MemoryStoreBatchIn, MemoryStoreIn
from memsys.schemas.common import check_values
from memsys.services import memories
from memsys.vault.evals.base import Context, Figure, probe_namespace, ratio, scratch

PRECISION = 0.90
RECALL = 0.70
TOP_K = 10
LOCOMO_TURNS = 400  # the first conversation's first turns: seconds, not minutes, of embedding
_EVIDENCE = re.compile(r"D\d+:\d+")


def _plant(s: Session, ns: str, contents: list[str]) -> list[str]:
    """Store `contents` in `ns` in batches; their ids in order."""
    found: list[str] = []
    for start in range(0, len(contents), 500):
        part = contents[start : start + 500]
        params = MemoryStoreBatchIn(
            memories=[MemoryStoreIn(content=c, memory_type="fact", namespace=ns) for c in part]
        )
        vectors = get_embedder().embed(part)
        found += [r.id for r in memories.store_batch(s, params, prepared=vectors).results]
    return found


def _ranked(s: Session, ns: str, query: str) -> list[str]:
    return [h.id for h in memories.recall_hits(s, query, {"namespace": ns}, TOP_K, False).hits]


def labelled(data: dict[str, Any] | None = None) -> list[Figure]:
    data = data or yaml.safe_load(
        resources.files("memsys.vault.evals").joinpath("labelled.yaml").read_text("utf-8")
    )
    keys = list(data["memories"])
    ns = probe_namespace("labelled")
    right = executions = 0
    recalls: list[float] = []
    with scratch() as s:
        ids = dict(zip(keys, _plant(s, ns, [data["memories"][k] for k in keys]), strict=True))
        for q in data["queries"]:
            ranked = _ranked(s, ns, q["query"])
            expected = {ids[k] for k in q["expected"]}
            if q["mode"] == "execution":
                executions += 1
                right += bool(ranked) and ranked[0] in expected
            else:
                recalls.append(len(expected & set(ranked)) / len(expected))
    return [
        Figure(
            "execution precision@1 (labelled set)",
            ratio(right, executions),
            PRECISION,
            detail=f"{right}/{executions} queries",
        ),
        Figure(
            f"planning recall@{TOP_K} (labelled set)",
            sum(recalls) / len(recalls) if recalls else None,
            RECALL,
            detail=f"{len(recalls)} queries",
        ),
    ]


def _locomo_sample(path: str) -> tuple[list[tuple[str, str]], list[dict[str, Any]]]:
    """The first conversation's first LOCOMO_TURNS turns (dia_id, "speaker: text") and its
    questions, or InvalidInput saying what the file lacks."""
    try:
        data = json.loads(regular_files.read_bytes(Path(path).expanduser(), path))
    except (OSError, ValueError, RecursionError) as exc:
        raise InvalidInput(f"--locomo: cannot read {path}: {str(exc)[:200]}") from None
    try:
        sample = data[0]
        convo = sample["conversation"]
        turns: list[tuple[str, str]] = []
        for n in range(1, 100):
            for turn in convo.get(f"session_{n}", []):
                turns.append((str(turn["dia_id"]), f"{turn['speaker']}: {turn['text']}"))
        questions = [qa for qa in sample["qa"] if isinstance(qa, dict) and "question" in qa]
        check_values([text for _, text in turns[:LOCOMO_TURNS]], "a turn's text")
    except (TypeError, KeyError, IndexError, AttributeError) as exc:
        raise InvalidInput(
            f"--locomo: {path} is not LoCoMo's locomo10.json (a list of samples, each with "
            f"`conversation` sessions of turns and `qa`): missing or wrong {exc}"
        ) from None
    except ValueError as exc:
        raise InvalidInput(f"--locomo: {path}: {exc}") from None
    return turns[:LOCOMO_TURNS], questions


def locomo(path: str) -> Figure:
    """LoCoMo evidence recall@10 on the first conversation (its first LOCOMO_TURNS turns)."""
    turns, questions = _locomo_sample(path)
    known = {dia for dia, _ in turns}
    ns = probe_namespace("locomo")
    recalls: list[float] = []
    with scratch() as s:
        stored = _plant(s, ns, [t for _, t in turns])
        # A turn that repeats an earlier one word for word is stored once (memory_store's
        # dedup): the memory stands for every turn with its text.
        dia_of: dict[str, set[str]] = {}
        for memory_id, (dia, _) in zip(stored, turns, strict=False):
            dia_of.setdefault(memory_id, set()).add(dia)
        for qa in questions:
            gold = {e for e in _EVIDENCE.findall(" ".join(map(str, qa.get("evidence", []))))}
            gold &= known
            if not gold:
                continue
            top = set().union(*(dia_of.get(i, set()) for i in _ranked(s, ns, str(qa["question"]))))
            recalls.append(len(gold & top) / len(gold))
    return Figure(
        f"LoCoMo evidence recall@{TOP_K} (conversation 1)",
        sum(recalls) / len(recalls) if recalls else None,
        RECALL,
        detail=f"{len(recalls)} questions, {len(turns)} turns",
    )


def run(session: Session, ctx: Context) -> list[Figure]:
    figures = labelled()
    if ctx.locomo:
        figures.append(locomo(ctx.locomo))
    return figures
