-- 0010: the key of "the same text", so that remembering a text twice in one scope
-- keeps one episode (issue 20; docs/schema.md, "Duplicates").
--
--   episodes.content_key  the first 16 bytes of the SHA-256 of the content's normal
--                         form (Unicode NFKC, case folded, white space collapsed to
--                         single spaces, the ends stripped: sqlite_rrf.dedupe), or
--                         NULL while it is pending.
--
-- A normal form needs Unicode tables that plain SQL has not, so the key is written
-- by sqlite-rrf's Store: with the row when the Store writes it, and for the rows
-- another client wrote (the sqlite3 shell, without the extension) at the start of
-- the Store's next write transaction, before it looks for a duplicate. Plain SQL
-- keeps the key from going stale: a client that changes content without writing a
-- new key makes it pending again (the trigger below). Every key is pending after
-- this migration; the Store's first write fills them.
ALTER TABLE episodes ADD COLUMN content_key BLOB
  CHECK (content_key IS NULL OR (typeof(content_key) = 'blob' AND length(content_key) = 16));

-- the episode of a scope that says a text (one seek), and the pending keys
CREATE INDEX idx_episodes_content_key ON episodes(content_key, scope);

CREATE TRIGGER episodes_content_key_stale AFTER UPDATE OF content ON episodes
WHEN NEW.content IS NOT OLD.content AND NEW.content_key IS NOT NULL
 AND NEW.content_key IS OLD.content_key
BEGIN
  UPDATE episodes SET content_key = NULL WHERE rowid = NEW.rowid;
END;
