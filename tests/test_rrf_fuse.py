"""rrf_fuse and rrf_explain against a plain-Python reference (csrc/fuse.c F1..F8).

The reference is the definition itself: the sum of weight / (k + rank) over the rows
that have a rank (``math.fsum``, so it is exact to rounding), weight 1.0 and k 60
by default, NULL when no row contributes; rrf_explain merges rows of the same list
(best rank, that row's weight, summed contribution) in order of first appearance.
"""

from __future__ import annotations

import json
import math
import random
import re

import apsw
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import sqlite_rrf

REL = 1e-12  # float64 rounding of a handful of terms; the C sum is compensated (F6)
LISTS = ["bm25", "vector", "recency", "access"]


# ---------------------------------------------------------------- the reference


def contribution(rank, weight=None, k=None):
    w = 1.0 if weight is None else float(weight)
    kk = 60.0 if k is None else float(k)
    return w / (kk + float(rank))


def ref_fuse(rows):
    """rows: iterables of (rank[, weight[, k]]); None = SQL NULL."""
    terms = [contribution(*r) for r in rows if r[0] is not None]
    return math.fsum(terms) if terms else None


def ref_explain(rows):
    """rows: (list, rank[, weight[, k]]). Returns {list: (rank, weight, contribution)}
    in order of first appearance, or None when no row contributes."""
    out: dict = {}
    parts: dict = {}
    for row in rows:
        name, rank = row[0], row[1]
        if rank is None:
            continue
        weight = row[2] if len(row) > 2 and row[2] is not None else 1.0
        c = contribution(*row[1:])
        if name not in out:
            out[name] = (rank, weight)
            parts[name] = [c]
        else:
            parts[name].append(c)
            if rank < out[name][0]:  # strictly better: the first of equal best ranks stays
                out[name] = (rank, weight)
    if not out:
        return None
    return {n: (r, w, math.fsum(parts[n])) for n, (r, w) in out.items()}


def assert_explain(text, want):
    """Compare rrf_explain's JSON text with ref_explain's dict, key order included."""
    if want is None:
        assert text is None
        return
    assert isinstance(text, str)
    got = json.loads(text)
    assert list(got) == list(want)
    for name, (rank, weight, contrib) in want.items():
        entry = got[name]
        assert list(entry) == ["rank", "weight", "contribution"]
        assert entry["rank"] == pytest.approx(rank, rel=1e-14)
        assert entry["weight"] == pytest.approx(weight, rel=1e-14)
        assert entry["contribution"] == pytest.approx(contrib, rel=1e-13)


def approx_or_none(want):
    return None if want is None else pytest.approx(want, rel=REL)


def one(conn, sql, params=()):
    return conn.execute(sql, params).fetchone()[0]


def sql_error(msg: str):
    return pytest.raises(apsw.SQLError, match="^" + re.escape(msg) + "$")


@pytest.fixture(scope="module")
def mconn():
    c = apsw.Connection(":memory:")
    sqlite_rrf.load(c)
    yield c
    c.close()


# ---------------------------------------------------------------- F1, F3: values and defaults


def test_F1_F3_defaults_weight_1_k_60(conn):
    assert one(conn, "SELECT rrf_fuse(1)") == pytest.approx(1 / 61, rel=REL)
    assert one(conn, "SELECT rrf_fuse(3)") == pytest.approx(1 / 63, rel=REL)
    assert one(conn, "SELECT rrf_fuse(1, 2)") == pytest.approx(2 / 61, rel=REL)
    assert one(conn, "SELECT rrf_fuse(1, 2, 0)") == pytest.approx(2.0, rel=REL)
    assert one(conn, "SELECT rrf_fuse(4, 0.5, 10)") == pytest.approx(0.5 / 14, rel=REL)
    assert one(conn, "SELECT rrf_fuse(2.5, 1, 60)") == pytest.approx(1 / 62.5, rel=REL)


def test_F3_null_weight_or_k_mean_the_defaults(conn):
    assert one(conn, "SELECT rrf_fuse(3, NULL)") == pytest.approx(1 / 63, rel=REL)
    assert one(conn, "SELECT rrf_fuse(3, NULL, NULL)") == pytest.approx(1 / 63, rel=REL)
    assert one(conn, "SELECT rrf_fuse(3, 2, NULL)") == pytest.approx(2 / 63, rel=REL)
    assert one(conn, "SELECT rrf_fuse(3, NULL, 7)") == pytest.approx(1 / 10, rel=REL)
    want = ref_explain([("a", 3, None, 7)])
    assert_explain(one(conn, "SELECT rrf_explain('a', 3, NULL, 7)"), want)
    assert json.loads(one(conn, "SELECT rrf_explain('a', 3, NULL, NULL)"))["a"]["weight"] == 1.0


def test_F1_sum_over_rows_of_a_group(conn):
    rows = [(1, 1.0, 60), (2, 0.5, 60), (10, 2.0, 30), (1, 1.0, 0)]
    conn.execute("CREATE TABLE r(rank, weight, k)")
    conn.executemany("INSERT INTO r VALUES (?, ?, ?)", rows)
    want = 1 / 61 + 0.5 / 62 + 2 / 40 + 1 / 1
    assert one(conn, "SELECT rrf_fuse(rank, weight, k) FROM r") == pytest.approx(want, rel=REL)
    assert one(conn, "SELECT rrf_fuse(rank) FROM r") == pytest.approx(
        2 / 61 + 1 / 62 + 1 / 70, rel=REL
    )
    assert one(conn, "SELECT rrf_fuse(rank, weight) FROM r") == pytest.approx(
        1 / 61 + 0.5 / 62 + 2 / 70 + 1 / 61, rel=REL
    )


