"""The schema migrations (pysrc/sqlite_rrf/core/migrations.py, sql/migrations/*.sql).

Every test uses a real database file in ``tmp_path`` opened with apsw. The
expectations come from DESIGN.md ("Schema"), computed here without the
runner's help: the migration files are counted and hashed by the test, the schema
is read back from ``sqlite_master`` and the PRAGMAs, and the FTS index is checked
by FTS5 itself (``integrity-check`` against the external content table) and by
MATCH results.

The crash test kills (SIGKILL) a child process in the middle of a slow custom
migration several times, at different moments, in WAL and in rollback-journal
mode, and then checks that the database is intact and still at the previous
version.
"""

from __future__ import annotations

import glob
import hashlib
import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import time

import apsw
import pytest

import sqlite_rrf
from sqlite_rrf.core.migrations import (
    Migration,
    MigrationError,
    available,
    current_version,
    migrate,
)

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MIGRATIONS_DIR = os.path.join(REPO, "sql", "migrations")
RECALL_SQL = os.path.join(REPO, "sql", "recall.sql")


# ---- helpers ----


def shipped_files():
    """The shipped migration files, found and parsed by the test itself."""
    files = sorted(glob.glob(os.path.join(MIGRATIONS_DIR, "[0-9][0-9][0-9][0-9]_*.sql")))
    assert files, f"no migration files in {MIGRATIONS_DIR}"
    return files


def n_shipped() -> int:
    return len(shipped_files())


def open_db(path) -> apsw.Connection:
    c = apsw.Connection(str(path))
    c.set_busy_timeout(10_000)
    return c


def migrated(path) -> apsw.Connection:
    c = open_db(path)
    migrate(c)
    return c


def schema_dump(conn):
    """Every schema object, as (type, name, tbl_name, sql), sorted."""
    return sorted(
        conn.execute("SELECT type, name, tbl_name, coalesce(sql, '') FROM sqlite_master").fetchall()
    )


def migration_rows(conn):
    return conn.execute(
        "SELECT version, name, checksum, applied_at FROM schema_migrations ORDER BY version"
    ).fetchall()


def names(conn, type_):
    return {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = ?", (type_,))}


def fts_integrity_check(conn) -> None:
    """FTS5's own check, including consistency with the external content table
    (rank = 1); raises apsw.CorruptError when the index is out of sync."""
    conn.execute("INSERT INTO episodes_fts(episodes_fts, rank) VALUES ('integrity-check', 1)")


def match(conn, expr):
    return sorted(
        r[0]
        for r in conn.execute("SELECT rowid FROM episodes_fts WHERE episodes_fts MATCH ?", (expr,))
    )


def integrity_ok(conn) -> bool:
    return conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]


def add(conn, id_, content, embedding=None, accessed_at=None):
    conn.execute(
        "INSERT INTO episodes(id, content, embedding, accessed_at) "
        "VALUES (?, ?, ?, coalesce(?, 0))",
        (id_, content, embedding, accessed_at),
    )
    return conn.last_insert_rowid()


# ---- a fresh database ----


def test_fresh_database_gets_every_shipped_migration(tmp_path):
    files = shipped_files()
    conn = open_db(tmp_path / "m.db")
    assert current_version(conn) == 0
    before = int(time.time() * 1000)
    applied_now = migrate(conn)
    after = int(time.time() * 1000)
    versions = [int(os.path.basename(f)[:4]) for f in files]
    assert applied_now == versions
    assert current_version(conn) == max(versions)
    assert len(files) == max(versions), "migrations are numbered 1..n without gaps"

    rows = migration_rows(conn)
    assert [r[0] for r in rows] == versions
    for (version, name, checksum, applied_at), f in zip(rows, files):
        base = os.path.basename(f)
        assert name == base[5:-4]
        with open(f, "rb") as fh:
            text = fh.read().decode("utf-8").replace("\r\n", "\n")
        assert checksum == hashlib.sha256(text.encode("utf-8")).hexdigest()
        assert before <= applied_at <= after, "applied_at is in ms since the epoch"
    assert [m.version for m in available()] == versions
    conn.close()


