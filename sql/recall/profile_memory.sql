-- 6. Profile 'memory' (docs/profiles.md): RRF over the two relevance lists, times
--    a bounded multiplier from recency and use. The bound m is the largest that
--    keeps every candidate that is not first in all enabled relevance lists below
--    one that is: best = (w_b + w_v)/(k+1), runner-up <= best - min(w)(1/(k+1) -
--    1/(k+2)). The multiplier is 1 + m * (the weighted mean of the recency and
--    access RRF terms, each scaled so that rank 1 gives 1). High importance adds
--    1/(k+1) - 1/(k+11), as if the episode had moved from rank 11 to rank 1.
memory_bound AS (
  SELECT CASE WHEN best > 0 AND best > runner_up THEN 0.99 * (best / runner_up - 1) ELSE 0 END
           AS max_boost
  FROM (SELECT best, best - w_min * (1.0 / (k + 1) - 1.0 / (k + 2)) AS runner_up
        FROM (SELECT k, (w_bm25 + w_vec) / (k + 1) AS best,
                     CASE WHEN w_bm25 > 0 AND w_vec > 0 THEN min(w_bm25, w_vec)
                          ELSE max(w_bm25, w_vec) END AS w_min
              FROM params))
),
score_memory AS (
  SELECT rowid, coalesce(rrf2, 0) * multiplier + boost AS score, boost, multiplier,
         NULL AS cos_norm, NULL AS bm25_norm
  FROM (SELECT r.rowid,
               rrf_sum(p.k, CASE WHEN p.w_bm25 > 0 THEN r.bm25_rank END, p.w_bm25,
                       CASE WHEN p.w_vec > 0 THEN r.vec_rank END, p.w_vec) AS rrf2,
               1 + b.max_boost * coalesce(
                     (p.w_recency * (p.k + 1) / (p.k + r.recency_rank)
                      + p.w_access * (p.k + 1) / (p.k + r.access_rank))
                     / nullif(p.w_recency + p.w_access, 0), 0) AS multiplier,
               CASE WHEN r.importance = 'high' THEN 1.0 / (p.k + 1) - 1.0 / (p.k + 11)
                    ELSE 0 END AS boost
        FROM ranked AS r, params AS p, memory_bound AS b)
),
-- 8. The shown rows (top_lists) with the profile's explanation: the two relevance lists'
--    rank, weight and contribution, and the recency and access multiplier.
explain_memory AS (
  SELECT l.rowid, l.score, l.boost, l.bm25_rank, l.vec_rank, l.recency_rank,
         l.access_rank, l.similarity, l.bm25_score, l.slot, l.final_score, l.relevance,
         l.duplicates, l.duplicate_ids,
         json_set(coalesce(rrf_explain(l.list, CASE WHEN l.weight > 0
                                                     AND l.list IN ('bm25', 'vector')
                                                THEN l.rank END, l.weight, p.k), '{}'),
                  '$.recency_access', json_object('multiplier', l.multiplier)) AS explain
  FROM top_lists AS l, params AS p
  GROUP BY l.rowid
)
