-- The slowest retrievals of the last :days days, with the stage that took longest.
--   psql "$DATABASE_URL" -v days=7 -v n=20 -f sql/trace_slowest.sql
\if :{?days} \else \set days 7 \endif
\if :{?n} \else \set n 20 \endif

SELECT t.id AS trace_id,
       t.created_at,
       t.operation,
       t.namespace,
       round(t.total_latency_ms::numeric, 1) AS total_ms,
       slowest.stage AS slowest_stage,
       round(slowest.ms::numeric, 1) AS stage_ms,
       left(t.query, 60) AS query,
       t.error_type
FROM query_trace t
LEFT JOIN LATERAL (
    SELECT key AS stage, value::float AS ms
    FROM jsonb_each_text(t.timings)
    WHERE key <> 'total_ms'
    ORDER BY value::float DESC
    LIMIT 1
) slowest ON true
WHERE t.created_at > now() - make_interval(days => :days)
ORDER BY t.total_latency_ms DESC
LIMIT :n;
