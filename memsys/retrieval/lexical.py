"""The lexical channel: Okapi BM25 computed inside PostgreSQL.

Term statistics come from `term_stat` / `corpus_stat`, which triggers keep in step with every
chunk write (migration 7c1e5a9b2d40); document lengths from `chunk.doc_len`. The query is
analysed by the same English configuration as the documents (stemming, stop words).

Cost is bounded: candidates come from the GIN index for the query's rarest terms only — terms
are added rarest first while their summed document frequency stays within
`POSTINGS_BUDGET` — and at most `CANDIDATE_CAP` of them are scored. Every query term still
counts in each candidate's score, so on a corpus where all terms fit the budget the ranking is
exactly BM25; on a large one a chunk that holds only very common query terms can be missed,
which costs little (such chunks score low). Scoring costs ~11 µs per candidate (its term
vector is unnested), so the budget is what a query costs at 100k (benchmarks/README.md).

The candidate set is deterministic, so a replay sees the same one: the budget equals the cap,
so the cap binds only when the rarest term alone is in more chunks than that, and then the
candidates are the first `CANDIDATE_CAP` by id — never whichever rows a plan happened to read
first (a replay's as-of filter gets another plan; at 100k, 37 of 100 replays differed).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import text
from sqlalchemy.orm import Session

from memsys.retrieval import filters as sql_filters

K1 = 1.2
B = 0.75
POSTINGS_BUDGET = 1_000
CANDIDATE_CAP = POSTINGS_BUDGET
# What traces written before these were recorded used (a replay of one scores as it did).
_EARLIER = {"budget": 20_000, "cap": 4_000}

# The query's terms with their document frequencies and the corpus's size and total length,
# in one statement (one row with a NULL lexeme when the query has no term). Two statements,
# for one namespace and for all: with "(:namespace IS NULL OR …)" PostgreSQL planned the
# statement anew on every call instead of reusing one plan (0.39 -> 0.26 ms at 10k).
# The query's lexemes and, for a number, its other reading: PostgreSQL's English parser
# reads a number after a hyphen as signed (`JIRA-1234` → `jira`, `-1234`), so the query
# `1234` also looks for `-1234` and `ORA-00942` for `00942` — when the scope holds that
# reading at all. Numbers of three digits or more: a short one after a hyphen is mostly the
# end of a range (`10-20`), and reading those too cost SciFact .003 nDCG@10
# (benchmarks/README.md). `base` is the lexeme a reading stands for (itself for its own).
_TERMS_SQL = """
    SELECT corpus.n, corpus.total, q.lexeme, q.base, q.df
    FROM ({corpus}) corpus
    LEFT JOIN LATERAL (
        SELECT q.lexeme, q.base, q.df FROM (
            SELECT DISTINCT ON (r.lexeme) r.lexeme, r.base, ({df}) AS df
            FROM (
                SELECT lexeme, lexeme AS base FROM unnest(to_tsvector('english', :query))
                UNION ALL
                SELECT CASE WHEN lexeme LIKE '-%' THEN substr(lexeme, 2)
                            ELSE '-' || lexeme END, lexeme
                FROM unnest(to_tsvector('english', :query))
                WHERE lexeme ~ '^-?[0-9]{{3,}}$'
            ) r
            ORDER BY r.lexeme, r.lexeme <> r.base
        ) q
        WHERE q.lexeme = q.base OR q.df > 0
    ) q ON true
    ORDER BY q.lexeme
