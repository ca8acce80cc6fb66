"""vec_signbits(v) and rrf_hamming(a, b) against numpy (csrc/quant.c H1..H8, csrc/kernels.h
K5, K6).

The references: ``np.packbits(v > 0, bitorder='little')`` for the sign codes, and
``np.unpackbits(a ^ b).sum()`` for the Hamming distance. Counts are integers, so every
kernel path (the scalar twin, AVX2, NEON where the CPU has them) must give exactly the
reference, in Python through the cffi binding and in SQL, including a child process with
``SQLITE_RRF_SIMD=scalar``.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import apsw
import numpy as np
import pytest

import sqlite_rrf
from sqlite_rrf.core import kernels
from sqlite_rrf.core._kernels import ffi, lib  # type: ignore[import-not-found]

PATH_CODES = {"scalar": 0, "avx2-fma": 1, "neon": 2}
PATHS = kernels.simd_paths()


def f32(x) -> bytes:
    return np.asarray(x, dtype="<f4").tobytes()


def ref_code(v) -> bytes:
    return np.packbits(np.asarray(v, dtype=np.float32) > 0, bitorder="little").tobytes()


def ref_hamming(a: bytes, b: bytes) -> int:
    x = np.frombuffer(a, dtype=np.uint8) ^ np.frombuffer(b, dtype=np.uint8)
    return int(np.unpackbits(x).sum())


def one(conn, sql, params=()):
    return conn.execute(sql, params).fetchone()[0]


def sql_error(msg: str):
    return pytest.raises(apsw.SQLError, match=re.escape(msg))


def kernel_hamming(a: bytes, b: bytes, path: str, offset: int = 0) -> int:
    """rrf_hamming_bytes on a and b placed at `offset` bytes into their buffers."""
    pad = b"\x5a" * offset
    ba, bb = bytearray(pad + a), bytearray(pad + b)
    pa = ffi.cast("const unsigned char *", ffi.from_buffer(ba)) + offset
    pb = ffi.cast("const unsigned char *", ffi.from_buffer(bb)) + offset
    return int(lib.rrf_hamming_bytes(pa, pb, len(a), PATH_CODES[path]))


# ---------------------------------------------------------------- H1, H2: vec_signbits


@pytest.mark.parametrize("dim", [1, 2, 7, 8, 9, 15, 16, 17, 63, 64, 65, 383, 384, 385, 1024, 4097])
def test_H1_signbits_matches_numpy_packbits_little(conn, dim):
    rng = np.random.default_rng(dim)
    for _ in range(4):
        v = rng.standard_normal(dim).astype(np.float32)
        v[rng.random(dim) < 0.1] = 0.0  # zeros give 0 bits
        got = one(conn, "SELECT vec_signbits(?)", (f32(v),))
        assert isinstance(got, bytes)
        assert len(got) == (dim + 7) // 8
        assert got == ref_code(v)
        # the same vector as JSON text
        text = "[" + ",".join(repr(float(x)) for x in v) + "]"
        assert one(conn, "SELECT vec_signbits(?)", (text,)) == got


def test_H1_bit_order_by_hand(conn):
    # elements 0, 3, 4, 6, 7 positive -> 0b11011001 = 0xD9; element 8 positive -> 0x01
    v = [1, -1, 0, 2, 3, -0.0, 1, 1, 1]
    assert one(conn, "SELECT hex(vec_signbits(?))", (f32(v),)) == "D901"
    assert one(conn, "SELECT hex(vec_signbits('[1,-1,0,2,3,-0.0,1,1,1]'))") == "D901"
    assert one(conn, "SELECT hex(vec_signbits('[-1]'))") == "00"
    assert one(conn, "SELECT hex(vec_signbits('[1e-45]'))") == "01"  # a denormal > 0
    assert one(conn, "SELECT hex(vec_signbits(?))", (f32([1] * 16),)) == "FFFF"
    # the unused high bits of the last byte are 0
    assert one(conn, "SELECT hex(vec_signbits(?))", (f32([1] * 10),)) == "FF03"


@pytest.mark.parametrize("shift", [1, 2, 3, 5])
def test_H1_H7_unaligned_blob(conn, shift):
    rng = np.random.default_rng(shift)
    v = rng.standard_normal(385).astype(np.float32)
    got = one(
        conn,
        "SELECT vec_signbits(substr(:p, :from))",
        {"p": b"\x00" * shift + f32(v), "from": shift + 1},
    )
    assert got == ref_code(v)


def test_H2_null(conn):
    assert one(conn, "SELECT vec_signbits(NULL)") is None


@pytest.mark.parametrize(
    "arg, msg",
    [
        (b"", "vec_signbits: argument 1 is an empty vector"),
        ("[]", "vec_signbits: argument 1 is an empty vector"),
        (
            b"\x00\x00\x80",
            "vec_signbits: argument 1 is a blob of 3 bytes, not a multiple of 4 (float32)",
        ),
        (f32([1, 2, np.nan, 4]), "vec_signbits: argument 1 has NaN at index 2"),
        (f32([1, np.inf]), "vec_signbits: argument 1 has Inf at index 1"),
        (f32([-np.inf]), "vec_signbits: argument 1 has Inf at index 0"),
        ("[1, 2", "vec_signbits: argument 1 is malformed JSON at offset 5: expected ',' or ']'"),
        ("[1, 1e39]", "vec_signbits: argument 1 has an element out of float32 range at index 1"),
        (42, "vec_signbits: argument 1 must be a float32 BLOB or a JSON array, got INTEGER"),
        (4.5, "vec_signbits: argument 1 must be a float32 BLOB or a JSON array, got REAL"),
    ],
)
def test_H2_errors_name_the_function_and_fault(conn, arg, msg):
    with sql_error(msg):
        one(conn, "SELECT vec_signbits(?)", (arg,))


def test_H2_vec_cosine_messages_unchanged_by_the_shared_reader(conn):
    with sql_error("vec_cosine: argument 2 is a blob of 3 bytes, not a multiple of 4 (float32)"):
        one(conn, "SELECT vec_cosine(?, ?)", (f32([1]), b"abc"))
    with sql_error("vec_cosine: argument 1 is malformed JSON at offset 0: expected '['"):
        one(conn, "SELECT vec_cosine('x', '[1]')")


def test_H1_constant_json_is_parsed_once_and_correct_on_every_row(conn):
    conn.execute("CREATE TABLE t(i INTEGER)")
    conn.execute(
        "WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM s WHERE i < 50) "
        "INSERT INTO t SELECT i FROM s"
    )
    rows = conn.execute("SELECT vec_signbits('[0.5, -1, 2]') FROM t").fetchall()
    assert rows == [(bytes([0b101]),)] * 50


# ---------------------------------------------------------------- H3..H6: rrf_hamming


@pytest.mark.parametrize("path", PATHS)
def test_K5_every_path_equals_numpy_for_every_length_1_to_4096(path):
    rng = np.random.default_rng(4096)
    big_a = rng.integers(0, 256, 4096, dtype=np.uint8).tobytes()
    big_b = rng.integers(0, 256, 4096, dtype=np.uint8).tobytes()
    xa = np.frombuffer(big_a, dtype=np.uint8)
    xb = np.frombuffer(big_b, dtype=np.uint8)
    prefix = np.concatenate([[0], np.cumsum(np.unpackbits(xa ^ xb).reshape(-1, 8).sum(axis=1))])
    for n in range(1, 4097):
        assert kernel_hamming(big_a[:n], big_b[:n], path) == int(prefix[n]), n


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("offset", range(8))
def test_K1_K5_unaligned_buffers(path, offset):
    rng = np.random.default_rng(offset)
    for n in [1, 7, 8, 15, 16, 17, 31, 32, 33, 47, 48, 49, 63, 64, 65, 100, 513]:
        a = rng.integers(0, 256, n, dtype=np.uint8).tobytes()
        b = rng.integers(0, 256, n, dtype=np.uint8).tobytes()
        assert kernel_hamming(a, b, path, offset) == ref_hamming(a, b), (n, offset)


@pytest.mark.parametrize("path", PATHS)
def test_K5_extremes(path):
    for n in [1, 16, 32, 48, 4096, 70000]:
        ones, zeros = b"\xff" * n, b"\x00" * n
        assert kernel_hamming(ones, zeros, path) == 8 * n
        assert kernel_hamming(ones, ones, path) == 0
        assert kernel_hamming(zeros, zeros, path) == 0
        alt = b"\xaa" * n
        assert kernel_hamming(alt, b"\x55" * n, path) == 8 * n
        assert kernel_hamming(alt, zeros, path) == 4 * n


def test_K6_unsupported_path_is_reported():
    unsupported = [p for p in PATH_CODES if p not in PATHS]
    for p in unsupported:
        assert lib.rrf_hamming_bytes(b"\x01", b"\x00", 1, PATH_CODES[p]) == 2**64 - 1


def test_H3_sql_matches_numpy_over_many_lengths(conn):
    rng = np.random.default_rng(7)
    lengths = list(range(1, 130)) + [255, 256, 257, 384, 1000, 4095, 4096]
    lengths += [int(x) for x in rng.integers(1, 4097, 40)]
    for n in lengths:
        a = rng.integers(0, 256, n, dtype=np.uint8).tobytes()
        b = rng.integers(0, 256, n, dtype=np.uint8).tobytes()
        got = one(conn, "SELECT rrf_hamming(?, ?)", (a, b))
        assert isinstance(got, int)
        assert got == ref_hamming(a, b), n


@pytest.mark.parametrize("shift", [1, 2, 3, 7])
def test_H3_H7_unaligned_blobs_via_substr(conn, shift):
    rng = np.random.default_rng(shift)
    for n in [1, 16, 33, 48, 97]:
        a = rng.integers(0, 256, n, dtype=np.uint8).tobytes()
        b = rng.integers(0, 256, n, dtype=np.uint8).tobytes()
        got = one(
            conn,
            "SELECT rrf_hamming(substr(:a, :from), :b)",
            {"a": b"\x00" * shift + a, "b": b, "from": shift + 1},
        )
        assert got == ref_hamming(a, b)


def test_H3_codes_of_vectors(conn):
    """rrf_hamming of two sign codes counts the dimensions whose signs differ."""
    rng = np.random.default_rng(384)
    for _ in range(20):
        u = rng.standard_normal(384).astype(np.float32)
        v = rng.standard_normal(384).astype(np.float32)
        got = one(conn, "SELECT rrf_hamming(vec_signbits(?), vec_signbits(?))", (f32(u), f32(v)))
        assert got == int(np.sum((u > 0) != (v > 0)))


def test_H4_null(conn):
    assert one(conn, "SELECT rrf_hamming(NULL, x'00')") is None
    assert one(conn, "SELECT rrf_hamming(x'00', NULL)") is None
    assert one(conn, "SELECT rrf_hamming(NULL, 'text')") is None  # NULL is checked first


@pytest.mark.parametrize(
    "a, b, msg",
    [
        (b"\x00\x01", b"\x00", "rrf_hamming: length mismatch: 2 vs 1 bytes"),
        (b"\x00" * 48, b"\x00" * 47, "rrf_hamming: length mismatch: 48 vs 47 bytes"),
        ("ab", b"\x00", "rrf_hamming: argument 1 must be a BLOB, got TEXT"),
        (b"\x00", 3, "rrf_hamming: argument 2 must be a BLOB, got INTEGER"),
        (b"\x00", 3.5, "rrf_hamming: argument 2 must be a BLOB, got REAL"),
        (b"", b"", "rrf_hamming: argument 1 is an empty BLOB"),
        (b"\x01", b"", "rrf_hamming: argument 2 is an empty BLOB"),
    ],
)
def test_H5_errors(conn, a, b, msg):
    with sql_error(msg):
        one(conn, "SELECT rrf_hamming(?, ?)", (a, b))


# The child: SQLITE_RRF_SIMD=scalar; prints rrf_debug()'s simd line and the distances.
CHILD = r"""
import json, sys
import apsw, sqlite_rrf
pairs = json.loads(sys.stdin.read())
c = apsw.Connection(":memory:")
sqlite_rrf.load(c)
simd = dict(l.split(": ", 1) for l in c.execute("SELECT rrf_debug()").fetchone()[0].split("\n"))["simd"]
out = [c.execute("SELECT rrf_hamming(?, ?)", (bytes.fromhex(a), bytes.fromhex(b))).fetchone()[0]
       for a, b in pairs]
