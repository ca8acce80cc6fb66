"""rrf_fold, the recall statement's fold of near-duplicates (csrc/fold.c, F1..F4), called
directly through apsw."""

from __future__ import annotations

import json
import math
import struct
from typing import Any, Optional, Sequence

import apsw

import sqlite_rrf

STOP = "the a not rather than is in"


def f32(v: Sequence[float]) -> bytes:
    return struct.pack(f"<{len(v)}f", *v)


def fold(rows: Sequence[Sequence[Any]], collapse: int = 1, cos: float = 0.95) -> Optional[list]:
    """rrf_fold over rows (pos, rowid, id, score, created_at, key, content, embedding,
    usable), fed in the given order."""
    c = apsw.Connection(":memory:")
    sqlite_rrf.load(c)
    c.execute("CREATE TABLE r(pos, rowid_, id, score, created, key, content, emb, usable)")
    c.executemany("INSERT INTO r VALUES (?,?,?,?,?,?,?,?,?)", rows)
    (got,) = c.execute(
        "SELECT rrf_fold(?, ?, ?, pos, rowid_, id, score, created, key, content, emb, usable) "
        "FROM r",
        (collapse, cos, STOP),
    ).fetchone()
    return None if got is None else json.loads(got)


V = f32([1, 0, 0, 0])
V2 = f32([0.99, 0.05, 0, 0])  # cosine 0.9987 with V
W = f32([0, 1, 0, 0])


def test_no_rows_is_null():
    assert fold([]) is None


def test_every_row_its_own_group_without_duplicates_or_collapse():
    rows = [
        (1, 10, "a", 0.9, 100, b"k1", "alpha beta", V, 1),
        (2, 11, "b", 0.8, 200, b"k2", "gamma delta", W, 1),
    ]
    want = [[1, 10, 0.9, []], [2, 11, 0.8, []]]
    assert fold(rows) == want
    same = [(p, r, i, s, c, b"k", t, e, u) for p, r, i, s, c, _, t, e, u in rows]
    assert fold(same, collapse=0) == want  # F2: nothing folds with collapse 0


def test_same_key_folds_into_the_newest_in_the_best_slot_any_order():
    rows = [
        (2, 11, "old", 0.8, 100, b"k", "x", None, 0),
        (1, 10, "mid", 0.9, 200, b"k", "x", None, 0),
        (3, 12, "new", 0.7, 300, b"k", "x", None, 0),
        (4, 13, "other", 0.6, 400, b"j", "y", None, 0),
    ]
    want = [[1, 12, 0.9, ["mid", "old"]], [4, 13, 0.6, []]]
    assert fold(rows) == want
    assert fold(list(reversed(rows))) == want  # F1: pos orders, not the input


def test_texts_compared_when_a_key_is_missing():
    rows = [
        (1, 10, "a", 0.9, 100, None, "  The User  uses\tFish ", None, 0),
        (2, 11, "b", 0.8, 200, b"k", "the user uses fish", None, 0),
        (3, 12, "c", 0.7, 300, None, "the user uses fish!", None, 0),
    ]
    assert fold(rows) == [[1, 11, 0.9, ["a"]], [3, 12, 0.7, []]]


def test_near_duplicates_need_the_cosine_the_same_words_and_usable_vectors():
    a = "The user uses fish shell, not bash."
    b = "the user uses the fish shell rather than bash"  # same words but stopwords
    n1, n2 = "I have 3 cats.", "I have 4 cats."  # a changed number
    assert fold([(1, 1, "a", 0.9, 1, b"1", a, V, 1), (2, 2, "b", 0.8, 2, b"2", b, V2, 1)]) == [
        [1, 2, 0.9, ["a"]]
    ]
    assert (
        len(fold([(1, 1, "a", 0.9, 1, b"1", n1, V, 1), (2, 2, "b", 0.8, 2, b"2", n2, V2, 1)])) == 2
    )
    # below the cosine, or a row not usable (no query vector), or dimensions that differ
    assert len(fold([(1, 1, "a", 0.9, 1, b"1", a, V, 1), (2, 2, "b", 0.8, 2, b"2", b, W, 1)])) == 2
    assert len(fold([(1, 1, "a", 0.9, 1, b"1", a, V, 1), (2, 2, "b", 0.8, 2, b"2", b, V2, 0)])) == 2
    assert (
        len(
            fold([(1, 1, "a", 0.9, 1, b"1", a, V, 1), (2, 2, "b", 0.8, 2, b"2", b, f32([1, 0]), 1)])
        )
        == 2
    )
    nan = f32([math.nan, 0, 0, 0])
    assert (
        len(fold([(1, 1, "a", 0.9, 1, b"1", a, V, 1), (2, 2, "b", 0.8, 2, b"2", b, nan, 1)])) == 2
    )
    # stems: "stored" and "store" are one word
    s1, s2 = "password stored in vault", "password store in vault"
    assert (
        len(fold([(1, 1, "a", 0.9, 1, b"1", s1, V, 1), (2, 2, "b", 0.8, 2, b"2", s2, V2, 1)])) == 1
    )


def test_a_chain_of_duplicates_is_one_group_and_ids_are_json():
    q = 'say "hi"\\\n'
    rows = [
        (1, 1, "first", 0.9, 1, b"k", "t", None, 0),
        (2, 2, q, 0.8, 3, b"k", "t", None, 0),
        (3, 3, "third", 0.7, 2, b"k", "t", None, 0),
    ]
    assert fold(rows) == [[1, 2, 0.9, ["third", "first"]]]


def test_the_score_round_trips_exactly():
    s = 0.1 + 0.2
    assert fold([(1, 1, "a", s, 1, b"k", "t", None, 0)])[0][2] == s
