-- 0009: the derived tables (episodes_vectors, episodes_codes, episodes_code_blocks)
-- follow the writes of any client made to them directly, not only to episodes
-- (issue 19). Migrations 0007 and 0008 kept them right under every write to
-- episodes; a client writing to the derived tables themselves could still hide
-- episodes from the vector pools (DELETE FROM episodes_code_blocks left its rows
-- naming a block that no longer existed: in no block and not loose, so never
-- scanned), leave stale duplicates (UPDATE episodes_codes SET block = NULL left the
-- block holding codes that were now loose as well), or write a code the pool could
-- not read. The triggers below are plain SQL, as every trigger of the schema.
--
-- The rules they keep (docs/schema.md, "What the derived tables keep"):
--  * episodes_vectors: a row of episodes with an embedding keeps its vector: a
--    DELETE of it is ignored (the row stays), and so is an INSERT or UPDATE that
--    would make it anything but its episode's embedding. An INSERT at a rowid that
--    has a vector sets it to the inserted value (migration 0007's triggers delete
--    and insert: the delete being ignored, the insert becomes an update).
--  * episodes_codes: a row whose vector exists keeps its code row: a DELETE of it is
--    ignored; an INSERT at a rowid that has a code row makes that code pending
--    (nothing else of the insert lands); an INSERT without a vector is ignored. A
--    code that cannot be its vector's sign code (not a BLOB, the wrong length, or a
--    code for a zero vector, whose cosine is undefined) becomes pending at once.
--  * episodes_code_blocks: a block goes whole. Deleting a block, changing a block
--    row, clearing or changing a code row's block, or naming a block the row is not
--    packed into makes every row of the block loose. The Store packs through an
--    "open" block (n = 0, empty rowids and codes): it inserts one, its rows name it,
--    then it fills it in one UPDATE; an open block may be named and filled, a block
--    inserted with codes is dissolved at once.
--
-- Then the drift a client could leave before this migration is repaired: codes the
-- pool could not read become pending, blocks whose row count is not their n (or
-- that are malformed) are dissolved, and rows naming a block that does not exist
-- become loose. (Vectors missing or stale are `sqlite-rrf check DB --repair`'s: that
-- needs a scan of every episode, which a migration should not impose.)

-- ---- repair first, with 0008's triggers (the new ones would repair it as well,
-- ---- row by row)

UPDATE episodes_codes SET code = NULL
 WHERE code IS NOT NULL
   AND (typeof(code) != 'blob'
        OR length(code) != (SELECT (length(v.embedding) / 4 + 7) / 8
                              FROM episodes_vectors AS v WHERE v.rowid = episodes_codes.rowid)
        OR (code = zeroblob(length(code))
            AND EXISTS (SELECT 1 FROM episodes_vectors AS v
                         WHERE v.rowid = episodes_codes.rowid
                           AND v.embedding = zeroblob(length(v.embedding)))));

CREATE TEMP TABLE rrf_migration_0009_bad(block INTEGER PRIMARY KEY);
INSERT INTO rrf_migration_0009_bad(block)
  SELECT k.block FROM episodes_code_blocks AS k
   WHERE k.n IS NOT (SELECT count(*) FROM episodes_codes AS c WHERE c.block = k.block)
      OR typeof(k.rowids) != 'blob' OR typeof(k.codes) != 'blob'
      OR length(k.rowids) != 8 * k.n OR k.n < 1 OR length(k.codes) % k.n != 0;
DELETE FROM episodes_code_blocks WHERE block IN (SELECT block FROM temp.rrf_migration_0009_bad);
UPDATE episodes_codes SET block = NULL
 WHERE block IN (SELECT block FROM temp.rrf_migration_0009_bad);
DROP TABLE temp.rrf_migration_0009_bad;
UPDATE episodes_codes SET block = NULL
 WHERE block IS NOT NULL
   AND NOT EXISTS (SELECT 1 FROM episodes_code_blocks AS k WHERE k.block = episodes_codes.block);

-- ---- episodes_vectors

CREATE TRIGGER episodes_vectors_keep BEFORE DELETE ON episodes_vectors
WHEN EXISTS (SELECT 1 FROM episodes WHERE rowid = OLD.rowid AND embedding IS NOT NULL) BEGIN
  SELECT RAISE(IGNORE);
END;

CREATE TRIGGER episodes_vectors_reinsert BEFORE INSERT ON episodes_vectors
WHEN EXISTS (SELECT 1 FROM episodes_vectors WHERE rowid = NEW.rowid)
  OR NOT EXISTS (SELECT 1 FROM episodes WHERE rowid = NEW.rowid AND embedding IS NEW.embedding)
BEGIN
  UPDATE episodes_vectors SET embedding = NEW.embedding
   WHERE rowid = NEW.rowid AND embedding IS NOT NEW.embedding
     AND EXISTS (SELECT 1 FROM episodes WHERE rowid = NEW.rowid AND embedding IS NEW.embedding);
  SELECT RAISE(IGNORE);
END;

CREATE TRIGGER episodes_vectors_guard BEFORE UPDATE ON episodes_vectors
WHEN NOT EXISTS (SELECT 1 FROM episodes WHERE rowid = NEW.rowid AND embedding IS NEW.embedding)
BEGIN
  SELECT RAISE(IGNORE);
END;

CREATE TRIGGER episodes_vectors_changed AFTER UPDATE ON episodes_vectors
WHEN NEW.embedding IS NOT OLD.embedding OR NEW.rowid IS NOT OLD.rowid BEGIN
  UPDATE episodes_codes SET code = NULL WHERE rowid IN (OLD.rowid, NEW.rowid) AND code IS NOT NULL;
