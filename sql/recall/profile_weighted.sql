-- 6. Profile 'weighted': the score blend RRF replaces, 0.5 relevance + 0.3 recency
--    + 0.2 usage, relevance = 0.7 cosine + 0.3 min-max BM25 (floored at 0.3 for high
--    importance). bm25 is scaled to [0, 1] over the hits, best = 1; a lone hit (or
--    all tied) gets 0.5, no hit 0.
score_weighted AS (
  SELECT rowid,
         0.5 * max(0.7 * coalesce(similarity, 0) + 0.3 * bm25_norm,
                   CASE WHEN importance = 'high' THEN 0.3 ELSE 0 END)
         + 0.3 * exp(-0.6931471805599453 / 30 * max(age_days, 0))
         + 0.2 * (access_count + 1.0) / (max_access_count + 1.0) AS score,
         0 AS boost, NULL AS multiplier, NULL AS cos_norm, bm25_norm
  FROM (SELECT rowid, similarity, importance, age_days, access_count,
               CASE WHEN bm25_score IS NULL THEN 0.0
                    ELSE coalesce((max(bm25_score) OVER () - bm25_score)
                                  / nullif(max(bm25_score) OVER () - min(bm25_score) OVER (), 0),
                                  0.5) END AS bm25_norm,
               max(access_count) OVER () AS max_access_count
        FROM ranked)
),
-- 8. The shown rows (top_lists) with the profile's explanation: the blend's inputs.
explain_weighted AS (
  SELECT l.rowid, l.score, l.boost, l.bm25_rank, l.vec_rank, l.recency_rank,
         l.access_rank, l.similarity, l.bm25_score, l.slot, l.final_score, l.relevance,
         l.duplicates, l.duplicate_ids,
         json_object('similarity', l.similarity, 'bm25_norm', l.bm25_norm,
                     'age_days', l.age_days, 'access_count', l.access_count) AS explain
  FROM top_lists AS l
  GROUP BY l.rowid
)