def test_F1_large_ranks_and_k(conn):
    assert one(conn, "SELECT rrf_fuse(1000000000)") == pytest.approx(1 / (60 + 1e9), rel=REL)
    assert one(conn, "SELECT rrf_fuse(1, 1, 1e300)") == pytest.approx(1e-300, rel=REL)
    assert one(conn, "SELECT rrf_fuse(9223372036854775807)") == pytest.approx(
        1 / 9.223372036854776e18, rel=REL
    )


def test_F1_weight_zero_counts_as_a_row_with_zero_contribution(conn):
    """A row with weight 0 has a rank, so it is in the list: the result is 0.0, not NULL
    (like sum() of zeros). The recall statement leaves zero-weight lists out itself."""
    assert one(conn, "SELECT rrf_fuse(1, 0)") == 0.0
    assert one(conn, "SELECT typeof(rrf_fuse(1, 0))") == "real"
    assert json.loads(one(conn, "SELECT rrf_explain('x', 1, 0)")) == {
        "x": {"rank": 1, "weight": 0.0, "contribution": 0.0}
    }


# ---------------------------------------------------------------- F2, F5: NULLs


def test_F2_null_rank_contributes_nothing(conn):
    conn.execute("CREATE TABLE r(rank, weight)")
    conn.executemany(
        "INSERT INTO r VALUES (?, ?)", [(1, 1.0), (None, 100.0), (5, 2.0), (None, None)]
    )
    assert one(conn, "SELECT rrf_fuse(rank, weight) FROM r") == pytest.approx(
        1 / 61 + 2 / 65, rel=REL
    )
    # a NULL rank is not even validated against its (bad) weight and k: absent is absent
    assert one(conn, "SELECT rrf_fuse(NULL, -1, -1)") is None
    assert one(conn, "SELECT rrf_explain(NULL, NULL, -1, -1)") is None


def test_F5_no_contributing_row_gives_null(conn):
    conn.execute("CREATE TABLE r(doc, list, rank)")
    conn.executemany(
        "INSERT INTO r VALUES (?, ?, ?)",
        [
            (1, "bm25", 1),
            (1, "vector", None),
            (2, "bm25", None),
            (2, "vector", None),
            (3, "vector", 4),
        ],
    )
    got = conn.execute(
        "SELECT doc, rrf_fuse(rank), typeof(rrf_fuse(rank)), rrf_explain(list, rank) FROM r "
        "GROUP BY doc ORDER BY doc"
    ).fetchall()
    assert got[0][1] == pytest.approx(1 / 61, rel=REL)
    assert got[1][1:] == (None, "null", None)
    assert got[2][1] == pytest.approx(1 / 64, rel=REL)
    assert_explain(got[2][3], {"vector": (4, 1.0, 1 / 64)})
    # an empty input: NULL too
    assert one(conn, "SELECT rrf_fuse(rank) FROM r WHERE 0") is None
    assert one(conn, "SELECT rrf_explain(list, rank) FROM r WHERE 0") is None
    # a sum of NULLs is NULL, unlike total(): "in no list" stays distinguishable from 0
    assert one(conn, "SELECT rrf_fuse(rank) IS NULL FROM r WHERE doc = 2") == 1


# ---------------------------------------------------------------- F4: errors, exact messages


@pytest.mark.parametrize(
    "sql,msg",
    [
        ("SELECT rrf_fuse(0)", "rrf_fuse: rank must be >= 1 (ranks are 1-based), got 0"),
        ("SELECT rrf_fuse(-3)", "rrf_fuse: rank must be >= 1 (ranks are 1-based), got -3"),
        ("SELECT rrf_fuse(0.5)", "rrf_fuse: rank must be >= 1 (ranks are 1-based), got 0.5"),
        (
            "SELECT rrf_fuse(0.999, 1, 60)",
            "rrf_fuse: rank must be >= 1 (ranks are 1-based), got 0.999",
        ),
        ("SELECT rrf_fuse(1, -1)", "rrf_fuse: weight must be >= 0, got -1"),
        ("SELECT rrf_fuse(1, -0.25, 60)", "rrf_fuse: weight must be >= 0, got -0.25"),
        ("SELECT rrf_fuse(1, 1, -1)", "rrf_fuse: k must be >= 0, got -1"),
        ("SELECT rrf_fuse(1, NULL, -0.5)", "rrf_fuse: k must be >= 0, got -0.5"),
        ("SELECT rrf_fuse('3')", "rrf_fuse: rank must be a number, got TEXT"),
        ("SELECT rrf_fuse('abc')", "rrf_fuse: rank must be a number, got TEXT"),
        ("SELECT rrf_fuse(x'01')", "rrf_fuse: rank must be a number, got BLOB"),
        ("SELECT rrf_fuse(1, '1')", "rrf_fuse: weight must be a number, got TEXT"),
        ("SELECT rrf_fuse(1, x'00')", "rrf_fuse: weight must be a number, got BLOB"),
        ("SELECT rrf_fuse(1, 1, 'sixty')", "rrf_fuse: k must be a number, got TEXT"),
        ("SELECT rrf_fuse(1, 1, x'3630')", "rrf_fuse: k must be a number, got BLOB"),
        ("SELECT rrf_fuse(1, 1e999)", "rrf_fuse: weight must be finite, got Inf"),
        ("SELECT rrf_fuse(1, -1e999)", "rrf_fuse: weight must be finite, got -Inf"),
        ("SELECT rrf_fuse(1e999)", "rrf_fuse: rank must be finite, got Inf"),
        ("SELECT rrf_fuse(-1e999)", "rrf_fuse: rank must be finite, got -Inf"),
        ("SELECT rrf_fuse(1, 1, 1e999)", "rrf_fuse: k must be finite, got Inf"),
        # the same checks, with rrf_explain's name
        ("SELECT rrf_explain('a', 0)", "rrf_explain: rank must be >= 1 (ranks are 1-based), got 0"),
        ("SELECT rrf_explain('a', 1, -2)", "rrf_explain: weight must be >= 0, got -2"),
        ("SELECT rrf_explain('a', 1, 1, -60)", "rrf_explain: k must be >= 0, got -60"),
        ("SELECT rrf_explain('a', 'x')", "rrf_explain: rank must be a number, got TEXT"),
        ("SELECT rrf_explain('a', x'01')", "rrf_explain: rank must be a number, got BLOB"),
        ("SELECT rrf_explain('a', 1, 1e999)", "rrf_explain: weight must be finite, got Inf"),
        ("SELECT rrf_explain('a', 1, 1, '60')", "rrf_explain: k must be a number, got TEXT"),
    ],
)
def test_F4_errors_name_the_function_and_the_fault(conn, sql, msg):
    with sql_error(msg):
        conn.execute(sql).fetchall()


