"""Sign codes packed in blocks (migration 0008): the triggers that dissolve a
block whatever client writes, the Store's packing, and the quantized pool, which must
give exactly the rowids it gives without blocks.

The references: ``check_blocks`` (tests/test_any_client.py: every block holds exactly
the current codes of its rows), numpy for the Hamming stage (the top pool_size *
oversample codes by (distance, rowid), plus every pending row, filters applied), and the
same statement on the same database with the blocks dropped.
"""

from __future__ import annotations

import random
import shutil
import subprocess

import apsw
import numpy as np
import pytest
from tests.bench.bench_recall import split_ctes
from tests.test_any_client import SHELL, check_blocks, check_consistent, needs_shell, plain

from sqlite_rrf.core.options import RecallOptions
from sqlite_rrf.core.sql_files import statement_params
from sqlite_rrf.core.statements import recall_statement
from sqlite_rrf.store import Store

DIM = 24
POOL_SIZE, OVERSAMPLE = 5, 4  # a Hamming stage of 20 codes


def vec(rng) -> np.ndarray:
    return rng.normal(size=DIM).astype(np.float32)


def make_store(path, n: int = 60, seed: int = 1, block: int = 8) -> Store:
    rng = np.random.default_rng(seed)
    s = Store(str(path))
    s.CODE_BLOCK = block
    s.add_many(
        [
            dict(
                id=f"e{i}",
                content=f"episode {i} cat",
                embedding=vec(rng),
                scope="a" if i % 3 else "b",
                created_at=1000 + i,
            )
            for i in range(n)
        ]
    )
    return s


def blocks(conn) -> dict:
    return dict(conn.execute("SELECT block, n FROM episodes_code_blocks"))


def stage_sql(cte: str) -> str:
    ctes, _ = split_ctes(recall_statement("quantized", "hybrid"))
    names = [c for c, _ in ctes]
    return (
        "WITH "
        + ",\n".join(b for _, b in ctes[: names.index(cte) + 1])
        + f"\nSELECT rowid FROM {cte}"
    )


CODES_SQL = stage_sql("pool_codes")
POOL_SQL = stage_sql("pool_quantized")


def bindings(qvec: bytes, **filters) -> dict:
    d = RecallOptions(
        limit=3, pool="quantized", pool_size=POOL_SIZE, oversample=OVERSAMPLE, **filters
    ).params()
    d.update(query="cat", qvec=qvec)
    return d


def ref_codes(conn, qvec: bytes, scope=None, since=None) -> list:
    """The Hamming stage by numpy: the top POOL_SIZE * OVERSAMPLE codes by (distance,
    rowid), then every pending row, among the rows the filters let through."""
    q = np.packbits(np.frombuffer(qvec, "<f4") > 0, bitorder="little")
    scored, pending = [], []
    for r, code, sc, created in conn.execute(
        "SELECT c.rowid, c.code, e.scope, e.created_at FROM episodes_codes AS c "
        "JOIN episodes AS e USING (rowid)"
    ):
        if (scope is not None and sc != scope) or (since is not None and created < since):
            continue
        if code is None:
            pending.append(r)
        else:
            d = int(np.unpackbits(np.frombuffer(code, np.uint8) ^ q).sum())
            scored.append((d, r))
    return sorted(r for _, r in sorted(scored)[: POOL_SIZE * OVERSAMPLE]) + sorted(pending)


def rows(conn, sql: str, b: dict) -> list:
    # every parameter the stage names is bound (None: the statement's default)
    return [r for (r,) in conn.execute(sql, {**dict.fromkeys(statement_params(sql)), **b})]


def without_blocks(conn, sql: str, b: dict) -> list:
    """``sql`` on the same rows with every block dissolved (rolled back after)."""
    conn.execute("SAVEPOINT noblocks")
    try:
        conn.execute("DELETE FROM episodes_code_blocks")
        conn.execute("UPDATE episodes_codes SET block = NULL")
        return rows(conn, sql, b)
    finally:
        conn.execute("ROLLBACK TO noblocks")
        conn.execute("RELEASE noblocks")


# ---------------------------------------------------------------- the Store packs


def test_store_packs_full_blocks_in_rowid_order(tmp_path):
    s = make_store(tmp_path / "s.db", n=60, block=8)
    conn = s.conn
    assert blocks(conn) == {b: 8 for b in blocks(conn)} and len(blocks(conn)) == 7
    loose = [
        r
        for (r,) in conn.execute(
            "SELECT rowid FROM episodes_codes WHERE block IS NULL ORDER BY rowid"
        )
    ]
    assert loose == list(range(57, 61))  # the last 4: fewer than a block
    first = conn.execute(
        "SELECT rowids FROM episodes_code_blocks ORDER BY block LIMIT 1"
    ).fetchall()[0][0]
    assert np.frombuffer(first, "<i8").tolist() == list(range(1, 9))
    check_blocks(conn)
    # more loose codes: packed by the next write
    s.add_many(
        [dict(content=f"x{i}", embedding=vec(np.random.default_rng(5 + i))) for i in range(4)]
    )
    assert len(blocks(conn)) == 8 and conn.execute(
        "SELECT count(*) FROM episodes_codes WHERE block IS NULL"
    ).fetchall() == [(0,)]
    check_consistent(conn)
    with pytest.raises(ValueError):
        s.pack_codes(block=0)
    s.close()


