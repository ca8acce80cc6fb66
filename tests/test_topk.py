"""rrf_topk(k, score, value) against Python's sorted() (csrc/topk.c T1..T8).

The reference: the rows with a score, sorted by (-score, value), the first k of them, as
[value, score] pairs.
"""

from __future__ import annotations

import json
import math
import re

import apsw
import numpy as np
import pytest

import sqlite_rrf


def ref_topk(k, rows):
    kept = [(v, s) for s, v in rows if s is not None]
    kept.sort(key=lambda p: (-float(p[1]), p[0]))
    return [[v, s] for v, s in kept[:k]] or None


def topk(conn, k, rows, table="t"):
    conn.execute(f"DROP TABLE IF EXISTS {table}")
    conn.execute(f"CREATE TABLE {table}(s, v)")
    conn.executemany(f"INSERT INTO {table} VALUES (?, ?)", rows)
    got = conn.execute(f"SELECT rrf_topk(?, s, v) FROM {table}", (k,)).fetchone()[0]
    return None if got is None else json.loads(got)


def sql_error(msg: str):
    return pytest.raises(apsw.SQLError, match=re.escape(msg))


# ---------------------------------------------------------------- T1, T2: against sorted()


@pytest.mark.parametrize("seed", range(12))
def test_T1_T2_random_rows_with_ties_and_nulls(conn, seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 3000))
    # few distinct scores, so ties are common; some NULL scores; values shuffled
    scores = rng.integers(-20, 20, n).astype(float) / 4
    values = rng.permutation(n * 3)[:n]
    rows = [(None if rng.random() < 0.1 else float(s), int(v)) for s, v in zip(scores, values)]
    for k in [1, 2, 7, 50, n, n + 10, 1000000]:
        assert topk(conn, k, rows) == ref_topk(k, rows), (n, k)


def test_T1_real_scores_round_trip_exactly(conn):
    rng = np.random.default_rng(1)
    rows = [
        (float(s), i)
        for i, s in enumerate(rng.standard_normal(5000) * 10.0 ** rng.integers(-300, 300, 5000))
    ]
    rows += [
        (5e-324, 9000),
        (-1.7976931348623157e308, 9001),
        (1.7976931348623157e308, 9002),
        (0.1, 9003),
        (1 / 3, 9004),
        (-0.0, 9005),
    ]
    got = topk(conn, 6000, rows)
    assert got == ref_topk(6000, rows)
    for (v, s), (rv, rs) in zip(got, ref_topk(6000, rows)):
        assert (s == rs and math.copysign(1, s) == math.copysign(1, rs)) or s == rs == 0


def test_T1_integer_scores_stay_integers(conn):
    rows = [(-37, 1), (-12, 2), (-12, 3), (5, 4), (2**62, 5)]
    text = conn.execute(
        "SELECT rrf_topk(3, s, v) FROM (SELECT ? s, ? v UNION ALL SELECT ?, ? "
        "UNION ALL SELECT ?, ? UNION ALL SELECT ?, ? UNION ALL SELECT ?, ?)",
        [x for r in rows for x in r],
    ).fetchone()[0]
    assert text == f"[[5,{2**62}],[4,5],[2,-12]]"


def test_T1_ties_keep_the_smaller_values_whatever_the_order(conn):
    rows = [(1.0, v) for v in [9, 3, 7, 1, 5, 2, 8]]
    assert topk(conn, 3, rows) == [[1, 1.0], [2, 1.0], [3, 1.0]]
    assert topk(conn, 3, list(reversed(rows))) == [[1, 1.0], [2, 1.0], [3, 1.0]]
    # int and real scores that are equal tie, and compare as numbers
    assert topk(conn, 2, [(1, 5), (1.0, 4), (0.5, 1)]) == [[4, 1.0], [5, 1]]


def test_T2_no_scores_gives_null(conn):
    assert topk(conn, 5, [(None, 1), (None, 2)]) is None
    assert conn.execute("SELECT rrf_topk(5, 1.0, 1) WHERE 0").fetchone()[0] is None


