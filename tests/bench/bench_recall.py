#!/usr/bin/env python3
"""Benchmark: the one-statement recall vs the same pipeline in application code vs BM25 alone.

Run by hand or by ``make bench`` (not part of the test suite)::

    .venv/bin/python tests/bench/bench_recall.py [--sizes 10000,100000,1000000]
                                                 [--queries N] [--repeat R] [--variant all]

In one run, for each size N:

1. builds (or reuses: cached under ``tests/bench/out/cache/``, keyed by N, the data
   version, the seed and the migrations' checksums) a memory database of N episodes
   through the real schema (``sqlite_rrf.core.migrations.migrate``; the insert, FTS5 and
   dimension triggers all fire). Content: 20-120 words (median ~68), runs of consecutive
   sentences of the SciFact abstracts, a quarter of them recombined with sentences of a
   second abstract, so the term distribution is real scientific English. Embeddings: the
   source abstract's all-MiniLM-L6-v2 vector (``corpus.minilm.npy``; a mix of the two for
   recombined episodes) plus Gaussian noise, L2-normalised float32 (384-d). ``created_at``
   spread over 2 years (rowid order = creation order), ``access_count`` Zipf(2)-1,
   ``accessed_at`` between creation and "now" (later for more-accessed episodes),
   importance 10 % low / 85 % normal / 5 % high. The build runs in a child process
   (transactions of 50,000 rows, ``PRAGMA synchronous=OFF`` during the build only, WAL
   afterwards as ``Store`` opens it; numpy in 50,000-row chunks) and reports its time
   and peak RSS;
2. takes a fixed set of queries: the first ``--queries`` (20) SciFact test claims
   (``qrels/test.tsv`` order) with their cached embeddings (``queries.minilm.npy``);
3. in a child process per size, with the database opened as ``Store`` opens it (WAL,
   extension loaded, default page cache), runs one warm-up round and then times, per
   query and interleaved (wall clock and the thread's CPU time):
   (a) the statement ``Store`` runs for pool ``recent`` and profile ``rrf``,
       ``recall_statement('recent', 'rrf')`` (DESIGN.md's four-list RRF, what (b)
       reproduces), every other parameter NULL = its default; the SELECT only (no touch,
       no transaction). Also timed: the shipped run-time-choosing ``sql/recall.sql`` with
       the same bindings (``a:shipped``, checked against (a)) and the statement's default
       profile (``a:default-profile``: ``recall_statement('recent', <default>)``,
       unchecked);
   (b) the old way in application code: the BM25 query as an application writes it with
       FTS5 alone (``MATCH fts5_query(...)``, FTS5's ``bm25()`` on every matching row,
       ``LIMIT 50``), the pool query (200 most recently accessed with embeddings, blobs
       fetched), a fetch of the BM25 hits the pool missed, numpy cosine, Python dense ranks
       and weighted RRF (``math.fsum``) over the four lists with the same weights, the
       importance boost, top 3, then ``id, content`` of the three, in one read transaction;
       (b:ours) the same application code with the product's BM25 query (stopwords dropped,
       ``rrf_bm25``), which must return exactly (a)'s rows;
   (c) the BM25 query alone (the ``bm25`` CTE's query: the product's); (c:old) the old
       way's BM25 query alone.
   The prepare of each statement is timed too (``--prepare-rounds`` runs, uncached:
   ``Connection.execute(sql, explain=1, can_cache=False)``, which prepares and returns
   before any row is read): (a), every (pool, default profile) statement Store can run
   without sqlite-vec, the shipped ``sql/recall.sql`` and the statement before the
   composition (``git show c9de0b7:sql/recall.sql``, when git can show it).
   The warm-up round's results are CHECKED: (b:ours) against (a) on every query (same ids in
   the same order, scores, similarities and BM25 scores within 1e-9, same four ranks).
   The child also records SQLite's heap high water (``apsw.memory_high_water``) and
   Python's (``tracemalloc``) for (a), (b), (c), ``EXPLAIN QUERY PLAN`` of (a), and where
   (a)'s time goes: the time of ``WITH <CTEs up to X> SELECT count(*) FROM X`` per CTE X;
4. in one small child process per method, the RSS high-water mark
   (``resource.getrusage``) of running only that method over the queries;
5. prints the tables -- median latency of (a), (b), (c), a/b, b/a, a/c, what (a) and (b)
   add to (c), build time, peak memory -- and the targets at 100k (``b/a >= 3``,
   ``a/c <= 1.25``); writes ``tests/bench/out/recall.json`` and ``recall.png`` (latency
   vs N, log-log); and the fusion target at every size: (a) <= 1.1x (b:ours), preparing
   (a) <= 2 ms.

``--variant NAME[,NAME]`` (or ``all``) also times prototype rewrites of the statement
(``VARIANTS``: the pool CTE before its fix, another pool fix, an explain ablation);
a variant with the same semantics is checked against (a), a MATCH variant's
(a') against its own (b'), with its agreement with (a) reported.

Exit status: 0 even when a target is missed (a measurement, not a test); 2 when (b) or a
variant disagrees with (a).
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import json
import math
import os
import platform
import re
import resource
import statistics
import subprocess
import sys
import time
import tracemalloc
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

try:
    import apsw
except ImportError:  # pragma: no cover - the bench extra installs it
    sys.exit("bench_recall: apsw is required (pip install apsw)")

import sqlite_rrf
from sqlite_rrf.core.migrations import available as available_migrations, migrate
from sqlite_rrf.core.sql_files import read_sql, sql_dir

HERE = os.path.dirname(os.path.abspath(__file__))
OUT_DIR = os.path.join(HERE, "out")
SCIFACT = os.environ.get(
    "SQLITE_RRF_SCIFACT",
    os.path.normpath(os.path.join(HERE, "..", "..", "..", "shared", "data", "scifact")),
)
#: Bump when the generated data changes: cached databases are keyed by it.
DATA_VERSION = 1
DIM = 384
NOW_MS = 1_735_689_600_000  # 2025-01-01T00:00:00Z: the data's fixed "now"
SPAN_MS = 2 * 365 * 86_400_000  # created_at spread over two years before NOW_MS
BUILD_TXN_ROWS = 50_000
MIN_WORDS, MAX_WORDS = 20, 120
TOLERANCE = 1e-9
TARGET_SPEEDUP = 3.0  # (a) at least 3x faster than (b), at 100k
TARGET_OVER_BM25 = 1.25  # (a) at most 1.25x (c), at 100k
TARGET_SIZE = 100_000
TARGET_OVER_B_OURS = 1.1  # (a) at most 1.1x (b:ours), at every size
TARGET_PREPARE_MS = 2.0  # preparing (a) at most 2 ms
OLD_STATEMENT_COMMIT = "c9de0b7"  # sql/recall.sql before the statements were composed
CHILD_FLAG = "--_child"

# The defaults of sql/recall.sql, restated for the application-code pipeline (b).
K, W_BM25, W_VEC, W_RECENCY, W_ACCESS = 60.0, 1.0, 1.0, 0.6, 0.4
BM25_LIMIT, POOL_SIZE, LIMIT = 50, 200, 3


#: The product's BM25 list: the statement's own CTEs up to ``bm25`` (bm25()'s exact top
#: :bm25_limit over every word, the stopword hint only a speed-up), read alone.
def _bm25_list_sql() -> str:
    from sqlite_rrf.core.sql_files import read_sql

    text = read_sql("recall.sql")
    head = text[: text.index("\n-- 2. ")]
    return (
        head.rstrip().rstrip(",")
        + "\nSELECT rowid, bm25_score FROM bm25 ORDER BY bm25_score, rowid"
    )


BM25_SQL = _bm25_list_sql()
#: The old way's BM25 query, as an application writes it with FTS5 alone: every word
#: of the query, FTS5's bm25() on every matching row.
BM25_OLD_SQL = (
    "SELECT rowid, bm25(episodes_fts) AS bm25_score FROM episodes_fts "
    "WHERE episodes_fts MATCH coalesce(fts5_query(:query), '\"\"') "
    "ORDER BY bm25_score, rowid LIMIT :bm25_limit"
)
POOL_SQL = (
    "SELECT rowid, embedding, created_at, access_count, importance FROM episodes "
    "WHERE embedding IS NOT NULL ORDER BY accessed_at DESC, rowid LIMIT :pool_size"
)
ROWS_SQL = (
    "SELECT rowid, embedding, created_at, access_count, importance FROM episodes "
    "WHERE rowid IN ({})"
)
WINNERS_SQL = "SELECT rowid, id, content FROM episodes WHERE rowid IN ({})"


# ---------------------------------------------------------------- helpers

#: The fusion (b) reproduces: DESIGN.md's four-list weighted RRF. When recall.sql has a
#: ``:profile`` parameter, (a) runs with this profile so that (b) can be checked against it.
PROFILE = "rrf"


def recall_sql() -> str:
    """The shipped run-time-choosing statement, ``sql/recall.sql``."""
    with open(os.path.join(sql_dir(), "recall.sql"), encoding="utf-8") as f:
        return f.read()


def store_sql(pool: str = "recent", profile: Optional[str] = PROFILE) -> str:
    """The statement Store runs for ``pool`` and ``profile`` (None: the default profile)."""
    from sqlite_rrf.core.statements import recall_defaults, recall_statement

    return recall_statement(pool, profile or recall_defaults()["profile"])


def old_statement() -> Optional[str]:
    """``sql/recall.sql`` as of OLD_STATEMENT_COMMIT (None when git cannot show it)."""
    try:
        proc = subprocess.run(
            ["git", "show", f"{OLD_STATEMENT_COMMIT}:sql/recall.sql"],
            cwd=HERE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            timeout=30,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return proc.stdout if proc.returncode == 0 and proc.stdout.strip() else None


def prepare_statements(sql_a: str) -> Dict[str, Optional[str]]:
    """The statements whose prepare is timed: (a), each (pool, default profile) statement
    Store runs without sqlite-vec, the shipped one, the one before the composition."""
    from sqlite_rrf.core.statements import POOLS as STORE_POOLS, recall_defaults

    default_profile = recall_defaults()["profile"]
    out: Dict[str, Optional[str]] = {"a: recent/rrf": sql_a}
    out.update({f"{p}/{default_profile}": store_sql(p, None) for p in STORE_POOLS})
    out["shipped sql/recall.sql"] = recall_sql()
    out[f"old recall.sql ({OLD_STATEMENT_COMMIT})"] = old_statement()
    return out


def prepare_ms(conn, sql: str, rounds: int) -> dict:
    """Median and min ms of preparing ``sql`` (uncached; EXPLAIN mode, so the first step
    returns the first opcode, not a row of the statement)."""
    b = dict.fromkeys(statement_params(sql))
    ts = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        cur = conn.execute(sql, b, can_cache=False, explain=1)
        ts.append((time.perf_counter() - t0) * 1e3)
        cur.close()
    return {"median_ms": statistics.median(ts), "min_ms": min(ts), "chars": len(sql)}


def schema_key() -> str:
    """Short hash of the shipped migrations: a schema change invalidates cached databases."""
    h = hashlib.sha256()
    for m in available_migrations():
        h.update(f"{m.version}:{m.checksum};".encode())
    return h.hexdigest()[:10]


def db_path(cache_dir: str, n: int, seed: int) -> str:
    return os.path.join(cache_dir, f"recall_{n}_d{DATA_VERSION}_s{seed}_{schema_key()}.db")


def maxrss_mb() -> float:
    """This process's RSS high-water mark (MB); ru_maxrss is KiB on Linux, bytes on macOS."""
    r = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return r / (1 << 20) if sys.platform == "darwin" else r / 1024


