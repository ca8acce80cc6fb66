"""Keyword hits in every script (migration 0011, fts5_query's Q16,
docs/languages.md).

Migration 0011 indexes a segmented copy of each episode's text: every run of CJK
characters (the code points of scripts written without spaces: Thai, Lao, Myanmar,
Hangul, Khmer, kana, bopomofo, CJK ideographs) becomes its character bigrams between
spaces, a run of one character that character; every other character stays as it is.
The segmentation is plain SQL (a view and the triggers), so every client, the Debian
``sqlite3`` 3.40 shell without the extension too, indexes alike; fts5_query splits a
query into the same bigrams in C.

What is tested, against a Python reference of the segmentation (:func:`segment`):

- the SQL segmentation equals the reference on random mixed text (CJK, Latin, digits,
  emoji, Thai marks, punctuation, fullwidth and halfwidth forms, long texts), in the
  bundled SQLite (apsw) and in the sqlite3 3.40 shell; text without a CJK character
  is its own segmentation, so English rows are indexed as before;
- fts5_query's tokens of a text are the reference's: the CJK bigrams and single
  characters of its runs, and its other words as before; every text is found by its
  own query;
- fts5_query's token characters are unicode61's (asked of the running SQLite and of the
  sqlite3 shell, every code point), so its tokens are the index's terms for any text:
  letters outside the CJK ranges such as U+3005 (``a々``, ``人々``), emoji FTS5's tables
  do not know, variation selectors (these failed before);
- the issue's cases: a Japanese memory by 'パスワード' and by 'Postgres' and 'Vault'
  (Latin words touching kana), a Chinese one by '备份', a Korean one by '비밀번호'
  (a word with its particle), through the recall statement with no model;
- the BM25 list is exactly bm25()'s top, value for value, after random writes of CJK,
  mixed and emoji text (hypothesis), with fresh, stale and absent stopword hints, and
  bm25() over the index equals bm25() over an index built afresh from the
  reference's segmentation (so the index holds exactly the segmented text);
- writes of every kind through the sqlite3 shell without the extension keep the
  index right (FTS5's integrity-check reads the text through the view);
- the migration: an existing database gets the segmented index, keeps its index
  settings, and its English rows keep their terms and bm25() values exactly.
"""

from __future__ import annotations

import functools
import json
import os
import random
import re
import shutil
import subprocess
from typing import FrozenSet, List

import apsw
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import sqlite_rrf
from sqlite_rrf.core.migrations import available, migrate
from sqlite_rrf.core.sql_files import read_sql, statement_params
from sqlite_rrf.store import Store

SHELL = "/usr/bin/sqlite3" if os.path.exists("/usr/bin/sqlite3") else shutil.which("sqlite3")
needs_shell = pytest.mark.skipif(SHELL is None, reason="the sqlite3 shell is not installed")

#: migration 0011's CJK characters (and fts5q.c's rrf_is_cjk)
CJK_RANGES = [
    (0x0E00, 0x0EFF),
    (0x1000, 0x109F),
    (0x1100, 0x11FF),
    (0x1780, 0x17FF),
    (0x3041, 0x309F),
    (0x30A1, 0x30FA),
    (0x30FC, 0x30FF),
    (0x3100, 0x31BF),
    (0x31F0, 0x31FF),
    (0x3400, 0x4DBF),
    (0x4E00, 0x9FFF),
    (0xA960, 0xA97F),
    (0xAC00, 0xD7FF),
    (0xF900, 0xFAFF),
    (0xFF66, 0xFFDC),
    (0x20000, 0x3FFFD),
]
SEGMENTED = 65536  # characters segmented; the rest follows as it is


def is_cjk(ch: str) -> bool:
    o = ord(ch)
    return any(a <= o <= b for a, b in CJK_RANGES)


def segment(t: str) -> str:
    """The reference: what migration 0011 indexes for the text ``t``. SQLite's text
    functions stop at a NUL: what follows the first one is appended as it is."""
    t, nul, after = t.partition("\0")
    if not any(is_cjk(ch) for ch in t):
        return t + nul + after
    return _segment(t) + (" " + nul + after if nul else "")


def _segment(t: str) -> str:
    out = []
    n = len(t)
    for i in range(min(n, SEGMENTED)):
        ch = t[i]
        if not is_cjk(ch):
            out.append(ch)
        elif i + 1 < n and is_cjk(t[i + 1]):
            out.append(" " + t[i : i + 2] + " ")
        elif i > 0 and is_cjk(t[i - 1]):
            pass  # the last character of a run: in the bigram before it
        else:
            out.append(" " + ch + " ")
    s = "".join(out)
    return s + " " + t[SEGMENTED:] if n > SEGMENTED else s