print(json.dumps({"simd": simd, "out": out}))
"""


def test_H6_forced_scalar_child_gives_the_same_counts(conn):
    rng = np.random.default_rng(66)
    pairs = []
    for n in list(range(1, 100)) + [384, 4096] + [int(x) for x in rng.integers(1, 4097, 20)]:
        pairs.append(
            (
                rng.integers(0, 256, n, dtype=np.uint8).tobytes(),
                rng.integers(0, 256, n, dtype=np.uint8).tobytes(),
            )
        )
    env = dict(os.environ, SQLITE_RRF_SIMD="scalar")
    r = subprocess.run(
        [sys.executable, "-c", CHILD],
        env=env,
        capture_output=True,
        text=True,
        input=json.dumps([(a.hex(), b.hex()) for a, b in pairs]),
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    child = json.loads(r.stdout)
    assert child["simd"] == "scalar"
    here = [one(conn, "SELECT rrf_hamming(?, ?)", p) for p in pairs]
    want = [ref_hamming(a, b) for a, b in pairs]
    assert child["out"] == want
    assert here == want


# ---------------------------------------------------------------- H8: flags


def test_H8_deterministic_innocuous_usable_in_an_index_and_a_view():
    c = apsw.Connection(":memory:")
    sqlite_rrf.load(c)
    det, inn = apsw.SQLITE_DETERMINISTIC, apsw.SQLITE_INNOCUOUS
    rows = c.execute(
        "SELECT name, type, flags FROM pragma_function_list "
        "WHERE name IN ('vec_signbits', 'rrf_hamming')"
    ).fetchall()
    assert sorted(r[0] for r in rows) == ["rrf_hamming", "vec_signbits"]
    for name, type_, flags in rows:
        assert type_ == "s" and flags & det and flags & inn, name
    c.execute("PRAGMA trusted_schema = OFF")
    c.execute("CREATE TABLE t(v BLOB)")
    c.execute("INSERT INTO t VALUES (?), (?)", (f32([1, -1, 1]), f32([-1, -1, 1])))
    c.execute("CREATE INDEX ix ON t(rrf_hamming(vec_signbits(v), x'05'))")
    c.execute("CREATE VIEW vw AS SELECT rrf_hamming(vec_signbits(v), x'05') AS d FROM t")
    assert sorted(r[0] for r in c.execute("SELECT d FROM vw")) == [0, 1]


# ---------------------------------------------------------------- H9..H16: rrf_hamming_topk


def ref_topk(q: bytes, items, k: int, pending=()):
    """The reference: every (rowid, code) scored by numpy, sorted by (distance, rowid),
    the first k as [rowid, -distance], then the pending rowids in order as [rowid, None]."""
    scored = sorted((ref_hamming(q, c), r) for r, c in items)
    return [[r, -d] for d, r in scored[:k]] + [[r, None] for r in sorted(pending)]


def blocks_table(
    conn,
    rng,
    nblocks: int,
    codelen: int,
    sizes=(1, 256),
    loose: int = 0,
    pending: int = 0,
    ties: bool = False,
):
    """A table t(rowids, codes) of random blocks (rowids as little-endian int64), plus
    loose rows (an INTEGER rowid, one code) and pending rows (an INTEGER rowid, NULL).
    Returns (items, pending rowids)."""
    conn.execute("DROP TABLE IF EXISTS t")
    conn.execute("CREATE TABLE t(rowids, codes)")
    items, pend = [], []
    used = set()

    def fresh():
        while True:
            r = int(rng.integers(-(2**40), 2**40))
            if r not in used:
                used.add(r)
                return r

    for _ in range(nblocks):
        n = int(rng.integers(sizes[0], sizes[1] + 1))
        rowids = [fresh() for _ in range(n)]
        if ties:  # few distinct codes: many equal distances, decided by rowid
            pool = rng.integers(0, 256, (3, codelen), dtype=np.uint8)
            codes = [pool[int(rng.integers(0, 3))].tobytes() for _ in range(n)]
        else:
            codes = [rng.integers(0, 256, codelen, dtype=np.uint8).tobytes() for _ in range(n)]
        conn.execute(
            "INSERT INTO t VALUES (?, ?)",
            (np.asarray(rowids, dtype="<i8").tobytes(), b"".join(codes)),
        )
        items += list(zip(rowids, codes))
    for _ in range(loose):
        r, c = fresh(), rng.integers(0, 256, codelen, dtype=np.uint8).tobytes()
        conn.execute("INSERT INTO t VALUES (?, ?)", (r, c))
        items.append((r, c))
    for _ in range(pending):
        r = fresh()
        conn.execute("INSERT INTO t VALUES (?, NULL)", (r,))
        pend.append(r)
    return items, pend


HTOPK_SQL = "SELECT rrf_hamming_topk(:k, :q, rowids, codes) FROM t"


@pytest.mark.parametrize("codelen", [1, 7, 8, 31, 32, 33, 48, 64, 100])
def test_H9_H15_H16_hamming_topk_matches_numpy(conn, codelen):
    rng = np.random.default_rng(900 + codelen)
    for trial in range(6):
        items, pend = blocks_table(
            conn,
            rng,
            int(rng.integers(1, 12)),
            codelen,
            loose=int(rng.integers(0, 20)),
            pending=int(rng.integers(0, 4)) if trial % 2 else 0,
            ties=trial >= 3,
        )
        q = rng.integers(0, 256, codelen, dtype=np.uint8).tobytes()
        for k in (1, 2, 10, 200, len(items), len(items) + 5, 1_000_000):
            got = json.loads(one(conn, HTOPK_SQL, {"k": k, "q": q}))
            assert got == ref_topk(q, items, k, pend), (codelen, trial, k)


def test_H9_equals_rrf_topk_over_the_unpacked_codes(conn):
    rng = np.random.default_rng(91)
    items, _ = blocks_table(conn, rng, 20, 48, ties=True)
    conn.execute("CREATE TABLE u(rowid INTEGER PRIMARY KEY, code BLOB)")
    conn.executemany("INSERT INTO u VALUES (?, ?)", items)
    q = rng.integers(0, 256, 48, dtype=np.uint8).tobytes()
    for k in (1, 50, 777, 5000):
        want = one(conn, "SELECT rrf_topk(?, -rrf_hamming(code, ?), rowid) FROM u", (k, q))
        assert one(conn, HTOPK_SQL, {"k": k, "q": q}) == want


@pytest.mark.parametrize("shift", [1, 3, 5])
def test_H13_unaligned_blobs(conn, shift):
    rng = np.random.default_rng(130 + shift)
    items, _ = blocks_table(conn, rng, 5, 48)
    q = rng.integers(0, 256, 48, dtype=np.uint8).tobytes()
    pad = b"\x00" * shift
    conn.execute("CREATE TABLE padded(rowids, codes)")
    conn.executemany(
        "INSERT INTO padded VALUES (?, ?)",
        [(pad + r, pad + c) for r, c in conn.execute("SELECT * FROM t").fetchall()],
    )
    got = one(
        conn,
        "SELECT rrf_hamming_topk(50, substr(:q, :f), substr(rowids, :f), "
        "substr(codes, :f)) FROM padded",
        {"q": pad + q, "f": shift + 1},
    )
    assert json.loads(got) == ref_topk(q, items, 50)


def test_H10_nulls_and_empty(conn):
    rid = np.asarray([5], dtype="<i8").tobytes()
    assert one(conn, "SELECT rrf_hamming_topk(3, x'00', ?, x'01') WHERE 0", (rid,)) is None
    assert one(conn, "SELECT rrf_hamming_topk(3, NULL, ?, x'01')", (rid,)) is None
    assert one(conn, "SELECT rrf_hamming_topk(3, x'00', NULL, x'01')") is None
    assert one(conn, "SELECT rrf_hamming_topk(3, x'00', ?, NULL)", (rid,)) is None
    assert one(conn, "SELECT rrf_hamming_topk(3, x'00', x'', x'')") is None
    # H16: NULL codes with an INTEGER rowid is pending, kept beyond k
    assert json.loads(
        one(
            conn,
            "SELECT rrf_hamming_topk(1, x'00', r, c) FROM (SELECT 9 AS r, "
            "NULL AS c UNION ALL SELECT 4, x'03' UNION ALL SELECT 2, x'01' "
            "UNION ALL SELECT 3, NULL)",
        )
    ) == [[2, -1], [3, None], [9, None]]


@pytest.mark.parametrize(
    "k, q, rowids, codes, msg",
    [
        (
            0,
            b"\x00",
            b"\x00" * 8,
            b"\x00",
            "rrf_hamming_topk: k must be an INTEGER from 1 to 1000000, got 0",
        ),
        (
            1000001,
            b"\x00",
            b"\x00" * 8,
            b"\x00",
            "rrf_hamming_topk: k must be an INTEGER from 1 to 1000000, got 1000001",
        ),
        (
            2.0,
            b"\x00",
            b"\x00" * 8,
            b"\x00",
            "rrf_hamming_topk: k must be an INTEGER from 1 to 1000000, got REAL",
        ),
        (
            None,
            b"\x00",
            b"\x00" * 8,
            b"\x00",
            "rrf_hamming_topk: k must be an INTEGER from 1 to 1000000, got NULL",
        ),
        (1, "ab", b"\x00" * 8, b"\x00", "rrf_hamming_topk: qcode must be a BLOB, got TEXT"),
        (1, b"", b"\x00" * 8, b"\x00", "rrf_hamming_topk: qcode is an empty BLOB"),
    ],
)
def test_H12_errors_name_the_function_and_fault(conn, k, q, rowids, codes, msg):
    with sql_error(msg):
        one(conn, "SELECT rrf_hamming_topk(?, ?, ?, ?)", (k, q, rowids, codes))


def test_H11_H12_errors_between_rows(conn):
    with sql_error("rrf_hamming_topk: k must be the same on every row (2, then 3)"):
        one(
            conn,
            "SELECT rrf_hamming_topk(k, x'00', 1, x'00') FROM (SELECT 2 AS k UNION ALL SELECT 3)",
        )
    with sql_error(
        "rrf_hamming_topk: qcode must be the same length on every row (1, then 2 bytes)"
    ):
        one(
            conn,
            "SELECT rrf_hamming_topk(1, q, 1, c) FROM (SELECT x'00' AS q, x'00' AS c "
            "UNION ALL SELECT x'0000', x'0000')",
        )
    # an error stops the group: a later good row does not bring a result back
    with sql_error("rrf_hamming_topk: qcode must be a BLOB"):
        one(
            conn,
            "SELECT rrf_hamming_topk(1, q, 1, x'00') FROM (SELECT 'bad' AS q "
            "UNION ALL SELECT x'00')",
        )


def le(*rowids: int) -> bytes:
    return np.asarray(rowids, "<i8").tobytes()


@pytest.mark.parametrize(
    "rowids, codes, want",
    [
        (5, b"\x00\x00", [[5, None]]),  # a loose code of the wrong length
        (5, 7, [[5, None]]),  # codes not a BLOB
        (5, "ab", [[5, None]]),
        (le(3, 4), b"\x00" * 3, [[3, None], [4, None]]),  # a block whose codes do not fit
        (le(3, 4), 7, [[3, None], [4, None]]),
        (le(3, 4) + b"\x01", b"\x00\x00", [[3, None], [4, None]]),  # rowids not whole int64s
        (le(3)[:7], b"\x00", None),  # no whole int64: nothing
        ("x", b"\x00", None),  # TEXT or REAL rowids: skipped
        (1.5, b"\x00", None),
    ],
)
def test_H17_a_row_that_does_not_fit_is_pending(conn, rowids, codes, want):
    got = one(conn, "SELECT rrf_hamming_topk(1, x'0f', ?, ?)", (rowids, codes))
    assert (None if got is None else json.loads(got)) == want
    # beside good rows: the good ones are scored, the bad ones pending after them
    got = one(
        conn,
        "SELECT rrf_hamming_topk(1, x'0f', r, c) FROM (SELECT 9 AS r, x'0f' AS c "
        "UNION ALL SELECT ?, ? UNION ALL SELECT 1, NULL)",
        (rowids, codes),
    )
    pend = sorted([1] + [r for r, _ in (want or [])])
    assert json.loads(got) == [[9, 0]] + [[r, None] for r in pend]


def test_H14_flags(conn):
    rows = conn.execute(
        "SELECT type, flags FROM pragma_function_list WHERE name = 'rrf_hamming_topk'"
    ).fetchall()
    assert rows and all(t == "a" and f & apsw.SQLITE_INNOCUOUS for t, f in rows)
    with pytest.raises(apsw.SQLError):
        conn.execute("SELECT rrf_hamming_topk(1, x'00', 1, x'00') OVER () FROM (SELECT 1)")


# The child: SQLITE_RRF_SIMD=scalar; rrf_hamming_topk over the blocks it is given.
CHILD_TOPK = r"""
import json, sys
import apsw, sqlite_rrf
d = json.loads(sys.stdin.read())
c = apsw.Connection(":memory:")
sqlite_rrf.load(c)
simd = dict(l.split(": ", 1) for l in c.execute("SELECT rrf_debug()").fetchone()[0].split("\n"))["simd"]
c.execute("CREATE TABLE t(rowids, codes)")
c.executemany("INSERT INTO t VALUES (?, ?)", [(bytes.fromhex(r), bytes.fromhex(x)) for r, x in d["rows"]])
out = c.execute("SELECT rrf_hamming_topk(?, ?, rowids, codes) FROM t",
                (d["k"], bytes.fromhex(d["q"]))).fetchone()[0]
print(json.dumps({"simd": simd, "out": json.loads(out)}))
"""


@pytest.mark.parametrize("codelen", [5, 48, 97])
def test_H13_forced_scalar_child_gives_the_same_top(conn, codelen):
    rng = np.random.default_rng(1300 + codelen)
    items, _ = blocks_table(conn, rng, 8, codelen)
    rows = conn.execute("SELECT rowids, codes FROM t").fetchall()
    q = rng.integers(0, 256, codelen, dtype=np.uint8).tobytes()
    env = dict(os.environ, SQLITE_RRF_SIMD="scalar")
    r = subprocess.run(
        [sys.executable, "-c", CHILD_TOPK],
        env=env,
        capture_output=True,
        text=True,
        input=json.dumps({"k": 100, "q": q.hex(), "rows": [(a.hex(), b.hex()) for a, b in rows]}),
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    child = json.loads(r.stdout)
    assert child["simd"] == "scalar"
    want = ref_topk(q, items, 100)
    assert child["out"] == want
    assert json.loads(one(conn, HTOPK_SQL, {"k": 100, "q": q})) == want
