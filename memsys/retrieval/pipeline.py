"""Runs the stages for one query and keeps what each saw: plan → channels → fuse → hits.

Access counting is not done here (the caller counts what it hands out), so a replay or a
benchmark never changes the data. `as_of` makes every channel see only the rows valid then.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any

import numpy as np
from sqlalchemy import text
from sqlalchemy.orm import Session

from memsys.config import get_settings
from memsys.db import transaction_time
from memsys.embeddings import embed_query
from memsys.retrieval import (
    dense,
    fusion,
    graph,
    lexical,
    neighbours,
    rank,
    signals,
    temporal,
    timephrases,
)
from memsys.retrieval import filters as sql_filters
from memsys.tokens import count_tokens

Key = tuple[str, str]

# What fusion needs of each candidate: exact similarity to the query and BM25
# (lexical.BM25_OF, NULL where the lexical channel scored it already). Content and the other
# columns are read only for the hits returned (_DETAILS): a query weighs ~100-200 candidates
# and returns ~5. `cand` is the candidates' chunk rows, `k` their keys. The chunk columns are
# named once (_ROW) for the three statements that read them.
_ROW = ("doc_type", "content_hash", "confidence", "importance", "stage")
_HAPPENED = "coalesce({t}.occurred_at, {t}.created_at) AS happened"
_CANDIDATE_COLUMNS = f"""
    c.namespace, c.id, k.scored, c.tsv, c.doc_len, {", ".join(f"c.{n}" for n in _ROW)},
    {_HAPPENED.format(t="c")}
"""
_SIMILARITY = """
    CASE WHEN c.embedding IS NULL THEN NULL
         ELSE 1 - (c.embedding <=> CAST(:embedding AS vector)) END
"""
_FEATURE_COLUMNS = f"""
    cand.namespace, cand.id, {", ".join(f"cand.{n}" for n in _ROW)}, cand.happened,
    cand.similarity, CASE WHEN cand.scored THEN NULL ELSE {lexical.BM25_OF} END AS bm25
"""

# Candidates the graph and temporal channels add (the neighbourhood reads its own: below).
_FEATURES = text(
    f"""
    WITH cand AS (
        SELECT {_CANDIDATE_COLUMNS}, {_SIMILARITY} AS similarity
        FROM chunk c
        JOIN unnest(CAST(:namespaces AS text[]), CAST(:ids AS text[]),
                    CAST(:scored AS boolean[])) AS k(namespace, id, scored)
          ON c.namespace = k.namespace AND c.id = k.id
    )
    SELECT {_FEATURE_COLUMNS} FROM cand
    """
)

# The same of a neighbour the neighbourhood channel found, read in its statement
# (neighbours.Also: the chunk row is `cand`, its embedding `near.embedding`).
_NEIGHBOUR_FEATURES = f"""
    {", ".join(f"cand.{n}" for n in _ROW)}, {_HAPPENED.format(t="cand")},
    1 - (near.embedding <=> CAST(:embedding AS vector)) AS similarity,
    {lexical.BM25_OF} AS bm25