def test_episodes_table_columns(tmp_path):
    conn = migrated(tmp_path / "m.db")
    cols = {r[1]: r for r in conn.execute("PRAGMA table_info(episodes)")}
    assert set(cols) == {
        "rowid",
        "id",
        "content",
        "embedding",
        "created_at",
        "accessed_at",
        "access_count",
        "importance",
        "kind",
        "metadata",
        # 0002: the 'decay' profile's lifecycle multipliers, NULL = neutral
        "strength",
        "depth",
        "session_spread",
        "stability",
        # 0005: the memory an episode belongs to ('' = the shared one)
        "scope",
        # 0010: the digest of the content's normal form (NULL: pending)
        "content_key",
        # 0012: the id of the fact that replaced the episode (NULL: current)
        "superseded_by",
        # 0013: when a repeated text was last stored again (NULL: never)
        "confirmed_at",
    }
    assert cols["scope"][3] == 1 and cols["scope"][4] == "''"  # NOT NULL DEFAULT ''
    with pytest.raises(apsw.ConstraintError):
        conn.execute("INSERT INTO episodes(id, content, scope) VALUES ('s', 'x', x'00')")
    assert all(
        cols[c][4] is None and cols[c][3] == 0
        for c in ("strength", "depth", "session_spread", "stability")
    )
    assert cols["rowid"][5] == 1 and cols["rowid"][2].upper() == "INTEGER"  # the rowid alias
    assert cols["id"][3] == 1 and cols["content"][3] == 1  # NOT NULL
    assert cols["access_count"][4] == "0"

    # id is UNIQUE
    add(conn, "a", "first")
    with pytest.raises(apsw.ConstraintError):
        add(conn, "a", "second")
    # importance is one of low / normal / high, default normal
    assert conn.execute("SELECT importance, access_count FROM episodes").fetchall() == [
        ("normal", 0)
    ]
    for good in ("low", "normal", "high"):
        conn.execute(
            "INSERT INTO episodes(id, content, importance) VALUES (?, 'x', ?)",
            ("imp-" + good, good),
        )
    with pytest.raises(apsw.ConstraintError):
        conn.execute("INSERT INTO episodes(id, content, importance) VALUES ('bad', 'x', 'urgent')")
    # metadata is text (JSON written by the Store; the schema checks the type only, with
    # innocuous functions, so that it works with trusted_schema=OFF: migration 0004)
    conn.execute("INSERT INTO episodes(id, content, metadata) VALUES ('md', 'x', '{\"a\": 1}')")
    with pytest.raises(apsw.ConstraintError):
        conn.execute("INSERT INTO episodes(id, content, metadata) VALUES ('md2', 'x', x'00ff')")
    # times default to "now" in integer milliseconds since the epoch
    t0 = int(time.time() * 1000)
    conn.execute("INSERT INTO episodes(id, content) VALUES ('t', 'x')")
    t1 = int(time.time() * 1000)
    created, accessed = conn.execute(
        "SELECT created_at, accessed_at FROM episodes WHERE id = 't'"
    ).fetchall()[0]
    assert isinstance(created, int) and isinstance(accessed, int)
    assert t0 - 5 <= created <= t1 + 5 and t0 - 5 <= accessed <= t1 + 5
    conn.close()


def test_database_records_its_embedding_facts_table(tmp_path):
    """The issue: "the database also records its embedding model and dimension"."""
    conn = migrated(tmp_path / "m.db")
    assert "rrf_meta" in names(conn, "table")
    conn.execute("INSERT INTO rrf_meta VALUES ('embedding_dim', 8)")
    # a wrong-sized vector never lands
    with pytest.raises(apsw.ConstraintError):
        add(conn, "v7", "x", b"\0" * 28)
    add(conn, "v8", "x", b"\0" * 32)
    assert conn.execute("SELECT count(*) FROM episodes").fetchall() == [(1,)]
    conn.close()


