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
          AND {no_filter}
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
    WHERE NOT ((SELECT bm25_limit FROM params) >= 1 AND {no_filter})
      AND episodes_fts MATCH coalesce(fts5_query(:query, 'or', s.words, 'porter unicode61'),
                                      '""')
      AND ({no_filter}
           OR EXISTS (SELECT 1 FROM episodes INDEXED BY idx_episodes_filters
                      WHERE rowid = episodes_fts.rowid
                        AND {filter}))
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
            AND ({no_filter}
                 OR EXISTS (SELECT 1 FROM episodes INDEXED BY idx_episodes_filters
                            WHERE rowid = episodes_fts.rowid
                              AND {filter}))
          ORDER BY bm25_score, rowid
          LIMIT (SELECT bm25_limit FROM params)))
  WHERE rowid NOT IN (SELECT rowid FROM superseded)
)
