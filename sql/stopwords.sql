-- sqlite-rrf: refresh the BM25 stopword hint (the Python Store runs it by itself
-- whenever the episode count has moved 10%; `sqlite-rrf stopwords DB` on demand).
--
-- A stopword is an indexed term found in at least half of the episodes: FTS5's
-- bm25 clamps its IDF to 1e-6, so it weighs (almost) nothing, but it makes FTS5
-- visit nearly every row. This list is only a hint: the recall statement counts
-- the query's words that it names at query time (rrf_bm25_idf), leaves out of its
-- scan only those still in half of the rows, and returns bm25()'s exact list all
-- the same. A stale hint costs time, never a row: a word that is no longer common
-- is searched like any other, a common word the hint misses is searched too.
-- Below :min_rows episodes (default 1000) the hint is '', which the statement reads
-- as "count every word" (cheap at that size).
--
-- Parameters: :min_rows (NULL or unbound: 1000). Writes rrf_meta keys
-- 'bm25_stopwords' (the terms, space-separated, as the index holds them: porter
-- stems) and 'bm25_stopwords_rows' (the episode count they were computed at).
INSERT OR REPLACE INTO rrf_meta(key, value)
SELECT 'bm25_stopwords',
       CASE WHEN n >= coalesce(:min_rows, 1000)
            THEN (SELECT coalesce(group_concat(term, ' '), '')
                  FROM (SELECT term FROM episodes_fts_vocab WHERE 2 * doc >= n ORDER BY term))
            ELSE '' END
FROM (SELECT count(*) AS n FROM episodes)
UNION ALL
SELECT 'bm25_stopwords_rows', count(*) FROM episodes;