def test_fts_table_is_external_content_porter_unicode61(tmp_path):
    conn = migrated(tmp_path / "m.db")
    assert "episodes_fts" in names(conn, "table")
    sql = conn.execute("SELECT sql FROM sqlite_master WHERE name = 'episodes_fts'").fetchall()[0][0]
    assert re.search(r"using\s+fts5", sql, re.I)
    # migration 0011: the text is read through the view of its segmentation
    assert re.search(r"content\s*=\s*'episodes_fts_text'", sql, re.I)
    assert re.search(r"porter\s+unicode61", sql, re.I)
    # External content: FTS5 keeps no copy of the text (no _content shadow table).
    tables = names(conn, "table")
    assert {"episodes_fts_data", "episodes_fts_idx", "episodes_fts_config"} <= tables
    assert "episodes_fts_content" not in tables

    r1 = add(conn, "a", "The engineers were RUNNING migrations")
    r2 = add(conn, "b", "Un café crème à Zürich")
    add(conn, "c", "nothing relevant here")
    assert match(conn, "run") == [r1]  # porter stemming
    assert match(conn, "migration") == [r1]
    assert match(conn, "cafe") == [r2]  # unicode61 folds case and diacritics
    assert match(conn, "zurich") == [r2]
    # reading the text through the FTS table goes to episodes
    assert conn.execute("SELECT content FROM episodes_fts WHERE rowid = ?", (r2,)).fetchall() == [
        ("Un café crème à Zürich",)
    ]
    conn.close()


def test_partial_index_on_accessed_at(tmp_path):
    conn = migrated(tmp_path / "m.db")
    idx = {r[1]: r for r in conn.execute("PRAGMA index_list(episodes)")}
    assert "idx_episodes_accessed_at" in idx
    assert idx["idx_episodes_accessed_at"][4] == 1, "the index is partial"
    sql = conn.execute(
        "SELECT sql FROM sqlite_master WHERE name = 'idx_episodes_accessed_at'"
    ).fetchall()[0][0]
    assert re.search(r"where\s+embedding\s+is\s+not\s+null", sql, re.I)
    key = [r for r in conn.execute("PRAGMA index_xinfo(idx_episodes_accessed_at)") if r[5]]
    assert [(r[2], r[3]) for r in key] == [("accessed_at", 1)], "one key column, DESC"
    conn.close()


def _pool_subquery(sql: str) -> str:
    """The 'recent' pool's inner SELECT, cut out of its statement, with the params
    lookup replaced by a named parameter."""
    m = re.search(r"\bpool_recent\s+AS\s*\(", sql, re.I)
    assert m, "recall.sql has no pool CTE"
    start = sql.index("(SELECT", m.end())
    depth = 0
    for i in range(start, len(sql)):
        if sql[i] == "(":
            depth += 1
        elif sql[i] == ")":
            depth -= 1
            if depth == 0:
                inner = sql[start + 1 : i]
                break
    assert re.search(r"\bFROM\s+episodes\b", inner, re.I), inner
    assert re.search(r"ORDER\s+BY\s+accessed_at\s+DESC", inner, re.I), inner
    return re.sub(r"\(\s*SELECT\s+pool_size\s+FROM\s+params\s*\)", ":pool_size", inner, flags=re.I)


def _seed_for_plans(conn, n=300, analyze=True):
    with conn:
        for i in range(n):
            add(
                conn,
                f"e{i}",
                f"episode number {i} about topic {i % 7}",
                b"\x00\x00\x80\x3f" * 4 if i % 3 else None,
                accessed_at=i * 1000,
            )
    if analyze:
        conn.execute("ANALYZE")


