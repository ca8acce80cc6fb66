-- sqlite-rrf: refresh the BM25 stopwords (run after large imports or deletes;
-- the Python Store runs it by itself whenever the episode count has moved 10%).
--
-- A stopword is an indexed term found in at least half of the episodes: FTS5's
-- bm25 clamps its IDF to 1e-6, so it changes no ranking, but it makes FTS5 score
-- nearly every row. The recall statement drops these terms from the query
-- (unless the query has nothing else). Below :min_rows episodes (default 1000)
-- the list is empty: search is cheap there, and every word keeps its match.
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
