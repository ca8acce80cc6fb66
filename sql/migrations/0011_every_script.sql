-- 0011: keyword hits in every script (issue 22; docs/languages.md).
--
-- FTS5's unicode61 tokenizer splits text at spaces and punctuation only, so a
-- run of Chinese, Japanese or Thai characters (and a Korean word with its
-- particle) is one token, and a Latin word touching it ("Postgresの認証情報は
-- Vault") is swallowed into that token: nothing inside the run could be found.
--
-- From here the index holds a segmented copy of each episode's text instead of
-- the text itself. The segmentation, in plain SQL so that every client (the
-- sqlite3 shell without the extension too) indexes alike:
--   * a character of a script written without spaces between words (the code
--     points below: Thai, Lao, Myanmar, Hangul, Khmer, kana, bopomofo, CJK
--     ideographs and their extensions) is a "CJK character";
--   * every run of CJK characters becomes its overlapping character bigrams,
--     each between spaces ("認証情報" -> " 認証  証情  情報 "); a run of one
--     character stays that character, between spaces;
--   * every other character stays as it is, so text without a CJK character is
--     its own segmentation: English rows are indexed exactly as before (the same
--     tokens, the same bm25()).
--   * Only the first 65,536 characters are segmented; the rest of a longer text
--     follows, after a space, as it is. SQLite's text functions stop at a NUL
--     character: what follows the first NUL follows, after a space, as it is.
-- The CJK characters:
--   U+0E00-0EFF, U+1000-109F, U+1100-11FF, U+1780-17FF, U+3041-309F,
--   U+30A1-30FA, U+30FC-30FF, U+3100-31BF, U+31F0-31FF, U+3400-4DBF,
--   U+4E00-9FFF, U+A960-A97F, U+AC00-D7FF, U+F900-FAFF, U+FF66-FFDC,
--   U+20000-3FFFD
-- fts5_query (csrc/fts5q.c) splits a query the same way: each bigram of a run of
-- CJK characters is a word of its own, so "パスワード" searches "パス" OR "スワ"
-- OR "ワー" OR "ード", and bm25() ranks first the rows holding most of them.
--
-- The index reads its text through the view episodes_fts_text (FTS5 external
-- content: 'rebuild', 'integrity-check' and the auxiliary functions that read a
-- row's text see the segmented text); the triggers index the segmentation of
-- NEW.content and remove that of OLD.content. episodes_displaced keeps the raw
-- content (migration 0004); its trigger segments it when the row is gone.
-- group_concat has no ORDER BY before SQLite 3.44; it concatenates in the order
-- of the ordered subquery it reads (SQLite keeps a subquery's ORDER BY under an
-- aggregate), which tests/test_cjk.py checks on SQLite 3.40 and the bundled one.
-- Text without a CJK character is its own segmentation; it is recognised cheaply
-- (FTS5 reads a row's text through the view, e.g. for rrf_bm25_or_top): ASCII
-- text by its length in characters and in bytes (1 us for 1,500 characters), other
-- text by a GLOB with two ranges that hold every CJK character (U+0E00-1FFF,
-- U+2E80-3FFFD; not the punctuation of U+2000-2BFF), before the GLOB of the exact
-- class (16 ranges: ~90 ns a character).

-- 0..255 without a table (a view cannot lose rows)
CREATE VIEW rrf_seq16(i) AS
  VALUES (0), (1), (2), (3), (4), (5), (6), (7), (8), (9), (10), (11), (12), (13), (14), (15);
CREATE VIEW rrf_seq256(i) AS SELECT a.i * 16 + b.i FROM rrf_seq16 AS a, rrf_seq16 AS b;

-- what the index holds for each episode
CREATE VIEW episodes_fts_text(rowid, content) AS
SELECT rowid,
  CASE WHEN length(content) = length(CAST(content AS BLOB))
         OR content NOT GLOB '*[฀-῿⺀-𿿽]*'
         OR content NOT GLOB '*[฀-໿က-႟ᄀ-ᇿក-៿ぁ-ゟァ-ヺー-ヿ㄀-ㆿㇰ-ㇿ㐀-䶿一-鿿ꥠ-꥿가-퟿豈-﫿ｦ-ￜ𠀀-𿿽]*' THEN content ELSE
    (SELECT group_concat(p, '') FROM (
       SELECT CASE WHEN substr(c.w, j.i + 2, 1) NOT GLOB '[฀-໿က-႟ᄀ-ᇿក-៿ぁ-ゟァ-ヺー-ヿ㄀-ㆿㇰ-ㇿ㐀-䶿一-鿿ꥠ-꥿가-퟿豈-﫿ｦ-ￜ𠀀-𿿽]' THEN substr(c.w, j.i + 2, 1)
                   WHEN substr(c.w, j.i + 3, 1) GLOB '[฀-໿က-႟ᄀ-ᇿក-៿ぁ-ゟァ-ヺー-ヿ㄀-ㆿㇰ-ㇿ㐀-䶿一-鿿ꥠ-꥿가-퟿豈-﫿ｦ-ￜ𠀀-𿿽]' THEN ' ' || substr(c.w, j.i + 2, 2) || ' '
                   WHEN substr(c.w, j.i + 1, 1) GLOB '[฀-໿က-႟ᄀ-ᇿក-៿ぁ-ゟァ-ヺー-ヿ㄀-ㆿㇰ-ㇿ㐀-䶿一-鿿ꥠ-꥿가-퟿豈-﫿ｦ-ￜ𠀀-𿿽]' THEN ''
                   ELSE ' ' || substr(c.w, j.i + 2, 1) || ' ' END AS p
       FROM (SELECT k.i AS k, CASE WHEN k.i = 0 THEN ' ' || substr(content, 1, 257)
                                   ELSE substr(content, k.i * 256, 258) END AS w
             FROM rrf_seq256 AS k WHERE k.i <= (length(content) - 1) / 256 LIMIT 256) AS c
            CROSS JOIN rrf_seq256 AS j
       WHERE j.i < length(content) - c.k * 256
       ORDER BY c.k, j.i))
    || CASE WHEN length(content) > 65536 THEN ' ' || substr(content, 65537) ELSE '' END
    || coalesce(' ' || nullif(CAST(substr(CAST(content AS BLOB),
                                          length(CAST(substr(content, 1, length(content)) AS BLOB)) + 1)
                                   AS TEXT), ''), '')
  END AS content
FROM episodes;

DROP TRIGGER episodes_fts_insert;
DROP TRIGGER episodes_fts_update;
DROP TRIGGER episodes_fts_delete;
DROP TRIGGER episodes_fts_displaced;

-- the index's settings (migration 0006's automerge and crisismerge, and any
-- other a user set) go over to the new index
CREATE TEMP TABLE rrf_migration_0011_config AS
  SELECT k, v FROM episodes_fts_config WHERE k != 'version';
DROP TABLE episodes_fts;
CREATE VIRTUAL TABLE episodes_fts USING fts5(
  content,
  content = 'episodes_fts_text',
  content_rowid = 'rowid',
  tokenize = 'porter unicode61'
);
INSERT INTO episodes_fts(episodes_fts, rank)
  SELECT k, v FROM temp.rrf_migration_0011_config ORDER BY k;
DROP TABLE temp.rrf_migration_0011_config;

-- migration 0004's triggers, indexing the segmented text
CREATE TRIGGER episodes_fts_displaced
AFTER UPDATE OF gone ON episodes_displaced BEGIN
  INSERT INTO episodes_fts(episodes_fts, rowid, content)
    VALUES ('delete', OLD.rowid,
    CASE WHEN length(OLD.content) = length(CAST(OLD.content AS BLOB))
           OR OLD.content NOT GLOB '*[฀-῿⺀-𿿽]*'
           OR OLD.content NOT GLOB '*[฀-໿က-႟ᄀ-ᇿក-៿ぁ-ゟァ-ヺー-ヿ㄀-ㆿㇰ-ㇿ㐀-䶿一-鿿ꥠ-꥿가-퟿豈-﫿ｦ-ￜ𠀀-𿿽]*' THEN OLD.content ELSE
      (SELECT group_concat(p, '') FROM (
         SELECT CASE WHEN substr(c.w, j.i + 2, 1) NOT GLOB '[฀-໿က-႟ᄀ-ᇿក-៿ぁ-ゟァ-ヺー-ヿ㄀-ㆿㇰ-ㇿ㐀-䶿一-鿿ꥠ-꥿가-퟿豈-﫿ｦ-ￜ𠀀-𿿽]' THEN substr(c.w, j.i + 2, 1)
                     WHEN substr(c.w, j.i + 3, 1) GLOB '[฀-໿က-႟ᄀ-ᇿក-៿ぁ-ゟァ-ヺー-ヿ㄀-ㆿㇰ-ㇿ㐀-䶿一-鿿ꥠ-꥿가-퟿豈-﫿ｦ-ￜ𠀀-𿿽]' THEN ' ' || substr(c.w, j.i + 2, 2) || ' '
                     WHEN substr(c.w, j.i + 1, 1) GLOB '[฀-໿က-႟ᄀ-ᇿក-៿ぁ-ゟァ-ヺー-ヿ㄀-ㆿㇰ-ㇿ㐀-䶿一-鿿ꥠ-꥿가-퟿豈-﫿ｦ-ￜ𠀀-𿿽]' THEN ''
                     ELSE ' ' || substr(c.w, j.i + 2, 1) || ' ' END AS p
         FROM (SELECT k.i AS k, CASE WHEN k.i = 0 THEN ' ' || substr(OLD.content, 1, 257)
                                     ELSE substr(OLD.content, k.i * 256, 258) END AS w
               FROM rrf_seq256 AS k WHERE k.i <= (length(OLD.content) - 1) / 256 LIMIT 256) AS c
              CROSS JOIN rrf_seq256 AS j
         WHERE j.i < length(OLD.content) - c.k * 256
         ORDER BY c.k, j.i))
      || CASE WHEN length(OLD.content) > 65536 THEN ' ' || substr(OLD.content, 65537) ELSE '' END
      || coalesce(' ' || nullif(CAST(substr(CAST(OLD.content AS BLOB),
                                            length(CAST(substr(OLD.content, 1, length(OLD.content)) AS BLOB)) + 1)
                                     AS TEXT), ''), '')
    END);
END;

CREATE TRIGGER episodes_fts_insert AFTER INSERT ON episodes BEGIN
  -- a displaced row is gone if its rowid is now the new row's or empty
  UPDATE episodes_displaced SET gone = 1
   WHERE rowid = NEW.rowid
      OR NOT EXISTS (SELECT 1 FROM episodes AS e WHERE e.rowid = episodes_displaced.rowid);
  DELETE FROM episodes_displaced;
  INSERT INTO episodes_fts(rowid, content)
    VALUES (NEW.rowid,
    CASE WHEN length(NEW.content) = length(CAST(NEW.content AS BLOB))
           OR NEW.content NOT GLOB '*[฀-῿⺀-𿿽]*'
           OR NEW.content NOT GLOB '*[฀-໿က-႟ᄀ-ᇿក-៿ぁ-ゟァ-ヺー-ヿ㄀-ㆿㇰ-ㇿ㐀-䶿一-鿿ꥠ-꥿가-퟿豈-﫿ｦ-ￜ𠀀-𿿽]*' THEN NEW.content ELSE
      (SELECT group_concat(p, '') FROM (
         SELECT CASE WHEN substr(c.w, j.i + 2, 1) NOT GLOB '[฀-໿က-႟ᄀ-ᇿក-៿ぁ-ゟァ-ヺー-ヿ㄀-ㆿㇰ-ㇿ㐀-䶿一-鿿ꥠ-꥿가-퟿豈-﫿ｦ-ￜ𠀀-𿿽]' THEN substr(c.w, j.i + 2, 1)
                     WHEN substr(c.w, j.i + 3, 1) GLOB '[฀-໿က-႟ᄀ-ᇿក-៿ぁ-ゟァ-ヺー-ヿ㄀-ㆿㇰ-ㇿ㐀-䶿一-鿿ꥠ-꥿가-퟿豈-﫿ｦ-ￜ𠀀-𿿽]' THEN ' ' || substr(c.w, j.i + 2, 2) || ' '
                     WHEN substr(c.w, j.i + 1, 1) GLOB '[฀-໿က-႟ᄀ-ᇿក-៿ぁ-ゟァ-ヺー-ヿ㄀-ㆿㇰ-ㇿ㐀-䶿一-鿿ꥠ-꥿가-퟿豈-﫿ｦ-ￜ𠀀-𿿽]' THEN ''
                     ELSE ' ' || substr(c.w, j.i + 2, 1) || ' ' END AS p
         FROM (SELECT k.i AS k, CASE WHEN k.i = 0 THEN ' ' || substr(NEW.content, 1, 257)
                                     ELSE substr(NEW.content, k.i * 256, 258) END AS w
               FROM rrf_seq256 AS k WHERE k.i <= (length(NEW.content) - 1) / 256 LIMIT 256) AS c
              CROSS JOIN rrf_seq256 AS j
         WHERE j.i < length(NEW.content) - c.k * 256
         ORDER BY c.k, j.i))
      || CASE WHEN length(NEW.content) > 65536 THEN ' ' || substr(NEW.content, 65537) ELSE '' END
      || coalesce(' ' || nullif(CAST(substr(CAST(NEW.content AS BLOB),
                                            length(CAST(substr(NEW.content, 1, length(NEW.content)) AS BLOB)) + 1)
                                     AS TEXT), ''), '')
    END);
END;

CREATE TRIGGER episodes_fts_update AFTER UPDATE ON episodes
WHEN NEW.rowid IS NOT OLD.rowid OR NEW.id IS NOT OLD.id OR NEW.content IS NOT OLD.content
BEGIN
  UPDATE episodes_displaced SET gone = 1
   WHERE rowid = NEW.rowid
      OR NOT EXISTS (SELECT 1 FROM episodes AS e WHERE e.rowid = episodes_displaced.rowid);
  DELETE FROM episodes_displaced;
  INSERT INTO episodes_fts(episodes_fts, rowid, content)
    SELECT 'delete', OLD.rowid,
    CASE WHEN length(OLD.content) = length(CAST(OLD.content AS BLOB))
           OR OLD.content NOT GLOB '*[฀-῿⺀-𿿽]*'
           OR OLD.content NOT GLOB '*[฀-໿က-႟ᄀ-ᇿក-៿ぁ-ゟァ-ヺー-ヿ㄀-ㆿㇰ-ㇿ㐀-䶿一-鿿ꥠ-꥿가-퟿豈-﫿ｦ-ￜ𠀀-𿿽]*' THEN OLD.content ELSE
      (SELECT group_concat(p, '') FROM (
         SELECT CASE WHEN substr(c.w, j.i + 2, 1) NOT GLOB '[฀-໿က-႟ᄀ-ᇿក-៿ぁ-ゟァ-ヺー-ヿ㄀-ㆿㇰ-ㇿ㐀-䶿一-鿿ꥠ-꥿가-퟿豈-﫿ｦ-ￜ𠀀-𿿽]' THEN substr(c.w, j.i + 2, 1)
                     WHEN substr(c.w, j.i + 3, 1) GLOB '[฀-໿က-႟ᄀ-ᇿក-៿ぁ-ゟァ-ヺー-ヿ㄀-ㆿㇰ-ㇿ㐀-䶿一-鿿ꥠ-꥿가-퟿豈-﫿ｦ-ￜ𠀀-𿿽]' THEN ' ' || substr(c.w, j.i + 2, 2) || ' '
                     WHEN substr(c.w, j.i + 1, 1) GLOB '[฀-໿က-႟ᄀ-ᇿក-៿ぁ-ゟァ-ヺー-ヿ㄀-ㆿㇰ-ㇿ㐀-䶿一-鿿ꥠ-꥿가-퟿豈-﫿ｦ-ￜ𠀀-𿿽]' THEN ''
                     ELSE ' ' || substr(c.w, j.i + 2, 1) || ' ' END AS p
         FROM (SELECT k.i AS k, CASE WHEN k.i = 0 THEN ' ' || substr(OLD.content, 1, 257)
                                     ELSE substr(OLD.content, k.i * 256, 258) END AS w
               FROM rrf_seq256 AS k WHERE k.i <= (length(OLD.content) - 1) / 256 LIMIT 256) AS c
              CROSS JOIN rrf_seq256 AS j
         WHERE j.i < length(OLD.content) - c.k * 256
         ORDER BY c.k, j.i))
      || CASE WHEN length(OLD.content) > 65536 THEN ' ' || substr(OLD.content, 65537) ELSE '' END
      || coalesce(' ' || nullif(CAST(substr(CAST(OLD.content AS BLOB),
                                            length(CAST(substr(OLD.content, 1, length(OLD.content)) AS BLOB)) + 1)
                                     AS TEXT), ''), '')
    END
     WHERE NEW.rowid IS NOT OLD.rowid OR NEW.content IS NOT OLD.content;
  INSERT INTO episodes_fts(rowid, content)
    SELECT NEW.rowid,
    CASE WHEN length(NEW.content) = length(CAST(NEW.content AS BLOB))
           OR NEW.content NOT GLOB '*[฀-῿⺀-𿿽]*'
           OR NEW.content NOT GLOB '*[฀-໿က-႟ᄀ-ᇿក-៿ぁ-ゟァ-ヺー-ヿ㄀-ㆿㇰ-ㇿ㐀-䶿一-鿿ꥠ-꥿가-퟿豈-﫿ｦ-ￜ𠀀-𿿽]*' THEN NEW.content ELSE
      (SELECT group_concat(p, '') FROM (
         SELECT CASE WHEN substr(c.w, j.i + 2, 1) NOT GLOB '[฀-໿က-႟ᄀ-ᇿក-៿ぁ-ゟァ-ヺー-ヿ㄀-ㆿㇰ-ㇿ㐀-䶿一-鿿ꥠ-꥿가-퟿豈-﫿ｦ-ￜ𠀀-𿿽]' THEN substr(c.w, j.i + 2, 1)
                     WHEN substr(c.w, j.i + 3, 1) GLOB '[฀-໿က-႟ᄀ-ᇿក-៿ぁ-ゟァ-ヺー-ヿ㄀-ㆿㇰ-ㇿ㐀-䶿一-鿿ꥠ-꥿가-퟿豈-﫿ｦ-ￜ𠀀-𿿽]' THEN ' ' || substr(c.w, j.i + 2, 2) || ' '
                     WHEN substr(c.w, j.i + 1, 1) GLOB '[฀-໿က-႟ᄀ-ᇿក-៿ぁ-ゟァ-ヺー-ヿ㄀-ㆿㇰ-ㇿ㐀-䶿一-鿿ꥠ-꥿가-퟿豈-﫿ｦ-ￜ𠀀-𿿽]' THEN ''
                     ELSE ' ' || substr(c.w, j.i + 2, 1) || ' ' END AS p
         FROM (SELECT k.i AS k, CASE WHEN k.i = 0 THEN ' ' || substr(NEW.content, 1, 257)
                                     ELSE substr(NEW.content, k.i * 256, 258) END AS w
               FROM rrf_seq256 AS k WHERE k.i <= (length(NEW.content) - 1) / 256 LIMIT 256) AS c
              CROSS JOIN rrf_seq256 AS j
         WHERE j.i < length(NEW.content) - c.k * 256
         ORDER BY c.k, j.i))
      || CASE WHEN length(NEW.content) > 65536 THEN ' ' || substr(NEW.content, 65537) ELSE '' END
      || coalesce(' ' || nullif(CAST(substr(CAST(NEW.content AS BLOB),
                                            length(CAST(substr(NEW.content, 1, length(NEW.content)) AS BLOB)) + 1)
                                     AS TEXT), ''), '')
    END
     WHERE NEW.rowid IS NOT OLD.rowid OR NEW.content IS NOT OLD.content;
END;

CREATE TRIGGER episodes_fts_delete AFTER DELETE ON episodes BEGIN
  INSERT INTO episodes_fts(episodes_fts, rowid, content)
    VALUES ('delete', OLD.rowid,
    CASE WHEN length(OLD.content) = length(CAST(OLD.content AS BLOB))
           OR OLD.content NOT GLOB '*[฀-῿⺀-𿿽]*'
           OR OLD.content NOT GLOB '*[฀-໿က-႟ᄀ-ᇿក-៿ぁ-ゟァ-ヺー-ヿ㄀-ㆿㇰ-ㇿ㐀-䶿一-鿿ꥠ-꥿가-퟿豈-﫿ｦ-ￜ𠀀-𿿽]*' THEN OLD.content ELSE
      (SELECT group_concat(p, '') FROM (
         SELECT CASE WHEN substr(c.w, j.i + 2, 1) NOT GLOB '[฀-໿က-႟ᄀ-ᇿក-៿ぁ-ゟァ-ヺー-ヿ㄀-ㆿㇰ-ㇿ㐀-䶿一-鿿ꥠ-꥿가-퟿豈-﫿ｦ-ￜ𠀀-𿿽]' THEN substr(c.w, j.i + 2, 1)
                     WHEN substr(c.w, j.i + 3, 1) GLOB '[฀-໿က-႟ᄀ-ᇿក-៿ぁ-ゟァ-ヺー-ヿ㄀-ㆿㇰ-ㇿ㐀-䶿一-鿿ꥠ-꥿가-퟿豈-﫿ｦ-ￜ𠀀-𿿽]' THEN ' ' || substr(c.w, j.i + 2, 2) || ' '
                     WHEN substr(c.w, j.i + 1, 1) GLOB '[฀-໿က-႟ᄀ-ᇿក-៿ぁ-ゟァ-ヺー-ヿ㄀-ㆿㇰ-ㇿ㐀-䶿一-鿿ꥠ-꥿가-퟿豈-﫿ｦ-ￜ𠀀-𿿽]' THEN ''
                     ELSE ' ' || substr(c.w, j.i + 2, 1) || ' ' END AS p
         FROM (SELECT k.i AS k, CASE WHEN k.i = 0 THEN ' ' || substr(OLD.content, 1, 257)
                                     ELSE substr(OLD.content, k.i * 256, 258) END AS w
               FROM rrf_seq256 AS k WHERE k.i <= (length(OLD.content) - 1) / 256 LIMIT 256) AS c
              CROSS JOIN rrf_seq256 AS j
         WHERE j.i < length(OLD.content) - c.k * 256
         ORDER BY c.k, j.i))
      || CASE WHEN length(OLD.content) > 65536 THEN ' ' || substr(OLD.content, 65537) ELSE '' END
      || coalesce(' ' || nullif(CAST(substr(CAST(OLD.content AS BLOB),
                                            length(CAST(substr(OLD.content, 1, length(OLD.content)) AS BLOB)) + 1)
                                     AS TEXT), ''), '')
    END);
  DELETE FROM episodes_displaced WHERE rowid = OLD.rowid;
END;

-- the index from the table, segmented
INSERT INTO episodes_fts(episodes_fts) VALUES ('rebuild');
