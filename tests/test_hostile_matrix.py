"""Hostile-input matrix: every SQL function of the extension x arguments of every
type and shape.

The functions: vec_cosine/2, fts5_query/1-2, rrf_version/0, rrf_debug/0, and
rrf_fuse/1-3 and rrf_explain/2-4, each as an aggregate, as a window function
whose frames shrink to nothing, and as one whose frames are always empty.

The values (``VALUES``): NULL; integers 0, 1, -1 and +/-2**63 limits; +/-Inf
(9e999); huge, tiny and fractional reals; empty, odd-length and float32 BLOBs;
quiet, signalling and negative NaN bit patterns inside float32 BLOBs; an Inf
element; mismatched dimensions (BLOB and JSON); empty, truncated, deeply nested
('[' * 100000), out-of-range and NaN JSON; invalid UTF-8 (CAST(x'ff80' AS TEXT));
embedded NULs; megabyte strings (words, distinct words, JSON); FTS5 syntax and
keywords; the valid modes. A 256 MB zeroblob goes once to vec_cosine and once to
fts5_query.

The matrix, built with itertools.product:
  * the scalar functions: the full product of VALUES over their arguments;
  * the aggregates: every value in every argument position (the other arguments
    valid), plus the full product of a smaller set of one value per type
    (``TYPE_VALUES``) over all positions; each in the three usages.

Each call must either return a value or raise apsw.SQLError whose message names
the function (and is not SQLite's generic 'unknown error'); the connection must
answer ``SELECT 1`` afterwards. Failures are collected, so one run lists them all.
"""

from __future__ import annotations

import functools
import itertools
import time

import apsw
import pytest

import sqlite_rrf

# --------------------------------------------------------------------- values


@functools.lru_cache(maxsize=None)
def _big(kind: str):
    """The large values, made once per session."""
    if kind == "mb_words":
        return ("lorem ipsum AND dolor " * 50000)[: 1 << 20]
    if kind == "mb_distinct":
        return " ".join(f"w{i}" for i in range(200000))[: 1 << 20]
    if kind == "mb_json":
        n = (1 << 20) // 4
        return "[" + ",".join(["0.5"] * n) + "]"
    if kind == "deep_json":
        return "[" * 100000
    if kind == "mb_nul":
        return "a\x00" * (1 << 19)
    raise KeyError(kind)


# (label, SQL expression, parameter kind or None). A parameter is bound as :p.
VALUES: list[tuple[str, str, str | None]] = [
    ("null", "NULL", None),
    ("int_0", "0", None),
    ("int_1", "1", None),
    ("int_-1", "-1", None),
    ("int_max", "9223372036854775807", None),
    ("int_min", "(-9223372036854775807 - 1)", None),
    ("+inf", "9e999", None),
    ("-inf", "-9e999", None),
    ("huge", "1.7976931348623157e308", None),
    ("-huge", "-1e308", None),
    ("tiny", "5e-324", None),
    ("real_1.5", "1.5", None),
    ("real_0.5", "0.5", None),
    ("blob_empty", "x''", None),
    ("blob_odd", "x'010203'", None),
    ("blob_f32_1", "x'0000803f'", None),
    ("blob_f32_123", "x'0000803f0000004000004040'", None),  # [1, 2, 3]
    ("blob_f32_12", "x'0000803f00000040'", None),  # [1, 2]: mismatched dimension
    ("blob_zero", "x'0000000000000000'", None),  # zero norm
    ("blob_qnan", "x'0000c07f'", None),
    ("blob_snan", "x'0100807f'", None),
    ("blob_negnan", "x'0000c0ff'", None),
    ("blob_nan_2nd", "x'0000803f0000c07f'", None),
    ("blob_inf", "x'0000807f'", None),
    ("blob_text", "x'5b315d'", None),  # the bytes of '[1]'
    ("json_123", "'[1,2,3]'", None),
    ("json_12", "'[1, 2]'", None),
    ("json_empty", "'[]'", None),
    ("json_truncated", "'[1, 2'", None),
    ("json_trailing", "'[1] x'", None),
    ("json_range", "'[1e39]'", None),
    ("json_nan", "'[NaN]'", None),
    ("json_exp", "'[1e999999999999]'", None),
    ("json_deep", ":p", "deep_json"),
    ("json_mb", ":p", "mb_json"),
    ("text_empty", "''", None),
    ("text_star", "'*'", None),
    ("text_fts5", "'AND OR NOT NEAR \" * ^ ( ) : - / '''", None),
    ("text_list", "'bm25'", None),
    ("text_or", "'or'", None),
    ("text_and", "'AND'", None),
    ("text_num", "'3'", None),
    ("utf8_invalid", "CAST(x'ff80' AS TEXT)", None),
    ("utf8_truncated", "CAST(x'61e697' AS TEXT)", None),
    ("text_nul", "CAST(x'610062' AS TEXT)", None),
    ("mb_words", ":p", "mb_words"),
    ("mb_distinct", ":p", "mb_distinct"),
    ("mb_nul", ":p", "mb_nul"),
]

