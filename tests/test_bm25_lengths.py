"""The BM25 list when the index's stored lengths are below its positions.

FTS5 keeps a row's length (``episodes_fts_docsize``, what ``xColumnSize`` and bm25() read)
apart from the position lists of its terms. In an index FTS5 wrote itself the two agree,
but any client can write either table (here the Debian ``sqlite3`` shell, without the
extension, shortens the stored length of a few rows), and an index that drifted holds
positions its stored length does not cover. bm25() then scores such a row with the short
length: high. The pruning bounds of ``rrf_bm25``, ``rrf_bm25_or`` and ``rrf_bm25_or_top``
(csrc/bm25.c B3, csrc/bm25_top.c B16) used to take a row's last position + 1 as a lower
bound of its length, and checked that only on the rows they scored: a row they pruned
with it was left out unseen, so the list lacked bm25()'s high-ranked rows and held lower
ones instead. Now every bound holds for any stored length of 0 or more.

Checked, row for row and bit for bit against ``ORDER BY bm25(episodes_fts), rowid LIMIT
n`` at every depth from 1 to 20 and at 50: the statement's BM25 list (its one-call top,
its per-row filtered scan), ``rrf_bm25_or_top``, ``rrf_bm25_or`` and ``rrf_bm25`` called
directly. A query with a dropped word (a stopword) reads the text of its candidates, and
may instead refuse with "rebuild the index"; the queries here drop none.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys
from typing import Any, Dict, List, Tuple

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "soak"))
import churn

from sqlite_rrf.store import Store

SHELL = shutil.which("sqlite3")
pytestmark = pytest.mark.skipif(SHELL is None, reason="needs the sqlite3 shell")

FILLER = [f"w{i}" for i in range(400)]
DEPTHS = list(range(1, 21)) + [50]
#: The shipped statement up to its BM25 list, and its parameters (read once).
CTE, CTE_PARAMS = churn.bm25_cte()


def build(path: str, seed: int) -> Tuple[Store, List[int]]:
    """1,500 rows of 60 filler words, 150 with 'beta' and 15 with 'alpha' somewhere, and 6
    long rows (80 filler words) that end with 'beta' (three with 'alpha' first): their
    last position is far beyond the length the shell gives them. Returns the store and
    the long rows' rowids."""
    rng = random.Random(seed)
    rows: List[Dict[str, Any]] = []
    for i in range(1500):
        words = rng.choices(FILLER, k=60)
        if i % 10 == 0:
            words[rng.randrange(60)] = "beta"
        if i % 100 == 0:
            words[rng.randrange(60)] = "alpha"
        rows.append(dict(id=f"r{i}", content=" ".join(words)))
    for j in range(6):
        head = ["alpha"] if j % 2 else []
        rows.append(dict(id=f"v{j}", content=" ".join(head + rng.choices(FILLER, k=80) + ["beta"])))
    store = Store(path)
    store.add_many(rows)
    long_rows = [r for (r,) in store.conn.execute("SELECT rowid FROM episodes WHERE id GLOB 'v*'")]
    return store, long_rows


def shorten(path: str, lengths: Dict[int, int]) -> None:
    """The shell (another client, no extension) stores these lengths (< 128 each: a
    one-byte varint)."""
    assert all(0 <= n < 128 for n in lengths.values())
    script = (
        "BEGIN;\n"
        + "".join(
            f"UPDATE episodes_fts_docsize SET sz = x'{n:02x}' WHERE id = {r};\n"
            for r, n in lengths.items()
        )
        + "COMMIT;\n"
    )
    out = subprocess.run([SHELL, "-bail", path], input=script, capture_output=True, text=True)
    assert out.returncode == 0 and not out.stderr, out.stderr


def lists(store: Store, q: str, n: int) -> Dict[str, List[Tuple[int, float]]]:
    """Every path of the BM25 list for ``q`` at depth ``n``, (rowid, bm25 value), best first."""
    conn = store.conn

    def statement(**kw: Any) -> List[Tuple[int, float]]:
        b: Dict[str, Any] = dict.fromkeys(CTE_PARAMS)
        b.update(query=q, bm25_limit=n, **kw)
        return [tuple(r) for r in conn.execute(CTE, b)]

    top = conn.execute(churn.FN_TOP, (q, n, "")).fetchone()[0]
    return {
        "statement, rrf_bm25_or_top": statement(),
        "statement, filtered scan": statement(since=churn.SINCE_ALL),
        "rrf_bm25_or_top": [tuple(r) for r in json.loads(top)],
        "rrf_bm25_or": [tuple(r) for r in conn.execute(churn.FN_OR, (q, n, ""))],
        "rrf_bm25": [tuple(r) for r in conn.execute(churn.FN_FULL, (q, n))],
    }


def differences(store: Store, queries: List[str]) -> List[str]:
    out = []
    for q in queries:
        for n in DEPTHS:
            want = [
                tuple(r)
                for r in store.conn.execute(churn.BM25_REF.format(t="episodes_fts"), (q, n))
            ]
            for path, got in lists(store, q, n).items():
                if got != want:
                    lost = [r for r, _ in want if r not in {g for g, _ in got}]
                    out.append(f"{q!r} top {n}, {path}: bm25()'s rows {lost} missing")
    return out


def test_rows_shorter_than_their_positions_are_never_pruned_unseen(tmp_path):
    path = str(tmp_path / "m.db")
    store, long_rows = build(path, 5)
    queries = ["alpha beta", "beta", "beta w3", "alpha w7 beta"]
    try:
        assert store.stopwords == []  # no word is dropped: no text is read
        assert differences(store, queries) == []  # the index as FTS5 wrote it
        shorten(path, {r: 2 for r in long_rows})
        # the control: bm25() now ranks the shortened rows high
        ranks = [
            [r for r, _ in store.conn.execute(churn.BM25_REF.format(t="episodes_fts"), (q, 20))]
            for q in ("alpha beta", "beta")
        ]
        assert all(set(long_rows) & set(r) for r in ranks)
        assert differences(store, queries) == []
    finally:
        store.close()


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_random_rows_get_random_lengths_below_their_positions(tmp_path, seed):
    """Random matching rows of random queries get a random stored length from 0 to their
    last position (another client's write), a few rows or many."""
    path = str(tmp_path / "m.db")
    store, long_rows = build(path, seed)
    rng = random.Random(seed)
    try:
        conn = store.conn
        queries = [" ".join(rng.sample(FILLER[:40], 2) + ["beta"]) for _ in range(3)] + [
            "alpha beta",
            "beta " + rng.choice(FILLER),
        ]
        lengths: Dict[int, int] = {r: rng.randrange(0, 81) for r in long_rows}
        beta = [
            r
            for (r,) in conn.execute(
                "SELECT rowid FROM episodes_fts WHERE episodes_fts MATCH 'beta'"
            )
        ]
        for r in rng.sample(beta, 4 if seed != 3 else 40):
            lengths[r] = rng.randrange(0, 60)
        shorten(path, lengths)
        assert differences(store, queries) == []
    finally:
        store.close()