def test_T2_group_by(conn):
    conn.execute("CREATE TABLE g(grp, s, v)")
    conn.executemany(
        "INSERT INTO g VALUES (?, ?, ?)", [(i % 3, float((i * 7) % 11), i) for i in range(60)]
    )
    got = dict(conn.execute("SELECT grp, rrf_topk(4, s, v) FROM g GROUP BY grp").fetchall())
    for grp in range(3):
        rows = [(float((i * 7) % 11), i) for i in range(60) if i % 3 == grp]
        assert json.loads(got[grp]) == ref_topk(4, rows)


def test_T1_huge_n_100k_rows(conn):
    rng = np.random.default_rng(100)
    n = 100_000
    scores = rng.standard_normal(n)
    rows = [(float(s), i + 1) for i, s in enumerate(scores)]
    for k in [1, 200, 2000]:
        assert topk(conn, k, rows) == ref_topk(k, rows)
    # the use it is made for: the top 200 rowids by vec_cosine, in one scan
    dim = 16
    vecs = rng.standard_normal((2000, dim)).astype("<f4")
    q = rng.standard_normal(dim).astype("<f4")
    conn.execute("CREATE TABLE vectors(rowid INTEGER PRIMARY KEY, embedding BLOB)")
    conn.executemany(
        "INSERT INTO vectors VALUES (?, ?)", [(i + 1, v.tobytes()) for i, v in enumerate(vecs)]
    )
    got = json.loads(
        conn.execute(
            "SELECT rrf_topk(200, vec_cosine(embedding, ?), rowid) FROM vectors", (q.tobytes(),)
        ).fetchone()[0]
    )
    order = conn.execute(
        "SELECT rowid, vec_cosine(embedding, ?) AS c FROM vectors ORDER BY c DESC, rowid LIMIT 200",
        (q.tobytes(),),
    ).fetchall()
    assert got == [list(r) for r in order]
    # and unpacked with json_each
    ids = [
        r[0]
        for r in conn.execute(
            "SELECT j.value ->> 0 FROM json_each((SELECT rrf_topk(200, vec_cosine(embedding, ?), "
            "rowid) FROM vectors)) j",
            (q.tobytes(),),
        )
    ]
    assert ids == [r[0] for r in order]


# ---------------------------------------------------------------- T3..T6: errors


@pytest.mark.parametrize(
    "k, msg",
    [
        (0, "rrf_topk: k must be an INTEGER from 1 to 1000000, got 0"),
        (-3, "rrf_topk: k must be an INTEGER from 1 to 1000000, got -3"),
        (1000001, "rrf_topk: k must be an INTEGER from 1 to 1000000, got 1000001"),
        (2.0, "rrf_topk: k must be an INTEGER from 1 to 1000000, got REAL"),
        ("5", "rrf_topk: k must be an INTEGER from 1 to 1000000, got TEXT"),
        (None, "rrf_topk: k must be an INTEGER from 1 to 1000000, got NULL"),
    ],
)
def test_T3_bad_k(conn, k, msg):
    with sql_error(msg):
        conn.execute("SELECT rrf_topk(?, 1.0, 1)", (k,)).fetchall()


def test_T3_k_must_not_change_between_rows(conn):
    conn.execute("CREATE TABLE t(k, s, v)")
    conn.executemany("INSERT INTO t VALUES (?, ?, ?)", [(3, 1.0, 1), (3, None, 2), (4, 2.0, 3)])
    with sql_error("rrf_topk: k must be the same on every row (3, then 4)"):
        conn.execute("SELECT rrf_topk(k, s, v) FROM t").fetchall()
    # a NULL score does not hide a changed k
    conn.execute("UPDATE t SET k = 5 WHERE v = 2")
    with sql_error("rrf_topk: k must be the same on every row (3, then 5)"):
        conn.execute("SELECT rrf_topk(k, s, v) FROM t").fetchall()


