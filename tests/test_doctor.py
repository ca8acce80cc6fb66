"""Every derived table heals or is named, whatever another client
does to it (migration 0009, rrf_hamming_topk's H17, the open check and ``sqlite-rrf
check``; pysrc/sqlite_rrf/doctor/).

The other client is the Debian ``sqlite3`` shell without the extension. After each
tamper the default recall (pool 'quantized') must still find every episode by its
vector and agree with the exact pool 'all'; the data invariants are
tests/test_any_client.py's ``check_consistent`` (which the code before this issue also
had, so these tests fail there on their assertions, not on an import).
"""

from __future__ import annotations

import os
import shutil

import apsw
import numpy as np
import pytest
from tests.test_any_client import (
    check_blocks,
    check_consistent,
    needs_shell,
    needs_vec,
    plain,
    shell,
)

from sqlite_rrf.store import Store

DIM = 16
N = 600  # with the Store's blocks of 256: two blocks and 88 loose codes


def vecs(n: int, seed: int = 3) -> np.ndarray:
    return np.random.default_rng(seed).normal(size=(n, DIM)).astype(np.float32)


@pytest.fixture(scope="module")
def template(tmp_path_factory):
    path = tmp_path_factory.mktemp("doctor") / "t.db"
    with Store(str(path)) as s:
        s.add_many(
            [
                dict(id=f"e{i}", content=f"episode number {i} about cats", embedding=v)
                for i, v in enumerate(vecs(N))
            ]
        )
        assert s.conn.execute("SELECT count(*) FROM episodes_code_blocks").fetchall() == [(2,)]
    c = apsw.Connection(str(path))
    c.execute("PRAGMA journal_mode = DELETE")  # the shell and apsw share it plainly
    c.close()
    return path


@pytest.fixture
def db(template, tmp_path):
    return shutil.copy(template, tmp_path / "m.db")


def top(store: Store, v: np.ndarray, pool: str, limit: int = 10) -> list:
    # the ranking itself: no diversification, which may put a newer near-tie first
    res = store.recall(
        "zzzz",
        limit,
        qvec=v,
        pool=pool,
        weights=(0, 1, 0, 0),
        profile="rrf",
        touch=False,
        collapse=False,
    )
    return [h.rowid for h in res]


def found_by_vector(store: Store, rowids) -> list:
    """The rowids whose own vector does not bring them first in the default recall."""
    missing = []
    for r in rowids:
        emb = store.conn.execute("SELECT embedding FROM episodes WHERE rowid = ?", (r,)).fetchall()[
            0
        ][0]
        got = top(store, np.frombuffer(emb, "<f4"), "quantized", 1)
        if got != [r]:
            missing.append(r)
    return missing


def exact(store: Store, q: np.ndarray, limit: int = 10) -> list:
    """The top ``limit`` rowids by cosine over every usable embedding, by numpy."""
    rows = [
        (r, np.frombuffer(e, "<f4"))
        for r, e in store.conn.execute(
            "SELECT rowid, embedding FROM episodes WHERE embedding IS NOT NULL"
        )
    ]
    rows = [(r, v) for r, v in rows if len(v) == DIM and np.isfinite(v).all() and v.any()]
    cos = [float(v @ q / np.linalg.norm(v) / np.linalg.norm(q)) for _, v in rows]
    order = sorted(range(len(rows)), key=lambda i: (-cos[i], rows[i][0]))
    return [rows[i][0] for i in order[:limit]]


def agrees_with_exact(store: Store, seeds=range(5)) -> float:
    """The mean top-10 overlap of the default pool with numpy's exact cosine top 10."""
    overlaps = []
    for seed in seeds:
        q = vecs(1, 100 + seed)[0]
        a, b = top(store, q, "quantized"), exact(store, q)
        overlaps.append(len(set(a) & set(b)) / max(len(b), 1))
    return float(np.mean(overlaps))


# ---------------------------------------------------------------- part 2: blocks