# Characters to build texts from: CJK of every block, Latin, digits, emoji, Thai
# combining marks, the katakana middle dot and prolonged sound mark, fullwidth and
# halfwidth forms, ideographic space and punctuation, an extension-B ideograph; the
# letters and numbers of U+3000-303F, variation selectors, ZWJ, a soft hyphen, an
# emoji newer than FTS5's tables, a circled digit, a Thai vowel mark.
ALPHABET = (
    list("abcXYZ019 .,-'\"*")
    + list("パスワードをー・ァヺ")
    + list("あいうゝゞ")
    + list("認証情報备份数据库猫々〆")
    + list("비밀번호를가ᄀㄱ")
    + list("ภาษาไทยที่นี่")
    + list("ກຂ")
    + list("ကခ")
    + list("កខ")
    + list("ㄅㄆ")
    + [
        "\U00020000",
        "\U0002a700",
        "\uf900",
        "\uff76",
        "\uff9e",
        "\uffa1",
        "\uff21",
        "\u3000",
        "\u3001",
        "\u300c",
        "\U0001f600",
        "\u00e9",
        "\u00df",
        "\u2122",
        "\u0301",
        "\u3099",
        "\u309b",
        "\u30a0",
        "\u3040",
        "\u0e3f",
        "\u3007",
        "\u303b",
        "\u3031",
        "\u3021",
        "\u302a",
        "\u3003",
        "\ufe0f",
        "\ufe0e",
        "\U000e0100",
        "\U0001f970",
        "\u2460",
        "\u200d",
        "\u00ad",
        "\u0e31",
        "\uffe3",
    ]
)

texts = st.lists(st.sampled_from(ALPHABET), max_size=60).map("".join)


def new_db(path=":memory:") -> apsw.Connection:
    c = apsw.Connection(str(path))
    sqlite_rrf.load(c)
    migrate(c)
    return c


def shell(db, sql: str, *args: str) -> str:
    """Run ``sql`` in the sqlite3 shell (no extension); returns its stdout."""
    r = subprocess.run(
        [SHELL, *args, str(db)], input=sql, capture_output=True, text=True, timeout=120
    )
    assert r.returncode == 0 and not r.stderr, (r.returncode, r.stderr)
    return r.stdout


def integrity(conn) -> None:
    conn.execute("INSERT INTO episodes_fts(episodes_fts, rank) VALUES ('integrity-check', 1)")


def match(conn, expr: str) -> List[int]:
    return [
        r
        for (r,) in conn.execute(
            "SELECT rowid FROM episodes_fts WHERE episodes_fts MATCH ? ORDER BY rowid", (expr,)
        )
    ]


# ---------------------------------------------------------------- the segmentation


@settings(max_examples=300, deadline=None)
@given(st.lists(texts, min_size=1, max_size=20))
def test_sql_segmentation_is_the_reference(batch):
    conn = new_db()
    with conn:
        conn.executemany(
            "INSERT INTO episodes(id, content) VALUES (?, ?)",
            [(f"e{i}", t) for i, t in enumerate(batch)],
        )
    got = [t for (t,) in conn.execute("SELECT content FROM episodes_fts_text ORDER BY rowid")]
    assert got == [segment(t) for t in batch]
    integrity(conn)


def test_segmentation_of_long_texts_and_the_cut():
    rng = random.Random(7)
    conn = new_db()
    batch = ["".join(rng.choices(ALPHABET, k=n)) for n in (255, 256, 257, 511, 512, 513, 5000)]
    batch.append("猫" * (SEGMENTED - 1) + "犬犬 tail")  # a bigram across the cut
    batch.append("a" * 70000 + "認証")  # a CJK run after the cut
    with conn:
        conn.executemany(
            "INSERT INTO episodes(id, content) VALUES (?, ?)",
            [(f"e{i}", t) for i, t in enumerate(batch)],
        )
    got = [t for (t,) in conn.execute("SELECT content FROM episodes_fts_text ORDER BY rowid")]
    assert got == [segment(t) for t in batch]
    integrity(conn)


@settings(max_examples=200, deadline=None)
@given(st.text(st.characters(blacklist_categories=("Cs",)), max_size=200))
def test_text_without_cjk_is_its_own_segmentation(t):
    conn = new_db()
    conn.execute("INSERT INTO episodes(id, content) VALUES ('a', ?)", (t,))
    got = conn.execute("SELECT content FROM episodes_fts_text").fetchall()[0][0]
    assert got == segment(t)
    if not any(is_cjk(ch) for ch in t):
        assert got == t


