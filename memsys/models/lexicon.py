"""BM25 statistics kept by triggers on `chunk` (migration 7c1e5a9b2d40): never written by code.

`term_stat` counts, per namespace, the live chunks whose tsvector (`chunk.tsv`: the English one
plus the parts of joined identifiers, migration f3a8d5c2e917) holds a lexeme;
`corpus_stat` counts live chunks and their total length (tokens). Together with
`chunk.doc_len` they give the lexical channel Okapi BM25 (memsys/retrieval/lexical.py).
Counts follow every insert, close (valid_to), content change and delete in the same
transaction; rows are never filtered out for as-of reads (statistics are always current).
"""

from sqlalchemy import BigInteger, Index, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from memsys.models.base import Base


class TermStat(Base):
    __tablename__ = "term_stat"
    __table_args__ = (Index("ix_term_stat_lexeme", "lexeme"),)

    namespace: Mapped[str] = mapped_column(String(128), primary_key=True)
    lexeme: Mapped[str] = mapped_column(Text, primary_key=True)
    df: Mapped[int] = mapped_column(BigInteger, server_default="0")


class CorpusStat(Base):
    __tablename__ = "corpus_stat"

    namespace: Mapped[str] = mapped_column(String(128), primary_key=True)
    doc_count: Mapped[int] = mapped_column(BigInteger, server_default="0")
    total_len: Mapped[int] = mapped_column(BigInteger, server_default="0")