@needs_shell
def test_deleting_every_block_hides_nothing(db):
    out = shell(db, "DELETE FROM episodes_code_blocks;")
    assert out.returncode == 0, out.stderr
    check_consistent(plain(db))  # the rows of the deleted blocks are loose, not dangling
    with Store(str(db)) as s:
        assert agrees_with_exact(s) == 1.0
        assert found_by_vector(s, [1, 100, 300, 599]) == []


@needs_shell
def test_clearing_the_block_column_leaves_no_stale_block(db):
    out = shell(db, "UPDATE episodes_codes SET block = NULL WHERE rowid = 7;")
    assert out.returncode == 0, out.stderr
    c = plain(db)
    check_blocks(c)  # the block of rowid 7 went whole: no block holds a loose code
    assert c.execute("SELECT count(*) FROM episodes_code_blocks").fetchall() == [(1,)]
    out = shell(db, "UPDATE episodes_codes SET block = NULL;")
    check_blocks(c)
    assert c.execute("SELECT count(*) FROM episodes_code_blocks").fetchall() == [(0,)]
    with Store(str(db)) as s:
        assert agrees_with_exact(s) == 1.0


@needs_shell
@pytest.mark.parametrize(
    "sql",
    [
        "UPDATE episodes_code_blocks SET rowids = rowids || x'01';",
        "UPDATE episodes_code_blocks SET codes = x'00';",
        "UPDATE episodes_codes SET block = 1 WHERE rowid = 599;",  # a row claims a block
        "INSERT INTO episodes_code_blocks(n, rowids, codes) SELECT n, rowids, codes "
        "FROM episodes_code_blocks;",  # a copy of a block
        "REPLACE INTO episodes_code_blocks(block, n, rowids, codes) VALUES (1, 3, x'00', x'');",
        "DELETE FROM episodes_vectors;",
        "DELETE FROM episodes_codes;",
        "INSERT INTO episodes_vectors(rowid, embedding) VALUES (99999, zeroblob(64));",
    ],
)
def test_any_write_to_the_derived_tables_keeps_them_whole(db, sql):
    out = shell(db, sql)
    assert out.returncode == 0, out.stderr
    check_consistent(plain(db))
    with Store(str(db)) as s:
        assert agrees_with_exact(s) == 1.0
        assert found_by_vector(s, [1, 300, 599]) == []


# ---------------------------------------------------------------- part 3: malformed rows


@needs_shell
@pytest.mark.parametrize(
    "sql",
    [
        "UPDATE episodes_codes SET code = x'00' WHERE rowid = 5;",  # in a block
        "UPDATE episodes_codes SET code = x'00' WHERE rowid = 590;",  # loose
        "UPDATE episodes_codes SET code = 'text' WHERE rowid = 590;",
    ],
)
def test_a_malformed_code_is_pending_not_an_error(db, sql):
    out = shell(db, sql)
    assert out.returncode == 0, out.stderr
    with Store(str(db), readonly=True) as s:  # as written: nothing recomputes it first
        assert agrees_with_exact(s) == 1.0
        assert found_by_vector(s, [5, 590]) == []


@needs_shell
@pytest.mark.parametrize(
    "sql",
    [
        # 2047 bytes: 255 whole rowids, each pending (the 256th is lost until a repair)
        "UPDATE episodes_code_blocks SET rowids = substr(rowids, 1, 2047) WHERE block = 1;",
        "UPDATE episodes_code_blocks SET codes = substr(codes, 2) WHERE block = 1;",
        "UPDATE episodes_code_blocks SET codes = 'text' WHERE block = 1;",
        "UPDATE episodes_codes SET code = x'00' WHERE rowid = 5;",
    ],
)
def test_a_malformed_row_written_without_the_triggers_is_pending(db, sql):
    """The triggers gone (a writable_schema edit): the damage stays, and a recall still
    finds every episode, the rows of a malformed block scored exactly (H17)."""
    out = shell(
        db,
        "DROP TRIGGER episodes_code_blocks_update; "
        "DROP TRIGGER episodes_codes_block_update; "
        "DROP TRIGGER episodes_codes_check_update; " + sql,
    )
    assert out.returncode == 0, out.stderr
    with Store(str(db), readonly=True) as s:
        assert any("check" in w and "--repair" in w for w in s.schema_warnings)
        res = s.recall("zzzz", 10, qvec=vecs(1, 7)[0], touch=False)
        assert len(res) == 10
        assert found_by_vector(s, [1, 5, 255]) == []
        assert agrees_with_exact(s) == 1.0


