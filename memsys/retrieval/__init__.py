"""The retrieval pipeline every search, recall and context tool goes through.

One stage per module: `filters` (the SQL each channel shares: filters pushed down, validity
now or as of a time), `dense` (pgvector HNSW), `lexical` (Okapi BM25 inside PostgreSQL from
the trigger-kept term statistics), `fusion` (score-aware, per-query channel weights; every
weight in one versioned place), `pipeline` (runs the stages and keeps their trace).
"""
