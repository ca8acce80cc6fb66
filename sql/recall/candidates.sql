-- 3. Candidates: the pool plus the BM25 hits it missed (one row per rowid), so an
--    old episode that matches the words is never dropped, each with its BM25 score
--    and rank (NULL when it is not a hit); no superseded episode (0a).
candidates AS (
  SELECT rowid, max(bm25_score) AS bm25_score, max(bm25_rank) AS bm25_rank
  FROM (SELECT rowid, NULL AS bm25_score, NULL AS bm25_rank FROM pool
        UNION ALL
        SELECT rowid, bm25_score, bm25_rank FROM bm25)
  WHERE rowid NOT IN (SELECT rowid FROM superseded)
  GROUP BY rowid
),
-- 4. The similarity, computed once per candidate (MATERIALIZED), except for the
--    rowids of :skip_vectors (a JSON array: stored vectors that cannot be used,
--    e.g. NaN written by another client); the optional floor drops vector-only
--    candidates below :min_similarity.
scored AS MATERIALIZED (
  SELECT *
  FROM (SELECT e.rowid, e.created_at, e.access_count, e.importance,
               CASE WHEN e.rowid NOT IN (SELECT value FROM json_each(:skip_vectors))
                    THEN vec_cosine(e.embedding, :qvec) END AS similarity,
               c.bm25_score, c.bm25_rank,
               ((SELECT now_ms FROM params) - e.created_at) / 86400000.0 AS age_days
        FROM candidates AS c
        -- candidates drive the join (CROSS JOIN fixes the order): a few hundred
        -- primary-key lookups, never a scan of episodes
        CROSS JOIN episodes AS e ON e.rowid = c.rowid)
  WHERE bm25_rank IS NOT NULL
     OR (SELECT min_similarity FROM params) IS NULL
     OR similarity >= (SELECT min_similarity FROM params)
),
-- 5. One rank per list (1 = best; dense, so equal values share a rank; absent from
--    a list = NULL).
ranked AS MATERIALIZED (
  SELECT rowid, similarity, bm25_score, bm25_rank, age_days, access_count, importance,
         created_at,
         CASE WHEN similarity IS NOT NULL THEN
           dense_rank() OVER (PARTITION BY similarity IS NULL ORDER BY similarity DESC)
         END AS vec_rank,
         dense_rank() OVER (ORDER BY created_at DESC)   AS recency_rank,
         dense_rank() OVER (ORDER BY access_count DESC) AS access_rank,
         -- whether any candidate is a BM25 hit (nothing to match: see top)
         max(bm25_rank IS NOT NULL) OVER () AS any_hit
  FROM scored
)
