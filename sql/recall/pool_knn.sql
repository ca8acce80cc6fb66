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
  WHERE {no_filter}
  UNION ALL
  SELECT rowid
  FROM (SELECT e.rowid FROM episodes AS e
        WHERE NOT ({no_filter}) AND e.embedding IS NOT NULL
          AND {filter}
        ORDER BY vec_cosine(e.embedding, :qvec) DESC, e.rowid
        LIMIT (SELECT pool_size FROM params))
)
