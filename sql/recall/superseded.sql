-- 0a. The superseded episodes (superseded_by set: a fact that another replaced),
--     left out of both lists unless :include_superseded is 1 (one seek of the
--     partial index idx_episodes_superseded_by; none, usually).
superseded AS MATERIALIZED (
  SELECT rowid FROM episodes INDEXED BY idx_episodes_superseded_by
  WHERE superseded_by IS NOT NULL AND NOT (SELECT include_superseded FROM params)
)
