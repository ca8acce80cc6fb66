-- The full-corpus vector index for the 'knn' pool: a sqlite-vec vec0 table with
-- the cosine metric, filled from episodes and kept in sync by triggers. Created
-- by Store.enable_knn() (`sqlite-rrf knn DB`), which puts the database's dimension
-- in place of {dim}. Every connection that writes episodes afterwards must load
-- sqlite-vec (the triggers write to the vec0 table).
CREATE VIRTUAL TABLE episodes_vec USING vec0(
  embedding float[{dim}] distance_metric=cosine
);

INSERT INTO episodes_vec(rowid, embedding)
  SELECT rowid, embedding FROM episodes WHERE embedding IS NOT NULL;

CREATE TRIGGER episodes_vec_insert AFTER INSERT ON episodes
WHEN NEW.embedding IS NOT NULL BEGIN
  INSERT INTO episodes_vec(rowid, embedding) VALUES (NEW.rowid, NEW.embedding);
END;

CREATE TRIGGER episodes_vec_delete AFTER DELETE ON episodes BEGIN
  DELETE FROM episodes_vec WHERE rowid = OLD.rowid;
END;

CREATE TRIGGER episodes_vec_update AFTER UPDATE OF embedding ON episodes BEGIN
  DELETE FROM episodes_vec WHERE rowid = OLD.rowid;
  INSERT INTO episodes_vec(rowid, embedding)
    SELECT NEW.rowid, NEW.embedding WHERE NEW.embedding IS NOT NULL;
END;

INSERT OR REPLACE INTO rrf_meta(key, value) VALUES ('knn', 'episodes_vec');
