-- 0001: the memory store — episodes, their full-text index, the pool index and
-- the database's own facts (embedding model and dimension).
-- Times are integer milliseconds since the Unix epoch.

CREATE TABLE rrf_meta (
  key   TEXT PRIMARY KEY,
  value ANY
) WITHOUT ROWID;

CREATE TABLE episodes (
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
  metadata     TEXT    CHECK (metadata IS NULL OR json_valid(metadata))
);

-- The recall statement's vector pool: the most recently accessed episodes that
-- have an embedding.
CREATE INDEX idx_episodes_accessed_at
  ON episodes(accessed_at DESC) WHERE embedding IS NOT NULL;

-- A wrong-sized embedding never lands, whoever writes it.
CREATE TRIGGER episodes_embedding_dim_insert
BEFORE INSERT ON episodes
WHEN NEW.embedding IS NOT NULL
 AND (typeof(NEW.embedding) != 'blob'
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
      OR length(NEW.embedding) != 4 * coalesce(
           (SELECT value FROM rrf_meta WHERE key = 'embedding_dim'),
           length(NEW.embedding) / 4))
BEGIN
  SELECT RAISE(ABORT, 'episodes.embedding must be a float32 blob of rrf_meta.embedding_dim values');
END;

-- Full-text index over content (external content: the text lives once, in episodes).
CREATE VIRTUAL TABLE episodes_fts USING fts5(
  content,
  content = 'episodes',
  content_rowid = 'rowid',
  tokenize = 'porter unicode61'
);

CREATE TRIGGER episodes_fts_insert AFTER INSERT ON episodes BEGIN
  INSERT INTO episodes_fts(rowid, content) VALUES (NEW.rowid, NEW.content);
END;

CREATE TRIGGER episodes_fts_delete AFTER DELETE ON episodes BEGIN
  INSERT INTO episodes_fts(episodes_fts, rowid, content) VALUES ('delete', OLD.rowid, OLD.content);
END;

CREATE TRIGGER episodes_fts_update AFTER UPDATE OF content ON episodes BEGIN
  INSERT INTO episodes_fts(episodes_fts, rowid, content) VALUES ('delete', OLD.rowid, OLD.content);
  INSERT INTO episodes_fts(rowid, content) VALUES (NEW.rowid, NEW.content);
END;
