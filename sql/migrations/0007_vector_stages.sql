-- 0007: narrow tables for the vector stages, so that finding the nearest vectors
-- reads vectors only, not the episodes' text (issue 13).
--
--   episodes_vectors(rowid, embedding)  a copy of every non-NULL episodes.embedding,
--                                       at the episode's rowid: the exact pool 'all'
--                                       scans it with rrf_topk(vec_cosine(...)).
--   episodes_codes(rowid, code)         one row per row of episodes_vectors; code is
--                                       the 1-bit sign code vec_signbits(embedding)
--                                       (48 bytes for 384 dimensions), or NULL while
--                                       it is pending: the pool 'quantized' scans the
--                                       codes by Hamming distance, and scores the
--                                       pending rows exactly, so a pending code costs
--                                       time, never a row.
--
-- The triggers are plain SQL, so every client's writes keep both tables exact,
-- with or without the extension loaded (the rule of migration 0004): a row of
-- episodes_vectors exists at rowid R exactly when episodes has a row at R with an
-- embedding, and holds that embedding; a new or changed embedding makes its code
-- pending. Computing a code needs the extension (or numpy): sqlite-rrf's Store
-- fills the pending codes in its write transactions; a client with the extension
-- loaded can run, at any time,
--   UPDATE episodes_codes SET code = (SELECT vec_signbits(v.embedding)
--     FROM episodes_vectors AS v WHERE v.rowid = episodes_codes.rowid)
--   WHERE code IS NULL;
-- The triggers delete before they insert (no OR REPLACE): a trigger's conflict
-- clause gives way to the outer statement's (an outer OR IGNORE would skip it).
CREATE TABLE episodes_vectors (
  rowid     INTEGER PRIMARY KEY,
  embedding BLOB NOT NULL
);

CREATE TABLE episodes_codes (
  rowid INTEGER PRIMARY KEY,
  code  BLOB
);

-- the pending codes: a seek, not a scan
CREATE INDEX idx_episodes_codes_pending ON episodes_codes(code) WHERE code IS NULL;

CREATE TRIGGER episodes_vectors_insert AFTER INSERT ON episodes
WHEN NEW.embedding IS NOT NULL BEGIN
  DELETE FROM episodes_vectors WHERE rowid = NEW.rowid;
  DELETE FROM episodes_codes WHERE rowid = NEW.rowid;
  INSERT INTO episodes_vectors(rowid, embedding) VALUES (NEW.rowid, NEW.embedding);
  INSERT INTO episodes_codes(rowid, code) VALUES (NEW.rowid, NULL);
END;

-- a new vector, or the row moved to another rowid (perhaps over a displaced row)
CREATE TRIGGER episodes_vectors_update AFTER UPDATE ON episodes
WHEN NEW.rowid IS NOT OLD.rowid OR NEW.embedding IS NOT OLD.embedding BEGIN
  DELETE FROM episodes_vectors WHERE rowid = OLD.rowid;
  DELETE FROM episodes_vectors WHERE rowid = NEW.rowid;
  DELETE FROM episodes_codes WHERE rowid = OLD.rowid;
  DELETE FROM episodes_codes WHERE rowid = NEW.rowid;
  INSERT INTO episodes_vectors(rowid, embedding)
    SELECT NEW.rowid, NEW.embedding WHERE NEW.embedding IS NOT NULL;
  INSERT INTO episodes_codes(rowid, code)
    SELECT NEW.rowid, NULL WHERE NEW.embedding IS NOT NULL;
END;

CREATE TRIGGER episodes_vectors_delete AFTER DELETE ON episodes BEGIN
  DELETE FROM episodes_vectors WHERE rowid = OLD.rowid;
  DELETE FROM episodes_codes WHERE rowid = OLD.rowid;
END;

-- a row a REPLACE removed (migration 0004's episodes_displaced): its vector goes
-- unless its rowid now holds a row with a vector (that one is the insert or update
-- trigger's)
CREATE TRIGGER episodes_vectors_displaced AFTER UPDATE OF gone ON episodes_displaced
WHEN NOT EXISTS (SELECT 1 FROM episodes WHERE rowid = OLD.rowid AND embedding IS NOT NULL)
BEGIN
  DELETE FROM episodes_vectors WHERE rowid = OLD.rowid;
  DELETE FROM episodes_codes WHERE rowid = OLD.rowid;
END;

INSERT INTO episodes_vectors(rowid, embedding)
  SELECT rowid, embedding FROM episodes WHERE embedding IS NOT NULL;

INSERT INTO episodes_codes(rowid, code)
  SELECT rowid, NULL FROM episodes_vectors;
