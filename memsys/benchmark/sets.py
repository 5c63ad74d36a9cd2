"""The evaluation sets as corpora: texts to store (in the order a user would write them),
their reference times, and questions whose gold answers are positions in the corpus.
Scoring follows the data's README: LoCoMo evidence recall (each conversation its own
namespace), HotpotQA supporting-passage recall (± the 2Wiki passages as distractors),
SciFact nDCG@10 over the train claims. `agent` is memsys's own: small labelled sets of what an
assistant stores (agent_memory.json), each its own namespace, scored by recall@1."""

from __future__ import annotations

import json
import random
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from importlib import resources
from pathlib import Path
from typing import Any

from memsys.errors import InvalidInput

SETS = ("locomo", "hotpotqa", "hotpotqa_2wiki", "scifact", "agent")
LOCOMO_DATE = "%I:%M %p on %d %B, %Y"
TURN_SECONDS = 30
_EVIDENCE = re.compile(r"D\d+:\d+")
_SESSION = re.compile(r"session_\d+")
# LoCoMo's question categories (its paper's names; 5 asks about what was never said).
LOCOMO_KINDS = {
    1: "multi-hop",
    2: "temporal",
    3: "open-domain",
    4: "single-hop",
    5: "adversarial",
}


@dataclass
class Corpus:
    """One namespace's texts and the questions asked of it."""

    name: str
    texts: list[str]
    questions: list[tuple[str, set[int]]]  # (question, positions of its gold texts)
    ks: tuple[int, ...]
    pool: int
    times: list[datetime] | None = None  # when each text happened (reference_time)
    now: datetime | None = None  # when the questions are asked (dates resolve against it)
    meta: list[dict[str, Any]] = field(default_factory=list)
    # Per question, its kind (LoCoMo's category), for a table of each kind; empty: one kind.
    kinds: list[str] = field(default_factory=list)


def half(questions: list[Any], which: str) -> list[Any]:
    """ "tune" keeps the odd-numbered questions, "report" the even ones, "all" every one:
    weights are chosen on one half and reported on the other."""
    if which == "all":
        return questions
    return questions[1 if which == "tune" else 0 :: 2]


def _read(path: Path) -> Any:
    if not path.is_file():
        raise InvalidInput(f"evaluation data not found: {path}")
    if path.suffix == ".jsonl":
        return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return json.loads(path.read_text())


def _shuffled(texts: list[str], seed: int = 0) -> list[int]:
    """A fixed random write order. The HotpotQA and SciFact files list related passages
    together; a store of unrelated passages has no such order, and the neighbourhood channel
    must not learn the answer from the file's layout."""
    order = list(range(len(texts)))
    random.Random(seed).shuffle(order)
    return order


def _reorder(corpus: Corpus) -> Corpus:
    order = _shuffled(corpus.texts)
    where = {old: new for new, old in enumerate(order)}
    corpus.texts = [corpus.texts[i] for i in order]
    corpus.meta = [corpus.meta[i] for i in order] if corpus.meta else []
    corpus.questions = [(q, {where[i] for i in gold}) for q, gold in corpus.questions]
    return corpus


def locomo(data: Path, quick: bool, which: str = "all") -> list[Corpus]:
    """One corpus per conversation: each turn `speaker: text`, happening at its session's
    date, TURN_SECONDS apart; questions asked an hour after the last turn."""
    out = []
    for conv in _read(data / "locomo" / "locomo10.json")[: 2 if quick else None]:
        c = conv["conversation"]
        texts: list[str] = []
        times: list[datetime] = []
        dia: dict[str, int] = {}
        for key in sorted((k for k in c if _SESSION.fullmatch(k)), key=lambda k: int(k[8:])):
            start = datetime.strptime(c[f"{key}_date_time"], LOCOMO_DATE).replace(tzinfo=UTC)
            for n, turn in enumerate(c[key]):
                dia[turn["dia_id"]] = len(texts)
                texts.append(f"{turn['speaker']}: {turn['text']}")
                times.append(start + timedelta(seconds=TURN_SECONDS * n))
        asked = []
        for qa in conv["qa"]:
            gold = {dia[d] for d in _EVIDENCE.findall(" ".join(qa.get("evidence", []))) if d in dia}
            if gold:
                kind = qa.get("category")
                label = f"{kind} {LOCOMO_KINDS[kind]}" if kind in LOCOMO_KINDS else str(kind)
                asked.append((qa["question"], gold, f"category {label}"))
        kept = half(asked, which)
        out.append(
            Corpus(
                name=f"locomo:{conv['sample_id']}",
                texts=texts,
                questions=[(q, gold) for q, gold, _ in kept],
                ks=(1, 5, 10, 20),
                pool=60,
                times=times,
                now=max(times) + timedelta(hours=1),
                kinds=[kind for _, _, kind in kept],
            )
        )
    return out


