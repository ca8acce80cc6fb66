-- 2. The vector pool 'recent': the :pool_size most recently accessed episodes with
--    an embedding that pass the filters, from the partial index
--    idx_episodes_accessed_at (idx_episodes_scope_accessed_at for a scope: only one
--    of the two branches runs).
pool_recent AS (
  SELECT rowid
  FROM (SELECT rowid FROM episodes
        WHERE embedding IS NOT NULL AND :scope IS NULL
          AND (:kind IS NULL OR kind = :kind)
          AND (:since IS NULL OR created_at >= :since)
          AND (:until IS NULL OR created_at < :until)
        ORDER BY accessed_at DESC, rowid
        LIMIT (SELECT pool_size FROM params))
  UNION ALL
  SELECT rowid
  FROM (SELECT rowid FROM episodes INDEXED BY idx_episodes_scope_accessed_at
        WHERE embedding IS NOT NULL AND scope = :scope
          AND (:kind IS NULL OR kind = :kind)
          AND (:since IS NULL OR created_at >= :since)
          AND (:until IS NULL OR created_at < :until)
        ORDER BY accessed_at DESC, rowid
        LIMIT (SELECT pool_size FROM params))
)