def test_pool_query_uses_the_partial_index(tmp_path):
    conn = migrated(tmp_path / "m.db")
    _seed_for_plans(conn)
    from sqlite_rrf.core.statements import recall_statement

    pool = _pool_subquery(recall_statement("recent"))
    unset = {"scope": None, "scope2": None, "kind": None, "since": None, "until": None}  # no filter
    plan = [r[3] for r in conn.execute("EXPLAIN QUERY PLAN " + pool, dict(unset, pool_size=200))]
    assert any(
        "USING INDEX idx_episodes_accessed_at" in d
        or "USING COVERING INDEX idx_episodes_accessed_at" in d
        for d in plan
    ), plan
    # the index order serves ORDER BY accessed_at DESC, rowid: no sort step
    assert not any("TEMP B-TREE" in d for d in plan), plan
    # and the subquery returns what its definition says
    got = [r[0] for r in conn.execute(pool, dict(unset, pool_size=5))]
    want = [
        r[0]
        for r in sorted(
            conn.execute("SELECT rowid, accessed_at FROM episodes WHERE embedding IS NOT NULL"),
            key=lambda r: (-r[1], r[0]),
        )[:5]
    ]
    assert got == want
    conn.close()


def test_whole_recall_statement_reads_the_partial_index(tmp_path):
    conn = migrated(tmp_path / "m.db")
    sqlite_rrf.load(conn)
    _seed_for_plans(conn, analyze=False)  # as a fresh database is: no sqlite_stat1
    from sqlite_rrf.core.statements import recall_statement

    sql = recall_statement("recent")  # the 'recent' pool's statement
    params = dict.fromkeys(set(re.findall(r"(?<!:):(\w+)", sql)))  # every named parameter
    params["query"] = "topic"
    plan = [r[3] for r in conn.execute("EXPLAIN QUERY PLAN " + sql, params)]
    assert any("idx_episodes_accessed_at" in d for d in plan), plan
    conn.close()


# ---- the FTS triggers ----


def test_triggers_keep_fts_in_sync(tmp_path):
    conn = migrated(tmp_path / "m.db")
    ra = add(conn, "a", "alpha bravo")
    rb = add(conn, "b", "bravo charlie")
    rc = add(conn, "c", "delta echo")
    fts_integrity_check(conn)
    assert match(conn, "bravo") == sorted([ra, rb])

    # update of content: the old words go, the new ones come
    conn.execute("UPDATE episodes SET content = 'foxtrot golf' WHERE id = 'a'")
    fts_integrity_check(conn)
    assert match(conn, "alpha") == []
    assert match(conn, "bravo") == [rb]
    assert match(conn, "foxtrot") == [ra]

    # update of other columns leaves the index alone
    conn.execute("UPDATE episodes SET access_count = access_count + 1, accessed_at = 5")
    fts_integrity_check(conn)
    assert match(conn, "foxtrot") == [ra]

    # an upsert (ON CONFLICT DO UPDATE), as Store.upsert writes it
    conn.execute(
        "INSERT INTO episodes(id, content) VALUES ('c', 'hotel india') "
        "ON CONFLICT(id) DO UPDATE SET content = excluded.content"
    )
    fts_integrity_check(conn)
    assert match(conn, "delta") == []
    assert match(conn, "hotel") == [rc]

    # delete
    conn.execute("DELETE FROM episodes WHERE id = 'b'")
    fts_integrity_check(conn)
    assert match(conn, "bravo") == []
    assert match(conn, "charlie") == []

    # a rolled-back write leaves index and table as they were
    conn.execute("BEGIN")
    conn.execute("UPDATE episodes SET content = 'juliet' WHERE id = 'c'")
    conn.execute("DELETE FROM episodes WHERE id = 'a'")
    conn.execute("ROLLBACK")
    fts_integrity_check(conn)
    assert match(conn, "hotel") == [rc] and match(conn, "foxtrot") == [ra]
    assert match(conn, "juliet") == []

    # many rows, then delete half
    with conn:
        for i in range(200):
            add(conn, f"n{i}", f"kilo lima {'mike' if i % 2 else 'november'} {i}")
    conn.execute("DELETE FROM episodes WHERE id LIKE 'n%' AND content LIKE '%mike%'")
    fts_integrity_check(conn)
    assert len(match(conn, "mike")) == 0
    assert len(match(conn, "november")) == 100
    assert integrity_ok(conn)
    conn.close()


