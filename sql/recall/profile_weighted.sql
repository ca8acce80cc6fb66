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
)
