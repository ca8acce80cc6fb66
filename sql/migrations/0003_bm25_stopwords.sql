-- 0003: the BM25 stopwords. FTS5's bm25 gives a term found in at least half of
-- the rows an IDF of 1e-6: it weighs nothing, yet makes FTS5 score nearly every
-- row. sql/stopwords.sql stores such terms in rrf_meta ('bm25_stopwords', with
-- the episode count it saw in 'bm25_stopwords_rows'), and the recall statement
-- drops them from the query (fts5_query's third argument).
-- This table lists every indexed term with its document count (FTS5's own
-- fts5vocab module; it stores nothing, it reads the index).
CREATE VIRTUAL TABLE episodes_fts_vocab USING fts5vocab(episodes_fts, row);
