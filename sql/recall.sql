-- sqlite-rrf recall: one statement, hybrid retrieval over the episodes table.
--
-- This file is the statement of one pool and one profile (named on the line below
-- this header, and in `params`); `sqlite-rrf sql --pool P --profile F` prints the
-- statement of any other, e.g. `sqlite-rrf sql --profile rrf > rrf.sql`.
--
-- Parameters (all named; NULL or unbound means the default given in `params`, the
-- first CTE below, written from the one table of defaults in sqlite_rrf.core.statements):
--   :query        the user's text (searched with FTS5 through fts5_query)
--   :qvec         the query embedding, float32 blob or JSON array (NULL: no vector list)
--   The profiles (how the lists are fused; sqlite_rrf.core.profiles, docs/profiles.md):
--                 'hybrid'   the cosine and the BM25 score, each relative to this query's
--                            best, half and half; recency, use and importance only close
--                            part of the gap to the top
--                 'memory'   RRF of BM25 and vector, with recency and use only breaking
--                            near-ties
--                 'rrf'      weighted RRF of all four lists (BM25, vector, recency,
--                            access)
--                 'decay'    four-list RRF boosted for recent episodes, times the
--                            episodes' lifecycle multipliers
--                 'weighted' a blend of relevance (cosine and normalised BM25), an age
--                            decay and use
--                 'convex'   alpha times the normalised cosine plus (1 - alpha) times the
--                            normalised BM25 score
--   The pools (the vector list's candidates): 'recent' (the :pool_size most recently
--                 accessed episodes), 'all' (the :pool_size nearest to :qvec of all
--                 episodes, exactly: one scan of the vectors), 'quantized' (the same,
--                 found through 1-bit codes: the :pool_size * :oversample nearest by
--                 Hamming distance, rescored exactly), 'knn' (sqlite-vec's nearest;
--                 needs sqlite-vec and its index, sql/knn.sql)
--   :pool_size, :oversample, :bm25_limit, :limit, :k: sizes and the RRF constant
--   :w_bm25, :w_vec, :w_recency, :w_access: the lists' weights (0 = list off)
--   :alpha ('hybrid', 'convex')   :min_similarity (none): drop candidates that have no
--   BM25 hit and a similarity below it   :now (current time, ms): for ages
--   :skip_vectors (none): a JSON array of rowids whose embedding is left out
--   :scope, :kind (none): only the episodes of that scope ('' is the shared scope),
--                 of that kind
--   :scope2 (none): a second scope: the episodes of :scope or :scope2, in one ranking
--                 (:scope 'shop', :scope2 '': the project shop and the shared scope,
--                 what sqlite-rrf's hook, MCP and CLI recall by default)
--   :since, :until (none): only the episodes with :since <= created_at < :until (ms)
--   The filters apply to both lists: the BM25 list is bm25()'s top over the rows
--   that pass them, the vector pool the most recent (or all) of the rows that pass.
--
-- Needs the rrf extension (vec_cosine, vec_signbits, rrf_hamming, rrf_topk, rrf_sum,
-- rrf_explain, fts5_query, and the FTS5 auxiliary functions rrf_bm25, rrf_bm25_or,
-- rrf_bm25_or_top, rrf_bm25_idf). This file is composed from the fragments in
-- sql/recall/ (one per stage, pool and profile, and the filters written once;
-- python -m sqlite_rrf.core.statements --write): sqlite-rrf's Store, CLI, MCP server, hook
-- and Datasette plugin run the statement of their pool and profile, made the same way.
-- This statement: pool 'quantized', profile 'hybrid'.
WITH
-- 0. Parameters with their defaults (generated from sqlite_rrf.core.statements.DEFAULTS,
--    the one place the defaults are written: python -m sqlite_rrf.core.statements --write).
--    The profile and the pool are this statement's own; k's default depends on the
--    profile. time_from/time_to (ms, no default) is the window a time expression of
--    the query names (sqlite_rrf.core.timeexpr; NULL: none), w_time its weight in 'hybrid'.
params AS (
  SELECT 'hybrid'                          AS profile,
         coalesce(:k, 60.0)                AS k,
         coalesce(:w_bm25, 1.0)            AS w_bm25,
         coalesce(:w_vec, 1.0)             AS w_vec,
         coalesce(:w_recency, 0.6)         AS w_recency,
         coalesce(:w_access, 0.4)          AS w_access,
         coalesce(:bm25_limit, 50)         AS bm25_limit,
         coalesce(:pool_size, 200)         AS pool_size,
         'quantized'                       AS pool,
         coalesce(:oversample, 40)         AS oversample,
         coalesce(:limit, 3)               AS result_limit,
         coalesce(:alpha, 0.5)             AS alpha,
         coalesce(:w_time, 0.2)            AS w_time,
         coalesce(:collapse, 1)            AS collapse,
         coalesce(:min_share, 0.5)         AS min_share,
         coalesce(:include_superseded, 0)  AS include_superseded,
         :time_from                        AS time_from,
         :time_to                          AS time_to,
         :min_similarity                   AS min_similarity,
         :min_relevance                    AS min_relevance,
         coalesce(:now, CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)) AS now_ms
),
-- 0a. The superseded episodes (superseded_by set: a fact that another replaced),
--     left out of both lists unless :include_superseded is 1 (one seek of the
--     partial index idx_episodes_superseded_by; none, usually).
superseded AS MATERIALIZED (
  SELECT rowid FROM episodes INDEXED BY idx_episodes_superseded_by
  WHERE superseded_by IS NOT NULL AND NOT (SELECT include_superseded FROM params)
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
--    1b. The scan without those words. rrf_bm25_or_top and rrf_bm25_or give every
--        row they score exactly the bm25() of the whole query (the dropped words
--        counted in the row's text), and skip the rows that cannot make the top.
bm25_top AS MATERIALIZED (
  -- without a filter: rrf_bm25_or_top, called once on the scan's first row, reads
  -- the doclists term at a time (rarest first) and returns the top :bm25_limit as
  -- JSON [[rowid, bm25], ...], reading the text of only the rows that can make it
  SELECT json_extract(j.value, '$[0]') AS rowid, json_extract(j.value, '$[1]') AS bm25_score
  FROM (SELECT rrf_bm25_or_top(episodes_fts, (SELECT bm25_limit FROM params),
                               :query, s.words, 'porter unicode61') AS js
        FROM bm25_stop AS s CROSS JOIN episodes_fts
        WHERE (SELECT bm25_limit FROM params) >= 1
          AND :scope IS NULL AND :scope2 IS NULL AND :kind IS NULL AND :since IS NULL AND :until IS NULL
          AND episodes_fts MATCH coalesce(fts5_query(:query, 'or', s.words, 'porter unicode61'),
                                          '""')
        LIMIT 1) AS t,
       json_each(t.js) AS j
  UNION ALL
  -- with a filter: the scan row by row, the filters before the score (a row that
  -- fails them is never scored, so the top is the top of the rows that pass; one
  -- seek in the narrow index idx_episodes_filters, no read of the wide row)
  SELECT * FROM (
    SELECT rowid,
           rrf_bm25_or(episodes_fts, (SELECT nullif(max(bm25_limit, 0), 0) FROM params),
                       :query, s.words, 'porter unicode61') AS bm25_score
    FROM bm25_stop AS s CROSS JOIN episodes_fts
    WHERE NOT ((SELECT bm25_limit FROM params) >= 1 AND :scope IS NULL AND :scope2 IS NULL AND :kind IS NULL AND :since IS NULL AND :until IS NULL)
      AND episodes_fts MATCH coalesce(fts5_query(:query, 'or', s.words, 'porter unicode61'),
                                      '""')
      AND (:scope IS NULL AND :scope2 IS NULL AND :kind IS NULL AND :since IS NULL AND :until IS NULL
           OR EXISTS (SELECT 1 FROM episodes INDEXED BY idx_episodes_filters
                      WHERE rowid = episodes_fts.rowid
                        AND (:scope IS NULL AND :scope2 IS NULL OR scope IN (:scope, :scope2))
                            AND (:kind IS NULL OR kind = :kind)
                            AND created_at >= coalesce(:since, created_at)
                            AND created_at < coalesce(:until, created_at + 1)))
    ORDER BY bm25_score, rowid
    LIMIT (SELECT bm25_limit FROM params))
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
--        the second scan never starts when 1b is exact), without the superseded
--        episodes (0a), ranked.
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
            AND (:scope IS NULL AND :scope2 IS NULL AND :kind IS NULL AND :since IS NULL AND :until IS NULL
                 OR EXISTS (SELECT 1 FROM episodes INDEXED BY idx_episodes_filters
                            WHERE rowid = episodes_fts.rowid
                              AND (:scope IS NULL AND :scope2 IS NULL OR scope IN (:scope, :scope2))
                                  AND (:kind IS NULL OR kind = :kind)
                                  AND created_at >= coalesce(:since, created_at)
                                  AND created_at < coalesce(:until, created_at + 1)))
          ORDER BY bm25_score, rowid
          LIMIT (SELECT bm25_limit FROM params)))
  WHERE rowid NOT IN (SELECT rowid FROM superseded)
),
-- 2. The vector pool 'quantized': the same :pool_size nearest episodes as 'all',
--    found in two stages. 2a. the :pool_size * :oversample episodes whose
--    1-bit sign codes (episodes_codes, migration 0007: 48 bytes for 384
--    dimensions) are nearest to the query's by Hamming distance (rrf_hamming,
--    vec_signbits; ties: smaller rowid), plus every episode whose code is still
--    pending (written by a client without the extension: scored exactly, so it
--    is never missed); 2b. of those, the :pool_size best by exact cosine.
--    2a reads the codes with rrf_hamming_topk: without a filter, those packed in
--    blocks (migration 0008) one block per row, then the loose ones (in no block)
--    and the pending ones one per row; with a filter (blocks cannot filter), every
--    row one by one. Either way it is the same top by (distance, rowid), and every
--    pending row (rrf_hamming_topk keeps them all).
pool_codes AS MATERIALIZED (
  SELECT json_extract(j.value, '$[0]') AS rowid
  FROM json_each((
    SELECT rrf_hamming_topk(min(p.pool_size * p.oversample, 1000000), vec_signbits(:qvec),
                            u.rowids, u.codes)
    FROM (
      SELECT k.rowids, k.codes FROM episodes_code_blocks AS k
      WHERE :scope IS NULL AND :scope2 IS NULL AND :kind IS NULL AND :since IS NULL AND :until IS NULL
      UNION ALL
      SELECT c.rowid, c.code FROM episodes_codes AS c INDEXED BY idx_episodes_codes_loose
      WHERE c.block IS NULL AND c.code IS NOT NULL AND :scope IS NULL AND :scope2 IS NULL AND :kind IS NULL AND :since IS NULL AND :until IS NULL
      UNION ALL
      SELECT c.rowid, c.code FROM episodes_codes AS c INDEXED BY idx_episodes_codes_pending
      WHERE c.code IS NULL AND :scope IS NULL AND :scope2 IS NULL AND :kind IS NULL AND :since IS NULL AND :until IS NULL
      UNION ALL
      -- the filters, as in 1b
      SELECT c.rowid, c.code
      FROM episodes_codes AS c
        JOIN episodes AS e INDEXED BY idx_episodes_filters ON e.rowid = c.rowid
      WHERE NOT (:scope IS NULL AND :scope2 IS NULL AND :kind IS NULL AND :since IS NULL AND :until IS NULL) AND (:scope IS NULL AND :scope2 IS NULL OR scope IN (:scope, :scope2))
                                  AND (:kind IS NULL OR kind = :kind)
                                  AND created_at >= coalesce(:since, created_at)
                                  AND created_at < coalesce(:until, created_at + 1)) AS u
    CROSS JOIN params AS p  -- after u: u is read as it is made, not copied first
    WHERE :qvec IS NOT NULL AND p.pool_size > 0)) AS j
),
pool_quantized AS (
  SELECT json_extract(j.value, '$[0]') AS rowid
  FROM json_each((
    SELECT rrf_topk(min((SELECT pool_size FROM params), 1000000),
                    vec_cosine(v.embedding, :qvec), v.rowid)
    FROM pool_codes AS q CROSS JOIN episodes_vectors AS v ON v.rowid = q.rowid
    WHERE :skip_vectors IS NULL
       OR v.rowid NOT IN (SELECT value FROM json_each(:skip_vectors)))) AS j
),
pool AS (SELECT rowid FROM pool_quantized),
-- 3. Candidates: the pool plus the BM25 hits it missed (one row per rowid), so an
--    old episode that matches the words is never dropped, each with its BM25 score
--    and rank (NULL when it is not a hit); no superseded episode (0a).
candidates AS (
  SELECT rowid, max(bm25_score) AS bm25_score, max(bm25_rank) AS bm25_rank
  FROM (SELECT rowid, NULL AS bm25_score, NULL AS bm25_rank FROM pool
        UNION ALL
        SELECT rowid, bm25_score, bm25_rank FROM bm25)
  WHERE rowid NOT IN (SELECT rowid FROM superseded)
  GROUP BY rowid
),
-- 4. The similarity, computed once per candidate (MATERIALIZED), except for the
--    rowids of :skip_vectors (a JSON array: stored vectors that cannot be used,
--    e.g. NaN written by another client); the optional floor drops vector-only
--    candidates below :min_similarity.
scored AS MATERIALIZED (
  SELECT *
  FROM (SELECT e.rowid, e.created_at, e.access_count, e.importance,
               CASE WHEN e.rowid NOT IN (SELECT value FROM json_each(:skip_vectors))
                    THEN vec_cosine(e.embedding, :qvec) END AS similarity,
               c.bm25_score, c.bm25_rank,
               ((SELECT now_ms FROM params) - e.created_at) / 86400000.0 AS age_days
        FROM candidates AS c
        -- candidates drive the join (CROSS JOIN fixes the order): a few hundred
        -- primary-key lookups, never a scan of episodes
        CROSS JOIN episodes AS e ON e.rowid = c.rowid)
  WHERE bm25_rank IS NOT NULL
     OR (SELECT min_similarity FROM params) IS NULL
     OR similarity >= (SELECT min_similarity FROM params)
),
-- 5. One rank per list (1 = best; dense, so equal values share a rank; absent from
--    a list = NULL).
ranked AS MATERIALIZED (
  SELECT rowid, similarity, bm25_score, bm25_rank, age_days, access_count, importance,
         created_at,
         CASE WHEN similarity IS NOT NULL THEN
           dense_rank() OVER (PARTITION BY similarity IS NULL ORDER BY similarity DESC)
         END AS vec_rank,
         dense_rank() OVER (ORDER BY created_at DESC)   AS recency_rank,
         dense_rank() OVER (ORDER BY access_count DESC) AS access_rank,
         -- whether any candidate is a BM25 hit (nothing to match: see top)
         max(bm25_rank IS NOT NULL) OVER () AS any_hit
  FROM scored
),
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
),
scores AS (SELECT * FROM score_hybrid),
-- 7. The best candidates by the profile's score (scores), numbered (pos) in the
--    ranking's order: score, then similarity, recency, use, rowid. With :collapse
--    (the default) 2 * :limit + 10 of them, so that :limit slots remain after the
--    fold (7a); else :limit. Nothing to match (no BM25 hit and no query vector): no
--    episode, not the most recent.
best AS MATERIALIZED (
  SELECT * FROM (
    SELECT s.rowid, s.score, s.boost, s.multiplier, s.cos_norm, s.bm25_norm,
           r.bm25_rank, r.vec_rank, r.recency_rank, r.access_rank, r.similarity,
           r.bm25_score, r.age_days, r.access_count, r.created_at,
           row_number() OVER (ORDER BY s.score DESC, r.similarity IS NULL, r.similarity DESC,
                                       r.recency_rank, r.access_rank, s.rowid) AS pos
    FROM scores AS s JOIN ranked AS r ON r.rowid = s.rowid
    WHERE :qvec IS NOT NULL OR r.any_hit)
  WHERE pos <= (SELECT CASE WHEN collapse THEN min(2 * result_limit + 10, 2147483647)
                            ELSE result_limit END FROM params)
),
-- 7a. The fold (rrf_fold, in the extension; with :collapse, else every row is its
--     own group): a row duplicates a better-ranked one when their texts are the same
--     (content_key, the normal form's digest; where a key is pending, the texts
--     trimmed and ASCII case folded) or when both have a usable vector (a similarity:
--     there is a query vector), their embeddings' cosine is at least
--     0.95 and their words, but for the stopwords listed, are the same
--     set (a changed number or name is not a duplicate: it may be an update). Each
--     group of duplicates fills one slot, its best row's, with its newest row (when it
--     was last said: confirmed_at, else created_at; a tie: the better ranked), the
--     others named in duplicate_ids (newest first). JSON, one array per group in the
--     order of their best rows: [best pos, rowid, best score, [other ids]].
fold AS MATERIALIZED (
  SELECT rrf_fold(p.collapse, 0.95, 'a about above after again all also am an and any are as at be been before being below between both but by can could did do does doing down during each few for from further had has have having he her here hers him his how i if in instead into is it its itself just me more most my no nor not now of off on once only or other our ours out over own rather same she should so some such than that the their theirs them then there these they this those through to too under until up very was we were what when where which while who whom why will with would you your yours', b.pos, b.rowid, e.id,
                  b.score, coalesce(e.confirmed_at, b.created_at), e.content_key, e.content,
                  e.embedding, b.similarity IS NOT NULL) AS groups
  FROM params AS p CROSS JOIN best AS b CROSS JOIN episodes AS e ON e.rowid = b.rowid
),
-- 7b. The returned rows: the first :limit slots, each with its group's best score as
--     the final score (so the rows' order is their scores').
top AS MATERIALIZED (
  SELECT b.*, json_extract(g.value, '$[0]') AS slot, json_extract(g.value, '$[2]') AS final_score,
         json_array_length(g.value, '$[3]') AS duplicates,
         json_extract(g.value, '$[3]') AS duplicate_ids
  FROM fold AS f, json_each(f.groups) AS g
       CROSS JOIN best AS b ON b.rowid = json_extract(g.value, '$[1]')
  ORDER BY g.key
  LIMIT (SELECT result_limit FROM params)
),
-- 7c. The relevance of each returned row (sqlite_rrf.core.relevance: in [0, 1], the same
--     scale for every query), from its cosine and its BM25 score as a share of the
--     query's IDF mass: its distinct terms' IDFs, a term no episode holds as if one
--     did, a word of the stopwords hint 1e-6.
rrf_mass AS MATERIALIZED (
  SELECT coalesce(sum(idf), 0.0) AS mass, count(*) AS terms FROM (
    SELECT CASE WHEN instr(x.stop, ' ' || t.term || ' ') > 0 THEN 1e-6
                ELSE coalesce((SELECT rrf_bm25_idf(episodes_fts) FROM episodes_fts
                               WHERE episodes_fts MATCH t.phrase LIMIT 1),
                              max(ln((x.n - 1 + 0.5) / 1.5), 1e-6)) END AS idf
    FROM (SELECT json_extract(j.value, '$[1]') AS term,
                 min(json_extract(j.value, '$[0]')) AS phrase
          FROM json_each(fts5_query(:query, 'terms', NULL, 'porter unicode61')) AS j
          GROUP BY 1) AS t,
         (SELECT coalesce((SELECT value FROM rrf_meta WHERE key = 'bm25_stopwords_rows'
                           AND typeof(value) = 'integer' AND value > 0),
                          (SELECT count(*) FROM episodes)) AS n,
                 ' ' || coalesce((SELECT value FROM rrf_meta WHERE key = 'bm25_stopwords'
                                  AND typeof(value) = 'text'), '') || ' ' AS stop) AS x)
),
--     What is shown. With :min_relevance (none: every returned row), the policy: a
--     row is shown when its relevance reaches :min_relevance and is at least
--     :min_share of the best returned row's relevance.
shown AS MATERIALIZED (
  SELECT r.*
  FROM (SELECT t.*, max(t.relevance) OVER () AS best_relevance
        FROM (SELECT t.*,
                     1.0 / (1.0 + exp(-(CASE WHEN t.similarity IS NULL
                                             THEN -2.55 + 7.08 * t.b
                                             ELSE -3.79 + 6.35 * t.similarity
                                                  + 4.07 * t.b END))) AS relevance
              FROM (SELECT t.*,
                           CASE WHEN t.bm25_score IS NULL OR m.mass <= 0 THEN 0.0
                                ELSE min(max(-t.bm25_score / m.mass * m.terms
                                             / (m.terms + 2.0), 0.0), 2.0)
                                END AS b
                    FROM top AS t, rrf_mass AS m) AS t) AS t) AS r, params AS p
  WHERE p.min_relevance IS NULL
     OR (r.relevance >= p.min_relevance AND r.relevance >= p.min_share * r.best_relevance)
),
-- The shown rows once per list (the four lists, with rank and weight), for the
-- explanations (which read the shown rows through this CTE only).
top_lists AS (
  SELECT t.*, l.list,
         CASE l.list WHEN 'bm25' THEN t.bm25_rank WHEN 'vector' THEN t.vec_rank
                     WHEN 'recency' THEN t.recency_rank ELSE t.access_rank END AS rank,
         CASE l.list WHEN 'bm25' THEN p.w_bm25 WHEN 'vector' THEN p.w_vec
                     WHEN 'recency' THEN p.w_recency ELSE p.w_access END AS weight
  FROM shown AS t, params AS p,
       (SELECT 'bm25' AS list UNION ALL SELECT 'vector' UNION ALL SELECT 'recency'
        UNION ALL SELECT 'access') AS l
),
explain AS (SELECT * FROM explain_hybrid)
-- 9. The shown rows with the profile's explanation (high importance's boost added to
--    it), in the order of the final score: score is the slot's (its fold group's best
--    row's) score, fused_score the row's own; relevance and the fold (duplicates, and
--    duplicate_ids, a JSON array) as columns.
SELECT e.id,
       e.content,
       t.final_score AS score,
       t.bm25_rank,
       t.vec_rank,
       t.recency_rank,
       t.access_rank,
       t.similarity,
       t.bm25_score,
       CASE WHEN t.boost > 0
            THEN json_set(coalesce(t.explain, '{}'), '$.importance', json_object('boost', t.boost))
            ELSE t.explain END AS explain,
       e.importance,
       e.created_at,
       e.accessed_at,
       e.access_count,
       e.rowid,
       t.relevance,
       t.duplicates,
       t.duplicate_ids,
       t.score AS fused_score
FROM explain AS t
JOIN episodes AS e ON e.rowid = t.rowid
ORDER BY t.final_score DESC, t.slot;