@needs_shell
def test_the_shell_segments_like_the_reference(tmp_path):
    """SQLite 3.40 (no ORDER BY inside group_concat) gives the same text, and its own
    writes index it: the rows are inserted by the shell itself."""
    rng = random.Random(11)
    batch = ["".join(rng.choices(ALPHABET, k=rng.randint(0, 80))) for _ in range(300)]
    batch += ["".join(rng.choices(ALPHABET, k=n)) for n in (256, 257, 1000, 3000)]
    db = tmp_path / "s.db"
    new_db(db).close()
    values = ", ".join("('e%d', '%s')" % (i, t.replace("'", "''")) for i, t in enumerate(batch))
    shell(
        db,
        f"INSERT INTO episodes(id, content) VALUES {values};"
        "INSERT INTO episodes_fts(episodes_fts, rank) VALUES ('integrity-check', 1);",
    )
    out = json.loads(shell(db, "SELECT content FROM episodes_fts_text ORDER BY rowid;", "-json"))
    assert [r["content"] for r in out] == [segment(t) for t in batch]


# ---------------------------------------------------------------- fts5_query (Q16)


def query_tokens(conn, t: str) -> List[str]:
    expr = conn.execute("SELECT fts5_query(?)", (t,)).fetchall()[0][0]
    return [] if expr == '""' else re.findall(r'"([^"]*)"', expr)


@functools.lru_cache(maxsize=None)
def unicode61_separators(sqlite3_shell: bool = False) -> FrozenSet[int]:
    """The code points from U+0080 up that FTS5's unicode61 tokenizer (the index's,
    under porter) takes as separators, asked of the running SQLite (or of the sqlite3
    shell): each code point c is written as 'x' + c + 'x' between spaces, one token
    if c is a token character, two 'x' if it separates them."""
    cps = [cp for cp in range(0x80, 0x110000) if not 0xD800 <= cp <= 0xDFFF]
    chunks = [
        " ".join("x" + chr(cp) + "x" for cp in cps[k : k + 4096]) for k in range(0, len(cps), 4096)
    ]
    setup = (
        "CREATE VIRTUAL TABLE t USING fts5(x, tokenize = 'porter unicode61');"
        "CREATE VIRTUAL TABLE v USING fts5vocab(t, instance);"
    )
    if sqlite3_shell:
        sql = setup + "".join("INSERT INTO t(x) VALUES ('%s');" % c for c in chunks)
        sql += "SELECT json_group_array(term) FROM (SELECT term FROM v ORDER BY doc, offset);"
        r = subprocess.run(
            [SHELL, ":memory:"], input=sql, capture_output=True, text=True, timeout=120
        )
        assert r.returncode == 0 and not r.stderr, r.stderr
        terms = json.loads(r.stdout)
    else:
        conn = apsw.Connection(":memory:")
        conn.execute(setup)
        conn.executemany("INSERT INTO t(x) VALUES (?)", [(c,) for c in chunks])
        terms = [t for (t,) in conn.execute("SELECT term FROM v ORDER BY doc, offset")]
    seps, i = set(), 0
    for cp in cps:
        if terms[i] == "x":  # 'x' c 'x' gave two tokens
            assert terms[i + 1] == "x"
            seps.add(cp)
            i += 2
        else:
            i += 1
    assert i == len(terms)
    return frozenset(seps)


def is_token_char(ch: str) -> bool:
    """fts5q.c's Q2: an ASCII letter or digit, a CJK character (Q16), or a non-ASCII
    character that unicode61 does not take as a separator."""
    cp = ord(ch)
    if cp < 0x80:
        return ch.isascii() and ch.isalnum()
    return is_cjk(ch) or cp not in unicode61_separators()


def reference_tokens(t: str) -> List[str]:
    """fts5_query's tokens by Q2, Q4 and Q16, from Python: the runs of token
    characters, each CJK run as its bigrams (a single character alone), repeats once
    (ASCII case folded)."""
    out: List[str] = []
    for run in re.findall(r"[^\x00]+", "".join(c if is_token_char(c) else "\x00" for c in t)):
        for part, cjk in _runs(run):
            if cjk and len(part) > 1:
                out.extend(part[i : i + 2] for i in range(len(part) - 1))
            else:
                out.append(part)
    seen, uniq = set(), []
    for w in out:
        key = "".join(c.lower() if c.isascii() else c for c in w)
        if key not in seen:
            seen.add(key)
            uniq.append(w)
    return uniq[:1000]


def _runs(s: str):
    i = 0
    while i < len(s):
        c = is_cjk(s[i])
        j = i
        while j < len(s) and is_cjk(s[j]) == c:
            j += 1
        yield s[i:j], c
        i = j


