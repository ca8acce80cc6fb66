-- The 'knn' vector pool: sqlite-vec's exact nearest :pool_size episodes by cosine
-- over ALL episodes, from the vec0 table episodes_vec (sql/knn.sql). It replaces
-- the pool CTE of recall.sql (between its pool:begin and pool:end lines);
-- `sqlite-rrf sql --pool knn` prints the whole statement. Needs :qvec and sqlite-vec.
pool AS MATERIALIZED (
  SELECT rowid
  FROM episodes_vec
  WHERE embedding MATCH :qvec
    AND k = (SELECT pool_size FROM params)
  ORDER BY distance
),