END;

-- ---- episodes_codes

CREATE TRIGGER episodes_codes_keep BEFORE DELETE ON episodes_codes
WHEN EXISTS (SELECT 1 FROM episodes_vectors WHERE rowid = OLD.rowid) BEGIN
  SELECT RAISE(IGNORE);
END;

CREATE TRIGGER episodes_codes_reinsert BEFORE INSERT ON episodes_codes
WHEN EXISTS (SELECT 1 FROM episodes_codes WHERE rowid = NEW.rowid)
  OR NOT EXISTS (SELECT 1 FROM episodes_vectors WHERE rowid = NEW.rowid)
BEGIN
  UPDATE episodes_codes SET code = NULL WHERE rowid = NEW.rowid AND code IS NOT NULL;
  SELECT RAISE(IGNORE);
END;

CREATE TRIGGER episodes_codes_check_insert AFTER INSERT ON episodes_codes
WHEN NEW.code IS NOT NULL
  AND (typeof(NEW.code) != 'blob'
       OR length(NEW.code) IS NOT (SELECT (length(v.embedding) / 4 + 7) / 8
                                     FROM episodes_vectors AS v WHERE v.rowid = NEW.rowid)
       OR EXISTS (SELECT 1 FROM episodes_vectors AS v WHERE v.rowid = NEW.rowid
                     AND v.embedding = zeroblob(length(v.embedding))))
BEGIN
  UPDATE episodes_codes SET code = NULL WHERE rowid = NEW.rowid;
END;

CREATE TRIGGER episodes_codes_check_update AFTER UPDATE OF code ON episodes_codes
WHEN NEW.code IS NOT NULL
  AND (typeof(NEW.code) != 'blob'
       OR length(NEW.code) IS NOT (SELECT (length(v.embedding) / 4 + 7) / 8
                                     FROM episodes_vectors AS v WHERE v.rowid = NEW.rowid)
       OR EXISTS (SELECT 1 FROM episodes_vectors AS v WHERE v.rowid = NEW.rowid
                     AND v.embedding = zeroblob(length(v.embedding))))
BEGIN
  UPDATE episodes_codes SET code = NULL WHERE rowid = NEW.rowid;
END;

-- a row's block cleared or changed: the block it was in goes whole (the EXISTS
-- keeps a dissolve's own updates from dissolving again)
CREATE TRIGGER episodes_codes_block_clear AFTER UPDATE OF block ON episodes_codes
WHEN OLD.block IS NOT NULL AND NEW.block IS NOT OLD.block
  AND EXISTS (SELECT 1 FROM episodes_code_blocks WHERE block = OLD.block) BEGIN
  DELETE FROM episodes_code_blocks WHERE block = OLD.block;
  UPDATE episodes_codes SET block = NULL WHERE block = OLD.block;
END;

-- a row naming a block: only an open block may be named (the Store's packing), by a
-- computed code; anything else dissolves the named block, this row included
CREATE TRIGGER episodes_codes_block_claim AFTER UPDATE OF block ON episodes_codes
WHEN NEW.block IS NOT NULL AND NEW.block IS NOT OLD.block
  AND (NEW.code IS NULL
       OR NOT EXISTS (SELECT 1 FROM episodes_code_blocks WHERE block = NEW.block AND n = 0))
BEGIN
  DELETE FROM episodes_code_blocks WHERE block = NEW.block;
  UPDATE episodes_codes SET block = NULL WHERE block = NEW.block;
END;

-- ---- episodes_code_blocks

CREATE TRIGGER episodes_code_blocks_delete AFTER DELETE ON episodes_code_blocks BEGIN
  UPDATE episodes_codes SET block = NULL WHERE block = OLD.block;
END;

-- a filled block changed (an open one is filled by the Store's one UPDATE)
CREATE TRIGGER episodes_code_blocks_update AFTER UPDATE ON episodes_code_blocks
WHEN OLD.n IS NOT 0
  AND (NEW.block IS NOT OLD.block OR NEW.n IS NOT OLD.n OR NEW.rowids IS NOT OLD.rowids
       OR NEW.codes IS NOT OLD.codes) BEGIN
  DELETE FROM episodes_code_blocks WHERE block IN (OLD.block, NEW.block);
  UPDATE episodes_codes SET block = NULL WHERE block IN (OLD.block, NEW.block);
END;

-- a block number in use inserted again (a REPLACE would drop the old block's row
-- without its delete trigger when recursive_triggers is OFF): the old block goes first
CREATE TRIGGER episodes_code_blocks_replace BEFORE INSERT ON episodes_code_blocks
WHEN EXISTS (SELECT 1 FROM episodes_code_blocks WHERE block = NEW.block) BEGIN
  DELETE FROM episodes_code_blocks WHERE block = NEW.block;
  UPDATE episodes_codes SET block = NULL WHERE block = NEW.block;
END;

-- a block inserted with codes: its rows never named it, so it is dissolved at once
CREATE TRIGGER episodes_code_blocks_insert AFTER INSERT ON episodes_code_blocks
WHEN NOT (NEW.n IS 0 AND NEW.rowids IS x'' AND NEW.codes IS x'') BEGIN
  DELETE FROM episodes_code_blocks WHERE block = NEW.block;
  UPDATE episodes_codes SET block = NULL WHERE block = NEW.block;
END;