# ---------------------------------------------------------------- part 4: the schema


@needs_shell
@pytest.mark.parametrize(
    "tamper",
    [
        "DROP TRIGGER episodes_vectors_insert;",
        "PRAGMA writable_schema = ON; UPDATE sqlite_master SET sql = replace(sql, "
        "'INSERT INTO episodes_vectors(rowid, embedding) VALUES (NEW.rowid, NEW.embedding);', '') "
        "WHERE name = 'episodes_vectors_insert'; PRAGMA writable_schema = OFF;",
    ],
)
def test_a_dropped_trigger_is_noticed_and_recreated_on_open(db, tamper):
    new = vecs(5, 9)
    inserts = " ".join(
        f"INSERT INTO episodes(id, content, embedding) VALUES ('n{i}', 'new {i}', "
        f"x'{v.tobytes().hex()}');"
        for i, v in enumerate(new)
    )
    out = shell(db, tamper + "\n" + inserts)
    assert out.returncode == 0, out.stderr
    rowids = [
        r
        for (r,) in plain(db).execute(
            "SELECT rowid FROM episodes WHERE id LIKE 'n%' ORDER BY rowid"
        )
    ]
    # a read-only Store says what is wrong and how to repair it, in every recall
    with Store(str(db), readonly=True) as s:
        assert s.schema_warnings and "episodes_vectors_insert" in s.schema_warnings[0]
        res = s.recall("zzzz", 3, qvec=new[0], touch=False)
        assert any("sqlite-rrf check DB --repair" in w for w in res.warnings)
    # a writable one recreates the trigger and repairs what was written meanwhile
    with Store(str(db)) as s:
        assert s.schema_warnings == []
        assert found_by_vector(s, rowids) == []
    check_consistent(plain(db))
    out = shell(
        db,
        "INSERT INTO episodes(id, content, embedding) VALUES ('late', 'late', "
        f"x'{vecs(1, 11)[0].tobytes().hex()}');",
    )
    check_consistent(plain(db))  # the trigger is back


@needs_shell
def test_a_dropped_fts_trigger_is_recreated_and_the_index_rebuilt(db):
    out = shell(
        db,
        "DROP TRIGGER episodes_fts_insert;\n"
        "INSERT INTO episodes(id, content) VALUES ('u1', 'a unicorn grazes');",
    )
    assert out.returncode == 0, out.stderr
    c = plain(db)
    assert c.execute(
        "SELECT count(*) FROM episodes_fts WHERE episodes_fts MATCH 'unicorn'"
    ).fetchall() == [(0,)]
    with Store(str(db)) as s:
        assert s.schema_warnings == []
        assert [h.id for h in s.recall("unicorn", 1, touch=False)] == ["u1"]
    check_consistent(plain(db))


@needs_shell
@needs_vec
def test_a_dropped_knn_trigger_is_recreated_and_the_index_resynced(db):
    with Store(str(db)) as s:
        s.enable_knn()
    v = vecs(1, 13)[0]
    out = shell(
        db,
        "DROP TRIGGER episodes_vec_insert;\nINSERT INTO episodes(id, content, "
        f"embedding) VALUES ('k1', 'knn one', x'{v.tobytes().hex()}');",
        vec=True,
    )
    assert out.returncode == 0, out.stderr
    with pytest.raises(AssertionError):
        check_consistent(plain(db, vec=True))  # the knn index missed the new row
    with Store(str(db)) as s:
        assert s.schema_warnings == []
        res = s.recall(
            "zzzz",
            1,
            qvec=v,
            pool="knn",
            weights=(0, 1, 0, 0),
            profile="rrf",
            collapse=False,
            touch=False,
        )
        assert [h.id for h in res] == ["k1"]
    check_consistent(plain(db, vec=True))


