-- sqlite-rrf recall: one statement, hybrid retrieval over the episodes table.
--
-- Parameters (all named; NULL or unbound means the default given in `params`):
--   :query        the user's text (searched with FTS5 through fts5_query)
--   :qvec         the query embedding, float32 blob or JSON array (NULL: no vector list)
--   :profile      how the lists are fused (docs/profiles.md):
--                 'memory' (default) RRF of BM25 and vector, times a bounded
--                          recency/access multiplier that can reorder near-ties but
--                          never outvote a first place in both relevance lists
--                 'rrf'    DESIGN.md's four-list weighted RRF
--                 'decay'  four-list RRF (k 30) times 1 + 0.3 exp(-age_days/30) and
--                          the lifecycle multipliers (NULL = 1)
--                 'weighted' the score blend RRF replaces: 0.5 relevance + 0.3 recency
--                          + 0.2 usage, relevance = 0.7 cosine + 0.3 min-max BM25
--                 'convex' :alpha * min-max cosine + (1 - :alpha) * min-max BM25
--   :pool         'recent' (the :pool_size most recently accessed episodes) or
--                 'all' (every episode with an embedding; exact); the 'knn' form of
--                 this statement (sql/pool_knn.sql) takes sqlite-vec's nearest
--                 :pool_size over all episodes
--   :pool_size 200   :bm25_limit 50   :limit 3   :k 60 (30 for 'decay')
--   :w_bm25 1.0  :w_vec 1.0  :w_recency 0.6  :w_access 0.4   (weight 0 = list off)
--   :alpha 0.5 ('convex')   :min_similarity (none): drop candidates that have no
--   BM25 hit and a similarity below it   :now (current time, ms): for ages
--   :skip_vectors (none): a JSON array of rowids whose embedding is left out
--   :scope, :kind (none): only the episodes of that scope, of that kind
--   :since, :until (none): only the episodes with :since <= created_at < :until (ms)
--   The filters apply to both lists: the BM25 list is bm25()'s top over the rows
--   that pass them, the vector pool the most recent (or all) of the rows that pass.
--
-- Needs the rrf extension (vec_cosine, rrf_fuse, rrf_explain, fts5_query, and the
-- FTS5 auxiliary functions rrf_bm25, rrf_bm25_or, rrf_bm25_idf).
WITH
-- 0. Parameters with their defaults: the one place the defaults are written.
params AS (
  SELECT coalesce(:profile, 'memory')  AS profile,
         coalesce(:k, CASE coalesce(:profile, 'memory') WHEN 'decay' THEN 30.0 ELSE 60.0 END)
                                       AS k,
         coalesce(:w_bm25, 1.0)        AS w_bm25,
         coalesce(:w_vec, 1.0)         AS w_vec,
         coalesce(:w_recency, 0.6)     AS w_recency,
         coalesce(:w_access, 0.4)      AS w_access,
         coalesce(:bm25_limit, 50)     AS bm25_limit,
         coalesce(:pool_size, 200)     AS pool_size,
         coalesce(:pool, 'recent')     AS pool,
         coalesce(:limit, 3)           AS result_limit,
         coalesce(:alpha, 0.5)         AS alpha,
         :min_similarity               AS min_similarity,
         coalesce(:now, CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)) AS now_ms
),
-- 1. Full-text hits over ALL episodes: FTS5 bm25()'s top :bm25_limit for the OR
--    query of all the words of :query, fts5_query(:query), exactly: the rows, order
--    and values of ORDER BY bm25(episodes_fts), rowid LIMIT :bm25_limit (bm25 is
--    negative: lower is better), whatever wrote to the database and however old the
--    hint below is. Raw text goes through fts5_query, so it never fails.
--    1a. The query's words the index holds in at least half of its rows now: FTS5
--        gives them its IDF floor, 1e-6, so they weigh (almost) nothing, yet they
--        match nearly every row. rrf_bm25_idf counts until it knows. Only the words
--        the hint names (rrf_meta 'bm25_stopwords', sql/stopwords.sql) are counted,
--        every word when there is none: a stale hint costs time, never a row.
bm25_stop AS MATERIALIZED (
  SELECT coalesce(group_concat(json_extract(t.value, '$[1]'), ' '), '') AS words,
         count(*) AS dropped
  FROM json_each(fts5_query(:query, 'terms',
                            (SELECT CASE WHEN typeof(value) = 'text' THEN value END
                             FROM rrf_meta WHERE key = 'bm25_stopwords'),
                            'porter unicode61')) AS t
  WHERE (SELECT rrf_bm25_idf(episodes_fts) FROM episodes_fts
         WHERE episodes_fts MATCH json_extract(t.value, '$[0]') LIMIT 1) = 1e-6
),
--    1b. The scan without those words. rrf_bm25_or gives every row it scores
--        exactly the bm25() of the whole query (the dropped words counted in the
--        row's text), and a bound to the rows that cannot make the top.
bm25_top AS MATERIALIZED (
  SELECT rowid,
         rrf_bm25_or(episodes_fts, (SELECT nullif(max(bm25_limit, 0), 0) FROM params),
                     :query, s.words, 'porter unicode61') AS bm25_score
  FROM bm25_stop AS s CROSS JOIN episodes_fts
  WHERE episodes_fts MATCH coalesce(fts5_query(:query, 'or', s.words, 'porter unicode61'),
                                    '""')
    -- the filters, before the score: a row that fails them is never scored, so the
    -- top is the top of the rows that pass. One seek in the narrow index
    -- idx_episodes_filters (no read of the wide row); no filter, no seek.
    AND (:scope IS NULL AND :kind IS NULL AND :since IS NULL AND :until IS NULL
         OR EXISTS (SELECT 1 FROM episodes INDEXED BY idx_episodes_filters
                    WHERE rowid = episodes_fts.rowid
                      AND scope = coalesce(:scope, scope)
                      AND (:kind IS NULL OR kind = :kind)
                      AND created_at >= coalesce(:since, created_at)
                      AND created_at < coalesce(:until, created_at + 1)))
  ORDER BY bm25_score, rowid
  LIMIT (SELECT bm25_limit FROM params)
),
--    1c. That is the whole query's top when no word was dropped, or when
--        :bm25_limit of its rows score more than the dropped words alone can give
--        a row (2.2e-6 each at most): the rows it did not scan hold only those.
bm25_exact AS MATERIALIZED (
  SELECT s.dropped = 0
         OR (p.bm25_limit >= 0
             AND (SELECT count(*) FROM bm25_top
                  WHERE bm25_score < -2.2000022e-6 * s.dropped) >= p.bm25_limit) AS exact
  FROM bm25_stop AS s, params AS p
),
--    1d. The list: 1b, or else the whole query (bm25_exact is the outer loop, so
--        the second scan never starts when 1b is exact).
bm25 AS MATERIALIZED (
  SELECT rowid, bm25_score,
         dense_rank() OVER (ORDER BY bm25_score) AS bm25_rank
  FROM (SELECT t.rowid, t.bm25_score FROM bm25_exact AS x, bm25_top AS t WHERE x.exact
        UNION ALL
        SELECT * FROM (
          SELECT rowid,
                 rrf_bm25(episodes_fts, (SELECT nullif(max(bm25_limit, 0), 0) FROM params))
                   AS bm25_score
          FROM bm25_exact AS x CROSS JOIN episodes_fts
          WHERE NOT x.exact
            AND episodes_fts MATCH coalesce(fts5_query(:query), '""')
            -- the filters, as in 1b
            AND (:scope IS NULL AND :kind IS NULL AND :since IS NULL AND :until IS NULL
                 OR EXISTS (SELECT 1 FROM episodes INDEXED BY idx_episodes_filters
                            WHERE rowid = episodes_fts.rowid
                              AND scope = coalesce(:scope, scope)
                              AND (:kind IS NULL OR kind = :kind)
                              AND created_at >= coalesce(:since, created_at)
                              AND created_at < coalesce(:until, created_at + 1)))
          ORDER BY bm25_score, rowid
          LIMIT (SELECT bm25_limit FROM params)))
),
-- 2. The vector pool, of the episodes that pass the filters: 'recent' reads the
--    partial index idx_episodes_accessed_at (idx_episodes_scope_accessed_at for a
--    scope: only one of the two branches runs); 'all' is every episode with an
--    embedding. (`sqlite-rrf sql --pool knn` prints this statement with the 'knn'
--    pool of sql/pool_knn.sql instead.)
-- pool:begin
pool AS (
  SELECT rowid
  FROM (SELECT rowid FROM episodes
        WHERE embedding IS NOT NULL AND :scope IS NULL
          AND (:kind IS NULL OR kind = :kind)
          AND (:since IS NULL OR created_at >= :since)
          AND (:until IS NULL OR created_at < :until)
        ORDER BY accessed_at DESC, rowid
        LIMIT (SELECT pool_size FROM params))
  WHERE (SELECT pool FROM params) = 'recent'
  UNION ALL
  SELECT rowid
  FROM (SELECT rowid FROM episodes INDEXED BY idx_episodes_scope_accessed_at
        WHERE embedding IS NOT NULL AND scope = :scope
          AND (:kind IS NULL OR kind = :kind)
          AND (:since IS NULL OR created_at >= :since)
          AND (:until IS NULL OR created_at < :until)
        ORDER BY accessed_at DESC, rowid
        LIMIT (SELECT pool_size FROM params))
  WHERE (SELECT pool FROM params) = 'recent'
  UNION ALL
  -- params is the outer loop (CROSS JOIN fixes the order), so when the pool is
  -- not 'all' the scan of episodes never starts
  SELECT e.rowid FROM params AS p CROSS JOIN episodes AS e
  WHERE p.pool = 'all' AND e.embedding IS NOT NULL
    AND (:scope IS NULL OR e.scope = :scope)
    AND (:kind IS NULL OR e.kind = :kind)
    AND (:since IS NULL OR e.created_at >= :since)
    AND (:until IS NULL OR e.created_at < :until)
),
-- pool:end
-- 3. Candidates: the pool plus the BM25 hits it missed (UNION dedupes by rowid),
--    so an old episode that matches the words is never dropped.
candidates AS (
  SELECT rowid FROM pool
  UNION
  SELECT rowid FROM bm25
),
-- 4. The similarity, computed once per candidate (MATERIALIZED), except for the
--    rowids of :skip_vectors (a JSON array: stored vectors that cannot be used,
--    e.g. NaN written by another client); the optional floor drops vector-only
--    candidates below :min_similarity.
scored AS MATERIALIZED (
  SELECT *
  FROM (SELECT e.rowid, e.created_at, e.access_count,
               CASE WHEN e.rowid NOT IN (SELECT value FROM json_each(:skip_vectors))
                    THEN vec_cosine(e.embedding, :qvec) END AS similarity,
               b.bm25_score, b.bm25_rank,
               ((SELECT now_ms FROM params) - e.created_at) / 86400000.0 AS age_days
        FROM candidates AS c
        -- candidates drive the join (CROSS JOIN fixes the order): a few hundred
        -- primary-key lookups, never a scan of episodes
        CROSS JOIN episodes AS e ON e.rowid = c.rowid
        LEFT JOIN bm25 AS b ON b.rowid = c.rowid)
  WHERE bm25_rank IS NOT NULL
     OR (SELECT min_similarity FROM params) IS NULL
     OR similarity >= (SELECT min_similarity FROM params)
),
-- 5. One rank per list (1 = best; dense, so equal values share a rank; absent from
--    a list = NULL), and the min-max normalised scores the blend profiles use.
ranked AS MATERIALIZED (
  SELECT rowid, similarity, bm25_score, bm25_rank, age_days, access_count,
         CASE WHEN similarity IS NOT NULL THEN
           dense_rank() OVER (PARTITION BY similarity IS NULL ORDER BY similarity DESC)
         END AS vec_rank,
         dense_rank() OVER (ORDER BY created_at DESC)   AS recency_rank,
         dense_rank() OVER (ORDER BY access_count DESC) AS access_rank,
         -- cosine scaled to [0, 1] over the candidates (0 where there is none)
         coalesce((similarity - min(similarity) OVER ())
                  / nullif(max(similarity) OVER () - min(similarity) OVER (), 0), 
                  CASE WHEN similarity IS NOT NULL THEN 1.0 END, 0.0) AS cos_norm,
         -- bm25 scaled to [0, 1] over the hits, best = 1; a lone hit gets 0.5
         CASE WHEN bm25_score IS NULL THEN 0.0
              ELSE coalesce((max(bm25_score) OVER () - bm25_score)
                            / nullif(max(bm25_score) OVER () - min(bm25_score) OVER (), 0),
                            0.5) END AS bm25_norm,
         max(access_count) OVER () AS max_access_count
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
-- 7. Weighted RRF per candidate: over all four lists (rrf4) and over the two
--    relevance lists (rrf2), with the explanation of the lists the profile fuses.
fused AS (
  SELECT l.rowid,
         rrf_fuse(CASE WHEN l.weight > 0 THEN l.rank END, l.weight, p.k) AS rrf4,
         rrf_fuse(CASE WHEN l.weight > 0 AND l.list IN ('bm25', 'vector') THEN l.rank END,
                  l.weight, p.k) AS rrf2,
         rrf_explain(l.list,
                     CASE WHEN l.weight > 0 AND (p.profile != 'memory'
                                                 OR l.list IN ('bm25', 'vector'))
                          THEN l.rank END,
                     l.weight, p.k) AS explain
  FROM lists AS l, params AS p
  GROUP BY l.rowid
),
-- 8. The 'memory' profile's bound: the largest multiplier that keeps every
--    candidate that is not first in all enabled relevance lists below one that is:
--    best = (w_b + w_v)/(k+1), runner-up <= best - min(w)(1/(k+1) - 1/(k+2)).
bound AS (
  SELECT CASE WHEN best > 0 AND best > runner_up THEN 0.99 * (best / runner_up - 1) ELSE 0 END
           AS max_boost
  FROM (SELECT best, best - w_min * (1.0 / (k + 1) - 1.0 / (k + 2)) AS runner_up
        FROM (SELECT k, (w_bm25 + w_vec) / (k + 1) AS best,
                     CASE WHEN w_bm25 > 0 AND w_vec > 0 THEN min(w_bm25, w_vec)
                          ELSE max(w_bm25, w_vec) END AS w_min
              FROM params))
),
-- 9. 'memory': 1 + max_boost * (the weighted mean of the recency and access RRF
--    terms, each scaled so that rank 1 gives 1).
tiebreak AS (
  SELECT r.rowid,
         1 + b.max_boost * coalesce(
               (p.w_recency * (p.k + 1) / (p.k + r.recency_rank)
                + p.w_access * (p.k + 1) / (p.k + r.access_rank))
               / nullif(p.w_recency + p.w_access, 0), 0) AS multiplier
  FROM ranked AS r, params AS p, bound AS b
),
-- 10. The score of each profile; high importance adds 1/(k+1) - 1/(k+11) to the
--    RRF profiles (shown in explain as "importance") and floors relevance at 0.3
--    in 'weighted'.
final AS (
  SELECT f.rowid, e.importance,
         CASE WHEN e.importance = 'high' AND p.profile IN ('memory', 'rrf', 'decay')
              THEN 1.0 / (p.k + 1) - 1.0 / (p.k + 11) ELSE 0 END AS boost,
         CASE p.profile
           WHEN 'rrf' THEN coalesce(f.rrf4, 0)
           WHEN 'decay' THEN coalesce(f.rrf4, 0) * (1 + 0.3 * exp(-r.age_days / 30.0))
                * coalesce(e.strength, 1) * coalesce(e.depth, 1)
                * coalesce(e.session_spread, 1) * coalesce(e.stability, 1)
           WHEN 'weighted' THEN
                0.5 * max(0.7 * coalesce(r.similarity, 0) + 0.3 * r.bm25_norm,
                          CASE WHEN e.importance = 'high' THEN 0.3 ELSE 0 END)
              + 0.3 * exp(-0.6931471805599453 / 30 * max(r.age_days, 0))
              + 0.2 * (r.access_count + 1.0) / (r.max_access_count + 1.0)
           WHEN 'convex' THEN p.alpha * r.cos_norm + (1 - p.alpha) * r.bm25_norm
           ELSE -- 'memory': recency and access as a bounded tie-breaking multiplier
                coalesce(f.rrf2, 0) * r_mult.multiplier
         END AS base,
         CASE WHEN p.profile = 'memory' THEN json_set(coalesce(f.explain, '{}'),
                '$.recency_access', json_object('multiplier', r_mult.multiplier))
              WHEN p.profile IN ('rrf', 'decay') THEN f.explain
              WHEN p.profile = 'weighted' THEN json_object(
                'similarity', r.similarity, 'bm25_norm', r.bm25_norm,
                'age_days', r.age_days, 'access_count', r.access_count)
              ELSE json_object('cos_norm', r.cos_norm, 'bm25_norm', r.bm25_norm,
                               'alpha', p.alpha)
         END AS explain
  FROM fused AS f
  JOIN ranked AS r ON r.rowid = f.rowid
  JOIN episodes AS e ON e.rowid = f.rowid
  JOIN tiebreak AS r_mult ON r_mult.rowid = f.rowid
  CROSS JOIN params AS p
)
-- 11. Top :limit by score; ties broken by similarity, then recency, use, rowid.
SELECT e.id,
       e.content,
       coalesce(x.base, 0) + x.boost AS score,
       r.bm25_rank,
       r.vec_rank,
       r.recency_rank,
       r.access_rank,
       r.similarity,
       r.bm25_score,
       CASE WHEN x.boost > 0
            THEN json_set(coalesce(x.explain, '{}'), '$.importance', json_object('boost', x.boost))
            ELSE x.explain END AS explain,
       e.importance,
       e.created_at,
       e.accessed_at,
       e.access_count,
       e.rowid
FROM final AS x
JOIN ranked AS r ON r.rowid = x.rowid
JOIN episodes AS e ON e.rowid = x.rowid
-- nothing to match (no BM25 hit and no query vector): no episode, not the most recent
WHERE :qvec IS NOT NULL OR EXISTS (SELECT 1 FROM bm25)
ORDER BY score DESC, r.similarity IS NULL, r.similarity DESC, r.recency_rank,
         r.access_rank, e.rowid
LIMIT (SELECT result_limit FROM params);
