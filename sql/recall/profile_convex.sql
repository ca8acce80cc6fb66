-- 6. Profile 'convex': :alpha * min-max cosine + (1 - :alpha) * min-max BM25, both
--    scaled to [0, 1] over the candidates (cosine: 0 where there is none, 1 when
--    all are equal; bm25: best hit 1, a lone hit 0.5, no hit 0).
score_convex AS (
  SELECT n.rowid, p.alpha * n.cos_norm + (1 - p.alpha) * n.bm25_norm AS score,
         0 AS boost, NULL AS multiplier, n.cos_norm, n.bm25_norm
  FROM (SELECT rowid,
               coalesce((similarity - min(similarity) OVER ())
                        / nullif(max(similarity) OVER () - min(similarity) OVER (), 0),
                        CASE WHEN similarity IS NOT NULL THEN 1.0 END, 0.0) AS cos_norm,
               CASE WHEN bm25_score IS NULL THEN 0.0
                    ELSE coalesce((max(bm25_score) OVER () - bm25_score)
                                  / nullif(max(bm25_score) OVER () - min(bm25_score) OVER (), 0),
                                  0.5) END AS bm25_norm
        FROM ranked) AS n, params AS p
),
-- 8. The shown rows (top_lists) with the profile's explanation: the blend's inputs.
explain_convex AS (
  SELECT l.rowid, l.score, l.boost, l.bm25_rank, l.vec_rank, l.recency_rank,
         l.access_rank, l.similarity, l.bm25_score, l.slot, l.final_score, l.relevance,
         l.duplicates, l.duplicate_ids,
         json_object('cos_norm', l.cos_norm, 'bm25_norm', l.bm25_norm, 'alpha', p.alpha)
           AS explain
  FROM top_lists AS l, params AS p
  GROUP BY l.rowid
)