# One value per type and sign for the full products over the aggregates' arguments.
TYPE_VALUES = [
    v
    for v in VALUES
    if v[0]
    in {
        "null",
        "int_1",
        "int_-1",
        "int_max",
        "+inf",
        "real_1.5",
        "text_list",
        "blob_f32_1",
        "utf8_invalid",
    }
]

BIG_BLOB = ("blob_256mb", "zeroblob(256 * 1024 * 1024)", None)

# Valid arguments, used in the positions a row of the matrix does not vary.
VALID = {
    "list": ("text_list", "'bm25'", None),
    "rank": ("int_1", "2", None),
    "weight": ("real_1.5", "1.5", None),
    "k": ("int_1", "60", None),
}

AGG_ARGS = {
    "rrf_fuse": ["rank", "weight", "k"],
    "rrf_explain": ["list", "rank", "weight", "k"],
}
AGG_ARITIES = {"rrf_fuse": (1, 2, 3), "rrf_explain": (2, 3, 4)}

# Three rows; frames that shrink to nothing (the last row's frame is empty, so
# xInverse removes every row) and frames that are always empty.
USAGES = {
    "aggregate": "SELECT {call} FROM (SELECT 1 AS n UNION ALL SELECT 2 UNION ALL SELECT 3)",
    "window_shrinking": "SELECT {call} OVER (ORDER BY n ROWS BETWEEN 1 FOLLOWING AND "
    "UNBOUNDED FOLLOWING) FROM (SELECT 1 AS n UNION ALL SELECT 2 UNION ALL SELECT 3)",
    "window_empty": "SELECT {call} OVER (ORDER BY n ROWS BETWEEN 2 FOLLOWING AND "
    "1 FOLLOWING) FROM (SELECT 1 AS n UNION ALL SELECT 2 UNION ALL SELECT 3)",
}


def _sql_args(values) -> tuple[str, dict]:
    """The argument list of a call: each value's SQL, its parameter renamed :pN."""
    parts, params = [], {}
    for i, (_label, sql, kind) in enumerate(values):
        if kind is None:
            parts.append(sql)
        else:
            parts.append(sql.replace(":p", f":p{i}"))
            params[f"p{i}"] = _big(kind)
    return ", ".join(parts), params


# --------------------------------------------------------------------- runner


@pytest.fixture(scope="module")
def mconn():
    c = apsw.Connection(":memory:")
    sqlite_rrf.load(c)
    yield c
    c.close()


class Matrix:
    """Runs calls, records failures; asserts at the end of a test."""

    def __init__(self, conn: apsw.Connection):
        self.conn = conn
        self.calls = 0
        self.errors = 0
        self.failures: list[str] = []

    def call(self, fn: str, sql: str, params: dict, label: str) -> None:
        self.calls += 1
        try:
            for _row in self.conn.execute(sql, params):
                pass
        except apsw.SQLError as e:
            self.errors += 1
            msg = str(e)
            if fn not in msg or "unknown error" in msg:
                self.failures.append(f"{label}: error does not name {fn}: {msg}")
        except Exception as e:  # anything but a SQL error is a failure
            self.failures.append(f"{label}: {type(e).__name__}: {e}")
        try:
            ok = self.conn.execute("SELECT 1").fetchall() == [(1,)]
        except Exception as e:  # the connection must still answer
            ok = False
            self.failures.append(f"{label}: SELECT 1 afterwards raised {type(e).__name__}: {e}")
        if not ok:
            self.failures.append(f"{label}: SELECT 1 afterwards did not return 1")

    def check(self) -> None:
        assert not self.failures, (
            f"{len(self.failures)} of {self.calls} calls failed:\n" + "\n".join(self.failures[:50])
        )


def _label(fn, values, usage=""):
    return f"{fn}({', '.join(v[0] for v in values)}){' ' + usage if usage else ''}"


TOTAL = {"calls": 0, "seconds": 0.0}


