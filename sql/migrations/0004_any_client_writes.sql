-- 0004: every write keeps the indexes right, whoever makes it (docs/schema.md).
--
-- Before this migration the FTS5 index followed INSERT, UPDATE OF content and
-- DELETE only. A REPLACE (INSERT OR REPLACE, REPLACE INTO, UPDATE OR REPLACE) that
-- removes a conflicting row fires no delete trigger unless the connection has
-- PRAGMA recursive_triggers ON, so the old text stayed in the index; an UPDATE of
-- the rowid moved the row away from its index entry; and before rrf_meta held
-- 'embedding_dim' the dimension check compared a vector with itself. The CHECK
-- on metadata called json_valid(), which SQLite 3.40 does not mark innocuous, so
-- with PRAGMA trusted_schema=OFF that SQLite could not even read the table.
--
-- This migration
--  1. rebuilds episodes with the same columns, rowids and values, without the
--     json_valid() CHECK (only innocuous built-in functions remain in the schema);
--  2. replaces the triggers: a write that may displace other rows (INSERT, or an
--     UPDATE of rowid or id) first notes those rows in episodes_displaced; after
--     the write, the ones it really removed are taken out of the index (the
--     triggers on episodes_displaced; sql/knn.sql adds the vec0 one);
--  3. fixes the embedding dimension with the first vector written;
--  4. rebuilds the FTS5 index from episodes, so drift already there is gone.
-- A database with the knn index (episodes_vec) also gets
-- knn/0004_any_client_writes.sql in the same transaction: the vec0 triggers
-- and a resync of episodes_vec.

-- The rebuild would drop indexes and triggers on episodes that are not
-- sqlite-rrf's own; refuse (nothing changes) rather than lose them. Views on
-- episodes are kept (legacy_alter_table below).
CREATE TEMP TABLE rrf_migration_0004_check (
  n INTEGER CONSTRAINT "episodes has indexes or triggers of your own (see sqlite_master); migration 0004 rebuilds the table and would drop them: drop them, open the database with sqlite-rrf again, then create them again"
    CHECK (n = 0)
);
INSERT INTO rrf_migration_0004_check
  SELECT count(*) FROM sqlite_master
   WHERE tbl_name = 'episodes' AND type IN ('index', 'trigger')
     AND name NOT IN ('sqlite_autoindex_episodes_1', 'idx_episodes_accessed_at',
                      'episodes_embedding_dim_insert', 'episodes_embedding_dim_update',
                      'episodes_fts_insert', 'episodes_fts_delete', 'episodes_fts_update',
                      'episodes_vec_insert', 'episodes_vec_delete', 'episodes_vec_update');
DROP TABLE rrf_migration_0004_check;

-- The old triggers on episodes (the knn ones too) go with the old table; drop
-- them first so that nothing fires while the rows move.
DROP TRIGGER IF EXISTS episodes_embedding_dim_insert;
DROP TRIGGER IF EXISTS episodes_embedding_dim_update;
DROP TRIGGER IF EXISTS episodes_fts_insert;
DROP TRIGGER IF EXISTS episodes_fts_delete;
DROP TRIGGER IF EXISTS episodes_fts_update;
DROP TRIGGER IF EXISTS episodes_vec_insert;
DROP TRIGGER IF EXISTS episodes_vec_delete;
DROP TRIGGER IF EXISTS episodes_vec_update;

-- 1. The table: 0001's columns and 0002's, in their order. metadata is JSON
-- text written by the Store; the schema checks only that it is text.
CREATE TABLE episodes_0004 (
  rowid        INTEGER PRIMARY KEY,
  id           TEXT    NOT NULL UNIQUE,
  content      TEXT    NOT NULL,
  embedding    BLOB,   -- little-endian float32, rrf_meta.embedding_dim values
  created_at   INTEGER NOT NULL
               DEFAULT (CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)),
  accessed_at  INTEGER NOT NULL
               DEFAULT (CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)),
  access_count INTEGER NOT NULL DEFAULT 0 CHECK (access_count >= 0),
  importance   TEXT    NOT NULL DEFAULT 'normal'
               CHECK (importance IN ('low', 'normal', 'high')),
  kind         TEXT,
  metadata     TEXT    CHECK (metadata IS NULL OR typeof(metadata) = 'text'),
  strength       REAL CHECK (strength       IS NULL OR strength       >= 0),
  depth          REAL CHECK (depth          IS NULL OR depth          >= 0),
  session_spread REAL CHECK (session_spread IS NULL OR session_spread >= 0),
  stability      REAL CHECK (stability      IS NULL OR stability      >= 0)
);