@settings(max_examples=300, deadline=None)
@given(texts)
def test_query_cjk_tokens_are_the_indexs_pieces(t):
    """The CJK tokens of fts5_query(t) are exactly the CJK pieces the SQL segmentation
    indexes for t, and the text's row is found by its own query."""
    conn = new_db()
    conn.execute("INSERT INTO episodes(id, content) VALUES ('a', ?)", (t,))
    indexed = conn.execute("SELECT content FROM episodes_fts_text").fetchall()[0][0]
    pieces = {p for p in indexed.split() if all(is_cjk(ch) for ch in p)}
    toks = query_tokens(conn, t)
    assert {w for w in toks if all(is_cjk(ch) for ch in w)} == pieces
    assert not any(is_cjk(ch) for w in toks for ch in w if not all(is_cjk(c) for c in w))
    terms = json.loads(conn.execute("SELECT fts5_query(?, 'terms')", (t,)).fetchall()[0][0])
    if terms:  # some token gives a term: the row is found by its own words
        assert match(conn, conn.execute("SELECT fts5_query(?)", (t,)).fetchall()[0][0]) == [1]


def test_query_tokens_by_hand():
    conn = new_db()
    assert query_tokens(conn, "パスワード") == ["パス", "スワ", "ワー", "ード"]
    assert query_tokens(conn, "Postgresの認証情報はVault") == [
        "Postgres",
        "の認",
        "認証",
        "証情",
        "情報",
        "報は",
        "Vault",
    ]
    assert query_tokens(conn, "猫 a猫b 猫猫") == ["猫", "a", "b", "猫猫"]
    assert query_tokens(conn, "認証・情報") == ["認証", "情報"]  # U+30FB is punctuation
    assert query_tokens(conn, "비밀번호를") == ["비밀", "밀번", "번호", "호를"]
    assert query_tokens(conn, "the quick fox") == ["the", "quick", "fox"]


#: text whose characters outside the CJK ranges are letters, numbers or marks to
#: unicode61 but were separators to fts5_query before (U+3005 and the rest of
#: U+3000-303F's letters and numbers, enclosed numbers, emoji FTS5's tables do not
#: know), or the other way round (variation selectors): each with its tokens
MARKS = [
    ("a\u3005", ["a\u3005"]),  # U+3005 (Lm): one index token, not 'a'
    ("\u3005", ["\u3005"]),
    ("x\u3005y", ["x\u3005y"]),
    (
        "\u4eba\u3005\u306f\u5143\u6c17\u3067\u3059",  # U+3005 between CJK runs: its own token
        ["\u4eba", "\u3005", "\u306f\u5143", "\u5143\u6c17", "\u6c17\u3067", "\u3067\u3059"],
    ),
    ("\u6642\u3005\u96e8 Tokyo\u3005", ["\u6642", "\u3005", "\u96e8", "Tokyo\u3005"]),
    ("\u3006\u5207", ["\u3006", "\u5207"]),  # U+3006 (Lo)
    ("a\u3007b \u3007", ["a\u3007b", "\u3007"]),  # U+3007 (Nl)
    ("\u303bx \u3031\u3021", ["\u303bx", "\u3031\u3021"]),  # U+303B, U+3031 (Lm), U+3021 (Nl)
    ("x\U0001f970y \U0001f970", ["x\U0001f970y", "\U0001f970"]),  # U+1F970: not in FTS5's tables
    ("\u2460 x\u2460", ["\u2460", "x\u2460"]),  # U+2460 (No)
    ("a\ufe0fb", ["a", "b"]),  # U+FE0F (Mn, a variation selector): separates
    ("\u845b\U000e0100\u98fe", ["\u845b", "\u98fe"]),  # an ideographic variation selector
    ("e\u0301t\u00e9", ["e\u0301t\u00e9"]),  # a combining acute: a diacritic, folded away
    ("\U000f0000a", ["\U000f0000a"]),  # private use (Co)
]


@pytest.mark.parametrize("text,tokens", MARKS)
def test_query_tokens_of_marks_are_the_indexs(text, tokens):
    """Each token of fts5_query is an index term of the row (found alone), and the row
    is found by its own query."""
    conn = new_db()
    conn.execute("INSERT INTO episodes(id, content) VALUES ('a', ?)", (text,))
    assert query_tokens(conn, text) == tokens
    for tok in tokens:
        assert match(conn, '"%s"' % tok) == [1], tok
    assert match(conn, conn.execute("SELECT fts5_query(?)", (text,)).fetchall()[0][0]) == [1]
    assert match(conn, conn.execute("SELECT fts5_query(?, 'and')", (text,)).fetchall()[0][0]) == [1]


def test_token_characters_are_unicode61s_for_every_code_point():
    """Q2 over every code point from U+0080: 'x' c 'x' is one token, or 'x' and c for a
    CJK character (Q16), unless unicode61 takes c as a separator."""
    conn = new_db()
    got = {
        cp
        for (cp,) in conn.execute(
            "WITH RECURSIVE c(cp) AS (VALUES (128) UNION ALL SELECT cp + 1 FROM c WHERE cp < 1114111)"
            " SELECT cp FROM c WHERE (cp < 55296 OR cp > 57343)"
            " AND fts5_query('x' || char(cp) || 'x') = '\"x\"'"
        )
    }
    want = {cp for cp in unicode61_separators() if not is_cjk(chr(cp))}
    assert sorted(got - want)[:20] == [] and sorted(want - got)[:20] == []
    assert 0x3005 not in want and 0x3001 in want  # the table is not trivially empty


