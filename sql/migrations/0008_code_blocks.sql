-- 0008: the sign codes packed in blocks, so that the pool 'quantized' steps one
-- SQLite row per block of codes, not one per code (issue 13).
--
--   episodes_code_blocks(block, n, rowids, codes)
--       up to 256 codes of episodes_codes: rowids holds their n rowids as
--       little-endian int64 (8n bytes), codes their n codes end to end, in the same
--       order; rrf_hamming_topk(k, qcode, rowids, codes) scans them.
--   episodes_codes.block
--       the block that holds the row's code, or NULL: the code is "loose" (or
--       pending), and the pool scans it row by row.
--
-- The rule: a block holds exactly the current codes of the rows whose block is its
-- number. sqlite-rrf's Store packs loose codes into new blocks (in its write
-- transactions); any client's write keeps the rule through the plain-SQL triggers
-- below (no extension needed, migration 0004's rule): deleting a row of a block,
-- changing its code or rowid, or replacing it (INSERT OR REPLACE at its rowid)
-- dissolves the whole block: the blocks row goes and its rows become loose.
-- Migration 0007's triggers delete a code row and insert a pending one, so a new or
-- changed vector dissolves the block its old code was in.
-- The triggers' statements can meet no constraint, so an outer statement's
-- conflict clause (OR IGNORE, OR REPLACE, ...) cannot change what they do.
CREATE TABLE episodes_code_blocks (
  block  INTEGER PRIMARY KEY,
  n      INTEGER NOT NULL,
  rowids BLOB NOT NULL,
  codes  BLOB NOT NULL
);

ALTER TABLE episodes_codes ADD COLUMN block INTEGER;

-- the rows of a block: dissolving one is a seek
CREATE INDEX idx_episodes_codes_block ON episodes_codes(block) WHERE block IS NOT NULL;
-- the loose codes (with the code: the row-level scan reads this index only)
CREATE INDEX idx_episodes_codes_loose ON episodes_codes(code)
  WHERE block IS NULL AND code IS NOT NULL;

CREATE TRIGGER episodes_codes_block_delete AFTER DELETE ON episodes_codes
WHEN OLD.block IS NOT NULL BEGIN
  DELETE FROM episodes_code_blocks WHERE block = OLD.block;
  UPDATE episodes_codes SET block = NULL WHERE block = OLD.block;
END;

CREATE TRIGGER episodes_codes_block_update AFTER UPDATE OF code, rowid ON episodes_codes
WHEN OLD.block IS NOT NULL
  AND (NEW.code IS NOT OLD.code OR NEW.rowid IS NOT OLD.rowid) BEGIN
  DELETE FROM episodes_code_blocks WHERE block = OLD.block;
  UPDATE episodes_codes SET block = NULL WHERE block = OLD.block;
END;

-- a row replaced in place (an INSERT OR REPLACE at its rowid deletes it without
-- firing the delete trigger when recursive_triggers is OFF): its block goes first
CREATE TRIGGER episodes_codes_block_replace BEFORE INSERT ON episodes_codes
WHEN EXISTS (SELECT 1 FROM episodes_codes WHERE rowid = NEW.rowid AND block IS NOT NULL) BEGIN
  DELETE FROM episodes_code_blocks
    WHERE block = (SELECT block FROM episodes_codes WHERE rowid = NEW.rowid);
  UPDATE episodes_codes SET block = NULL
    WHERE block = (SELECT block FROM episodes_codes WHERE rowid = NEW.rowid);
END;

-- a row written with a block number (only the Store packs): it holds no block's code
CREATE TRIGGER episodes_codes_block_insert AFTER INSERT ON episodes_codes
WHEN NEW.block IS NOT NULL BEGIN
  DELETE FROM episodes_code_blocks WHERE block = NEW.block;
  UPDATE episodes_codes SET block = NULL WHERE block = NEW.block;
END;