@pytest.mark.parametrize(
    "sql,msg",
    [
        ("SELECT rrf_explain(1, 1)", "rrf_explain: list must be TEXT, got INTEGER"),
        ("SELECT rrf_explain(1.5, 1)", "rrf_explain: list must be TEXT, got REAL"),
        ("SELECT rrf_explain(x'61', 1)", "rrf_explain: list must be TEXT, got BLOB"),
        ("SELECT rrf_explain(NULL, 1)", "rrf_explain: list must be TEXT, got NULL"),
        ("SELECT rrf_explain(NULL, 2, 1, 60)", "rrf_explain: list must be TEXT, got NULL"),
    ],
)
def test_F8_list_must_be_text(conn, sql, msg):
    with sql_error(msg):
        conn.execute(sql).fetchall()


def test_F8_null_list_with_null_rank_is_skipped(conn):
    assert one(conn, "SELECT rrf_explain(NULL, NULL)") is None
    conn.execute("CREATE TABLE r(list, rank)")
    conn.executemany("INSERT INTO r VALUES (?, ?)", [("a", 2), (None, None), ("b", None)])
    assert_explain(one(conn, "SELECT rrf_explain(list, rank) FROM r"), {"a": (2, 1.0, 1 / 62)})


def test_F4_error_in_a_later_group_and_in_a_window(conn):
    conn.execute("CREATE TABLE r(id INTEGER PRIMARY KEY, g, rank, weight)")
    conn.executemany(
        "INSERT INTO r(g, rank, weight) VALUES (?, ?, ?)",
        [(1, 1, 1), (1, 2, 1), (2, 3, 1), (2, 4, -0.5), (3, 1, 1)],
    )
    with sql_error("rrf_fuse: weight must be >= 0, got -0.5"):
        conn.execute("SELECT g, rrf_fuse(rank, weight) FROM r GROUP BY g").fetchall()
    with sql_error("rrf_fuse: weight must be >= 0, got -0.5"):
        conn.execute(
            "SELECT rrf_fuse(rank, weight) OVER (ORDER BY id ROWS BETWEEN 1 PRECEDING AND CURRENT ROW) FROM r"
        ).fetchall()
    with sql_error("rrf_explain: weight must be >= 0, got -0.5"):
        conn.execute("SELECT rrf_explain('l', rank, weight) OVER (ORDER BY id) FROM r").fetchall()


def test_F4_column_affinity_applies_before_the_type_check(conn):
    """'3' stored in an INTEGER column is the integer 3; the same text as a literal is TEXT."""
    conn.execute("CREATE TABLE r(rank INTEGER, untyped)")
    conn.execute("INSERT INTO r VALUES ('3', '3')")
    assert one(conn, "SELECT rrf_fuse(rank) FROM r") == pytest.approx(1 / 63, rel=REL)
    with sql_error("rrf_fuse: rank must be a number, got TEXT"):
        conn.execute("SELECT rrf_fuse(untyped) FROM r").fetchall()
    assert one(conn, "SELECT rrf_fuse(CAST(untyped AS INTEGER)) FROM r") == pytest.approx(
        1 / 63, rel=REL
    )


# ---------------------------------------------------------------- GROUP BY against the reference


