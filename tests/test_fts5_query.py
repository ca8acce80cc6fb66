"""fts5_query(text [, mode [, stopwords [, tokenize]]]) against hostile inputs on a
real FTS5 table (csrc/fts5q.c Q1..Q15).

The expected outputs are derived from the rules, not from the implementation: a token
is a run of ASCII letters/digits or non-ASCII letters (Q2), each is double-quoted and
joined by " OR " / " AND " (Q1), repeats (ASCII case-insensitive) are dropped (Q4),
no token gives '""' (Q5). With stopwords (Q8..Q12), a plain-Python reference prunes the
tokens whose single term -- as real FTS5 tokenizes it, read back through an fts5vocab
table built with the same tokenize option -- is a stopword.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import string
import subprocess

import apsw
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

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
        rows = conn.execute(
            "SELECT title FROM docs WHERE docs MATCH fts5_query(?) ORDER BY rowid", (text,)
        )
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
    "\U0001f600",
    "\U0001f600 hello \U0001f680",
    "\U0001f468\u200d\U0001f469\u200d\U0001f467",  # ZWJ family emoji
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
    'NEAR("a" "b")',
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
    [
        "ff",
        "80",
        "c3",
        "c328",
        "e282",
        "f0908c",
        "61ff62",
        "61c362",
        "eda080",
        "f4908080",
        "c0af",
        "fe ff".replace(" ", ""),
    ],
)
def test_Q2_invalid_utf8_separates_tokens(db, blob_hex):
    raw = bytes.fromhex(blob_hex)
    expr = db.execute("SELECT fts5_query(CAST(? AS TEXT))", (raw,)).fetchone()[0]
    # the ASCII letters around the bad bytes are the tokens; the bad bytes never reach FTS5
    want = ascii_reference(bytes(b if b < 0x80 else 0x20 for b in raw).decode())
    assert expr == want
    db.execute(
        "SELECT count(*) FROM docs WHERE docs MATCH fts5_query(CAST(? AS TEXT))", (raw,)
    ).fetchall()


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
        ("\u65e5\u672c\u8a9e", '"\u65e5\u672c" OR "\u672c\u8a9e"'),  # Q16: bigrams
        ("x\U0001f600y", '"x" OR "y"'),
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


@pytest.mark.parametrize(
    "mode_sql",
    ["'xor'", "''", "'and '", "' or'", "'ORR'", "'an'", "1", "0", "1.5", "x'616e64'", "'o'"],
)
def test_Q6_bad_mode_is_an_error(db, mode_sql):
    with pytest.raises(
        apsw.SQLError,
        match="^" + re.escape("fts5_query: mode must be 'or', 'and' or 'terms'") + "$",
    ):
        db.execute(f"SELECT fts5_query('hello', {mode_sql})").fetchall()


def test_Q6_blob_text_is_an_error(db):
    for sql in (
        "SELECT fts5_query(x'68656c6c6f')",
        "SELECT fts5_query(zeroblob(3), 'and')",
        "SELECT fts5_query(x'')",
    ):
        with pytest.raises(
            apsw.SQLError, match="^" + re.escape("fts5_query: text must be TEXT, got BLOB") + "$"
        ):
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
    [
        ("NOT", "shakespeare"),
        ("not", "shakespeare"),
        ("OR", "shakespeare"),
        ("NEAR", "proximity"),
        ("AND", "logic"),
    ],
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
    # Q16: a CJK run is searched by its bigrams, which this table (the raw run, not
    # migration 0011's segmentation) does not hold
    assert matches(db, "\u65e5\u672c\u8a9e") == []


# ---------------------------------------------------------------- Q4: repeats


def test_Q4_repeated_tokens_appear_once(db):
    assert fq(db, "the cat THE Cat the") == '"the" OR "cat"'
    assert fq(db, "Hello hello HELLO world", "and") == '"Hello" AND "world"'
    assert fq(db, "a a a a a") == '"a"'
    assert fq(db, "ab abc ab abcd abc") == '"ab" OR "abc" OR "abcd"'
    # non-ASCII letters are compared byte for byte
    assert (
        fq(db, "\u00e9t\u00e9 \u00c9T\u00c9 \u00e9t\u00e9") == '"\u00e9t\u00e9" OR "\u00c9T\u00c9"'
    )


def test_Q4_repeats_do_not_count_twice_in_bm25(db):
    once = db.execute(
        "SELECT bm25(docs) FROM docs WHERE docs MATCH fts5_query('fox') ORDER BY rowid"
    ).fetchall()
    many = db.execute(
        "SELECT bm25(docs) FROM docs WHERE docs MATCH fts5_query('fox FOX Fox fox') ORDER BY rowid"
    ).fetchall()
    assert once == many


# ---------------------------------------------------------------- Q5: no tokens


@pytest.mark.parametrize(
    "text",
    ["", " ", "*", "  ...", "-", "()", '"', "'", "^", ":", "\U0001f600", "\u3000", "\x00", "+-*/"],
)
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
    hdb.execute(
        "SELECT count(*) FROM docs WHERE docs MATCH fts5_query(CAST(? AS TEXT))", (raw,)
    ).fetchall()
    assert re.fullmatch(r'""|"[^"]+"( OR "[^"]+")*', expr)


# ================================================================ stopwords (Q8..Q13)

ASCII_WS = re.compile(r"[ \t\n\v\f\r]+")


def sql_literal(s: str) -> str:
    return "'" + s.replace("'", "''") + "'"


def stopset(stopwords: str) -> set:
    """Q8: the terms, separated by ASCII whitespace only."""
    return {w for w in ASCII_WS.split(stopwords) if w}


def expr_tokens(expr: str) -> list:
    """The tokens of an fts5_query() expression ('""' has none)."""
    if expr == '""':
        return []
    return re.findall(r'"([^"]*)"', expr)


def join_tokens(tokens, joiner=" OR ") -> str:
    return joiner.join(f'"{t}"' for t in tokens) if tokens else '""'


class FtsTerms:
    """The terms real FTS5 makes of a token under a tokenize option: each token is a
    row of an FTS5 table made with that option, read back through fts5vocab('instance').
    Independent of the extension (its own connection; FTS5 parses the option)."""

    def __init__(self):
        self.conn = apsw.Connection(":memory:")
        self.tables = {}
        self.cache = {}

    def _table(self, spec):
        if spec is not None and not spec.strip(" \t\n\v\f\r"):
            spec = None  # '' or whitespace: FTS5's default, as Q9 says
        if spec not in self.tables:
            n = len(self.tables)
            opt = "" if spec is None else f", tokenize={sql_literal(spec)}"
            self.conn.execute(
                f"CREATE VIRTUAL TABLE ref{n} USING fts5(x{opt});"
                f"CREATE VIRTUAL TABLE ref{n}_v USING fts5vocab(ref{n}, 'instance')"
            )
            self.tables[spec] = n
        return self.tables[spec]

    def terms(self, spec, tokens):
        todo = [t for t in dict.fromkeys(tokens) if (spec, t) not in self.cache]
        if todo:
            n = self._table(spec)
            got = {i: [] for i in range(1, len(todo) + 1)}
            with self.conn:
                self.conn.execute(f"DELETE FROM ref{n}")
                self.conn.executemany(
                    f"INSERT INTO ref{n}(rowid, x) VALUES (?, ?)", list(enumerate(todo, 1))
                )
                for doc, term in self.conn.execute(
                    f"SELECT doc, term FROM ref{n}_v ORDER BY doc, offset"
                ):
                    got[doc].append(term)
            for i, t in enumerate(todo, 1):
                self.cache[(spec, t)] = got[i]
        return [self.cache[(spec, t)] for t in tokens]


@pytest.fixture(scope="module")
def fts_terms():
    ref = FtsTerms()
    yield ref
    ref.conn.close()


def pruned_reference(ref: FtsTerms, tokens, stopwords, spec, joiner=" OR ", cap=1000) -> str:
    """Q10..Q12 in plain Python: drop a token whose terms are exactly one stopword;
    none when all would go; then keep the first `cap`."""
    stops = stopset(stopwords or "")
    if not stops:
        return join_tokens(tokens[:cap], joiner)
    kept = [
        t
        for t, terms in zip(tokens, ref.terms(spec, tokens))
        if not (len(terms) == 1 and terms[0] in stops)
    ]
    return join_tokens((kept or tokens)[:cap], joiner)


def test_reference_terms_are_fts5s(fts_terms):
    """The reference itself: porter stems, case folding, diacritics, trigrams."""
    assert fts_terms.terms("porter unicode61", ["The", "Studies", "running", "axb"]) == [
        ["the"],
        ["studi"],
        ["run"],
        ["axb"],
    ]
    assert fts_terms.terms(None, ["Studies", "\u00dcber"]) == [["studies"], ["uber"]]
    assert fts_terms.terms("unicode61 remove_diacritics 0", ["\u00dcber"]) == [["\u00fcber"]]
    assert fts_terms.terms("trigram", ["hello", "ab", "ABC"]) == [
        ["hel", "ell", "llo"],
        [],
        ["abc"],
    ]
    assert fts_terms.terms("unicode61 separators 'x'", ["axb"]) == [["a", "b"]]


# ---------------------------------------------------------------- Q8: no stopwords, no change

NO_STOPWORDS = [None, "", " ", " \t\n\v\f\r "]


@pytest.mark.parametrize("stopwords", NO_STOPWORDS)
@pytest.mark.parametrize(
    "tokenize", [None, "porter unicode61", "", "no_such_tokenizer", "'unterminated", "a\x00b"]
)
def test_Q8_empty_stopwords_change_nothing_and_touch_no_tokenizer(db, stopwords, tokenize):
    for text in HOSTILE + ["the study of cats", "The the THE cat"]:
        for mode in ("or", "and"):
            want = fq(db, text, mode)
            assert fq(db, text, mode, stopwords) == want
            assert fq(db, text, mode, stopwords, tokenize) == want


def test_Q8_empty_stopwords_need_no_fts5():
    """With fts5() shadowed (so that SELECT fts5(?1) hands back no fts5_api), calls
    without stopwords still work; with stopwords they fail naming the function (Q13)."""
    c = apsw.Connection(":memory:")
    sqlite_rrf.load(c)
    c.create_scalar_function("fts5", lambda p: None, 1)
    assert fq(c, "the cat", "or", "", "porter unicode61") == '"the" OR "cat"'
    assert fq(c, "the cat", "or", None, "xyz") == '"the" OR "cat"'
    assert fq(c, "the cat", "and", "  \n") == '"the" AND "cat"'
    with pytest.raises(
        apsw.SQLError,
        match="^" + re.escape("fts5_query: stopwords need FTS5, which this SQLite lacks") + "$",
    ):
        fq(c, "the cat", "or", "the")
    with pytest.raises(
        apsw.SQLError,
        match="^" + re.escape("fts5_query: stopwords need FTS5, which this SQLite lacks") + "$",
    ):
        fq(c, "the cat", "or", "the", "porter unicode61")
    assert c.execute("SELECT 1").fetchall() == [(1,)]
    c.close()


def test_Q13_fts5_denied_by_an_authorizer_is_a_named_error():
    c = apsw.Connection(":memory:")
    sqlite_rrf.load(c)

    def deny_fts5(op, p1, p2, dbname, trigger):
        return apsw.SQLITE_DENY if op == apsw.SQLITE_FUNCTION and p2 == "fts5" else apsw.SQLITE_OK

    c.authorizer = deny_fts5
    with pytest.raises(
        apsw.SQLError,
        match=err_re("fts5_query: cannot reach FTS5: not authorized to use function: fts5"),
    ):
        fq(c, "the cat", "or", "the")
    assert fq(c, "the cat", "or", "") == '"the" OR "cat"'  # Q8: not needed without stopwords
    c.authorizer = None
    assert fq(c, "the cat", "or", "the") == '"cat"'
    c.close()


def test_Q8_unicode_spaces_are_not_separators(db):
    """Only ASCII whitespace separates stopwords: a no-break space is part of a term, so
    it is a (useless) stopword and pruning -- and the tokenizer -- are in play."""
    assert fq(db, "the cat", "or", "\u00a0", None) == '"the" OR "cat"'
    with pytest.raises(apsw.SQLError, match="tokenizer 'xyz' " + NOT_BUILTIN):
        fq(db, "the cat", "or", "\u00a0", "xyz")
    assert fq(db, "the cat", "or", "the\u00a0cat") == '"the" OR "cat"'  # one term, neither word
    assert fq(db, "the cat dog", "or", "the\tcat\v\fx") == '"dog"'


# ---------------------------------------------------------------- Q10: pruning, exact cases


@pytest.mark.parametrize(
    "text,stopwords,tokenize,want",
    [
        ("the study of cats", "the of", "porter unicode61", '"study" OR "cats"'),
        ("the study of cats", "the of studi", "porter unicode61", '"cats"'),
        (
            "The Studies OF Cats",
            "the of studi",
            "porter unicode61",
            '"Cats"',
        ),  # case folded, stemmed
        (
            "the studies of cats",
            "studies",
            "porter unicode61",
            '"the" OR "studies" OR "of" OR "cats"',
        ),  # stems only
        (
            "the studies of cats",
            "studies",
            None,
            '"the" OR "of" OR "cats"',
        ),  # unicode61: no stemming
        ("the studies of cats", "studies", "", '"the" OR "of" OR "cats"'),  # '' is the default
        ("the studies of cats", "the", "  porter\tunicode61\n", '"studies" OR "of" OR "cats"'),
        ("\u00dcber alles", "uber", None, '"alles"'),  # remove_diacritics 1 by default
        ("\u00dcber alles", "uber", "unicode61 remove_diacritics 0", '"\u00dcber" OR "alles"'),
        ("\u00dcber alles", "\u00fcber", "unicode61 remove_diacritics 0", '"alles"'),
        (
            "the cat",
            "THE",
            "porter unicode61",
            '"the" OR "cat"',
        ),  # byte comparison: terms are lower-case
        ("the the THE cat of", "the of", "porter unicode61", '"cat"'),  # Q4 first, then Q10
        ("axb a b", "a", "unicode61 separators 'x'", '"axb" OR "b"'),  # axb yields 2 terms: kept
        ("hello abc ABC ab", "abc ab", "trigram", '"hello" OR "ab"'),  # ab yields no term: kept
        ("hello abc xyz", "hel ell llo", "trigram", '"hello" OR "abc" OR "xyz"'),  # 3 terms: kept
    ],
)
def test_Q10_exact_cases(db, text, stopwords, tokenize, want):
    assert fq(db, text, "or", stopwords, tokenize) == want
    assert fq(db, text, "and", stopwords, tokenize) == want.replace(" OR ", " AND ")
    if tokenize is None:
        assert fq(db, text, None, stopwords) == want  # three arguments: the default tokenizer
    matches(db, text)


def test_Q10_and_mode_prunes_alike_and_matches(db):
    assert fq(db, "the quick fox", "and", "the", "porter unicode61") == '"quick" AND "fox"'
    rows = db.execute(
        "SELECT title FROM docs WHERE docs MATCH fts5_query('the quick fox', 'and', 'the', 'porter unicode61')"
    ).fetchall()
    assert rows == [("fox",)]
    # unpruned, 'the' must be in the row too; pruned, it need not be
    assert (
        db.execute(
            "SELECT count(*) FROM docs WHERE docs MATCH fts5_query('the quick email', 'and')"
        ).fetchone()[0]
        == 0
    )
    assert (
        db.execute(
            "SELECT count(*) FROM docs WHERE docs MATCH fts5_query('the lazy', 'and', 'the', 'porter unicode61')"
        ).fetchone()[0]
        == 1
    )


@pytest.mark.parametrize(
    "tokenize,stopwords,want",
    [
        # quoted arguments, FTS5's quoting (the quote doubled inside)
        ("unicode61 separators 'x'", "a", '"axb" OR "b" OR "ayb"'),
        ('unicode61 separators "x"', "a", '"axb" OR "b" OR "ayb"'),
        ("unicode61 separators'x'", "a", '"axb" OR "b" OR "ayb"'),  # a quote starts a word
        ("unicode61 separators 'x''y'", "a", '"axb" OR "b" OR "ayb"'),  # separators x, ' and y
        ('unicode61 separators "x""y"', "a", '"axb" OR "b" OR "ayb"'),
        ("unicode61 separators 'xy'", "a", '"axb" OR "b" OR "ayb"'),
        ("'unicode61' 'separators' 'y'", "a", '"axb" OR "b" OR "ayb"'),
        ("unicode61 separators y", "a", '"axb" OR "b" OR "ayb"'),
        ("unicode61", "a", '"axb" OR "b" OR "ayb"'),
        ("unicode61", "axb", '"a" OR "b" OR "ayb"'),
        ("unicode61 separators 'x'", "axb", '"axb" OR "a" OR "b" OR "ayb"'),
        # a porter chain, quoted or bare
        ('"porter" "unicode61"', "axb b", '"a" OR "ayb"'),
        ("'porter'unicode61 remove_diacritics 2", "axb b", '"a" OR "ayb"'),
        ("porter'unicode61' 'remove_diacritics'\"2\"", "axb b", '"a" OR "ayb"'),
    ],
)
def test_Q9_tokenize_specs_with_quoted_arguments(db, fts_terms, tokenize, stopwords, want):
    text = "axb a b ayb"
    assert fq(db, text, "or", stopwords, tokenize) == want


@pytest.mark.parametrize(
    "tokenize",
    [
        None,
        "unicode61",
        "porter unicode61",
        "porter",
        "ascii",
        "porter ascii",
        "unicode61 remove_diacritics 0",
        "unicode61 remove_diacritics 2",
        "unicode61 separators 'ae'",
        "unicode61 tokenchars '-_'",
        "trigram",
        "trigram case_sensitive 1",
        "trigram remove_diacritics 1",
        "porter 'unicode61' 'remove_diacritics' '2'",
    ],
)
def test_Q10_against_the_reference_on_the_hostile_texts(db, fts_terms, tokenize):
    words = [
        "the",
        "of",
        "studi",
        "a",
        "b",
        "e",
        "hel",
        "ell",
        "llo",
        "abc",
        "cafe",
        "caf\u00e9",
        "uber",
        "\u00fcber",
        "not",
        "and",
        "or",
        "near",
        "t",
        "s",
        "it",
        "hello",
        "mail",
    ]
    stopwords = " ".join(words)
    for text in HOSTILE + [
        "the studies of the hello world",
        "e-mail it's CAF\u00c9 \u00dcber",
        "a b c d",
    ]:
        tokens = expr_tokens(fq(db, text))
        for mode, joiner in (("or", " OR "), ("and", " AND ")):
            assert fq(db, text, mode, stopwords, tokenize) == pruned_reference(
                fts_terms, tokens, stopwords, tokenize, joiner
            ), (text, tokenize)


# ---------------------------------------------------------------- Q10..Q12: property


VOCAB = [
    "the",
    "The",
    "THE",
    "of",
    "Of",
    "a",
    "and",
    "AND",
    "or",
    "not",
    "NEAR",
    "study",
    "studies",
    "Studies",
    "running",
    "runs",
    "cat",
    "cats",
    "caf\u00e9",
    "CAF\u00c9",
    "\u00fcber",
    "\u00dcber",
    "na\u00efve",
    "hello",
    "abc",
    "ab",
    "x",
    "42",
    "3",
    "\u65e5\u672c\u8a9e",
    "\u0440\u0443\u0441",
    "e",
    "mail",
]
STEMS = [
    "the",
    "of",
    "a",
    "and",
    "or",
    "not",
    "near",
    "studi",
    "study",
    "studies",
    "run",
    "running",
    "cat",
    "cats",
    "cafe",
    "caf\u00e9",
    "uber",
    "\u00fcber",
    "naive",
    "hello",
    "hel",
    "ell",
    "llo",
    "abc",
    "ab",
    "x",
    "42",
    "3",
    "\u65e5\u672c\u8a9e",
    "\u0440\u0443\u0441",
    "e",
    "mail",
    "THE",
    "Of",
]
SPECS = [
    None,
    "unicode61",
    "porter unicode61",
    "porter",
    "ascii",
    "unicode61 remove_diacritics 0",
    "unicode61 remove_diacritics 2",
    "trigram",
    "unicode61 separators 'ae'",
    "'porter' 'ascii'",
    "",
]
SEPARATORS = [" ", "  ", "-", "'", '"', ":", "*", "\u3000", "\n", ". ", "\U0001f600", "/", "(", ")"]

texts = st.lists(
    st.tuples(st.one_of(st.sampled_from(VOCAB), st.text(max_size=6)), st.sampled_from(SEPARATORS)),
    max_size=14,
).map(lambda parts: "".join(w + sep for w, sep in parts))
stopword_lists = st.lists(
    st.one_of(st.sampled_from(STEMS), st.text(max_size=5)), max_size=10
).flatmap(lambda ws: st.sampled_from([" ", "\t", "\n ", "\r\n"]).map(lambda sep: sep.join(ws)))


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(texts, st.sampled_from(["or", "and", None]), stopword_lists, st.sampled_from(SPECS))
def test_Q10_Q11_property_equals_the_reference(hdb, fts_terms, text, mode, stopwords, tokenize):
    joiner = " AND " if mode == "and" else " OR "
    tokens = expr_tokens(fq(hdb, text, mode))
    got = fq(hdb, text, mode, stopwords, tokenize)
    assert got == pruned_reference(fts_terms, tokens, stopwords, tokenize, joiner)
    matches(hdb, text, mode)
    hdb.execute("SELECT count(*) FROM docs WHERE docs MATCH ?", (got,)).fetchall()


# ---------------------------------------------------------------- Q15: mode 'terms'


def terms_reference(ref: FtsTerms, tokens, stopwords, spec):
    """Q15 in plain Python: [quoted token, term] for each token of one term (a stopword,
    when there are stopwords)."""
    stops = stopset(stopwords or "")
    out = []
    for t, terms in zip(tokens, ref.terms(spec, tokens)):
        if len(terms) == 1 and (not stops or terms[0] in stops):
            out.append([f'"{t}"', terms[0]])
    return out


@pytest.mark.parametrize(
    "text,stopwords,tokenize,want",
    [
        (
            "The Studies of cats",
            None,
            "porter unicode61",
            [['"The"', "the"], ['"Studies"', "studi"], ['"of"', "of"], ['"cats"', "cat"]],
        ),
        ("The Studies of cats", "the of", "porter unicode61", [['"The"', "the"], ['"of"', "of"]]),
        (
            "The Studies of cats",
            "",
            "porter unicode61",  # '' is no stopwords (Q8): every token
            [['"The"', "the"], ['"Studies"', "studi"], ['"of"', "of"], ['"cats"', "cat"]],
        ),
        ("the the THE", "the", None, [['"the"', "the"]]),  # Q4, and Q11 does not apply
        ("hello abc ab", None, "trigram", [['"abc"', "abc"]]),  # 3 terms, 1 term, none
        ("axb b", None, "unicode61 separators 'x'", [['"b"', "b"]]),
        ("", None, None, []),
        ("* -- *", "the", "porter", []),
        ("caf\u00e9 \u00dcber", None, None, [['"caf\u00e9"', "cafe"], ['"\u00dcber"', "uber"]]),
    ],
)
def test_Q15_terms_exact_cases(db, text, stopwords, tokenize, want):
    got = fq(db, text, "terms", stopwords, tokenize)
    assert json.loads(got) == want
    assert db.execute("SELECT json_valid(?)", (got,)).fetchone()[0] == 1
    if tokenize in (None, "") and stopwords is None:
        assert fq(db, text, "terms") == got  # one and two arguments: the default tokenizer


def test_Q15_each_phrase_is_a_match_expression_with_the_or_expressions_hits(db):
    text = "The Studies of running cats NOT near"
    for phrase, term in json.loads(fq(db, text, "TERMS", None, "porter unicode61")):
        assert (
            f" {phrase} " in f" {fq(db, text).replace(' OR ', '  ')} "
        )  # quoted as 'or' quotes it
        n = db.execute("SELECT count(*) FROM docs WHERE docs MATCH ?", (phrase,)).fetchone()[0]
        assert (
            n
            == db.execute(
                "SELECT count(*) FROM docs WHERE docs MATCH ?", (f'"{term}"',)
            ).fetchone()[0]
        )
    # through json_each, as the recall statement reads it
    rows = db.execute(
        "SELECT json_extract(value, '$[0]'), json_extract(value, '$[1]') "
        "FROM json_each(fts5_query(?, 'terms', 'the of', 'porter unicode61'))",
        (text,),
    ).fetchall()
    assert rows == [('"The"', "the"), ('"of"', "of")]


def test_Q15_needs_fts5_and_checks_the_spec_even_without_stopwords(db):
    with pytest.raises(apsw.SQLError, match=err_re("fts5_query: tokenizer 'xyz' " + NOT_BUILTIN)):
        fq(db, "a", "terms", None, "xyz")
    with pytest.raises(
        apsw.SQLError, match=err_re("fts5_query: unterminated quote in tokenize ''a'")
    ):
        fq(db, "a", "terms", None, "'a")
    assert fq(db, None, "terms", None, "xyz") is None  # Q6 first


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(texts, stopword_lists, st.sampled_from(SPECS))
def test_Q15_property_equals_the_reference(hdb, fts_terms, text, stopwords, tokenize):
    tokens = expr_tokens(fq(hdb, text))
    got = fq(hdb, text, "terms", stopwords, tokenize)
    assert hdb.execute("SELECT json_valid(?)", (got,)).fetchone()[0] == 1
    assert json.loads(got) == terms_reference(fts_terms, tokens, stopwords, tokenize)
    for phrase, _ in json.loads(got):
        hdb.execute("SELECT count(*) FROM docs WHERE docs MATCH ?", (phrase,)).fetchall()


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=60))
def test_Q15_property_any_bytes_give_valid_json(hdb, raw):
    got = hdb.execute(
        "SELECT fts5_query(CAST(? AS TEXT), 'terms', NULL, 'porter unicode61')", (raw,)
    ).fetchone()[0]
    assert hdb.execute("SELECT json_valid(?)", (got,)).fetchone()[0] == 1


# ---------------------------------------------------------------- Q11: nothing left


@pytest.mark.parametrize("mode,joiner", [("or", " OR "), ("and", " AND ")])
def test_Q11_only_stopwords_keep_every_token(db, mode, joiner):
    for text, stopwords in [
        ("the of THE", "the of"),
        ("The Studies", "the studi"),
        ("the", "the"),
        ("of the -- of: *the*", "the of a an"),
    ]:
        want = fq(db, text, mode)
        assert fq(db, text, mode, stopwords, "porter unicode61") == want
        assert want != '""'
    # the fallback searches: 'the' is in several rows
    got = db.execute(
        "SELECT count(*) FROM docs WHERE docs MATCH fts5_query('the THE', 'or', 'the of', 'porter unicode61')"
    ).fetchone()[0]
    assert got == db.execute("SELECT count(*) FROM docs WHERE docs MATCH 'the'").fetchone()[0] > 0
    assert fq(db, "", mode, "the") == '""'  # Q5 still
    assert fq(db, "-- * --", mode, "the", "porter unicode61") == '""'


# ---------------------------------------------------------------- Q12: cap first, then prune


def test_Q12_the_cap_comes_before_the_pruning(db):
    """The pruned expression is the unpruned one (the first 1000 distinct tokens) without
    the dropped tokens, in the same order: bm25() over the two differs only by them."""
    words = [f"w{i}x" for i in range(2000)]
    stops = " ".join(words[:600])
    text = " ".join(words)
    assert fq(db, text) == join_tokens(words[:1000])
    # 600 of the first 1000 dropped: 400 left, none from beyond the cap
    assert fq(db, text, "or", stops) == join_tokens(words[600:1000])
    assert fq(db, text, "and", stops, "porter unicode61") == join_tokens(words[600:1000], " AND ")
    # stopwords scattered among the first 1000
    stops2 = " ".join(words[0:2000:2])  # the even ones
    assert fq(db, text, "or", stops2) == join_tokens(words[1:1000:2])
    # Q11 under the cap: the first 1000 are all stopwords -> the first 1000 of them
    assert fq(db, text, "or", " ".join(words[:1000])) == join_tokens(words[:1000])
    # a stopword repeated after the cap does not matter
    assert fq(db, text + " w0x W0X", "or", "w0x") == join_tokens(words[1:1000])
    for sw in (stops, stops2, "w999x w5x"):
        pruned, full = expr_tokens(fq(db, text, "or", sw)), expr_tokens(fq(db, text))
        assert pruned == [t for t in full if t in set(pruned)]  # a subsequence


# ---------------------------------------------------------------- Q9, Q13: errors


def err_re(msg):
    return "^" + re.escape(msg) + "$"


#: Q14's message after the name.
NOT_BUILTIN = "is not one of FTS5's built-in unicode61, ascii, porter, trigram"


@pytest.mark.parametrize(
    "sql,msg",
    [
        (
            "SELECT fts5_query('the cat', 'or', x'746865')",
            "fts5_query: stopwords must be TEXT or NULL, got BLOB",
        ),
        (
            "SELECT fts5_query('the cat', 'or', zeroblob(0))",
            "fts5_query: stopwords must be TEXT or NULL, got BLOB",
        ),
        (
            "SELECT fts5_query('the cat', 'or', 1)",
            "fts5_query: stopwords must be TEXT or NULL, got INTEGER",
        ),
        (
            "SELECT fts5_query('the cat', 'or', 1.5)",
            "fts5_query: stopwords must be TEXT or NULL, got REAL",
        ),
        (
            "SELECT fts5_query('the cat', 'or', 1.5, 'porter')",
            "fts5_query: stopwords must be TEXT or NULL, got REAL",
        ),
        (
            "SELECT fts5_query('the cat', 'or', '', x'00')",
            "fts5_query: tokenize must be TEXT or NULL, got BLOB",
        ),
        (
            "SELECT fts5_query('the cat', 'or', NULL, 2)",
            "fts5_query: tokenize must be TEXT or NULL, got INTEGER",
        ),
        (
            "SELECT fts5_query('the cat', 'or', 'the', 2.5)",
            "fts5_query: tokenize must be TEXT or NULL, got REAL",
        ),
        # Q14: only FTS5's built-in tokenizers, also the one porter wraps
        (
            "SELECT fts5_query('the cat', 'or', 'the', 'xyz')",
            "fts5_query: tokenizer 'xyz' " + NOT_BUILTIN,
        ),
        (
            "SELECT fts5_query('the cat', 'or', 'the', 'xyz porter')",
            "fts5_query: tokenizer 'xyz' " + NOT_BUILTIN,
        ),
        (
            "SELECT fts5_query('the cat', 'or', 'the', '''''')",
            "fts5_query: tokenizer '' " + NOT_BUILTIN,
        ),
        (
            "SELECT fts5_query('the cat', 'or', 'the', 'porter xyz')",
            "fts5_query: tokenizer 'xyz' " + NOT_BUILTIN,
        ),
        (
            "SELECT fts5_query('the cat', 'or', 'the', 'porter porter mytok')",
            "fts5_query: tokenizer 'mytok' " + NOT_BUILTIN,
        ),
        (
            "SELECT fts5_query('the cat', 'or', 'the', 'porter tokenchars -')",
            "fts5_query: tokenizer 'tokenchars' " + NOT_BUILTIN,
        ),
        (
            "SELECT fts5_query('the cat', 'or', 'the', 'unicode61x')",
            "fts5_query: tokenizer 'unicode61x' " + NOT_BUILTIN,
        ),
        (
            "SELECT fts5_query('the cat', 'terms', NULL, 'xyz')",
            "fts5_query: tokenizer 'xyz' " + NOT_BUILTIN,
        ),
        (
            "SELECT fts5_query('the cat', 'or', 'the', 'unicode61 remove_diacritics 9')",
            "fts5_query: cannot create the FTS5 tokenizer 'unicode61 remove_diacritics 9' (SQL logic error)",
        ),
        (
            "SELECT fts5_query('the cat', 'or', 'the', 'unicode61 bogus 1')",
            "fts5_query: cannot create the FTS5 tokenizer 'unicode61 bogus 1' (SQL logic error)",
        ),
        (
            "SELECT fts5_query('the cat', 'or', 'the', 'trigram case_sensitive 7')",
            "fts5_query: cannot create the FTS5 tokenizer 'trigram case_sensitive 7' (SQL logic error)",
        ),
        (
            "SELECT fts5_query('the cat', 'or', 'the', 'unicode61 tokenchars ''-_')",
            "fts5_query: unterminated quote in tokenize 'unicode61 tokenchars '-_'",
        ),
        (
            "SELECT fts5_query('the cat', 'or', 'the', '\"porter')",
            "fts5_query: unterminated quote in tokenize '\"porter'",
        ),
        (
            "SELECT fts5_query('the cat', 'or', 'the', 'porter \"x\"\"')",
            'fts5_query: unterminated quote in tokenize \'porter "x""\'',
        ),
        (
            "SELECT fts5_query('the cat', 'or', 'the', '[porter]')",
            "fts5_query: tokenizer '[porter]' " + NOT_BUILTIN,
        ),
        (
            "SELECT fts5_query('the cat', 'or', 'the', 'porter' || char(0) || 'x')",
            "fts5_query: tokenize must not hold a NUL byte",
        ),
        (
            "SELECT fts5_query('the cat', 'and', 'the', trim(replace(hex(zeroblob(65)), '00', 'porter ')))",
            "fts5_query: tokenize has more than 64 words: 'porter porter porter porter port...'",
        ),
        # the spec is checked whenever there are stopwords, even for text without tokens (Q5)
        (
            "SELECT fts5_query('*', 'or', 'the', 'xyz')",
            "fts5_query: tokenizer 'xyz' " + NOT_BUILTIN,
        ),
        # earlier arguments first
        ("SELECT fts5_query(x'00', 'or', 1, 2)", "fts5_query: text must be TEXT, got BLOB"),
        ("SELECT fts5_query('a', 'xor', 1, 2)", "fts5_query: mode must be 'or', 'and' or 'terms'"),
    ],
)
def test_Q8_Q9_errors_name_the_function(db, sql, msg):
    with pytest.raises(apsw.SQLError, match=err_re(msg)):
        db.execute(sql).fetchall()
    assert db.execute("SELECT fts5_query('ok')").fetchone()[0] == '"ok"'


def test_Q6_null_text_is_null_whatever_the_other_arguments(db):
    for args in [
        (None, "or", "the"),
        (None, "or", b"x"),
        (None, "xor", 1, 2),
        (None, None, "the", "xyz"),
    ]:
        assert fq(db, *args) is None


def test_Q9_sixty_four_words_are_allowed(db):
    spec = " ".join(["porter"] * 63 + ["unicode61"])
    assert fq(db, "the running cats", "or", "the run", spec) == '"cats"'


def test_Q9_error_messages_show_hostile_specs_safely(db):
    with pytest.raises(
        apsw.SQLError, match=err_re("fts5_query: unterminated quote in tokenize ''??a'")
    ):
        db.execute("SELECT fts5_query('a', 'or', 'a', CAST(x'27ff0a61' AS TEXT))").fetchall()
    with pytest.raises(
        apsw.SQLError, match=err_re("fts5_query: tokenize must not hold a NUL byte")
    ):
        db.execute(
            "SELECT fts5_query('a', 'or', 'a', CAST(x'ff0a01c3' || zeroblob(100) AS TEXT))"
        ).fetchall()
    with pytest.raises(apsw.SQLError, match=err_re("fts5_query: tokenizer '?a?b' " + NOT_BUILTIN)):
        db.execute("SELECT fts5_query('a', 'or', 'a', CAST(x'ff610162' AS TEXT))").fetchall()
    long_name = "\u00e9" * 100
    with pytest.raises(
        apsw.SQLError, match=err_re(f"fts5_query: tokenizer '{long_name[:16]}...' " + NOT_BUILTIN)
    ):
        fq(db, "a", "or", "a", long_name)


# ---------------------------------------------------------------- Q14: custom tokenizers (apsw)


@pytest.fixture(scope="module")
def pydb():
    """A connection with a Python FTS5 tokenizer 'pytok' that counts its creations and
    calls, and one registered under a built-in tokenizer's name would be the
    application's own doing: 'pytok' is what a database file's view must not reach."""
    c = apsw.Connection(":memory:")
    sqlite_rrf.load(c)
    calls = []

    def factory(con, args):
        calls.append(("create", args))

        def tokenize(utf8, flags, locale):
            calls.append(("tokenize", utf8))
            return [utf8.decode().lower()]

        return tokenize

    c.register_fts5_tokenizer("pytok", factory)
    c.execute("CREATE VIRTUAL TABLE pyt USING fts5(x, tokenize='pytok')")  # FTS5 itself knows it
    c.execute("INSERT INTO pyt VALUES ('the cat')")
    assert calls
    calls.clear()
    yield c, calls
    c.close()


@pytest.mark.parametrize(
    "spec", ["pytok", "PyTok", "porter pytok", "porter porter pytok", "'pytok'"]
)
def test_Q14_a_registered_custom_tokenizer_is_refused_and_never_made(pydb, spec):
    pydb, calls = pydb
    for mode, stop in (("or", "the"), ("and", "the"), ("terms", None)):
        with pytest.raises(
            apsw.SQLError,
            match=err_re("fts5_query: tokenizer 'pytok' " + NOT_BUILTIN)
            if "PyTok" not in spec
            else "tokenizer 'PyTok' ",
        ):
            fq(pydb, "The cat", mode, stop, spec)
    assert calls == []
    assert fq(pydb, "The cat", "or", "the", "porter unicode61") == '"cat"'  # the connection answers


def test_Q14_built_in_names_in_any_case_and_every_porter_chain(db):
    for spec in (
        "UNICODE61",
        "Porter",
        "porter Unicode61 remove_diacritics 2",
        "porter porter",
        "porter ascii",
        "porter trigram",
        "TriGram case_sensitive 1",
        "ascii",
    ):
        assert assert_expr_or_named_error(
            db, "SELECT fts5_query('The cat', 'or', 'the', ?)", (spec,)
        ) in ('"cat"', '"The" OR "cat"'), spec


def test_Q14_Q6_flags_stay_deterministic_and_innocuous_for_every_argument_count():
    """The flags the registration gives (pragma_function_list) and what they allow: with
    trusted_schema off, a view and an index on an expression may call every form."""
    c = apsw.Connection(":memory:")
    sqlite_rrf.load(c)
    det, inn = apsw.SQLITE_DETERMINISTIC, apsw.SQLITE_INNOCUOUS
    rows = c.execute(
        "SELECT narg, flags FROM pragma_function_list WHERE name = 'fts5_query'"
    ).fetchall()
    assert sorted(n for n, _ in rows) == [1, 2, 3, 4]
    assert all(f & det and f & inn for _, f in rows), rows
    c.execute("PRAGMA trusted_schema = OFF")
    c.execute("CREATE TABLE t(x TEXT); INSERT INTO t VALUES ('The Studies of cats')")
    c.execute(
        "CREATE VIEW v AS SELECT fts5_query(x, 'or', 'the of studi', 'porter unicode61') AS q, "
        "fts5_query(x, 'terms', 'the', 'porter unicode61') AS t FROM t"
    )
    assert c.execute("SELECT q, t FROM v").fetchone() == ('"cats"', '[["\\"The\\"","the"]]')
    c.execute("CREATE INDEX ix ON t(fts5_query(x, 'and', 'the', 'porter'))")
    assert c.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    c.close()


# ---------------------------------------------------------------- Q13: per-row calls


def test_Q13_per_row_arguments_and_the_cache(db):
    """A constant stopwords argument is parsed once per statement (sqlite3_set_auxdata);
    per-row tokenize and stopwords values still give each row's own answer."""
    rows = db.execute(
        "SELECT fts5_query(column1, 'or', 'the studi', column2) FROM (VALUES "
        "('the studies cats', 'porter unicode61'), ('the studies cats', 'unicode61'), "
        "('the studies cats', 'porter unicode61'), ('the studies cats', NULL), ('the studies', 'porter'), "
        "('the studies cats', ''))"
    ).fetchall()
    assert [r[0] for r in rows] == [
        '"cats"',
        '"studies" OR "cats"',
        '"cats"',
        '"studies" OR "cats"',
        '"the" OR "studies"',
        '"studies" OR "cats"',
    ]
    rows = db.execute(
        "SELECT fts5_query('the studies cats', 'or', column1, 'porter unicode61') FROM (VALUES "
        "('the'), ('studi'), (''), (NULL), ('cat'), ('the studi cat'), ('the'))"
    ).fetchall()
    assert [r[0] for r in rows] == [
        '"studies" OR "cats"',
        '"the" OR "cats"',
        '"the" OR "studies" OR "cats"',
        '"the" OR "studies" OR "cats"',
        '"the" OR "studies"',
        '"the" OR "studies" OR "cats"',
        '"studies" OR "cats"',
    ]
    # an error on one row, then the next statement is fine
    with pytest.raises(apsw.SQLError, match="tokenizer 'bad' " + NOT_BUILTIN):
        db.execute(
            "SELECT fts5_query('the cat', 'or', 'the', column1) FROM (VALUES ('porter'), ('bad'))"
        ).fetchall()
    stops = " ".join(f"s{i}" for i in range(50_000)) + " the"
    got = db.execute(
        "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 2000) "
        "SELECT count(*), sum(q = '\"cat\"'), sum(q = '\"cat\" OR \"s' || (i + 49000) || '\"') "
        "FROM (SELECT i, fts5_query('the cat s' || (i + 49000), 'or', ?1, 'porter unicode61') AS q FROM n)",
        (stops,),
    ).fetchone()
    assert got == (2000, 999, 1001)  # s49001..s49999 are stopwords, s50000..s51000 are not


