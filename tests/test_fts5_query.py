"""fts5_query(text [, mode]) against hostile inputs on a real FTS5 table
(csrc/fts5q.c Q1..Q6).

The expected outputs are derived from the rules, not from the implementation: a token
is a run of ASCII letters/digits or non-ASCII letters (Q2), each is double-quoted and
joined by " OR " / " AND " (Q1), repeats (ASCII case-insensitive) are dropped (Q4),
no token gives '""' (Q5).
"""

from __future__ import annotations

import re
import string

import apsw
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import sqlite_rrf

DOCS = [
    ("greeting", "hello world"),
    ("shakespeare", "to be or not to be"),
    ("proximity", "the cat sat near the mat"),
    ("logic", "this and that"),
    ("columns", "the title of a book, foo and bar"),
    ("email", "send an e-mail to bob"),
    ("quotes", "he said it's fine"),
    ("running", "she runs every morning"),
    ("accents", "un café pour une naïve"),
    ("cjk", "日本語 テキスト"),
    ("numbers", "version 42 of 3.5"),
    ("fox", "the quick brown fox"),
    ("dog", "the lazy dog"),
]


@pytest.fixture(scope="module")
def db():
    """One FTS5 table (porter unicode61, as the episodes table uses) for the module."""
    c = apsw.Connection(":memory:")
    sqlite_rrf.load(c)
    c.execute("CREATE VIRTUAL TABLE docs USING fts5(title, body, tokenize='porter unicode61')")
    c.executemany("INSERT INTO docs(title, body) VALUES (?, ?)", DOCS)
    yield c
    c.close()


def fq(conn, *args):
    placeholders = ", ".join("?" for _ in args)
    return conn.execute(f"SELECT fts5_query({placeholders})", args).fetchone()[0]


def matches(conn, text, mode=None):
    """Titles of the documents `docs MATCH fts5_query(text[, mode])` finds (raises on a
    syntax error, which is what the tests rule out)."""
    if mode is None:
        rows = conn.execute("SELECT title FROM docs WHERE docs MATCH fts5_query(?) ORDER BY rowid", (text,))
    else:
        rows = conn.execute(
            "SELECT title FROM docs WHERE docs MATCH fts5_query(?, ?) ORDER BY rowid", (text, mode)
        )
    return [r[0] for r in rows]


_ASCII_LOWER = str.maketrans(string.ascii_uppercase, string.ascii_lowercase)


def alower(s: str) -> str:
    """Lower-case ASCII letters only (Q4 compares tokens that way)."""
    return s.translate(_ASCII_LOWER)


def ascii_reference(text: str, joiner: str = " OR ") -> str:
    """Q1, Q2, Q4, Q5 for ASCII text."""
    seen, out = set(), []
    for tok in re.findall(r"[A-Za-z0-9]+", text):
        if tok.lower() not in seen:
            seen.add(tok.lower())
            out.append(tok)
    return joiner.join(f'"{t}"' for t in out) if out else '""'


HOSTILE = [
    "-",
    "/",
    "'",
    '"',
    ":",
    "*",
    "^",
    "(",
    ")",
    "()",
    "(((",
    ")))",
    "+",
    "AND",
    "OR",
    "NOT",
    "NEAR",
    "AND OR NOT NEAR",
    "a AND",
    "OR b",
    "NOT NOT",
    "NEAR(a b)",
    "NEAR(a b, 3)",
    "NEAR/3",
    "title:foo",
    "body:",
    "{a b}:x",
    "{title body}: hello",
    "-title:foo",
    "^hello",
    "hello*",
    "*hello",
    'he said "hi',
    '"unbalanced',
    "'single' 'quotes'",
    "it's",
    "e-mail",
    "a/b/c",
    "path/to/file.txt",
    "C++ && || !",
    "foo:bar:baz",
    "x:",
    ":x",
    "a.b.c",
    "1-2",
    "-1",
    "3.14",
    "@#$%&=~`|\\",
    "\\",
    "[]{}<>",
    "",
    " ",
    "   \t\n\r  ",
    "...",
    "  ...",
    "caf\u00e9 na\u00efve \u00fcber",
    "\u65e5\u672c\u8a9e",
    "\u0440\u0443\u0441\u0441\u043a\u0438\u0439 \u0442\u0435\u043a\u0441\u0442",
    "\u0627\u0644\u0639\u0631\u0628\u064a\u0629",
    "\U0001F600",
    "\U0001F600 hello \U0001F680",
    "\U0001F468\u200d\U0001F469\u200d\U0001F467",  # ZWJ family emoji
    "a\u00a0b",  # no-break space
    "a\u3000b",  # ideographic space
    "a\u200bb",  # zero-width space
    "\u201cquoted\u201d \u2018single\u2019",
    "\uff08fullwidth\uff09",
    "e\u0301",  # combining accent
    "\u0301",  # a lone combining accent
    "\ufeffbom",
    "\ufffd",
    "nul\x00inside",
    "\x00",
    "\x01\x02\x03",
    "NEAR(\"a\" \"b\")",
    '"" OR ""',
    "* OR *",
]