def make_ranked_lists(seed, ndocs=200, weights=None):
    """Four ranked lists over random subsets of ndocs documents: rows (doc, list, rank, weight)."""
    rng = random.Random(seed)
    weights = weights or {"bm25": 1.0, "vector": 1.0, "recency": 0.6, "access": 0.4}
    rows = []
    for name in LISTS:
        members = rng.sample(range(ndocs), rng.randint(0, ndocs))
        for rank, doc in enumerate(members, start=1):
            rows.append((doc, name, rank, weights[name]))
    rng.shuffle(rows)
    return rows


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("k", [60, 0, 1, 17.5, None])
def test_F1_F7_group_by_over_random_ranked_lists(conn, seed, k):
    rows = make_ranked_lists(seed)
    conn.execute("CREATE TABLE hits(doc, list, rank, weight)")
    conn.executemany("INSERT INTO hits VALUES (?, ?, ?, ?)", rows)
    conn.execute("CREATE TABLE docs(doc INTEGER PRIMARY KEY)")
    conn.executemany("INSERT INTO docs VALUES (?)", [(d,) for d in range(220)])  # 20 in no list
    got = conn.execute(
        "SELECT docs.doc, rrf_fuse(rank, weight, :k), rrf_explain(list, rank, weight, :k) "
        "FROM docs LEFT JOIN hits USING (doc) GROUP BY docs.doc ORDER BY docs.doc",
        {"k": k},
    ).fetchall()
    by_doc: dict = {d: [] for d in range(220)}
    for doc, name, rank, weight in rows:
        by_doc[doc].append((name, rank, weight, k))
    assert [g[0] for g in got] == list(range(220))
    for doc, fused, explain in got:
        want = ref_fuse([r[1:] for r in by_doc[doc]])
        assert fused == approx_or_none(want)
        want_x = ref_explain(by_doc[doc])
        if want_x is None:
            assert explain is None
            continue
        parsed = json.loads(explain)
        # the order of rows inside a GROUP BY group is SQLite's business: compare as a dict
        assert set(parsed) == set(want_x)
        for name, (rank, weight, c) in want_x.items():
            assert parsed[name] == {
                "rank": rank,
                "weight": weight,
                "contribution": pytest.approx(c, rel=1e-13),
            }
        assert math.fsum(e["contribution"] for e in parsed.values()) == pytest.approx(
            fused, rel=REL
        )


def test_F1_ranks_from_window_functions_then_fused(conn):
    """The intended use: ranks computed by row_number() in SQL, fused per document."""
    rng = random.Random(42)
    docs = list(range(1, 101))
    scores = {
        (d, name): rng.random() for d in docs for name in ("bm25", "vector") if rng.random() < 0.7
    }
    conn.execute("CREATE TABLE s(doc, list, score)")
    conn.executemany("INSERT INTO s VALUES (?, ?, ?)", [(d, n, v) for (d, n), v in scores.items()])
    got = dict(
        conn.execute(
            """
            WITH ranked AS (
              SELECT doc, list, row_number() OVER (PARTITION BY list ORDER BY score DESC, doc) AS rank
              FROM s
            )
            SELECT doc, rrf_fuse(rank, CASE list WHEN 'bm25' THEN 1.0 ELSE 0.5 END, 60)
            FROM ranked GROUP BY doc
            """
        ).fetchall()
    )
    want: dict = {}
    for name, w in (("bm25", 1.0), ("vector", 0.5)):
        ordered = sorted(
            (d for (d, n) in scores if n == name), key=lambda d: (-scores[(d, name)], d)
        )
        for rank, d in enumerate(ordered, start=1):
            want.setdefault(d, []).append((rank, w, 60))
    assert set(got) == set(want)
    for d, terms in want.items():
        assert got[d] == pytest.approx(ref_fuse(terms), rel=REL)


# ---------------------------------------------------------------- F7: rrf_explain


def test_F7_json_shape(conn):
    text = one(conn, "SELECT rrf_explain('bm25', 3)")
    parsed = json.loads(text)
    assert parsed == {
        "bm25": {"rank": 3, "weight": 1.0, "contribution": pytest.approx(1 / 63, rel=1e-14)}
    }
    # an integral rank is a JSON integer; weight and contribution are JSON reals
    assert type(parsed["bm25"]["rank"]) is int
    assert type(parsed["bm25"]["weight"]) is float
    assert type(parsed["bm25"]["contribution"]) is float
    assert text.startswith('{"bm25":{"rank":3,"weight":1.0,"contribution":0.01587')
    # a fractional rank stays fractional
    assert json.loads(one(conn, "SELECT rrf_explain('v', 2.5, 0.5, 10)")) == {
        "v": {"rank": 2.5, "weight": 0.5, "contribution": pytest.approx(0.5 / 12.5, rel=1e-14)}
    }
    assert one(conn, "SELECT typeof(rrf_explain('v', 1))") == "text"
    assert one(conn, "SELECT json_valid(rrf_explain('v', 1e20))") == 1


def test_F7_keys_in_order_of_first_appearance(conn):
    conn.execute("CREATE TABLE r(id INTEGER PRIMARY KEY, list, rank, weight)")
    rows = [
        ("vector", 2, 1.0),
        ("bm25", 7, 1.0),
        ("access", None, 0.4),
        ("recency", 1, 0.6),
        ("access", 9, 0.4),
    ]
    conn.executemany("INSERT INTO r(list, rank, weight) VALUES (?, ?, ?)", rows)
    text = one(conn, "SELECT rrf_explain(list, rank, weight) FROM (SELECT * FROM r ORDER BY id)")
    assert list(json.loads(text)) == ["vector", "bm25", "recency", "access"]
    assert_explain(text, ref_explain(rows))


def test_F7_list_named_twice_best_rank_its_weight_summed_contribution(conn):
    conn.execute("CREATE TABLE r(id INTEGER PRIMARY KEY, list, rank, weight, k)")
    rows = [
        ("bm25", 5, 1.0, 60),
        ("vec", 2, 0.5, 60),
        ("bm25", 3, 2.0, 60),
        ("bm25", 7, 0.1, 10),
        ("vec", 2, 0.9, 60),  # ties the best rank: the first row of that rank keeps its weight
        ("bm25", None, 5.0, 60),
    ]
    conn.executemany("INSERT INTO r(list, rank, weight, k) VALUES (?, ?, ?, ?)", rows)
    text = one(conn, "SELECT rrf_explain(list, rank, weight, k) FROM r")
    got = json.loads(text)
    assert list(got) == ["bm25", "vec"]
    assert got["bm25"]["rank"] == 3 and got["bm25"]["weight"] == 2.0
    assert got["bm25"]["contribution"] == pytest.approx(1 / 65 + 2 / 63 + 0.1 / 17, rel=1e-13)
    assert got["vec"]["rank"] == 2 and got["vec"]["weight"] == 0.5
    assert got["vec"]["contribution"] == pytest.approx(0.5 / 62 + 0.9 / 62, rel=1e-13)
    fused = one(conn, "SELECT rrf_fuse(rank, weight, k) FROM r")
    assert sum(e["contribution"] for e in got.values()) == pytest.approx(fused, rel=REL)
    assert_explain(text, ref_explain(rows))


