-- 0004, knn part: applied with ../0004_any_client_writes.sql, in its transaction,
-- when the database has the knn index (episodes_vec), so sqlite-vec must be
-- loaded (a Store loads it before migrating). The old vec0 triggers went with
-- the old episodes table; these are sql/knn.sql's (see there), and episodes_vec
-- is then brought in line with episodes: vectors of rows that are gone or whose
-- embedding differs are deleted, missing ones inserted.
CREATE TRIGGER episodes_vec_insert AFTER INSERT ON episodes
WHEN NEW.embedding IS NOT NULL BEGIN
  DELETE FROM episodes_vec WHERE rowid = NEW.rowid;
  INSERT INTO episodes_vec(rowid, embedding) VALUES (NEW.rowid, NEW.embedding);
END;

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

CREATE TRIGGER episodes_vec_displaced AFTER UPDATE OF gone ON episodes_displaced
WHEN NOT EXISTS (SELECT 1 FROM episodes WHERE rowid = OLD.rowid AND embedding IS NOT NULL)
BEGIN
  DELETE FROM episodes_vec WHERE rowid = OLD.rowid;
END;

DELETE FROM episodes_vec WHERE rowid IN (
  SELECT v.rowid FROM episodes_vec AS v LEFT JOIN episodes AS e ON e.rowid = v.rowid
   WHERE e.embedding IS NULL OR e.embedding IS NOT v.embedding);

INSERT INTO episodes_vec(rowid, embedding)
  SELECT e.rowid, e.embedding FROM episodes AS e
   WHERE e.embedding IS NOT NULL
     AND NOT EXISTS (SELECT 1 FROM episodes_vec AS v WHERE v.rowid = e.rowid);
