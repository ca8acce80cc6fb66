#!/usr/bin/env python3
"""Churn soak: a memory's long life, written by the Store and by the plain sqlite3 shell
(``make churn``; the short form is tests/test_churn.py).

A memory of ``--episodes`` episodes (20,000) goes through ``--ops`` operations (100,000),
in segments that alternate between two clients:

* **Store** (:class:`sqlite_rrf.store.Store`, one instance for the whole run, as a
  long-lived agent holds it): ``add``, ``add_many``, ``upsert`` (of an existing and of
  a new id), ``delete`` (of an existing and of a missing id) and ``recall`` with
  ``touch=True`` (pools ``recent`` and ``all``, every profile);
* **shell**: the Debian ``sqlite3`` shell (``/usr/bin/sqlite3``) with **no** rrf
  extension loaded and ``recursive_triggers`` OFF (its default, checked every
  batch), fed scripts of a few hundred statements (some in one transaction, some in
  autocommit): ``INSERT``, ``INSERT OR REPLACE`` on the id, ``INSERT OR REPLACE`` with
  the rowid of another row (which removes both rows), ``REPLACE INTO``, UPSERT
  (``ON CONFLICT(id) DO UPDATE``), ``UPDATE`` of content, of the rowid (to a free one,
  and ``UPDATE OR REPLACE`` onto another row's), of the embedding (a vector or NULL),
  ``DELETE`` of one row and of several. With ``--knn`` the database has the vec0 index
  and the shell loads sqlite-vec (never rrf).

Every operation counts once (a Store call, or one shell statement); ``add_many`` and
multi-row statements count their rows apart.

The texts are short and random over a Zipf-distributed vocabulary (``z0`` ... ``z2999``),
plus ``the`` and ``of`` in most episodes (true stopwords: in at least half), and the
issue's story of ``kubernetes``: in the first phase ("rise", 35 % of the operations) most
new and rewritten texts mention it and the count of episodes grows by 12 %, so it ends in
more than half of the episodes (a stopword; at the end of the phase the Store's stored
stopword hint is refreshed, ``Store.refresh_stopwords``); in the second ("fall", 30 %)
the episodes that mention it are deleted or rewritten without it and others are added,
the count staying put, so the hint goes stale; in the rest ("after") it is rare and the
count goes back to ``--episodes``.

At ``--checkpoints`` evenly spaced moments (plus one before the first operation) the
memory is checked:

(a) FTS5's ``integrity-check``, plain and with ``rank = 1`` (the index against the
    content table), and ``PRAGMA quick_check``;
(b) for about a dozen queries (fixed ones from the issue: ``kubernetes orange``,
    ``the <a word in no episode>``, ...; random ones over the vocabulary) the recall
    statement's BM25 list equals FTS5's ``bm25()`` over the OR query of all the query's
    words (``fts5_query(query)``, no stopword left out), top ``bm25_limit`` (10, 50 or
    200), ids in order, ties by rowid, and the scores equal. The statement's list is
    read through ``Store.recall`` (``pool_size=0``, no query vector, so the candidates
    are the BM25 hits; sorted by ``bm25_score``, rowid);
(b') every path of that list, row for row and bit for bit against the same
    bm25() list: the statement's own BM25 CTEs (sql/recall.sql) with rrf_bm25_or_top and
    with the per-row filtered scan (a ``since`` every row passes), each under the stored
    stopword hint, no hint, the hint of this moment, a hint of every word of the query and
    a hint without the query's words that are common now (a hint gone stale while the
    count stayed put: those words stay in the scan at FTS5's IDF floor);
    rrf_bm25 of the whole query; rrf_bm25_or_top and rrf_bm25_or with the words now in
    half of the rows dropped (their top m rows, m the rows scoring below what the dropped
    words can give, B13); and bm25() of an index built afresh at the checkpoint from the
    rows of episodes (one segment, no delete ever written to it) equals the live index's;
(b'') the same at the moment the story's word crosses into FTS5's IDF floor: in a
    savepoint rolled back at once, ``kubernetes`` is made to hold half of the rows less
    one, exactly half and half plus one;
(c) for a few queries with a random query vector (pools ``recent`` and ``all``) the
    recall of profile ``rrf`` (``Store.recall``) equals the plain-Python reference of
    tests/test_recall.py (``reference_recall``, compared with its ``assert_same``);
(d) the episodes table holds exactly what the writes should have left (a model kept
    in Python: id -> content and embedding), and with ``--knn``, ``episodes_vec`` holds
    exactly the embedded episodes' vectors at their rowids.

    python tests/soak/churn.py --episodes 20000 --ops 100000 --checkpoints 25 --workdir build/churn

``--texts scifact`` writes BEIR SciFact's abstracts instead (title and abstract, each
used again now and then, so equal scores and ties are common) and queries SciFact's
titles and claims, the two titles of ``ISSUE19`` among the fixed queries.

prints the counts (episodes, operations by kind and by client, checkpoints, queries
checked, mismatches) and exits 1 on any mismatch or unexpected error. ``--client apsw``
runs the same scripts through a plain apsw connection of this process's SQLite instead
of the shell (a control: which SQLite wrote what), ``--paranoid`` checks after every
operation and stops at the first fault, keeping the script and the database before it.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import time
import traceback
from collections import Counter
from typing import Any, Dict, List, Optional, Tuple

HERE = os.path.dirname(os.path.abspath(__file__))
TESTS = os.path.dirname(HERE)
if TESTS not in sys.path:
    sys.path.append(TESTS)

SHELL = "/usr/bin/sqlite3" if os.path.exists("/usr/bin/sqlite3") else shutil.which("sqlite3")
#: --texts scifact reads the BEIR SciFact corpus and claims (../shared/data/scifact).
SCIFACT = os.path.join(os.path.dirname(os.path.dirname(TESTS)), "shared", "data", "scifact")
#: Two SciFact titles for which an earlier statement gave a BM25 list that was not bm25()'s top 20.
ISSUE19 = (
    "Cryo-EM structure of a herpesvirus capsid at 3.1 \u00c5",
    "The Evolution of Dominance in Sporophytic Self-Incompatibility Systems. II. "
    "Mate Availability and Recombination",
)
DIM = 16
NWORDS = 3000
WORDS = [f"z{i}" for i in range(NWORDS)]
ZIPF = [1.0 / (i + 1) for i in range(NWORDS)]
STORY = "kubernetes"
STORY_TERM = "kubernet"  # its porter stem, as the index holds it
RARE = "orange"  # in a handful of episodes
ABSENT = "xylophonist"  # in no episode
EXTRA = ("café", "naïve", "日本語", "it's", "x-ray", "Straße", "data-base")
#: the phases: (name, end as a share of the operations, episode count at the end as a
#: share of --episodes, chance that a new text mentions STORY)
PHASES = (("rise", 0.35, 1.12, 0.85), ("fall", 0.65, 1.12, 0.0), ("after", 1.0, 1.0, 0.002))

STORE_KINDS = (
    "add",
    "add_many",
    "upsert",
    "upsert_new",
    "delete",
    "delete_missing",
    "recall_touch",
)
STORE_WEIGHTS = (18, 7, 24, 4, 18, 1, 8)
SHELL_KINDS = (
    "insert",
    "insert_or_replace_id",
    "insert_or_replace_rowid",
    "replace_into",
    "upsert",
    "upsert_new",
    "update_content",
    "update_rowid",
    "update_or_replace_rowid",
    "update_embedding",
    "delete",
    "delete_many",
)
SHELL_WEIGHTS = (12, 9, 4, 3, 10, 2, 15, 6, 2, 8, 15, 3)
ADDS = {"add", "add_many", "upsert_new", "insert", "replace_into"}
DELETES = {"delete", "delete_many"}
REWRITES = {"upsert", "insert_or_replace_id", "update_content", "insert_or_replace_rowid"}


FTS_CHECK = "INSERT INTO episodes_fts(episodes_fts, rank) VALUES('integrity-check', 1);"

#: FTS5's own list, the reference of every check of the BM25 list: bm25() of the OR query
#: of every word (fts5_query(query)), best first, ties by rowid.
BM25_REF = (
    "SELECT rowid, bm25({t}) AS s FROM {t} WHERE {t} MATCH "
    "coalesce(fts5_query(?1), '\"\"') ORDER BY s, rowid LIMIT ?2"
)
#: The second index of (b'): built at each checkpoint from the rows the live index reads
#: its text from (a scan of the external-content table episodes_fts reads its content
#: source), as a new index is built (one segment, no delete ever written to it).
FRESH = "episodes_fts_fresh"
FRESH_BUILD = (
    f"DROP TABLE IF EXISTS temp.{FRESH}; CREATE VIRTUAL TABLE temp.{FRESH} USING "
    f"fts5(content, tokenize = 'porter unicode61'); INSERT INTO temp.{FRESH}(rowid, "
    "content) SELECT rowid, content FROM main.episodes_fts;"
)
#: The terms in at least half of the rows now: the words FTS5 gives its IDF floor.
STOP_NOW = (
    "SELECT coalesce(group_concat(term, ' '), '') FROM episodes_fts_vocab "
    "WHERE 2 * doc >= (SELECT count(*) FROM episodes)"
)
#: The functions of csrc/bm25*.c called directly (c''): the one-call top (B16), the
#: per-row scan of the query without its stopwords (B10..B13) and of the whole query (B3).
FN_TOP = (
    "SELECT rrf_bm25_or_top(episodes_fts, ?2, ?1, ?3, 'porter unicode61') FROM "
    "episodes_fts WHERE episodes_fts MATCH fts5_query(?1, 'or', ?3, 'porter unicode61') "
    "LIMIT 1"
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
#: The most a dropped word adds to a row's score, with B12's margin (sql/recall/bm25.sql 1c).
DROP_BOUND = 2.2000022e-6
#: since = this: a filter every row passes, so the statement takes its per-row scan (1b's
#: second branch) instead of rrf_bm25_or_top.
SINCE_ALL = -(2**62)


def bm25_cte() -> Tuple[str, List[str]]:
    """The shipped recall statement (sql/recall.sql) up to its ``bm25`` CTE, selecting that
    CTE's list (rowid, bm25_score, best first), and its parameters."""
    from sqlite_rrf.core.sql_files import read_sql, statement_params

    sql = read_sql("recall.sql")
    head = sql[: sql.index("\n-- 2. ") + 1].rstrip()
    if not head.endswith("),"):
        raise AssertionError("sql/recall.sql: the BM25 CTEs no longer end before '-- 2.'")
    cte = head[:-1] + "\nSELECT rowid, bm25_score FROM bm25 ORDER BY bm25_score, rowid"
    return cte, statement_params(cte)