@needs_shell
def test_the_open_check_does_not_wait_for_a_busy_lock(db):
    Store(str(db)).close()  # WAL: a reader opens beside a writer
    shell(db, "DROP TRIGGER episodes_vectors_insert;")
    holder = apsw.Connection(str(db))
    holder.execute("BEGIN IMMEDIATE")
    try:
        with Store(str(db), busy_timeout_ms=50) as s:
            assert "another process holds the write lock" in s.schema_warnings[0]
            assert len(s.recall("cats", 3, touch=False)) == 3
    finally:
        holder.execute("ROLLBACK")
    with Store(str(db)) as s:
        assert s.schema_warnings == []


@needs_shell
def test_a_repair_that_fails_on_open_changes_nothing_and_says_so(db):
    v = vecs(1, 17)[0]
    out = shell(
        db,
        "DROP TRIGGER episodes_vectors_insert;\n"
        "INSERT INTO episodes(id, content, embedding) VALUES ('f1', 'f one', "
        f"x'{v.tobytes().hex()}');\n"
        "CREATE TRIGGER mine BEFORE INSERT ON episodes_vectors "
        "BEGIN SELECT RAISE(ABORT, 'no vectors today'); END;",
    )
    assert out.returncode == 0, out.stderr
    with Store(str(db)) as s:
        assert "repairing it failed" in s.schema_warnings[0]
        assert "no vectors today" in s.schema_warnings[0]
        assert not s.conn.execute(
            "SELECT 1 FROM sqlite_master WHERE name = 'episodes_vectors_insert'"
        ).fetchall()  # rolled back
        res = s.recall("cats", 3, touch=False)
        assert len(res) == 3 and "repairing it failed" in res.warnings[0]


def test_a_whole_database_opens_with_no_schema_warning(db):
    with Store(str(db)) as s:
        assert s.schema_warnings == []
    with Store(str(db), readonly=True) as s:
        assert s.schema_warnings == []


# ---------------------------------------------------------------- part 5: warnings


@needs_shell
@pytest.mark.parametrize(
    "blob, why",
    [
        ("zeroblob(64)", "zero vector"),
        ("x'" + np.full(DIM, np.nan, "<f4").tobytes().hex() + "'", "nan"),
    ],
)
def test_a_vector_left_out_is_named_in_the_warnings(db, blob, why):
    out = shell(db, f"UPDATE episodes SET embedding = {blob} WHERE rowid = 42;")
    assert out.returncode == 0, out.stderr
    for readonly in (True, False):
        with Store(str(db), readonly=readonly) as s:
            for pool in ("quantized",):  # the default pool
                res = s.recall("zzzz", 5, qvec=vecs(1, 5)[0], pool=pool, touch=False)
                named = [w for w in res.warnings if "rowid 42 " in w]
                assert named and why in named[0].lower(), (pool, res.warnings)


@needs_shell
def test_the_warnings_hold_across_recalls_and_follow_another_clients_writes(db):
    """The pending vectors' check is read again only after a commit (its answer is kept
    per data_version and total_changes): a second recall still names the vector, and one
    that another client writes in between is named too."""
    with Store(str(db), readonly=True) as s:
        q = vecs(1, 5)[0]
        assert not [w for w in s.recall("zzzz", 5, qvec=q, touch=False).warnings if "rowid" in w]
        assert (
            shell(db, "UPDATE episodes SET embedding = zeroblob(64) WHERE rowid = 42;").returncode
            == 0
        )
        for _ in range(2):
            named = [
                w for w in s.recall("zzzz", 5, qvec=q, touch=False).warnings if "rowid 42 " in w
            ]
            assert len(named) == 1, named
        assert (
            shell(db, "UPDATE episodes SET embedding = zeroblob(64) WHERE rowid = 43;").returncode
            == 0
        )
        ws = s.recall("zzzz", 5, qvec=q, touch=False).warnings
        assert [w for w in ws if "rowid 42 " in w] and [w for w in ws if "rowid 43 " in w], ws


# ---------------------------------------------------------------- the full check


