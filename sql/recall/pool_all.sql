-- 2. The vector pool 'all': the :pool_size episodes nearest to :qvec by cosine, of
--    every episode with an embedding that passes the filters, exactly, in one scan
--    of the narrow table episodes_vectors (migration 0007: vectors only, no text)
--    that keeps the best :pool_size in a bounded heap (rrf_topk; ties: smaller
--    rowid). No query vector, no scan.
pool_all AS (
  SELECT json_extract(j.value, '$[0]') AS rowid
  FROM json_each((
    SELECT rrf_topk(min(p.pool_size, 1000000), vec_cosine(v.embedding, :qvec), v.rowid)
    FROM params AS p CROSS JOIN episodes_vectors AS v
    WHERE :qvec IS NOT NULL AND p.pool_size > 0
      -- stored vectors the statement cannot use (see 4.)
      AND (:skip_vectors IS NULL
           OR v.rowid NOT IN (SELECT value FROM json_each(:skip_vectors)))
      -- the filters: one seek in idx_episodes_filters per row; no filter, no seek
      AND ({no_filter}
           OR EXISTS (SELECT 1 FROM episodes INDEXED BY idx_episodes_filters
                      WHERE rowid = v.rowid AND {filter})))) AS j
)
