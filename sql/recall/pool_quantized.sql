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
      WHERE {no_filter}
      UNION ALL
      SELECT c.rowid, c.code FROM episodes_codes AS c INDEXED BY idx_episodes_codes_loose
      WHERE c.block IS NULL AND c.code IS NOT NULL AND {no_filter}
      UNION ALL
      SELECT c.rowid, c.code FROM episodes_codes AS c INDEXED BY idx_episodes_codes_pending
      WHERE c.code IS NULL AND {no_filter}
      UNION ALL
      -- the filters, as in 1b
      SELECT c.rowid, c.code
      FROM episodes_codes AS c
        JOIN episodes AS e INDEXED BY idx_episodes_filters ON e.rowid = c.rowid
      WHERE NOT ({no_filter}) AND {filter}) AS u
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
)