def test_fts_integrity_check_does_detect_a_desync(tmp_path):
    """The control for the checks above: bypass the update trigger and the same
    check reports the index out of sync, so passing it means something."""
    conn = migrated(tmp_path / "m.db")
    add(conn, "a", "alpha bravo")
    conn.execute("BEGIN")
    conn.execute("DROP TRIGGER episodes_fts_update")
    conn.execute("UPDATE episodes SET content = 'charlie' WHERE id = 'a'")
    with pytest.raises(apsw.CorruptError):
        fts_integrity_check(conn)
    conn.execute("ROLLBACK")
    fts_integrity_check(conn)
    conn.close()


def test_insert_or_replace_with_recursive_triggers_keeps_fts_in_sync(tmp_path):
    conn = migrated(tmp_path / "m.db")
    conn.execute("PRAGMA recursive_triggers = ON")
    add(conn, "a", "alpha bravo")
    conn.execute("INSERT OR REPLACE INTO episodes(id, content) VALUES ('a', 'charlie')")
    fts_integrity_check(conn)
    assert match(conn, "alpha") == []
    assert len(match(conn, "charlie")) == 1
    conn.close()


def test_insert_or_replace_through_store_connection_keeps_fts_in_sync(tmp_path):
    from sqlite_rrf.store import Store

    with Store(str(tmp_path / "m.db")) as store:
        conn = store.conn
        add(conn, "a", "alpha bravo")
        conn.execute("INSERT OR REPLACE INTO episodes(id, content) VALUES ('a', 'charlie')")
        assert match(conn, "alpha") == []
        fts_integrity_check(conn)


# ---- re-running, edits, newer databases ----


def test_migrate_twice_equals_once(tmp_path):
    once = migrated(tmp_path / "once.db")
    twice = migrated(tmp_path / "twice.db")
    dump1, rows1 = schema_dump(twice), migration_rows(twice)
    cookie1 = twice.execute("PRAGMA schema_version").fetchall()
    assert migrate(twice) == []
    assert migrate(twice) == []
    assert schema_dump(twice) == dump1
    assert migration_rows(twice) == rows1  # applied_at included: nothing rewritten
    assert twice.execute("PRAGMA schema_version").fetchall() == cookie1, "no DDL ran"
    assert schema_dump(once) == dump1
    assert [r[:3] for r in migration_rows(once)] == [r[:3] for r in rows1]
    assert len(rows1) == n_shipped()
    once.close()
    twice.close()
    # a new connection (a new process would do the same) is a no-op as well
    again = migrated(tmp_path / "twice.db")
    assert schema_dump(again) == dump1 and migration_rows(again) == rows1
    again.close()


def test_crlf_copy_of_a_migration_is_not_an_edit(tmp_path):
    conn = migrated(tmp_path / "m.db")
    crlf = [Migration(m.version, m.name, m.sql.replace("\n", "\r\n")) for m in available()]
    assert migrate(conn, migrations=crlf) == []
    conn.close()


def test_edited_applied_migration_is_refused(tmp_path):
    conn = migrated(tmp_path / "m.db")
    dump, rows = schema_dump(conn), migration_rows(conn)
    shipped = available()
    first = shipped[0]
    edited = [Migration(first.version, first.name, first.sql + "\nCREATE TABLE sneaky(x);\n")]
    edited += shipped[1:]
    with pytest.raises(MigrationError) as ei:
        migrate(conn, migrations=edited)
    msg = str(ei.value)
    fname = os.path.basename(shipped_files()[0])
    assert fname in msg, msg
    assert "changed" in msg or "edited" in msg, msg
    assert schema_dump(conn) == dump and migration_rows(conn) == rows
    assert "sneaky" not in names(conn, "table")
    assert conn.getautocommit(), "no transaction left open"
    conn.close()


