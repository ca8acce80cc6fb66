-- 0013: when a repeated fact was last confirmed (docs/schema.md, "Repeated facts").
--
--   episodes.confirmed_at  NULL until the text is stored again (add/remember/import
--                          of a text its scope already has, which stores no copy);
--                          then the time of the latest such repeat (ms since the
--                          epoch). created_at stays the time the fact was first noted.
ALTER TABLE episodes ADD COLUMN confirmed_at INTEGER
  CHECK (confirmed_at IS NULL OR typeof(confirmed_at) = 'integer');