# ---------------------------------------------------------------- hostile stopwords / tokenize


def assert_expr_or_named_error(conn, sql, params=()):
    try:
        expr = conn.execute(sql, params).fetchone()[0]
    except apsw.SQLError as e:
        assert str(e).startswith("fts5_query: "), str(e)
        assert len(str(e).encode()) < 128, str(e)  # Q13: SQLite keeps it under a 128-byte limit
        return None
    assert expr is None or re.fullmatch(r'""|"[^"]+"( (OR|AND) "[^"]+")*', expr), expr
    return expr


def test_Q8_huge_and_hostile_stopwords(db):
    text = "the cat sat on the mat with a study of dogs"
    cases = [
        "the " * 2_500_000,  # 10 MB, one distinct term
        " ".join(f"w{i}" for i in range(100_000)) + " the",  # 100,000 stopwords
        "x" * 5_000_000,  # one 5 MB term
        "\x00the\x00 the\x00\x00 cat\x00",  # NULs: part of the terms; "the" is not there
        "\t" * 1_000_000 + "the",
    ]
    want = ['"cat" OR "sat" OR "on" OR "mat" OR "with" OR "a" OR "study" OR "of" OR "dogs"'] * 2 + [
        fq(db, text),
        fq(db, text),
        fq(db, text).replace('"the" OR ', ""),
    ]
    for sw, w in zip(cases, want):
        assert fq(db, text, "or", sw, "porter unicode61") == w
    # invalid UTF-8 in the stopwords, and a stopword with a NUL next to a real one
    for raw in (b"\xff\xfe the \x80", b"the\x00 cat", bytes(range(256)) * 100):
        expr = assert_expr_or_named_error(
            db, "SELECT fts5_query(?1, 'or', CAST(?2 AS TEXT), 'porter unicode61')", (text, raw)
        )
        assert expr is not None
    assert fq(db, text, "or", "the\x00 cat") == fq(db, text).replace('"cat" OR ', "")
    assert db.execute("SELECT 1").fetchall() == [(1,)]


