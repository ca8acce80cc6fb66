"""The BM25 list is exactly FTS5 bm25()'s top :bm25_limit: the recall statement's
``bm25`` CTE (sql/recall.sql 1a-1d), ``rrf_bm25_or`` and ``rrf_bm25_idf`` (csrc/bm25_or.c
B10..B13, csrc/bm25_idf.c B14).

The reference is always FTS5 itself, in the same connection::

    SELECT rowid, bm25(episodes_fts) FROM episodes_fts
    WHERE episodes_fts MATCH fts5_query(:query)          -- the OR query of every word
    ORDER BY bm25(episodes_fts), rowid LIMIT :bm25_limit

and the statement's list must equal it row for row and value for value (``==`` on the
floats: bit for bit), whatever the cached stopword hint says (fresh, stale, garbage or
absent) and after any churn of plain SQL writes (INSERT, DELETE, UPDATE of the content) or
of Store calls. The vocabulary is small, so equal scores and scores that differ only by
the stopwords' 1e-6 IDF are common: ties are broken by rowid on both sides.
"""

from __future__ import annotations

import json
import math
import os
import random
import shutil
import subprocess

import apsw
import pytest
from hypothesis import HealthCheck, event, given, settings, strategies as st

import sqlite_rrf
from sqlite_rrf.core.migrations import migrate
from sqlite_rrf.core.sql_files import read_sql, statement_params
from sqlite_rrf.store import Store

HERE = os.path.dirname(os.path.abspath(__file__))
REFERENCE = (
    "SELECT rowid, bm25(episodes_fts) FROM episodes_fts "
    "WHERE episodes_fts MATCH coalesce(fts5_query(?1), '\"\"') "
    "ORDER BY bm25(episodes_fts), rowid LIMIT ?2"
)
NOT_BUILTIN = "is not one of FTS5's built-in unicode61, ascii, porter, trigram"

# Common words (most of them in half of the rows or more), middling ones, rare ones.
COMMON = ["the", "of", "and", "a", "in"]
MIDDLE = ["cat", "cats", "dog", "study", "studies", "running", "runs", "memory"]
RARE = ["kubernetes", "orange", "vault", "zebra", "sqlite", "quartz", "nebula", "fjord"]
VOCAB = COMMON + MIDDLE + RARE
WEIGHTS = [30, 25, 20, 18, 15] + [4] * len(MIDDLE) + [1] * len(RARE)


def bm25_cte() -> str:
    """The recall statement up to its ``bm25`` CTE, selecting that CTE."""
    sql = read_sql("recall.sql")
    cut = sql.index("\n-- 2. ") + 1  # the comment of the CTE after the BM25 list
    head = sql[:cut].rstrip()
    assert head.endswith("),")
    return head[:-1] + "\nSELECT rowid, bm25_score, bm25_rank FROM bm25 ORDER BY bm25_score, rowid"


CTE = bm25_cte()
CTE_PARAMS = statement_params(CTE)


def bm25_list(conn, query, limit=50):
    """[(rowid, bm25_score)] of the statement's BM25 list, and checks its dense ranks."""
    b = dict.fromkeys(CTE_PARAMS)
    b.update(query=query, bm25_limit=limit)
    rows = conn.execute(CTE, b).fetchall()
    distinct = sorted({s for _, s, _ in rows})
    assert [r for _, _, r in rows] == [distinct.index(s) + 1 for _, s, _ in rows]
    return [(rowid, s) for rowid, s, _ in rows]


def reference(conn, query, limit=50):
    return conn.execute(REFERENCE, (query, limit)).fetchall()


def assert_exact(conn, query, limits=(50,)):
    for limit in limits:
        got, want = bm25_list(conn, query, limit), reference(conn, query, limit)
        assert got == want, (query, limit, got[:5], want[:5])


def new_db(path=":memory:"):
    c = apsw.Connection(str(path))
    sqlite_rrf.load(c)
    migrate(c)
    return c


def text(rng: random.Random, lo=1, hi=14) -> str:
    return " ".join(rng.choices(VOCAB, WEIGHTS, k=rng.randint(lo, hi)))


def fill(conn, n, rng, start=0):
    with conn:
        conn.executemany(
            "INSERT INTO episodes(id, content) VALUES (?, ?)",
            [(f"e{start + i}", text(rng)) for i in range(n)],
        )


def refresh_hint(conn, min_rows=0):
    conn.execute(read_sql("stopwords.sql"), {"min_rows": min_rows})


def set_hint(conn, value):
    conn.execute(
        "INSERT OR REPLACE INTO rrf_meta(key, value) VALUES ('bm25_stopwords', ?)", (value,)
    )


def hint(conn):
    r = conn.execute("SELECT value FROM rrf_meta WHERE key = 'bm25_stopwords'").fetchall()
    return r[0][0] if r else None


def stage(conn, query, cte, limit=50):
    b = dict.fromkeys(statement_params(CTE))
    b.update(query=query, bm25_limit=limit)
    head = CTE[: CTE.rindex("SELECT rowid, bm25_score, bm25_rank FROM bm25")]
    return conn.execute(head + f"SELECT * FROM {cte}", b).fetchall()


QUERIES = [
    "the cat",
    "The Studies of cats",
    "kubernetes orange",
    "the xyzzy",
    "the of and a in",
    "running dogs in the memory vault",
    "zebra",
    "",
    "*",
    "42",
    "the the THE cat cat",
    "quartz nebula fjord of a",
    "cats and dogs and the study of running",
]


@pytest.fixture(scope="module")
def db():
    c = new_db()
    fill(c, 1500, random.Random(1))
    refresh_hint(c, min_rows=1000)
    yield c
    c.close()


# ---------------------------------------------------------------- the statement's list


def test_the_list_is_bm25s_top_for_every_query_and_limit(db):
    assert {"the", "of"} <= set(hint(db).split())
    for q in QUERIES:
        assert_exact(db, q, limits=(1, 3, 50, 400, 5000))


def test_stopwords_are_dropped_from_the_scan_and_the_values_stay_bm25s(db):
    """The speed-up happens: the scan of 1b matches fewer rows than the whole query, yet
    the list and its values are the whole query's (the words left out are counted in the
    rows' text)."""
    q = "the memory of cats"
    ((words, dropped),) = stage(db, q, "bm25_stop")
    assert set(words.split()) == {"the", "of"} and dropped == 2
    pruned = db.execute("SELECT fts5_query(?, 'or', ?, 'porter unicode61')", (q, words)).fetchone()[
        0
    ]
    assert pruned == '"memory" OR "cats"'
    count = "SELECT count(*) FROM episodes_fts WHERE episodes_fts MATCH ?"
    n_pruned = db.execute(count, (pruned,)).fetchone()[0]
    n_full = db.execute(
        count, (db.execute("SELECT fts5_query(?)", (q,)).fetchone()[0],)
    ).fetchone()[0]
    assert n_pruned < n_full // 2
    assert stage(db, q, "bm25_exact") == [(1,)]  # 1b is the whole query's top
    assert_exact(db, q, limits=(1, 50, n_pruned))
    # the dropped words do change the values: bm25 over the pruned query alone differs
    alone = db.execute(
        "SELECT rowid, bm25(episodes_fts) FROM episodes_fts WHERE episodes_fts MATCH ? "
        "ORDER BY bm25(episodes_fts), rowid LIMIT 50",
        (pruned,),
    ).fetchall()
    assert alone != reference(db, q)