"""

# The dense channel (dense.KNN) and the features of its hits and the lexical channel's
# (:namespaces, :ids) in one statement; a dense hit's similarity is its distance from the
# search. A format template: sql_filters.statement fills the channel's {where}.
_FIRST = f"""
WITH knn AS MATERIALIZED ({dense.KNN}),
k AS (
    SELECT coalesce(knn.namespace, lex.namespace) AS namespace,
           coalesce(knn.id, lex.id) AS id, knn.distance, lex.id IS NOT NULL AS scored
    FROM knn
    FULL JOIN unnest(CAST(:namespaces AS text[]), CAST(:ids AS text[])) AS lex(namespace, id)
      ON knn.namespace = lex.namespace AND knn.id = lex.id
),
cand AS (
    SELECT {_CANDIDATE_COLUMNS}, k.distance,
           CASE WHEN k.distance IS NOT NULL THEN 1 - k.distance ELSE {_SIMILARITY} END
             AS similarity
    FROM chunk c
    JOIN k ON c.namespace = k.namespace AND c.id = k.id
)
SELECT {_FEATURE_COLUMNS}, cand.distance FROM cand
"""

_DETAILS = text(
    """
    SELECT c.namespace, c.id, c.doc_type, c.content, c.token_count, c.memory_type,
           c.importance, c.confidence, c.tags, c.metadata, c.source_file, c.chunk_index,
           c.header_path, c.created_at, c.stage, c.doc_len,
           coalesce(c.occurred_at, c.created_at) AS happened
    FROM chunk c
    JOIN unnest(CAST(:namespaces AS text[]), CAST(:ids AS text[])) AS k(namespace, id)
      ON c.namespace = k.namespace AND c.id = k.id
    """
)


@dataclass
class Hit:
    namespace: str
    id: str
    doc_type: str
    content: str
    token_count: int
    # relevance in [0, 1] (fusion.relevance), non-increasing down the list except for the
    # entry the seat placed (Retrieval.fusion["seated"]), which shows its own
    score: float
    similarity: float | None
    vec_rank: int | None
    fts_rank: int | None
    memory_type: str | None
    importance: float
    confidence: float
    tags: list[str]
    metadata: dict[str, Any]
    source_file: str | None
    chunk_index: int | None
    header_path: str | None
    created_at: datetime
    bm25: float = 0.0
    fused: float = 0.0
    own: float = 0.0  # its own relevance, before the cap by the hits above it
    happened_at: datetime | None = None  # occurred_at (reference_time), else created_at
    stage: str = "active"  # the lifecycle stage (a read rekindles aged hits)
    # A document hit: the other files of its namespace whose chunk with the same text dedup
    # left out (a link and its target, a file copied under another name), among candidates.
    also_in: list[str] = field(default_factory=list)

    def trace_row(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "namespace": self.namespace,
            "score": round(self.score, 6),
            "fused": round(self.fused, 6),
            "similarity": None if self.similarity is None else round(self.similarity, 6),
            "bm25": round(self.bm25, 6),
            "vec_rank": self.vec_rank,
            "fts_rank": self.fts_rank,
            "tokens": self.token_count,
        }


@dataclass
class Retrieval:
    hits: list[Hit]
    vec_count: int
    fts_count: int
    timings: dict[str, float] = field(default_factory=dict)
    channels: dict[str, Any] = field(default_factory=dict)
    fusion: dict[str, Any] = field(default_factory=dict)
    # Every candidate's channel scores, (id, similarity, bm25, ppr, neighbourhood): what fusion
    # saw, for the trace and for measuring other fusion methods on the same candidates.
    features: list[tuple[str, float | None, float, float, float]] = field(default_factory=list)
    # Every candidate in fused order, (id, fused score), and the ids left out because a better
    # one had the same text: the trace's record of where each candidate went.
    ranked: list[tuple[str, float]] = field(default_factory=list)
    duplicates: list[str] = field(default_factory=list)
    temporal: list[float] = field(default_factory=list)  # per feature row: 1 inside a range

    def candidates(self) -> list[dict[str, Any]]:
        return [h.trace_row() for h in self.hits]


class _Clock:
    def __init__(self) -> None:
        self.last = time.perf_counter()
        self.timings: dict[str, float] = {}

    def lap(self, name: str) -> None:
        """Time since the last lap, added to `name` (a stage may run in several steps)."""
        now = time.perf_counter()
        self.timings[name] = round(self.timings.get(name, 0.0) + (now - self.last) * 1000, 3)
        self.last = now


def retrieve(
    session: Session,
    query: str,
    *,
    filters: dict[str, Any] | None = None,
    limit: int,
    pool: int | None = None,
    as_of: datetime | None = None,
    vector: np.ndarray | None = None,
    weights: fusion.Weights = fusion.CURRENT,
    method: str = "zfuse",
    terms: lexical.QueryTerms | None = None,
    now: datetime | None = None,
) -> Retrieval:
    """The best `limit` chunks for `query` under `filters` (keys of filters.FILTER_SQL);
    dates in the query ("last May") are resolved against `now` (default: as_of, else the
    clock)."""
    given = sql_filters.active(filters)
    pool = max(pool or get_settings().candidate_pool, limit)
    clock = _Clock()
    # What needs only the text runs first: the query's embedding may still be on its way
    # (embeddings.prefetch_query), and these statements run meanwhile.
    if terms is None:  # a replay passes the term statistics its trace recorded
        terms = lexical.analyse(session, query, given.get("namespace"), as_of)
    lexical_hits = lexical.search(session, terms, given, as_of, pool)
    clock.lap("lexical_ms")
    names = graph.Named()
    if weights.graph > 0:
        names = graph.named(session, query, given.get("namespace"), as_of)
    clock.lap("graph_ms")  # the graph's first step; the channel's later steps add to it
    if vector is None:
        vector = embed_query(query)
    clock.lap("embed_ms")  # what is left to wait for
    embedding = dense.literal(vector)
    bm25 = dict(lexical_hits)
    rows: dict[Key, Any] = {}
    dense_hits = _first(session, embedding, terms, given, as_of, pool, bm25, rows)
    # A lexical hit purged since its statement ran has no row: it is no candidate.
    found = dict.fromkeys([k for k, _ in dense_hits] + [k for k, _ in lexical_hits])
    keys = [k for k in found if k in rows]
    clock.lap("dense_ms")  # the dense channel and every candidate's features so far

    graph_scores: dict[Key, float] = {}
    walk = graph.Walk()
    if weights.graph > 0 and keys:
        if not names.keys:  # a walk seeded only by the hits themselves mostly echoes them
            weights = replace(weights, graph=weights.graph * weights.graph_unnamed)
        elif names.subjects:  # asks about a thing the store has an entry for: its links
            weights = replace(weights, graph=weights.graph * weights.graph_subject)
    if weights.graph > 0 and keys:
        first = fuse_scores(keys, rows, bm25, weights, method)
        best = sorted(range(len(keys)), key=lambda i: -first[i])[: weights.graph_seeds]
        seeds = graph.seeds(
            session,
            names.keys,
            [(keys[i], 1.0 / rank) for rank, i in enumerate(best, start=1)],
            as_of,
        )
        walk = graph.search(session, seeds, given, as_of, pool, weights.graph_restart)
        graph_scores = dict(walk.hits)
        new = [k for k, _ in walk.hits if k not in rows]
        keys += _complete(session, embedding, terms, new, bm25, rows)
    clock.lap("graph_ms")

    spans = timephrases.find(query, now or as_of) if weights.temporal > 0 else []
    if spans and now is None and as_of is None:  # "the past week" from the call's own time,
        spans = timephrases.find(query, transaction_time(session))  # which its trace records
    time_hits = temporal.search(session, spans, embedding, given, as_of, pool)
    keys += _complete(
        session, embedding, terms, [k for k, _ in time_hits if k not in rows], bm25, rows
    )
    time_scores = temporal.inside(spans, {k: rows[k]["happened"] for k in keys})
    clock.lap("temporal_ms")

    near_scores: dict[Key, float] = {}
    near = neighbours.Near()
    if weights.neighbours > 0 and keys:
        # Seeds: the best hits of every other channel, each with its fused strength.
        first = fuse_scores(keys, rows, bm25, weights, method, graph_scores, None, time_scores)
        best = sorted(range(len(keys)), key=lambda i: -first[i])[: weights.neighbour_seeds]
        near = neighbours.search(
            session,
            [(keys[i], first[i]) for i in best],
            given,
            as_of,
            width=weights.neighbour_width,
            gap=timedelta(seconds=weights.neighbour_gap_s),
            decay=weights.neighbour_decay,
            coherence=weights.neighbour_coherence,
            also=neighbours.Also(
                _NEIGHBOUR_FEATURES, {**lexical.score_params(terms), "embedding": embedding}, rows
            ),
        )
        # Write order is evidence only where rows written together are alike (the gate).
        if weights.neighbour_gated:
            weights = replace(weights, neighbours=weights.neighbours * near.gate)
        near_scores = dict(near.hits)
        new = [k for k, _ in near.hits if k in near.rows]  # read with the neighbours
        for key in new:
            rows[key] = near.rows[key]
            bm25[key] = float(near.rows[key]["bm25"])
        keys += new
    clock.lap("neighbours_ms")

    time_scores = temporal.inside(spans, {k: rows[k]["happened"] for k in keys})
    sims = [_similarity(rows[k]) for k in keys]
    lex = [bm25.get(k, 0.0) for k in keys]
    fused = fuse_scores(keys, rows, bm25, weights, method, graph_scores, near_scores, time_scores)
    fused = rank.adjust(session, keys, rows, fused, as_of)  # confidence (capped) and stage
    vec_rank = {k: i for i, (k, _) in enumerate(dense_hits, start=1)}
    fts_rank = {k: i for i, (k, _) in enumerate(lexical_hits, start=1)}
    unseated = sorted(range(len(keys)), key=lambda i: (-fused[i], -(sims[i] or 0.0), keys[i][1]))
    copies = _copies(unseated, keys, rows)
    at = {k: i for i, k in enumerate(keys)}
    entries = [at[k] for k, _ in walk.hits if k in walk.entries and k in at]
    place = weights.entry_seat if limit >= weights.entry_seat else 0  # a seat past the cut
    order, seated = fusion.seat(unseated, entries, place, copies)
    chosen: list[int] = []
    duplicates: list[str] = []
    for i in order:
        if i in copies:
            duplicates.append(keys[i][1])
            continue
        chosen.append(i)
        if len(chosen) == limit:
            break
    same = _same_text(chosen, copies, keys, rows)
    copied = [k for found in same.values() for k in found]
    details = _details(session, [keys[i] for i in chosen] + copied, as_of)
    hits = [
        _hit(details[keys[i]], keys[i], sims[i], lex[i], fused[i], terms, vec_rank, fts_rank)
        for i in chosen
        if keys[i] in details  # a purge committed since the features were read
    ]
    for hit in hits:
        files = {details[k]["source_file"] for k in same.get((hit.namespace, hit.id), [])}
        hit.also_in = sorted(files - {hit.source_file, None})
    seated_id = None if seated is None else keys[seated][1]
    never_rising(hits, seated_id)
    clock.lap("fuse_ms")
    return Retrieval(
        hits=hits,
        vec_count=len(dense_hits),
        fts_count=len(lexical_hits),
        timings=clock.timings,
        channels={
            "dense": [{"id": k[1], "similarity": round(s, 6)} for k, s in dense_hits],
            "lexical": {
                **terms.trace(),
                "hits": [{"id": k[1], "bm25": round(s, 6)} for k, s in lexical_hits],
            },
            "graph": [{"id": k[1], "ppr": round(s, 8)} for k, s in walk.hits],
            "neighbours": [{"id": k[1], "share": round(s, 6)} for k, s in near.hits],
            "temporal": {
                "ranges": [span.as_dict() for span in spans],
                "hits": [k[1] for k in time_scores],
            },
        },
        fusion={
            "method": method,
            **weights.as_dict(),
            "query_entities": len(names.keys),
            "query_subjects": names.subjects,
            "neighbour_gate": round(near.gate, 4),
            "neighbour_lift": None if near.lift is None else round(near.lift, 4),
            # The entry the seat moved up, and its place before it moved (copies dedup left
            # out are not counted, as the seat does not count them).
            "seated": None
            if seated is None
            else {
                "id": seated_id,
                "from": [i for i in unseated if i not in copies].index(seated) + 1,
            },
        },
        features=[
            (k[1], sims[i], lex[i], graph_scores.get(k, 0.0), near_scores.get(k, 0.0))
            for i, k in enumerate(keys)
        ],
        ranked=[(keys[i][1], fused[i]) for i in order],
        duplicates=duplicates,
        temporal=[time_scores.get(k, 0.0) for k in keys],
    )


def _copies(order: list[int], keys: list[Key], rows: dict[Key, Any]) -> set[int]:
    """The candidates whose text a better-ranked one already has (dedup leaves them out)."""
    seen: set[str] = set()
    copies: set[int] = set()
    for i in order:
        digest = rows[keys[i]]["content_hash"]
        if digest in seen:
            copies.add(i)
        seen.add(digest)
    return copies


def _same_text(
    chosen: list[int], copies: set[int], keys: list[Key], rows: dict[Key, Any]
) -> dict[Key, list[Key]]:
    """For each chosen document, the candidates dedup left out that are documents of its
    namespace with its text: whose files the hit names (Hit.also_in)."""
    by_text: dict[tuple[str, str], list[Key]] = {}
    for i in copies:
        if rows[keys[i]]["doc_type"] == "document":
            by_text.setdefault((keys[i][0], rows[keys[i]]["content_hash"]), []).append(keys[i])
    same: dict[Key, list[Key]] = {}
    for i in chosen:
        if rows[keys[i]]["doc_type"] == "document":
            found = by_text.get((keys[i][0], rows[keys[i]]["content_hash"]))
            if found:
                same[keys[i]] = found
    return same


def never_rising(hits: list[Hit], seated_id: str | None) -> None:
    """Scores read down the list never rise: a hit is never shown as more relevant than one
    ranked above it. The seated entry (fusion.seat) shows its own relevance, capped by the
    hit above it, and does not lower the hits below it: its place is the walk's, not a
    judgement on theirs. Each hit keeps its own relevance (`own`) for cut-offs."""
    above: Hit | None = None
    for hit in hits:
        hit.score = hit.own
        if above is not None:
            hit.score = min(hit.score, above.score)
        if hit.id != seated_id:
            above = hit


def _similarity(row: Any) -> float | None:
    return None if row["similarity"] is None else float(row["similarity"])


def _first(
    session: Session,
    embedding: str,
    terms: lexical.QueryTerms,
    given: dict[str, Any],
    as_of: datetime | None,
    pool: int,
    bm25: dict[Key, float],
    rows: dict[Key, Any],
) -> list[tuple[Key, float]]:
    """The dense channel's hits, ((namespace, id), similarity) nearest first (ties by id),
    with every row of them and of the lexical channel's hits (`bm25`) read into `rows`."""
    statement = sql_filters.statement(_FIRST, given, as_of)
    params = {
        **sql_filters.binds(given, as_of),
        **lexical.score_params(terms),
        "embedding": embedding,
        "pool": pool,
        "namespaces": [k[0] for k in bm25],
        "ids": [k[1] for k in bm25],
    }
    nearest: list[tuple[float, Key]] = []
    for row in session.execute(statement, params).mappings():
        key = (row["namespace"], row["id"])
        rows[key] = row
        if key not in bm25:
            bm25[key] = float(row["bm25"])
        if row["distance"] is not None:
            nearest.append((row["distance"], key))
    nearest.sort(key=lambda d: (d[0], d[1][1], d[1][0]))
    return [(key, float(rows[key]["similarity"])) for _, key in nearest]


