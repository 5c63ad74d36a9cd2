-- Failures by day (error attribution, S004): queries, failures, and the context-bug rate
-- (context bugs / failures) with its four causes. Feedback (`memsys trace feedback`)
-- classifies wrong answers; a call that raised is a system error.
--   psql "$DATABASE_URL" -v days=30 -f sql/trace_context_bugs.sql
\if :{?days} \else \set days 30 \endif

SELECT date_trunc('day', created_at)::date AS day,
       count(*) AS queries,
       count(*) FILTER (WHERE error_type IS NOT NULL) AS failed,
       count(*) FILTER (WHERE error_type = 'context_bug') AS context_bugs,
       count(*) FILTER (WHERE error_type = 'model_bug') AS model_bugs,
       count(*) FILTER (WHERE error_type = 'system_error') AS system_errors,
       round(count(*) FILTER (WHERE error_type = 'context_bug')::numeric
             / nullif(count(*) FILTER (WHERE error_type IS NOT NULL), 0), 3) AS context_bug_rate,
       count(*) FILTER (WHERE error_subtype = 'wrong_store_queried') AS wrong_store,
       count(*) FILTER (WHERE error_subtype = 'wrong_mode_detected') AS wrong_mode,
       count(*) FILTER (WHERE error_subtype = 'wrong_lifecycle_filter') AS wrong_lifecycle,
       count(*) FILTER (WHERE error_subtype = 'retrieval_ranking_error') AS ranking_error
FROM query_trace
WHERE created_at > now() - make_interval(days => :days)
GROUP BY 1
ORDER BY 1 DESC;