def test_database_newer_than_the_code_is_refused(tmp_path):
    path = tmp_path / "m.db"
    conn = migrated(path)
    conn.execute("INSERT INTO schema_migrations VALUES (9999, 'from_the_future', 'x', 0)")
    dump = schema_dump(conn)
    with pytest.raises(MigrationError) as ei:
        migrate(conn)
    msg = str(ei.value)
    assert "9999" in msg and "newer" in msg, msg
    assert re.search(r"upgrade", msg, re.I), msg
    assert schema_dump(conn) == dump
    conn.close()

    from sqlite_rrf.store import Store

    with pytest.raises(MigrationError, match="newer"):
        Store(str(path))


def test_recorded_migration_missing_from_the_code_is_refused(tmp_path):
    conn = migrated(tmp_path / "m.db")
    shipped = available()
    extra = shipped + [Migration(shipped[-1].version + 1, "extra", "CREATE TABLE extra(x);")]
    assert migrate(conn, migrations=extra) == [shipped[-1].version + 1]
    conn.execute(
        "INSERT INTO schema_migrations VALUES (?, 'gap', 'x', 0)", (shipped[-1].version + 3,)
    )
    with pytest.raises(MigrationError):
        migrate(
            conn,
            migrations=extra
            + [Migration(shipped[-1].version + 4, "later", "CREATE TABLE later(x);")],
        )
    conn.close()


# ---- failing migrations ----


def _user_tables(conn):
    return names(conn, "table")


@pytest.mark.parametrize(
    "bad_sql",
    [
        # a syntax error after statements that worked
        "CREATE TABLE partial_t(x); INSERT INTO partial_t VALUES (1); CREATE TABLE oops(;",
        # a run-time error (NOT NULL) after DDL and a data change
        "CREATE TABLE partial_t(x); UPDATE episodes SET importance = 'high'; "
        "INSERT INTO episodes(id, content) VALUES (NULL, 'no id');",
        # an error raised by a statement halfway through
        "CREATE TABLE partial_t(x); CREATE INDEX partial_i ON partial_t(x); "
        "SELECT RAISE(ABORT, 'boom') FROM episodes; CREATE TABLE never(x);",
    ],
    ids=["syntax", "constraint", "raise"],
)
def test_failing_migration_rolls_back_entirely(tmp_path, bad_sql):
    conn = migrated(tmp_path / "m.db")
    add(conn, "a", "alpha")
    dump, rows = schema_dump(conn), migration_rows(conn)
    data = conn.execute("SELECT * FROM episodes").fetchall()
    version = current_version(conn)
    shipped = available()
    bad = Migration(version + 1, "bad", bad_sql)
    with pytest.raises(apsw.Error):
        migrate(conn, migrations=shipped + [bad])
    assert conn.getautocommit(), "the failed migration's transaction was closed"
    assert current_version(conn) == version
    assert schema_dump(conn) == dump
    assert migration_rows(conn) == rows
    assert conn.execute("SELECT * FROM episodes").fetchall() == data
    assert not {"partial_t", "never", "oops"} & _user_tables(conn)
    fts_integrity_check(conn)
    # the fixed migration then applies
    good = Migration(version + 1, "good", "CREATE TABLE partial_t(x);")
    assert migrate(conn, migrations=shipped + [good]) == [version + 1]
    assert current_version(conn) == version + 1
    conn.close()


def test_failing_first_migration_leaves_an_empty_database(tmp_path):
    conn = open_db(tmp_path / "m.db")
    bad = [Migration(1, "bad", "CREATE TABLE a(x); CREATE TABLE b(;")]
    with pytest.raises(apsw.SQLError):
        migrate(conn, migrations=bad)
    assert current_version(conn) == 0
    assert schema_dump(conn) == []  # not even schema_migrations
    conn.close()