def test_ties_broken_by_the_stopwords_alone(tmp_path):
    """Rows equal in every rare word, of the same length, that differ only in a stopword:
    bm25() orders them by that stopword's 1e-6 IDF, and so must the list."""
    c = new_db()
    rows = [f"filler{i} x{i} w{i} z{i}" for i in range(40)]  # 'the' in none of them
    rows += ["the zebra runs fast"] * 1 + ["a zebra runs fast"] * 1 + ["zebra zebra runs fast"]
    rows += ["the the the the"] * 60  # 'the' in more than half of the rows
    with c:
        c.executemany(
            "INSERT INTO episodes(id, content) VALUES (?, ?)",
            [(f"r{i}", t) for i, t in enumerate(rows)],
        )
    refresh_hint(c)
    assert "the" in hint(c).split()
    want = reference(c, "the zebra", 3)
    # 'a zebra runs fast' (rowid 42) ties 'the zebra runs fast' (41) on zebra; 'the' breaks it
    assert [r for r, _ in want][1:] == [41, 42]
    assert want[1][1] < want[2][1] and want[2][1] - want[1][1] < 1e-5
    assert_exact(c, "the zebra", limits=(1, 2, 3, 50))
    assert_exact(c, "zebra the", limits=(3,))  # the phrase order of the sum follows the query


def test_issue_case_stale_stopword_kubernetes(tmp_path):
    """1,000 episodes, 600 of them about kubernetes: 'kubernet' becomes a stopword. 599 of
    those are deleted and 599 others added, so the count does not move and the hint keeps
    'kubernet'. The list must still be bm25()'s: the one episode left comes first."""
    c = new_db()
    rng = random.Random(11)
    with c:
        c.executemany(
            "INSERT INTO episodes(id, content) VALUES (?, ?)",
            [(f"k{i}", "kubernetes cluster " + text(rng, 1, 6)) for i in range(600)]
            + [(f"o{i}", text(rng, 1, 6).replace("kubernetes", "x")) for i in range(400)],
        )
    refresh_hint(c, min_rows=1000)
    assert "kubernet" in hint(c).split()
    with c:
        c.execute(
            "DELETE FROM episodes WHERE id IN (%s)" % ",".join(f"'k{i}'" for i in range(1, 600))
        )
        c.executemany(
            "INSERT INTO episodes(id, content) VALUES (?, ?)",
            [(f"n{i}", text(rng, 1, 6).replace("kubernetes", "x")) for i in range(599)],
        )
    assert c.execute("SELECT count(*) FROM episodes").fetchone()[0] == 1000
    assert "kubernet" in hint(c).split()  # stale: the count did not move
    got = bm25_list(c, "kubernetes orange")
    assert (
        got and got[0][0] == c.execute("SELECT rowid FROM episodes WHERE id = 'k0'").fetchone()[0]
    )
    assert_exact(c, "kubernetes orange", limits=(1, 50))
    assert_exact(c, "kubernetes", limits=(1, 50))
    assert stage(c, "kubernetes orange", "bm25_stop") == [("", 0)]  # the check found it rare


def test_issue_case_a_stopword_and_a_word_that_matches_nothing(db):
    """'the xyzzy': 'the' is a stopword, 'xyzzy' matches nothing. The scan without 'the'
    finds nothing, so the list falls back to the whole query: bm25()'s top 'the' rows."""
    ((words, dropped),) = stage(db, "the xyzzy", "bm25_stop")
    assert words == "the" and dropped == 1
    assert stage(db, "the xyzzy", "bm25_top") == []
    assert stage(db, "the xyzzy", "bm25_exact") == [(0,)]
    got = bm25_list(db, "the xyzzy")
    assert len(got) == 50
    assert got == reference(db, "the xyzzy", 50)


def test_fallback_when_too_few_rows_hold_a_kept_word(db):
    rare = db.execute("SELECT rowid FROM episodes WHERE content LIKE '%zebra%'").fetchall()
    assert 0 < len(rare) < 400
    q = "zebra of the"
    assert stage(db, q, "bm25_exact") == [(1,)]
    assert_exact(db, q, limits=(len(rare), len(rare) + 1, 400))
    b = dict.fromkeys(CTE_PARAMS)
    b.update(query=q, bm25_limit=len(rare) + 1)
    head = CTE[: CTE.rindex("SELECT rowid, bm25_score, bm25_rank FROM bm25")]
    assert db.execute(head + "SELECT exact FROM bm25_exact", b).fetchall() == [(0,)]


@pytest.mark.parametrize(
    "value",
    [
        None,
        "",
        "the of",
        "the of and a in cat dog kubernet zzz",
        "cat dog memori studi run",
        "\t the\n",
        42,
        b"the",
        1.5,
        "x" * 10_000,
        " ".join(f"w{i}" for i in range(5000)),
    ],
)
def test_any_hint_gives_the_same_list(db, value):
    """The hint only chooses which words are counted: absent, empty, stale, wrong, huge or
    of another type, the list is bm25()'s."""
    old = hint(db)
    try:
        if value is None:
            db.execute("DELETE FROM rrf_meta WHERE key = 'bm25_stopwords'")
        else:
            set_hint(db, value)
        for q in ("the memory of cats", "the xyzzy", "cat dog runs", "kubernetes the"):
            assert_exact(db, q, limits=(1, 50))
    finally:
        set_hint(db, old)


def test_no_hint_counts_every_word_and_still_drops_the_common_ones(db):
    old = hint(db)
    try:
        db.execute("DELETE FROM rrf_meta WHERE key = 'bm25_stopwords'")
        ((words, dropped),) = stage(db, "the memory of cats", "bm25_stop")
        assert set(words.split()) == {"the", "of"} and dropped == 2
    finally:
        set_hint(db, old)


def test_a_bm25_limit_of_zero_or_below(db):
    assert bm25_list(db, "the cat", 0) == []
    # a negative LIMIT is no limit: every matching row, in bm25's order
    got = bm25_list(db, "the cat", -1)
    assert got == reference(db, "the cat", -1)
    assert (
        len(got)
        == db.execute(
            "SELECT count(*) FROM episodes_fts WHERE episodes_fts MATCH fts5_query('the cat')"
        ).fetchone()[0]
    )


# ---------------------------------------------------------------- churn (hypothesis)