#: any character but a surrogate or NUL (the index leaves what follows a NUL as it is,
#: migration 0011), often one of ALPHABET's
any_texts = st.lists(
    st.one_of(
        st.sampled_from(ALPHABET),
        st.characters(blacklist_categories=("Cs",), blacklist_characters="\0"),
    ),
    max_size=40,
).map("".join)


@settings(max_examples=300, deadline=None)
@given(any_texts)
def test_query_terms_are_the_rows_index_terms(t):
    """The terms of fts5_query(t)'s tokens (mode 'terms', the index's tokenizer) are
    exactly the terms the index holds for t's row: no token cuts an index term in
    two or joins two, and each finds the row alone."""
    conn = new_db()
    conn.execute("INSERT INTO episodes(id, content) VALUES ('a', ?)", (t,))
    terms = json.loads(
        conn.execute("SELECT fts5_query(?, 'terms', NULL, 'porter unicode61')", (t,)).fetchall()[0][
            0
        ]
    )
    index = {term for (term,) in conn.execute("SELECT term FROM episodes_fts_vocab")}
    assert {term for _, term in terms} == index
    for phrase, _ in terms:
        assert match(conn, phrase) == [1], phrase


@needs_shell
def test_the_shells_unicode61_has_the_same_separators():
    """The sqlite3 shell's FTS5 (3.40 on Debian) splits as the bundled SQLite does, so
    fts5q.c's one table serves rows written by either."""
    assert unicode61_separators(True) == unicode61_separators()


@settings(max_examples=300, deadline=None)
@given(texts)
def test_query_tokens_are_the_python_reference(t):
    assert query_tokens(new_db(), t) == reference_tokens(t)


# ---------------------------------------------------------------- the issue's cases


def test_issue_cases_are_found_by_keyword_with_no_model(tmp_path):
    memories = {
        "jp": "Postgresの認証情報はVaultに保存されています。パスワードは毎月変更します。",
        "zh": "每天晚上三点备份数据库到S3存储桶",
        "ko": "서버 비밀번호를 어제 변경했습니다",
        "th": "ภาษาไทยเป็นภาษาราชการของประเทศไทย",
        "en": "The cat sat on the mat while the vault was locked",
        "emoji": "Deploy finished 🚀 デプロイ完了",
    }
    with Store(str(tmp_path / "m.db")) as s:
        ids = {k: s.add(v, id=k) for k, v in memories.items()}
        for query, want in [
            ("パスワード", "jp"),
            ("Postgres", "jp"),
            ("認証情報", "jp"),
            ("备份", "zh"),
            ("数据库备份", "zh"),
            ("비밀번호", "ko"),
            ("변경", "ko"),
            ("ภาษาไทย", "th"),
            ("デプロイ", "emoji"),
            ("cat", "en"),
        ]:
            hits = s.recall(query, 3, touch=False).hits
            assert hits and hits[0].id == ids[want], (query, [h.id for h in hits])
        # a word touching CJK is its own word: 'vault' is in two memories
        for query in ("vault", "Vault"):
            assert {h.id for h in s.recall(query, 5, touch=False).hits} == {"jp", "en"}


# ---------------------------------------------------------------- BM25 stays bm25()'s


def bm25_cte() -> str:
    """The recall statement up to its ``bm25`` CTE, selecting that CTE."""
    sql = read_sql("recall.sql")
    head = sql[: sql.index("\n-- 2. ") + 1].rstrip()
    assert head.endswith("),")
    return head[:-1] + "\nSELECT rowid, bm25_score FROM bm25 ORDER BY bm25_score, rowid"


CTE = bm25_cte()
CTE_PARAMS = statement_params(CTE)
REFERENCE = (
    "SELECT rowid, bm25(episodes_fts) FROM episodes_fts "
    "WHERE episodes_fts MATCH coalesce(fts5_query(?1), '\"\"') "
    "ORDER BY bm25(episodes_fts), rowid LIMIT ?2"
)

#: words that repeat (so that some bigrams are in half of the rows: stopwords)
WORDS = [
    "パスワード",
    "データベース",
    "バックアップ",
    "の",
    "は",
    "を",
    "認証",
    "情報",
    "します",
    "备份",
    "数据库",
    "服务器",
    "密码",
    "的",
    "了",
    "비밀번호를",
    "변경",
    "서버",
    "의",
    "ภาษา",
    "ไทย",
    "Postgres",
    "Vault",
    "the",
    "cat",
    "😀",
    "🚀",
    "2024年",
    "ＡＢＣ",
    "ｶﾀｶﾅ",
]