def test_F7_list_names_compare_by_bytes(conn):
    """Names differing in case or after an embedded NUL are different lists."""
    conn.execute("CREATE TABLE r(id INTEGER PRIMARY KEY, list, rank)")
    rows = [("a\x00b", 1), ("a\x00c", 2), ("A", 3), ("a", 4), ("a\x00b", 5)]
    conn.executemany("INSERT INTO r(list, rank) VALUES (?, ?)", rows)
    text = one(conn, "SELECT rrf_explain(list, rank) FROM r")
    assert_explain(text, ref_explain(rows))


@pytest.mark.parametrize(
    "name",
    [
        'say "hi"',
        "back\\slash",
        "\\",
        '"',
        '\\"',
        "tab\there",
        "line\nbreak\r\n",
        "\x00",
        "nul\x00inside",
        "".join(chr(c) for c in range(0x20)),
        "\x7f del",
        "caf\u00e9 \u65e5\u672c \U0001f600",
        "\u2028\u2029",
        "",
        "{}[]:,",
    ],
)
def test_F7_list_names_are_json_escaped(conn, name):
    text = one(conn, "SELECT rrf_explain(?, 4, 0.25, 1)", (name,))
    parsed = json.loads(text)
    assert list(parsed) == [name]
    assert parsed[name] == {
        "rank": 4,
        "weight": 0.25,
        "contribution": pytest.approx(0.05, rel=1e-14),
    }


def test_F7_contributions_add_up_to_rrf_fuse(conn):
    rows = make_ranked_lists(9, ndocs=60)
    conn.execute("CREATE TABLE hits(doc, list, rank, weight)")
    conn.executemany("INSERT INTO hits VALUES (?, ?, ?, ?)", rows)
    # duplicate some rows under the same list name, so merging is exercised
    conn.execute(
        "INSERT INTO hits SELECT doc, list, rank + 3, weight / 2 FROM hits WHERE doc % 3 = 0"
    )
    for fused, explain in conn.execute(
        "SELECT rrf_fuse(rank, weight), rrf_explain(list, rank, weight) FROM hits GROUP BY doc"
    ):
        total = math.fsum(e["contribution"] for e in json.loads(explain).values())
        assert total == pytest.approx(fused, rel=REL)


# ---------------------------------------------------------------- F6: window functions


def frame_rows(rows, lo, hi):
    return rows[max(lo, 0) : max(hi + 1, 0)]


def window_table(conn, seed, n=120, null_every=5):
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        rank = None if i % null_every == 3 else rng.randint(1, 50)
        rows.append(
            (
                i,
                rng.choice(LISTS),
                rank,
                rng.choice([None, 0.0, 0.4, 1.0, 2.5]),
                rng.choice([None, 0, 60, 10.5]),
            )
        )
    conn.execute("CREATE TABLE w(id INTEGER PRIMARY KEY, list, rank, weight, k)")
    conn.executemany("INSERT INTO w VALUES (?, ?, ?, ?, ?)", rows)
    return [(lst, r, wt, k) for (_, lst, r, wt, k) in rows]


ROWS_FRAMES = [
    ("ROWS BETWEEN 0 PRECEDING AND CURRENT ROW", lambda i, n: (i, i)),
    ("ROWS BETWEEN 1 PRECEDING AND CURRENT ROW", lambda i, n: (i - 1, i)),
    ("ROWS BETWEEN 2 PRECEDING AND CURRENT ROW", lambda i, n: (i - 2, i)),
    ("ROWS BETWEEN 7 PRECEDING AND CURRENT ROW", lambda i, n: (i - 7, i)),
    ("ROWS BETWEEN 3 PRECEDING AND 2 FOLLOWING", lambda i, n: (i - 3, i + 2)),
    ("ROWS BETWEEN CURRENT ROW AND 4 FOLLOWING", lambda i, n: (i, i + 4)),
    # frames that are empty at the edges of the partition -> NULL there
    ("ROWS BETWEEN 2 PRECEDING AND 1 PRECEDING", lambda i, n: (i - 2, i - 1)),
    ("ROWS BETWEEN 1 FOLLOWING AND 3 FOLLOWING", lambda i, n: (i + 1, i + 3)),
    ("ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW", lambda i, n: (0, i)),
    ("ROWS BETWEEN 5 PRECEDING AND UNBOUNDED FOLLOWING", lambda i, n: (i - 5, n - 1)),
    ("ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING", lambda i, n: (0, n - 1)),
]