def test_later_migrations_stop_at_the_failing_one(tmp_path):
    conn = open_db(tmp_path / "m.db")
    shipped = available()
    v = shipped[-1].version
    ms = shipped + [
        Migration(v + 1, "ok", "CREATE TABLE t_ok(x);"),
        Migration(v + 2, "bad", "CREATE TABLE t_bad(x); CREATE TABLE (;"),
        Migration(v + 3, "after", "CREATE TABLE t_after(x);"),
    ]
    with pytest.raises(apsw.SQLError):
        migrate(conn, migrations=ms)
    assert current_version(conn) == v + 1  # each migration is its own transaction
    tables = _user_tables(conn)
    assert "t_ok" in tables and "t_bad" not in tables and "t_after" not in tables
    conn.close()


# ---- a process killed during a migration ----

SLOW_ROWS = 20_000_000  # far more than can be written before the kill
SLOW_SQL = textwrap.dedent("""\
    CREATE TABLE slow_migration(i INTEGER PRIMARY KEY, v TEXT NOT NULL);
    WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < {rows})
    INSERT INTO slow_migration SELECT i, hex(randomblob(16)) FROM n;
    CREATE INDEX slow_migration_v ON slow_migration(v);
    """)

CHILD = textwrap.dedent("""\
    import sys
    import apsw
    from sqlite_rrf.core.migrations import Migration, available, migrate

    path, mode, rows, slow_sql = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
    conn = apsw.Connection(path)
    conn.set_busy_timeout(10000)
    conn.execute("PRAGMA journal_mode = " + mode)
    conn.execute("PRAGMA cache_size = -1000")  # spill uncommitted pages to disk early
    shipped = available()
    migrate(conn, shipped)
    if conn.execute("SELECT count(*) FROM episodes").fetchall()[0][0] == 0:
        conn.execute("INSERT INTO episodes(id, content) VALUES "
                     "('a', 'alpha bravo'), ('b', 'charlie delta'), ('c', 'echo foxtrot')")
    slow = Migration(shipped[-1].version + 1, "slow", slow_sql.format(rows=rows))
    print("READY", flush=True)
    migrate(conn, shipped + [slow])
    print("DONE", flush=True)
    """)


def _spill_target(path, mode):
    """Where uncommitted pages land when the cache spills: the WAL in WAL mode; in
    rollback-journal mode the database file itself (the journal keeps only the
    original pages, and a growing table adds new pages the journal needs not)."""
    return str(path) + "-wal" if mode == "wal" else str(path)


def _size(p):
    try:
        return os.path.getsize(p)
    except OSError:
        return 0


def _check_previous_version(path):
    conn = open_db(path)
    try:
        assert integrity_ok(conn)
        assert current_version(conn) == n_shipped()
        assert "slow_migration" not in names(conn, "table")
        assert "slow_migration_v" not in names(conn, "index")
        assert [r[0] for r in migration_rows(conn)] == list(range(1, n_shipped() + 1))
        assert conn.execute("SELECT id FROM episodes ORDER BY id").fetchall() == [
            ("a",),
            ("b",),
            ("c",),
        ]
        fts_integrity_check(conn)
        assert match(conn, "charlie") == [2]
    finally:
        conn.close()


# (wait for the journal to grow first?, extra delay in seconds)
KILL_SCHEDULE = [(False, 0.0), (True, 0.0), (True, 0.2), (True, 0.5), (True, 1.0)]


