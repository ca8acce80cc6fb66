-- 2. The vector pool 'knn': sqlite-vec's exact nearest :pool_size episodes by
--    cosine over ALL episodes, from the vec0 table episodes_vec (sql/knn.sql).
--    `sqlite-rrf sql --pool knn` prints a statement with it. Needs :qvec and
--    sqlite-vec.
-- With a filter (:scope, :scope2, :kind, :since, :until) the index cannot filter, so the
-- pool is the :pool_size best by vec_cosine among the episodes that pass, exactly
-- (only one of the two branches runs).
pool_knn AS MATERIALIZED (
  SELECT rowid
  FROM (SELECT rowid, distance
        FROM episodes_vec
        WHERE embedding MATCH :qvec
          AND k = (SELECT pool_size FROM params))
  WHERE :scope IS NULL AND :scope2 IS NULL AND :kind IS NULL AND :since IS NULL
    AND :until IS NULL
  UNION ALL
  SELECT rowid
  FROM (SELECT e.rowid FROM episodes AS e
        WHERE NOT (:scope IS NULL AND :scope2 IS NULL AND :kind IS NULL AND :since IS NULL
                   AND :until IS NULL)
          AND e.embedding IS NOT NULL
          AND (:scope IS NULL AND :scope2 IS NULL OR e.scope IN (:scope, :scope2))
          AND (:kind IS NULL OR e.kind = :kind)
          AND (:since IS NULL OR e.created_at >= :since)
          AND (:until IS NULL OR e.created_at < :until)
        ORDER BY vec_cosine(e.embedding, :qvec) DESC, e.rowid
        LIMIT (SELECT pool_size FROM params))
)
