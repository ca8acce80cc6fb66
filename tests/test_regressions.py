"""Regression tests for faults found by fuzzing (tests/fuzz/), by the hostile-input
matrix (tests/test_hostile_matrix.py) and by reading csrc/ while writing them.

Each test names the fault it pins; the expectation is exact (a value, a JSON text
or an error message). A fuzzer's crashing input is kept in tests/fuzz/corpus/.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys

import apsw
import pytest

DBL_MAX = 1.7976931348623157e308
OVERFLOW_FUSE = "rrf_fuse: the sum of contributions overflows a double (weights too large)"
OVERFLOW_EXPLAIN = "rrf_explain: the sum of contributions overflows a double (weights too large)"

TWO_HUGE_ROWS = (
    "(SELECT 1 AS n, 1 AS r, 1.7976931348623157e308 AS w UNION ALL "
    "SELECT 2, 1, 1.7976931348623157e308)"
)


def _err(conn, sql, params=()):
    with pytest.raises(apsw.Error) as e:
        conn.execute(sql, params).fetchall()
    return e.value


# ---------------------------------------------------------------- rrf_fuse (F4, F5)


def test_rrf_fuse_sum_overflow_is_an_error_not_null(conn):
    """fuzz_fuse, tests/fuzz/corpus/fuzz_fuse/crash-fuse-overflow-nan-null: two
    contributions of DBL_MAX made the Neumaier sum Inf, then NaN (Inf - Inf in the
    compensation), which SQLite returns as NULL: a group in which rows contributed
    came back as 'in no list' (F5). Now an error naming the function (F4)."""
    e = _err(conn, f"SELECT rrf_fuse(r, w, 0) FROM {TWO_HUGE_ROWS}")
    assert isinstance(e, apsw.SQLError)
    assert str(e) == OVERFLOW_FUSE


def test_rrf_fuse_window_overflow_is_an_error(conn):
    e = _err(conn, f"SELECT rrf_fuse(r, w, 0) OVER (ORDER BY n) FROM {TWO_HUGE_ROWS}")
    assert str(e) == OVERFLOW_FUSE


def test_rrf_fuse_largest_finite_sum_is_still_a_value(conn):
    """The check is on the sum, not the size of a weight: frames of one DBL_MAX row
    each, and one DBL_MAX contribution, are values."""
    rows = conn.execute(
        "SELECT rrf_fuse(r, w, 0) OVER (ORDER BY n ROWS BETWEEN CURRENT ROW AND CURRENT ROW) "
        f"FROM {TWO_HUGE_ROWS}"
    ).fetchall()
    assert rows == [(DBL_MAX,), (DBL_MAX,)]
    assert conn.execute("SELECT rrf_fuse(1, 1.7976931348623157e308, 0)").fetchall() == [(DBL_MAX,)]


# ----------------------------------------------------------- rrf_explain (F4, F7)


def test_rrf_explain_sum_overflow_is_an_error_not_invalid_json(conn):
    """The same rows made rrf_explain print "contribution":Inf, which is not JSON
    (json_valid() = 0). Now the same error as rrf_fuse, naming rrf_explain."""
    e = _err(conn, f"SELECT rrf_explain('bm25', r, w, 0) FROM {TWO_HUGE_ROWS}")
    assert str(e) == OVERFLOW_EXPLAIN
    # Two lists: each sum is finite, the total is not; rrf_fuse over the same rows
    # fails, so rrf_explain fails too (the contributions add up to rrf_fuse, F7).
    e = _err(
        conn,
        "SELECT rrf_explain(l, r, w, 0) FROM (SELECT 'a' AS l, 1 AS r, "
        "1.7976931348623157e308 AS w UNION ALL SELECT 'b', 1, 1.7976931348623157e308)",
    )
    assert str(e) == OVERFLOW_EXPLAIN


def test_rrf_explain_prints_values_near_dbl_max_that_read_back_finite(conn):
    """With 15 significant digits DBL_MAX printed as 1.79769313486232e+308, which
    is past DBL_MAX: JSON readers (json_extract, Python) got Inf back."""
    (text,) = conn.execute("SELECT rrf_explain('bm25', 1, 1.7976931348623157e308, 0)").fetchone()
    assert text == (
        '{"bm25":{"rank":1,"weight":1.7976931348623157e+308,'
        '"contribution":1.7976931348623157e+308}}'
    )
    assert json.loads(text)["bm25"]["contribution"] == DBL_MAX
    assert conn.execute(
        "SELECT json_extract(?, '$.bm25.weight') = 1.7976931348623157e308", (text,)
    ).fetchone() == (1,)
    # Ordinary values keep the documented 15 digits.
    assert conn.execute("SELECT rrf_explain('bm25', 3)").fetchone() == (
        '{"bm25":{"rank":3,"weight":1.0,"contribution":0.0158730158730159}}',
    )


def test_rrf_explain_invalid_utf8_list_gives_valid_utf8_json(conn):
    """Hostile matrix: a TEXT list holding invalid UTF-8 (CAST(x'ff80' AS TEXT))
    was copied byte for byte into the JSON, so the result could not be decoded
    (apsw raised UnicodeDecodeError). Invalid sequences now become \\ufffd;
    valid multi-byte characters are kept as they are."""
    (text,) = conn.execute("SELECT rrf_explain(CAST(x'ff80' AS TEXT), 1)").fetchone()
    assert text == '{"\\ufffd\\ufffd":{"rank":1,"weight":1.0,"contribution":0.0163934426229508}}'
    (text,) = conn.execute(
        "SELECT rrf_explain(CAST(x'62ff6dc3a9e697' AS TEXT), 3, 2, 0)"
    ).fetchone()
    assert (
        text
        == '{"b\\ufffdmé\\ufffd\\ufffd":{"rank":3,"weight":2.0,"contribution":0.666666666666667}}'
    )
    # Surrogates and overlong forms are invalid too.
    (text,) = conn.execute("SELECT rrf_explain(CAST(x'eda080c0af' AS TEXT), 1, 1, 0)").fetchone()
    assert json.loads(text) == {"\ufffd" * 5: {"rank": 1, "weight": 1.0, "contribution": 1.0}}


# -------------------------------------------------- SQLITE_LIMIT_LENGTH (Q6, F7)


def test_fts5_query_longer_than_limit_length_is_toobig_naming_the_function(conn):
    """A result past the connection's SQLITE_LIMIT_LENGTH was reported as 'out of
    memory' (sqlite3_str's SQLITE_TOOBIG taken for SQLITE_NOMEM)."""
    conn.limit(apsw.SQLITE_LIMIT_LENGTH, 1000)
    text = " ".join(f"w{i}" for i in range(200))  # 889 bytes in, ~2000 out
    e = _err(conn, "SELECT fts5_query(?)", (text,))
    assert isinstance(e, apsw.TooBigError)
    assert str(e) == "fts5_query: the result is longer than SQLITE_LIMIT_LENGTH (1000 bytes)"
    assert conn.execute("SELECT fts5_query('a b')").fetchone() == ('"a" OR "b"',)


def test_rrf_explain_longer_than_limit_length_is_toobig_naming_the_function(conn):
    conn.limit(apsw.SQLITE_LIMIT_LENGTH, 1000)
    e = _err(
        conn,
        "WITH RECURSIVE s(v) AS (SELECT 1 UNION ALL SELECT v + 1 FROM s WHERE v < 100) "
        "SELECT rrf_explain(printf('l%d', v), 1) FROM s",
    )
    assert isinstance(e, apsw.TooBigError)
    assert str(e) == "rrf_explain: the result is longer than SQLITE_LIMIT_LENGTH (1000 bytes)"


# --------------------------------------------------------- vec_cosine JSON (V1)


def test_vec_cosine_json_exponent_is_exact_past_a_million_digits(conn):
    """json_number stopped reading exponent digits at 100000, while the digits of
    the mantissa beyond the 19th move the exponent by up to the text's length: so
    0.<1000000 zeros>1e1000001 (= 1) was read as 0 and 1<1000000 zeros>e-1000000
    (= 1) as Inf (an 'out of float32 range' error)."""
    small = "0." + "0" * 1_000_000 + "1e1000001"
    big = "1" + "0" * 1_000_000 + "e-1000000"
    for one in (small, big):
        assert conn.execute("SELECT vec_cosine(?, '[1, 1]')", (f"[{one}, 1]",)).fetchone() == (1.0,)
    # Exponents far past any length still give 0 or Inf.
    assert conn.execute(
        "SELECT vec_cosine('[1e-99999999999999999999, 1]', '[1, 0]')"
    ).fetchone() == (0.0,)
    e = _err(conn, "SELECT vec_cosine('[1e99999999999999999999, 1]', '[1, 0]')")
    assert str(e) == "vec_cosine: argument 1 has an element out of float32 range at index 0"


# ---------------------------------------------------------------- rrf_debug


def test_rrf_debug_note_is_valid_utf8_whatever_SQLITE_RRF_SIMD_holds():
    """The note echoed SQLITE_RRF_SIMD with %.40s, which can cut a multi-byte
    character (or copy invalid bytes): rrf_debug() then was not valid UTF-8 and
    apsw could not decode it. Only printable ASCII is echoed now."""
    script = (
        "import apsw, sqlite_rrf\n"
        "c = apsw.Connection(':memory:')\n"
        "sqlite_rrf.load(c)\n"
        "print(c.execute('SELECT rrf_debug()').fetchone()[0].splitlines()[-1])\n"
    )
    env = dict(os.environ)
    env["SQLITE_RRF_SIMD"] = "a" + "\u00e9" * 30
    r = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=60
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout == "simd_note: SQLITE_RRF_SIMD=a" + "?" * 39 + " is not available here\n"


# ------------------------------------------------------------ rrf_fuse windows (F6)


def test_rrf_fuse_window_does_not_drift_after_a_huge_contribution_leaves(conn):
    """fuzz_fuse / a random sliding-frame check: the Neumaier-compensated sum lost
    the small terms that entered next to contributions ~1e32 times larger, so once
    those left the frame rrf_fuse returned 0.0 (or garbage) instead of the sum of
    the rows still in it. The sum is now exact: every frame gives the correctly
    rounded sum of its contributions (math.fsum)."""
    weights = [1e300, 1e300, 1e300, 3.0, 0.5, 1e16, 1e16, 1e16, 3.0, 1.0, 0.1]
    ranks = [5, 17, 2, 9, 1, 20, 3, 3, 11, 4, 6]
    conn.execute("CREATE TABLE t(n INTEGER PRIMARY KEY, r, w)")
    conn.executemany(
        "INSERT INTO t VALUES (?, ?, ?)",
        [(i + 1, r, w) for i, (r, w) in enumerate(zip(ranks, weights))],
    )
    got = conn.execute(
        "SELECT n, rrf_fuse(r, w) OVER (ORDER BY n ROWS BETWEEN 2 PRECEDING AND CURRENT ROW) FROM t"
    ).fetchall()
    want = [
        (n, math.fsum(w / (60 + r) for r, w in list(zip(ranks, weights))[max(0, n - 3) : n]))
        for n in range(1, len(ranks) + 1)
    ]
    assert got == want
    assert got[5] == (6, math.fsum([3.0 / 69, 0.5 / 61, 1e16 / 80]))  # was 0.0


def test_rrf_fuse_sums_subnormal_and_huge_contributions_exactly(conn):
    rows = [(1, 5e-324), (1, 1e300), (2, 2.2250738585072014e-308), (3, 0.1)]
    got = conn.execute(
        "SELECT rrf_fuse(r, w, 0) FROM ("
        + " UNION ALL ".join(f"SELECT {r} AS r, {w!r} AS w" for r, w in rows)
        + ")"
    ).fetchone()
    assert got == (math.fsum(w / r for r, w in rows),)


def test_results_just_past_limit_length_are_named_errors_too(conn):
    """fuzz_fts5q, tests/fuzz/corpus/fuzz_fts5q/crash-fts5q-toobig-generic-message:
    sqlite3_str stops a few bytes past SQLITE_LIMIT_LENGTH, so an expression or a
    JSON between the limit and that slack reached sqlite3_result_text, which
    failed with SQLite's generic 'string or blob too big'. The length is now
    checked against the limit itself: every limit gives the value or the error
    naming the function."""
    text = "yyyyyyyyyyyyyyyyyyyyyfts5 quer the result is longer than SQLITE_LIMIT_LENGTHyyy"
    (full,) = conn.execute("SELECT fts5_query(?)", (text,)).fetchone()
    (explain,) = conn.execute("SELECT rrf_explain(?, 1) FROM (SELECT 1)", (text,)).fetchone()
    for limit in range(len(text), max(len(full), len(explain)) + 8):
        conn.limit(apsw.SQLITE_LIMIT_LENGTH, limit)
        for sql, value, fn in (
            ("SELECT fts5_query(?)", full, "fts5_query"),
            ("SELECT rrf_explain(?, 1)", explain, "rrf_explain"),
        ):
            if len(value.encode()) <= limit:
                assert conn.execute(sql, (text,)).fetchone() == (value,)
            else:
                e = _err(conn, sql, (text,))
                assert isinstance(e, apsw.TooBigError)
                assert str(e) == (
                    f"{fn}: the result is longer than SQLITE_LIMIT_LENGTH ({limit} bytes)"
                )
