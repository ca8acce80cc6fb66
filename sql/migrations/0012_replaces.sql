-- 0012: a fact that replaces another (docs/schema.md, "Replaced facts").
--
--   episodes.superseded_by  NULL while the episode is a current fact; else the id
--                           of the episode that replaced it (remember/add/import
--                           with replaces). A superseded episode is kept, and
--                           the recall statement leaves it out unless
--                           :include_superseded is 1.
--
-- The id is not a foreign key: the replacing episode may be forgotten later, and
-- the old fact stays superseded (it was replaced, whatever became of the new one).
ALTER TABLE episodes ADD COLUMN superseded_by TEXT
  CHECK (superseded_by IS NULL OR (typeof(superseded_by) = 'text' AND length(superseded_by) > 0));

-- the facts a given episode replaced (get, forget), and the superseded ones (list --all)
CREATE INDEX idx_episodes_superseded_by ON episodes(superseded_by) WHERE superseded_by IS NOT NULL;
