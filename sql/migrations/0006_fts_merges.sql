-- 0006: only sqlite-rrf merges the FTS5 index's segments.
--
-- FTS5 before SQLite 3.44 (Debian 12's sqlite3 shell is 3.40) can merge this
-- index's segments into ones that disagree with the content: a later
-- integrity-check fails, and a MATCH returns a row that lacks the word. The churn
-- soak (tests/soak/churn.py) found it after ~16,000 mixed writes; merges made by
-- newer SQLite are right. These settings live in the index itself, so every
-- client obeys them: no incremental merge on write (automerge 0). The crisis
-- merge, which merges a whole level at once, stays at FTS5's default (16
-- segments on one level): without it a client writing many statements would run
-- out of segment numbers, and the full churn soak saw no drift with it. Inside
-- its own write transactions the Store turns automerge on for itself (the
-- setting is back to 0 before it commits) and merges ('merge', with the
-- extension's SQLite), so the index does not fragment. docs/schema.md says what
-- this means for other clients.
INSERT INTO episodes_fts(episodes_fts, rank) VALUES ('automerge', 0);
INSERT INTO episodes_fts(episodes_fts, rank) VALUES ('crisismerge', 16);
