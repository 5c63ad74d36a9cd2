-- Which queries returned a given memory (or chunk), at which rank, newest first; and the
-- queries whose channels saw it without returning it. Uses the GIN index on `retrieved`.
--   psql "$DATABASE_URL" -v memory_id=mem_0123456789abcdef -v days=30 -f sql/trace_memory.sql
\if :{?days} \else \set days 30 \endif

\echo '--- returned it'
SELECT t.id AS trace_id, t.created_at, t.operation, t.namespace, r.rank,
       (r.item ->> 'score')::float AS score, left(t.query, 60) AS query
FROM query_trace t
CROSS JOIN LATERAL jsonb_array_elements(t.retrieved) WITH ORDINALITY AS r(item, rank)
WHERE t.retrieved @> jsonb_build_array(jsonb_build_object('id', :'memory_id'))
  AND r.item ->> 'id' = :'memory_id'
  AND t.created_at > now() - make_interval(days => :days)
ORDER BY t.created_at DESC
LIMIT 100;

\echo '--- a channel saw it, the result did not have it'
SELECT t.id AS trace_id, t.created_at, t.operation, c.rank AS fused_rank,
       left(t.query, 60) AS query
FROM query_trace t
CROSS JOIN LATERAL jsonb_array_elements(t.candidates) WITH ORDINALITY AS c(item, rank)
WHERE c.item ->> 0 = :'memory_id'
  AND NOT t.retrieved @> jsonb_build_array(jsonb_build_object('id', :'memory_id'))
  AND t.created_at > now() - make_interval(days => :days)
ORDER BY t.created_at DESC
LIMIT 100;