def hotpotqa(data: Path, quick: bool, distractors: bool, which: str = "all") -> Corpus:
    """The sample's passages as `title: text` (with the 2Wiki passages as distractors when
    asked); gold = the supporting passages."""
    corpus = _read(data / "hotpotqa" / "hotpotqa_train_corpus.json")
    titles = list(corpus)
    texts = [f"{t}: {''.join(corpus[t]).strip()}" for t in titles]
    if distractors:
        for passage in _read(data / "hotpotqa" / "2wikimultihopqa_corpus.json"):
            if passage["title"] not in corpus:
                texts.append(f"{passage['title']}: {passage['text'].strip()}")
    at = {t: i for i, t in enumerate(titles)}
    questions = []
    for q in _read(data / "hotpotqa" / "hotpotqa_train.json")[: 30 if quick else None]:
        gold = {at[t] for t, _ in q["supporting_facts"] if t in at}
        if gold:
            questions.append((q["question"], gold))
    name = "hotpotqa_2wiki" if distractors else "hotpotqa"
    return _reorder(Corpus(name, texts, half(questions, which), (2, 5, 10, 20), 60))


def scifact(data: Path, quick: bool, which: str = "all") -> Corpus:
    """Abstracts as `title text`; gold = the train qrels' abstracts of each claim."""
    docs = _read(data / "scifact" / "corpus.jsonl")
    at = {d["_id"]: i for i, d in enumerate(docs)}
    claims = {q["_id"]: q["text"] for q in _read(data / "scifact" / "queries.jsonl")}
    qrels: dict[str, set[int]] = {}
    qrels_file = data / "scifact" / "qrels" / "train.tsv"
    if not qrels_file.is_file():
        raise InvalidInput(f"evaluation data not found: {qrels_file}")
    for line in qrels_file.read_text().splitlines()[1:]:
        qid, doc, _ = line.split("\t")
        if doc in at and qid in claims:
            qrels.setdefault(qid, set()).add(at[doc])
    questions = half([(claims[q], gold) for q, gold in sorted(qrels.items())], which)
    texts = [f"{d['title']} {d['text']}" for d in docs]
    meta = [{"doc_id": d["_id"]} for d in docs]
    corpus = Corpus("scifact", texts, questions[: 80 if quick else None], (10, 100), 100)
    corpus.meta = meta
    return _reorder(corpus)


def agent(which: str = "all") -> list[Corpus]:
    """memsys's own labelled agent-memory sets (shipped, no data directory needed): one corpus
    per set, written in the listed order; a set with `days_ago` happened that many days
    before the file's `now`, when its questions are asked."""
    raw = json.loads(resources.files(__package__).joinpath("agent_memory.json").read_text())
    now = datetime.fromisoformat(raw["now"])
    out = []
    for name, part in raw["sets"].items():
        days = part.get("days_ago")
        out.append(
            Corpus(
                name=f"agent:{name}",
                texts=part["memories"],
                questions=half([(q, set(gold)) for q, gold in part["questions"]], which),
                ks=(1, 5, 10),
                pool=60,
                times=[now - timedelta(days=d) for d in days] if days else None,
                now=now,
            )
        )
    return out


def load(name: str, data: Path, quick: bool, which: str = "all") -> list[Corpus]:
    """The corpora of one set by name."""
    if name == "locomo":
        return locomo(data, quick, which)
    if name in ("hotpotqa", "hotpotqa_2wiki"):
        return [hotpotqa(data, quick, name == "hotpotqa_2wiki", which)]
    if name == "scifact":
        return [scifact(data, quick, which)]
    if name == "agent":
        return agent(which)
    raise InvalidInput(f"unknown evaluation set {name!r}; known: {', '.join(SETS)}")
