-- The full-corpus vector index for the 'knn' pool: a sqlite-vec vec0 table with
-- the cosine metric, filled from episodes and kept in sync by triggers. Created
-- by Store.enable_knn() (`sqlite-rrf knn DB`), which puts the database's dimension
-- in place of {dim}. Every connection that writes episodes afterwards must load
-- sqlite-vec (the triggers write to the vec0 table); one that has not is refused
-- its write whole ("no such module: vec0").
--
-- The triggers keep one rule: episodes_vec has a row at rowid R exactly when
-- episodes has a row at R with an embedding, and it holds that embedding. They
-- follow every write any client can make, with recursive_triggers ON or OFF:
-- a REPLACE's displaced rows arrive through episodes_displaced (migration 0004),
-- and each trigger gives the same result whichever of them SQLite fires first.
-- Migration 0004's knn part (migrations/knn/0004_any_client_writes.sql) installs the same
-- triggers in a database that had the index before it.
CREATE VIRTUAL TABLE episodes_vec USING vec0(
  embedding float[{dim}] distance_metric=cosine
);

INSERT INTO episodes_vec(rowid, embedding)
  SELECT rowid, embedding FROM episodes WHERE embedding IS NOT NULL;

-- a new row's vector; a REPLACE that reused the rowid left the old one there
CREATE TRIGGER episodes_vec_insert AFTER INSERT ON episodes
WHEN NEW.embedding IS NOT NULL BEGIN
  DELETE FROM episodes_vec WHERE rowid = NEW.rowid;
  INSERT INTO episodes_vec(rowid, embedding) VALUES (NEW.rowid, NEW.embedding);
END;

-- a new vector, or the row moved to another rowid (perhaps over a displaced row)
CREATE TRIGGER episodes_vec_update AFTER UPDATE ON episodes
WHEN NEW.rowid IS NOT OLD.rowid OR NEW.embedding IS NOT OLD.embedding BEGIN
  DELETE FROM episodes_vec WHERE rowid = OLD.rowid;
  DELETE FROM episodes_vec WHERE rowid = NEW.rowid;
  INSERT INTO episodes_vec(rowid, embedding)
    SELECT NEW.rowid, NEW.embedding WHERE NEW.embedding IS NOT NULL;
END;

CREATE TRIGGER episodes_vec_delete AFTER DELETE ON episodes BEGIN
  DELETE FROM episodes_vec WHERE rowid = OLD.rowid;
END;

-- a row a REPLACE removed: its vector goes unless its rowid now holds a row with
-- a vector (that one is episodes_vec_insert's or episodes_vec_update's)
CREATE TRIGGER episodes_vec_displaced AFTER UPDATE OF gone ON episodes_displaced
WHEN NOT EXISTS (SELECT 1 FROM episodes WHERE rowid = OLD.rowid AND embedding IS NOT NULL)
BEGIN
  DELETE FROM episodes_vec WHERE rowid = OLD.rowid;
END;

INSERT OR REPLACE INTO rrf_meta(key, value) VALUES ('knn', 'episodes_vec');
