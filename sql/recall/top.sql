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
--     {collapse_cosine} and their words, but for the stopwords listed, are the same
--     set (a changed number or name is not a duplicate: it may be an update). Each
--     group of duplicates fills one slot, its best row's, with its newest row (when it
--     was last said: confirmed_at, else created_at; a tie: the better ranked), the
--     others named in duplicate_ids (newest first). JSON, one array per group in the
--     order of their best rows: [best pos, rowid, best score, [other ids]].
fold AS MATERIALIZED (
  SELECT rrf_fold(p.collapse, {collapse_cosine}, {fold_stopwords}, b.pos, b.rowid, e.id,
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
                                             THEN {bm25_c0} + {bm25_cb} * t.b
                                             ELSE {vec_c0} + {vec_cc} * t.similarity
                                                  + {vec_cb} * t.b END))) AS relevance
              FROM (SELECT t.*,
                           CASE WHEN t.bm25_score IS NULL OR m.mass <= 0 THEN 0.0
                                ELSE min(max(-t.bm25_score / m.mass * m.terms
                                             / (m.terms + {terms_prior}), 0.0), {bm25_cap})
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
)