@pytest.mark.parametrize("text", HOSTILE)
@pytest.mark.parametrize("mode", [None, "or", "and", "AND"])
def test_Q2_Q3_hostile_inputs_match_without_error(db, text, mode):
    expr = fq(db, text) if mode is None else fq(db, text, mode)
    assert isinstance(expr, str)
    matches(db, text, mode)  # must not raise
    # the expression is a list of quoted tokens, none of which contains a quote
    assert re.fullmatch(r'""|"[^"]+"( (OR|AND) "[^"]+")*', expr), expr


@pytest.mark.parametrize("text", [t for t in HOSTILE if t.isascii()])
def test_Q1_Q2_Q4_Q5_hostile_ascii_inputs_give_the_reference_expression(db, text):
    assert fq(db, text) == ascii_reference(text)
    assert fq(db, text, "and") == ascii_reference(text, " AND ")


@pytest.mark.parametrize(
    "blob_hex",
    ["ff", "80", "c3", "c328", "e282", "f0908c", "61ff62", "61c362", "eda080", "f4908080", "c0af", "fe ff".replace(" ", "")],
)
def test_Q2_invalid_utf8_separates_tokens(db, blob_hex):
    raw = bytes.fromhex(blob_hex)
    expr = db.execute("SELECT fts5_query(CAST(? AS TEXT))", (raw,)).fetchone()[0]
    # the ASCII letters around the bad bytes are the tokens; the bad bytes never reach FTS5
    want = ascii_reference(bytes(b if b < 0x80 else 0x20 for b in raw).decode())
    assert expr == want
    db.execute("SELECT count(*) FROM docs WHERE docs MATCH fts5_query(CAST(? AS TEXT))", (raw,)).fetchall()


# ---------------------------------------------------------------- Q1: exact outputs, modes


@pytest.mark.parametrize(
    "text,want",
    [
        ("hello world", '"hello" OR "world"'),
        ("hello", '"hello"'),
        ("  hello   world  ", '"hello" OR "world"'),
        ("hello-world", '"hello" OR "world"'),
        ("title:foo", '"title" OR "foo"'),
        ("{a b}:x", '"a" OR "b" OR "x"'),
        ("NEAR(a b)", '"NEAR" OR "a" OR "b"'),
        ("a AND b OR c NOT d", '"a" OR "AND" OR "b" OR "OR" OR "c" OR "NOT" OR "d"'),
        ("it's", '"it" OR "s"'),
        ("foo*", '"foo"'),
        ("^foo", '"foo"'),
        ('"quoted phrase"', '"quoted" OR "phrase"'),
        ("caf\u00e9 na\u00efve", '"caf\u00e9" OR "na\u00efve"'),
        ("\u65e5\u672c\u8a9e", '"\u65e5\u672c\u8a9e"'),
        ("x\U0001F600y", '"x" OR "y"'),
        ("a\u00a0b", '"a" OR "b"'),
        ("a\u3000b", '"a" OR "b"'),
        ("nul\x00inside", '"nul" OR "inside"'),
        ("abc123 123abc", '"abc123" OR "123abc"'),
    ],
)
def test_Q1_Q2_expected_expressions(db, text, want):
    assert fq(db, text) == want


def test_Q1_and_mode_and_case_insensitive_mode(db):
    assert fq(db, "hello world", "and") == '"hello" AND "world"'
    for mode in ("and", "AND", "And", "aNd"):
        assert fq(db, "quick fox", mode) == '"quick" AND "fox"'
    for mode in ("or", "OR", "Or", "oR"):
        assert fq(db, "quick fox", mode) == '"quick" OR "fox"'
    assert fq(db, "quick fox", None) == '"quick" OR "fox"'  # NULL mode: the default
    assert matches(db, "quick dog") == ["fox", "dog"]
    assert matches(db, "quick dog", "and") == []
    assert matches(db, "quick fox", "and") == ["fox"]
    assert matches(db, "fox quick", "AND") == ["fox"]


