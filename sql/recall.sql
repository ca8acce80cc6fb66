-- sqlite-rrf recall: one statement, hybrid retrieval over the episodes table.
--
-- Parameters (all named; NULL or unbound means the default given in `params`):
--   :query       the user's text (searched with FTS5 through fts5_query)
--   :qvec        the query embedding, float32 blob or JSON array (NULL: no vector list)
--   :pool        'recent' (the :pool_size most recently accessed episodes) or
--                'all' (every episode with an embedding; exact)
--   :pool_size   200     :bm25_limit  50     :limit  3     :k  60
--   :w_bm25 1.0  :w_vec 1.0  :w_recency 0.6  :w_access 0.4   (weight 0 = list off)
--
-- Needs the rrf extension (vec_cosine, rrf_fuse, rrf_explain, fts5_query).
WITH
-- 0. Parameters with their defaults: the one place the defaults are written.
params AS (
  SELECT coalesce(:k, 60.0)         AS k,
         coalesce(:w_bm25, 1.0)     AS w_bm25,
         coalesce(:w_vec, 1.0)      AS w_vec,
         coalesce(:w_recency, 0.6)  AS w_recency,
         coalesce(:w_access, 0.4)   AS w_access,
         coalesce(:bm25_limit, 50)  AS bm25_limit,
         coalesce(:pool_size, 200)  AS pool_size,
         coalesce(:pool, 'recent')  AS pool,
         coalesce(:limit, 3)        AS result_limit
),
-- 1. Full-text hits over ALL episodes, best bm25 first (FTS5's bm25 is negative:
--    lower is better). Raw text goes through fts5_query, so it never fails.
bm25 AS (
  SELECT rowid, bm25_score,
         row_number() OVER (ORDER BY bm25_score, rowid) AS bm25_rank
  FROM (SELECT rowid, bm25(episodes_fts) AS bm25_score
        FROM episodes_fts
        WHERE episodes_fts MATCH coalesce(fts5_query(:query), '""')
        ORDER BY bm25_score, rowid
        LIMIT (SELECT bm25_limit FROM params))
),
-- 2. The vector pool: 'recent' reads the partial index idx_episodes_accessed_at;
--    'all' is every episode with an embedding.
pool AS (
  SELECT rowid
  FROM (SELECT rowid FROM episodes
        WHERE embedding IS NOT NULL
        ORDER BY accessed_at DESC, rowid
        LIMIT (SELECT pool_size FROM params))
  WHERE (SELECT pool FROM params) = 'recent'
  UNION ALL
  SELECT rowid FROM episodes
  WHERE embedding IS NOT NULL AND (SELECT pool FROM params) = 'all'
),
-- 3. Candidates: the pool plus the BM25 hits it missed (UNION dedupes by rowid),
--    so an old episode that matches the words is never dropped.
candidates AS (
  SELECT rowid FROM pool
  UNION
  SELECT rowid FROM bm25
),
-- 4. The similarity, computed once per candidate (MATERIALIZED).
scored AS MATERIALIZED (
  SELECT e.rowid, e.created_at, e.access_count,
         vec_cosine(e.embedding, :qvec) AS similarity,
         b.bm25_score, b.bm25_rank
  FROM candidates AS c
  JOIN episodes AS e ON e.rowid = c.rowid
  LEFT JOIN bm25 AS b ON b.rowid = c.rowid
),
-- 5. One rank per list (1 = best; dense, so equal values share a rank). A
--    candidate absent from a list (no BM25 hit, no embedding) has a NULL rank.
ranked AS MATERIALIZED (
  SELECT rowid, similarity, bm25_score, bm25_rank,
         CASE WHEN similarity IS NOT NULL THEN
           dense_rank() OVER (PARTITION BY similarity IS NULL ORDER BY similarity DESC)
         END AS vec_rank,
         dense_rank() OVER (ORDER BY created_at DESC)   AS recency_rank,
         dense_rank() OVER (ORDER BY access_count DESC) AS access_rank
  FROM scored
),
-- 6. The four lists as rows; a list whose weight is 0 contributes nothing.
lists AS (
  SELECT rowid, 'bm25' AS list, bm25_rank AS rank, (SELECT w_bm25 FROM params) AS weight
  FROM ranked
  UNION ALL
  SELECT rowid, 'vector', vec_rank, (SELECT w_vec FROM params) FROM ranked
  UNION ALL
  SELECT rowid, 'recency', recency_rank, (SELECT w_recency FROM params) FROM ranked
  UNION ALL
  SELECT rowid, 'access', access_rank, (SELECT w_access FROM params) FROM ranked
),
-- 7. Weighted RRF per candidate, with its explanation.
fused AS (
  SELECT l.rowid,
         rrf_fuse(CASE WHEN l.weight > 0 THEN l.rank END, l.weight, p.k)             AS rrf,
         rrf_explain(l.list, CASE WHEN l.weight > 0 THEN l.rank END, l.weight, p.k) AS explain
  FROM lists AS l, params AS p
  GROUP BY l.rowid
)
-- 8. High importance adds 1/(k+1) - 1/(k+11) (shown in explain as "importance");
--    top :limit, ties broken by similarity, then rowid.
SELECT e.id,
       e.content,
       coalesce(f.rrf, 0)
         + CASE WHEN e.importance = 'high' THEN 1.0 / (p.k + 1) - 1.0 / (p.k + 11) ELSE 0 END
                                   AS score,
       r.bm25_rank,
       r.vec_rank,
       r.recency_rank,
       r.access_rank,
       r.similarity,
       r.bm25_score,
       CASE WHEN e.importance = 'high'
            THEN json_set(coalesce(f.explain, '{}'), '$.importance',
                          json_object('boost', 1.0 / (p.k + 1) - 1.0 / (p.k + 11)))
            ELSE f.explain END   AS explain,
       e.importance,
       e.created_at,
       e.accessed_at,
       e.access_count,
       e.rowid
FROM fused AS f
JOIN ranked AS r ON r.rowid = f.rowid
JOIN episodes AS e ON e.rowid = f.rowid
CROSS JOIN params AS p
ORDER BY score DESC, r.similarity IS NULL, r.similarity DESC, e.rowid
LIMIT (SELECT result_limit FROM params);
