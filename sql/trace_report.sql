-- Retrieval traces: what each query saw, how long it took, which stage was slow. Run in psql:
--   psql "$DATABASE_URL" -v days=7 -f sql/trace_report.sql

\echo '--- latency per operation over the last :days days'
SELECT operation,
       count(*) AS queries,
       round(percentile_cont(0.5) WITHIN GROUP (ORDER BY total_latency_ms)::numeric, 1) AS p50_ms,
       round(percentile_cont(0.95) WITHIN GROUP (ORDER BY total_latency_ms)::numeric, 1) AS p95_ms,
       round(avg((timings ->> 'embed_ms')::float)::numeric, 1) AS avg_embed_ms,
       round(avg((timings ->> 'sql_ms')::float)::numeric, 1) AS avg_sql_ms
FROM query_trace
WHERE created_at > now() - make_interval(days => :days)
GROUP BY operation
ORDER BY queries DESC;

\echo '--- queries that found nothing (candidates for missing memories)'
SELECT created_at, operation, namespace, query, filters
FROM query_trace
WHERE created_at > now() - make_interval(days => :days)
  AND jsonb_array_length(retrieved) = 0
ORDER BY created_at DESC
LIMIT 50;

\echo '--- one trace in full: replace the id'
-- SELECT * FROM query_trace WHERE id = 'qry_…';

\echo '--- which channel found the returned chunks (vec_rank / fts_rank are null when absent)'
SELECT t.id AS trace_id, c ->> 'id' AS chunk_id, c ->> 'score' AS score,
       c ->> 'vec_rank' AS vec_rank, c ->> 'fts_rank' AS fts_rank
FROM query_trace t, jsonb_array_elements(t.candidates) AS c
WHERE t.created_at > now() - make_interval(days => :days)
ORDER BY t.created_at DESC
LIMIT 100;
