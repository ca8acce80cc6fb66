-- 9. The returned rows (explain: top's rows with the profile's explanation), best
--    first, with high importance's boost added to the explanation.
SELECT e.id,
       e.content,
       t.score,
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
       e.rowid
FROM explain AS t
JOIN episodes AS e ON e.rowid = t.rowid
ORDER BY t.score DESC, t.similarity IS NULL, t.similarity DESC, t.recency_rank,
         t.access_rank, t.rowid;
