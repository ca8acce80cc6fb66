-- 0002: optional lifecycle signals for the 'decay' fusion profile. Each is a
-- multiplier on the fused score; NULL (the default) means 1, neutral.
--   strength        how firmly the memory was consolidated
--   depth           how deeply it was processed (e.g. discussed, not just seen)
--   session_spread  across how many sessions it recurred, as a factor
--   stability       how unlikely it is to be superseded
ALTER TABLE episodes ADD COLUMN strength       REAL CHECK (strength       IS NULL OR strength       >= 0);
ALTER TABLE episodes ADD COLUMN depth          REAL CHECK (depth          IS NULL OR depth          >= 0);
ALTER TABLE episodes ADD COLUMN session_spread REAL CHECK (session_spread IS NULL OR session_spread >= 0);
ALTER TABLE episodes ADD COLUMN stability      REAL CHECK (stability      IS NULL OR stability      >= 0);