OPS = st.lists(
    st.one_of(
        st.tuples(st.just("insert"), st.integers(1, 200), st.integers(0, 2**32 - 1)),
        st.tuples(st.just("delete"), st.integers(1, 200), st.integers(0, 2**32 - 1)),
        st.tuples(st.just("rewrite"), st.integers(1, 200), st.integers(0, 2**32 - 1)),
        st.tuples(
            st.just("hint"),
            st.sampled_from(["refresh", "stale", "garbage", "none", "all"]),
            st.integers(0, 2**32 - 1),
        ),
    ),
    min_size=1,
    max_size=8,
)
QUERY = st.lists(
    st.sampled_from(VOCAB + ["The", "STUDIES", "xyzzy", "Kubernetes", "of"]), min_size=1, max_size=7
).map(" ".join)


def apply(conn, op, state):
    kind, n, seed = op
    rng = random.Random(seed)
    if kind == "insert":
        with conn:
            conn.executemany(
                "INSERT INTO episodes(id, content) VALUES (?, ?)",
                [(f"h{state['next'] + i}", text(rng)) for i in range(n)],
            )
        state["next"] += n
    elif kind == "delete":
        ids = [r for (r,) in conn.execute("SELECT rowid FROM episodes")]
        with conn:
            conn.executemany(
                "DELETE FROM episodes WHERE rowid = ?",
                [(r,) for r in rng.sample(ids, min(n, len(ids)))],
            )
    elif kind == "rewrite":
        ids = [r for (r,) in conn.execute("SELECT rowid FROM episodes")]
        with conn:
            conn.executemany(
                "UPDATE episodes SET content = ? WHERE rowid = ?",
                [(text(rng), r) for r in rng.sample(ids, min(n, len(ids)))],
            )
    elif n == "refresh":
        refresh_hint(conn)
    elif n == "stale":
        set_hint(conn, " ".join(rng.sample(["the", "of", "cat", "kubernet", "zebra", "run"], 3)))
    elif n == "garbage":
        set_hint(conn, rng.choice([42, b"\x00the", "", "   ", "t h e"]))
    elif n == "all":
        set_hint(conn, " ".join(VOCAB + ["studi", "run", "memori"]))
    else:
        conn.execute("DELETE FROM rrf_meta WHERE key = 'bm25_stopwords'")


@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(
    start=st.integers(0, 400),
    ops=OPS,
    queries=st.lists(QUERY, min_size=1, max_size=4),
    limit=st.sampled_from([1, 2, 5, 50]),
    seed=st.integers(0, 2**32 - 1),
)
def test_property_the_list_equals_bm25_across_sql_churn(start, ops, queries, limit, seed):
    c = new_db()
    fill(c, start, random.Random(seed))
    refresh_hint(c)
    state = {"next": 0}
    for op in ops:
        apply(c, op, state)
        for q in queries:
            assert_exact(c, q, limits=(limit,))
            ((_, dropped),) = stage(c, q, "bm25_stop", limit)
            exact = stage(c, q, "bm25_exact", limit)[0][0]
            event(
                "no word dropped"
                if not dropped
                else "words dropped, the scan is exact"
                if exact
                else "words dropped, whole query"
            )
    c.execute(
        "INSERT INTO episodes_fts(episodes_fts) VALUES ('integrity-check')"
    )  # raises if it drifted
    c.close()