@pytest.mark.parametrize("frame,bounds", ROWS_FRAMES, ids=[f[0] for f in ROWS_FRAMES])
def test_F6_sliding_rows_frames_match_reference(conn, frame, bounds):
    rows = window_table(conn, seed=len(frame))
    n = len(rows)
    got = conn.execute(
        f"SELECT rrf_fuse(rank, weight, k) OVER win, rrf_fuse(rank) OVER win, "
        f"rrf_explain(list, rank, weight, k) OVER win FROM w WINDOW win AS (ORDER BY id {frame}) ORDER BY id"
    ).fetchall()
    assert len(got) == n
    saw_null = False
    for i, (fused, fused1, explain) in enumerate(got):
        fr = frame_rows(rows, *bounds(i, n))
        want = ref_fuse([r[1:] for r in fr])
        saw_null |= want is None
        assert fused == approx_or_none(want), (i, fr)
        assert fused1 == approx_or_none(ref_fuse([(r[1],) for r in fr]))
        assert_explain(explain, ref_explain(fr))
    if (
        "PRECEDING AND 1 PRECEDING" in frame
        or "1 FOLLOWING AND" in frame
        or frame.startswith("ROWS BETWEEN 0")
    ):
        assert saw_null  # the empty / all-NULL frames were really there


def test_F6_partitioned_window(conn):
    rows = window_table(conn, seed=99, n=200)
    conn.execute("ALTER TABLE w ADD COLUMN part")
    conn.execute("UPDATE w SET part = id % 3")
    got = conn.execute(
        "SELECT id, rrf_fuse(rank, weight, k) OVER win, rrf_explain(list, rank, weight, k) OVER win FROM w "
        "WINDOW win AS (PARTITION BY part ORDER BY id ROWS BETWEEN 4 PRECEDING AND 1 FOLLOWING)"
    ).fetchall()
    assert len(got) == 200
    for id_, fused, explain in got:
        part = [i for i in range(200) if i % 3 == id_ % 3]
        pos = part.index(id_)
        fr = [rows[i] for i in part[max(pos - 4, 0) : pos + 2]]
        assert fused == approx_or_none(ref_fuse([r[1:] for r in fr]))
        assert_explain(explain, ref_explain(fr))


def test_F6_range_and_groups_frames(conn):
    rng = random.Random(7)
    rows = []
    for i in range(150):
        ts = rng.randint(0, 60)  # many ties
        rank = None if rng.random() < 0.2 else rng.randint(1, 30)
        rows.append((i, ts, rng.choice(LISTS), rank, rng.choice([0.5, 1.0, 2.0])))
    conn.execute("CREATE TABLE w(id INTEGER PRIMARY KEY, ts, list, rank, weight)")
    conn.executemany("INSERT INTO w VALUES (?, ?, ?, ?, ?)", rows)
    # ordered the way the window sees them: ts, then id (the rows of a peer group enter
    # and leave together, so the order inside it only matters for rrf_explain's key order)
    ordered = sorted(rows, key=lambda r: (r[1], r[0]))
    distinct_ts = sorted({r[1] for r in rows})
    frames = {
        "RANGE BETWEEN 5 PRECEDING AND CURRENT ROW": lambda r: [
            x for x in ordered if r[1] - 5 <= x[1] <= r[1]
        ],
        "RANGE BETWEEN 3 PRECEDING AND 2 FOLLOWING": lambda r: [
            x for x in ordered if r[1] - 3 <= x[1] <= r[1] + 2
        ],
        "RANGE BETWEEN 10 FOLLOWING AND 12 FOLLOWING": lambda r: [
            x for x in ordered if r[1] + 10 <= x[1] <= r[1] + 12
        ],
        "RANGE BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW": lambda r: [
            x for x in ordered if x[1] <= r[1]
        ],
        "GROUPS BETWEEN 1 PRECEDING AND CURRENT ROW": lambda r: [
            x
            for x in ordered
            if distinct_ts.index(r[1]) - 1 <= distinct_ts.index(x[1]) <= distinct_ts.index(r[1])
        ],
        "GROUPS BETWEEN 2 PRECEDING AND 1 PRECEDING": lambda r: [
            x
            for x in ordered
            if distinct_ts.index(r[1]) - 2 <= distinct_ts.index(x[1]) <= distinct_ts.index(r[1]) - 1
        ],
        "GROUPS BETWEEN CURRENT ROW AND 3 FOLLOWING": lambda r: [
            x
            for x in ordered
            if distinct_ts.index(r[1]) <= distinct_ts.index(x[1]) <= distinct_ts.index(r[1]) + 3
        ],
        "RANGE BETWEEN 5 PRECEDING AND CURRENT ROW EXCLUDE CURRENT ROW": lambda r: [
            x for x in ordered if r[1] - 5 <= x[1] <= r[1] and x[0] != r[0]
        ],
        "GROUPS BETWEEN 1 PRECEDING AND 1 FOLLOWING EXCLUDE GROUP": lambda r: [
            x
            for x in ordered
            if abs(distinct_ts.index(r[1]) - distinct_ts.index(x[1])) <= 1 and x[1] != r[1]
        ],
        "RANGE BETWEEN 5 PRECEDING AND CURRENT ROW EXCLUDE TIES": lambda r: [
            x for x in ordered if r[1] - 5 <= x[1] <= r[1] and (x[1] != r[1] or x[0] == r[0])
        ],
    }
    for frame, pick in frames.items():
        got = conn.execute(
            f"SELECT id, rrf_fuse(rank, weight) OVER win, rrf_explain(list, rank, weight) OVER win "
            f"FROM w WINDOW win AS (ORDER BY ts {frame}) ORDER BY id"
        ).fetchall()
        saw_null = False
        for (id_, fused, explain), r in zip(got, rows):
            assert id_ == r[0]
            fr = pick(r)
            want = ref_fuse([(x[3], x[4]) for x in fr])
            saw_null |= want is None
            assert fused == approx_or_none(want), (frame, r)
            want_x = ref_explain([(x[2], x[3], x[4]) for x in fr])
            if want_x is None:
                assert explain is None
            else:
                parsed = json.loads(explain)
                assert set(parsed) == set(want_x)
                for name, (rank, weight, c) in want_x.items():
                    assert parsed[name]["rank"] == rank
                    assert parsed[name]["contribution"] == pytest.approx(c, rel=1e-13)
        if "FOLLOWING AND 12" in frame or "AND 1 PRECEDING" in frame:
            assert saw_null, frame