@pytest.mark.parametrize(
    "spec",
    [
        "porter " * 10_000,
        "unicode61 tokenchars '" + "-" * 1_000_000 + "'",
        "unicode61 separators '" + "\u00e9" * 100_000 + "'",
        "'" * 999,
        "'" * 1000,
        "[" * 10,
        "]]]",
        "``````",
        '""""',
        "porter porter porter porter unicode61",
        "trigram " + "x " * 62,
        "\u00e9" * 100_000,
        "\ufeffporter",
        "porter\u00a0unicode61",
        "unicode61 remove_diacritics",
        "unicode61 categories 'L* N* Co'",
        "unicode61 categories 'Zz'",
        "porter trigram",
        "porter porter",
        "ascii tokenchars ''",
        "trigram remove_diacritics 1 case_sensitive 1",
    ],
)
def test_Q9_hostile_tokenize_specs_never_crash(db, spec):
    for text in ("the cat", "", "x" * 10_000, "\u00e9t\u00e9 the"):
        assert_expr_or_named_error(db, "SELECT fts5_query(?, 'or', 'the', ?)", (text, spec))
    assert db.execute("SELECT fts5_query('ok', 'or', 'the', 'porter')").fetchone()[0] == '"ok"'


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.binary(max_size=40),
    st.binary(max_size=40),
    st.one_of(st.none(), st.binary(max_size=30)),
    st.sampled_from(["or", "and"]),
)
def test_Q8_Q9_property_any_bytes_never_crash(hdb, text, stopwords, tokenize, mode):
    expr = assert_expr_or_named_error(
        hdb,
        "SELECT fts5_query(CAST(?1 AS TEXT), ?4, CAST(?2 AS TEXT), CAST(?3 AS TEXT))",
        (text, stopwords, tokenize, mode),
    )
    if expr is not None:
        hdb.execute("SELECT count(*) FROM docs WHERE docs MATCH ?", (expr,)).fetchall()
    assert hdb.execute("SELECT fts5_query('ok')").fetchone()[0] == '"ok"'


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(texts, st.text(max_size=30), st.one_of(st.none(), st.text(max_size=40)))
def test_Q8_Q9_property_any_text_arguments_never_crash(hdb, text, stopwords, tokenize):
    expr = assert_expr_or_named_error(
        hdb, "SELECT fts5_query(?, 'or', ?, ?)", (text, stopwords, tokenize)
    )
    if expr is not None:
        hdb.execute("SELECT count(*) FROM docs WHERE docs MATCH ?", (expr,)).fetchall()


