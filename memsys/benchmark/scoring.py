"""Baselines computed in the same run, and the metrics.

- `PlainBM25`: Okapi BM25 the textbook way (k1 1.2, b 0.75, lowercase word tokens, English
  stop words removed, no stemming) — the lexical channel must match it;
- `OkapiBM25`: the same formula over any documents' term counts: the harness gives it
  PostgreSQL's English analysis of each stored chunk (the lexical channel's own tokens,
  stemmed), scored exhaustively — what the channel computes without its candidate budget;
- `dense_top`: exact cosine over the corpus's vectors (no index) — what HNSW approximates;
- recall@k (share of a question's gold texts in the first k), nDCG@10, and the floor check:
  fused must not rank below the best single channel.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterable
from typing import Any

import numpy as np

CHANNELS = ("dense", "lexical", "graph", "neighbours")
_WORD = re.compile(r"[a-z0-9]+")


class OkapiBM25:
    """Okapi BM25 (k1 1.2, b 0.75, the +1 IDF) over documents given as term counts, every
    document containing a query term scored. Written out here rather than importing the
    lexical channel's constants and formula: a baseline that shared the code it checks
    would agree with it by construction."""

    def __init__(self, docs: list[Counter[str]], lengths: list[float] | None = None) -> None:
        self.docs = docs
        sizes = lengths if lengths is not None else [sum(d.values()) for d in docs]
        self.lengths = np.array(sizes, dtype=np.float64)
        self.avgdl = float(self.lengths.mean()) if len(self.docs) else 1.0
        df: Counter[str] = Counter()
        self.postings: dict[str, list[int]] = {}
        for i, d in enumerate(self.docs):
            for term in d:
                df[term] += 1
                self.postings.setdefault(term, []).append(i)
        n = len(self.docs)
        self.idf = {t: math.log(1 + (n - f + 0.5) / (f + 0.5)) for t, f in df.items()}

    def top_terms(self, terms: Iterable[str], k: int) -> list[int]:
        """The `k` best documents for a query's (distinct) terms, by index (ties: the lower
        index first)."""
        scores = self.scores(terms)
        return sorted(scores, key=lambda i: (-scores[i], i))[:k]

    def scores(self, terms: Iterable[str]) -> dict[int, float]:
        """Each document holding a query term: its score."""
        scores: dict[int, float] = {}
        for term in sorted(set(terms)):  # a fixed summing order: repeatable scores
            for i in self.postings.get(term, []):
                tf = self.docs[i][term]
                norm = tf + 1.2 * (1 - 0.75 + 0.75 * self.lengths[i] / self.avgdl)
                scores[i] = scores.get(i, 0.0) + self.idf[term] * tf * 2.2 / norm
        return scores


class PlainBM25(OkapiBM25):
    """Okapi BM25 over one corpus's texts, tokenised the textbook way (the baseline memsys
    must match)."""

    def __init__(self, texts: list[str]) -> None:
        from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

        self.stop = ENGLISH_STOP_WORDS
        super().__init__([Counter(self.tokens(t)) for t in texts])

    def tokens(self, text: str) -> list[str]:
        return [w for w in _WORD.findall(text.lower()) if w not in self.stop]

    def top(self, query: str, k: int) -> list[int]:
        return self.top_terms(self.tokens(query), k)


def dense_top(vectors: np.ndarray, query: np.ndarray, k: int) -> list[int]:
    return [int(i) for i in np.argsort(-(vectors @ query))[:k]]


def recall_at(gold: set[str], got: list[str], k: int) -> float:
    return len(gold & set(got[:k])) / len(gold)


def ndcg_at(gold: set[str], got: list[str], k: int) -> float:
    dcg = sum(1 / math.log2(i + 2) for i, d in enumerate(got[:k]) if d in gold)
    ideal = sum(1 / math.log2(i + 2) for i in range(min(k, len(gold))))
    return dcg / ideal


Runs = dict[str, list[tuple[set[str], list[str]]]]  # ranking → (gold, ranked ids) per question


def per_question(gold: set[str], got: list[str], metric: str) -> float:
    """One question's value of a table's metric (R@k, all@k, nDCG@10)."""
    name, _, k = metric.partition("@")
    if name == "R":
        return recall_at(gold, got, int(k))
    if name == "all":
        return float(gold <= set(got[: int(k)]))
    return ndcg_at(gold, got, int(k))


def table(runs: Runs, ks: Iterable[int]) -> dict[str, dict[str, float]]:
    """Per ranking: mean recall@k, the share of questions with all gold in the first k, and
    nDCG@10."""
    metrics = [*(f"R@{k}" for k in ks), *(f"all@{k}" for k in ks), "nDCG@10"]
    return {
        name: {
            m: round(sum(per_question(g, r, m) for g, r in results) / len(results), 4)
            for m in metrics
        }
        for name, results in runs.items()
    }


def sign_test(runs: Runs, one: str, other: str, metric: str) -> dict[str, Any]:
    """Questions where ranking `one` scores above / below `other` on `metric`, and the
    two-sided sign test's p-value (ties left out): how likely a split at least this uneven
    is when neither ranking is better."""
    pairs = zip(runs[one], runs[other], strict=True)
    diffs = [per_question(g, a, metric) - per_question(g, b, metric) for (g, a), (_, b) in pairs]
    better, worse = sum(d > 0 for d in diffs), sum(d < 0 for d in diffs)
    n, low = better + worse, min(better, worse)
    tail = sum(math.comb(n, i) for i in range(low + 1)) / 2**n if n else 1.0
    return {"better": better, "worse": worse, "p": round(min(1.0, 2 * tail), 3)}


def merge(parts: list[dict[str, Any]]) -> dict[str, Any]:
    """Question-weighted means of several corpora's tables (LoCoMo's conversations)."""
    if len(parts) == 1:
        return parts[0]
    total = sum(p["questions"] for p in parts)
    merged: dict[str, Any] = {
        name: {
            key: round(sum(p[name][key] * p["questions"] for p in parts) / total, 4)
            for key in parts[0][name]
        }
        for name in parts[0]
        if isinstance(parts[0][name], dict)
    }
    merged["questions"] = total
    merged["documents"] = sum(p["documents"] for p in parts)
    merged["seconds"] = round(sum(p["seconds"] for p in parts), 1)
    return merged


def floor_check(result: dict[str, Any], metric: str) -> dict[str, Any]:
    """Fused against every channel alone, each in its own order, on every metric the table
    has (each cut-off, "all gold in the first k", nDCG): it holds when fused is below the
    best channel on none of them (no tolerance: one passage under is under). `metric` is the
    set's headline, reported first."""
    below = []
    for name in result["fused"]:
        best = max(result[channel][name] for channel in CHANNELS)
        if result["fused"][name] < best:
            below.append({"metric": name, "fused": result["fused"][name], "best_channel": best})
    return {
        "metric": metric,
        "fused": result["fused"][metric],
        "best_channel": max(result[name][metric] for name in CHANNELS),
        "below": below,
        "holds": not below,
    }