def rss_now_mb() -> float:
    try:
        with open("/proc/self/statm", encoding="ascii") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / (1 << 20)
    except OSError:
        return float("nan")


def open_db(path: str) -> "apsw.Connection":
    """Open like ``Store`` does (WAL, busy timeout, extension, migrations: a no-op here),
    without Store's wrapper, so each method runs exactly its own SQL."""
    conn = apsw.Connection(path)
    conn.set_busy_timeout(10_000)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA foreign_keys = ON")
    sqlite_rrf.load(conn)
    migrate(conn)
    return conn


def pct(xs: Sequence[float], p: float) -> float:
    return float(np.percentile(np.asarray(xs, dtype=np.float64), p))


def run_child(args: List[str], timeout: float) -> dict:
    """Run this file as a child (``CHILD_FLAG kind json-args``); its stdout's last line is JSON."""
    cmd = [sys.executable, os.path.abspath(__file__), CHILD_FLAG] + args
    # stderr is inherited: the build's progress lines show as they come
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, text=True, timeout=timeout)
    if proc.returncode != 0:
        raise RuntimeError(f"child {args[0]} failed with status {proc.returncode}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


# ---------------------------------------------------------------- data


class Corpus:
    """SciFact abstracts as sentences, their word counts and their MiniLM vectors."""

    _SPLIT = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9(\[])")

    def __init__(self, scifact: str) -> None:
        ids = json.load(open(os.path.join(scifact, "corpus.minilm.ids.json"), encoding="utf-8"))
        vecs = np.load(os.path.join(scifact, "corpus.minilm.npy")).astype(np.float32)
        row_of = {d: i for i, d in enumerate(ids)}
        self.sentences: List[str] = []
        self.words: List[int] = []
        starts, lens, rows = [], [], []
        with open(os.path.join(scifact, "corpus.jsonl"), encoding="utf-8") as f:
            for line in f:
                doc = json.loads(line)
                if doc["_id"] not in row_of:
                    continue
                sents = [s for s in self._SPLIT.split(doc["text"].strip()) if s]
                if not sents:
                    continue
                starts.append(len(self.sentences))
                lens.append(len(sents))
                rows.append(row_of[doc["_id"]])
                self.sentences.extend(sents)
                self.words.extend(len(s.split()) for s in sents)
        self.start = np.asarray(starts, dtype=np.int64)
        self.nsent = np.asarray(lens, dtype=np.int64)
        self.vecs = vecs[np.asarray(rows)]
        self.vecs /= np.linalg.norm(self.vecs, axis=1, keepdims=True)
        self.ndocs = len(starts)


def _take(corpus: Corpus, doc: int, first: int, want: int, parts: List[str]) -> int:
    """Append consecutive sentences of ``doc`` from sentence ``first`` (wrapping) until
    ``want`` words; returns the words taken."""
    s0, ns, got = int(corpus.start[doc]), int(corpus.nsent[doc]), 0
    for j in range(ns):
        i = s0 + (first + j) % ns
        parts.append(corpus.sentences[i])
        got += corpus.words[i]
        if got >= want:
            break
    return got


def make_chunk(corpus: Corpus, n_total: int, lo: int, hi: int, seed: int):
    """Rows ``lo..hi-1`` (0-based) of an N-episode database, deterministic per chunk."""
    rng = np.random.default_rng([seed, n_total, lo])
    n = hi - lo
    idx = np.arange(lo, hi, dtype=np.float64)
    created = (NOW_MS - SPAN_MS + (idx + rng.random(n)) / n_total * SPAN_MS).astype(np.int64)
    access = np.minimum(rng.zipf(2.0, n) - 1, 100_000).astype(np.int64)
    u = rng.random(n) ** (1.0 / (1.0 + access))  # more accesses -> last access more recent
    accessed = np.where(access == 0, created, created + ((NOW_MS - created) * u).astype(np.int64))
    importance = np.array(["low", "normal", "high"])[rng.choice(3, n, p=[0.10, 0.85, 0.05])]
    kinds = np.array(["observation", "decision", "conversation", "task"])[rng.integers(0, 4, n)]
    length = np.clip(np.rint(rng.lognormal(math.log(55), 0.45, n)), MIN_WORDS, MAX_WORDS).astype(
        int
    )
    doc = rng.integers(0, corpus.ndocs, n)
    doc2 = rng.integers(0, corpus.ndocs, n)
    mixed = rng.random(n) < 0.25
    split = rng.uniform(0.3, 0.7, n)
    first = rng.integers(0, 1 << 30, n)
    first2 = rng.integers(0, 1 << 30, n)

    emb = corpus.vecs[doc].copy()
    emb[mixed] = 0.6 * emb[mixed] + 0.4 * corpus.vecs[doc2[mixed]]
    emb += rng.standard_normal(emb.shape, dtype=np.float32) * np.float32(0.03)
    emb /= np.linalg.norm(emb, axis=1, keepdims=True)
    emb = emb.astype("<f4")

    rows = []
    for i in range(n):
        parts: List[str] = []
        want = int(length[i])
        if mixed[i]:
            got = _take(corpus, int(doc[i]), int(first[i]), int(want * split[i]), parts)
            got += _take(corpus, int(doc2[i]), int(first2[i]), want - got, parts)
        else:
            got = _take(corpus, int(doc[i]), int(first[i]), want, parts)
            if got < want:  # a short abstract: continue with another one
                got += _take(corpus, int(doc2[i]), int(first2[i]), want - got, parts)
        text = " ".join(parts)
        if got > MAX_WORDS or got > want + 40:
            text = " ".join(text.split()[: max(want, MIN_WORDS)])
        rows.append(
            (
                f"ep{lo + i:07d}",
                text,
                emb[i].tobytes(),
                int(created[i]),
                int(accessed[i]),
                int(access[i]),
                str(importance[i]),
                str(kinds[i]),
            )
        )
    return rows


def build_db(path: str, n: int, seed: int, key: Optional[str] = None) -> dict:
    """Create ``path`` with ``n`` episodes (in a temporary file renamed at the end, so an
    interrupted build leaves nothing that looks cached)."""
    if key is not None and key != schema_key():
        raise SystemExit("bench_recall: the migrations changed since this run started; run again")
    t0 = time.perf_counter()
    corpus = Corpus(SCIFACT)
    tmp = path + ".building"
    for suffix in ("", "-wal", "-shm", "-journal"):
        if os.path.exists(tmp + suffix):
            os.remove(tmp + suffix)
    conn = apsw.Connection(tmp)
    conn.execute("PRAGMA journal_mode = DELETE")
    conn.execute("PRAGMA synchronous = OFF")  # the build only
    conn.execute("PRAGMA cache_size = -262144")  # 256 MiB for the build
    sqlite_rrf.load(conn)
    migrate(conn)
    conn.execute(
        "INSERT INTO rrf_meta VALUES ('embedding_dim', ?), ('embedding_model', ?)",
        (DIM, "all-MiniLM-L6-v2 (SciFact rows + noise; bench_recall synthetic)"),
    )
    insert = (
        "INSERT INTO episodes(id, content, embedding, created_at, accessed_at, access_count, "
        "importance, kind) VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
    )
    words = 0
    t_gen = t_ins = 0.0
    for lo in range(0, n, BUILD_TXN_ROWS):
        hi = min(n, lo + BUILD_TXN_ROWS)
        tg = time.perf_counter()
        rows = make_chunk(corpus, n, lo, hi, seed)
        words += sum(len(r[1].split()) for r in rows) if lo == 0 else 0
        ti = time.perf_counter()
        t_gen += ti - tg
        conn.execute("BEGIN")
        conn.executemany(insert, rows)
        conn.execute("COMMIT")
        t_ins += time.perf_counter() - ti
        if n >= 200_000:
            print(
                f"  build {n:,}: {hi:,} rows, {time.perf_counter() - t0:.0f} s",
                file=sys.stderr,
                flush=True,
            )
    # the BM25 stopwords, as Store computes them after an import
    conn.execute(read_sql("stopwords.sql"), {"min_rows": None})
    conn.execute("PRAGMA journal_mode = WAL")
    stats = conn.execute(
        "SELECT count(*), avg(length(content)), min(created_at), max(created_at), "
        "avg(access_count), max(access_count), sum(importance = 'high') FROM episodes"
    ).fetchall()[0]
    stopwords = conn.execute("SELECT value FROM rrf_meta WHERE key = 'bm25_stopwords'").fetchall()[
        0
    ][0]
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    os.replace(tmp, path)
    for suffix in ("-wal", "-shm"):
        if os.path.exists(tmp + suffix):
            os.remove(tmp + suffix)
    info = {
        "n": n,
        "seed": seed,
        "data_version": DATA_VERSION,
        "schema_key": schema_key(),
        "build_s": time.perf_counter() - t0,
        "generate_s": t_gen,
        "insert_s": t_ins,
        "build_peak_rss_mb": maxrss_mb(),
        "db_bytes": os.path.getsize(path),
        "rows": stats[0],
        "avg_content_chars": stats[1],
        "avg_words_first_chunk": words / min(n, BUILD_TXN_ROWS),
        "created_span_days": (stats[3] - stats[2]) / 86_400_000,
        "avg_access_count": stats[4],
        "max_access_count": stats[5],
        "high_importance": stats[6],
        "bm25_stopwords": stopwords,
    }
    with open(path + ".json", "w", encoding="utf-8") as f:
        json.dump(info, f, indent=2)
    return info


def ensure_db(cache_dir: str, n: int, seed: int, rebuild: bool) -> Tuple[str, dict, bool]:
    """(path, build info, built now?) — builds in a child process when not cached."""
    os.makedirs(cache_dir, exist_ok=True)
    path = db_path(cache_dir, n, seed)
    if not rebuild and os.path.exists(path) and os.path.exists(path + ".json"):
        with open(path + ".json", encoding="utf-8") as f:
            return path, json.load(f), False
    info = run_child(
        ["build", json.dumps({"path": path, "n": n, "seed": seed, "schema_key": schema_key()})],
        timeout=7200,
    )
    return path, info, True


def load_queries(n: int) -> List[Tuple[str, str, bytes]]:
    """The first ``n`` SciFact test claims: (query id, text, float32 embedding blob)."""
    order: List[str] = []
    with open(os.path.join(SCIFACT, "qrels", "test.tsv"), encoding="utf-8") as f:
        next(f)
        for line in f:
            qid = line.split("\t")[0]
            if qid not in order:
                order.append(qid)
    text = {}
    with open(os.path.join(SCIFACT, "queries.jsonl"), encoding="utf-8") as f:
        for line in f:
            q = json.loads(line)
            text[q["_id"]] = q["text"]
    ids = json.load(open(os.path.join(SCIFACT, "queries.minilm.ids.json"), encoding="utf-8"))
    vecs = np.load(os.path.join(SCIFACT, "queries.minilm.npy")).astype("<f4")
    row = {q: i for i, q in enumerate(ids)}
    picked = [q for q in order if q in row and q in text][:n]
    if len(picked) < n:
        raise SystemExit(f"only {len(picked)} SciFact test claims with embeddings; asked for {n}")
    return [(q, text[q], vecs[row[q]].tobytes()) for q in picked]


# ---------------------------------------------------------------- the three methods


@functools.lru_cache(maxsize=64)
def statement_params(sql: str) -> Tuple[str, ...]:
    """The named parameters of ``sql`` (``:name``), in order of first use. Cached: the
    scan takes ~5 ms on recall.sql, which must not be timed as part of (a)."""
    names: List[str] = []
    for m in re.finditer(r"[:@$]([A-Za-z_][A-Za-z0-9_]*)", strip_comments(sql)):
        if m.group(1) not in names:
            names.append(m.group(1))
    return tuple(names)


def recall_bindings(
    query: str, qvec: bytes, *, names: Sequence[str] = (), profile: Optional[str] = PROFILE
) -> Dict[str, Any]:
    """(a)'s parameters: pool 'recent', profile ``profile`` (when the statement has one),
    everything else NULL = the statement's default. ``names``: every parameter of the
    statement (apsw wants a value for each; unknown keys are ignored)."""
    b: Dict[str, Any] = dict.fromkeys(names)
    b.update(
        {
            "query": query,
            "qvec": qvec,
            "pool": "recent",
            "k": None,
            "w_bm25": None,
            "w_vec": None,
            "w_recency": None,
            "w_access": None,
            "bm25_limit": None,
            "pool_size": None,
            "limit": None,
            "profile": profile,
        }
    )
    return b


def method_a(conn, sql: str, query: str, qvec: bytes, profile: Optional[str] = PROFILE) -> list:
    return conn.execute(
        sql, recall_bindings(query, qvec, names=statement_params(sql), profile=profile)
    ).fetchall()


def bm25_bindings(sql: str, query: str) -> Dict[str, Any]:
    """The BM25 query's parameters: every name of ``sql`` (NULL = the statement's default),
    the query and the limit."""
    b: Dict[str, Any] = dict.fromkeys(statement_params(sql))
    b.update(query=query, bm25_limit=BM25_LIMIT)
    return b


def method_c(conn, query: str, bm25_sql: Optional[str] = None) -> list:
    bm25_sql = bm25_sql or BM25_SQL
    return conn.execute(bm25_sql, bm25_bindings(bm25_sql, query)).fetchall()


def _dense_ranks(values: Sequence[Any], reverse: bool = True) -> Dict[Any, int]:
    """value -> dense rank (1 = largest when reverse)."""
    return {v: i + 1 for i, v in enumerate(sorted(set(values), reverse=reverse))}


def bm25_rank_is_dense(sql: str) -> bool:
    """Whether the statement's bm25 list ranks with dense_rank() (ties share a rank) or
    row_number() (earlier versions of recall.sql); (b) follows it."""
    text = re.sub(r"\s+", " ", strip_comments(sql))
    if re.search(r"dense_rank\(\) OVER \( ?ORDER BY bm25_score", text):
        return True
    if re.search(r"row_number\(\) OVER \( ?ORDER BY bm25_score", text):
        return False
    raise ValueError("cannot tell how recall.sql ranks the bm25 list; update method_b")


def method_b(
    conn, query: str, qvec: bytes, bm25_sql: str = BM25_OLD_SQL, dense_bm25: bool = True
) -> List[dict]:
    """The old design in application code: the fusion of sql/recall.sql (pool 'recent',
    default parameters). With ``bm25_sql=BM25_SQL`` (the product's BM25 query) its results
    are checked against (a); with the old way's FTS5 query (the default) their agreement
    with (a) is reported (they differ only where rows matched by stopwords alone reach
    the BM25 top 50)."""
    conn.execute("BEGIN")  # one snapshot for the four reads, as a correct app would
    try:
        hits = conn.execute(bm25_sql, bm25_bindings(bm25_sql, query)).fetchall()
        pool = conn.execute(POOL_SQL, {"pool_size": POOL_SIZE}).fetchall()
        in_pool = {r[0] for r in pool}
        missed = [rid for rid, _ in hits if rid not in in_pool]
        rows = list(pool)
        if missed:
            rows += conn.execute(ROWS_SQL.format(",".join("?" * len(missed))), missed).fetchall()
        # numpy cosine, once per candidate with an embedding
        q = np.frombuffer(qvec, dtype="<f4").astype(np.float64)
        with_emb = [i for i, r in enumerate(rows) if r[1] is not None]
        sims: List[Optional[float]] = [None] * len(rows)
        if with_emb:
            m = np.frombuffer(b"".join(rows[i][1] for i in with_emb), dtype="<f4")
            m = m.reshape(len(with_emb), -1).astype(np.float64)
            norms = np.linalg.norm(m, axis=1) * np.linalg.norm(q)
            dots = m @ q
            for i, d, nrm in zip(with_emb, dots.tolist(), norms.tolist()):
                sims[i] = d / nrm if nrm > 0 else None
        # four ranked lists (dense ranks, 1 = best)
        if dense_bm25:  # ties share a rank (the scores are negative: lower is better)
            of = _dense_ranks([sc for _, sc in hits], reverse=False)
            bm25_rank = {rid: of[sc] for rid, sc in hits}
        else:
            bm25_rank = {rid: i + 1 for i, (rid, _) in enumerate(hits)}
        bm25_score = dict(hits)
        vec_of = _dense_ranks([s for s in sims if s is not None])
        rec_of = _dense_ranks([r[2] for r in rows])
        acc_of = _dense_ranks([r[3] for r in rows])
        hi_boost = 1.0 / (K + 1) - 1.0 / (K + 11)
        scored = []
        for r, sim in zip(rows, sims):
            rid = r[0]
            ranks = (
                bm25_rank.get(rid),
                None if sim is None else vec_of[sim],
                rec_of[r[2]],
                acc_of[r[3]],
            )
            terms = [
                w / (K + rk)
                for w, rk in zip((W_BM25, W_VEC, W_RECENCY, W_ACCESS), ranks)
                if w > 0 and rk is not None
            ]
            score = math.fsum(terms) if terms else 0.0
            if r[4] == "high":
                score += hi_boost
            scored.append((score, sim, rid, ranks))
        # ties: similarity, then recency and use (recall.sql since 68e16f7), then rowid
        scored.sort(key=lambda t: (-t[0], t[1] is None, -(t[1] or 0.0), t[3][2], t[3][3], t[2]))
        top = scored[:LIMIT]
        text = {}
        if top:
            text = {
                rid: (eid, content)
                for rid, eid, content in conn.execute(
                    WINNERS_SQL.format(",".join("?" * len(top))), [t[2] for t in top]
                ).fetchall()
            }
    finally:
        conn.execute("COMMIT")
    return [
        {
            "id": text[rid][0],
            "content": text[rid][1],
            "score": score,
            "bm25_rank": rk[0],
            "vec_rank": rk[1],
            "recency_rank": rk[2],
            "access_rank": rk[3],
            "similarity": sim,
            "bm25_score": bm25_score.get(rid),
            "rowid": rid,
        }
        for score, sim, rid, rk in top
    ]


def a_as_dicts(rows: list) -> List[dict]:
    """(a)'s rows (the statement's column order) as dicts."""
    keys = (
        "id",
        "content",
        "score",
        "bm25_rank",
        "vec_rank",
        "recency_rank",
        "access_rank",
        "similarity",
        "bm25_score",
    )
    return [
        dict(zip(keys, r[:9]), explain=json.loads(r[9]) if r[9] else {}, rowid=r[-1]) for r in rows
    ]


def _explain_diff(a: dict, b: dict) -> Optional[str]:
    """None when two rrf_explain objects agree (numbers within TOLERANCE)."""
    if a.keys() != b.keys():
        return f"explain lists {sorted(a)} vs {sorted(b)}"
    for lst in a:
        x, y = a[lst], b[lst]
        if not isinstance(x, dict) or not isinstance(y, dict) or x.keys() != y.keys():
            return f"explain[{lst}] {x!r} vs {y!r}"
        for key in x:
            u, v = x[key], y[key]
            if isinstance(u, (int, float)) and isinstance(v, (int, float)):
                if abs(u - v) > TOLERANCE:
                    return f"explain[{lst}][{key}] {u!r} vs {v!r}"
            elif u != v:
                return f"explain[{lst}][{key}] {u!r} vs {v!r}"
    return None


def compare(ref: List[dict], got: List[dict], explain: bool = True) -> List[str]:
    """Differences between two results ([] when they agree within TOLERANCE)."""
    if [r["id"] for r in ref] != [g["id"] for g in got]:
        return [
            f"ids {[r['id'] for r in ref]} vs {[g['id'] for g in got]} (scores "
            f"{[round(r['score'], 12) for r in ref]} vs {[round(g['score'], 12) for g in got]})"
        ]
    out = []
    for r, g in zip(ref, got):
        for key in ("score", "similarity", "bm25_score"):
            a, b = r[key], g[key]
            if (a is None) != (b is None) or (a is not None and abs(a - b) > TOLERANCE):
                out.append(f"{r['id']}: {key} {a!r} vs {b!r}")
        for key in ("bm25_rank", "vec_rank", "recency_rank", "access_rank"):
            if r[key] != g[key]:
                out.append(f"{r['id']}: {key} {r[key]!r} vs {g[key]!r}")
        if explain and "explain" in r and "explain" in g:  # two statements: explanations too
            d = _explain_diff(r["explain"], g["explain"])
            if d:
                out.append(f"{r['id']}: {d}")
    return out


# ---------------------------------------------------------------- CTE parsing (stage timings)


def strip_comments(sql: str) -> str:
    """``sql`` without its ``--`` and ``/* */`` comments (string literals kept as they are)."""
    i, n = 0, len(sql)
    buf = []
    while i < n:
        c = sql[i]
        if c == "'":
            j = sql.index("'", i + 1)
            while j + 1 < n and sql[j + 1] == "'":
                j = sql.index("'", j + 2)
            buf.append(sql[i : j + 1])
            i = j + 1
        elif sql.startswith("--", i):
            i = sql.find("\n", i)
            i = n if i < 0 else i
        elif sql.startswith("/*", i):
            i = sql.index("*/", i) + 2
        else:
            buf.append(c)
            i += 1
    return "".join(buf)


def split_ctes(sql: str) -> Tuple[List[Tuple[str, str]], str]:
    """``WITH a AS (...), b AS MATERIALIZED (...) SELECT ...`` -> ([(name, 'a AS (...)'), ...],
    final SELECT). Comments dropped; string literals respected."""
    out: List[Tuple[str, str]] = []
    text = strip_comments(sql).strip().rstrip(";")
    m = re.match(r"(?is)\s*WITH\s+", text)
    if not m:
        return [], text
    pos = m.end()
    while True:
        m = re.compile(r"(?is)\s*(\w+)\s+AS\s+(?:NOT\s+)?(?:MATERIALIZED\s+)?\(").match(text, pos)
        if not m:
            break
        depth, j = 1, m.end()
        while depth:
            c = text[j]
            if c == "'":
                j = text.index("'", j + 1)
            elif c == "(":
                depth += 1
            elif c == ")":
                depth -= 1
            j += 1
        out.append((m.group(1), text[m.start() : j].strip()))
        pos = j
        m2 = re.compile(r"\s*,").match(text, pos)
        if not m2:
            break
        pos = m2.end()
    return out, text[pos:].strip()


def stage_sqls(sql: str) -> List[Tuple[str, str]]:
    """(stage, SQL) pairs: ``WITH <ctes up to stage> SELECT count(*) FROM stage``, then the
    whole statement."""
    ctes, final = split_ctes(sql)
    out = []
    for i, (name, _) in enumerate(ctes):
        if name == "params":
            continue
        body = ",\n".join(c for _, c in ctes[: i + 1])
        out.append((name, f"WITH {body}\nSELECT count(*) FROM {name}"))
    out.append(("(whole statement)", sql))
    return out


def _replace_cte(sql: str, name: str, new_body: str) -> str:
    """``sql`` with its CTE ``name`` replaced by ``new_body`` (``name AS (...)``)."""
    ctes, final = split_ctes(sql)
    if name not in [c for c, _ in ctes]:
        raise ValueError(f"recall.sql has no CTE {name!r}")
    parts = [new_body if c == name else body for c, body in ctes]
    return "WITH\n" + ",\n".join(parts) + "\n" + final


# ---------------------------------------------------------------- variants (prototypes)

# The pool CTE of recall.sql as of commit 7eb951d: its 'all' branch was gated by a scalar
# subquery, `(SELECT pool FROM params) = 'all'`, which is not a constant WHERE term, so
# every 'recent' recall stepped through all of episodes (fixed in b72888d by making
# params the outer loop of a CROSS JOIN). Timed to show what the fix is worth.
POOL_7EB951D_CTE = """pool AS (
  SELECT rowid
  FROM (SELECT rowid FROM episodes
        WHERE embedding IS NOT NULL
        ORDER BY accessed_at DESC, rowid
        LIMIT (SELECT pool_size FROM params))
  WHERE (SELECT pool FROM params) = 'recent'
  UNION ALL
  SELECT rowid FROM episodes
  WHERE embedding IS NOT NULL AND (SELECT pool FROM params) = 'all'
)"""

# Another fix that keeps the defaults in `params` and does not depend on join order:
# each branch's LIMIT is 0 when its mode is off, and SQLite never enters a LIMIT-0 loop.
POOL_LIMIT_CTE = """pool AS (
  SELECT rowid
  FROM (SELECT rowid FROM episodes
        WHERE embedding IS NOT NULL
        ORDER BY accessed_at DESC, rowid
        LIMIT (SELECT CASE pool WHEN 'recent' THEN pool_size ELSE 0 END FROM params))
  UNION ALL
  SELECT rowid
  FROM (SELECT rowid FROM episodes
        WHERE embedding IS NOT NULL
        LIMIT (SELECT CASE pool WHEN 'all' THEN -1 ELSE 0 END FROM params))
)"""


class Variant:
    def __init__(
        self,
        doc: str,
        pool_cte: Optional[str] = None,
        match_fn: Optional[str] = None,
        no_explain: bool = False,
    ):
        self.doc, self.pool_cte, self.match_fn, self.no_explain = (
            doc,
            pool_cte,
            match_fn,
            no_explain,
        )


VARIANTS: Dict[str, Variant] = {
    "pool-7eb951d": Variant(
        "the pool CTE as of 7eb951d (its 'all' branch gated by a scalar subquery: every "
        "'recent' recall also stepped through all of episodes) -- what the b72888d fix is worth",
        POOL_7EB951D_CTE,
    ),
    "pool-limit": Variant(
        "another pool fix: each branch's LIMIT is 0 when its mode is off (SQLite skips a "
        "LIMIT-0 loop; no reliance on join order); the defaults stay in params",
        POOL_LIMIT_CTE,
    ),
    "no-explain": Variant(
        "ablation, not a proposal: every rrf_explain(...) replaced by NULL -- what explaining "
        "every candidate (not just the :limit returned) costs; checked except for the "
        "explain column",
        no_explain=True,
    ),
}


def _with_match_fn(sql: str, fn: Optional[str]) -> str:
    if not fn:
        return sql
    if sql.count("fts5_query(:query)") != 1:
        raise ValueError("expected exactly one fts5_query(:query) in the statement")
    return sql.replace("fts5_query(:query)", f"{fn}(fts5_query(:query))")


def _null_calls(sql: str, fn: str) -> str:
    """``sql`` with every call ``fn(...)`` replaced by NULL (parentheses matched)."""
    out, pos = [], 0
    pat = re.compile(r"\b%s\s*\(" % re.escape(fn))
    while True:
        m = pat.search(sql, pos)
        if not m:
            break
        depth, j = 1, m.end()
        while depth:
            c = sql[j]
            if c == "'":
                j = sql.index("'", j + 1)
            depth += (c == "(") - (c == ")")
            j += 1
        out += [sql[pos : m.start()], "NULL"]
        pos = j
    if not out:
        raise ValueError(f"the statement has no {fn}(...) call")
    return "".join(out) + sql[pos:]


def variant_sql(name: str, base: str) -> str:
    """sql/recall.sql rewritten as the prototype ``name`` (ValueError: not applicable)."""
    v = VARIANTS[name]
    sql = _replace_cte(base, "pool", v.pool_cte) if v.pool_cte else base
    if v.no_explain:
        sql = _null_calls(sql, "rrf_explain")
    return _with_match_fn(sql, v.match_fn)


def variant_bm25_sql(name: str) -> str:
    return _with_match_fn(BM25_SQL, VARIANTS[name].match_fn)


# ---------------------------------------------------------------- child: timing


def child_time(cfg: dict) -> dict:
    """Time (a), (b), (c) and the variants over the queries, check (b) and the variants
    against (a), and measure memory; runs in its own process."""
    rss0 = maxrss_mb()
    conn = open_db(cfg["db"])
    so = sqlite_rrf.loadable_path()
    so = next((so + sfx for sfx in (".so", ".dylib", ".dll", "") if os.path.exists(so + sfx)), so)
    ext = {
        "path": so,
        "mtime": os.path.getmtime(so) if os.path.exists(so) else None,
        "rrf_debug": conn.execute("SELECT rrf_debug()").fetchall()[0][0],
    }
    queries = load_queries(cfg["queries"])
    sql_a = cfg["sql"]
    pnames = statement_params(sql_a)
    bm25_dense = bm25_rank_is_dense(sql_a)
    methods: Dict[str, Callable[[str, bytes], Any]] = {
        "a": lambda q, v: method_a(conn, sql_a, q, v),
        "b": lambda q, v: method_b(conn, q, v, dense_bm25=bm25_dense),
        "c": lambda q, v: method_c(conn, q),
        # the application-code pipeline with the product's BM25 query (stopwords, rrf_bm25)
        "b:ours": lambda q, v: method_b(conn, q, v, BM25_SQL, dense_bm25=bm25_dense),
        # the old way's BM25 query alone
        "c:old": lambda q, v: method_c(conn, q, BM25_OLD_SQL),
    }
    sql_shipped = cfg["statements"]["shipped"]
    sql_default = cfg["statements"]["default"]
    # the shipped run-time-choosing statement, same bindings: checked against (a)
    methods["a:shipped"] = lambda q, v: method_a(conn, sql_shipped, q, v)
    # the statement of the default profile, unchecked
    methods["a:default-profile"] = lambda q, v: method_a(conn, sql_default, q, v, profile=None)
    # the fusion alone: an empty query matches nothing, so no full-text work (pool only)
    methods["a@empty"] = lambda q, v: method_a(conn, sql_a, "", v)
    methods["b@empty"] = lambda q, v: method_b(conn, "", v, dense_bm25=bm25_dense)
    checks: List[Tuple[str, str]] = [
        ("b:ours", "a"),
        ("b@empty", "a@empty"),
        ("a:shipped", "a"),
    ]  # must agree
    # (variant, original): how often they agree
    agreement: List[Tuple[str, str]] = [("b", "a"), ("c:old", "c")]
    variant_sqls: Dict[str, str] = {}
    for v in cfg["variants"]:
        vsql = variant_sql(v, sql_a)
        variant_sqls[v] = vsql
        methods["a:" + v] = (lambda s: lambda q, qv: method_a(conn, s, q, qv))(vsql)
        if VARIANTS[v].match_fn:
            bsql = variant_bm25_sql(v)
            methods["b:" + v] = (lambda s: lambda q, qv: method_b(conn, q, qv, s, bm25_dense))(bsql)
            methods["c:" + v] = (lambda s: lambda q, qv: method_c(conn, q, s))(bsql)
            checks.append(("b:" + v, "a:" + v))
            agreement += [("a:" + v, "a"), ("c:" + v, "c")]
        else:
            checks.append(("a:" + v, "a"))

    # warm-up round; its results are the ones checked
    results: Dict[str, Dict[str, Any]] = {name: {} for name in methods}
    for qid, text, qvec in queries:
        for name, fn in methods.items():
            r = fn(text, qvec)
            results[name][qid] = a_as_dicts(r) if name.startswith("a") else r
    if not results["a@empty"][queries[0][0]]:
        raise SystemExit("bench_recall: the empty query returned nothing (no pool?)")
    mismatches: Dict[str, List[str]] = {}
    for name, ref in checks:
        for qid, _, _ in queries:
            ablated = name[2:] in VARIANTS and VARIANTS[name[2:]].no_explain
            diff = compare(results[ref][qid], results[name][qid], explain=not ablated)
            if diff:
                mismatches.setdefault(name, []).append(f"query {qid}: " + "; ".join(diff))
    agree: Dict[str, dict] = {}
    for name, ref in agreement:
        if name.startswith(("a", "b")):
            same3 = sum(
                [r["id"] for r in results[name][q]] == [r["id"] for r in results[ref][q]]
                for q, _, _ in queries
            )
            same_set = sum(
                {r["id"] for r in results[name][q]} == {r["id"] for r in results[ref][q]}
                for q, _, _ in queries
            )
            agree[name] = {
                "top3_identical": same3 / len(queries),
                "top3_same_set": same_set / len(queries),
                "vs": ref,
            }
        else:
            ov = [
                len({r[0] for r in results[name][q]} & {r[0] for r in results[ref][q]})
                / max(1, len(results[ref][q]))
                for q, _, _ in queries
            ]
            agree[name] = {"bm25_top50_overlap": statistics.fmean(ov), "vs": ref}

    # timing: R rounds x Q queries, methods interleaved (order rotated per query);
    # wall clock and this thread's CPU time (the machine may be shared)
    names = list(methods)
    wall: Dict[str, List[float]] = {m: [] for m in names}
    cpu: Dict[str, List[float]] = {m: [] for m in names}
    per_query: Dict[str, Dict[str, List[float]]] = {m: {} for m in names}
    per_query_cpu: Dict[str, Dict[str, List[float]]] = {m: {} for m in names}
    for rep in range(cfg["repeat"]):
        for qi, (qid, text, qvec) in enumerate(queries):
            shift = (rep + qi) % len(names)
            for name in names[shift:] + names[:shift]:
                fn = methods[name]
                c0 = time.thread_time()
                t0 = time.perf_counter()
                fn(text, qvec)
                t1 = time.perf_counter()
                c1 = time.thread_time()
                wall[name].append((t1 - t0) * 1e3)
                cpu[name].append((c1 - c0) * 1e3)
                per_query[name].setdefault(qid, []).append((t1 - t0) * 1e3)
                per_query_cpu[name].setdefault(qid, []).append((c1 - c0) * 1e3)

    # the prepare of each statement (uncached)
    prepare = {
        label: prepare_ms(conn, text, cfg["prepare_rounds"])
        for label, text in cfg["statements"]["prepare"].items()
        if text
    }

    # per-CTE cumulative timings of (a) (and of the first variant's statement)
    stages: Dict[str, List[dict]] = {}
    if cfg["stages"]:
        srounds = max(1, min(3, cfg["repeat"]))
        targets_ = [("a", sql_a)] + [("a:" + v, variant_sqls[v]) for v in cfg["variants"][:1]]
        for label, ssql_full in targets_:
            stages[label] = []
            for stage, ssql in stage_sqls(ssql_full):
                conn.execute(
                    ssql, recall_bindings(queries[0][1], queries[0][2], names=pnames)
                ).fetchall()
                st, sc = [], []
                for _ in range(srounds):
                    for qid, text, qvec in queries:
                        c0 = time.thread_time()
                        t0 = time.perf_counter()
                        conn.execute(ssql, recall_bindings(text, qvec, names=pnames)).fetchall()
                        st.append((time.perf_counter() - t0) * 1e3)
                        sc.append((time.thread_time() - c0) * 1e3)
                stages[label].append(
                    {
                        "stage": stage,
                        "median_ms": statistics.median(st),
                        "median_cpu_ms": statistics.median(sc),
                    }
                )
    plans = {"a": explain_plan(conn, sql_a, queries[0])}
    for v in cfg["variants"]:
        plans["a:" + v] = explain_plan(conn, variant_sqls[v], queries[0])

    # how many rows the fusion works on, and how many rows the MATCH scores
    ctes = split_ctes(sql_a)[0]
    upto = [n for n, _ in ctes].index("candidates") + 1
    cand_sql = (
        "WITH "
        + ",\n".join(b for _, b in ctes[:upto])
        + "\nSELECT (SELECT count(*) FROM candidates), (SELECT count(*) FROM bm25)"
    )
    counts = [
        conn.execute(cand_sql, recall_bindings(t, v, names=pnames)).fetchall()[0]
        for _, t, v in queries
    ]
    matching: Dict[str, List[int]] = {"c": [], "c:old": []}
    for v in cfg["variants"]:
        if VARIANTS[v].match_fn:
            matching["c:" + v] = []
    for _, text, _ in queries:
        for key in matching:
            fn = (
                "fts5_query(?, 'or', (SELECT value FROM rrf_meta WHERE key = 'bm25_stopwords'), "
                "'porter unicode61')"
                if key == "c"
                else "fts5_query(?)"
                if key == "c:old"
                else f"{VARIANTS[key[2:]].match_fn}(fts5_query(?))"
            )
            matching[key].append(
                conn.execute(
                    f"SELECT count(*) FROM episodes_fts WHERE episodes_fts MATCH coalesce({fn}, '\"\"')",
                    (text,),
                ).fetchall()[0][0]
            )

    # memory of (a), (b), (c): SQLite heap high water and Python (tracemalloc) peak
    memory = {}
    base_used = apsw.memory_used()
    for name in ("a", "b", "c"):
        apsw.memory_high_water(True)
        for _, text, qvec in queries:
            methods[name](text, qvec)
        memory[name] = {
            "sqlite_heap_peak_mb": apsw.memory_high_water(True) / (1 << 20),
            "sqlite_heap_base_mb": base_used / (1 << 20),
        }
    tracemalloc.start()
    for name in ("a", "b", "c"):
        tracemalloc.reset_peak()
        t0, _ = tracemalloc.get_traced_memory()
        for _, text, qvec in queries:
            methods[name](text, qvec)
        memory[name]["python_peak_kb"] = (tracemalloc.get_traced_memory()[1] - t0) / 1024
    tracemalloc.stop()
    conn.close()

    def summary(w: List[float], c: List[float]) -> dict:
        return {
            "median_ms": statistics.median(w),
            "mean_ms": statistics.fmean(w),
            "p10_ms": pct(w, 10),
            "p90_ms": pct(w, 90),
            "min_ms": min(w),
            "median_cpu_ms": statistics.median(c),
            "p10_cpu_ms": pct(c, 10),
            "p90_cpu_ms": pct(c, 90),
            "samples": len(w),
        }

    return {
        "methods": {m: summary(wall[m], cpu[m]) for m in names},
        "per_query_median_ms": {
            m: {q: statistics.median(v) for q, v in per_query[m].items()} for m in names
        },
        "per_query_median_cpu_ms": {
            m: {q: statistics.median(v) for q, v in per_query_cpu[m].items()} for m in names
        },
        "mismatches": mismatches,
        "prepare": prepare,
        "checks": [f"{m} vs {r}" for m, r in checks],
        "agreement": agree,
        "stages": stages,
        "plans": plans,
        "candidates": {
            "median": statistics.median(c for c, _ in counts),
            "min": min(c for c, _ in counts),
            "max": max(c for c, _ in counts),
        },
        "bm25_hits_returned_median": statistics.median(b for _, b in counts),
        "bm25_matching_rows": {
            k: {"median": statistics.median(v), "min": min(v), "max": max(v)}
            for k, v in matching.items()
        },
        "memory": memory,
        "child_rss_start_mb": rss0,
        "child_peak_rss_mb": maxrss_mb(),
        "recall_sql_sha256": hashlib.sha256(sql_a.encode()).hexdigest(),
        "extension": ext,
    }


def explain_plan(conn, sql: str, query: Tuple[str, str, bytes]) -> List[str]:
    """EXPLAIN QUERY PLAN of ``sql`` as indented lines."""
    rows = conn.execute(
        "EXPLAIN QUERY PLAN " + sql,
        recall_bindings(query[1], query[2], names=statement_params(sql)),
    ).fetchall()
    depth: Dict[int, int] = {0: -1}
    lines = []
    for node, parent, _, detail in rows:
        depth[node] = depth.get(parent, -1) + 1
        lines.append("  " * depth[node] + detail)
    return lines


# ---------------------------------------------------------------- child: RSS of one method


def child_rss(cfg: dict) -> dict:
    """RSS high-water mark of one method run over all the queries (its own process)."""
    conn = open_db(cfg["db"])
    queries = load_queries(cfg["queries"])
    sql_a = cfg["sql"]
    dense = bm25_rank_is_dense(sql_a)
    m = cfg["method"]
    fn = {
        "a": lambda t, v: method_a(conn, sql_a, t, v),
        "b": lambda t, v: method_b(conn, t, v, dense_bm25=dense),
        "c": lambda t, v: method_c(conn, t),
    }[m]
    before = maxrss_mb()
    now_before = rss_now_mb()
    for _ in range(2):
        for _, text, qvec in queries:
            fn(text, qvec)
    conn.close()
    return {
        "method": m,
        "peak_rss_mb": maxrss_mb(),
        "rss_before_mb": now_before,
        "peak_before_mb": before,
        "delta_mb": maxrss_mb() - before,
    }


# ---------------------------------------------------------------- main


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--sizes",
        default="10000,100000,1000000",
        help="comma-separated episode counts (default 10000,100000,1000000)",
    )
    ap.add_argument("--queries", type=int, default=20, help="SciFact test claims (default 20)")
    ap.add_argument(
        "--repeat", type=int, default=5, help="timed rounds over the queries (default 5)"
    )
    ap.add_argument("--seed", type=int, default=20240607)
    ap.add_argument(
        "--variant",
        default="",
        help="comma-separated prototype rewrites of recall.sql to time too "
        f"({', '.join(VARIANTS)}), or 'all'",
    )
    ap.add_argument("--no-stages", action="store_true", help="skip the per-CTE timings")
    ap.add_argument(
        "--stages-max-n",
        type=int,
        default=200_000,
        help="per-CTE timings only up to this size (default 200000: slow and noisy beyond)",
    )
    ap.add_argument("--no-rss", action="store_true", help="skip the per-method RSS children")
    ap.add_argument(
        "--prepare-rounds",
        type=int,
        default=50,
        help="uncached prepares per statement (default 50)",
    )
    ap.add_argument("--rebuild", action="store_true", help="rebuild the cached databases")
    ap.add_argument(
        "--cache-dir",
        default=os.path.join(OUT_DIR, "cache"),
        help="where the built databases are kept (default tests/bench/out/cache)",
    )
    ap.add_argument("--out", default=OUT_DIR, help="directory for recall.json / recall.png")
    ap.add_argument("--no-plot", action="store_true")
    args = ap.parse_args(argv)
    try:
        sizes = [int(s.replace("_", "")) for s in args.sizes.split(",") if s.strip()]
    except ValueError:
        ap.error(f"--sizes: not a list of integers: {args.sizes!r}")
    variants = (
        list(VARIANTS) if args.variant == "all" else [v for v in args.variant.split(",") if v]
    )
    for v in variants:
        if v not in VARIANTS:
            ap.error(f"unknown variant {v!r}; known: {', '.join(VARIANTS)}")
    if args.repeat < 1 or args.queries < 1 or not sizes or min(sizes) < 1:
        ap.error("--repeat, --queries and --sizes must be positive")

    t_start = time.perf_counter()
    sql_a = store_sql()  # the statement Store runs: pool 'recent', profile 'rrf'
    # every statement read once, here: the children read them from this file (argv is
    # too small for them), so a change of the SQL files during the run changes nothing
    statements = {
        "a": sql_a,
        "shipped": recall_sql(),
        "default": store_sql("recent", None),
        "bm25": BM25_SQL,
        "prepare": prepare_statements(sql_a),
    }
    os.makedirs(args.out, exist_ok=True)
    statements_file = os.path.join(args.out, "recall_statements.json")
    with open(statements_file, "w", encoding="utf-8") as f:
        json.dump(statements, f)

    skipped = {}
    for v in list(variants):
        try:
            variant_sql(v, sql_a)
        except ValueError as e:
            skipped[v] = str(e)
            variants.remove(v)
            print(f"variant {v}: not applicable to this recall.sql ({e}); skipped")
    info = {
        "sizes": sizes,
        "queries": args.queries,
        "repeat": args.repeat,
        "seed": args.seed,
        "variants": {v: VARIANTS[v].doc for v in variants},
        "variants_skipped": skipped,
        "profile": PROFILE if "profile" in statement_params(sql_a) else None,
        "bm25_rank": "dense_rank" if bm25_rank_is_dense(sql_a) else "row_number",
        "data_version": DATA_VERSION,
        "python": platform.python_version(),
        "machine": platform.machine(),
        "cpu": _cpu_name(),
        "cpus": os.cpu_count(),
        "sqlite": apsw.sqlite_lib_version(),
        "apsw": apsw.apsw_version(),
        "numpy": np.__version__,
        "sqlite_rrf": sqlite_rrf.__version__,
        "recall_sql_sha256": hashlib.sha256(sql_a.encode()).hexdigest(),
        "statements_sha256": {
            k: hashlib.sha256(v.encode()).hexdigest()[:16]
            for k, v in statements.items()
            if isinstance(v, str)
        },
        "loadavg_start": _loadavg(),
    }
    probe = apsw.Connection(":memory:")
    sqlite_rrf.load(probe)
    info["rrf_version"], info["rrf_debug"] = probe.execute(
        "SELECT rrf_version(), rrf_debug()"
    ).fetchall()[0]
    probe.close()
    print(
        f"sqlite-rrf {info['sqlite_rrf']}, SQLite {info['sqlite']}, apsw {info['apsw']}, "
        f"numpy {info['numpy']}, Python {info['python']}"
    )
    print(f"CPU: {info['cpu']} ({info['cpus']} cpus); load average {info['loadavg_start']}")
    print(
        f"{args.queries} SciFact test claims x {args.repeat} rounds per method and size "
        f"(median of {args.queries * args.repeat} samples, after a warm-up round); "
        f"(a): pool 'recent', "
        + (f"profile '{info['profile']}', " if info["profile"] else "")
        + "other parameters their defaults"
    )
    for v in variants:
        print(f"variant {v}: {VARIANTS[v].doc}")
    print()

    results = []
    failures: List[str] = []
    for n in sizes:
        path, build, built = ensure_db(args.cache_dir, n, args.seed, args.rebuild)
        print(
            f"N={n:,}: {'built' if built else 'cached'} {os.path.relpath(path)} "
            f"({build['db_bytes'] / 1e6:.0f} MB; build {build['build_s']:.1f} s, "
            f"peak RSS {build['build_peak_rss_mb']:.0f} MB)",
            flush=True,
        )
        cfg = {
            "db": path,
            "queries": args.queries,
            "repeat": args.repeat,
            "variants": variants,
            "stages": not args.no_stages and n <= args.stages_max_n,
            "sql": sql_a,
            "prepare_rounds": max(1, args.prepare_rounds),
            "statements_file": statements_file,
        }
        timeout = 1800 + 0.05 * n * args.repeat * (1 + len(variants))
        res = run_child(["time", json.dumps(cfg)], timeout=timeout)
        rss = {}
        if not args.no_rss:
            for m in ("a", "b", "c"):
                rss[m] = run_child(["rss", json.dumps(dict(cfg, method=m))], timeout=timeout)
        res.update(
            {
                "n": n,
                "db": path,
                "build": build,
                "built_now": built,
                "rss": rss,
                "loadavg_end": _loadavg(),
            }
        )
        res["ratios"] = {
            "wall": ratios(res, "a", "b", "c", "median_ms"),
            "cpu": ratios(res, "a", "b", "c", "median_cpu_ms"),
        }
        res["paired"] = {
            "wall": paired(res, "a", "b", "c", "per_query_median_ms"),
            "cpu": paired(res, "a", "b", "c", "per_query_median_cpu_ms"),
        }
        m = res["methods"]
        res["fusion_only"] = {
            k: {
                "a_ms": m["a@empty"][k],
                "b_ms": m["b@empty"][k],
                "b_over_a": m["b@empty"][k] / m["a@empty"][k],
            }
            for k in ("median_ms", "median_cpu_ms")
        }
        for v in variants:
            bk, ck = ("b:" + v, "c:" + v) if VARIANTS[v].match_fn else ("b", "c")
            res["ratios"]["a:" + v] = {
                "wall": ratios(res, "a:" + v, bk, ck, "median_ms"),
                "cpu": ratios(res, "a:" + v, bk, ck, "median_cpu_ms"),
            }
            res["paired"]["a:" + v] = {
                "wall": paired(res, "a:" + v, bk, ck, "per_query_median_ms"),
                "cpu": paired(res, "a:" + v, bk, ck, "per_query_median_cpu_ms"),
            }
        for name, lines in res["mismatches"].items():
            failures.extend(f"N={n:,} ({name}) {ln}" for ln in lines)
        results.append(res)
        ra = res["ratios"]["wall"]
        print(
            f"  (a) {res['methods']['a']['median_ms']:.2f} ms  (b) "
            f"{res['methods']['b']['median_ms']:.2f} ms  (c) {res['methods']['c']['median_ms']:.2f} ms"
            f"  a/b {ra['a_over_b']:.2f}  a/c {ra['a_over_c']:.2f}  "
            f"checks: {'ok' if not res['mismatches'] else 'MISMATCH'}",
            flush=True,
        )

    info["total_s"] = time.perf_counter() - t_start
    info["loadavg_end"] = _loadavg()
    result = {
        "info": info,
        "results": results,
        "failures": failures,
        "targets": targets(results, variants),
    }
    report(result, variants)
    print(f"(whole run {info['total_s']:.0f} s; load average at the end {info['loadavg_end']})")

    os.makedirs(args.out, exist_ok=True)
    json_path = os.path.join(args.out, "recall.json")
    with open(json_path, "w", encoding="utf-8") as f:
        json.dump(result, f, indent=2)
    print(f"wrote {os.path.relpath(json_path)}")
    if not args.no_plot:
        png = plot(result, os.path.join(args.out, "recall.png"))
        if png:
            print(f"wrote {os.path.relpath(png)}")
    if failures:
        print("\nDISAGREEMENT:\n  " + "\n  ".join(failures[:40]), file=sys.stderr)
        return 2
    return 0