class IdSet:
    """A set with O(1) add, remove and random choice."""

    def __init__(self) -> None:
        self.items: List[str] = []
        self.pos: Dict[str, int] = {}

    def add(self, x: str) -> None:
        if x not in self.pos:
            self.pos[x] = len(self.items)
            self.items.append(x)

    def discard(self, x: str) -> None:
        i = self.pos.pop(x, None)
        if i is None:
            return
        last = self.items.pop()
        if i < len(self.items):
            self.items[i] = last
            self.pos[last] = i

    def __contains__(self, x: str) -> bool:
        return x in self.pos

    def __len__(self) -> int:
        return len(self.items)

    def choice(self, rng: random.Random) -> str:
        return self.items[rng.randrange(len(self.items))]


class Model:
    """What the episodes table must hold: id -> (content, embedding blob or None), and
    the rowid of each id where it is known (refreshed from the database per shell batch)."""

    def __init__(self) -> None:
        self.content: Dict[str, str] = {}
        self.emb: Dict[str, Optional[bytes]] = {}
        self.ids = IdSet()
        self.story = IdSet()  # ids whose content mentions STORY
        self.rowid_of: Dict[str, int] = {}
        self.id_at: Dict[int, str] = {}

    def put(self, eid: str, content: str, emb: Optional[bytes]) -> None:
        self.content[eid] = content
        self.emb[eid] = emb
        self.ids.add(eid)
        if STORY in content.split():
            self.story.add(eid)
        else:
            self.story.discard(eid)

    def drop(self, eid: str) -> None:
        self.content.pop(eid, None)
        self.emb.pop(eid, None)
        self.ids.discard(eid)
        self.story.discard(eid)
        r = self.rowid_of.pop(eid, None)
        if r is not None and self.id_at.get(r) == eid:
            del self.id_at[r]

    def forget_rowid(self, eid: str) -> None:
        r = self.rowid_of.pop(eid, None)
        if r is not None and self.id_at.get(r) == eid:
            del self.id_at[r]

    def set_rowid(self, eid: str, rowid: int) -> None:
        self.forget_rowid(eid)
        self.rowid_of[eid] = rowid
        self.id_at[rowid] = eid

    def load_rowids(self, conn: Any) -> None:
        self.rowid_of = {}
        self.id_at = {}
        for rowid, eid in conn.execute("SELECT rowid, id FROM episodes"):
            self.rowid_of[eid] = rowid
            self.id_at[rowid] = eid


def sql_text(s: str) -> str:
    return "'" + s.replace("'", "''") + "'"


def sql_blob(b: Optional[bytes]) -> str:
    return "NULL" if b is None else "X'" + b.hex() + "'"


