-- 8. The returned rows with the profile's explanation: for the RRF profiles each
--    list's rank, weight and contribution ('memory': the two relevance lists, and
--    its multiplier), for 'hybrid' and the blends their inputs. (One CTE for every profile: a
--    handful of rows, and a statement that chooses its profile at run time stays
--    within SQLite's limits on nested queries.)
explain AS (
  SELECT l.rowid, l.score, l.boost, l.bm25_rank, l.vec_rank, l.recency_rank, l.access_rank,
         l.similarity, l.bm25_score,
         CASE p.profile
           WHEN 'memory' THEN json_set(
             coalesce(rrf_explain(l.list, CASE WHEN l.weight > 0
                                                    AND l.list IN ('bm25', 'vector')
                                               THEN l.rank END, l.weight, p.k), '{}'),
             '$.recency_access', json_object('multiplier', l.multiplier))
           WHEN 'weighted' THEN json_object('similarity', l.similarity,
                                            'bm25_norm', l.bm25_norm,
                                            'age_days', l.age_days,
                                            'access_count', l.access_count)
           WHEN 'hybrid' THEN json_object('relevance', json_object(
                                             'cosine', l.cos_norm, 'bm25', l.bm25_norm,
                                             'alpha', p.alpha),
                                           'recency_access_importance', json_object(
                                             'nudge', l.multiplier))
           WHEN 'convex' THEN json_object('cos_norm', l.cos_norm, 'bm25_norm', l.bm25_norm,
                                          'alpha', p.alpha)
           ELSE rrf_explain(l.list, CASE WHEN l.weight > 0 THEN l.rank END, l.weight, p.k)
         END AS explain
  FROM top_lists AS l, params AS p
  GROUP BY l.rowid
)
