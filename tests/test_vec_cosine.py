"""vec_cosine(a, b) against numpy in float64 (csrc/vec.c V1..V7, csrc/kernels.h K1..K4).

The reference is numpy on the float32 values widened to float64: products of two
float32 values are exact in float64, so the only difference from the C kernel is
the order of summation, bounded by ~n * 2**-53 relative to the norms (K2). ``TOL``
allows for that up to n = 4097 with a wide margin, and is still far below what one
float32 ulp in any element would change (~1e-8).

K4 is tested exactly: every kernel path (the scalar twin, AVX2+FMA, NEON where the CPU has
them), in Python and in SQL, gives the same float64 bits as ``k4_cosine``, a plain-Python
model of the one summation order, for every dimension from 1 to 4097.
"""

from __future__ import annotations

import json
import math
import os
import re
import struct
import subprocess
import sys

import apsw
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import sqlite_rrf
from sqlite_rrf.core import kernels

TOL = 1e-12
DIMS = [1, 2, 3, 7, 8, 9, 15, 16, 17, 31, 383, 384, 385, 1024, 4097]


def f32(x) -> bytes:
    return np.asarray(x, dtype="<f4").tobytes()


def as_json(x) -> str:
    """JSON text of float32 values; repr() of the widened double round-trips exactly."""
    return "[" + ",".join(repr(float(v)) for v in np.asarray(x, dtype=np.float32)) + "]"


def ref_cos(a, b):
    """numpy float64 reference; None where vec_cosine must return NULL (zero norm)."""
    a64 = np.asarray(a, dtype=np.float32).astype(np.float64)
    b64 = np.asarray(b, dtype=np.float32).astype(np.float64)
    na, nb = math.sqrt(float(np.dot(a64, a64))), math.sqrt(float(np.dot(b64, b64)))
    if na == 0.0 or nb == 0.0:
        return None
    return max(-1.0, min(1.0, float(np.dot(a64, b64)) / (na * nb)))


def one(conn, sql, params=()):
    return conn.execute(sql, params).fetchone()[0]


def sql_error(msg: str):
    return pytest.raises(apsw.SQLError, match=re.escape(msg))


@pytest.fixture(scope="module")
def mconn():
    """A module-wide connection, for hypothesis tests (function fixtures are not reset
    between examples)."""
    c = apsw.Connection(":memory:")
    sqlite_rrf.load(c)
    yield c
    c.close()


# ---------------------------------------------------------------- V1: blobs and JSON


@pytest.mark.parametrize("dim", DIMS)
def test_V1_blob_matches_numpy_float64(conn, dim):
    rng = np.random.default_rng(dim)
    for _ in range(5):
        a = rng.standard_normal(dim).astype(np.float32)
        b = rng.standard_normal(dim).astype(np.float32)
        got = one(conn, "SELECT vec_cosine(?, ?)", (f32(a), f32(b)))
        assert isinstance(got, float)
        assert got == pytest.approx(ref_cos(a, b), abs=TOL)
    # correlated vectors (cosine near 1) and anti-correlated ones (near -1)
    a = rng.standard_normal(dim).astype(np.float32)
    b = (a + 0.01 * rng.standard_normal(dim)).astype(np.float32)
    assert one(conn, "SELECT vec_cosine(?, ?)", (f32(a), f32(b))) == pytest.approx(
        ref_cos(a, b), abs=TOL
    )
    assert one(conn, "SELECT vec_cosine(?, ?)", (f32(a), f32(-a))) == pytest.approx(-1.0, abs=TOL)
    assert one(conn, "SELECT vec_cosine(?, ?)", (f32(a), f32(a))) == pytest.approx(1.0, abs=TOL)
    assert one(conn, "SELECT vec_cosine(?, ?)", (f32(a), f32(3.5 * a))) == pytest.approx(
        1.0, abs=1e-7
    )


def test_V1_known_values(conn):
    """Values worked out by hand, independent of numpy."""
    cases = [
        ([1, 0], [0, 1], 0.0),
        ([1, 0], [1, 1], 1 / math.sqrt(2)),
        ([1, 2, 3], [4, 5, 6], 32 / math.sqrt(14 * 77)),
        ([3, 4], [-3, -4], -1.0),
        ([2], [5], 1.0),
        ([2], [-0.5], -1.0),
    ]
    for a, b, want in cases:
        assert one(conn, "SELECT vec_cosine(?, ?)", (f32(a), f32(b))) == pytest.approx(
            want, abs=TOL
        )
        assert one(
            conn, "SELECT vec_cosine(?, ?)", (json.dumps(a), json.dumps(b))
        ) == pytest.approx(want, abs=TOL)


@pytest.mark.parametrize("dim", [1, 3, 8, 9, 17, 384, 385])
@pytest.mark.parametrize("shift", [1, 2, 3])
def test_V1_K1_unaligned_blob_via_substr(conn, dim, shift):
    """A blob cut out of a longer one (leading bytes dropped by substr) reads the same."""
    rng = np.random.default_rng(dim * 10 + shift)
    a = rng.standard_normal(dim).astype(np.float32)
    b = rng.standard_normal(dim).astype(np.float32)
    pad = b"\x00" * shift
    got = one(
        conn,
        "SELECT vec_cosine(substr(:pa, :from), substr(:pb, :from))",
        {"pa": pad + f32(a), "pb": pad + f32(b), "from": shift + 1},
    )
    assert got == pytest.approx(ref_cos(a, b), abs=TOL)
    # the same through SQL concatenation (|| gives TEXT, so cast back to BLOB)
    got = one(
        conn,
        "SELECT vec_cosine(substr(CAST(:pad || :a AS BLOB), :from), :b)",
        {"pad": pad, "a": f32(a), "b": f32(b), "from": shift + 1},
    )
    assert got == pytest.approx(ref_cos(a, b), abs=TOL)