def ratios(res: dict, a: str, b: str, c: str, key: str) -> dict:
    """a/b, b/a, a/c, a-c and the fusion-only speed-up (b-c)/(a-c) for one metric."""
    m = res["methods"]
    ta, tb, tc = m[a][key], m[b][key], m[c][key]
    return {
        "a_over_b": ta / tb,
        "b_over_a": tb / ta,
        "a_over_c": ta / tc,
        "a_minus_c_ms": ta - tc,
        "b_minus_c_ms": tb - tc,
        "fusion_speedup": (tb - tc) / (ta - tc) if ta - tc > 1e-9 else float("inf"),
    }


def paired(res: dict, a: str, b: str, c: str, key: str) -> dict:
    """Per-query ratios and differences (each query's median over the rounds), then their
    median over the queries: robust to the queries' very different costs."""
    pa, pb, pc = res[key][a], res[key][b], res[key][c]
    qs = list(pa)
    med = lambda f: statistics.median(f(q) for q in qs)  # noqa: E731
    return {
        "a_over_c": med(lambda q: pa[q] / pc[q]),
        "b_over_a": med(lambda q: pb[q] / pa[q]),
        "a_minus_c_ms": med(lambda q: pa[q] - pc[q]),
        "b_minus_c_ms": med(lambda q: pb[q] - pc[q]),
    }