"""
# Live: the statistics the write triggers keep (of live rows only).
_LIVE_CORPUS = """SELECT coalesce(sum(doc_count), 0) AS n, coalesce(sum(total_len), 0) AS total
    FROM corpus_stat WHERE {scope}"""
_LIVE_DF = """coalesce((SELECT sum(t.df) FROM term_stat t
    WHERE t.lexeme = r.lexeme AND {t_scope}), 0)"""
# As of a past time: counted over the rows valid then (a memory forgotten since still has its
# words there; the triggers' statistics know only today's rows). Dearer — one count per query
# term — and only for views of the past. The lexeme is quoted as _tsquery quotes it.
_PAST_CORPUS = f"""SELECT count(*) AS n, coalesce(sum(c.doc_len), 0) AS total FROM chunk c
    WHERE {{c_scope}} AND {sql_filters.AS_OF}"""
_PAST_DF = f"""SELECT count(*) FROM chunk c
    WHERE c.tsv @@ CAST('''' || replace(replace(r.lexeme, '\\', '\\\\'), '''', '''''') || ''''
                        AS tsquery)
      AND {{c_scope}} AND {sql_filters.AS_OF}"""
_SCOPES = {
    True: {
        "scope": "namespace = :namespace",
        "t_scope": "t.namespace = :namespace",
        "c_scope": "c.namespace = :namespace",
    },
    False: {"scope": "true", "t_scope": "true", "c_scope": "true"},
}
_TERMS = {
    (named, past): text(
        _TERMS_SQL.format(
            corpus=(_PAST_CORPUS if past else _LIVE_CORPUS).format(**_SCOPES[named]),
            df=(_PAST_DF if past else _LIVE_DF).format(**_SCOPES[named]),
        )
    )
    for named in (True, False)
    for past in (True, False)
}

# BM25 of one candidate `cand` (columns tsv, doc_len) as a scalar expression, 0 when it holds
# no query term: Σ over query terms in the chunk of
#     idf · tf·(k1+1) / (tf + k1·(1 − b + b·dl/avgdl)).
# setweight marks the query's lexemes and ts_filter keeps only them, in C, so the SQL unnests
# the few query terms a chunk holds rather than its whole vocabulary (~40 % faster at 100k,
# same scores). A term's IDF is looked up by its place in :lexemes rather than joined, so the
# sum runs over the chunk's terms in their tsvector order whatever plan a statement gets: the
# channel, the feature reads (memsys.retrieval.pipeline) and a replay with the statistics its
# trace recorded (lexemes in another order) give a chunk the same score to the last bit.
# Every chunk tsvector is built by to_tsvector (weight D, positions kept).
BM25_OF = """
coalesce((SELECT sum((CAST(:idfs AS float8[]))[array_position(CAST(:lexemes AS text[]), x.lexeme)]
                     * (x.tf * (:k1 + 1))
                     / (x.tf + :k1 * (1 - :b + :b * cand.doc_len / :avgdl)))
          FROM (SELECT u.lexeme, coalesce(array_length(u.positions, 1), 1) AS tf
                FROM unnest(ts_filter(setweight(cand.tsv, 'A', CAST(:lexemes AS text[])),
                                      CAST(ARRAY['a'] AS "char"[]))) u) x), 0)
"""

_SEARCH = f"""
WITH cand AS (
    SELECT c.namespace, c.id, c.tsv, c.doc_len FROM chunk c
    WHERE c.tsv @@ CAST(:tsquery AS tsquery) AND {{where}}
    ORDER BY c.id
    LIMIT :cap
)
SELECT cand.namespace, cand.id, {BM25_OF} AS score
FROM cand
ORDER BY score DESC, cand.id
LIMIT :pool
"""


@dataclass(frozen=True)
class QueryTerms:
    """The analysed query with its statistics in the searched scope."""

    lexemes: list[str]
    df: list[int]
    idf: list[float]
    doc_count: int
    avgdl: float
    budget: int  # the postings budget and candidate cap it is scored with
    cap: int
    # lexeme → the query's lexeme it is another reading of (a signed number), when not itself
    readings: dict[str, str] = field(default_factory=dict)

    @property
    def whole(self) -> float:
        """The BM25 weight of a chunk matching the whole query (each term once, at average
        length): a term and its other reading count once, as the better of the two."""
        best: dict[str, float] = {}
        for lexeme, weight in zip(self.lexemes, self.idf, strict=True):
            base = self.readings.get(lexeme, lexeme)
            best[base] = max(best.get(base, 0.0), weight)
        return sum(best.values())

    def whole_at(self, doc_len: float | None) -> float:
        """`whole` for a chunk of `doc_len` lexemes: BM25 scores a long chunk's match lower
        (b), so its share of the query is measured against what a chunk of its own length
        matching every term once would score."""
        if not doc_len or self.avgdl <= 0:
            return self.whole
        return self.whole * (K1 + 1) / (1 + K1 * (1 - B + B * doc_len / self.avgdl))

    @property
    def searchable(self) -> bool:
        return self.doc_count > 0 and any(d > 0 for d in self.df)

    def trace(self) -> dict[str, Any]:
        return {
            "terms": dict(zip(self.lexemes, self.df, strict=True)),
            "readings": self.readings,
            "doc_count": self.doc_count,
            "avgdl": self.avgdl,  # exact: a replay scores with the statistics recorded here
            "budget": self.budget,
            "cap": self.cap,
        }

    @classmethod
    def recorded(cls, trace: dict[str, Any]) -> QueryTerms:
        """The statistics a trace recorded (`trace()`), as they were when it ran."""
        lexemes = sorted(trace["terms"])
        n = int(trace["doc_count"])
        dfs = [int(trace["terms"][lex]) for lex in lexemes]
        return cls(
            lexemes=lexemes,
            df=dfs,
            idf=[idf(d, n) for d in dfs],
            doc_count=n,
            avgdl=float(trace["avgdl"]),
            budget=int(trace.get("budget", _EARLIER["budget"])),
            cap=int(trace.get("cap", _EARLIER["cap"])),
            readings=dict(trace.get("readings", {})),
        )


def idf(df: int, n: int) -> float:
    """Okapi BM25's inverse document frequency (the +1 form: never negative)."""
    return math.log(1 + (n - df + 0.5) / (df + 0.5))