@needs_shell
def test_check_finds_and_repair_fixes_damage_written_without_triggers(db):
    from sqlite_rrf.cli import main
    from sqlite_rrf.doctor import check, repair

    assert check(plain(db)).ok
    out = shell(
        db,
        ";\n".join(
            [
                "PRAGMA writable_schema = ON",
                "DELETE FROM sqlite_master WHERE type = 'trigger' AND tbl_name IN "
                "('episodes_vectors', 'episodes_codes', 'episodes_code_blocks')",
                "PRAGMA writable_schema = OFF",
            ]
        )
        + ";",
    )
    assert out.returncode == 0, out.stderr
    out = shell(
        db,
        ";\n".join(
            [
                "DELETE FROM episodes_vectors WHERE rowid IN (3, 4)",
                "UPDATE episodes_vectors SET embedding = zeroblob(64) WHERE rowid = 5",
                "DELETE FROM episodes_codes WHERE rowid = 6",
                "UPDATE episodes_codes SET code = x'0000' WHERE rowid = 300",
                "UPDATE episodes_codes SET block = NULL WHERE rowid = 10",
                "DELETE FROM episodes_code_blocks WHERE block = 2",
                "INSERT INTO episodes_codes(rowid, code) VALUES (77777, NULL)",
                "INSERT INTO episodes_fts(rowid, content) VALUES (5, 'phantom words')",
            ]
        )
        + ";",
    )
    assert out.returncode == 0, out.stderr
    c = plain(db)
    with pytest.raises((AssertionError, apsw.CorruptError)):
        check_consistent(c)
    report = check(c)
    parts = {f.part for f in report.findings}
    assert parts >= {"schema", "vectors", "codes", "blocks", "fts"}, report.findings
    assert main(["check", str(db)]) == 1
    assert main(["check", str(db), "--repair"]) == 0
    check_consistent(plain(db))
    assert check(plain(db)).ok and repair(plain(db)).repaired == []
    with Store(str(db)) as s:
        assert found_by_vector(s, [3, 4, 5, 6, 10, 300, 520]) == []


@needs_shell
def test_check_names_a_vector_it_cannot_repair(db):
    from sqlite_rrf.doctor import check

    shell(db, "UPDATE episodes SET embedding = zeroblob(64) WHERE rowid = 8;")
    report = check(plain(db))
    assert [f.part for f in report.findings] == ["embeddings"]
    assert "rowid 8 " in report.findings[0].message and not report.findings[0].repairable


def test_check_refuses_another_applications_file_and_a_read_only_repair(tmp_path, capsys):
    from sqlite_rrf.cli import main

    other = tmp_path / "other.db"
    c = apsw.Connection(str(other))
    c.execute("CREATE TABLE notes(x)")
    c.close()
    before = other.read_bytes()
    assert main(["check", str(other), "--repair"]) != 0
    assert "not a sqlite-rrf database" in capsys.readouterr().err
    assert other.read_bytes() == before  # nothing written: no migration, no WAL
    db = tmp_path / "ro.db"
    Store(str(db)).close()
    db.chmod(0o444)
    try:
        if os.access(db, os.W_OK):
            pytest.skip("running as a user who may write a read-only file (root)")
        assert main(["check", str(db), "--repair"]) != 0
        err = capsys.readouterr().err
        assert "--repair cannot write it" in err and "Error" not in err
    finally:
        db.chmod(0o644)


def test_the_shipped_schema_objects_are_current():
    """sql/schema_objects.sql is what the migrations make (opening a Store reads it instead
    of migrating an in-memory database)."""
    from sqlite_rrf.core.sql_files import read_sql
    from sqlite_rrf.doctor import SCHEMA_FILE, render_expected

    assert read_sql(SCHEMA_FILE) == render_expected(), (
        f"sql/{SCHEMA_FILE} is stale (a migration was added or changed): run "
        "`.venv/bin/python -m sqlite_rrf.doctor --write`"
    )


def test_schema_objects_of_other_migrations_are_not_used():
    from sqlite_rrf import doctor
    from sqlite_rrf.doctor import schema

    assert schema._shipped("0" * 64) is None
    assert schema._expected("0" * 64) == doctor.build_expected()
    assert set(doctor.expected_objects()) >= {
        "episodes_vectors_insert",
        "episodes_codes_keep",
        "idx_episodes_codes_loose",
    }