def _complete(
    session: Session,
    embedding: str,
    terms: lexical.QueryTerms,
    keys: list[Key],
    bm25: dict[Key, float],
    rows: dict[Key, Any],
) -> list[Key]:
    """Read what fusion needs of `keys` (similarity, BM25 where not known yet — the lexical
    channel scored its own hits —, content hash); returns the keys that exist."""
    if not keys:
        return []
    params = {
        **lexical.score_params(terms),
        "embedding": embedding,
        "namespaces": [k[0] for k in keys],
        "ids": [k[1] for k in keys],
        "scored": [k in bm25 for k in keys],
    }
    for row in session.execute(_FEATURES, params).mappings():
        key = (row["namespace"], row["id"])
        rows[key] = row
        if key not in bm25:
            bm25[key] = float(row["bm25"])
    return [k for k in keys if k in rows]


def _details(session: Session, keys: list[Key], as_of: datetime | None) -> dict[Key, Any]:
    """The hits' columns; as of a past time, with the text they had then (archiving since
    replaced it with a summary: the history holds the original) and the confidence they had
    then (outcomes since moved it: memory_context files a golden rule by it)."""
    if not keys:
        return {}
    params = {"namespaces": [k[0] for k in keys], "ids": [k[1] for k in keys]}
    rows: dict[Key, Any] = {
        (row["namespace"], row["id"]): row for row in session.execute(_DETAILS, params).mappings()
    }
    if as_of is not None:
        for key, content in signals.contents_as_of(session, list(rows), as_of).items():
            rows[key] = {**rows[key], "content": content, "token_count": count_tokens(content)}
        for key, confidence in signals.confidences_as_of(session, list(rows), as_of).items():
            rows[key] = {**rows[key], "confidence": confidence}
    return rows