def test_pack_codes_packs_what_another_client_left_loose(tmp_path):
    s = make_store(tmp_path / "s.db", n=20, block=8)
    s.close()
    c = plain(tmp_path / "s.db")
    c.execute("DELETE FROM episodes WHERE id = 'e3'")  # dissolves block 1
    c.close()
    s = Store(str(tmp_path / "s.db"))  # opening packs (CODE_BLOCK 256: nothing to pack)
    assert len(blocks(s.conn)) == 1
    # 11 loose: 1..8 but 4 (the dissolved block) and 17..20 -> two blocks of 4, 3 left
    assert s.pack_codes(block=4) == 8
    assert len(blocks(s.conn)) == 3
    check_consistent(s.conn)
    s.close()


# ---------------------------------------------------------------- the triggers (no extension)

WRITES = [
    # (statement, the rowids whose blocks it dissolves); blocks of 8: rowids 1..8, 9..16, ...
    ("DELETE FROM episodes WHERE rowid = 3", {3}),
    ("UPDATE episodes SET embedding = ({v}) WHERE rowid = 2", {2}),
    ("UPDATE episodes SET content = 'dog' WHERE rowid = 2", set()),
    ("UPDATE episodes SET embedding = embedding WHERE rowid = 2", set()),
    ("UPDATE episodes SET rowid = 5000 WHERE rowid = 12", {12}),
    ("INSERT OR REPLACE INTO episodes(id, content, embedding) VALUES ('e0', 'new', ({v}))", {1}),
    ("INSERT OR REPLACE INTO episodes(rowid, id, content) VALUES (22, 'zz', 'no vector')", {22}),
    ("INSERT OR IGNORE INTO episodes(rowid, id, content) VALUES (22, 'zz', 'ignored')", set()),
    ("UPDATE OR REPLACE episodes SET rowid = 26 WHERE rowid = 35", {26, 35}),
    ("UPDATE OR IGNORE episodes SET rowid = 26 WHERE rowid = 35", set()),
    ("UPDATE episodes_codes SET code = NULL WHERE rowid = 5", {5}),
    ("UPDATE episodes_codes SET code = code WHERE rowid = 5", set()),
    ("INSERT OR REPLACE INTO episodes_codes(rowid, code) VALUES (13, NULL)", {13}),
    # migration 0009: an insert at a rowid that has a code row only makes it pending
    (
        "REPLACE INTO episodes_codes(rowid, code, block) VALUES (30, NULL, "
        "(SELECT block FROM episodes_codes WHERE rowid = 44))",
        {30},
    ),
    ("DELETE FROM episodes WHERE rowid > 40", {41}),
]


@pytest.fixture(scope="module")
def template(tmp_path_factory):
    path = tmp_path_factory.mktemp("blocks") / "t.db"
    s = make_store(path, n=48, block=8)  # 6 full blocks, nothing loose
    s.close()
    c = apsw.Connection(str(path))
    c.execute("PRAGMA journal_mode = DELETE")
    c.close()
    return path


def block_of(conn, rowid: int):
    got = conn.execute("SELECT block FROM episodes_codes WHERE rowid = ?", (rowid,)).fetchall()
    return got[0][0] if got else None


@pytest.mark.parametrize("recursive", [False, True], ids=["recursive_off", "recursive_on"])
@pytest.mark.parametrize("sql, touched", WRITES, ids=[w[0][:50] for w in WRITES])
def test_a_write_through_apsw_dissolves_exactly_the_blocks_it_touches(
    template, tmp_path, sql, touched, recursive
):
    db = tmp_path / "c.db"
    shutil.copy(template, db)
    c = plain(db, recursive=recursive)
    before = blocks(c)
    assert len(before) == 6 and set(before.values()) == {8}
    want_gone = {block_of(c, r) for r in touched}
    assert None not in want_gone
    v = "X'" + np.ones(DIM, "<f4").tobytes().hex() + "'"
    c.execute(sql.replace("{v}", v))
    assert set(before) - set(blocks(c)) == want_gone
    check_consistent(c)
    # the quantized pool agrees with the reference after the write
    with Store(str(db)) as s:
        q = vec(np.random.default_rng(9)).tobytes()
        assert sorted(rows(s.conn, CODES_SQL, bindings(q))) == sorted(ref_codes(s.conn, q))


@needs_shell
def test_the_writes_through_the_sqlite3_shell_without_the_extension(template, tmp_path):
    db = tmp_path / "c.db"
    shutil.copy(template, db)
    v = "X'" + np.ones(DIM, "<f4").tobytes().hex() + "'"
    script = ";\n".join(sql.replace("{v}", v) for sql, _ in WRITES) + ";\n"
    out = subprocess.run(
        [SHELL, "-batch", str(db)], input=script, text=True, capture_output=True, timeout=60
    )
    assert out.returncode == 0 and not out.stderr, out.stderr
    c = plain(db)
    check_consistent(c)
    assert len(blocks(c)) < 6
    with Store(str(db)) as s:
        q = vec(np.random.default_rng(10)).tobytes()
        assert sorted(rows(s.conn, CODES_SQL, bindings(q))) == sorted(ref_codes(s.conn, q))


