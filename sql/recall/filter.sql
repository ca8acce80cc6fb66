-- The filters on a row of episodes (scope, kind and created_at, unqualified), written
-- once: a fragment says {filter} where a row must pass them, and the composer
-- (sqlite_rrf.core.statements) puts this predicate there. :scope and :scope2 are one
-- scope or two (either one passes); :kind a kind; :since <= created_at < :until (ms);
-- NULL or unbound: that filter is off.
(:scope IS NULL AND :scope2 IS NULL OR scope IN (:scope, :scope2))
AND (:kind IS NULL OR kind = :kind)
AND created_at >= coalesce(:since, created_at)
AND created_at < coalesce(:until, created_at + 1)