def test_F6_sliding_frame_does_not_drift(conn):
    """20 000 rows with weights spanning 12 orders of magnitude through a 3-row sliding
    frame: a plain running sum loses the small terms after a big one has left; the
    compensated sum (and the reset on an empty frame) stays within rounding of fsum."""
    rng = random.Random(1)
    n = 20000
    rows = []
    for i in range(n):
        w = rng.choice([1e6, 1e-6, 1.0, 3e5, 7e-5])
        rows.append((rng.randint(1, 100), w, 60))
    conn.execute("CREATE TABLE w(id INTEGER PRIMARY KEY, rank, weight, k)")
    conn.executemany("INSERT INTO w(rank, weight, k) VALUES (?, ?, ?)", rows)
    got = [
        r[0]
        for r in conn.execute(
            "SELECT rrf_fuse(rank, weight, k) OVER (ORDER BY id ROWS BETWEEN 2 PRECEDING AND CURRENT ROW) FROM w"
        )
    ]
    worst = 0.0
    for i, g in enumerate(got):
        want = ref_fuse(rows[max(0, i - 2) : i + 1])
        worst = max(worst, abs(g - want) / want)
    assert worst <= 1e-9

    # the same frames summed naively in Python do drift: this test can tell the two apart
    s, worst_naive = 0.0, 0.0
    for i, r in enumerate(rows):
        s += contribution(*r)
        if i >= 3:
            s -= contribution(*rows[i - 3])
        want = ref_fuse(rows[max(0, i - 2) : i + 1])
        worst_naive = max(worst_naive, abs(s - want) / want)
    assert worst_naive > 1e-9


def test_F6_default_window_frame_is_running_total_with_peers(conn):
    conn.execute("CREATE TABLE w(id INTEGER PRIMARY KEY, g, rank)")
    conn.executemany(
        "INSERT INTO w(g, rank) VALUES (?, ?)", [(1, 1), (1, 2), (2, None), (3, 4), (3, 5)]
    )
    got = [r[0] for r in conn.execute("SELECT rrf_fuse(rank) OVER (ORDER BY g) FROM w ORDER BY id")]
    a, b, d, e = 1 / 61, 1 / 62, 1 / 64, 1 / 65
    assert got == pytest.approx([a + b, a + b, a + b, a + b + d + e, a + b + d + e], rel=REL)


def test_F6_explain_window_frame_that_empties_and_refills(conn):
    """The frame holds one row, then nothing (NULL ranks), then new rows: the stored rows
    are dropped in order and the array is reused."""
    rows = [("a", 1), ("b", None), ("c", None), ("d", None), ("e", 2), ("e", 3), ("f", 4)]
    rows += [("g%d" % i, i + 1) for i in range(40)]  # enough to grow the array
    conn.execute("CREATE TABLE w(id INTEGER PRIMARY KEY, list, rank)")
    conn.executemany("INSERT INTO w(list, rank) VALUES (?, ?)", rows)
    for width in (0, 1, 2, 9, 20):
        got = conn.execute(
            f"SELECT rrf_explain(list, rank) OVER (ORDER BY id ROWS BETWEEN {width} PRECEDING AND CURRENT ROW), "
            f"rrf_fuse(rank) OVER (ORDER BY id ROWS BETWEEN {width} PRECEDING AND CURRENT ROW) FROM w ORDER BY id"
        ).fetchall()
        for i, (explain, fused) in enumerate(got):
            fr = rows[max(0, i - width) : i + 1]
            assert_explain(explain, ref_explain(fr))
            assert fused == approx_or_none(ref_fuse([(r[1],) for r in fr]))


# ---------------------------------------------------------------- hypothesis

rank_st = st.one_of(st.none(), st.integers(1, 10_000), st.floats(1.0, 1e6, allow_nan=False))
weight_st = st.one_of(
    st.none(), st.sampled_from([0.0, 0.4, 0.6, 1.0]), st.floats(0.0, 100.0, allow_nan=False)
)
k_st = st.one_of(st.none(), st.integers(0, 200), st.floats(0.0, 1000.0, allow_nan=False))
name_st = st.one_of(st.sampled_from(LISTS), st.text(max_size=6))
row_st = st.tuples(name_st, rank_st, weight_st, k_st)


def _load_rows(conn, rows):
    conn.execute(
        "DROP TABLE IF EXISTS hr; CREATE TABLE hr(id INTEGER PRIMARY KEY, list, rank, weight, k)"
    )
    conn.executemany("INSERT INTO hr(list, rank, weight, k) VALUES (?, ?, ?, ?)", rows)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(row_st, max_size=40))