def targets(results: List[dict], variants: Sequence[str]) -> dict:
    r = next((x for x in results if x["n"] == TARGET_SIZE), None)
    if r is None:
        return {"evaluated": False, "note": f"size {TARGET_SIZE:,} not run"}

    def judge(rat: dict) -> dict:
        return {
            "speedup_b_over_a": rat["b_over_a"],
            "speedup_met": rat["b_over_a"] >= TARGET_SPEEDUP,
            "a_over_c": rat["a_over_c"],
            "a_over_c_met": rat["a_over_c"] <= TARGET_OVER_BM25,
        }

    out = {
        "evaluated": True,
        "n": TARGET_SIZE,
        "speedup_target": TARGET_SPEEDUP,
        "a_over_c_target": TARGET_OVER_BM25,
        "recall.sql": {
            "wall": judge(r["ratios"]["wall"]),
            "cpu": judge(r["ratios"]["cpu"]),
            "paired_cpu": judge(r["paired"]["cpu"]),
        },
    }
    for v in variants:
        rv = r["ratios"]["a:" + v]
        out["variant " + v] = {
            "wall": judge(rv["wall"]),
            "cpu": judge(rv["cpu"]),
            "paired_cpu": judge(r["paired"]["a:" + v]["cpu"]),
        }
    return out