@pytest.mark.parametrize("mode", ["wal", "delete"])
def test_killed_migration_leaves_previous_version(tmp_path, mode):
    path = tmp_path / "crash.db"
    spill = _spill_target(path, mode)
    grew_once = False
    for wait_growth, delay in KILL_SCHEDULE:
        proc = subprocess.Popen(
            [sys.executable, "-c", CHILD, str(path), mode, str(SLOW_ROWS), SLOW_SQL],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            line = proc.stdout.readline()
            assert line.strip() == "READY", (line, proc.stderr.read())
            if wait_growth:
                base = _size(spill)
                deadline = time.monotonic() + 20
                while _size(spill) < base + 512 * 1024 and time.monotonic() < deadline:
                    assert proc.poll() is None, proc.stderr.read()
                    time.sleep(0.005)
                grew = _size(spill) >= base + 512 * 1024
                grew_once = grew_once or grew
                if grew and mode == "delete":
                    assert os.path.exists(str(path) + "-journal"), "a rollback journal exists"
            time.sleep(delay)
            assert proc.poll() is None, "the slow migration finished before the kill"
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
            assert proc.returncode == -signal.SIGKILL
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            proc.stdout.close()
            proc.stderr.close()
        _check_previous_version(path)
    assert grew_once, "the slow migration never wrote uncommitted pages to disk before a kill"

    # then migrating normally completes
    conn = open_db(path)
    conn.execute("PRAGMA journal_mode = " + mode)
    assert migrate(conn) == []
    shipped = available()
    quick = Migration(shipped[-1].version + 1, "slow", SLOW_SQL.format(rows=1000))
    assert migrate(conn, shipped + [quick]) == [quick.version]
    assert current_version(conn) == quick.version
    assert conn.execute("SELECT count(*) FROM slow_migration").fetchall() == [(1000,)]
    assert integrity_ok(conn)
    conn.close()


# ---- two processes migrating at once ----

CONCURRENT_CHILD = textwrap.dedent("""\
    import os, sys, time
    path, go, how = sys.argv[1], sys.argv[2], sys.argv[3]
    import apsw
    from sqlite_rrf.core.migrations import migrate
    from sqlite_rrf.store import Store
    while not os.path.exists(go):
        time.sleep(0.0005)
    if how == "store":
        with Store(path) as s:
            print(s.stats()["schema_version"])
    else:
        conn = apsw.Connection(path)
        conn.set_busy_timeout(10000)
        print(migrate(conn))
        conn.close()
    """)


@pytest.mark.parametrize("how", ["store", "runner"])
def test_concurrent_migration_by_several_processes(tmp_path, how):
    reference = migrated(tmp_path / "reference.db")
    want_dump = schema_dump(reference)
    want_rows = [r[:3] for r in migration_rows(reference)]
    reference.close()
    for round_ in range(3):
        path = tmp_path / f"c{round_}.db"
        go = tmp_path / f"go{round_}"
        procs = [
            subprocess.Popen(
                [sys.executable, "-c", CONCURRENT_CHILD, str(path), str(go), how],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for _ in range(3)
        ]
        time.sleep(0.6)  # let them all import and reach the barrier
        go.write_text("go")
        outs = [p.communicate(timeout=60) for p in procs]
        for p, (out, err) in zip(procs, outs):
            assert p.returncode == 0, err
            assert err == "", err
        if how == "runner":
            # every migration was applied by exactly one of the processes
            applied_by = [json.loads(out) for out, _ in outs]
            assert sorted(v for vs in applied_by for v in vs) == [r[0] for r in want_rows], (
                applied_by
            )
        conn = open_db(path)
        assert schema_dump(conn) == want_dump
        assert [r[:3] for r in migration_rows(conn)] == want_rows
        assert integrity_ok(conn)
        conn.close()


# ---- available() ----


def test_available_reads_numbered_files_in_order(tmp_path):
    d = tmp_path / "m"
    d.mkdir()
    (d / "0002_second.sql").write_text("CREATE TABLE two(x);")
    (d / "0001_first.sql").write_text("CREATE TABLE one(x);")
    (d / "README.md").write_text("not a migration")
    (d / "3_bad_name.sql").write_text("CREATE TABLE nope(x);")
    ms = available(str(d))
    assert [(m.version, m.name) for m in ms] == [(1, "first"), (2, "second")]
    assert ms[0].checksum == hashlib.sha256(b"CREATE TABLE one(x);").hexdigest()
    (d / "0002_again.sql").write_text("CREATE TABLE again(x);")
    with pytest.raises(MigrationError):
        available(str(d))