class Churn:
    """One churn run: the store, the model of what it must hold, the counts."""

    def __init__(self, args: argparse.Namespace) -> None:
        import numpy as np

        from sqlite_rrf.store import Store

        self.args = args
        self.rng = random.Random(args.seed)
        self.nrng = np.random.default_rng(args.seed)
        os.makedirs(args.workdir, exist_ok=True)
        self.db = os.path.join(args.workdir, "churn.db")
        for suffix in ("", "-wal", "-shm"):
            if os.path.exists(self.db + suffix):
                os.remove(self.db + suffix)
        self.store = Store(self.db)
        self.model = Model()
        self.docs: List[str] = []  # --texts scifact: the texts (title and abstract)
        self.claims: List[str] = []  # and the queries (titles and claims)
        if args.texts == "scifact":
            self.docs, self.claims = load_scifact(args.scifact)
        self.cte, self.cte_params = bm25_cte()
        self.stop_now = ""  # per checkpoint: the terms in half of the rows or more
        self.fresh_ready = False  # the fresh index of this moment is built
        self.ops: Counter = Counter()  # "client:kind" -> operations
        self.rows: Counter = Counter()  # "client:kind" -> episodes written or removed
        self.failures: List[str] = []
        self.failure_count = 0
        self.mismatch: Counter = Counter()
        self.checked: Counter = Counter()
        self.examples: List[str] = []
        self.timeline: List[Dict[str, Any]] = []
        self.shell_batches = 0
        self.shell_s = self.store_s = self.check_s = 0.0
        self.touch_failed = 0
        self.recall_hits = 0
        self.next_id = 0
        self.refreshes = 0
        self.vec_path: Optional[str] = None

    # ---- data ----

    def phase(self, done: int) -> Tuple[str, float, float]:
        """(name, target episode count, chance of STORY in a new text) at op ``done``."""
        p = done / max(1, self.args.ops)
        start, start_share = 0.0, 1.0
        for name, end, share, story in PHASES:
            if p < end or end == 1.0:
                f = (p - start) / (end - start)
                return name, self.args.episodes * (start_share + f * (share - start_share)), story
            start, start_share = end, share
        raise AssertionError("unreachable")

    def text(self, story_p: float) -> str:
        rng = self.rng
        if self.docs:  # a SciFact text (the same one again now and then: equal scores)
            words = [rng.choice(self.docs)]
            if rng.random() < story_p:
                words.append(STORY)
            if rng.random() < 0.003:
                words.append(RARE)
            return " ".join(words)
        words = rng.choices(WORDS, weights=ZIPF, k=rng.randint(2, 9))
        if rng.random() < 0.75:
            words.append("the")
        if rng.random() < 0.6:
            words.append("of")
        if rng.random() < story_p:
            words.append(STORY)
        if rng.random() < 0.003:
            words.append(RARE)
        if rng.random() < 0.05:
            words.append(rng.choice(EXTRA))
        rng.shuffle(words)
        return " ".join(words)

    def vec(self) -> bytes:
        return self.nrng.standard_normal(DIM).astype("<f4").tobytes()

    def new_id(self, client: str) -> str:
        self.next_id += 1
        return f"{client[0]}{self.next_id}"

    def target(self, purpose: str, phase: str) -> str:
        """An existing id to rewrite or delete, chosen to tell the phase's story."""
        m, rng = self.model, self.rng
        with_story = len(m.story)
        if phase == "rise":
            want_story = False
        elif phase == "fall":
            want_story = True
        else:
            return m.ids.choice(rng)
        pool = m.story if want_story else None
        if rng.random() < 0.9:
            if want_story and with_story:
                return pool.choice(rng)  # type: ignore[union-attr]
            if not want_story and with_story < len(m.ids):
                for _ in range(20):
                    eid = m.ids.choice(rng)
                    if eid not in m.story:
                        return eid
        return m.ids.choice(rng)

    def pick_kind(self, kinds: Tuple[str, ...], weights: Tuple[int, ...], done: int) -> str:
        _name, target, _p = self.phase(done)
        n = len(self.model.ids)
        w = list(weights)
        for i, k in enumerate(kinds):
            if n > target + 100 and k in ADDS:
                w[i] = w[i] // 4
            elif n > target + 100 and k in DELETES:
                w[i] *= 3
            elif n < target - 100 and k in DELETES:
                w[i] = w[i] // 4
            elif n < target - 100 and k in ADDS:
                w[i] *= 3
        return self.rng.choices(kinds, w)[0]

    # ---- the Store ----

    def populate(self) -> None:
        """The first --episodes episodes, through Store.add_many (not counted as ops)."""
        n = self.args.episodes
        for b in range(0, n, 2000):
            batch = []
            for _ in range(min(2000, n - b)):
                eid = self.new_id("store")
                c = self.text(0.0)
                e = self.vec()
                batch.append(dict(id=eid, content=c, embedding=e))
                self.model.put(eid, c, e)
            self.store.add_many(batch)
        if self.args.store_merges:
            self.store.conn.execute(
                "INSERT INTO episodes_fts(episodes_fts, rank) VALUES ('automerge', 0)"
            )
            self.store.conn.execute(
                "INSERT INTO episodes_fts(episodes_fts, rank) VALUES ('crisismerge', 100000)"
            )
        if self.args.knn:
            import sqlite_vec

            self.vec_path = sqlite_vec.loadable_path()
            self.store.enable_knn()

    def store_op(self, kind: str, phase: str, story_p: float) -> None:
        from sqlite_rrf.store import PROFILES

        s, m, rng = self.store, self.model, self.rng
        rows = 1
        if kind == "add":
            eid, c = self.new_id("store"), self.text(story_p)
            e = self.vec() if rng.random() < 0.95 else None
            s.add(c, id=eid, embedding=e)
            m.put(eid, c, e)
        elif kind == "add_many":
            batch = []
            for _ in range(rng.randint(2, 8)):
                eid, c, e = self.new_id("store"), self.text(story_p), self.vec()
                batch.append(dict(id=eid, content=c, embedding=e))
            s.add_many(batch)
            for ep in batch:
                m.put(ep["id"], ep["content"], ep["embedding"])
            rows = len(batch)
        elif kind in ("upsert", "upsert_new"):
            eid = self.target("rewrite", phase) if kind == "upsert" else self.new_id("store")
            c, e = self.text(story_p), self.vec()
            s.upsert(c, id=eid, embedding=e)
            m.put(eid, c, e)
        elif kind == "delete":
            eid = self.target("delete", phase)
            if s.delete(eid) is not True:
                self.fail(f"Store.delete({eid!r}) of an existing episode returned False")
            m.drop(eid)
        elif kind == "delete_missing":
            if s.delete(f"missing-{self.next_id}") is not False:
                self.fail("Store.delete of a missing id returned True")
            rows = 0
        elif kind == "recall_touch":
            q = self.query()
            qvec = self.nrng.standard_normal(DIM).astype("<f4") if rng.random() < 0.8 else None
            res = s.recall(
                q,
                limit=rng.randint(1, 10),
                qvec=qvec,
                force=True,
                touch=True,
                pool=rng.choice(("recent", "recent", "recent", "all")),
                profile=rng.choice(PROFILES),
            )
            self.recall_hits += len(res)
            if len(res) and not res.touched:
                self.touch_failed += 1
                self.fail(f"a recall's touch was not made: {res.touch_error}")
            rows = 0
        if self.args.store_merges and kind != "recall_touch":
            # the proposal's Store: it merges the FTS5 segments after each write
            s.conn.execute("INSERT INTO episodes_fts(episodes_fts, rank) VALUES ('merge', 500)")
        self.ops["store:" + kind] += 1
        self.rows["store:" + kind] += rows

    def store_segment(self, n: int, done: int) -> int:
        t = time.perf_counter()
        for i in range(n):
            name, _target, story_p = self.phase(done + i)
            kind = self.pick_kind(STORE_KINDS, STORE_WEIGHTS, done + i)
            if kind in ("upsert", "delete") and not self.model.ids:
                kind = "add"
            try:
                self.store_op(kind, name, story_p)
            except Exception as e:
                self.ops["store:" + kind] += 1
                self.fail(
                    f"Store {kind}: {type(e).__name__}: {e}\n" + traceback.format_exc(limit=3)
                )
            if self.args.paranoid:
                self.paranoid_check(f"Store {kind} (op {done + i})")
        self.store_s += time.perf_counter() - t
        return n

    # ---- the shell ----

    def shell_statement(self, kind: str, phase: str, story_p: float) -> Tuple[str, int]:
        """One statement and the rows it writes or removes; the model follows it."""
        m, rng = self.model, self.rng
        md = "NULL" if rng.random() < 0.8 else sql_text(json.dumps({"by": "shell"}))
        if kind in ("insert", "replace_into", "upsert_new"):
            eid, c = self.new_id("shell"), self.text(story_p)
            e = self.vec() if rng.random() < 0.9 else None
            verb = {
                "insert": "INSERT INTO",
                "replace_into": "REPLACE INTO",
                "upsert_new": "INSERT INTO",
            }[kind]
            tail = (
                " ON CONFLICT(id) DO UPDATE SET content = excluded.content, "
                "embedding = excluded.embedding"
                if kind == "upsert_new"
                else ""
            )
            m.put(eid, c, e)
            self.hi += 1  # an automatic rowid is at most the largest + 1
            return (
                f"{verb} episodes(id, content, embedding, metadata) VALUES "
                f"({sql_text(eid)}, {sql_text(c)}, {sql_blob(e)}, {md}){tail};",
                1,
            )
        eid = self.target("delete" if kind in DELETES else "rewrite", phase)
        if kind == "insert_or_replace_id":
            c, e = self.text(story_p), self.vec()
            m.put(eid, c, e)
            m.forget_rowid(eid)  # a new automatic rowid
            self.hi += 1
            return (
                f"INSERT OR REPLACE INTO episodes(id, content, embedding) VALUES "
                f"({sql_text(eid)}, {sql_text(c)}, {sql_blob(e)});",
                1,
            )
        if kind == "upsert":
            c, e = self.text(story_p), self.vec()
            m.put(eid, c, e)
            return (
                f"INSERT INTO episodes(id, content, embedding) VALUES ({sql_text(eid)}, "
                f"{sql_text(c)}, {sql_blob(e)}) ON CONFLICT(id) DO UPDATE SET "
                "content = excluded.content, embedding = excluded.embedding;",
                1,
            )
        if kind in ("insert_or_replace_rowid", "update_or_replace_rowid"):
            # another row, whose rowid is known, is the victim: both rows go, one comes
            victim = None
            for _ in range(20):
                v = m.ids.choice(rng)
                if v != eid and v in m.rowid_of:
                    victim = v
                    break
            if victim is None:
                return self.shell_statement("update_content", phase, story_p)
            r = m.rowid_of[victim]
            m.drop(victim)
            if kind == "insert_or_replace_rowid":
                c, e = self.text(story_p), self.vec()
                m.put(eid, c, e)
                m.set_rowid(eid, r)
                return (
                    f"INSERT OR REPLACE INTO episodes(rowid, id, content, embedding) VALUES "
                    f"({r}, {sql_text(eid)}, {sql_text(c)}, {sql_blob(e)});",
                    2,
                )
            m.set_rowid(eid, r)
            return f"UPDATE OR REPLACE episodes SET rowid = {r} WHERE id = {sql_text(eid)};", 2
        if kind == "update_content":
            c = self.text(story_p)
            m.put(eid, c, m.emb[eid])
            return f"UPDATE episodes SET content = {sql_text(c)} WHERE id = {sql_text(eid)};", 1
        if kind == "update_rowid":
            if rng.random() < 0.3:
                self.lo -= rng.randint(1, 50)
                r = self.lo
            else:
                self.hi += rng.randint(1, 50)
                r = self.hi
            m.set_rowid(eid, r)
            return f"UPDATE episodes SET rowid = {r} WHERE id = {sql_text(eid)};", 1
        if kind == "update_embedding":
            e = self.vec() if rng.random() < 0.85 else None
            m.put(eid, m.content[eid], e)
            return (f"UPDATE episodes SET embedding = {sql_blob(e)} WHERE id = {sql_text(eid)};", 1)
        if kind == "delete":
            m.drop(eid)
            return f"DELETE FROM episodes WHERE id = {sql_text(eid)};", 1
        if kind == "delete_many":
            ids = {eid}
            for _ in range(rng.randint(1, 9)):
                if len(ids) < len(m.ids):
                    ids.add(self.target("delete", phase))
            for x in sorted(ids):  # a fixed order: the run is the same for a seed
                m.drop(x)
            return (
                "DELETE FROM episodes WHERE id IN ("
                + ", ".join(sql_text(x) for x in sorted(ids))
                + ");",
                len(ids),
            )
        raise AssertionError(kind)

    def shell_segment(self, n: int, done: int) -> int:
        t = time.perf_counter()
        conn = self.store.conn
        self.model.load_rowids(conn)
        self.hi = max(self.model.id_at, default=0)
        self.lo = min(0, min(self.model.id_at, default=0))
        in_txn = self.rng.random() < 0.5
        head = [
            ".bail off",
            "PRAGMA recursive_triggers;",
            ".output /dev/null",
            "PRAGMA busy_timeout = 10000;",
            ".output stdout",
        ]
        if self.vec_path:
            head.append(f".load {self.vec_path}")
        if not in_txn:
            head.append("PRAGMA synchronous = NORMAL;")  # autocommit: no fsync per statement
        lines = list(head)
        if in_txn:
            lines.append("BEGIN;")
        kinds = Counter()
        rows = Counter()
        for i in range(n):
            name, _target, story_p = self.phase(done + i)
            kind = self.pick_kind(SHELL_KINDS, SHELL_WEIGHTS, done + i)
            if not self.model.ids and kind not in ADDS:
                kind = "insert"
            stmt, nrows = self.shell_statement(kind, name, story_p)
            lines.append(stmt)
            kinds[kind] += 1
            rows[kind] += nrows
        if in_txn:
            lines.append("COMMIT;")
        script = "\n".join(lines) + "\n"
        if self.args.paranoid:  # keep the database as it was before this script
            self.backup(os.path.join(self.args.workdir, "paranoid-before.db"))
        if self.args.client == "shell":
            out = subprocess.run(
                [SHELL, "-batch", self.db],
                input=script,
                capture_output=True,
                text=True,
                timeout=600,
            )
        else:
            out = self.run_in_apsw(script)
        self.shell_batches += 1
        for k, v in kinds.items():
            self.ops["shell:" + k] += v
        for k, v in rows.items():
            self.rows["shell:" + k] += v
        if out.stdout.splitlines()[:1] != ["0"]:
            self.fail(
                f"shell batch {self.shell_batches}: recursive_triggers is not OFF, or "
                f"the shell said {out.stdout[:200]!r}"
            )
        if self.args.paranoid:
            path = os.path.join(self.args.workdir, "paranoid-batch.sql")
            with open(path, "w", encoding="utf-8") as f:
                f.write(script)
            self.paranoid_check(
                f"shell batch {self.shell_batches} ({path}, the database "
                "before it: paranoid-before.db)"
            )
        if out.returncode != 0 or out.stderr.strip():
            self.fail(
                f"shell batch {self.shell_batches} (rc {out.returncode}): "
                f"{out.stderr.strip()[:500]}"
            )
            with open(
                os.path.join(self.args.workdir, f"failed-batch-{self.shell_batches}.sql"),
                "w",
                encoding="utf-8",
            ) as f:
                f.write(script)
        self.shell_s += time.perf_counter() - t
        return n

    def run_in_apsw(self, script: str) -> Any:
        """--client apsw: the same statements through a plain apsw connection (this
        process's SQLite, no extension loaded), to tell the shell's SQLite from ours."""
        import apsw

        conn = apsw.Connection(self.db)
        conn.set_busy_timeout(10_000)
        if self.vec_path:
            conn.enable_load_extension(True)
            conn.load_extension(self.vec_path)
        stdout, stderr = [], []
        for line in script.splitlines():
            if not line or line.startswith("."):
                continue
            try:
                stdout += [str(r[0]) for r in conn.execute(line)]
            except apsw.Error as e:
                stderr.append(f"{line[:80]}: {e}")
        conn.close()
        return argparse.Namespace(
            stdout="\n".join(stdout) + "\n", stderr="\n".join(stderr), returncode=0
        )

    # ---- checkpoints ----

    def backup(self, path: str) -> None:
        """A consistent copy of the database (SQLite's backup API)."""
        import apsw

        if os.path.exists(path):
            os.remove(path)
        dest = apsw.Connection(path)
        with dest.backup("main", self.store.conn, "main") as b:
            b.step()
        dest.close()

    def paranoid_check(self, after: str) -> None:
        """--paranoid: FTS5's integrity-check and PRAGMA quick_check now; stop at a fault."""
        conn = self.store.conn
        problems = []
        try:
            conn.execute(FTS_CHECK)
        except Exception as e:
            problems.append(f"FTS5 integrity-check: {type(e).__name__}: {e}")
        qc = conn.execute("PRAGMA quick_check").fetchall()
        if qc != [("ok",)]:
            problems.append(f"quick_check: {qc[:3]}")
        if problems:
            raise SystemExit(f"--paranoid: right after {after}: " + "; ".join(problems))

    def fail(self, msg: str) -> None:
        self.failure_count += 1
        if len(self.failures) < 200:
            self.failures.append(msg)

    def miss(self, what: str, msg: str) -> None:
        self.mismatch[what] += 1
        if len(self.examples) < 40:
            self.examples.append(f"{what}: {msg}")

    def query(self) -> str:
        rng = self.rng
        if self.claims:
            words = [rng.choice(self.claims)]
            if rng.random() < 0.25:
                words.append(STORY)
            return " ".join(words)
        words = rng.choices(WORDS, weights=ZIPF, k=rng.randint(1, 5))
        for w, p in (("the", 0.3), ("of", 0.2), (STORY, 0.25), (RARE, 0.1), (ABSENT, 0.05)):
            if rng.random() < p:
                words.insert(rng.randrange(len(words) + 1), w)
        return " ".join(words)

    def bm25_queries(self) -> List[str]:
        fixed = [
            f"{STORY} {RARE}",
            STORY,
            f"the {ABSENT}",
            "the of",
            f"of {STORY} the",
            f"the {RARE}",
        ]
        if self.docs:
            fixed[4:] = ISSUE19
        return fixed + [self.query() for _ in range(self.args.queries)]

    def check_bm25(self, q: str, n: int) -> None:
        conn = self.store.conn
        res = self.store.recall(
            q,
            limit=max(n, 1),
            weights=(1.0, 0.0, 0.0, 0.0),
            pool_size=0,
            bm25_limit=n,
            profile="rrf",
            touch=False,
            force=True,
            collapse=False,
        )
        got = sorted((h.bm25_score, h.rowid) for h in res if h.bm25_rank is not None)
        if len(got) != len(res):
            self.miss("bm25_list", f"{q!r}: {len(res) - len(got)} hits without a BM25 rank")
        want = conn.execute(
            "SELECT bm25(episodes_fts) AS s, rowid FROM episodes_fts WHERE episodes_fts MATCH "
            "fts5_query(?, 'or') ORDER BY s, rowid LIMIT ?",
            (q, n),
        ).fetchall()
        self.checked["bm25_queries"] += 1
        self.checked["bm25_rows"] += len(want)
        self.check_paths(q, n)
        if [r for _s, r in got] != [r for _s, r in want]:
            gs, ws = {r for _s, r in got}, {r for _s, r in want}
            self.miss(
                "bm25_list",
                f"{q!r} top {n}: statement {len(got)} rows, bm25() "
                f"{len(want)}; {len(ws - gs)} missing, {len(gs - ws)} extra, first "
                f"differences {[(g, w) for g, w in zip(got, want) if g[1] != w[1]][:2]}",
            )
            return
        worst = max((abs(g[0] - w[0]) for g, w in zip(got, want)), default=0.0)
        if worst > 1e-9:
            self.miss("bm25_scores", f"{q!r} top {n}: scores differ by up to {worst:.3g}")
        elif worst:
            self.checked["bm25_scores_not_bit_identical"] += 1

    def cte_list(
        self, q: str, n: int, since: Optional[int] = None, hint: Any = "stored"
    ) -> List[Tuple[int, float]]:
        """The statement's own BM25 list (sql/recall.sql's bm25 CTE), with the stored
        stopword hint or, in a savepoint rolled back at once, another (None: none)."""
        conn = self.store.conn
        b: Dict[str, Any] = dict.fromkeys(self.cte_params)
        b.update(query=q, bm25_limit=n, since=since)
        if hint == "stored":
            return [tuple(r) for r in conn.execute(self.cte, b).fetchall()]
        # outside a transaction, a whole one rolled back: a savepoint released after its
        # rollback still commits (the pages it touched, unchanged), which other connections
        # see as a write (their PRAGMA data_version moves)
        outer = conn.in_transaction
        conn.execute("SAVEPOINT churn_hint" if outer else "BEGIN")
        try:
            if hint is None:
                conn.execute("DELETE FROM rrf_meta WHERE key = 'bm25_stopwords'")
            else:
                conn.execute(
                    "INSERT OR REPLACE INTO rrf_meta(key, value) VALUES ('bm25_stopwords', ?)",
                    (hint,),
                )
            return [tuple(r) for r in conn.execute(self.cte, b).fetchall()]
        finally:
            if outer:
                conn.execute("ROLLBACK TO churn_hint")
                conn.execute("RELEASE churn_hint")
            else:
                conn.execute("ROLLBACK")

    def check_paths(self, q: str, n: int) -> None:
        """(b') every path of the BM25 list against bm25() on the live index, row for row and
        bit for bit, and that against a freshly built index of the same rows."""
        conn = self.store.conn
        if not self.fresh_ready:  # called on its own (not from a checkpoint): the index now
            self.fresh_ready = True
            try:
                conn.execute(FRESH_BUILD)
                self.stop_now = conn.execute(STOP_NOW).fetchone()[0]
                self.check_paths(q, n)
            finally:
                conn.execute(f"DROP TABLE IF EXISTS temp.{FRESH}")
                self.fresh_ready = False
            return
        want = [tuple(r) for r in conn.execute(BM25_REF.format(t="episodes_fts"), (q, n))]
        fresh = [tuple(r) for r in conn.execute(BM25_REF.format(t=FRESH), (q, n))]
        self.checked["bm25_fresh_queries"] += 1
        if fresh != want:
            self.miss(
                "bm25_fresh",
                f"{q[:60]!r} top {n}: bm25() of the live index and of a "
                f"fresh one differ: {self.difference(fresh, want)}",
            )
        words = [
            t
            for _p, t in json.loads(
                conn.execute(
                    "SELECT fts5_query(?, 'terms', NULL, 'porter unicode61')", (q,)
                ).fetchone()[0]
            )
        ]
        stop = self.stop_now
        stops, query_words = set(stop.split()), set(words)
        common = " ".join(w for w in words if w in stops)
        # ('' would mean "count every word": a word in no row keeps it a hint)
        missing = " ".join([w for w in stop.split() if w not in query_words] + [ABSENT])
        paths = {
            "statement, rrf_bm25_or_top, stored hint": self.cte_list(q, n),
            "statement, rrf_bm25_or_top, no hint": self.cte_list(q, n, hint=None),
            "statement, rrf_bm25_or_top, hint of this moment": self.cte_list(q, n, hint=stop),
            "statement, rrf_bm25_or_top, hint of every word": self.cte_list(
                q, n, hint=" ".join(words + [STORY_TERM])
            ),
            "statement, filtered scan, stored hint": self.cte_list(q, n, since=SINCE_ALL),
            "statement, filtered scan, hint of this moment": self.cte_list(
                q, n, since=SINCE_ALL, hint=stop
            ),
            # a hint gone stale the other way (the count unchanged, so never refreshed):
            # it misses the query's words that are in half of the rows now, so they stay
            # in the scan at FTS5's IDF floor
            "statement, rrf_bm25_or_top, hint without the query's common words": self.cte_list(
                q, n, hint=missing
            ),
            "statement, filtered scan, hint without the query's common words": self.cte_list(
                q, n, since=SINCE_ALL, hint=missing
            ),
            "rrf_bm25 (whole query)": [tuple(r) for r in conn.execute(FN_FULL, (q, n))],
        }
        top = conn.execute(FN_TOP, (q, n, common)).fetchall()
        scan = {
            "rrf_bm25_or_top (common words dropped)": [tuple(r) for r in json.loads(top[0][0])]
            if top
            else [],
            "rrf_bm25_or (common words dropped)": [
                tuple(r) for r in conn.execute(FN_OR, (q, n, common))
            ],
        }
        expect = dict.fromkeys(paths, want)
        for path, got in scan.items():
            # B13: the top m rows are bm25()'s when m rows of the scan score below what
            # the dropped words can give a row (rows holding only those are not scanned)
            floor = -DROP_BOUND * len(common.split())
            m = sum(1 for _r, v in got if v < floor) if common else len(want)
            paths[path], expect[path] = got[:m], want[:m]
            if m < len(want):
                self.checked["bm25_paths_cut_by_B13"] += 1
        for path, got in paths.items():
            self.checked["bm25_paths"] += 1
            self.checked["bm25_path_rows"] += len(expect[path])
            if got != expect[path]:
                self.miss(
                    "bm25_path", f"{q[:60]!r} top {n}, {path}: {self.difference(got, expect[path])}"
                )

    def check_crossing(self) -> None:
        """(b'') STORY in half of the rows less one, exactly half (FTS5's IDF floor starts
        there: log(1) = 0) and half plus one, each in a savepoint rolled back at once:
        every path of the BM25 list at the moment a word crosses into the floor."""
        conn = self.store.conn
        n = conn.execute("SELECT count(*) FROM episodes").fetchone()[0]
        has = f"SELECT rowid FROM episodes_fts WHERE episodes_fts MATCH '{STORY}'"
        for target in sorted({max(0, n // 2 - 1), n // 2, (n + 1) // 2, n // 2 + 1}):
            conn.execute("SAVEPOINT churn_cross")
            try:
                held = conn.execute(f"SELECT count(*) FROM ({has})").fetchone()[0]
                if held < target:
                    conn.execute(
                        f"UPDATE episodes SET content = content || ' {STORY}' WHERE "
                        f"rowid IN (SELECT rowid FROM episodes WHERE rowid NOT IN "
                        f"({has}) LIMIT ?)",
                        (target - held,),
                    )
                elif held > target:
                    conn.execute(
                        f"UPDATE episodes SET content = replace(content, '{STORY}', "
                        f"'{RARE}') WHERE rowid IN ({has} LIMIT ?)",
                        (held - target,),
                    )
                doc = conn.execute(f"SELECT count(*) FROM ({has})").fetchone()[0]
                if doc != target:
                    self.fail(f"the crossing probe put {STORY} in {doc} rows, not {target}")
                self.checked["crossing_probes"] += 1
                conn.execute(FRESH_BUILD)
                self.stop_now = conn.execute(STOP_NOW).fetchone()[0]
                for q in (STORY, f"the {STORY}", f"{STORY} {RARE}", f"of {STORY} the z3"):
                    for lim in (10, 50):
                        self.check_paths(q, lim)
            finally:
                conn.execute("ROLLBACK TO churn_cross")
                conn.execute("RELEASE churn_cross")

    @staticmethod
    def difference(got: List[Tuple[int, float]], want: List[Tuple[int, float]]) -> str:
        """Where two BM25 lists part (for the report)."""
        gr, wr = {r for r, _ in got}, {r for r, _ in want}
        first = next(((i, g, w) for i, (g, w) in enumerate(zip(got, want)) if g != w), None)
        return (
            f"{len(got)} rows vs {len(want)}, {len(wr - gr)} missing {sorted(wr - gr)[:3]}, "
            f"{len(gr - wr)} extra {sorted(gr - wr)[:3]}, first difference {first}"
        )

    def check_reference(self, q: str, qvec: Any, pool: str) -> None:
        from test_recall import NOW, assert_same, reference_recall

        res = self.store.recall(
            q,
            limit=20,
            qvec=qvec,
            pool=pool,
            profile="rrf",
            now=NOW,
            touch=False,
            force=True,
            collapse=False,
        )
        got = []
        for h in res:
            d = h.as_dict()
            d["explain"] = json.dumps(h.explain)
            got.append(d)
        want = reference_recall(
            self.store.conn, q, qvec, pool=pool, limit=20, profile="rrf", now=NOW
        )
        self.checked["reference_recalls"] += 1
        try:
            assert_same(got, want)
        except AssertionError:
            self.miss("reference", f"{q!r} pool {pool}: {self.first_difference(got, want)}")

    @staticmethod
    def first_difference(got: List[Dict[str, Any]], want: List[Dict[str, Any]]) -> str:
        """Where the statement's recall and the reference part (for the report)."""
        gi = {h["id"]: h for h in got}
        wi = {h["id"]: h for h in want}
        for i, (g, w) in enumerate(zip(got, want)):
            for key in ("id", "bm25_rank", "vec_rank", "recency_rank", "access_rank", "score"):
                if g[key] != w[key] and not (
                    key == "score" and abs(g[key] - w[key]) <= 1e-12 * abs(w[key])
                ):
                    other = gi.get(w["id"]) or {}
                    return (
                        f"hit {i}: {key} {g[key]!r} != reference {w[key]!r} (statement "
                        f"{g['id']}: bm25_rank {g['bm25_rank']}, score {g['score']:.6g}; "
                        f"reference {w['id']}: bm25_rank {w['bm25_rank']}, score "
                        f"{w['score']:.6g}, statement's bm25_rank for it "
                        f"{other.get('bm25_rank', 'not returned')})"
                    )
        if len(got) != len(want):
            return f"{len(got)} hits, reference {len(want)}"
        return (
            "explain or similarity differ: "
            + str([(g["id"], g["explain"]) for g in got if g["id"] in wi][:1])[:200]
        )

    def check_model(self) -> None:
        conn = self.store.conn
        db = {
            eid: (c, e) for eid, c, e in conn.execute("SELECT id, content, embedding FROM episodes")
        }
        m = self.model
        missing = [x for x in m.content if x not in db]
        extra = [x for x in db if x not in m.content]
        wrong = [x for x in m.content if x in db and db[x] != (m.content[x], m.emb[x])]
        self.checked["model_checks"] += 1
        if missing or extra or wrong:
            self.miss(
                "model",
                f"{len(missing)} episodes missing ({missing[:3]}), "
                f"{len(extra)} unexpected ({extra[:3]}), {len(wrong)} with other "
                f"content or embedding ({wrong[:3]})",
            )
        if self.args.knn:
            emb = {
                r: e
                for r, e in conn.execute(
                    "SELECT rowid, embedding FROM episodes WHERE embedding IS NOT NULL"
                )
            }
            vec = {r: e for r, e in conn.execute("SELECT rowid, embedding FROM episodes_vec")}
            self.checked["knn_checks"] += 1
            if emb != vec:
                self.miss(
                    "episodes_vec",
                    f"{len(set(vec) - set(emb))} vectors of no embedded "
                    f"episode, {len(set(emb) - set(vec))} embedded episodes without one, "
                    f"{sum(1 for r in emb if r in vec and vec[r] != emb[r])} different",
                )

    def checkpoint(self, done: int) -> None:
        t = time.perf_counter()
        conn = self.store.conn
        self.checked["checkpoints"] += 1
        for name, sql in (
            ("fts_integrity", "INSERT INTO episodes_fts(episodes_fts) VALUES('integrity-check')"),
            (
                "fts_integrity_rank1",
                "INSERT INTO episodes_fts(episodes_fts, rank) VALUES('integrity-check', 1)",
            ),
        ):
            self.checked[name] += 1
            try:
                conn.execute(sql)
            except Exception as e:
                self.miss(name, f"after {done} ops: {type(e).__name__}: {e}")
        qc = conn.execute("PRAGMA quick_check").fetchall()
        self.checked["quick_check"] += 1
        if qc != [("ok",)]:
            self.miss("quick_check", f"after {done} ops: {qc[:3]}")
        self.check_model()
        conn.execute(FRESH_BUILD)
        self.stop_now = conn.execute(STOP_NOW).fetchone()[0]
        self.fresh_ready = True
        for i, q in enumerate(self.bm25_queries()):
            n = (50, 10, 200)[i % 3] if i >= 6 else 50
            try:
                self.check_bm25(q, n)
            except Exception as e:
                self.checked["bm25_queries"] += 1
                self.miss("bm25_error", f"after {done} ops, {q!r} top {n}: {type(e).__name__}: {e}")
        conn.execute(f"DROP TABLE temp.{FRESH}")
        try:
            self.check_crossing()
        except Exception as e:
            self.miss(
                "bm25_error", f"after {done} ops, the crossing probe: {type(e).__name__}: {e}"
            )
        conn.execute(f"DROP TABLE IF EXISTS temp.{FRESH}")
        self.fresh_ready = False
        for i in range(self.args.ref_queries):
            qvec = self.nrng.standard_normal(DIM).astype("<f4")
            q, pool = self.query(), ("recent", "all")[i % 2]
            try:
                self.check_reference(q, qvec, pool)
            except Exception as e:
                self.checked["reference_recalls"] += 1
                self.miss(
                    "reference_error",
                    f"after {done} ops, {q!r} pool {pool}: {type(e).__name__}: {e}",
                )
        n = len(self.model.ids)
        doc = dict(
            conn.execute(
                "SELECT term, doc FROM episodes_fts_vocab WHERE term IN (?, 'the', 'of')",
                (STORY_TERM,),
            ).fetchall()
        )
        stop = self.store.stopwords if hasattr(self.store, "stopwords") else None
        self.timeline.append(
            {
                "ops": done,
                "phase": self.phase(min(done, self.args.ops - 1))[0],
                "episodes": n,
                f"{STORY}_share": round(doc.get(STORY_TERM, 0) / max(n, 1), 3),
                "the_share": round(doc.get("the", 0) / max(n, 1), 3),
                "stored_stopwords": stop,
                "mismatches_so_far": sum(self.mismatch.values()),
            }
        )
        self.check_s += time.perf_counter() - t

    # ---- the run ----

    def run(self) -> Dict[str, Any]:
        a = self.args
        t0 = time.time()
        self.populate()
        populate_s = time.time() - t0
        self.checkpoint(0)
        marks = [round(a.ops * (k + 1) / a.checkpoints) for k in range(a.checkpoints)]
        done = 0
        store_turn = True
        peak_refreshed = False
        while done < a.ops:
            nxt = next(m for m in marks if m > done)
            if store_turn:
                n = min(self.rng.randint(a.segment // 2, a.segment * 3 // 2), nxt - done)
                done += self.store_segment(n, done)
            else:
                n = min(self.rng.randint(a.segment, a.segment * 3), nxt - done)
                done += self.shell_segment(n, done)
            store_turn = not store_turn
            if (
                not peak_refreshed
                and self.phase(done)[0] == "fall"
                and hasattr(self.store, "refresh_stopwords")
            ):
                # the issue's story: the stored stopwords are computed while STORY is common
                self.store.refresh_stopwords()
                self.refreshes += 1
                peak_refreshed = True
            if done == nxt:
                self.checkpoint(done)
                if not a.quiet:
                    tl = self.timeline[-1]
                    print(
                        f"  {done:>7} ops  {tl['phase']:<5} {tl['episodes']:>6} episodes, "
                        f"{STORY} in {tl[f'{STORY}_share']:.0%}, stopwords "
                        f"{tl['stored_stopwords']}, mismatches {tl['mismatches_so_far']}, "
                        f"{time.time() - t0:.0f} s",
                        flush=True,
                    )
        self.store.close()
        by_client: Counter = Counter()
        for k, v in self.ops.items():
            by_client[k.split(":")[0]] += v
        story_peak = max(t[f"{STORY}_share"] for t in self.timeline)
        report = {
            "seed": a.seed,
            "episodes_start": a.episodes,
            "episodes_end": len(self.model.ids),
            "knn": a.knn,
            "client": a.client,
            "store_merges": a.store_merges,
            "texts": a.texts,
            "ops": sum(self.ops.values()),
            "ops_by_client": dict(by_client),
            "ops_by_kind": dict(sorted(self.ops.items())),
            "rows_by_kind": dict(sorted(self.rows.items())),
            "shell_batches": self.shell_batches,
            "recall_hits_touched": self.recall_hits,
            "checked": dict(sorted(self.checked.items())),
            "mismatches": dict(sorted(self.mismatch.items())),
            "mismatch_examples": self.examples,
            f"{STORY}_peak_share": story_peak,
            "stopword_refreshes_forced": self.refreshes,
            "failures": self.failures[:50],
            "failure_count": self.failure_count,
            "timeline": self.timeline,
            "seconds": {
                "total": round(time.time() - t0, 1),
                "populate": round(populate_s, 1),
                "store": round(self.store_s, 1),
                "shell": round(self.shell_s, 1),
                "checks": round(self.check_s, 1),
            },
        }
        if report["ops"] < a.ops:
            self.fail(f"only {report['ops']} operations ran")
            report["failure_count"] = self.failure_count
            report["failures"] = self.failures[:50]
        report["ok"] = not self.failure_count and not self.mismatch
        return report


def load_scifact(folder: str) -> Tuple[List[str], List[str]]:
    """SciFact's texts (title and abstract) and queries (titles and claims)."""
    docs, claims = [], []
    with open(os.path.join(folder, "corpus.jsonl"), encoding="utf-8") as f:
        for line in f:
            d = json.loads(line)
            docs.append(f"{d['title']} {d['text']}")
            claims.append(d["title"])
    with open(os.path.join(folder, "queries.jsonl"), encoding="utf-8") as f:
        claims += [json.loads(line)["text"] for line in f]
    return docs, claims


def print_report(r: Dict[str, Any]) -> None:
    print(
        f"churn: {r['episodes_start']} -> {r['episodes_end']} episodes, {r['ops']} operations "
        f"({', '.join(f'{k} {v}' for k, v in r['ops_by_client'].items())}), "
        f"{r['shell_batches']} scripts run by the {r['client']}, knn index "
        f"{'on' if r['knn'] else 'off'}, "
        f"{'only the Store merges FTS5 segments, ' if r['store_merges'] else ''}"
        f"texts {r['texts']}, seed {r['seed']}"
    )
    print("operations by kind (rows written or removed):")
    for k, v in r["ops_by_kind"].items():
        print(f"  {k:>32}: {v:7d}  ({r['rows_by_kind'].get(k, 0)} rows)")
    print(f"{STORY} peaked in {r[f'{STORY}_peak_share']:.0%} of the episodes")
    print("checked: " + ", ".join(f"{k} {v}" for k, v in r["checked"].items()))
    print("mismatches: " + (", ".join(f"{k} {v}" for k, v in r["mismatches"].items()) or "none"))
    for e in r["mismatch_examples"][:10]:
        print("  - " + e)
    print(f"time: {r['seconds']}")
    if r["ok"]:
        print("CHURN OK")
    else:
        print(f"CHURN FAILED ({r['failure_count']} failures):")
        for f in r["failures"][:10]:
            print("  - " + f[:400])


def make_args(**kw: Any) -> argparse.Namespace:
    """The churn's settings: the command line's defaults, updated with ``kw``."""
    a = dict(
        episodes=20_000,
        ops=100_000,
        checkpoints=25,
        workdir="build/churn",
        seed=0,
        knn=False,
        segment=200,
        queries=6,
        ref_queries=4,
        quiet=False,
        paranoid=False,
        client="shell",
        store_merges=False,
        texts="zipf",
        scifact=SCIFACT,
    )
    unknown = set(kw) - set(a)
    if unknown:
        raise TypeError(f"unknown churn settings {sorted(unknown)}")
    a.update(kw)
    if not a["seed"]:
        a["seed"] = random.randrange(1, 2**31)
    return argparse.Namespace(**a)


def run(**kw: Any) -> Dict[str, Any]:
    """Run the churn (settings as :func:`make_args`); returns the report (``report['ok']``)."""
    args = make_args(**kw)
    if SHELL is None and args.client == "shell":
        raise SystemExit("churn needs the sqlite3 shell (apt-get install sqlite3)")
    if not args.quiet:
        print(
            f"churn: {args.episodes} episodes, {args.ops} operations, {args.checkpoints} "
            f"checkpoints, seed {args.seed}, {args.workdir}",
            flush=True,
        )
    return Churn(args).run()


def main(argv: Optional[List[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--episodes", type=int, default=20_000)
    p.add_argument("--ops", type=int, default=100_000)
    p.add_argument("--checkpoints", type=int, default=25)
    p.add_argument("--workdir", default="build/churn")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--knn",
        action="store_true",
        help="with the vec0 index (the shell then loads sqlite-vec, never rrf)",
    )
    p.add_argument(
        "--segment",
        type=int,
        default=200,
        help="mean Store segment length; shell scripts are 1-3 times it",
    )
    p.add_argument(
        "--queries",
        type=int,
        default=6,
        help="random BM25 queries per checkpoint, besides the 6 fixed ones",
    )
    p.add_argument(
        "--ref-queries",
        type=int,
        default=4,
        help="recalls compared with the Python reference per checkpoint",
    )
    p.add_argument(
        "--client",
        choices=("shell", "apsw"),
        default="shell",
        help="who runs the scripts: the sqlite3 shell (default), or a plain apsw "
        "connection of this process's SQLite (a control)",
    )
    p.add_argument(
        "--store-merges",
        action="store_true",
        help="a product change under test, not the product: FTS5 automerge 0 and "
        "crisismerge 100000 (stored in the index's config, so no client "
        "merges), and the Store merges ('merge', 500) after each write",
    )
    p.add_argument(
        "--paranoid",
        action="store_true",
        help="FTS5's integrity-check and PRAGMA quick_check after every Store "
        "operation and shell script (with --segment 1, scripts of 1-3 "
        "statements); stop at the first fault and keep the script and the "
        "database before it (for finding a fault)",
    )
    p.add_argument(
        "--texts",
        choices=("zipf", "scifact"),
        default="zipf",
        help="the episodes' texts: short ones over a Zipf vocabulary (default), or "
        "BEIR SciFact's abstracts, the same one again now and then, queried by "
        "SciFact titles and claims (issue 19's data)",
    )
    p.add_argument(
        "--scifact",
        default=SCIFACT,
        help="the SciFact folder (corpus.jsonl, queries.jsonl) for --texts scifact",
    )
    p.add_argument("--json", help="also write the report to this file")
    a = p.parse_args(argv)
    kw = vars(a)
    json_path = kw.pop("json")
    report = run(**kw)
    print_report(report)
    if json_path:
        with open(json_path, "w", encoding="utf-8") as f:
            json.dump(report, f, indent=2)
    return 0 if report["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