# ---------------------------------------------------------------- end to end: bm25 top-k


def test_pruned_bm25_top_k_equals_the_unpruned(fts_terms):
    """Terms in at least half the rows get FTS5's IDF floor (1e-6): dropping them leaves
    the top rows and their order as they were, and FTS5 scores far fewer rows."""
    c = apsw.Connection(":memory:")
    sqlite_rrf.load(c)
    c.execute(
        "CREATE VIRTUAL TABLE ep USING fts5(content, tokenize='porter unicode61');"
        "CREATE VIRTUAL TABLE ep_v USING fts5vocab(ep, 'row')"
    )
    rows = []
    for i in range(200):
        filler = " ".join(f"item{i}w{j}" for j in range(i % 7 + 1))
        rows.append(f"the notes of the day {filler} and a summary of the week")
    rows[17] = "the indexing of sqlite databases with the fts5 module"
    rows[42] = "sqlite databases and their indexing of the pages"
    rows[99] = "a guide to sqlite"
    rows[123] = "the databases of the world, indexing of the databases"
    rows[150] = "indexing is hard"
    rows[160] = "the sqlite sqlite sqlite shell of the project"
    c.executemany("INSERT INTO ep(rowid, content) VALUES (?, ?)", list(enumerate(rows, 1)))
    n = c.execute("SELECT count(*) FROM ep").fetchone()[0]
    common = [
        t for (t,) in c.execute("SELECT term FROM ep_v WHERE doc * 2 >= ? ORDER BY term", (n,))
    ]
    assert {"the", "of", "note", "dai"} <= set(common)
    stopwords = " ".join(common)
    query = "The indexing of SQLite databases in the notes of the day"
    full = c.execute("SELECT fts5_query(?)", (query,)).fetchone()[0]
    pruned = c.execute(
        "SELECT fts5_query(?, 'or', ?, 'porter unicode61')", (query, stopwords)
    ).fetchone()[0]
    assert pruned == pruned_reference(fts_terms, expr_tokens(full), stopwords, "porter unicode61")
    assert pruned == '"indexing" OR "SQLite" OR "databases" OR "in"'

    def top(expr, k=6):
        return c.execute(
            "SELECT rowid, bm25(ep) FROM ep WHERE ep MATCH ? ORDER BY bm25(ep), rowid LIMIT ?",
            (expr, k),
        ).fetchall()

    t_full, t_pruned = top(full), top(pruned)
    assert [r for r, _ in t_full] == [r for r, _ in t_pruned]
    assert {18, 43, 100, 124, 151, 161} == {r for r, _ in t_pruned}
    for (_, a), (_, b) in zip(t_full, t_pruned):
        assert a == pytest.approx(b, rel=1e-4)
    count = "SELECT count(*) FROM ep WHERE ep MATCH ?"
    assert c.execute(count, (full,)).fetchone()[0] == n
    assert c.execute(count, (pruned,)).fetchone()[0] == 6
    c.close()


