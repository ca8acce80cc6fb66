-- 2. The vector pool 'recent': the :pool_size most recently accessed episodes with
--    an embedding that pass the filters. With one scope (:scope or :scope2, or both
--    the same), a seek of the partial index idx_episodes_scope_accessed_at; else the
--    partial index idx_episodes_accessed_at, newest first, until :pool_size rows
--    pass (two scopes: the rows of either one). Only one of the two branches runs.
pool_recent AS (
  SELECT rowid
  FROM (SELECT rowid FROM episodes INDEXED BY idx_episodes_accessed_at
        WHERE embedding IS NOT NULL
          -- no scope, or two that differ (either one passes)
          AND (:scope IS NULL AND :scope2 IS NULL
               OR :scope IS NOT NULL AND :scope2 IS NOT NULL AND :scope <> :scope2)
          AND {filter}
        ORDER BY accessed_at DESC, rowid
        LIMIT (SELECT pool_size FROM params))
  UNION ALL
  SELECT rowid
  FROM (SELECT rowid FROM episodes INDEXED BY idx_episodes_scope_accessed_at
        WHERE embedding IS NOT NULL AND scope = coalesce(:scope, :scope2)
          -- one scope (or both the same)
          AND (:scope IS NULL OR :scope2 IS NULL OR :scope = :scope2)
          AND {filter}
        ORDER BY accessed_at DESC, rowid
        LIMIT (SELECT pool_size FROM params))
)