def cjk_text(rng: random.Random) -> str:
    words = rng.choices(WORDS, k=rng.randint(1, 12))
    return "".join(w + rng.choice(["", "", " ", "、", "。"]) for w in words)


def bm25_list(conn, query, limit):
    b = dict.fromkeys(CTE_PARAMS)
    b.update(query=query, bm25_limit=limit)
    return conn.execute(CTE, b).fetchall()


def fresh_index_agrees(conn, queries) -> None:
    """bm25() over the index equals bm25() over an index built afresh from the
    reference's segmentation of the rows: the index holds exactly that text."""
    rows = conn.execute("SELECT rowid, content FROM episodes").fetchall()
    conn.execute("CREATE VIRTUAL TABLE temp.ref USING fts5(content, tokenize = 'porter unicode61')")
    try:
        conn.executemany(
            "INSERT INTO temp.ref(rowid, content) VALUES (?, ?)", [(r, segment(c)) for r, c in rows]
        )
        for q in queries:
            want = conn.execute(
                "SELECT rowid, bm25(ref) FROM temp.ref WHERE ref MATCH "
                "coalesce(fts5_query(?1), '\"\"') ORDER BY 2, rowid",
                (q,),
            ).fetchall()
            got = conn.execute(
                "SELECT rowid, bm25(episodes_fts) FROM episodes_fts WHERE "
                "episodes_fts MATCH coalesce(fts5_query(?1), '\"\"') ORDER BY 2, rowid",
                (q,),
            ).fetchall()
            assert got == want, q
    finally:
        conn.execute("DROP TABLE temp.ref")


def assert_exact(conn, queries, limits=(1, 5, 50)) -> None:
    for q in queries:
        for limit in limits:
            got = bm25_list(conn, q, limit)
            want = conn.execute(REFERENCE, (q, limit)).fetchall()
            assert got == want, (q, limit, got[:5], want[:5])


op = st.tuples(
    st.sampled_from(["insert", "replace", "update", "delete", "rowid"]),
    st.integers(0, 40),
    st.integers(0, 2**32),
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.integers(20, 120),
    st.lists(op, max_size=40),
    st.integers(0, 2**32),
    st.sampled_from(["fresh", "absent", "stale"]),
)
def test_property_bm25_list_is_bm25s_across_cjk_churn(start, ops, seed, hint):
    rng = random.Random(seed)
    conn = new_db()
    with conn:
        conn.executemany(
            "INSERT INTO episodes(id, content) VALUES (?, ?)",
            [(f"e{i}", cjk_text(rng)) for i in range(start)],
        )
    if hint != "absent":
        conn.execute(read_sql("stopwords.sql"), {"min_rows": 0})
    for kind, n, s in ops:
        r = random.Random(s)
        if kind == "insert":
            conn.execute(
                "INSERT OR IGNORE INTO episodes(id, content) VALUES (?, ?)", (f"n{n}", cjk_text(r))
            )
        elif kind == "replace":
            conn.execute(
                "INSERT OR REPLACE INTO episodes(id, content) VALUES (?, ?)", (f"e{n}", cjk_text(r))
            )
        elif kind == "update":
            conn.execute("UPDATE episodes SET content = ? WHERE id = ?", (cjk_text(r), f"e{n}"))
        elif kind == "delete":
            conn.execute("DELETE FROM episodes WHERE id = ?", (f"e{n}",))
        else:
            conn.execute(
                "UPDATE OR REPLACE episodes SET rowid = ? WHERE id = ?",
                (r.randint(1, 200), f"e{n}"),
            )
    if hint == "stale":  # computed before the churn, or for another database
        conn.execute(
            "UPDATE rrf_meta SET value = value || ' の認 备份 the' WHERE key = 'bm25_stopwords'"
        )
    integrity(conn)
    queries = [cjk_text(random.Random(seed + i)) for i in range(6)]
    queries += ["パスワード", "の", "は", "认证", "Postgres", "😀", "备份数据库", "の認証"]
    assert_exact(conn, queries)
    fresh_index_agrees(conn, queries)


def test_common_bigrams_are_stopwords_and_the_list_stays_exact():
    rng = random.Random(5)
    conn = new_db()
    with conn:
        conn.executemany(
            "INSERT INTO episodes(id, content) VALUES (?, ?)",
            [(f"e{i}", "データの" + cjk_text(rng)) for i in range(300)],
        )
    conn.execute(read_sql("stopwords.sql"), {"min_rows": 0})
    stop = conn.execute("SELECT value FROM rrf_meta WHERE key = 'bm25_stopwords'").fetchall()[0][0]
    assert {"デー", "ータ", "タの"} <= set(stop.split())
    dropped = json.loads(
        conn.execute(
            "SELECT fts5_query('データの备份', 'terms', ?, 'porter unicode61')", (stop,)
        ).fetchall()[0][0]
    )
    assert [t for _, t in dropped][:3] == ["デー", "ータ", "タの"]
    assert_exact(conn, ["データの备份", "データ", "の备份 Vault", "タの"])


