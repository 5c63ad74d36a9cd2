-- Hand-written "as of" and timeline queries against memsys's schema. Run in psql, e.g.
--   psql "$DATABASE_URL" -v at="'2026-11-22 08:00:00+00'" -v ns="'global'" -f sql/temporal_queries.sql
-- History is kept by closing rows (valid_to) instead of deleting them; a row was live at
-- :at when valid_from <= :at < coalesce(valid_to, 'infinity').

\echo '--- preferences as of :at in namespace :ns'
SELECT key, value, version, lifecycle, valid_from, valid_to
FROM preference
WHERE namespace = :ns
  AND valid_from <= :at::timestamptz
  AND (valid_to IS NULL OR valid_to > :at::timestamptz)
ORDER BY key;

\echo '--- memories live at :at'
SELECT id, memory_type, confidence, left(content, 80) AS content
FROM chunk
WHERE namespace = :ns AND doc_type = 'memory'
  AND valid_from <= :at::timestamptz
  AND (valid_to IS NULL OR valid_to > :at::timestamptz)
ORDER BY created_at;

\echo '--- what happened on the day of :at (the event log)'
SELECT occurred_at, event_type, operation, subject_kind, subject_id, payload
FROM event
WHERE occurred_at >= date_trunc('day', :at::timestamptz)
  AND occurred_at < date_trunc('day', :at::timestamptz) + interval '1 day'
ORDER BY occurred_at, id;

\echo '--- every version of every document indexed from one file, newest first'
SELECT d.source_file, d.sha256, d.chunk_count, d.valid_from, d.valid_to
FROM document d
WHERE d.namespace = :ns
ORDER BY d.source_file, d.valid_from DESC;
