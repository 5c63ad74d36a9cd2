-- Retrieval traces: what each query saw, how long it took, which stage was slow (embed_ms is
-- what a retrieval still waited for its query's embedding: it runs beside the first statements;
-- dense_ms is the dense search together with every first-stage candidate's features, one
-- statement; graph_ms includes reading the query's names and the features of what the walk adds).
-- Run in psql:
--   psql "$DATABASE_URL" -v days=7 -f sql/trace_report.sql

\echo '--- latency per operation over the last :days days'
SELECT operation,
       count(*) AS queries,
       round(percentile_cont(0.5) WITHIN GROUP (ORDER BY total_latency_ms)::numeric, 1) AS p50_ms,
       round(percentile_cont(0.95) WITHIN GROUP (ORDER BY total_latency_ms)::numeric, 1) AS p95_ms,
       round(avg((timings ->> 'embed_ms')::float)::numeric, 1) AS avg_embed_ms,
       round(avg((timings ->> 'lexical_ms')::float)::numeric, 1) AS avg_lexical_ms,
       round(avg((timings ->> 'dense_ms')::float)::numeric, 1) AS avg_dense_features_ms,
       round(avg((timings ->> 'graph_ms')::float)::numeric, 1) AS avg_graph_ms,
       round(avg((timings ->> 'neighbours_ms')::float)::numeric, 1) AS avg_neighbours_ms,
       round(avg((timings ->> 'fuse_ms')::float)::numeric, 1) AS avg_fuse_ms
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

\echo '--- where the returned chunks came from: fused rank and rank in each channel (null: not in its pool)'
-- A channel stores [fused rank, score] per chunk: its rank there is the position of the
-- element whose first value is the chunk's fused rank.
SELECT t.id AS trace_id, r.item ->> 'id' AS chunk_id, r.rank AS returned_rank,
       f.rank AS fused_rank,
       (SELECT d.n FROM jsonb_array_elements(t.channels -> 'dense') WITH ORDINALITY d(x, n)
        WHERE d.x -> 0 = to_jsonb(f.rank)) AS dense_rank,
       (SELECT l.n FROM jsonb_array_elements(t.channels -> 'lexical') WITH ORDINALITY l(x, n)
        WHERE l.x -> 0 = to_jsonb(f.rank)) AS lexical_rank,
       (SELECT g.n FROM jsonb_array_elements(t.channels -> 'graph') WITH ORDINALITY g(x, n)
        WHERE g.x -> 0 = to_jsonb(f.rank)) AS graph_rank
FROM query_trace t
CROSS JOIN LATERAL jsonb_array_elements(t.retrieved) WITH ORDINALITY AS r(item, rank)
LEFT JOIN LATERAL (
    SELECT c.n AS rank FROM jsonb_array_elements(t.candidates) WITH ORDINALITY c(x, n)
    WHERE c.x ->> 0 = r.item ->> 'id'
) f ON true
WHERE t.created_at > now() - make_interval(days => :days)
ORDER BY t.created_at DESC, r.rank
LIMIT 100;