@pytest.mark.parametrize("mode_sql", ["'xor'", "''", "'and '", "' or'", "'ORR'", "'an'", "1", "0", "1.5", "x'616e64'", "'o'"])
def test_Q6_bad_mode_is_an_error(db, mode_sql):
    with pytest.raises(apsw.SQLError, match="^" + re.escape("fts5_query: mode must be 'or' or 'and'") + "$"):
        db.execute(f"SELECT fts5_query('hello', {mode_sql})").fetchall()


def test_Q6_blob_text_is_an_error(db):
    for sql in ("SELECT fts5_query(x'68656c6c6f')", "SELECT fts5_query(zeroblob(3), 'and')", "SELECT fts5_query(x'')"):
        with pytest.raises(apsw.SQLError, match="^" + re.escape("fts5_query: text must be TEXT, got BLOB") + "$"):
            db.execute(sql).fetchall()


def test_Q6_null_gives_null(db):
    assert fq(db, None) is None
    assert fq(db, None, "and") is None
    assert db.execute("SELECT typeof(fts5_query(NULL))").fetchone()[0] == "null"
    # a NULL mode means the default, even for NULL text
    assert fq(db, None, None) is None


def test_Q6_numbers_are_read_as_text(db):
    assert db.execute("SELECT fts5_query(42)").fetchone()[0] == '"42"'
    assert db.execute("SELECT fts5_query(-7)").fetchone()[0] == '"7"'
    assert db.execute("SELECT fts5_query(3.5)").fetchone()[0] == '"3" OR "5"'
    assert db.execute("SELECT fts5_query(1e100)").fetchone()[0] == ascii_reference(
        db.execute("SELECT CAST(1e100 AS TEXT)").fetchone()[0]
    )
    assert matches(db, 42) == ["numbers"]


# ---------------------------------------------------------------- Q3: keywords are words


@pytest.mark.parametrize(
    "text,title",
    [("NOT", "shakespeare"), ("not", "shakespeare"), ("OR", "shakespeare"), ("NEAR", "proximity"), ("AND", "logic")],
)
def test_Q3_keywords_are_searched_as_words(db, text, title):
    assert fq(db, text) == f'"{text}"'
    assert title in matches(db, text)


def test_Q3_column_filter_syntax_is_not_a_filter(db):
    # "title:foo" is the word "title" or the word "foo", anywhere
    assert matches(db, "title:foo") == ["columns"]
    assert matches(db, "greeting:hello") == ["greeting"]  # no such column: would be an FTS5 error
    assert matches(db, "{title body}:quick") == ["columns", "fox"]


def test_Q2_punctuation_splits_and_stemming_still_applies(db):
    assert matches(db, "e-mail") == ["email"]
    assert matches(db, "it's") == ["quotes"]
    assert matches(db, "running!!") == ["running"]  # porter: running -> run <- runs
    assert matches(db, "CAF\u00c9") == ["accents"]  # quoting keeps unicode61's case folding
    assert matches(db, "caf\u00e9") == ["accents"]
    assert matches(db, "\u65e5\u672c\u8a9e") == ["cjk"]


# ---------------------------------------------------------------- Q4: repeats


def test_Q4_repeated_tokens_appear_once(db):
    assert fq(db, "the cat THE Cat the") == '"the" OR "cat"'
    assert fq(db, "Hello hello HELLO world", "and") == '"Hello" AND "world"'
    assert fq(db, "a a a a a") == '"a"'
    assert fq(db, "ab abc ab abcd abc") == '"ab" OR "abc" OR "abcd"'
    # non-ASCII letters are compared byte for byte
    assert fq(db, "\u00e9t\u00e9 \u00c9T\u00c9 \u00e9t\u00e9") == '"\u00e9t\u00e9" OR "\u00c9T\u00c9"'


def test_Q4_repeats_do_not_count_twice_in_bm25(db):
    once = db.execute(
        "SELECT bm25(docs) FROM docs WHERE docs MATCH fts5_query('fox') ORDER BY rowid"
    ).fetchall()
    many = db.execute(
        "SELECT bm25(docs) FROM docs WHERE docs MATCH fts5_query('fox FOX Fox fox') ORDER BY rowid"
    ).fetchall()
    assert once == many