INSERT INTO episodes_0004(rowid, id, content, embedding, created_at, accessed_at,
                          access_count, importance, kind, metadata,
                          strength, depth, session_spread, stability)
  SELECT rowid, id, content, embedding, created_at, accessed_at,
         access_count, importance, kind, metadata,
         strength, depth, session_spread, stability
  FROM episodes ORDER BY rowid;

DROP TABLE episodes;
-- legacy: rename the table only, without re-checking views, which may name episodes
PRAGMA legacy_alter_table = ON;
ALTER TABLE episodes_0004 RENAME TO episodes;
PRAGMA legacy_alter_table = OFF;

-- The recall statement's vector pool (as in 0001).
CREATE INDEX idx_episodes_accessed_at
  ON episodes(accessed_at DESC) WHERE embedding IS NOT NULL;

-- 2. The rows a write may displace. Normally empty: a BEFORE trigger fills it
-- with the rows that share the new row's rowid or id, the AFTER trigger marks
-- those the write removed (gone = 1, which the triggers below act on) and
-- empties it. A write that ends in IGNORE or FAIL leaves copies of live rows
-- here; the next write's BEFORE trigger clears them, and a DELETE drops its row.
CREATE TABLE episodes_displaced (
  rowid   INTEGER PRIMARY KEY,  -- the displaced row's rowid
  content,                      -- its content, exactly as FTS5 indexed it
  gone    INTEGER NOT NULL DEFAULT 0
);

CREATE TRIGGER episodes_fts_displaced
AFTER UPDATE OF gone ON episodes_displaced BEGIN
  INSERT INTO episodes_fts(episodes_fts, rowid, content)
    VALUES ('delete', OLD.rowid, OLD.content);
END;

CREATE TRIGGER episodes_displace_insert BEFORE INSERT ON episodes BEGIN
  DELETE FROM episodes_displaced;
  -- NEW.rowid is -1 when the statement gives none: then only id can collide
  INSERT INTO episodes_displaced(rowid, content)
    SELECT rowid, content FROM episodes WHERE rowid = NEW.rowid OR id = NEW.id;
END;

CREATE TRIGGER episodes_fts_insert AFTER INSERT ON episodes BEGIN
  -- a displaced row is gone if its rowid is now the new row's or empty
  UPDATE episodes_displaced SET gone = 1
   WHERE rowid = NEW.rowid
      OR NOT EXISTS (SELECT 1 FROM episodes AS e WHERE e.rowid = episodes_displaced.rowid);
  DELETE FROM episodes_displaced;
  INSERT INTO episodes_fts(rowid, content) VALUES (NEW.rowid, NEW.content);
END;

-- An UPDATE can displace rows only through a new rowid or id (UPDATE OR REPLACE),
-- and needs the index only when rowid, id or content change. The BEFORE and
-- AFTER triggers share one WHEN, so an AFTER trigger only reads what its own
-- BEFORE trigger noted.
CREATE TRIGGER episodes_displace_update BEFORE UPDATE ON episodes
WHEN NEW.rowid IS NOT OLD.rowid OR NEW.id IS NOT OLD.id OR NEW.content IS NOT OLD.content
BEGIN
  DELETE FROM episodes_displaced;
  INSERT INTO episodes_displaced(rowid, content)
    SELECT rowid, content FROM episodes
     WHERE (rowid = NEW.rowid OR id = NEW.id) AND rowid != OLD.rowid;
END;