def report(result: dict, variants: List[str]) -> None:
    results = result["results"]
    for metric, key, title in (
        ("wall", "median_ms", "Wall-clock latency per query, median ms [p10-p90]"),
        ("cpu", "median_cpu_ms", "CPU time per query (this thread), median ms [p10-p90]"),
    ):
        pk = "_cpu_ms" if metric == "cpu" else "_ms"
        print()
        print(f"{title}.  (a) recall.sql  (b) old way in application code  (c) BM25 query alone")
        hdr = (
            f"{'N':>9} {'(a) recall':>21} {'(b) app code':>21} {'(c) BM25':>21} "
            f"{'a/b':>5} {'b/a':>5} {'a/c':>5} {'a-c':>7} {'b-c':>6} {'fusion':>6}  check"
        )
        print(hdr)
        print("-" * len(hdr))
        for r in results:
            m = r["methods"]

            def cell(k: str) -> str:
                return f"{m[k][key]:.2f} [{m[k]['p10' + pk]:.1f}-{m[k]['p90' + pk]:.1f}]"

            ra = r["ratios"][metric]
            print(
                f"{r['n']:>9,} {cell('a'):>21} {cell('b'):>21} {cell('c'):>21} "
                f"{ra['a_over_b']:>5.2f} {ra['b_over_a']:>5.2f} {ra['a_over_c']:>5.2f} "
                f"{ra['a_minus_c_ms']:>7.2f} {ra['b_minus_c_ms']:>6.2f} {ra['fusion_speedup']:>6.2f}  "
                f"{'ok' if 'b:ours' not in r['mismatches'] else 'MISMATCH'}"
            )
    print(
        "(a-c, b-c: ms each adds to the product's BM25 query; fusion = (b-c)/(a-c); "
        "check: (b:ours) = (a) on every query)"
    )
    print()
    print(
        "The BM25 query: the product's (the statement's bm25 CTEs: bm25()'s exact top, the stopword hint a speed-up) vs the old way's "
        "(every word, FTS5's bm25() on every match); median ms, wall"
    )
    hdr = (
        f"{'N':>9} {'(c) ours':>9} {'(c:old)':>9} {'old/ours':>8} {'rows ours':>10} "
        f"{'rows old':>9} {'(b:ours)':>9} {'b:ours/a':>8}  agreement of (b) with (a)"
    )
    print(hdr)
    print("-" * len(hdr))
    for r in results:
        m, mr, g = r["methods"], r["bm25_matching_rows"], r["agreement"]
        gb, gc = g.get("b", {}), g.get("c:old", {})
        print(
            f"{r['n']:>9,} {m['c']['median_ms']:>9.2f} {m['c:old']['median_ms']:>9.2f} "
            f"{m['c:old']['median_ms'] / m['c']['median_ms']:>8.2f} {mr['c']['median']:>10,.0f} "
            f"{mr['c:old']['median']:>9,.0f} {m['b:ours']['median_ms']:>9.2f} "
            f"{m['b:ours']['median_ms'] / m['a']['median_ms']:>8.2f}  "
            f"top-3 identical {100 * gb.get('top3_identical', float('nan')):.0f}%, same set "
            f"{100 * gb.get('top3_same_set', float('nan')):.0f}%; BM25 top-50 overlap "
            f"{100 * gc.get('bm25_top50_overlap', float('nan')):.0f}%"
        )
    print(
        "(rows: how many rows the MATCH expression matches, median over the queries; "
        "stopwords: "
        + "; ".join(f"N={r['n']:,} '{r['build'].get('bm25_stopwords', '?')}'" for r in results)
        + ")"
    )
    print()
    print(
        "Per query, paired: each query's median over the rounds, then the median over the "
        "queries of the ratios and differences"
    )
    hdr = (
        f"{'N':>9} {'wall a/c':>9} {'b/a':>6} {'a-c ms':>8} {'b-c ms':>7}   "
        f"{'cpu a/c':>8} {'b/a':>6} {'a-c ms':>8} {'b-c ms':>7}"
    )
    print(hdr)
    print("-" * len(hdr))
    for r in results:
        w, c = r["paired"]["wall"], r["paired"]["cpu"]
        print(
            f"{r['n']:>9,} {w['a_over_c']:>9.2f} {w['b_over_a']:>6.2f} {w['a_minus_c_ms']:>8.2f} "
            f"{w['b_minus_c_ms']:>7.2f}   {c['a_over_c']:>8.2f} {c['b_over_a']:>6.2f} "
            f"{c['a_minus_c_ms']:>8.2f} {c['b_minus_c_ms']:>7.2f}"
        )
    print()
    print(
        "The fusion alone: query '' (matches nothing: no full-text work), so the candidates are "
        "the 200-episode pool; median ms"
    )
    for r in results:
        fw, fc = r["fusion_only"]["median_ms"], r["fusion_only"]["median_cpu_ms"]
        print(
            f"{r['n']:>9,}  (a) {fw['a_ms']:.2f} wall / {fc['a_ms']:.2f} cpu   (b) {fw['b_ms']:.2f} / "
            f"{fc['b_ms']:.2f}   b/a {fw['b_over_a']:.2f} / {fc['b_over_a']:.2f}   check "
            f"{'ok' if 'b@empty' not in r['mismatches'] else 'MISMATCH'}"
        )
    if any("a:default-profile" in r["methods"] for r in results):
        print(
            f"(a) runs with profile '{PROFILE}' (the fusion (b) reproduces); with the statement's "
            "default profile it takes (median ms, wall / cpu): "
            + ", ".join(
                f"N={r['n']:,} {r['methods']['a:default-profile']['median_ms']:.2f} / "
                f"{r['methods']['a:default-profile']['median_cpu_ms']:.2f}"
                for r in results
                if "a:default-profile" in r["methods"]
            )
        )

    if variants:
        print()
        print(
            "Prototype rewrites of the statement, (a') = the variant; for MATCH variants (b') and "
            "(c') use the variant's MATCH expression too (else (b') = (b), (c') = (c))."
        )
        cols = (
            "N",
            "variant",
            "(a) ms",
            "(a') ms",
            "cpu",
            "(b')",
            "(c')",
            "b'/a'",
            "a'/c'",
            "a'/c",
            "cpu b'/a'",
            "cpu a'/c'",
            "paired cpu a'/c'",
            "a'-c' ms",
        )
        hdr = (
            "{:>9}  {:<13} {:>8} {:>8} {:>7} {:>8} {:>8} {:>6} {:>6} {:>6} {:>10} {:>10} "
            "{:>16} {:>8}".format(*cols)
            + "  check  agreement with (a)"
        )
        print(hdr)
        print("-" * len(hdr))
        for r in results:
            m = r["methods"]
            for v in variants:
                a2 = "a:" + v
                b2, c2 = ("b:" + v, "c:" + v) if VARIANTS[v].match_fn else ("b", "c")
                rw, rc = r["ratios"][a2]["wall"], r["ratios"][a2]["cpu"]
                bad = [k for k in (a2, b2) if k in r["mismatches"] and k != "b"]
                ag = ""
                if a2 in r["agreement"]:
                    g = r["agreement"][a2]
                    ag = (
                        f"top-3 identical {100 * g['top3_identical']:.0f}%, same set "
                        f"{100 * g['top3_same_set']:.0f}%, BM25 top-50 overlap "
                        f"{100 * r['agreement'][c2]['bm25_top50_overlap']:.0f}%"
                    )
                print(
                    f"{r['n']:>9,}  {v:<13} {m['a']['median_ms']:>8.2f} {m[a2]['median_ms']:>8.2f} "
                    f"{m[a2]['median_cpu_ms']:>7.2f} {m[b2]['median_ms']:>8.2f} {m[c2]['median_ms']:>8.2f} "
                    f"{rw['b_over_a']:>6.2f} {rw['a_over_c']:>6.2f} "
                    f"{m[a2]['median_ms'] / m['c']['median_ms']:>6.2f} {rc['b_over_a']:>10.2f} "
                    f"{rc['a_over_c']:>10.2f} {r['paired'][a2]['cpu']['a_over_c']:>16.2f} "
                    f"{r['paired'][a2]['cpu']['a_minus_c_ms']:>8.2f}  {'MISMATCH' if bad else 'ok':<5}  {ag}"
                )
        for r in results:
            mr = r["bm25_matching_rows"]
            print(
                f"  N={r['n']:,}: rows the MATCH scores (median over queries): "
                + ", ".join(f"{k} {v['median']:,.0f}" for k, v in mr.items())
            )

    print()
    print("Build and memory")
    hdr = (
        f"{'N':>9} {'DB MB':>7} {'build s':>8} {'build RSS':>9} "
        f"{'RSS a':>6} {'RSS b':>6} {'RSS c':>6} {'SQLite heap a/b/c MB':>21} "
        f"{'py peak KB a/b/c':>17} {'timing child RSS':>16}"
    )
    print(hdr)
    print("-" * len(hdr))
    for r in results:
        b = r["build"]

        def rs(k: str) -> str:
            return f"{r['rss'][k]['peak_rss_mb']:.0f}" if r["rss"] else "-"

        mem = r["memory"]
        heap = "/".join(f"{mem[k]['sqlite_heap_peak_mb']:.1f}" for k in "abc")
        py = "/".join(f"{mem[k]['python_peak_kb']:.0f}" for k in "abc")
        print(
            f"{r['n']:>9,} {b['db_bytes'] / 1e6:>7.0f} {b['build_s']:>8.1f} "
            f"{b['build_peak_rss_mb']:>7.0f}MB {rs('a'):>6} {rs('b'):>6} {rs('c'):>6} "
            f"{heap:>21} {py:>17} {r['child_peak_rss_mb']:>14.0f}MB"
        )
    print(
        "(RSS x: peak RSS, MB, of a process that opened the database and ran only x over the "
        "queries twice;\n SQLite heap: sqlite3_memory_highwater over one round, page cache "
        "included; py peak: tracemalloc peak over one round)"
    )

    if any(r["stages"] for r in results):
        print()
        print(
            "Where the statement's time goes: median ms (wall / cpu) of "
            "WITH <CTEs up to X> SELECT count(*) FROM X"
        )
        for r in results:
            for label, stages in r["stages"].items():
                print(
                    f"  N={r['n']:,} {label}: "
                    + ", ".join(
                        f"{s['stage']} {s['median_ms']:.1f}/{s['median_cpu_ms']:.1f}"
                        for s in stages
                    )
                )
            print(
                f"  N={r['n']:,}: candidates per query median {r['candidates']['median']:.0f} "
                f"({r['candidates']['min']}-{r['candidates']['max']}); rows matching the BM25 "
                f"query median {r['bm25_matching_rows']['c']['median']:,.0f} of {r['n']:,}"
            )

    print()
    print(
        f"Issue 13, target 4 (every size): (a) <= {TARGET_OVER_B_OURS:g}x (b:ours); preparing "
        f"(a) <= {TARGET_PREPARE_MS:g} ms (uncached, median)"
    )
    for line in fusion_target_lines(results):
        print("  " + line)
    if results and results[0].get("prepare"):
        print("  prepare (uncached, median / min ms, statement chars), per size: ")
        for r in results:
            print(
                f"    N={r['n']:,}: "
                + "; ".join(
                    f"{k} {v['median_ms']:.2f} / {v['min_ms']:.2f} ({v['chars']:,})"
                    for k, v in r["prepare"].items()
                )
            )

    t = result["targets"]
    print()
    if not t["evaluated"]:
        print(f"Targets: not evaluated ({t['note']})")
        return
    print(
        f"Targets at N={TARGET_SIZE:,}, pool 'recent': (a) >= {TARGET_SPEEDUP:g}x faster than (b); "
        f"(a) <= {TARGET_OVER_BM25:g}x (c)"
    )
    for label, j in t.items():
        if not isinstance(j, dict) or "wall" not in j:
            continue
        w, c, pc = j["wall"], j["cpu"], j["paired_cpu"]
        print(
            f"  {label:<20} b/a {w['speedup_b_over_a']:.2f}x{'' if w['speedup_met'] else ' NOT MET'}"
            f" (cpu {c['speedup_b_over_a']:.2f}x, paired cpu {pc['speedup_b_over_a']:.2f}x);  "
            f"a/c {w['a_over_c']:.2f}x{'' if w['a_over_c_met'] else ' NOT MET'} "
            f"(cpu {c['a_over_c']:.2f}x, paired cpu {pc['a_over_c']:.2f}x)"
        )


