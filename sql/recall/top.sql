-- 7. The best :limit candidates by the profile's score (scores); ties broken by
--    similarity, then recency, use, rowid. Nothing to match (no BM25 hit and no
--    query vector): no episode, not the most recent.
top AS MATERIALIZED (
  SELECT s.rowid, s.score, s.boost, s.multiplier, s.cos_norm, s.bm25_norm,
         r.bm25_rank, r.vec_rank, r.recency_rank, r.access_rank, r.similarity,
         r.bm25_score, r.age_days, r.access_count
  FROM scores AS s JOIN ranked AS r ON r.rowid = s.rowid
  WHERE :qvec IS NOT NULL OR r.any_hit
  ORDER BY s.score DESC, r.similarity IS NULL, r.similarity DESC, r.recency_rank,
           r.access_rank, s.rowid
  LIMIT (SELECT result_limit FROM params)
),
-- The returned rows once per list (the four lists, with rank and weight), for the
-- explanations (which read top through this CTE only).
top_lists AS (
  SELECT t.*, l.list,
         CASE l.list WHEN 'bm25' THEN t.bm25_rank WHEN 'vector' THEN t.vec_rank
                     WHEN 'recency' THEN t.recency_rank ELSE t.access_rank END AS rank,
         CASE l.list WHEN 'bm25' THEN p.w_bm25 WHEN 'vector' THEN p.w_vec
                     WHEN 'recency' THEN p.w_recency ELSE p.w_access END AS weight
  FROM top AS t, params AS p,
       (SELECT 'bm25' AS list UNION ALL SELECT 'vector' UNION ALL SELECT 'recency'
        UNION ALL SELECT 'access') AS l
)
