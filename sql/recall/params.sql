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
)
