"""Paths, hosts, e-mail addresses and URLs are also searchable by their parts.

What: `memsys_tsv(text)`, an immutable function: PostgreSQL's English tsvector of the text
plus the lexemes of the parts of every dotted, slashed or colon-joined
identifier in it (below) — a path's segments and a dotted name's labels, so `billing/invoice.py`
adds `bill`, `invoice.py`, `invoic`, `py` and `grafana.prod.acme.io` adds `grafana`,
`prod`, `acm`, `io`. `chunk.tsv` becomes `memsys_tsv(content)` (the column is dropped and
added again with its GIN index: every row is rewritten) and `term_stat` is counted again from
the new column. The parts come after the text's own positions (BM25 reads a lexeme's
frequency from its positions, and the lexical channel marks the query's lexemes through
them), and a part that is already one of the text's lexemes is left out, so the text's own
lexemes keep their frequencies; `doc_len` is unchanged (the parts do not lengthen a chunk).
Why: the parser reads `billing/invoice.py`, `grafana.prod.acme.io` or `db.acme.io:5432` as
one token, so a query naming the file (`invoice.py`), the host's name (`grafana prod`) or
the host without its port found nothing lexically: identifiers typed the
way people type them are what an agent's memory is asked about most. Queries are analysed
as before (a query that names a part matches it; splitting queries too cost SciFact
nDCG@10 .001 more and found nothing the stored parts did not, benchmarks/README.md).
A replay of a trace recorded before this upgrade scores with its recorded statistics against
the rewritten vectors, so it may differ from what the query returned then.
Cost: rewriting `chunk` rebuilds every index on it, the vector index too, under an exclusive
lock: 30 s at 100,000 memories on a 2-core machine (benchmarks/README.md); `memsys serve`
waits for it at its first start.
Downgrade: the plain English tsvector again, and term_stat counted from it.

Revision ID: f3a8d5c2e917
Revises: e8b3f1c6a290
Create Date: 2026-11-25 13:40:00+00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "f3a8d5c2e917"
down_revision: str | None = "e8b3f1c6a290"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# A part is what lies between `/`, `@`, `:` (a path's segments, kept whole: `invoice.py`)
# and, in a segment with a dot, between its dots (a dotted name's labels), each once. Only
# identifiers with a letter and a dot, `@` or `:`, or two slashes or more, are split: numbers,
# times and versions are left alone, and so are pairs such as `MyD88/CD40` or `kb/min`
# (splitting those too cost SciFact .003 nDCG@10, benchmarks/README.md); one-letter parts
# (`U.S.`, `e.g.`) are dropped.
FUNCTION = r"""
CREATE FUNCTION memsys_tsv(content text) RETURNS tsvector
LANGUAGE sql IMMUTABLE PARALLEL SAFE STRICT AS $$
SELECT b.base || ts_delete(e.extra, tsvector_to_array(b.base)
                           || ARRAY(SELECT u.lexeme FROM unnest(e.extra) u
                                    WHERE length(u.lexeme) < 2))
FROM (SELECT to_tsvector('english'::regconfig, content) AS base) b,
     (SELECT coalesce(to_tsvector('english'::regconfig, (
          SELECT string_agg(regexp_replace(m[1], '[/@:]+', ' ', 'g') || ' ' || coalesce(
                     (SELECT string_agg(replace(d[1], '.', ' '), ' ')
                      FROM regexp_matches(m[1], '([^/@:]*[.][^/@:]*)', 'g') AS d), ''), ' ')
          FROM regexp_matches(content, '([[:alnum:]_-]+(?:[./@:][[:alnum:]_-]+)+)', 'g') AS m
          WHERE m[1] ~ '[[:alpha:]]' AND m[1] ~ '[.@:]|/.*/')), ''::tsvector) AS extra) e
$$
"""

RECOUNT = """
DELETE FROM term_stat;
INSERT INTO term_stat (namespace, lexeme, df)
SELECT c.namespace, u.lexeme, count(*) FROM chunk c, unnest(c.tsv) u
WHERE c.valid_to IS NULL GROUP BY 1, 2;
"""


def _tsv(expression: str) -> None:
    op.drop_index("ix_chunk_tsv", table_name="chunk", postgresql_using="gin")
    op.drop_column("chunk", "tsv")
    op.add_column(
        "chunk",
        sa.Column("tsv", postgresql.TSVECTOR(), sa.Computed(expression, persisted=True)),
    )
    op.create_index("ix_chunk_tsv", "chunk", ["tsv"], unique=False, postgresql_using="gin")
    op.execute(RECOUNT)


def upgrade() -> None:
    op.execute(FUNCTION)
    _tsv("memsys_tsv(content)")


def downgrade() -> None:
    _tsv("to_tsvector('english'::regconfig, content)")
    op.execute("DROP FUNCTION memsys_tsv(text)")