def analyse(
    session: Session, query: str, namespace: str | None, as_of: datetime | None = None
) -> QueryTerms:
    """The query's terms with their statistics in the scope: today's, or as of `as_of`."""
    params = {"query": query, "namespace": namespace, "as_of": as_of}
    rows = session.execute(_TERMS[namespace is not None, as_of is not None], params).all()
    n, total = int(rows[0].n), int(rows[0].total)
    lexemes = [r.lexeme for r in rows if r.lexeme is not None]
    dfs = [int(r.df) for r in rows if r.lexeme is not None]
    readings = {r.lexeme: r.base for r in rows if r.lexeme is not None and r.lexeme != r.base}
    return QueryTerms(
        lexemes=lexemes,
        df=dfs,
        idf=[idf(d, n) for d in dfs],
        doc_count=n,
        avgdl=(total / n) if n else 1.0,
        budget=POSTINGS_BUDGET,
        cap=CANDIDATE_CAP,
        readings=readings,
    )


def _tsquery(lexemes: list[str]) -> str:
    """An OR of already-normalised lexemes in tsquery syntax (quoted, no re-analysis)."""
    quoted = ["'" + lex.replace("\\", "\\\\").replace("'", "''") + "'" for lex in lexemes]
    return " | ".join(quoted)


def candidate_terms(terms: QueryTerms) -> list[str]:
    """Rarest terms first, while their postings fit the budget (always at least one)."""
    present = sorted((d, lex) for lex, d in zip(terms.lexemes, terms.df, strict=True) if d > 0)
    chosen: list[str] = []
    postings = 0
    for df, lexeme in present:
        if chosen and postings + df > terms.budget:
            break
        chosen.append(lexeme)
        postings += df
    return chosen


def score_params(terms: QueryTerms) -> dict[str, Any]:
    return {
        "lexemes": terms.lexemes,
        "idfs": terms.idf,
        "k1": K1,
        "b": B,
        "avgdl": terms.avgdl,
    }


def search(
    session: Session,
    terms: QueryTerms,
    filters: dict[str, Any],
    as_of: datetime | None,
    pool: int,
) -> list[tuple[tuple[str, str], float]]:
    """The `pool` best chunks by BM25: ((namespace, id), score), best first."""
    if not terms.searchable:
        return []
    statement = sql_filters.statement(_SEARCH, filters, as_of)
    params = {
        **sql_filters.binds(filters, as_of),
        **score_params(terms),
        "tsquery": _tsquery(candidate_terms(terms)),
        "cap": terms.cap,
        "pool": pool,
    }
    rows = session.execute(statement, params).all()
    return [((r.namespace, r.id), float(r.score)) for r in rows]