# ---------------------------------------------------------------- Debian's sqlite3 shell


def test_sqlite3_shell_runs_three_and_four_argument_calls(tmp_path):
    shell = shutil.which("sqlite3") or (
        "/usr/bin/sqlite3" if os.path.exists("/usr/bin/sqlite3") else None
    )
    if shell is None:
        pytest.skip(
            "the sqlite3 shell is missing: `make system-deps` installs Debian's sqlite3 package"
        )
    script = (
        f".load {sqlite_rrf.loadable_path()}\n"
        "CREATE VIRTUAL TABLE d USING fts5(x, tokenize='porter unicode61');\n"
        "INSERT INTO d(rowid, x) VALUES (1, 'the study of cats'), (2, 'the dog'), (3, 'studies of the past');\n"
        "SELECT fts5_query('The Studies of cats', 'or', 'the of');\n"
        "SELECT fts5_query('The Studies of cats', 'and', 'the of studi', 'porter unicode61');\n"
        "SELECT fts5_query('the of', 'or', 'the of', 'porter unicode61');\n"
        "SELECT fts5_query('axb b', 'or', 'b', 'unicode61 separators ''x''');\n"
        "SELECT group_concat(rowid) FROM d WHERE d MATCH fts5_query('the studies', 'or', 'the of', 'porter unicode61');\n"
        "SELECT fts5_query('x', 'or', 'the', 'xyz');\n"
    )
    r = subprocess.run(
        [shell, "-batch", str(tmp_path / "x.db")],
        input=script,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.stdout.splitlines() == [
        '"Studies" OR "cats"',
        '"cats"',
        '"the" OR "of"',
        '"axb"',
        "1,3",
    ], r.stderr
    assert "fts5_query: tokenizer 'xyz' " + NOT_BUILTIN in r.stderr


def test_Q13_messages_fit_a_128_byte_length_limit():
    """SQLite replaces an error message longer than SQLITE_LIMIT_LENGTH by a generic one
    ('SQL logic error'); quoted specs and names are cut so that every message fits in 128
    bytes (found by fuzz_fts5q)."""
    c = apsw.Connection(":memory:")
    sqlite_rrf.load(c)
    c.limit(apsw.SQLITE_LIMIT_LENGTH, 128)
    long_spec = "porter 'u-terminated\u00bc@=z' =EK" + "\u00e9" * 40
    for spec in [
        long_spec,
        "porter " + "x" * 100,
        "x" * 100,
        "'" + "x" * 100,
        "a " * 63 + "b",
        "unicode61 " + "remove_diacritics " * 3 + "9",
        "\u00e9" * 60,
    ]:
        with pytest.raises(apsw.SQLError) as info:
            c.execute("SELECT fts5_query('the cat', NULL, 'the', ?)", (spec,)).fetchall()
        assert str(info.value).startswith("fts5_query: "), str(info.value)
    c.close()
