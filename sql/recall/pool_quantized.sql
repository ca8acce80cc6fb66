-- 2. The vector pool 'quantized': the same :pool_size nearest episodes as 'all',
--    found in two stages. 2a. the :pool_size * :oversample episodes whose
--    1-bit sign codes (episodes_codes, migration 0007: 48 bytes for 384
--    dimensions) are nearest to the query's by Hamming distance (rrf_hamming,
--    vec_signbits; ties: smaller rowid), plus every episode whose code is still
--    pending (written by a client without the extension: scored exactly, so it
--    is never missed); 2b. of those, the :pool_size best by exact cosine.
pool_codes AS MATERIALIZED (
  SELECT json_extract(j.value, '$[0]') AS rowid
  FROM json_each((
    SELECT rrf_topk(min(p.pool_size * p.oversample, 1000000),
                    -rrf_hamming(c.code, vec_signbits(:qvec)), c.rowid)
    FROM params AS p CROSS JOIN episodes_codes AS c
    WHERE :qvec IS NOT NULL AND p.pool_size > 0 AND c.code IS NOT NULL
      -- the filters, as in 1b
      AND (:scope IS NULL AND :kind IS NULL AND :since IS NULL AND :until IS NULL
           OR EXISTS (SELECT 1 FROM episodes INDEXED BY idx_episodes_filters
                      WHERE rowid = c.rowid
                        AND scope = coalesce(:scope, scope)
                        AND (:kind IS NULL OR kind = :kind)
                        AND created_at >= coalesce(:since, created_at)
                        AND created_at < coalesce(:until, created_at + 1))))) AS j
  UNION ALL
  SELECT c.rowid
  FROM params AS p CROSS JOIN episodes_codes AS c INDEXED BY idx_episodes_codes_pending
  WHERE :qvec IS NOT NULL AND p.pool_size > 0 AND c.code IS NULL
    AND (:scope IS NULL AND :kind IS NULL AND :since IS NULL AND :until IS NULL
         OR EXISTS (SELECT 1 FROM episodes INDEXED BY idx_episodes_filters
                    WHERE rowid = c.rowid
                      AND scope = coalesce(:scope, scope)
                      AND (:kind IS NULL OR kind = :kind)
                      AND created_at >= coalesce(:since, created_at)
                      AND created_at < coalesce(:until, created_at + 1)))
),
pool_quantized AS (
  SELECT json_extract(j.value, '$[0]') AS rowid
  FROM json_each((
    SELECT rrf_topk(min((SELECT pool_size FROM params), 1000000),
                    vec_cosine(v.embedding, :qvec), v.rowid)
    FROM pool_codes AS q CROSS JOIN episodes_vectors AS v ON v.rowid = q.rowid
    WHERE :skip_vectors IS NULL
       OR v.rowid NOT IN (SELECT value FROM json_each(:skip_vectors)))) AS j
)