def fuse_scores(
    keys: list[Key],
    rows: dict[Key, Any],
    bm25: dict[Key, float],
    weights: fusion.Weights,
    method: str,
    graph_scores: dict[Key, float] | None = None,
    near_scores: dict[Key, float] | None = None,
    time_scores: dict[Key, float] | None = None,
) -> list[float]:
    sims = [_similarity(rows[k]) for k in keys]
    lex = [bm25.get(k, 0.0) for k in keys]
    if method == "rrf":
        return fusion.rrf(sims, lex, weights)
    graph_list = [graph_scores.get(k, 0.0) for k in keys] if graph_scores else None
    near_list = [near_scores.get(k, 0.0) for k in keys] if near_scores else None
    fused = fusion.zfuse(sims, lex, weights, graph_list, near_list)
    if time_scores:
        inside = [time_scores.get(k, 0.0) for k in keys]
        fused = fusion.add_channel(fused, inside, weights.temporal, weights.floor)
    return fused


def _hit(
    row: Any,
    key: Key,
    similarity: float | None,
    bm25: float,
    fused: float,
    terms: lexical.QueryTerms,
    vec_rank: dict[Key, int],
    fts_rank: dict[Key, int],
) -> Hit:
    # coverage 1: the chunk matches every query term, measured at its own length
    relevance = fusion.relevance(similarity, bm25, terms.whole_at(row["doc_len"]))
    return Hit(
        namespace=row["namespace"],
        id=row["id"],
        doc_type=row["doc_type"],
        content=row["content"],
        token_count=row["token_count"],
        score=relevance,
        own=relevance,
        similarity=None if similarity is None else max(0.0, similarity),
        vec_rank=vec_rank.get(key),
        fts_rank=fts_rank.get(key),
        memory_type=row["memory_type"],
        importance=row["importance"],
        confidence=row["confidence"],
        tags=list(row["tags"] or []),
        metadata=dict(row["metadata"] or {}),
        source_file=row["source_file"],
        chunk_index=row["chunk_index"],
        header_path=row["header_path"],
        created_at=row["created_at"],
        bm25=bm25,
        fused=fused,
        happened_at=row["happened"],
        stage=row["stage"],
    )