# ---------------------------------------------------------------- the shell without the extension


@needs_shell
def test_every_kind_of_write_through_the_shell_keeps_the_index_right(tmp_path):
    db = tmp_path / "s.db"
    conn = new_db(db)
    rng = random.Random(3)
    with conn:
        conn.executemany(
            "INSERT INTO episodes(id, content) VALUES (?, ?)",
            [(f"e{i}", cjk_text(rng)) for i in range(30)],
        )
    conn.close()

    def q(t: str) -> str:
        return "'" + t.replace("'", "''") + "'"

    writes = []
    for i in range(60):
        t = cjk_text(rng)
        n = rng.randint(0, 40)
        writes.append(
            rng.choice(
                [
                    f"INSERT INTO episodes(id, content) VALUES ('s{i}', {q(t)});",
                    f"INSERT OR REPLACE INTO episodes(id, content) VALUES ('e{n}', {q(t)});",
                    f"REPLACE INTO episodes(rowid, id, content) VALUES ({n}, 'r{i}', {q(t)});",
                    f"UPDATE episodes SET content = {q(t)} WHERE id = 'e{n}';",
                    f"UPDATE episodes SET content = content || {q(t)} WHERE rowid % 7 = {n % 7};",
                    f"UPDATE OR REPLACE episodes SET rowid = {n + 1} WHERE id = 'e{(n * 3) % 40}';",
                    f"UPDATE OR REPLACE episodes SET id = 'e{n}' WHERE id = 'e{(n + 1) % 40}';",
                    f"DELETE FROM episodes WHERE id = 'e{n}';",
                    f"INSERT INTO episodes(id, content) VALUES ('e{n}', {q(t)}) "
                    f"ON CONFLICT(id) DO UPDATE SET content = excluded.content;",
                    f"INSERT OR IGNORE INTO episodes(id, content) VALUES ('e{n}', {q(t)});",
                ]
            )
        )
    check = "INSERT INTO episodes_fts(episodes_fts, rank) VALUES ('integrity-check', 1);\n"
    out = shell(db, "PRAGMA recursive_triggers;\n" + "".join(w + "\n" + check for w in writes))
    assert out.split() == ["0"]  # the shell's default: recursive_triggers OFF
    conn = new_db(db)
    integrity(conn)
    queries = [cjk_text(random.Random(i)) for i in range(10)] + ["パスワード", "Vault", "备份"]
    fresh_index_agrees(conn, queries)
    assert_exact(conn, queries)
    assert conn.execute("SELECT count(*) FROM episodes_displaced").fetchall() == [(0,)]


# ---------------------------------------------------------------- the migration


def test_migration_keeps_english_exact_and_segments_the_rest(tmp_path):
    ms = available()
    before = [m for m in ms if m.version < 11]
    conn = apsw.Connection(str(tmp_path / "m.db"))
    sqlite_rrf.load(conn)
    migrate(conn, before)
    rng = random.Random(9)
    english = [
        "the cat sat on the mat",
        "running runs runner",
        "a vault of keys",
        "Study of memory in cats",
        "na\u00efve caf\u00e9 \u00fcber",
        "x\U0001d400y",
    ]
    with conn:
        conn.executemany(
            "INSERT INTO episodes(id, content) VALUES (?, ?)",
            [(f"e{i}", rng.choice(english) + f" {i}") for i in range(200)],
        )
        # CJK rows without ASCII letters or digits, so that the ASCII terms below are the
        # English rows' alone (Latin words touching CJK become their own terms)
        no_ascii = [w for w in WORDS if not any(c.isascii() for c in w)]
        conn.executemany(
            "INSERT INTO episodes(id, content) VALUES (?, ?)",
            [(f"j{i}", "".join(rng.choices(no_ascii, k=8))) for i in range(50)],
        )
        conn.execute("INSERT INTO episodes_fts(episodes_fts, rank) VALUES ('usermerge', 7)")
    queries = ["cat", "running vault", "study memory cats", "caf\u00e9", "the 17"]
    old = {
        q: conn.execute(
            "SELECT rowid, bm25(episodes_fts) FROM episodes_fts WHERE "
            "episodes_fts MATCH fts5_query(?) AND rowid <= 200 ORDER BY 2, rowid",
            (q,),
        ).fetchall()
        for q in queries
    }
    vocab = "SELECT term, doc, cnt FROM episodes_fts_vocab WHERE term NOT GLOB '*[^a-z0-9]*'"
    old_vocab = conn.execute(vocab).fetchall()
    want = {r for r, c in conn.execute("SELECT rowid, content FROM episodes") if "パスワード" in c}
    assert set(match(conn, '"パスワード"')) < want  # before: only a whole run matched
    migrate(conn)
    integrity(conn)
    assert conn.execute(vocab).fetchall() == old_vocab
    for q in queries:  # the English rows keep their bm25(): same terms, same lengths
        got = conn.execute(
            "SELECT rowid, bm25(episodes_fts) FROM episodes_fts WHERE "
            "episodes_fts MATCH fts5_query(?) AND rowid <= 200 ORDER BY 2, rowid",
            (q,),
        ).fetchall()
        assert [r for r, _ in got] == [r for r, _ in old[q]]
    assert dict(conn.execute("SELECT k, v FROM episodes_fts_config")) == {
        "automerge": 0,
        "crisismerge": 16,
        "usermerge": 7,
        "version": 4,
    }
    assert (
        want
        and set(
            match(conn, conn.execute("SELECT fts5_query('パスワード', 'and')").fetchall()[0][0])
        )
        >= want
    )
    fresh_index_agrees(conn, ["パスワード", "cat", "the 17", "备份"])