def test_control_check_blocks_sees_a_stale_or_missing_block(template, tmp_path):
    db = tmp_path / "c.db"
    shutil.copy(template, db)
    c = plain(db)
    c.execute("DROP TRIGGER episodes_codes_block_update")
    code = c.execute("SELECT code FROM episodes_codes WHERE rowid = 5").fetchall()[0][0]
    c.execute(
        "UPDATE episodes_codes SET code = ? WHERE rowid = 5",  # a code of its size
        (bytes(b ^ 0xFF for b in code),),
    )
    with pytest.raises(AssertionError, match="not its rows' current codes"):
        check_blocks(c)
    c2 = plain(shutil.copy(template, tmp_path / "d.db"))
    c2.execute("DROP TRIGGER episodes_code_blocks_delete")  # migration 0009's
    c2.execute(
        "DELETE FROM episodes_code_blocks WHERE block = (SELECT block FROM "
        "episodes_codes WHERE rowid = 1)"
    )
    with pytest.raises(AssertionError, match="does not exist"):
        check_blocks(c2)


# ---------------------------------------------------------------- the pool, exactly


@pytest.mark.parametrize("seed", range(4))
def test_the_quantized_pool_with_blocks_is_the_pool_without_them(tmp_path, seed):
    """Random writes (through the Store and a plain client), re-packing now and then;
    after each step the Hamming stage equals numpy's and both stages equal the same
    statement's with the blocks dropped, with and without filters."""
    rng = np.random.default_rng(seed)
    pick = random.Random(seed)
    s = make_store(tmp_path / "s.db", n=150, seed=seed, block=16)
    other = plain(tmp_path / "s.db")
    next_id = 1000
    for step in range(25):
        op = pick.choice(
            ["add", "delete", "embed", "plain_delete", "plain_embed", "plain_add", "pack"]
        )
        ids = [r for (r,) in s.conn.execute("SELECT id FROM episodes")]
        if op == "add":
            s.add_many(
                [
                    dict(
                        content="more cat",
                        embedding=vec(rng),
                        scope=pick.choice("ab"),
                        created_at=1000 + step,
                    )
                    for _ in range(pick.randint(1, 20))
                ]
            )
        elif op == "delete" and ids:
            s.delete(pick.choice(ids))
        elif op == "embed" and ids:
            s.upsert("changed cat", id=pick.choice(ids), embedding=vec(rng))
        elif op == "plain_delete":
            other.execute(
                "DELETE FROM episodes WHERE rowid IN (SELECT rowid FROM episodes "
                "ORDER BY random() LIMIT 3)"
            )
        elif op == "plain_embed":  # a pending code: scored exactly, always in the stage
            other.execute(
                "UPDATE episodes SET embedding = ? WHERE rowid = (SELECT rowid "
                "FROM episodes ORDER BY random() LIMIT 1)",
                (vec(rng).tobytes(),),
            )
        elif op == "plain_add":
            next_id += 1
            other.execute(
                "INSERT INTO episodes(id, content, embedding, scope) VALUES "
                "(?, 'plain cat', ?, 'a')",
                (f"p{next_id}", vec(rng).tobytes()),
            )
        else:
            s.pack_codes(block=pick.choice([4, 16, 32]))
        check_consistent(s.conn)
        q = vec(rng).tobytes()
        for filters in ({}, {"scope": "a"}, {"since": 1050}):
            b = bindings(q, **filters)
            got = rows(s.conn, CODES_SQL, b)
            assert sorted(got) == sorted(ref_codes(s.conn, q, **filters)), (step, op, filters)
            assert got == without_blocks(s.conn, CODES_SQL, b), (step, op, filters)
            assert sorted(rows(s.conn, POOL_SQL, b)) == sorted(
                without_blocks(s.conn, POOL_SQL, b)
            ), (step, op, filters)
    assert blocks(s.conn), "the sequence left no block: it tested nothing"
    other.close()
    s.close()


def test_opening_a_store_with_nothing_to_do_takes_no_write_lock(tmp_path):
    """Opening a Store whose codes are all computed and packed reads only: it opens (and
    recalls) while another connection holds the write lock."""
    from sqlite_rrf.store import Store

    db = tmp_path / "lock.db"
    with Store(db) as s:
        s.add_many(
            [
                {"content": f"episode {i} words", "embedding": [1.0, float(i % 7), 0.5]}
                for i in range(40)
            ]
        )
    holder = apsw.Connection(str(db))
    holder.execute("BEGIN IMMEDIATE")
    try:
        with Store(db, busy_timeout_ms=50) as s:
            assert len(s.recall("episode words", touch=False)) == 3
    finally:
        holder.execute("ROLLBACK")