def fusion_target_lines(results: List[dict]) -> List[str]:
    """The fusion target per size: (a) / (b:ours) (wall, cpu, paired cpu) and the prepare."""
    out = []
    for r in results:
        m = r["methods"]
        w = m["a"]["median_ms"] / m["b:ours"]["median_ms"]
        c = m["a"]["median_cpu_ms"] / m["b:ours"]["median_cpu_ms"]
        pa, pb = r["per_query_median_cpu_ms"]["a"], r["per_query_median_cpu_ms"]["b:ours"]
        pc = statistics.median(pa[q] / pb[q] for q in pa)
        line = (
            f"N={r['n']:,}: (a) {m['a']['median_ms']:.2f} ms = {w:.2f}x (b:ours) "
            f"{m['b:ours']['median_ms']:.2f} ms (cpu {c:.2f}x, paired cpu {pc:.2f}x) -- "
            f"{'met' if w <= TARGET_OVER_B_OURS else 'NOT MET'}"
        )
        prep = r.get("prepare", {}).get("a: recent/rrf")
        if prep:
            line += (
                f"; prepare (a) {prep['median_ms']:.2f} ms -- "
                f"{'met' if prep['median_ms'] <= TARGET_PREPARE_MS else 'NOT MET'}"
            )
        out.append(line)
    return out