# ---------------------------------------------------------------- a multilingual model by name

#: the multilingual model docs/languages.md suggests, named as the docs name it
MULTILINGUAL = "hf:hdrrayan/multilingual-e5-small-gguf/multilingual-e5-small-f16.gguf"


def test_a_model_named_hf_embeds_and_recalls_cjk(tmp_path):
    """The naming path of a multilingual model (--model hf:ORG/REPO/FILE.gguf), with the
    local GGUF file standing in for its download (no network here): the CLI embeds
    Japanese and Chinese memories with it, remembers the name, and recalls by vector and
    keyword."""
    from conftest import SHARED_MODEL, embedding_model, fill_hf_cache

    if embedding_model() is None:
        pytest.skip("needs the embedding model and llama-cpp-python")
    pytest.importorskip("huggingface_hub")
    cache = tmp_path / "cache"
    fill_hf_cache(cache, MULTILINGUAL, SHARED_MODEL)
    env = dict(os.environ, HF_HUB_OFFLINE="1", HF_HUB_CACHE=str(cache))
    env.pop("SQLITE_RRF_MODEL", None)
    db = str(tmp_path / "m.db")
    exe = [os.path.join(os.path.dirname(os.path.realpath(os.sys.executable)), "sqlite-rrf")]
    if not os.path.exists(exe[0]):
        exe = [os.sys.executable, "-m", "sqlite_rrf"]

    def cli(*args: str) -> str:
        r = subprocess.run([*exe, *args], capture_output=True, text=True, env=env, timeout=300)
        assert r.returncode == 0, r.stderr
        return r.stdout

    cli("add", db, "--model", MULTILINGUAL, "Postgresの認証情報はVaultに保存されています")
    cli("add", db, "--model", MULTILINGUAL, "每天晚上备份数据库")
    out = cli("recall", db, "--model", MULTILINGUAL, "备份")
    assert "每天晚上备份数据库" in out.split("\n")[1] and "vector #" in out
    with Store(db, readonly=True) as s:
        remembered = s.conn.execute(
            "SELECT value FROM rrf_meta WHERE key = 'embedding_model'"
        ).fetchall()
        assert remembered and MULTILINGUAL in str(remembered[0][0])
        assert s.conn.execute(
            "SELECT count(*) FROM episodes WHERE embedding IS NOT NULL"
        ).fetchall() == [(2,)]


def test_a_long_migration_says_how_long_on_a_terminal(monkeypatch):
    """migrate() reports a running migration on a terminal's stderr (every
    PROGRESS_EVERY_S seconds; 0 here so that every progress callback reports)."""
    import io

    from sqlite_rrf.core import migrations as mig

    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    conn = apsw.Connection(":memory:")
    sqlite_rrf.load(conn)
    migrate(conn, [m for m in available() if m.version < 11])
    with conn:
        conn.executemany(
            "INSERT INTO episodes(id, content) VALUES (?, ?)",
            [(f"e{i}", f"memory {i} パスワード{i}") for i in range(3000)],
        )
    err = Tty()
    monkeypatch.setattr(mig, "PROGRESS_EVERY_S", 0.0)
    monkeypatch.setattr(mig.sys, "stderr", err)
    assert migrate(conn, [m for m in available() if m.version <= 11]) == [11]
    lines = err.getvalue().splitlines()
    assert lines and all(
        line.startswith("sqlite-rrf: migration 0011_every_script: ") for line in lines
    )
    assert lines[-1].endswith(" s") and "done in" in lines[-1]
    # not a terminal: nothing is printed
    quiet = io.StringIO()
    monkeypatch.setattr(mig.sys, "stderr", quiet)
    conn2 = apsw.Connection(":memory:")
    migrate(conn2)
    assert quiet.getvalue() == ""