@pytest.mark.parametrize(
    "score, value, msg",
    [
        ("x", 1, "rrf_topk: score must be a number, got TEXT"),
        (b"\x01", 1, "rrf_topk: score must be a number, got BLOB"),
        (float("inf"), 1, "rrf_topk: score must be finite, got Inf"),
        (float("-inf"), 1, "rrf_topk: score must be finite, got -Inf"),
        (1.0, None, "rrf_topk: value must be an INTEGER, got NULL"),
        (1.0, "a", "rrf_topk: value must be an INTEGER, got TEXT"),
        (1.0, 2.5, "rrf_topk: value must be an INTEGER, got REAL"),
    ],
)
def test_T4_T5_T6_bad_score_or_value(conn, score, value, msg):
    with sql_error(msg):
        conn.execute("SELECT rrf_topk(3, ?, ?)", (score, value)).fetchall()


def test_T5_value_of_a_row_without_score_is_not_checked(conn):
    assert conn.execute("SELECT rrf_topk(3, NULL, 'text')").fetchone()[0] is None


def test_T6_an_error_stops_the_scan_at_the_bad_row(conn):
    conn.execute("CREATE TABLE t(s, v)")
    conn.executemany("INSERT INTO t VALUES (?, ?)", [(1.0, 1), ("bad", 2), (3.0, 3)])
    with sql_error("rrf_topk: score must be a number, got TEXT"):
        conn.execute("SELECT rrf_topk(2, s, v) FROM t").fetchall()
    # the connection is fine afterwards
    assert json.loads(
        conn.execute("SELECT rrf_topk(2, s, v) FROM t WHERE v != 2").fetchone()[0]
    ) == [[3, 3.0], [1, 1.0]]


def test_T6_result_longer_than_the_length_limit(conn):
    conn.execute("CREATE TABLE t(s, v)")
    conn.executemany("INSERT INTO t VALUES (?, ?)", [(i / 7, i) for i in range(2000)])
    conn.limit(apsw.SQLITE_LIMIT_LENGTH, 1000)
    with pytest.raises(
        apsw.TooBigError,
        match=re.escape("rrf_topk: the result is longer than SQLITE_LIMIT_LENGTH (1000 bytes)"),
    ):
        conn.execute("SELECT rrf_topk(200, s, v) FROM t").fetchall()


# ---------------------------------------------------------------- T7, T8


def test_T7_large_k_over_few_rows_allocates_for_the_rows(conn):
    """k = 1,000,000 over 3 rows: the heap grows with the rows kept (T7). SQLite's
    high-water mark of memory stays far below what a million entries would need."""
    before = apsw.status(apsw.SQLITE_STATUS_MEMORY_USED)[0]
    apsw.status(apsw.SQLITE_STATUS_MEMORY_USED, True)  # reset the high-water mark
    got = json.loads(
        conn.execute(
            "SELECT rrf_topk(1000000, s, v) FROM (SELECT 1.0 s, 1 v "
            "UNION ALL SELECT 2.0, 2 UNION ALL SELECT 0.5, 3)"
        ).fetchone()[0]
    )
    assert got == [[2, 2.0], [1, 1.0], [3, 0.5]]
    high = apsw.status(apsw.SQLITE_STATUS_MEMORY_USED)[1]
    assert high - before < 1_000_000  # a million 32-byte entries would be 32 MB


def test_T8_registered_as_an_innocuous_aggregate_not_a_window_function():
    c = apsw.Connection(":memory:")
    sqlite_rrf.load(c)
    rows = c.execute(
        "SELECT type, narg, flags FROM pragma_function_list WHERE name = 'rrf_topk'"
    ).fetchall()
    assert len(rows) == 1
    type_, narg, flags = rows[0]
    assert type_ == "a" and narg == 3
    assert flags & apsw.SQLITE_INNOCUOUS and not flags & apsw.SQLITE_DETERMINISTIC
    with pytest.raises(apsw.SQLError):
        c.execute("SELECT rrf_topk(1, 1.0, 1) OVER () ").fetchall()