def plot(result: dict, path: str) -> Optional[str]:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("(matplotlib not importable: no plot)")
        return None
    res = result["results"]
    ns = [r["n"] for r in res]
    fig, ax = plt.subplots(figsize=(8, 5.2))
    labels = {
        "a": "(a) recall.sql, one statement",
        "b": "(b) old way, application code",
        "c": "(c) BM25 query alone",
    }
    for key, style in (("a", "o-"), ("b", "s--"), ("c", "^:")):
        med = [r["methods"][key]["median_ms"] for r in res]
        lo = [r["methods"][key]["median_ms"] - r["methods"][key]["p10_ms"] for r in res]
        hi = [r["methods"][key]["p90_ms"] - r["methods"][key]["median_ms"] for r in res]
        ax.errorbar(ns, med, yerr=[lo, hi], fmt=style, capsize=3, label=labels[key])
    for v in result["info"]["variants"]:
        ax.plot(
            ns,
            [r["methods"]["a:" + v]["median_ms"] for r in res],
            "x-.",
            lw=0.8,
            ms=4,
            alpha=0.7,
            label=f"(a') variant {v}",
        )
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("episodes (N)")
    ax.set_ylabel("median wall-clock ms per query (bars: p10-p90)")
    info = result["info"]
    ax.set_title(
        f"recall latency vs N: {info['queries']} SciFact claims x {info['repeat']}, pool 'recent'",
        fontsize=10,
    )
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _loadavg() -> Optional[str]:
    try:
        return " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return None


def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def child_main(kind: str, cfg: dict) -> None:
    global BM25_SQL
    if cfg.get("statements_file"):
        # the statements the parent read once: every size and child times the same text,
        # even if the SQL files change during the run
        with open(cfg["statements_file"], encoding="utf-8") as f:
            cfg["statements"] = json.load(f)
        cfg["sql"] = cfg["statements"]["a"]
        BM25_SQL = cfg["statements"]["bm25"]
    if kind == "build":
        out = build_db(cfg["path"], cfg["n"], cfg["seed"], cfg.get("schema_key"))
    elif kind == "time":
        out = child_time(cfg)
    elif kind == "rss":
        out = child_rss(cfg)
    else:
        raise SystemExit(f"unknown child {kind!r}")
    sys.stdout.write(json.dumps(out) + "\n")


if __name__ == "__main__":
    if len(sys.argv) >= 4 and sys.argv[1] == CHILD_FLAG:
        child_main(sys.argv[2], json.loads(sys.argv[3]))
        sys.exit(0)
    sys.exit(main())
