-- 6. Profile 'hybrid' (the default; docs/profiles.md): relevance is a convex
--    combination of the two relevance lists' scores, each relative to the best of
--    this query's candidates, rel = :alpha * cos/cos_best + (1 - :alpha) *
--    bm25/bm25_best (0 for an episode absent from a list, or a list whose weight is
--    0); an episode first in both lists has rel = 1. Recency, use and importance
--    only close part of the gap to 1: score = rel + (1 - rel) * g, with
--    g = 1 - (1 - 0.02 t) (1 - 0.25 rel [importance high]) and t memory's recency and
--    access term (1 for the newest and most used; 0 when both weights are 0). So
--    nothing passes an episode first in both lists, recency and use reorder only
--    episodes within 2 % of each other's distance from the top, and high importance
--    cuts that distance by a quarter of the episode's own relevance: an important
--    episode that matches nothing (rel 0, e.g. only a stopword in common, without a
--    model) gets no boost, so importance never outranks relevance. When the query
--    names a time (time_from/to, see params), an episode created in that window gains
--    w_time of relevance: rel = (blend + w_time * in_window) / (1 + w_time), so rel
--    stays in [0, 1]; without a window rel is the blend.
score_hybrid AS (
  SELECT rowid, rel + (1 - rel) * g AS score, 0 AS boost, g AS multiplier,
         cos_frac AS cos_norm, bm25_frac AS bm25_norm
  FROM (SELECT rowid, (alpha * cos_frac + (1 - alpha) * bm25_frac + w_t * in_window)
                      / (1 + w_t) AS rel, cos_frac, bm25_frac,
               1 - (1 - 0.02 * t)
                   * (1 - CASE WHEN importance = 'high'
                               THEN 0.25 * (alpha * cos_frac + (1 - alpha) * bm25_frac)
                               ELSE 0 END) AS g
        FROM (SELECT r.rowid, r.importance, p.alpha,
                     coalesce(r.created_at >= p.time_from AND r.created_at < p.time_to, 0)
                       AS in_window,
                     CASE WHEN p.time_from IS NULL THEN 0.0 ELSE p.w_time END AS w_t,
                     CASE WHEN r.similarity IS NULL OR p.w_vec <= 0 THEN 0.0
                          ELSE coalesce(max(r.similarity, 0.0)
                                        / nullif(max(max(r.similarity, 0.0)) OVER (), 0.0),
                                        0.0) END AS cos_frac,
                     CASE WHEN r.bm25_score IS NULL OR p.w_bm25 <= 0 THEN 0.0
                          ELSE coalesce(r.bm25_score / nullif(min(r.bm25_score) OVER (), 0.0),
                                        1.0) END AS bm25_frac,
                     coalesce((p.w_recency * (p.k + 1) / (p.k + r.recency_rank)
                               + p.w_access * (p.k + 1) / (p.k + r.access_rank))
                              / nullif(p.w_recency + p.w_access, 0), 0) AS t
              FROM ranked AS r, params AS p))
),
-- 8. The shown rows (top_lists) with the profile's explanation: the relevance blend's
--    inputs (each list's score relative to the best, and :alpha) and the nudge of
--    recency, use and importance.
explain_hybrid AS (
  SELECT l.rowid, l.score, l.boost, l.bm25_rank, l.vec_rank, l.recency_rank,
         l.access_rank, l.similarity, l.bm25_score, l.slot, l.final_score, l.relevance,
         l.duplicates, l.duplicate_ids,
         json_object('relevance', json_object('cosine', l.cos_norm, 'bm25', l.bm25_norm,
                                              'alpha', p.alpha),
                     'recency_access_importance', json_object('nudge', l.multiplier))
           AS explain
  FROM top_lists AS l, params AS p
  GROUP BY l.rowid
)
