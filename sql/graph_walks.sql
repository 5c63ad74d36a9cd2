-- The knowledge graph's walks and temporal questions, as psql runs them. memsys runs the same
-- recursive CTE from memsys/services/graph_walk.py. Example:
--   psql "$DATABASE_URL" -v ns="'global'" -v name="'auth.ts'" -v depth=2 \
--        -v at="'2026-11-23 12:00+00'" -v days=7 -f sql/graph_walks.sql
-- A row counts at :at when valid_from <= :at < coalesce(valid_to, 'infinity').

\echo '--- neighbourhood of :name within :depth hops as of :at (both directions, cycle-safe)'
WITH RECURSIVE walk(node, depth, path, edge_id) AS (
    SELECT e.id::text, 0, ARRAY[e.id::text], NULL::bigint
    FROM entity e
    WHERE e.namespace = :ns AND lower(e.name) = lower(:name)
      AND (e.valid_to IS NULL OR e.valid_to > :at::timestamptz)
  UNION ALL
    SELECT nxt.node, w.depth + 1, w.path || nxt.node, nxt.id
    FROM walk w
    CROSS JOIN LATERAL (
        SELECT g.id,
               CASE WHEN g.source_id = w.node THEN g.target_id ELSE g.source_id END::text AS node
        FROM edge g
        WHERE g.namespace = :ns AND (g.source_id = w.node OR g.target_id = w.node)
          AND g.source_kind = 'entity' AND g.target_kind = 'entity'
          AND g.valid_from <= :at::timestamptz
          AND (g.valid_to IS NULL OR g.valid_to > :at::timestamptz)
        ORDER BY g.weight DESC, g.id
        LIMIT 25
    ) nxt
    WHERE w.depth < :depth AND NOT nxt.node = ANY(w.path)
)
SELECT min(w.depth) AS hops, en.name, en.entity_type
FROM walk w JOIN entity en ON en.namespace = :ns AND en.id = w.node
GROUP BY en.name, en.entity_type
ORDER BY hops, en.name;

\echo '--- what we believed about :name on :at (relations and fact versions live then)'
SELECT 'relation' AS kind, s.name AS subject, g.relation AS predicate, t.name AS object,
       g.context AS statement, g.valid_from, g.valid_to
FROM edge g
JOIN entity s ON s.namespace = g.namespace AND s.id = g.source_id
JOIN entity t ON t.namespace = g.namespace AND t.id = g.target_id
WHERE g.namespace = :ns AND (lower(s.name) = lower(:name) OR lower(t.name) = lower(:name))
  AND g.source_kind = 'entity' AND g.target_kind = 'entity'
  AND g.valid_from <= :at::timestamptz AND (g.valid_to IS NULL OR g.valid_to > :at::timestamptz)
UNION ALL
SELECT 'fact ' || f.version, en.name, f.attribute, NULL, f.content, f.valid_from, f.valid_to
FROM fact f JOIN entity en ON en.namespace = f.namespace AND en.id = f.entity_id
WHERE f.namespace = :ns AND lower(en.name) = lower(:name)
  AND f.valid_from <= :at::timestamptz AND (f.valid_to IS NULL OR f.valid_to > :at::timestamptz)
ORDER BY 1, 2, 3;

\echo '--- facts that changed in the :days days before :at (new version → the one it replaced)'
SELECT en.name AS entity, f.attribute, old.version AS was_version, old.content AS was,
       f.version, f.content AS now, f.valid_from AS changed_at
FROM fact f
JOIN fact old ON old.namespace = f.namespace AND old.id = f.supersedes_id
JOIN entity en ON en.namespace = f.namespace AND en.id = f.entity_id
WHERE f.namespace = :ns
  AND f.valid_from > :at::timestamptz - make_interval(days => :days)
  AND f.valid_from <= :at::timestamptz
ORDER BY f.valid_from, en.name, f.attribute;

\echo '--- relations closed in the :days days before :at (invalidated, kept for as-of reads)'
SELECT s.name AS subject, g.relation, t.name AS object, g.valid_from, g.valid_to, g.expired_at
FROM edge g
JOIN entity s ON s.namespace = g.namespace AND s.id = g.source_id
JOIN entity t ON t.namespace = g.namespace AND t.id = g.target_id
WHERE g.namespace = :ns AND g.valid_to IS NOT NULL
  AND g.valid_to > :at::timestamptz - make_interval(days => :days)
  AND g.valid_to <= :at::timestamptz
ORDER BY g.valid_to;
