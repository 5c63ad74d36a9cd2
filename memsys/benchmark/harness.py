"""The retrieval harness: store a corpus through the batch write path, ask every question
through `memsys.retrieval.pipeline.retrieve` (what memory_recall, memory_query and
search_nodes call), and tabulate every channel alone, the fused order, the ablations
(re-fused on the same candidates without a channel or with another weight) and the
baselines computed in the same run: exact dense, a textbook BM25, and BM25 over
PostgreSQL's own analysis of the stored chunks scored exhaustively (what the lexical channel
computes without its candidate budget). Everything happens in one transaction that is rolled
back at the end: the user's memories are never touched and nothing is left behind.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
from sqlalchemy import text
from sqlalchemy.orm import Session

from memsys.benchmark import scoring, sets
from memsys.benchmark.sets import Corpus
from memsys.embeddings import embed_query, get_embedder
from memsys.retrieval import fusion, lexical, pipeline
from memsys.schemas import MemoryStoreBatchIn, MemoryStoreIn
from memsys.services import memories
from memsys.vault.evals.base import probe_namespace, scratch

METRIC = {
    "locomo": "R@10",
    "hotpotqa": "R@5",
    "hotpotqa_2wiki": "R@5",
    "scifact": "nDCG@10",
    "agent": "R@1",
}
# Sets whose corpora are different kinds of store: the floor is checked on each corpus too
# (a mean over them could hide one where fusion loses).
PER_PART = {"agent"}
ROWS = (
    "baseline_dense", "baseline_bm25", "baseline_bm25_pg",
    "dense", "lexical", "graph", "neighbours", "rrf",
    "fused_dense_lex", "fused_no_graph", "fused_no_near", "fused_flat_graph", "fused_ungated",
    "fused_no_time",
    "fused_time_1", "fused_no_seat", "fused",
)  # fmt: skip
BATCH = 500
ANALYZED = ("chunk", "edge", "entity", "term_stat", "corpus_stat")

Embed = Callable[[list[str]], np.ndarray]
Loader = Callable[[Session, str, Corpus, np.ndarray], list[str]]


def store(session: Session, ns: str, corpus: Corpus, vectors: np.ndarray) -> list[str]:
    """The corpus's texts stored in order through memory_store_batch (the path a user's bulk
    load takes), each with its reference time; their memory ids in order."""
    found: list[str] = []
    for start in range(0, len(corpus.texts), BATCH):
        items = [
            MemoryStoreIn(
                content=corpus.texts[i],
                memory_type="fact",
                namespace=ns,
                metadata=corpus.meta[i] if corpus.meta else {},
                reference_time=corpus.times[i] if corpus.times else None,
            )
            for i in range(start, min(start + BATCH, len(corpus.texts)))
        ]
        batch = MemoryStoreBatchIn(memories=items)
        part = vectors[start : start + len(items)]
        found += [r.id for r in memories.store_batch(session, batch, prepared=part).results]
    return found


def rankings(session: Session, ns: str, corpus: Corpus, query: str) -> dict[str, list[str]]:
    """Every order memsys produces for one question, from one pipeline run."""
    k = max(corpus.ks)
    found = pipeline.retrieve(
        session,
        query,
        filters={"namespace": ns, "doc_type": "memory"},
        limit=k,
        pool=corpus.pool,
        now=corpus.now,
    )
    ids = [f[0] for f in found.features]
    sims = [f[1] for f in found.features]
    lex = [f[2] for f in found.features]
    ppr = [f[3] for f in found.features]
    near = [f[4] for f in found.features]
    # The ablations re-fuse with the graph and neighbourhood weights this query got (graph
    # ×graph_subject when it names a stored memory's subject, neighbours × the gate of write
    # order); fused_flat_graph gives every query the base graph weight, fused_ungated the
    # base neighbourhood weight.
    base = fusion.CURRENT
    now = replace(
        base, graph=float(found.fusion["graph"]), neighbours=float(found.fusion["neighbours"])
    )

    def order(scores: list[float]) -> list[str]:
        return [ids[i] for i in sorted(range(len(ids)), key=lambda i: -scores[i])][:k]

    return {
        "dense": [h["id"] for h in found.channels["dense"]][:k],
        "lexical": [h["id"] for h in found.channels["lexical"]["hits"]][:k],
        "graph": [h["id"] for h in found.channels["graph"]][:k],
        "neighbours": [h["id"] for h in found.channels["neighbours"]][:k],
        "fused": [h.id for h in found.hits],
        "fused_dense_lex": order(fusion.zfuse(sims, lex, replace(now, graph=0, neighbours=0))),
        "fused_no_graph": order(fusion.zfuse(sims, lex, replace(now, graph=0), None, near)),
        "fused_no_near": order(fusion.zfuse(sims, lex, replace(now, neighbours=0), ppr)),
        "fused_flat_graph": order(
            fusion.zfuse(sims, lex, replace(now, graph=base.graph), ppr, near)
        ),
        "fused_ungated": order(
            fusion.add_channel(
                fusion.zfuse(sims, lex, replace(now, neighbours=base.neighbours), ppr, near),
                found.temporal,
                base.temporal,
            )
        ),
        "fused_no_time": order(fusion.zfuse(sims, lex, now, ppr, near)),
        "fused_time_1": order(
            fusion.add_channel(fusion.zfuse(sims, lex, now, ppr, near), found.temporal, 1.0)
        ),
        "rrf": order(fusion.rrf(sims, lex)),
        "fused_no_seat": _unseated(found)[:k],
    }


def _unseated(found: pipeline.Retrieval) -> list[str]:
    """The fused order as it was before the entry seat moved a hit up (duplicates left out,
    as the seat's places count them)."""
    dropped = set(found.duplicates)
    order = [i for i, _ in found.ranked if i not in dropped]
    seated = found.fusion.get("seated")
    if seated:
        order.remove(seated["id"])
        order.insert(seated["from"] - 1, seated["id"])
    return order


_ANALYSED = text(
    """
    SELECT c.id, c.doc_len, u.lexeme, coalesce(array_length(u.positions, 1), 1) AS tf
    FROM chunk c
    LEFT JOIN LATERAL unnest(c.tsv) u ON true  -- a chunk of stop words only still counts
    WHERE c.namespace = :namespace AND c.valid_to IS NULL
    ORDER BY c.id
    """
)


def analysed_bm25(session: Session, ns: str) -> tuple[scoring.OkapiBM25, list[str]]:
    """Exhaustive Okapi BM25 over the namespace's live chunks as they are stored for full text
    (`chunk.tsv`: the English analysis plus identifier parts; the lexical channel's tokens,
    lengths and corpus: every live chunk, as corpus_stat counts them), and the chunk ids in
    its order."""
    docs: dict[str, Counter[str]] = {}
    lengths: dict[str, int] = {}
    for row in session.execute(_ANALYSED, {"namespace": ns}):
        counts = docs.setdefault(row.id, Counter())
        if row.lexeme is not None:
            counts[row.lexeme] = int(row.tf)
        lengths[row.id] = int(row.doc_len)
    order = list(docs)
    return scoring.OkapiBM25([docs[i] for i in order], [lengths[i] for i in order]), order


def evaluate(
    session: Session, ns: str, corpus: Corpus, ids: list[str], vectors: np.ndarray
) -> tuple[dict[str, Any], scoring.Runs]:
    """Every ranking's table for one stored corpus, baselines included, and the rankings
    themselves (question by question)."""
    bm25 = scoring.PlainBM25(corpus.texts)
    analysed, analysed_ids = analysed_bm25(session, ns)
    k = max(corpus.ks)
    runs: dict[str, list[tuple[set[str], list[str]]]] = {}
    started = time.perf_counter()
    for query, positions in corpus.questions:
        gold = {ids[i] for i in positions}
        got = rankings(session, ns, corpus, query)
        got["baseline_dense"] = [ids[i] for i in scoring.dense_top(vectors, embed_query(query), k)]
        got["baseline_bm25"] = [ids[i] for i in bm25.top(query, k)]
        lexemes = lexical.analyse(session, query, ns).lexemes
        got["baseline_bm25_pg"] = [analysed_ids[i] for i in analysed.top_terms(lexemes, k)]
        for name, ranking in got.items():
            runs.setdefault(name, []).append((gold, ranking))
    table = {
        "questions": len(corpus.questions),
        "documents": len(corpus.texts),
        "seconds": round(time.perf_counter() - started, 1),
        **scoring.table(runs, corpus.ks),
    }
    return table, runs


def checked(table: dict[str, Any], runs: scoring.Runs, metric: str) -> dict[str, Any]:
    """The floor check of `table`, each metric fused is below on with the channel it is below
    and the sign test of the two, question by question (is the gap more than chance?)."""
    check = scoring.floor_check(table, metric)
    for below in check["below"]:
        m = below["metric"]
        channel = max(scoring.CHANNELS, key=lambda c: table[c][m])
        below.update(channel=channel, **scoring.sign_test(runs, "fused", channel, m))
    return check


def by_kind(
    runs: scoring.Runs, kinds: list[str], ks: tuple[int, ...], metric: str
) -> dict[str, Any]:
    """A table and floor check for each kind of question (LoCoMo's categories), for reading:
    the set's own floor is checked on all of its questions."""
    out = {}
    for kind in sorted(set(kinds)):
        mine = {
            name: [r for r, k in zip(rs, kinds, strict=True) if k == kind]
            for name, rs in runs.items()
        }
        table = {"questions": kinds.count(kind), **scoring.table(mine, ks)}
        out[kind] = {**table, "floor": checked(table, mine, metric)}
    return out


def run_set(
    name: str,
    data: Path,
    quick: bool = False,
    which: str = "all",
    embed: Embed | None = None,
    loader: Loader = store,
) -> dict[str, Any]:
    """One set end to end in a transaction that is rolled back; its merged table and the
    floor check."""
    embed = embed or get_embedder().embed
    parts, every = [], []
    corpora = sets.load(name, data, quick, which)
    for corpus in corpora:
        vectors = np.asarray(embed(corpus.texts), dtype=np.float32)
        with scratch() as session:
            ns = probe_namespace(f"bench-{corpus.name}")
            ids = loader(session, ns, corpus, vectors)
            # Planner statistics for the rows just written (ANALYZE sees this transaction's
            # own rows, and its statistics roll back with them): without them the graph
            # walk's join was planned for empty tables, 0.2–1.3 s a question on SciFact.
            session.execute(text(f"ANALYZE {', '.join(ANALYZED)}"))
            part, runs = evaluate(session, ns, corpus, ids, vectors)
            parts.append(part)
            every.append(runs)
    result = scoring.merge(parts)
    runs = {r: [one for part_runs in every for one in part_runs[r]] for r in every[0]}
    result["floor"] = checked(result, runs, METRIC[name])
    if name in PER_PART:
        result["parts"] = {
            corpus.name: {**part, "floor": checked(part, part_runs, METRIC[name])}
            for corpus, part, part_runs in zip(corpora, parts, every, strict=True)
        }
    kinds = [kind for corpus in corpora for kind in corpus.kinds]
    if kinds:
        result["kinds"] = by_kind(runs, kinds, corpora[0].ks, METRIC[name])
    return result


def floor_holds(result: dict[str, Any]) -> bool:
    """The floor holds on the set and on each of its corpora that is checked alone."""
    parts = result.get("parts", {}).values()
    return bool(result["floor"]["holds"]) and all(p["floor"]["holds"] for p in parts)


def render(name: str, result: dict[str, Any]) -> list[str]:
    """The table a person reads: one row per ranking, one column per metric."""
    metrics = [m for m in result["fused"] if not m.startswith("all@")]
    lines = [
        f"{name}: {result['questions']} questions, {result['documents']} documents",
        f"{'ranking':<16}" + "".join(f"{m:>9}" for m in metrics),
    ]
    lines += [f"{r:<16}" + "".join(f"{result[r][m]:>9.3f}" for m in metrics) for r in ROWS]
    floor = result["floor"]
    verdict = "holds on every metric" if floor["holds"] else "BROKEN (below)"
    lines.append(
        f"floor ({floor['metric']}): fused {floor['fused']:.3f} vs best channel "
        f"{floor['best_channel']:.3f} — {verdict}"
    )
    lines += [f"  below on {b['metric']}: {_below(b)}" for b in floor["below"]]
    for part_name, part in result.get("parts", {}).items():
        check = part["floor"]
        below = "; ".join(f"{b['metric']} {_below(b)}" for b in check["below"])
        verdict = "holds" if check["holds"] else f"BROKEN: {below}"
        lines.append(
            f"  {part_name} ({part['questions']} questions): fused {check['fused']:.3f} vs best "
            f"channel {check['best_channel']:.3f} — {verdict}"
        )
    kinds = result.get("kinds", {})
    if kinds:
        lines.append(f"by kind of question ({floor['metric']}; the floor is the set's, above):")
    for kind, part in kinds.items():
        check = part["floor"]
        below = "; ".join(f"{b['metric']} {_below(b)}" for b in check["below"])
        lines.append(
            f"  {kind} ({part['questions']} questions): fused {check['fused']:.3f}, best "
            f"channel {check['best_channel']:.3f}" + (f" — below on {below}" if below else "")
        )
    return lines


def _below(b: dict[str, Any]) -> str:
    """One metric fused is below on: the figures and, when known, the sign test."""
    out = f"fused {b['fused']:.3f} vs {b.get('channel', 'best channel')} {b['best_channel']:.3f}"
    if "p" in b:
        out += f" ({b['better']} questions better, {b['worse']} worse: sign test p {b['p']:.3f})"
    return out
