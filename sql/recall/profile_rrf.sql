-- 6. Profile 'rrf' (docs/contract.md): weighted RRF over all four lists; a list whose
--    weight is 0 contributes nothing. High importance adds 1/(k+1) - 1/(k+11).
score_rrf AS (
  SELECT rowid, coalesce(rrf4, 0) + boost AS score, boost, NULL AS multiplier,
         NULL AS cos_norm, NULL AS bm25_norm
  FROM (SELECT r.rowid,
               rrf_sum(p.k, CASE WHEN p.w_bm25 > 0 THEN r.bm25_rank END, p.w_bm25,
                       CASE WHEN p.w_vec > 0 THEN r.vec_rank END, p.w_vec,
                       CASE WHEN p.w_recency > 0 THEN r.recency_rank END, p.w_recency,
                       CASE WHEN p.w_access > 0 THEN r.access_rank END, p.w_access) AS rrf4,
               CASE WHEN r.importance = 'high' THEN 1.0 / (p.k + 1) - 1.0 / (p.k + 11)
                    ELSE 0 END AS boost
        FROM ranked AS r, params AS p)
),
-- 8. The shown rows (top_lists) with the profile's explanation: each list's rank, weight
--    and contribution (rrf_explain over the returned rows' four lists).
explain_rrf AS (
  SELECT l.rowid, l.score, l.boost, l.bm25_rank, l.vec_rank, l.recency_rank,
         l.access_rank, l.similarity, l.bm25_score, l.slot, l.final_score, l.relevance,
         l.duplicates, l.duplicate_ids,
         rrf_explain(l.list, CASE WHEN l.weight > 0 THEN l.rank END, l.weight, p.k) AS explain
  FROM top_lists AS l, params AS p
  GROUP BY l.rowid
)