CREATE TRIGGER episodes_fts_update AFTER UPDATE ON episodes
WHEN NEW.rowid IS NOT OLD.rowid OR NEW.id IS NOT OLD.id OR NEW.content IS NOT OLD.content
BEGIN
  UPDATE episodes_displaced SET gone = 1
   WHERE rowid = NEW.rowid
      OR NOT EXISTS (SELECT 1 FROM episodes AS e WHERE e.rowid = episodes_displaced.rowid);
  DELETE FROM episodes_displaced;
  INSERT INTO episodes_fts(episodes_fts, rowid, content)
    SELECT 'delete', OLD.rowid, OLD.content
     WHERE NEW.rowid IS NOT OLD.rowid OR NEW.content IS NOT OLD.content;
  INSERT INTO episodes_fts(rowid, content)
    SELECT NEW.rowid, NEW.content
     WHERE NEW.rowid IS NOT OLD.rowid OR NEW.content IS NOT OLD.content;
END;

-- A DELETE, and with recursive_triggers ON also the rows a REPLACE removes (then
-- the row is no longer displaced: the index has already let it go).
CREATE TRIGGER episodes_fts_delete AFTER DELETE ON episodes BEGIN
  INSERT INTO episodes_fts(episodes_fts, rowid, content)
    VALUES ('delete', OLD.rowid, OLD.content);
  DELETE FROM episodes_displaced WHERE rowid = OLD.rowid;
END;

-- 3. A vector is a non-empty float32 BLOB of rrf_meta.embedding_dim values; the
-- first vector written fixes the dimension when rrf_meta has none.
CREATE TRIGGER episodes_embedding_dim_insert
BEFORE INSERT ON episodes
WHEN NEW.embedding IS NOT NULL
 AND (typeof(NEW.embedding) != 'blob'
      OR length(NEW.embedding) = 0
      OR length(NEW.embedding) % 4 != 0
      OR length(NEW.embedding) != 4 * coalesce(
           (SELECT value FROM rrf_meta WHERE key = 'embedding_dim'),
           length(NEW.embedding) / 4))
BEGIN
  SELECT RAISE(ABORT, 'episodes.embedding must be a float32 blob of rrf_meta.embedding_dim values');
END;

CREATE TRIGGER episodes_embedding_dim_update
BEFORE UPDATE OF embedding ON episodes
WHEN NEW.embedding IS NOT NULL
 AND (typeof(NEW.embedding) != 'blob'
      OR length(NEW.embedding) = 0
      OR length(NEW.embedding) % 4 != 0
      OR length(NEW.embedding) != 4 * coalesce(
           (SELECT value FROM rrf_meta WHERE key = 'embedding_dim'),
           length(NEW.embedding) / 4))
BEGIN
  SELECT RAISE(ABORT, 'episodes.embedding must be a float32 blob of rrf_meta.embedding_dim values');
END;

-- No conflict is possible here (NOT EXISTS), so the writer's OR clause, which
-- SQLite applies to the statements of its triggers, changes nothing.
CREATE TRIGGER episodes_embedding_dim_fix_insert
AFTER INSERT ON episodes
WHEN NEW.embedding IS NOT NULL
 AND NOT EXISTS (SELECT 1 FROM rrf_meta WHERE key = 'embedding_dim')
BEGIN
  INSERT INTO rrf_meta(key, value) VALUES ('embedding_dim', length(NEW.embedding) / 4);
END;

CREATE TRIGGER episodes_embedding_dim_fix_update
AFTER UPDATE OF embedding ON episodes
WHEN NEW.embedding IS NOT NULL
 AND NOT EXISTS (SELECT 1 FROM rrf_meta WHERE key = 'embedding_dim')
BEGIN
  INSERT INTO rrf_meta(key, value) VALUES ('embedding_dim', length(NEW.embedding) / 4);
END;

-- A database whose vectors already disagree keeps them (the recall reports the
-- mismatch); it gets a dimension only if all its vectors agree on one.
INSERT INTO rrf_meta(key, value)
  SELECT 'embedding_dim', lo / 4
  FROM (SELECT min(length(embedding)) AS lo, max(length(embedding)) AS hi
        FROM episodes WHERE embedding IS NOT NULL)
  WHERE lo = hi AND lo > 0 AND lo % 4 = 0
    AND NOT EXISTS (SELECT 1 FROM rrf_meta WHERE key = 'embedding_dim');

-- 4. The index from the table: any drift a past REPLACE or rowid change left is gone.
INSERT INTO episodes_fts(episodes_fts) VALUES ('rebuild');