@settings(
    max_examples=15,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(seed=st.integers(0, 2**32 - 1), queries=st.lists(QUERY, min_size=1, max_size=3))
def test_property_the_list_equals_bm25_across_store_churn(tmp_path_factory, seed, queries):
    rng = random.Random(seed)
    path = tmp_path_factory.mktemp("storechurn") / "m.db"
    with Store(path) as s:
        s.add_many([dict(id=f"s{i}", content=text(rng)) for i in range(rng.randint(0, 300))])
        for step in range(4):
            ids = [r for (r,) in s.conn.execute("SELECT id FROM episodes")]
            if ids and rng.random() < 0.5:
                for i in rng.sample(ids, min(len(ids), rng.randint(1, 80))):
                    s.delete(i)
            s.add_many(
                [dict(id=f"t{step}_{i}", content=text(rng)) for i in range(rng.randint(1, 120))]
            )
            ids = [r for (r,) in s.conn.execute("SELECT id FROM episodes")]
            if ids and rng.random() < 0.5:
                s.upsert(text(rng), id=rng.choice(ids))
            if ids and rng.random() < 0.5:
                s.update(rng.choice(ids), content=text(rng))
            for q in queries:
                assert_exact(s.conn, q, limits=(1, 50))


# ---------------------------------------------------------------- rrf_bm25_idf (B14)


def test_B14_idf_is_bm25s_formula_and_stops_at_half(db):
    n_rows = db.execute("SELECT count(*) FROM episodes").fetchone()[0]
    for word in VOCAB + ["xyzzy"]:
        n = db.execute(
            "SELECT count(*) FROM episodes_fts WHERE episodes_fts MATCH ?", (f'"{word}"',)
        ).fetchone()[0]
        got = db.execute(
            "SELECT rrf_bm25_idf(episodes_fts) FROM episodes_fts WHERE episodes_fts MATCH ? LIMIT 1",
            (f'"{word}"',),
        ).fetchall()
        if n == 0:
            assert got == []
            continue
        idf = math.log((n_rows - n + 0.5) / (n + 0.5))
        assert got[0][0] == (1e-6 if idf <= 0 else idf), word
        assert (got[0][0] == 1e-6) == (2 * n >= n_rows), word


def test_B14_phrase_argument_and_errors(db):
    q = '"the" OR "zebra" OR "cat"'
    rows = db.execute(
        "SELECT rrf_bm25_idf(episodes_fts, 0), rrf_bm25_idf(episodes_fts, 1), "
        "rrf_bm25_idf(episodes_fts, 2), rrf_bm25_idf(episodes_fts) FROM episodes_fts "
        "WHERE episodes_fts MATCH ?",
        (q,),
    ).fetchall()
    assert len({r for r in rows}) == 1  # the same on every row
    assert rows[0][0] == rows[0][3] == 1e-6 and rows[0][1] > rows[0][2] > 0
    for bad in ("3", "-1", "0.5", "'x'", "NULL"):
        with pytest.raises(
            apsw.SQLError, match=r"^rrf_bm25_idf: phrase must be an integer from 0 to 2$"
        ):
            db.execute(
                f"SELECT rrf_bm25_idf(episodes_fts, {bad}) FROM episodes_fts WHERE episodes_fts MATCH ?",
                (q,),
            ).fetchall()
    with pytest.raises(
        apsw.SQLError, match=r"rrf_bm25_idf: usage: rrf_bm25_idf\(fts_table \[, phrase\]\)"
    ):
        db.execute(
            "SELECT rrf_bm25_idf(episodes_fts, 0, 1) FROM episodes_fts WHERE episodes_fts MATCH 'cat'"
        ).fetchall()


# ---------------------------------------------------------------- rrf_bm25_or (B10..B13)


OR_SQL = (
    "SELECT rowid, rrf_bm25_or(episodes_fts, ?2, ?1, ?3, 'porter unicode61') AS s FROM episodes_fts "
    "WHERE episodes_fts MATCH fts5_query(?1, 'or', ?3, 'porter unicode61') ORDER BY s, rowid LIMIT ?4"
)


def test_B11_B13_values_are_the_whole_querys_bm25(db):
    """Without the rows that hold only a dropped word, ORDER BY rrf_bm25_or LIMIT m is the
    whole query's ORDER BY bm25 LIMIT m, bit for bit (here the kept words hold enough rows)."""
    for q, stop in (
        ("the memory of cats", "the of"),
        ("cats of the study", "the"),
        ("dog runs", "the"),
        ("The Studies of cats", ""),
    ):
        for n, m in ((50, 50), (50, 10), (7, 7), (1, 1)):
            assert db.execute(OR_SQL, (q, n, stop, m)).fetchall() == reference(db, q, m)
        # every row of the scan: exact, or pruned (below bm25 and worse than the n-th best)
        full = dict(
            db.execute(
                "SELECT rowid, bm25(episodes_fts) FROM episodes_fts WHERE episodes_fts "
                "MATCH fts5_query(?)",
                (q,),
            ).fetchall()
        )
        scan = db.execute(
            "SELECT rowid, rrf_bm25_or(episodes_fts, 10, ?1, ?2, 'porter unicode61') "
            "FROM episodes_fts WHERE episodes_fts MATCH fts5_query(?1, 'or', ?2, "
            "'porter unicode61')",
            (q, stop),
        ).fetchall()
        nth = sorted(full[r] for r, _ in scan)[9]
        exact = sum(v == full[r] for r, v in scan)
        assert exact >= 10
        for r, v in scan:
            assert v == full[r] or (v < full[r] and v > nth), (r, v, full[r])


def test_B10_errors(db):
    match = (
        "SELECT rrf_bm25_or(episodes_fts, 5, {args}) FROM episodes_fts WHERE episodes_fts MATCH {m}"
    )
    cases = [
        (
            "'the cat', 'the', 'porter unicode61'",
            '\'"cat" OR "dog"\'',
            "rrf_bm25_or: the MATCH expression has 2 phrases; fts5_query(text, 'or', stopwords, tokenize) has 1",
        ),
        ("'the cat', 'the', 'mytok'", "'\"cat\"'", "rrf_bm25_or: tokenizer 'mytok' " + NOT_BUILTIN),
        (
            "'studies cat', 'studies', 'unicode61'",
            "'\"cat\"'",
            "rrf_bm25_or: tokenize is not the table's tokenizer: the table makes another term of 'studies'",
        ),
        ("x'00', 'the', 'porter'", "'\"cat\"'", "rrf_bm25_or: text must be TEXT, got BLOB"),
        (
            "'the cat', 3, 'porter'",
            "'\"cat\"'",
            "rrf_bm25_or: stopwords must be TEXT or NULL, got INTEGER",
        ),
    ]
    for args, m, msg in cases:
        with pytest.raises(apsw.SQLError) as e:
            db.execute(match.format(args=args, m=m)).fetchall()
        assert str(e.value).endswith(msg), str(e.value)
    with pytest.raises(
        apsw.SQLError, match=r"rrf_bm25_or: missing arguments; usage: rrf_bm25_or\("
    ):
        db.execute(
            "SELECT rrf_bm25_or(episodes_fts, 5) FROM episodes_fts WHERE episodes_fts MATCH 'cat'"
        ).fetchall()
    with pytest.raises(
        apsw.SQLError, match="rrf_bm25_or: n must be a positive integer or NULL, got 0"
    ):
        db.execute(
            "SELECT rrf_bm25_or(episodes_fts, 0, 'cat') FROM episodes_fts WHERE episodes_fts MATCH 'cat'"
        ).fetchall()
    # 'the' is 'the' under unicode61 too: no error where the two tokenizers agree
    assert db.execute(match.format(args="'the cat', 'the', 'unicode61'", m="'\"cat\"'")).fetchall()
    # per-row text: refused on the rows it scores exactly
    with pytest.raises(
        apsw.SQLError,
        match="rrf_bm25_or: text, stopwords and tokenize must be the same on every row",
    ):
        db.execute(
            "SELECT rrf_bm25_or(episodes_fts, NULL, CASE WHEN rowid % 2 THEN 'cat' ELSE 'cat cat' END) "
            "FROM episodes_fts WHERE episodes_fts MATCH '\"cat\"'"
        ).fetchall()


def test_B10_integers_are_read_as_text_like_fts5_query(db):
    c = new_db()
    with c:
        c.executemany(
            "INSERT INTO episodes(id, content) VALUES (?, ?)",
            [(f"i{i}", f"item 42 number {i}") for i in range(10)],
        )
    assert c.execute(OR_SQL, (42, 5, "", 5)).fetchall() == reference(c, "42", 5)
    assert_exact(c, 42, limits=(5,))
    c.close()


def test_B11_text_that_is_not_the_index_is_an_error_naming_the_row(tmp_path):
    """An index that does not match its text (written behind FTS5's back) is refused rather
    than scored from the wrong text."""
    c = new_db()
    with c:
        c.executemany(
            "INSERT INTO episodes(id, content) VALUES (?, ?)",
            [(f"a{i}", "the cat sat" if i % 2 else "the dog") for i in range(20)],
        )
    c.execute("DROP TRIGGER IF EXISTS episodes_fts_update")
    for t in [
        r
        for (r,) in c.execute(
            "SELECT name FROM sqlite_master WHERE type = 'trigger' "
            "AND tbl_name = 'episodes' AND sql LIKE '%episodes_fts%'"
        )
    ]:
        c.execute(f'DROP TRIGGER "{t}"')
    c.execute("UPDATE episodes SET content = 'the cat sat on the mat today' WHERE rowid = 2")
    with pytest.raises(
        apsw.SQLError,
        match=r"rrf_bm25_or: the text of row 2 has 7 tokens, its FTS5 "
        r"index entry 3: rebuild the index",
    ):
        c.execute(OR_SQL, ("the cat", None, "the", 50)).fetchall()
    c.execute("UPDATE episodes SET content = 'the cow sat' WHERE rowid = 2")
    with pytest.raises(
        apsw.SQLError, match=r"rrf_bm25_or: the text of row 2 does not hold the terms"
    ):
        c.execute(OR_SQL, ("the cat", None, "the", 50)).fetchall()
    c.execute("INSERT INTO episodes_fts(episodes_fts) VALUES ('rebuild')")
    assert_exact(c, "the cat", limits=(1, 10, 50))
    c.close()


def test_B11_weights_after_tokenize(db):
    """A two-column table with column weights: the dropped words count with the weight of
    their column, as bm25(t, w1, w2) counts them."""
    c = apsw.Connection(":memory:")
    sqlite_rrf.load(c)
    c.execute("CREATE VIRTUAL TABLE t USING fts5(a, b, tokenize='porter unicode61')")
    rng = random.Random(5)
    with c:
        c.executemany(
            "INSERT INTO t(a, b) VALUES (?, ?)",
            [(text(rng, 1, 5), text(rng, 0, 12)) for _ in range(800)],
        )
    q, stop = "the memory of cats", "the of"
    for w in ((1.0, 1.0), (2.0, 0.5), (0.0, 3.0)):
        want = c.execute(
            f"SELECT rowid, bm25(t, {w[0]}, {w[1]}) AS s FROM t WHERE t MATCH fts5_query(?) "
            "ORDER BY s, rowid LIMIT 20",
            (q,),
        ).fetchall()
        got = c.execute(
            f"SELECT rowid, rrf_bm25_or(t, 20, ?1, ?2, 'porter unicode61', {w[0]}, {w[1]}) AS s "
            "FROM t WHERE t MATCH fts5_query(?1, 'or', ?2, 'porter unicode61') "
            "ORDER BY s, rowid LIMIT 20",
            (q, stop),
        ).fetchall()
        assert got == want, w
    c.close()


# ---------------------------------------------------------------- Debian's sqlite3 shell


def test_the_bm25_cte_runs_in_the_sqlite3_shell(tmp_path):
    shell = shutil.which("sqlite3") or (
        "/usr/bin/sqlite3" if os.path.exists("/usr/bin/sqlite3") else None
    )
    if shell is None:
        pytest.skip(
            "the sqlite3 shell is missing: `make system-deps` installs Debian's sqlite3 package"
        )
    path = tmp_path / "shell.db"
    c = new_db(path)
    fill(c, 1200, random.Random(3))
    refresh_hint(c, min_rows=1000)
    set_hint(c, "the of kubernet")  # partly stale: kubernet is rare
    c.close()
    (tmp_path / "bm25.sql").write_text(CTE + ";\n")
    out = {}
    for q in ("the memory of cats", "the xyzzy", "kubernetes the"):
        script = "\n".join(
            [
                f".load {sqlite_rrf.loadable_path()}",
                ".param init",
                f".param set :query '{q}'",
                ".param set :bm25_limit 20",
                ".mode list",
                ".separator ' '",
                f".read {tmp_path / 'bm25.sql'}",
            ]
        )
        r = subprocess.run(
            [shell, "-batch", "-bail", str(path)],
            input=script,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert r.returncode == 0 and not r.stderr, r.stderr
        out[q] = [
            (int(a), float(b)) for a, b, _ in (line.split() for line in r.stdout.splitlines())
        ]
    c = new_db(path)
    for q, got in out.items():
        want = reference(c, q, 20)
        assert [r for r, _ in got] == [r for r, _ in want]
        assert [s for _, s in got] == pytest.approx(
            [s for _, s in want], rel=1e-14
        )  # printed with 17 digits
    c.close()


# ---------------------------------------------------------------- rrf_bm25_or_top (B16)

#: The statement's BM25 list, whose 1b is made by rrf_bm25_or_top in one call (no filter,
#: a limit >= 1) and by the per-row scan otherwise.
TOP_CTE = CTE
TOP_SQL = (
    "SELECT j.value ->> 0, j.value ->> 1 FROM (SELECT rrf_bm25_or_top({t}, {n}, ?1, ?2, "
    "'porter unicode61'{w}) AS js FROM {t} WHERE {t} MATCH fts5_query(?1, 'or', ?2, "
    "'porter unicode61') LIMIT 1) AS t, json_each(t.js) AS j"
)


def top_list(conn, query, limit=50, **params):
    b = dict.fromkeys(statement_params(TOP_CTE))
    b.update(query=query, bm25_limit=limit, **params)
    return [(r, s) for r, s, _ in conn.execute(TOP_CTE, b).fetchall()]


def top_fn(conn, q, stop, n, table="episodes_fts", weights=()):
    w = "".join(f", {x}" for x in weights)
    return conn.execute(TOP_SQL.format(t=table, n=n, w=w), (q, stop)).fetchall()


def bm25_top(conn, q, m, table="episodes_fts", weights=()):
    w = "".join(f", {x}" for x in weights)
    return conn.execute(
        f"SELECT rowid, bm25({table}{w}) AS s FROM {table} WHERE {table} MATCH fts5_query(?) "
        f"ORDER BY s, rowid LIMIT {m}",
        (q,),
    ).fetchall()


def test_B16_the_statement_with_the_one_call_top_is_bm25s_top(db):
    assert TOP_CTE.count("rrf_bm25_or_top(") == 1
    for q in QUERIES:
        for limit in (1, 3, 50, 400, 5000):
            got = top_list(db, q, limit)
            assert got == reference(db, q, limit), (q, limit)
            assert all(type(r) is int and type(s) is float for r, s in got)
    # a filter takes the per-row scan: the same list as the statement's own
    for q in ("the memory of cats", "zebra quartz"):
        b = dict.fromkeys(CTE_PARAMS)
        b.update(query=q, bm25_limit=20, since=0)
        want = [(r, s) for r, s, _ in db.execute(CTE, b).fetchall()]
        assert top_list(db, q, 20, since=0) == want and len(want) == 20


def test_B16_values_and_order_are_bm25s_in_every_case(db):
    """ORDER BY bm25 LIMIT n of the whole query, for the rows of the scan without the dropped
    words (B13: enough rows hold a kept word here), for any n, NULL n (every row), and with
    words dropped or not."""
    for q, stop in (
        ("the memory of cats", "the of"),
        ("cats of the study", "the"),
        ("dog runs zebra", ""),
        ("The Studies of cats kubernetes", ""),
        ("quartz nebula fjord of a", "of a"),
        ("running", ""),
    ):
        scan_rows = db.execute(
            "SELECT count(*) FROM episodes_fts WHERE episodes_fts MATCH "
            "fts5_query(?1, 'or', ?2, 'porter unicode61')",
            (q, stop),
        ).fetchone()[0]
        for n in (1, 2, 7, 50, 333):
            assert top_fn(db, q, stop, n) == reference(db, q, min(n, scan_rows)), (q, n)
        if not stop:  # every row of the scan, in bm25's order
            assert top_fn(db, q, stop, "NULL") == reference(db, q, -1)


def test_B16_every_row_gets_the_same_result(db):
    q, stop = "the memory of cats", "the of"
    rows = db.execute(
        "SELECT rrf_bm25_or_top(episodes_fts, 5, ?1, ?2, 'porter unicode61') FROM episodes_fts "
        "WHERE episodes_fts MATCH fts5_query(?1, 'or', ?2, 'porter unicode61')",
        (q, stop),
    ).fetchall()
    assert len(rows) > 100 and len(set(rows)) == 1
    assert [tuple(x) for x in json.loads(rows[0][0])] == reference(db, q, 5)


def test_B16_weights_phrases_and_detail_modes():
    """Two columns with weights, hyphenated words (phrases of two terms), detail=column and none."""
    rng = random.Random(11)
    extra = ["alpha-beta", "beta", "alpha", "x-ray"]

    def row():  # 'the' and 'of' in every row (B11's contract: the dropped words are common)
        return (
            text(rng, 1, 5) + " " + " ".join(rng.sample(extra, rng.randint(0, 2))),
            "the of " + text(rng, 0, 12),
        )

    for options in ("", ", detail=column", ", detail=none"):
        c = apsw.Connection(":memory:")
        sqlite_rrf.load(c)
        c.execute(f"CREATE VIRTUAL TABLE t USING fts5(a, b, tokenize='porter unicode61'{options})")
        with c:
            c.executemany("INSERT INTO t(a, b) VALUES (?, ?)", [row() for _ in range(2500)])
        for word in ("the", "of"):
            assert (
                c.execute(
                    "SELECT rrf_bm25_idf(t) FROM t WHERE t MATCH ? LIMIT 1", (word,)
                ).fetchone()[0]
                == 1e-6
            )
        for q, stop in (
            ("the alpha-beta of cats", "the of"),
            ("x-ray zebra memory", ""),
            ("the memory of cats", "the of"),
        ):
            # (negative weights switch the bounds off: every row is scored)
            for w in ((), (1.0, 1.0), (2.0, 0.5), (0.0, 3.0), (7.5, 0.0), (-1.0, 2.0)):
                for n in (1, 10, 60):
                    assert top_fn(c, q, stop, n, "t", w) == bm25_top(c, q, n, "t", w), (
                        options,
                        q,
                        w,
                        n,
                    )
        c.close()


def test_B16_any_number_of_phrases(db):
    """For dense rowids U1 is held as a byte of phrase bits up to 8 phrases (u1[bits]) and as
    a double a rowid beyond: both are bm25()'s list, at 1, 7, 8, 9 and 12 phrases, with and
    without dropped words."""
    words = [
        "kubernetes",
        "orange",
        "vault",
        "zebra",
        "sqlite",
        "quartz",
        "nebula",
        "fjord",
        "cat",
        "dog",
        "study",
        "memory",
    ]
    for m in (1, 7, 8, 9, 12):
        for stop, extra in (("", ""), ("the of", " the of")):
            q = " ".join(words[:m]) + extra
            match = db.execute(
                "SELECT fts5_query(?1, 'or', ?2, 'porter unicode61')", (q, stop)
            ).fetchone()[0]
            assert match.count(" OR ") + 1 == m  # the phrases of the scan
            scan_rows = db.execute(
                "SELECT count(*) FROM episodes_fts WHERE episodes_fts MATCH "
                "fts5_query(?1, 'or', ?2, 'porter unicode61')",
                (q, stop),
            ).fetchone()[0]
            for n in (1, 5, 50, 400):
                assert top_fn(db, q, stop, n) == reference(db, q, min(n, scan_rows)), (q, n)


def test_B16_no_bounds_without_lengths_and_sparse_rowids():
    """A contentless table without column sizes (no length: every row is scored) and rowids
    too far apart for the dense map (the sorted path)."""
    rng = random.Random(12)
    c = apsw.Connection(":memory:")
    sqlite_rrf.load(c)
    c.execute("CREATE VIRTUAL TABLE cl USING fts5(a, content='', columnsize=0)")
    c.execute("CREATE VIRTUAL TABLE sp USING fts5(a)")
    with c:
        for i in range(1500):
            t_ = text(rng)
            c.execute("INSERT INTO cl(rowid, a) VALUES (?, ?)", (i + 1, t_))
            c.execute(
                "INSERT INTO sp(rowid, a) VALUES (?, ?)", (i * 10_000_019 - 7_000_000_000, t_)
            )
    for q in ("memory cats zebra", "dog study", "kubernetes orange vault"):
        for n in (1, 10, 100):
            assert top_fn(c, q, "", n, "cl") == bm25_top(c, q, n, "cl"), (q, n)
            assert top_fn(c, q, "", n, "sp") == bm25_top(c, q, n, "sp"), (q, n)
    c.close()


def test_B16_errors_name_the_function(db):
    match = (
        "SELECT rrf_bm25_or_top(episodes_fts, 5, {args}) FROM episodes_fts "
        "WHERE episodes_fts MATCH {m}"
    )
    cases = [
        (
            "'the cat', 'the', 'porter unicode61'",
            '\'"cat" OR "dog"\'',
            "rrf_bm25_or_top: the MATCH expression has 2 phrases; fts5_query(text, 'or', stopwords, "
            "tokenize) has 1",
        ),
        ("x'00', 'the', 'porter'", "'\"cat\"'", "rrf_bm25_or_top: text must be TEXT, got BLOB"),
        (
            "'the cat', 3, 'porter'",
            "'\"cat\"'",
            "rrf_bm25_or_top: stopwords must be TEXT or NULL, got INTEGER",
        ),
    ]
    for args, m, msg in cases:
        with pytest.raises(apsw.SQLError) as e:
            db.execute(match.format(args=args, m=m)).fetchall()
        assert str(e.value).endswith(msg), str(e.value)
    with pytest.raises(
        apsw.SQLError, match=r"rrf_bm25_or_top: missing arguments; usage: rrf_bm25_or_top\("
    ):
        db.execute(
            "SELECT rrf_bm25_or_top(episodes_fts, 5) FROM episodes_fts WHERE episodes_fts MATCH 'cat'"
        ).fetchall()
    for bad, shown in (("0", "0"), ("-3", "-3"), ("2.5", "2.5"), ("x'01'", "BLOB")):
        with pytest.raises(
            apsw.SQLError,
            match=f"^rrf_bm25_or_top: n must be a positive integer or NULL, got {shown}$",
        ):
            db.execute(
                f"SELECT rrf_bm25_or_top(episodes_fts, {bad}, 'cat') FROM episodes_fts "
                "WHERE episodes_fts MATCH 'cat'"
            ).fetchall()
    with pytest.raises(
        apsw.SQLError, match="rrf_bm25_or_top: text, stopwords and tokenize must be the same"
    ):
        db.execute(
            "SELECT rrf_bm25_or_top(episodes_fts, 3, CASE WHEN rowid % 2 THEN 'cat' ELSE 'cat cat' END) "
            "FROM episodes_fts WHERE episodes_fts MATCH '\"cat\"'"
        ).fetchall()


def test_B16_text_that_is_not_the_index_is_an_error_naming_the_row():
    c = new_db()
    with c:
        c.executemany(
            "INSERT INTO episodes(id, content) VALUES (?, ?)",
            [(f"a{i}", "the cat sat" if i % 2 else "the dog") for i in range(20)],
        )
    for t_ in [
        r
        for (r,) in c.execute(
            "SELECT name FROM sqlite_master WHERE type = 'trigger' "
            "AND tbl_name = 'episodes' AND sql LIKE '%episodes_fts%'"
        )
    ]:
        c.execute(f'DROP TRIGGER "{t_}"')
    c.execute("UPDATE episodes SET content = 'the cat sat on the mat today' WHERE rowid = 2")
    with pytest.raises(apsw.SQLError, match=r"^rrf_bm25_or_top: the text of row 2 has 7 tokens"):
        top_fn(c, "the cat", "the", 50)
    c.execute("UPDATE episodes SET content = 'the cow sat' WHERE rowid = 2")
    with pytest.raises(
        apsw.SQLError, match=r"^rrf_bm25_or_top: the text of row 2 does not hold the terms"
    ):
        top_fn(c, "the cat", "the", 50)
    c.execute("INSERT INTO episodes_fts(episodes_fts) VALUES ('rebuild')")
    assert top_fn(c, "the cat", "the", 5) == reference(c, "the cat", 5)
    c.close()


@settings(
    max_examples=80,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(
    start=st.integers(0, 400),
    ops=OPS,
    queries=st.lists(QUERY, min_size=1, max_size=4),
    limit=st.sampled_from([1, 2, 5, 50]),
    seed=st.integers(0, 2**32 - 1),
)
def test_property_B16_the_one_call_list_equals_bm25_across_sql_churn(
    start, ops, queries, limit, seed
):
    c = new_db()
    fill(c, start, random.Random(seed))
    refresh_hint(c)
    state = {"next": 0}
    for op in ops:
        apply(c, op, state)
        for q in queries:
            assert top_list(c, q, limit) == reference(c, q, limit), (q, limit)
    c.close()


# ------------------------------------------- every path, every writer, a fresh index
#
# After a churn of writes from the Store and from Debian's sqlite3 shell (no extension), with a
# word rising above half of the rows and falling back, every path of the BM25 list must be
# bm25()'s top, row for row and bit for bit, and bm25() of the live index must be that of an
# index built afresh from the same rows (one segment, no delete ever written to it): the live
# index after the churn scores exactly like a new one.

SHELL = shutil.which("sqlite3") or (
    "/usr/bin/sqlite3" if os.path.exists("/usr/bin/sqlite3") else None
)
RISER = "quokka"  # in no text of VOCAB: only the rise and fall ops write it
FRESH_BUILD = (
    "DROP TABLE IF EXISTS temp.fresh_fts; CREATE VIRTUAL TABLE temp.fresh_fts USING "
    "fts5(content, tokenize = 'porter unicode61'); INSERT INTO temp.fresh_fts(rowid, "
    "content) SELECT rowid, content FROM main.episodes_fts;"
)  # its content source's rows
FN_OR_TOP = (
    "SELECT rrf_bm25_or_top(episodes_fts, ?2, ?1, ?3, 'porter unicode61') FROM episodes_fts "
    "WHERE episodes_fts MATCH fts5_query(?1, 'or', ?3, 'porter unicode61') LIMIT 1"
)
FN_OR = (
    "SELECT rowid, rrf_bm25_or(episodes_fts, ?2, ?1, ?3, 'porter unicode61') AS s FROM "
    "episodes_fts WHERE episodes_fts MATCH fts5_query(?1, 'or', ?3, 'porter unicode61') "
    "ORDER BY s, rowid LIMIT ?2"
)
FN_FULL = (
    "SELECT rowid, rrf_bm25(episodes_fts, ?2) AS s FROM episodes_fts WHERE episodes_fts "
    "MATCH coalesce(fts5_query(?1), '\"\"') ORDER BY s, rowid LIMIT ?2"
)
FRESH_REF = REFERENCE.replace("episodes_fts", "fresh_fts")  # temp.fresh_fts


def common_now(conn):
    """The terms in at least half of the rows now (FTS5's IDF floor), space-separated."""
    return conn.execute(
        "SELECT coalesce(group_concat(term, ' '), '') FROM episodes_fts_vocab "
        "WHERE 2 * doc >= (SELECT count(*) FROM episodes)"
    ).fetchone()[0]


def every_path(conn, q, n, common):
    """{path: (its list, what it must equal)} for every path of the BM25 list."""
    want = reference(conn, q, n)
    words = [
        t
        for _p, t in json.loads(
            conn.execute(
                "SELECT fts5_query(?, 'terms', NULL, 'porter unicode61')", (q,)
            ).fetchone()[0]
        )
    ]
    stored = hint(conn)
    out = {}
    for name, h in (
        ("stored hint", stored),
        ("no hint", None),
        ("hint of this moment", common),
        ("hint of every word", " ".join(words + [RISER])),
    ):
        if h is None:
            conn.execute("DELETE FROM rrf_meta WHERE key = 'bm25_stopwords'")
        else:
            set_hint(conn, h)
        out[f"statement, rrf_bm25_or_top, {name}"] = (top_list(conn, q, n), want)
        out[f"statement, filtered scan, {name}"] = (top_list(conn, q, n, since=-(2**62)), want)
    if stored is None:
        conn.execute("DELETE FROM rrf_meta WHERE key = 'bm25_stopwords'")
    else:
        set_hint(conn, stored)
    out["rrf_bm25, whole query"] = (conn.execute(FN_FULL, (q, n)).fetchall(), want)
    drop = " ".join(w for w in words if w in set(common.split()))
    top = conn.execute(FN_OR_TOP, (q, n, drop)).fetchall()
    for name, got in (
        ("rrf_bm25_or_top", [tuple(x) for x in json.loads(top[0][0])] if top else []),
        ("rrf_bm25_or", conn.execute(FN_OR, (q, n, drop)).fetchall()),
    ):
        # B13: the top m are bm25()'s when m rows of the scan score below what the dropped
        # words alone can give a row (the rows that hold only those are not scanned)
        m = sum(1 for _r, v in got if v < -2.2000022e-6 * len(drop.split())) if drop else n
        out[f"{name}, common words dropped"] = (got[:m], want[:m])
    out["bm25() of a fresh index"] = (conn.execute(FRESH_REF, (q, n)).fetchall(), want)
    return out


def assert_every_path(conn, queries, n):
    conn.execute(FRESH_BUILD)
    common = common_now(conn)
    for q in queries:
        for path, (got, want) in every_path(conn, q, n, common).items():
            assert got == want, (q, n, path, got[:4], want[:4])
    conn.execute("DROP TABLE temp.fresh_fts")


CHURN19 = st.lists(
    st.one_of(
        st.tuples(st.just("insert"), st.integers(1, 120), st.integers(0, 2**32 - 1)),
        st.tuples(st.just("delete"), st.integers(1, 120), st.integers(0, 2**32 - 1)),
        st.tuples(st.just("rewrite"), st.integers(1, 120), st.integers(0, 2**32 - 1)),
        # a row's text written over another's: equal scores, ties broken by rowid
        st.tuples(st.just("copy"), st.integers(1, 40), st.integers(0, 2**32 - 1)),
        st.tuples(st.just("move"), st.integers(1, 20), st.integers(0, 2**32 - 1)),
        # the riser in half of the rows less one, exactly half, half plus one, 90 %
        st.tuples(st.just("rise"), st.sampled_from([-1, 0, 1, 40]), st.integers(0, 2**32 - 1)),
        st.tuples(st.just("fall"), st.integers(1, 400), st.integers(0, 2**32 - 1)),
        st.tuples(
            st.just("hint"),
            st.sampled_from(["refresh", "stale", "none"]),
            st.integers(0, 2**32 - 1),
        ),
    ),
    min_size=1,
    max_size=6,
)
QUERY19 = st.lists(
    st.sampled_from(VOCAB + ["The", "STUDIES", "xyzzy", RISER, RISER.upper()]),
    min_size=1,
    max_size=6,
).map(" ".join)


def quote(s):
    return "'" + s.replace("'", "''") + "'"


def churn_sql(conn, op):
    """The statements of one churn op (plain SQL, for any client): the state is read from
    conn, the choices come from the op's seed."""
    kind, k, seed = op
    rng = random.Random(seed)
    rowids = [r for (r,) in conn.execute("SELECT rowid FROM episodes ORDER BY rowid")]
    n = len(rowids)
    if kind == "insert":
        return [
            f"INSERT INTO episodes(id, content) VALUES ('c' || lower(hex(randomblob(8))), "
            f"{quote(text(rng))});"
            for _ in range(k)
        ]
    if not rowids:
        return []
    if kind == "delete":
        return [f"DELETE FROM episodes WHERE rowid = {r};" for r in rng.sample(rowids, min(k, n))]
    if kind == "rewrite":
        return [
            f"UPDATE episodes SET content = {quote(text(rng))} WHERE rowid = {r};"
            for r in rng.sample(rowids, min(k, n))
        ]
    if kind == "copy":
        return [
            f"UPDATE episodes SET content = (SELECT content FROM episodes WHERE rowid = "
            f"{rng.choice(rowids)}) WHERE rowid = {rng.choice(rowids)};"
            for _ in range(k)
        ]
    if kind == "move":  # a new rowid, below or above the others
        return [
            f"UPDATE OR IGNORE episodes SET rowid = {r + rng.choice([-1, 1]) * rng.randint(10**3, 10**6)} "
            f"WHERE rowid = {r};"
            for r in rng.sample(rowids, min(k, n))
        ]
    has = f"(' ' || content || ' ') LIKE '% {RISER} %'"
    if kind == "rise":
        target = n // 2 + k if k < 40 else (9 * n) // 10
        held = conn.execute(f"SELECT count(*) FROM episodes WHERE {has}").fetchone()[0]
        return [
            f"UPDATE episodes SET content = content || ' {RISER}' WHERE rowid IN (SELECT rowid "
            f"FROM episodes WHERE NOT {has} ORDER BY (rowid * 7919 + {seed % 10007}) % 10007 "
            f"LIMIT {max(0, target - held)});"
        ]
    if kind == "fall":
        return [
            f"UPDATE episodes SET content = replace(content, ' {RISER}', '') WHERE rowid IN "
            f"(SELECT rowid FROM episodes WHERE {has} ORDER BY (rowid * 7919 + {seed % 10007}) "
            f"% 10007 LIMIT {k});"
        ]
    if k == "refresh":
        return [read_sql("stopwords.sql").replace(":min_rows", "0")]
    if k == "stale":
        return [
            "INSERT OR REPLACE INTO rrf_meta(key, value) VALUES ('bm25_stopwords', "
            f"{quote(' '.join(rng.sample(['the', 'of', RISER, 'kubernet', 'zebra', 'run'], 3)))});"
        ]
    return ["DELETE FROM rrf_meta WHERE key = 'bm25_stopwords';"]


def run_in_shell(path, statements):
    """Debian's sqlite3 shell, without the extension, recursive_triggers off (its default)."""
    script = ".bail on\nBEGIN;\n" + "\n".join(statements) + "\nCOMMIT;\n"
    r = subprocess.run(
        [SHELL, "-batch", str(path)], input=script, capture_output=True, text=True, timeout=120
    )
    assert r.returncode == 0 and not r.stderr, r.stderr[:500]


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(
    start=st.integers(0, 300),
    ops=CHURN19,
    queries=st.lists(QUERY19, min_size=1, max_size=3),
    limit=st.sampled_from([1, 3, 20, 50]),
    seed=st.integers(0, 2**32 - 1),
)
def test_property_issue19_every_path_is_bm25s_top_and_a_fresh_indexs(
    start, ops, queries, limit, seed
):
    """In-process writes (apsw), checked after every op."""
    c = new_db()
    fill(c, start, random.Random(seed))
    refresh_hint(c)
    for op in ops:
        stmts = churn_sql(c, op)
        with c:
            for s in stmts:
                c.execute(s)
        event(f"op {op[0]}")
        assert_every_path(c, queries, limit)
    c.execute("INSERT INTO episodes_fts(episodes_fts, rank) VALUES ('integrity-check', 1)")
    c.close()


@pytest.mark.skipif(
    SHELL is None,
    reason="the sqlite3 shell is missing: `make system-deps` installs Debian's sqlite3 package",
)
@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(
    start=st.integers(0, 300),
    ops=CHURN19,
    queries=st.lists(QUERY19, min_size=1, max_size=3),
    limit=st.sampled_from([1, 3, 20, 50]),
    seed=st.integers(0, 2**32 - 1),
)
def test_property_issue19_every_path_after_writes_by_the_sqlite3_shell(
    tmp_path_factory, start, ops, queries, limit, seed
):
    """The same, every op written by Debian's sqlite3 shell (SQLite 3.40, no extension) and
    by a Store in turn."""
    path = tmp_path_factory.mktemp("shell19") / "m.db"
    rng = random.Random(seed)
    with Store(path) as s:
        s.add_many([dict(id=f"s{i}", content=text(rng)) for i in range(start)])
        s.refresh_stopwords(min_rows=0)
        for i, op in enumerate(ops):
            stmts = churn_sql(s.conn, op)
            if i % 2 == 0 or op[0] in ("move", "rise", "fall", "hint", "copy"):
                run_in_shell(path, stmts)
                event(f"shell {op[0]}")
            else:  # the Store's own writes
                ids = [r for (r,) in s.conn.execute("SELECT id FROM episodes")]
                if op[0] == "insert":
                    s.add_many([dict(content=text(rng)) for _ in range(op[1])])
                elif op[0] == "delete":
                    for x in rng.sample(ids, min(op[1], len(ids))):
                        s.delete(x)
                else:
                    for x in rng.sample(ids, min(op[1], len(ids))):
                        s.upsert(text(rng), id=x)
                event(f"store {op[0]}")
            assert_every_path(s.conn, queries, limit)
        s.conn.execute("INSERT INTO episodes_fts(episodes_fts, rank) VALUES ('integrity-check', 1)")