@pytest.fixture
def matrix(mconn):
    m = Matrix(mconn)
    t0 = time.perf_counter()
    yield m
    TOTAL["calls"] += m.calls
    TOTAL["seconds"] += time.perf_counter() - t0


# ---------------------------------------------------------------------- tests


@pytest.mark.parametrize("fn, nargs", [("vec_cosine", 2), ("fts5_query", 1), ("fts5_query", 2)])
def test_scalar_full_product(matrix, fn, nargs):
    for values in itertools.product(VALUES, repeat=nargs):
        args, params = _sql_args(values)
        matrix.call(fn, f"SELECT {fn}({args})", params, _label(fn, values))
    assert matrix.calls == len(VALUES) ** nargs
    matrix.check()


@pytest.mark.parametrize("fn", ["rrf_version", "rrf_debug"])
def test_no_argument_functions(matrix, fn):
    for values in itertools.product(VALUES, repeat=0):
        matrix.call(fn, f"SELECT {fn}()", {}, _label(fn, values))
    row = matrix.conn.execute(f"SELECT {fn}()").fetchone()
    assert isinstance(row[0], str) and row[0]
    matrix.check()


# Arities no function has: SQLite's own error names the function.
WRONG_ARITIES = [
    ("rrf_version", 1),
    ("rrf_debug", 1),
    ("vec_cosine", 1),
    ("vec_cosine", 3),
    ("fts5_query", 0),
    ("fts5_query", 3),
    ("rrf_fuse", 0),
    ("rrf_fuse", 4),
    ("rrf_explain", 1),
    ("rrf_explain", 5),
]


@pytest.mark.parametrize("fn, nargs", WRONG_ARITIES)
def test_wrong_number_of_arguments(matrix, fn, nargs):
    values_set = itertools.product(VALUES, repeat=1) if nargs == 1 else [[VALUES[1]] * nargs]
    for values in values_set:
        args, params = _sql_args(values)
        matrix.call(fn, f"SELECT {fn}({args})", params, _label(fn, values))
    assert matrix.errors == matrix.calls  # every call is an error naming the function
    matrix.check()


@pytest.mark.parametrize("fn, nargs", [("vec_cosine", 2), ("fts5_query", 1)])
def test_256mb_blob(matrix, fn, nargs):
    """Once each: vec_cosine of two 256 MB zero blobs (64M dimensions, zero norm:
    NULL) and fts5_query of one (a BLOB: an error naming the function)."""
    values = [BIG_BLOB] * nargs
    args, params = _sql_args(values)
    matrix.call(fn, f"SELECT {fn}({args})", params, _label(fn, values))
    matrix.check()
    if fn == "vec_cosine":
        assert matrix.errors == 0  # a zero-norm vector gives NULL (V3)


@pytest.mark.parametrize("usage", sorted(USAGES))
@pytest.mark.parametrize("fn, nargs", [(f, n) for f in AGG_ARITIES for n in AGG_ARITIES[f]])
def test_aggregate_each_position(matrix, fn, nargs, usage):
    """Every value in every argument position, the other arguments valid."""
    names = AGG_ARGS[fn][:nargs]
    for pos, value in itertools.product(range(nargs), VALUES):
        values = [value if i == pos else VALID[name] for i, name in enumerate(names)]
        args, params = _sql_args(values)
        sql = USAGES[usage].format(call=f"{fn}({args})")
        matrix.call(fn, sql, params, _label(fn, values, usage))
    assert matrix.calls == nargs * len(VALUES)
    matrix.check()


@pytest.mark.parametrize("usage", sorted(USAGES))
@pytest.mark.parametrize("fn, nargs", [(f, n) for f in AGG_ARITIES for n in AGG_ARITIES[f]])
def test_aggregate_type_product(matrix, fn, nargs, usage):
    """The full product of one value per type over all argument positions."""
    for values in itertools.product(TYPE_VALUES, repeat=nargs):
        args, params = _sql_args(values)
        sql = USAGES[usage].format(call=f"{fn}({args})")
        matrix.call(fn, sql, params, _label(fn, values, usage))
    assert matrix.calls == len(TYPE_VALUES) ** nargs
    matrix.check()


def test_matrix_size_report(capsys):
    """Not a check: prints how many calls the matrix made and how long they took
    (run with -s to see it)."""
    with capsys.disabled():
        print(f"\nhostile matrix: {TOTAL['calls']} calls in {TOTAL['seconds']:.1f} s")