@pytest.mark.parametrize("dim", [1, 7, 9, 17, 384, 385])
def test_V1_K1_unaligned_blob_in_table_row(conn, dim):
    """Columns read in place from a record start at whatever byte offset the preceding
    columns leave; pads of 0..7 bytes put the vector at every alignment."""
    rng = np.random.default_rng(dim)
    conn.execute("CREATE TABLE t(pad1 TEXT, a BLOB, pad2 BLOB, b BLOB)")
    rows = []
    for i in range(32):
        a = rng.standard_normal(dim).astype(np.float32)
        b = rng.standard_normal(dim).astype(np.float32)
        rows.append((a, b))
        conn.execute(
            "INSERT INTO t VALUES (?, ?, ?, ?)", ("x" * (i % 8), f32(a), b"\x01" * (i // 8), f32(b))
        )
    got = [r[0] for r in conn.execute("SELECT vec_cosine(a, b) FROM t ORDER BY rowid")]
    for g, (a, b) in zip(got, rows):
        assert g == pytest.approx(ref_cos(a, b), abs=TOL)
    q = rng.standard_normal(dim).astype(np.float32)
    got = [
        r[0] for r in conn.execute("SELECT vec_cosine(:q, b) FROM t ORDER BY rowid", {"q": f32(q)})
    ]
    for g, (_, b) in zip(got, rows):
        assert g == pytest.approx(ref_cos(q, b), abs=TOL)


@pytest.mark.parametrize("dim", [1, 2, 9, 17, 384, 385])
def test_V1_json_text_and_mixed_args(conn, dim):
    """JSON text of the same float32 values gives exactly the blob's result, in either
    argument and mixed with a blob."""
    rng = np.random.default_rng(100 + dim)
    a = rng.standard_normal(dim).astype(np.float32)
    b = rng.standard_normal(dim).astype(np.float32)
    want = ref_cos(a, b)
    via_blob = one(conn, "SELECT vec_cosine(?, ?)", (f32(a), f32(b)))
    for x, y in [
        (as_json(a), as_json(b)),
        (as_json(a), f32(b)),
        (f32(a), as_json(b)),
    ]:
        got = one(conn, "SELECT vec_cosine(?, ?)", (x, y))
        assert got == pytest.approx(want, abs=TOL)
        assert got == via_blob


@pytest.mark.parametrize(
    "text",
    [
        "[1,2,3]",
        " [ 1 , 2 , 3 ] ",
        "\n[\t1,\r\n2,3]\n",
        "[1.0, 2.0, 3.0]",
        "[1e0, 2E0, 3e+0]",
        "[10e-1, 0.2e1, 300E-2]",
        "[1.00000000000000000000000000000000000000000, 2, 3]",
        "[100000000000000000000000000000e-29, 2, 3]",
    ],
)
def test_V1_json_number_forms(conn, text):
    """JSON number syntax and whitespace variants of the vector [1, 2, 3]."""
    got = one(conn, "SELECT vec_cosine(?, ?)", (text, f32([3, 2, 1])))
    assert got == pytest.approx(10 / 14, abs=TOL)


@pytest.mark.parametrize(
    "num",
    [
        "0.1",
        "-0.1",
        "3.14159265358979323846264338327950288",
        "1e-7",
        "123456789",
        "123456789012345678901234567890",
        "0.000000000000000000000000000000000001234",
        "6.02214076e23",
        "-2.5E-3",
        "3.4028234e38",
        "3.4028235e38",
        "1.17549435e-38",
        "1e-40",
        "1e-45",
        "1e-50",
        "-0",
        "0.0",
        "1" + "0" * 30 + "e-30",
        "0." + "0" * 300 + "5e300",
    ],
)
def test_V1_json_numbers_parse_like_float32_of_the_decimal(conn, num):
    """Each JSON number becomes float32(the decimal value): checked through the cosine
    against a fixed vector, which moves by ~1e-8 if the parsed value is off by one ulp."""
    x = float(num)
    vec_a = [x, 0.75, -1.25]
    b = [0.5, -2.0, 1.0]
    want = ref_cos(np.float32(vec_a), b)
    text = "[" + num + ", 0.75, -1.25]"
    got = one(conn, "SELECT vec_cosine(?, ?)", (text, f32(b)))
    assert got == pytest.approx(want, abs=TOL)
    # alone in its vector: the sign must survive (or the vector is zero -> NULL)
    alone = one(conn, "SELECT vec_cosine(?, '[1]')", ("[" + num + "]",))
    f = np.float32(x)
    assert alone == (None if f == 0 else math.copysign(1.0, f))


# ---------------------------------------------------------------- V2, V3: NULLs


def test_V2_null_in_either_argument_gives_null(conn):
    b = f32([1, 2, 3])
    assert one(conn, "SELECT vec_cosine(NULL, ?)", (b,)) is None
    assert one(conn, "SELECT vec_cosine(?, NULL)", (b,)) is None
    assert one(conn, "SELECT vec_cosine(NULL, NULL)") is None
    assert one(conn, "SELECT vec_cosine(NULL, '[1,2]')") is None
    # NULL wins even over an argument that would be an error
    assert one(conn, "SELECT vec_cosine(NULL, 'not json')") is None
    assert one(conn, "SELECT vec_cosine(42, NULL)") is None
    assert one(conn, "SELECT typeof(vec_cosine(NULL, x'0000803f'))") == "null"


@pytest.mark.parametrize("dim", [1, 3, 8, 9, 384])
def test_V3_zero_vector_gives_null_not_nan(conn, dim):
    z = f32(np.zeros(dim))
    nz = f32(-np.zeros(dim))  # negative zeros are zero too
    v = f32(np.arange(1, dim + 1))
    for x, y in [(z, v), (v, z), (z, z), (nz, v), (v, nz)]:
        assert one(conn, "SELECT typeof(vec_cosine(?, ?))", (x, y)) == "null"
    zj = "[" + ",".join(["0"] * dim) + "]"
    assert one(conn, "SELECT vec_cosine(?, ?)", (zj, v)) is None
    assert one(conn, "SELECT vec_cosine(?, ?)", (v, "[" + ",".join(["-0.0"] * dim) + "]")) is None


def test_V3_tiny_nonzero_vector_is_not_zero(conn):
    """The smallest float32 denormal is not zero: the direction is still defined."""
    tiny = np.float32(1e-45)
    assert tiny > 0
    assert one(conn, "SELECT vec_cosine(?, ?)", (f32([tiny, 0]), f32([1, 0]))) == pytest.approx(1.0)
    assert one(conn, "SELECT vec_cosine(?, ?)", (f32([0, -tiny]), f32([0, 1]))) == pytest.approx(
        -1.0
    )


# ---------------------------------------------------------------- V4: errors


def test_V4_dimension_mismatch_names_both_sizes(conn):
    with sql_error("vec_cosine: dimension mismatch: 3 vs 4"):
        one(conn, "SELECT vec_cosine(?, ?)", (f32([1, 2, 3]), f32([1, 2, 3, 4])))
    with sql_error("vec_cosine: dimension mismatch: 384 vs 383"):
        one(conn, "SELECT vec_cosine(?, ?)", (f32(np.ones(384)), f32(np.ones(383))))
    with sql_error("vec_cosine: dimension mismatch: 2 vs 1"):
        one(conn, "SELECT vec_cosine('[1,2]', ?)", (f32([1]),))
    # a zero vector of the wrong size is still a mismatch, not NULL
    with sql_error("vec_cosine: dimension mismatch: 2 vs 3"):
        one(conn, "SELECT vec_cosine('[0,0]', '[1,2,3]')")


@pytest.mark.parametrize("nbytes", [1, 2, 3, 5, 6, 7, 1537])
def test_V4_blob_length_not_multiple_of_4(conn, nbytes):
    bad = b"\x00" * nbytes
    good = f32(np.ones(max(1, nbytes // 4)))
    with sql_error(
        f"vec_cosine: argument 1 is a blob of {nbytes} bytes, not a multiple of 4 (float32)"
    ):
        one(conn, "SELECT vec_cosine(?, ?)", (bad, good))
    with sql_error(
        f"vec_cosine: argument 2 is a blob of {nbytes} bytes, not a multiple of 4 (float32)"
    ):
        one(conn, "SELECT vec_cosine(?, ?)", (good, bad))


def test_V4_empty_vector(conn):
    with sql_error("vec_cosine: argument 1 is an empty vector"):
        one(conn, "SELECT vec_cosine(x'', x'0000803f')")
    with sql_error("vec_cosine: argument 2 is an empty vector"):
        one(conn, "SELECT vec_cosine(x'0000803f', zeroblob(0))")
    with sql_error("vec_cosine: argument 1 is an empty vector"):
        one(conn, "SELECT vec_cosine('[]', '[1]')")
    with sql_error("vec_cosine: argument 2 is an empty vector"):
        one(conn, "SELECT vec_cosine('[1]', '  [ \n ]  ')")
    with sql_error("vec_cosine: argument 1 is an empty vector"):
        one(conn, "SELECT vec_cosine(?, ?)", (b"", b""))


def _with_special(dim, index, value_bytes):
    raw = bytearray(f32(np.linspace(0.5, 2.0, dim)))
    raw[4 * index : 4 * index + 4] = value_bytes
    return bytes(raw)


QNAN = struct.pack("<f", float("nan"))
SNAN = b"\x01\x00\x80\x7f"  # signalling NaN: exponent all ones, quiet bit clear
NEG_NAN = b"\x00\x00\xc0\xff"
PINF = struct.pack("<f", float("inf"))
NINF = struct.pack("<f", float("-inf"))


@pytest.mark.parametrize(
    "dim,index", [(1, 0), (9, 5), (9, 8), (17, 16), (384, 0), (384, 200), (385, 384)]
)
@pytest.mark.parametrize(
    "raw,word", [(QNAN, "NaN"), (SNAN, "NaN"), (NEG_NAN, "NaN"), (PINF, "Inf"), (NINF, "Inf")]
)
def test_V4_nan_inf_element_with_index(conn, dim, index, raw, word):
    bad = _with_special(dim, index, raw)
    good = f32(np.ones(dim))
    with sql_error(f"vec_cosine: argument 1 has {word} at index {index}"):
        one(conn, "SELECT vec_cosine(?, ?)", (bad, good))
    with sql_error(f"vec_cosine: argument 2 has {word} at index {index}"):
        one(conn, "SELECT vec_cosine(?, ?)", (good, bad))


def test_V4_first_non_finite_element_is_reported(conn):
    raw = bytearray(f32(np.ones(20)))
    raw[4 * 3 : 4 * 4] = PINF
    raw[4 * 11 : 4 * 12] = QNAN
    with sql_error("vec_cosine: argument 1 has Inf at index 3"):
        one(conn, "SELECT vec_cosine(?, ?)", (bytes(raw), bytes(raw)))
    # argument 1 is checked before argument 2; a zero vector does not hide the fault
    with sql_error("vec_cosine: argument 2 has NaN at index 0"):
        one(conn, "SELECT vec_cosine(?, ?)", (f32([0, 0]), QNAN + f32([1])))


@pytest.mark.parametrize(
    "text,offset,fault",
    [
        ("", 0, "expected '['"),
        ("   ", 3, "expected '['"),
        ("NaN", 0, "expected '['"),
        ("1,2", 0, "expected '['"),
        ('{"a": 1}', 0, "expected '['"),
        ("  x[1]", 2, "expected '['"),
        ("[1,]", 3, "expected a number"),
        ("[1, ]", 4, "expected a number"),
        ("[1,,2]", 3, "expected a number"),
        ("[[1]]", 1, "expected a number"),
        ("[1,[2]]", 3, "expected a number"),
        ("[NaN]", 1, "expected a number"),
        ("[1, Infinity]", 4, "expected a number"),
        ("[null]", 1, "expected a number"),
        ('["1"]', 1, "expected a number"),
        ("[+1]", 1, "expected a number"),
        ("[.5]", 1, "expected a number"),
        ("[1.]", 1, "expected a number"),
        ("[1e]", 1, "expected a number"),
        ("[1e+]", 1, "expected a number"),
        ("[-]", 1, "expected a number"),
        ("[--1]", 1, "expected a number"),
        ("[,1]", 1, "expected a number"),
        ("[", 1, "expected a number"),
        ("[1,2", 4, "expected ',' or ']'"),
        ("[1 2]", 3, "expected ',' or ']'"),
        ("[01]", 2, "expected ',' or ']'"),
        ("[1;2]", 2, "expected ',' or ']'"),
        ("[1,2}", 4, "expected ',' or ']'"),
        ("[0x10]", 2, "expected ',' or ']'"),
        ("[1,2]x", 5, "unexpected text after ']'"),
        ("[1,2] ]", 6, "unexpected text after ']'"),
        ("[1,2][3]", 5, "unexpected text after ']'"),
        ("[] x", 3, "unexpected text after ']'"),
        ("[\u00e9]", 1, "expected a number"),
        ("[1, \u00e9]", 4, "expected a number"),  # byte offsets: the é is 2 bytes, after 4
        ("[\u00e9, 1, 2]", 1, "expected a number"),
    ],
)
def test_V4_malformed_json_with_offset(conn, text, offset, fault):
    for argi, sql in [(1, "SELECT vec_cosine(?, '[1,2]')"), (2, "SELECT vec_cosine('[1,2]', ?)")]:
        with sql_error(
            f"vec_cosine: argument {argi} is malformed JSON at offset {offset}: {fault}"
        ):
            one(conn, sql, (text,))


def test_V4_malformed_json_offsets_count_bytes(conn):
    # 'é' is two bytes in UTF-8, so the bad character after it is at byte 3, not 2
    text = "\u00e9[1]"
    with sql_error("vec_cosine: argument 1 is malformed JSON at offset 0: expected '['"):
        one(conn, "SELECT vec_cosine(?, '[1]')", (text,))
    with sql_error(
        "vec_cosine: argument 1 is malformed JSON at offset 5: unexpected text after ']'"
    ):
        one(conn, "SELECT vec_cosine(?, '[1]')", ("[1]  \u00e9",))


@pytest.mark.parametrize(
    "text,index",
    [
        ("[1e39]", 0),
        ("[1, -1e39]", 1),
        ("[0, 0, 3.5e38]", 2),
        ("[1e999999999]", 0),
        ("[" + "7" * 400 + "]", 0),
    ],
)
def test_V4_json_element_out_of_float32_range(conn, text, index):
    with sql_error(f"vec_cosine: argument 1 has an element out of float32 range at index {index}"):
        one(conn, "SELECT vec_cosine(?, ?)", (text, text))


@pytest.mark.parametrize(
    "sql,argi,tname",
    [
        ("SELECT vec_cosine(1, '[1]')", 1, "INTEGER"),
        ("SELECT vec_cosine('[1]', 2)", 2, "INTEGER"),
        ("SELECT vec_cosine(1.5, '[1]')", 1, "REAL"),
        ("SELECT vec_cosine('[1]', -0.25)", 2, "REAL"),
        ("SELECT vec_cosine(9223372036854775807, x'0000803f')", 1, "INTEGER"),
        ("SELECT vec_cosine(1, 'not even json')", 1, "INTEGER"),  # argument 1 is checked first
    ],
)
def test_V4_wrong_types(conn, sql, argi, tname):
    with sql_error(
        f"vec_cosine: argument {argi} must be a float32 BLOB or a JSON array, got {tname}"
    ):
        one(conn, sql)


def test_V4_error_aborts_a_scan_at_the_bad_row(conn):
    conn.execute("CREATE TABLE t(v BLOB)")
    conn.executemany(
        "INSERT INTO t VALUES (?)", [(f32([1, 2]),), (f32([3, 4]),), (f32([1, 2, 3]),)]
    )
    with sql_error("vec_cosine: dimension mismatch: 3 vs 2"):
        conn.execute("SELECT vec_cosine(v, '[1,0]') FROM t").fetchall()


# ---------------------------------------------------------------- V5: range, extremes


def test_V5_result_within_minus_one_one(conn):
    rng = np.random.default_rng(5)
    conn.execute("CREATE TABLE t(a BLOB, b BLOB)")
    rows = []
    for i in range(400):
        dim = int(rng.integers(1, 600))
        a = (rng.standard_normal(dim) * 10.0 ** rng.integers(-20, 20)).astype(np.float32)
        kind = i % 4
        b = (
            a
            if kind == 0
            else (-a if kind == 1 else (a * np.float32(7.0) if kind == 2 else a[::-1].copy()))
        )
        rows.append((f32(a), f32(b)))
    conn.executemany("INSERT INTO t VALUES (?, ?)", rows)
    lo, hi, n = conn.execute(
        "SELECT min(c), max(c), count(c) FROM (SELECT vec_cosine(a, b) AS c FROM t)"
    ).fetchone()
    assert n == 400
    assert -1.0 <= lo and hi <= 1.0
    # the identical pairs are 1 and the negated pairs -1 to rounding
    same = [r[0] for r in conn.execute("SELECT vec_cosine(a, b) FROM t WHERE rowid % 4 = 1")]
    assert all(abs(c - 1.0) <= TOL for c in same)
    neg = [r[0] for r in conn.execute("SELECT vec_cosine(a, b) FROM t WHERE rowid % 4 = 2")]
    assert all(abs(c + 1.0) <= TOL for c in neg)


@pytest.mark.parametrize(
    "a,b",
    [
        ([1e38, 1e38, 1e38], [1e38, -1e38, 2e37]),
        ([3.4e38, -3.4e38], [3.4e38, 3.4e38 / 2]),
        ([3.4028234e38] * 4097, [3.4028234e38] * 4096 + [-3.4028234e38]),
        ([1e-38, 2e-38, -3e-38], [1e-38, 1e-38, 1e-38]),
        ([1e-40, 1e-45, 3e-42], [2e-41, -1e-45, 1e-43]),  # denormals
        ([1e-45], [1e-45]),
        ([1e38, 1e-38, 1e-45], [1e-45, 1e38, 1.0]),  # mixed magnitudes
        ([1e20] * 9, [1e-20] * 9),
    ],
)
def test_V5_K2_huge_and_tiny_values_agree_with_numpy(conn, a, b):
    """Sums in double precision: float32 overflow (1e38**2) and denormal underflow
    do not distort the result."""
    want = ref_cos(a, b)
    assert want is not None
    for x, y in [(f32(a), f32(b)), (as_json(a), as_json(b))]:
        got = one(conn, "SELECT vec_cosine(?, ?)", (x, y))
        assert got == pytest.approx(want, abs=TOL)


# ---------------------------------------------------------------- V6: the JSON cache


def test_V6_constant_json_query_cached_across_rows_equals_per_row(conn):
    rng = np.random.default_rng(6)
    dim = 37
    vecs = rng.standard_normal((300, dim)).astype(np.float32)
    q = rng.standard_normal(dim).astype(np.float32)
    qj = as_json(q)
    conn.execute("CREATE TABLE t(v BLOB, vj TEXT, qj TEXT)")
    conn.executemany("INSERT INTO t VALUES (?, ?, ?)", [(f32(v), as_json(v), qj) for v in vecs])
    want = [ref_cos(q, v) for v in vecs]

    literal = [r[0] for r in conn.execute(f"SELECT vec_cosine(v, '{qj}') FROM t ORDER BY rowid")]
    literal_first = [
        r[0] for r in conn.execute(f"SELECT vec_cosine('{qj}', v) FROM t ORDER BY rowid")
    ]
    bound = [r[0] for r in conn.execute("SELECT vec_cosine(v, ?) FROM t ORDER BY rowid", (qj,))]
    per_row = [r[0] for r in conn.execute("SELECT vec_cosine(v, qj) FROM t ORDER BY rowid")]
    both_json = [
        r[0] for r in conn.execute("SELECT vec_cosine(vj, ?) FROM t ORDER BY rowid", (qj,))
    ]
    blob_q = [
        r[0] for r in conn.execute("SELECT vec_cosine(v, ?) FROM t ORDER BY rowid", (f32(q),))
    ]
    assert literal == per_row == bound == blob_q == both_json == literal_first
    assert literal == pytest.approx(want, abs=TOL)


def test_V6_two_constant_queries_in_one_statement_keep_their_own_cache(conn):
    conn.execute("CREATE TABLE t(v BLOB)")
    conn.executemany("INSERT INTO t VALUES (?)", [(f32([1, 0]),), (f32([0, 1]),), (f32([1, 1]),)])
    got = conn.execute(
        "SELECT vec_cosine(v, '[1,0]'), vec_cosine(v, '[0,1]'), vec_cosine('[0,1]', v) FROM t ORDER BY rowid"
    ).fetchall()
    h = 1 / math.sqrt(2)
    assert got == [
        pytest.approx((1.0, 0.0, 0.0)),
        pytest.approx((0.0, 1.0, 1.0)),
        pytest.approx((h, h, h)),
    ]


def test_V6_rebinding_a_reused_statement_does_not_reuse_the_old_vector(conn):
    conn.execute("CREATE TABLE t(v BLOB)")
    conn.executemany("INSERT INTO t VALUES (?)", [(f32([1, 0]),), (f32([0, 1]),)])
    sql = "SELECT vec_cosine(v, ?) FROM t ORDER BY rowid"
    for _ in range(3):  # apsw's statement cache hands back the same prepared statement
        assert [r[0] for r in conn.execute(sql, ("[1, 0]",))] == pytest.approx([1.0, 0.0])
        assert [r[0] for r in conn.execute(sql, ("[0, 2]",))] == pytest.approx([0.0, 1.0])
        assert [r[0] for r in conn.execute(sql, ("[-3, 0]",))] == pytest.approx([-1.0, 0.0])
    with sql_error("vec_cosine: dimension mismatch: 2 vs 3"):
        conn.execute(sql, ("[1, 2, 3]",)).fetchall()
    assert [r[0] for r in conn.execute(sql, ("[1, 1]",))] == pytest.approx([2**-0.5, 2**-0.5])


def test_V6_per_row_json_varies_per_row(conn):
    conn.execute("CREATE TABLE t(a TEXT, b TEXT)")
    conn.executemany(
        "INSERT INTO t VALUES (?, ?)",
        [("[1,0]", "[1,0]"), ("[1,0]", "[0,1]"), ("[1,0,0]", "[-1,0,0]"), ("[0,0]", "[1,1]")],
    )
    got = [r[0] for r in conn.execute("SELECT vec_cosine(a, b) FROM t ORDER BY rowid")]
    assert got[:3] == pytest.approx([1.0, 0.0, -1.0])
    assert got[3] is None


def test_V6_constant_malformed_json_fails_on_every_run(conn):
    conn.execute("CREATE TABLE t(v BLOB)")
    conn.executemany("INSERT INTO t VALUES (?)", [(f32([1, 0]),)] * 3)
    for _ in range(2):
        with sql_error("vec_cosine: argument 2 is malformed JSON at offset 4: expected ',' or ']'"):
            conn.execute("SELECT vec_cosine(v, '[1,0') FROM t").fetchall()


# ---------------------------------------------------------------- hypothesis

finite32 = st.floats(width=32, allow_nan=False, allow_infinity=False)


@st.composite
def vec_pair(draw):
    n = draw(st.integers(1, 40))
    a = draw(st.lists(finite32, min_size=n, max_size=n))
    b = draw(st.lists(finite32, min_size=n, max_size=n))
    return a, b


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(vec_pair())
def test_V1_V3_V5_property_matches_numpy(mconn, pair):
    a, b = pair
    want = ref_cos(a, b)
    got = one(mconn, "SELECT vec_cosine(?, ?)", (f32(a), f32(b)))
    if want is None:
        assert got is None
    else:
        assert -1.0 <= got <= 1.0
        assert got == pytest.approx(want, abs=TOL)
    # the same values as JSON text give the very same result
    assert one(mconn, "SELECT vec_cosine(?, ?)", (as_json(a), f32(b))) == got
    assert one(mconn, "SELECT vec_cosine(?, ?)", (f32(a), as_json(b))) == got


json_like = st.one_of(
    st.text(max_size=30),
    st.text(alphabet="[]0123456789.,eE+- \t\n", max_size=30),
    st.from_regex(
        r"\A\s?\[\s?-?[0-9]{1,3}(\.[0-9]{1,3})?([eE][-+]?[0-9]{1,2})?(\s?,\s?-?[0-9]{1,3})*\]\s?\Z"
    ),
)


def _python_json_vector(text):
    """The float32 vector Python's json reads from text, or None if it is not a
    non-empty array of finite float32-representable numbers."""
    try:
        parsed = json.loads(text)
    except (ValueError, RecursionError):
        return None
    if not isinstance(parsed, list) or not parsed:
        return None
    if not all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in parsed):
        return None
    try:
        vals = [float(x) for x in parsed]
    except OverflowError:
        return None
    with np.errstate(over="ignore"):
        v = np.asarray(vals, dtype=np.float32)
    if not np.all(np.isfinite(v)):
        return None
    return v


@settings(max_examples=200, deadline=None)
@given(json_like)
def test_V4_property_any_text_is_a_vector_or_a_named_error(mconn, text):
    """Arbitrary text never crashes: a JSON array of numbers is accepted like Python's
    json reads it; anything else is a vec_cosine error about argument 1."""
    vec = _python_json_vector(text)
    try:
        got = one(mconn, "SELECT vec_cosine(?, ?)", (text, text))
    except apsw.SQLError as e:
        assert str(e).startswith("vec_cosine: argument 1 ")
        assert vec is None, f"valid vector {text!r} rejected: {e}"
        return
    assert vec is not None, f"{text!r} accepted"
    if np.all(vec == 0):
        assert got is None
    else:
        assert got == pytest.approx(1.0, abs=TOL)
        cross = one(mconn, "SELECT vec_cosine(?, ?)", (text, f32(np.arange(1, len(vec) + 1))))
        assert cross == pytest.approx(ref_cos(vec, np.arange(1, len(vec) + 1)), abs=TOL)


# ---------------------------------------------------------------- K1..K3: the kernels


def simd_paths_other_than_scalar():
    return [p for p in kernels.simd_paths() if p != "scalar"]


def bits(x: float) -> bytes:
    """The float64 bit pattern (so that -0.0 != 0.0 and NaNs compare by payload)."""
    return struct.pack("<d", x)


def k4_sums(a, b):
    """The three sums in K4's order (csrc/kernels.c), in plain Python floats: 16 lanes
    over the whole blocks of 8, the reduction tree, then the rest one by one."""
    x = [float(v) for v in np.asarray(a, dtype=np.float32)]
    y = [float(v) for v in np.asarray(b, dtype=np.float32)]
    n = len(x)
    m = n - n % 8
    out = []
    for u, w in ((x, y), (x, x), (y, y)):
        lanes = [0.0] * 16
        for i in range(m):
            lanes[i % 16] = lanes[i % 16] + u[i] * w[i]
        v = [(lanes[j] + lanes[j + 4]) + (lanes[j + 8] + lanes[j + 12]) for j in range(4)]
        s_ = (v[0] + v[2]) + (v[1] + v[3])
        for i in range(m, n):
            s_ = s_ + u[i] * w[i]
        out.append(s_)
    return out


def k4_cosine(a, b):
    """rrf_cosine_from_sums on K4's sums: NaN for a zero norm, else clamped to [-1, 1]."""
    d, na, nb = k4_sums(a, b)
    if na == 0.0 or nb == 0.0:
        return float("nan")
    return max(-1.0, min(1.0, d / math.sqrt(na * nb)))


def k4_pair(dim: int, seed: int = 0):
    """The test pair of a dimension: float32 normals, the second scaled so that the
    three sums have different magnitudes."""
    rng = np.random.default_rng([dim, seed])
    a = rng.standard_normal(dim).astype(np.float32)
    b = (rng.standard_normal(dim) * 1e-3).astype(np.float32)
    return a, b


@pytest.mark.parametrize("dim", DIMS)
def test_K3_simd_kernel_matches_scalar_kernel(dim):
    rng = np.random.default_rng(1000 + dim)
    for _ in range(5):
        a = rng.standard_normal(dim).astype(np.float32)
        b = rng.standard_normal(dim).astype(np.float32)
        want = ref_cos(a, b)
        scalar = kernels.cosine(a, b, simd="scalar")
        assert scalar == pytest.approx(want, abs=TOL)
        for path in kernels.simd_paths():
            assert bits(kernels.cosine(a, b, simd=path)) == bits(scalar), path  # K4
        assert bits(kernels.cosine(a, b)) == bits(scalar)


def test_K4_every_path_equals_the_python_model_for_every_dimension_1_to_4097():
    """Bit for bit, every dimension (every remainder mod 8 and mod 16, every number of
    16-blocks up to 256), plus two more pairs at random dimensions."""
    rng = np.random.default_rng(4097)
    dims = list(range(1, 4098)) + [int(d) for d in rng.integers(4098, 20_000, size=8)]
    mismatches = []
    for dim in dims:
        a, b = k4_pair(dim)
        want = bits(k4_cosine(a, b))
        for path in kernels.simd_paths():
            if bits(kernels.cosine(a, b, simd=path)) != want:
                mismatches.append((dim, path))
    assert mismatches == []
    assert len(kernels.simd_paths()) >= 1


@pytest.mark.parametrize("path", [None] + kernels.simd_paths())
def test_K4_cosine_many_rows_equal_the_python_model(path):
    rng = np.random.default_rng(5)
    for dim in (1, 7, 8, 15, 16, 17, 24, 383, 384, 385):
        q = rng.standard_normal(dim).astype(np.float32)
        m = rng.standard_normal((40, dim)).astype(np.float32)
        got = kernels.cosine_many(q, m, simd=path)
        assert [bits(v) for v in got] == [bits(k4_cosine(q, row)) for row in m], dim


FINITE_F32 = st.floats(width=32, allow_nan=False, allow_infinity=False)


@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_K4_property_extreme_values_give_the_same_bits_on_every_path(data):
    """Subnormals, float32's largest values, zeros and signs: still the same bits."""
    dim = data.draw(st.integers(1, 70), label="dim")
    elems = st.one_of(
        FINITE_F32, st.sampled_from([0.0, -0.0, 1e-45, -1e-45, 3.4e38, -3.4e38, 1.1754944e-38])
    )
    a = np.array(data.draw(st.lists(elems, min_size=dim, max_size=dim), label="a"), np.float32)
    b = np.array(data.draw(st.lists(elems, min_size=dim, max_size=dim), label="b"), np.float32)
    want = bits(k4_cosine(a, b))
    for path in kernels.simd_paths():
        assert bits(kernels.cosine(a, b, simd=path)) == want, path


def test_K3_simd_paths_include_scalar_and_the_cpu_s_best():
    paths = kernels.simd_paths()
    assert paths[0] == "scalar"
    assert set(paths) <= {"scalar", "avx2-fma", "neon"}
    assert kernels.simd_current() in paths
    import platform

    if platform.machine().lower() in ("aarch64", "arm64"):
        assert "neon" in paths
    if platform.machine().lower() in ("x86_64", "amd64") and os.path.exists("/proc/cpuinfo"):
        flags = open("/proc/cpuinfo").read()
        has = " avx2" in flags and " fma" in flags
        assert ("avx2-fma" in paths) == has


@pytest.mark.skipif(not simd_paths_other_than_scalar(), reason="no SIMD path on this CPU")
def test_K3_avx2_fma_vs_scalar_explicitly():
    path = simd_paths_other_than_scalar()[0]
    rng = np.random.default_rng(77)
    for dim in range(1, 70):
        a = (rng.standard_normal(dim) * 1e3).astype(np.float32)
        b = (rng.standard_normal(dim) * 1e-3).astype(np.float32)
        s = kernels.cosine(a, b, simd="scalar")
        v = kernels.cosine(a, b, simd=path)
        assert bits(s) == bits(v)  # K4 (before K4 the last bits differed on most pairs)
        assert s == pytest.approx(ref_cos(a, b), abs=TOL)


@pytest.mark.parametrize("path", kernels.simd_paths())
def test_K1_kernels_read_unaligned_arrays(path):
    rng = np.random.default_rng(3)
    for dim in [1, 5, 8, 9, 17, 384]:
        a = rng.standard_normal(dim).astype("<f4")
        b = rng.standard_normal(dim).astype("<f4")
        for off in (1, 2, 3):
            buf = bytearray(off) + bytearray(a.tobytes())
            ua = np.frombuffer(buf, dtype="<f4", offset=off)
            assert not ua.flags.aligned
            assert kernels.cosine(ua, b, simd=path) == pytest.approx(ref_cos(a, b), abs=TOL)
            # the kernel never writes to its input
            assert bytes(buf[off:]) == a.tobytes()


@pytest.mark.parametrize("path", kernels.simd_paths())
def test_K_kernels_nan_for_zero_norm_and_non_finite(path):
    assert math.isnan(kernels.cosine([0, 0, 0], [1, 2, 3], simd=path))
    assert math.isnan(kernels.cosine([1, 2, 3], [0, 0, 0], simd=path))
    assert math.isnan(kernels.cosine([1, float("nan"), 3], [1, 2, 3], simd=path))
    assert math.isnan(kernels.cosine([1] * 9, [1] * 8 + [float("inf")], simd=path))


@pytest.mark.parametrize("dim", [1, 3, 8, 17, 384, 385])
@pytest.mark.parametrize("path", [None] + kernels.simd_paths())
def test_K_cosine_many_matches_numpy(dim, path):
    rng = np.random.default_rng(dim)
    q = rng.standard_normal(dim).astype(np.float32)
    m = rng.standard_normal((500, dim)).astype(np.float32)
    m[7] = 0.0  # a zero row -> nan
    got = kernels.cosine_many(q, m, simd=path)
    assert got.dtype == np.float64 and got.shape == (500,)
    q64, m64 = q.astype(np.float64), m.astype(np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        want = (m64 @ q64) / (np.linalg.norm(m64, axis=1) * np.linalg.norm(q64))
    assert math.isnan(got[7]) and math.isnan(want[7])
    mask = np.arange(500) != 7
    np.testing.assert_allclose(got[mask], want[mask], rtol=0, atol=TOL)
    # and each row equals the single-pair kernel
    for i in (0, 1, 499):
        assert got[i] == pytest.approx(kernels.cosine(q, m[i], simd=path), abs=TOL)


def test_K_kernel_argument_errors():
    with pytest.raises(ValueError, match="dimension mismatch: 2 vs 3"):
        kernels.cosine([1, 2], [1, 2, 3])
    with pytest.raises(ValueError, match="dimension mismatch"):
        kernels.cosine_many([1, 2], np.ones((4, 3)))
    with pytest.raises(ValueError, match="unknown SIMD path"):
        kernels.cosine([1], [1], simd="sse9")


def test_V7_sql_uses_the_same_kernel_as_python(conn):
    """The SQL function and the Python binding give the same bits (K4)."""
    rng = np.random.default_rng(8)
    for dim in [3, 16, 385, 4097]:
        a = rng.standard_normal(dim).astype(np.float32)
        b = rng.standard_normal(dim).astype(np.float32)
        sql = one(conn, "SELECT vec_cosine(?, ?)", (f32(a), f32(b)))
        assert bits(sql) == bits(kernels.cosine(a, b)) == bits(k4_cosine(a, b))


# The child of the K4 tests below: with SQLITE_RRF_SIMD=scalar (given in its environment),
# it writes vec_cosine of the K4 test pair of every dimension 1..4097 (and 8 random ones)
# into table r of the database named by argv[1], and builds an index on vec_cosine(e, q)
# over table t, which the parent then reads with its own (default) kernel.
K4_CHILD = r"""
import sys
import apsw, numpy as np, sqlite_rrf
sys.path.insert(0, sys.argv[2])
from test_vec_cosine import k4_pair, K4_INDEX_QUERY
c = apsw.Connection(sys.argv[1])
sqlite_rrf.load(c)
simd = dict(l.split(": ", 1) for l in c.execute("SELECT rrf_debug()").fetchone()[0].splitlines())["simd"]
rng = np.random.default_rng(4097)
dims = list(range(1, 4098)) + [int(d) for d in rng.integers(4098, 20_000, size=8)]
with c:
    c.execute("CREATE TABLE r(dim INTEGER PRIMARY KEY, v REAL, simd TEXT)")
    for dim in dims:
        a, b = k4_pair(dim)
        c.execute("INSERT INTO r VALUES (?, vec_cosine(?, ?), ?)", (dim, a.tobytes(), b.tobytes(), simd))
    c.execute("CREATE TABLE t(id INTEGER PRIMARY KEY, e BLOB)")
    c.executemany("INSERT INTO t VALUES (?, ?)",
                  [(i, rng.standard_normal(384).astype("<f4").tobytes()) for i in range(500)])
    c.execute(f"CREATE INDEX ix ON t(vec_cosine(e, {K4_INDEX_QUERY}))")
"""
#: The constant query vector of the child's expression index, as a blob literal.
K4_INDEX_QUERY = (
    "x'" + np.random.default_rng(99).standard_normal(384).astype("<f4").tobytes().hex() + "'"
)


@pytest.fixture(scope="module")
def k4_scalar_db(tmp_path_factory):
    """The child's database, written with the scalar kernel."""
    path = str(tmp_path_factory.mktemp("k4") / "scalar.db")
    env = dict(os.environ, SQLITE_RRF_SIMD="scalar")
    r = subprocess.run(
        [sys.executable, "-c", K4_CHILD, path, os.path.dirname(__file__)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr
    return path


def test_K4_V7_sql_scalar_and_default_kernels_give_the_same_bits(conn, k4_scalar_db):
    """SQLITE_RRF_SIMD=scalar in a child against this process's kernel (the CPU's best),
    every dimension 1..4097: the same float64 bits, and the Python model's."""
    c = apsw.Connection(k4_scalar_db)
    rows = c.execute("SELECT dim, v, simd FROM r ORDER BY dim").fetchall()
    c.close()
    assert len(rows) >= 4097 and {simd for _, _, simd in rows} == {"scalar"}
    here = _debug_lines(one(conn, "SELECT rrf_debug()"))["simd"]
    mismatches = []
    for dim, v, _ in rows:
        a, b = k4_pair(dim)
        mine = one(conn, "SELECT vec_cosine(?, ?)", (a.tobytes(), b.tobytes()))
        if not (bits(mine) == bits(v) == bits(k4_cosine(a, b))):
            mismatches.append(dim)
    assert mismatches == [], (here, mismatches[:10])


def test_K4_an_index_built_with_the_scalar_kernel_holds_under_the_default_one(k4_scalar_db):
    """What DETERMINISTIC promises an expression index: built by the scalar kernel (child),
    read by this process's kernel, integrity_check passes and every row is found through
    the index by the value computed now."""
    c = apsw.Connection(k4_scalar_db)
    sqlite_rrf.load(c)
    assert c.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    expr = f"vec_cosine(e, {K4_INDEX_QUERY})"
    plan = " ".join(
        r[-1] for r in c.execute(f"EXPLAIN QUERY PLAN SELECT id FROM t WHERE {expr} = ?", (0.5,))
    )
    assert "INDEX ix" in plan, plan
    now = c.execute(f"SELECT id, {expr} FROM t NOT INDEXED").fetchall()
    for rowid, v in now:
        assert c.execute(f"SELECT id FROM t WHERE {expr} = ?", (v,)).fetchall() == [(rowid,)]
    c.close()


SUBPROCESS_SCRIPT = r"""
import json, sys
import apsw, numpy as np, sqlite_rrf
c = apsw.Connection(":memory:")
sqlite_rrf.load(c)
dbg = c.execute("SELECT rrf_debug()").fetchone()[0]
rng = np.random.default_rng(0)
out = []
for dim in [1, 7, 8, 9, 17, 384, 385, 4097]:
    a = rng.standard_normal(dim).astype("<f4")
    b = rng.standard_normal(dim).astype("<f4")
    got = c.execute("SELECT vec_cosine(?, ?)", (a.tobytes(), b.tobytes())).fetchone()[0]
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    want = float(a64 @ b64 / (np.linalg.norm(a64) * np.linalg.norm(b64)))
    out.append([got, want])
print(json.dumps({"debug": dbg, "pairs": out}))
"""


def _run_with_simd_env(value):
    env = dict(os.environ)
    env["SQLITE_RRF_SIMD"] = value
    r = subprocess.run(
        [sys.executable, "-c", SUBPROCESS_SCRIPT],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def _debug_lines(text):
    return dict(line.split(": ", 1) for line in text.splitlines())


@pytest.mark.parametrize(
    "env_value,expect", [("scalar", "scalar"), ("avx2", "avx2-fma"), ("neon", "neon")]
)
def test_K3_V7_SQLITE_RRF_SIMD_env_selects_the_sql_kernel(env_value, expect):
    if expect not in kernels.simd_paths():
        pytest.skip(f"{expect} not supported on this CPU")
    res = _run_with_simd_env(env_value)
    dbg = _debug_lines(res["debug"])
    assert dbg["simd"] == expect
    assert "simd_note" not in dbg
    for got, want in res["pairs"]:
        assert got == pytest.approx(want, abs=TOL)


def test_K3_unknown_SQLITE_RRF_SIMD_falls_back_to_best_with_a_note():
    res = _run_with_simd_env("bogus-path")
    dbg = _debug_lines(res["debug"])
    best = kernels.simd_paths()[-1] if len(kernels.simd_paths()) > 1 else "scalar"
    assert dbg["simd"] == best
    assert dbg["simd_note"] == "SQLITE_RRF_SIMD=bogus-path is not available here"
    for got, want in res["pairs"]:
        assert got == pytest.approx(want, abs=TOL)