def test_F1_F2_F3_F5_F7_property_aggregate_matches_reference(mconn, rows):
    _load_rows(mconn, rows)
    fused, fused2, fused1, explain = mconn.execute(
        "SELECT rrf_fuse(rank, weight, k), rrf_fuse(rank, weight), rrf_fuse(rank), "
        "rrf_explain(list, rank, weight, k) FROM hr"
    ).fetchone()
    assert fused == approx_or_none(ref_fuse([r[1:] for r in rows]))
    assert fused2 == approx_or_none(ref_fuse([r[1:3] for r in rows]))
    assert fused1 == approx_or_none(ref_fuse([r[1:2] for r in rows]))
    assert_explain(explain, ref_explain(rows))
    if explain is not None:
        total = math.fsum(e["contribution"] for e in json.loads(explain).values())
        assert total == pytest.approx(fused, rel=1e-12)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(row_st, max_size=40),
    st.integers(0, 6),
    st.integers(-3, 6),
)
def test_F6_property_sliding_window_matches_reference(mconn, rows, before, after):
    _load_rows(mconn, rows)
    lo = f"{before} PRECEDING"
    hi = (
        "CURRENT ROW"
        if after == 0
        else (f"{after} FOLLOWING" if after > 0 else f"{-after} PRECEDING")
    )
    if after < 0 and -after > before:
        lo, before = f"{-after} PRECEDING", -after  # start must not be after end
    frame = f"ROWS BETWEEN {lo} AND {hi}"
    got = mconn.execute(
        f"SELECT rrf_fuse(rank, weight, k) OVER win, rrf_explain(list, rank, weight, k) OVER win "
        f"FROM hr WINDOW win AS (ORDER BY id {frame}) ORDER BY id"
    ).fetchall()
    assert len(got) == len(rows)
    for i, (fused, explain) in enumerate(got):
        fr = frame_rows(rows, i - before, i + after)
        assert fused == approx_or_none(ref_fuse([r[1:] for r in fr])), (frame, i)
        assert_explain(explain, ref_explain(fr))


@settings(max_examples=100, deadline=None)
@given(
    st.one_of(st.integers(-10, 0), st.floats(-1e9, 0.999, allow_nan=False)),
    st.one_of(st.integers(-10, -1), st.floats(-1e9, -1e-300, allow_nan=False)),
)
def test_F4_property_out_of_range_always_errors(mconn, bad_rank, bad_weight):
    with pytest.raises(
        apsw.SQLError, match=r"^rrf_fuse: rank must be >= 1 \(ranks are 1-based\), got "
    ):
        mconn.execute("SELECT rrf_fuse(?)", (bad_rank,)).fetchall()
    with pytest.raises(apsw.SQLError, match=r"^rrf_fuse: weight must be >= 0, got -"):
        mconn.execute("SELECT rrf_fuse(1, ?)", (bad_weight,)).fetchall()
    with pytest.raises(apsw.SQLError, match=r"^rrf_explain: k must be >= 0, got -"):
        mconn.execute("SELECT rrf_explain('x', 1, 1, ?)", (bad_weight,)).fetchall()


# ---------------------------------------------------------------- rrf_sum (F9)

ranks_st = st.one_of(st.none(), st.integers(1, 10**6), st.floats(1, 1e6))
weights_st = st.one_of(st.none(), st.floats(0, 1e3))


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    k=st.one_of(st.none(), st.floats(0, 1e4)),
    pairs=st.lists(st.tuples(ranks_st, weights_st), min_size=1, max_size=8),
)
def test_F9_rrf_sum_is_rrf_fuse_over_one_rows_pairs(conn, k, pairs):
    args = [k]
    for r, w in pairs:
        args += [r, w]
    got = one(conn, f"SELECT rrf_sum({', '.join('?' * len(args))})", args)
    conn.execute("CREATE TEMP TABLE IF NOT EXISTS f9(r, w)")
    conn.execute("DELETE FROM f9")
    conn.executemany("INSERT INTO f9 VALUES (?, ?)", pairs)
    agg = one(conn, "SELECT rrf_fuse(r, w, ?) FROM f9", (k,))
    assert got == agg  # the same double: the same exact sum
    want = ref_fuse([(r, w, k) for r, w in pairs])
    assert got == approx_or_none(want)


@pytest.mark.parametrize(
    "sql, msg",
    [
        (
            "SELECT rrf_sum(60, 1)",
            "rrf_sum: usage: rrf_sum(k, rank1, weight1 [, rank2, weight2 ...])",
        ),
        ("SELECT rrf_sum(60)", "rrf_sum: usage: rrf_sum(k, rank1, weight1 [, rank2, weight2 ...])"),
        ("SELECT rrf_sum(60, 0, 1)", "rrf_sum: rank must be >= 1 (ranks are 1-based), got 0"),
        ("SELECT rrf_sum(60, 1, -1)", "rrf_sum: weight must be >= 0, got -1"),
        ("SELECT rrf_sum(-1, 1, 1)", "rrf_sum: k must be >= 0, got -1"),
        ("SELECT rrf_sum('x', 1, 1)", "rrf_sum: k must be a number, got TEXT"),
        ("SELECT rrf_sum(60, 1, 1, X'00', 1)", "rrf_sum: rank must be a number, got BLOB"),
        (
            "SELECT rrf_sum(0, 1, 1e308, 1, 1e308)",
            "rrf_sum: the sum of contributions overflows a double (weights too large)",
        ),
    ],
)
def test_F9_rrf_sum_errors_name_the_function_and_the_fault(conn, sql, msg):
    with sql_error(msg):
        conn.execute(sql).fetchall()


def test_F9_rrf_sum_null_when_no_pair_contributes(conn):
    assert one(conn, "SELECT rrf_sum(60, NULL, 1, NULL, 0.5)") is None
    assert one(conn, "SELECT rrf_sum(NULL, 1, NULL)") == 1 / 61