# ---------------------------------------------------------------- Q5: no tokens


@pytest.mark.parametrize("text", ["", " ", "*", "  ...", "-", "()", '"', "'", "^", ":", "\U0001F600", "\u3000", "\x00", "+-*/"])
def test_Q5_tokenless_text_matches_nothing(db, text):
    assert fq(db, text) == '""'
    assert fq(db, text, "and") == '""'
    assert matches(db, text) == []
    assert db.execute("SELECT count(*) FROM docs").fetchone()[0] == len(DOCS)


# ---------------------------------------------------------------- big inputs


def test_Q2_Q4_one_megabyte_of_text(db):
    vocab = [f"word{i}" for i in range(1000)]
    words = [vocab[(i * 7919) % 1000] for i in range(110_000)]
    text = " -:*\"' ".join(words)
    assert len(text) > 1_000_000
    expr = fq(db, text)
    assert expr == " OR ".join(f'"{w}"' for w in dict.fromkeys(words))
    matches(db, text)
    matches(db, text, "and")


def test_Q7_hundred_thousand_distinct_tokens_keep_the_first_thousand(db):
    """FTS5 parses an OR of n phrases in O(n^2) time (about a minute for 100,000), so
    only the first 1,000 distinct tokens are kept and MATCH stays fast."""
    words = [f"t{i}x" for i in range(100_000)]
    text = " ".join(words[:500]) + " t5x T5X hello " + " ".join(words[500:])
    kept = words[:500] + ["hello"] + words[500:999]
    assert fq(db, text) == " OR ".join(f'"{w}"' for w in kept)
    assert fq(db, text, "and") == " AND ".join(f'"{w}"' for w in kept)
    assert matches(db, text) == ["greeting"]
    assert matches(db, text, "and") == []
    late = " ".join(words[:1000]) + " hello"  # 'hello' is token 1,001: dropped
    assert "hello" not in fq(db, late) and matches(db, late) == []


def test_Q2_one_huge_token(db):
    text = "a" * 1_000_000
    assert fq(db, text) == '"' + text + '"'
    assert matches(db, text) == []
    assert fq(db, "\u00e9" * 300_000) == '"' + "\u00e9" * 300_000 + '"'


# ---------------------------------------------------------------- hypothesis


@pytest.fixture(scope="module")
def hdb(db):
    return db


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(max_size=60), st.sampled_from([None, "or", "and", "AND", "Or"]))
def test_Q1_Q2_Q5_property_any_text_matches_without_error(hdb, text, mode):
    expr = fq(hdb, text) if mode is None else fq(hdb, text, mode)
    joiner = " AND " if (mode or "or").lower() == "and" else " OR "
    matches(hdb, text, mode)
    if expr == '""':
        assert not re.search(r"[A-Za-z0-9]", text)  # every ASCII letter or digit is in a token
        return
    tokens = expr[1:-1].split('"' + joiner + '"')
    assert len(tokens) == len({alower(t) for t in tokens})  # Q4 (ASCII case only)
    for t in tokens:
        assert t and t in text  # each token is a piece of the text
        assert '"' not in t and not re.search(r"[\x00-\x2f\x3a-\x40\x5b-\x60\x7b-\x7f]", t)
    # every ASCII alphanumeric run of the text is covered by some token
    for run in re.findall(r"[A-Za-z0-9]+", text):
        assert any(alower(run) in alower(t) for t in tokens)


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.characters(max_codepoint=127), max_size=80))
def test_Q1_Q2_Q4_property_ascii_text_equals_reference(hdb, text):
    assert fq(hdb, text) == ascii_reference(text)
    assert fq(hdb, text, "and") == ascii_reference(text, " AND ")


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=40))
def test_Q2_property_any_bytes_as_text_match_without_error(hdb, raw):
    expr = hdb.execute("SELECT fts5_query(CAST(? AS TEXT))", (raw,)).fetchone()[0]
    hdb.execute("SELECT count(*) FROM docs WHERE docs MATCH fts5_query(CAST(? AS TEXT))", (raw,)).fetchall()
    assert re.fullmatch(r'""|"[^"]+"( OR "[^"]+")*', expr)
