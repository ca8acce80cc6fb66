-- 9. The shown rows with the profile's explanation (high importance's boost added to
--    it), in the order of the final score: score is the slot's (its fold group's best
--    row's) score, fused_score the row's own; relevance and the fold (duplicates, and
--    duplicate_ids, a JSON array) as columns.
SELECT e.id,
       e.content,
       t.final_score AS score,
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
       e.rowid,
       t.relevance,
       t.duplicates,
       t.duplicate_ids,
       t.score AS fused_score
FROM explain AS t
JOIN episodes AS e ON e.rowid = t.rowid
ORDER BY t.final_score DESC, t.slot;
