#!/usr/bin/env python3
"""Benchmark: the recall statement's BM25 list against FTS5's floor.

Run by hand (not part of the test suite)::

    .venv/bin/python tests/bench/bench_bm25.py [--sizes 100000,1000000] [--rounds 3]
                                               [--queries 20] [--extension PATH]

For each size N, on a database of N episodes built by ``bench_recall.build_db`` (seed
20240607; kept under ``tests/bench/out/bm25/``, built in a child process when missing)
opened read-only, with the first ``--queries`` SciFact test claims (bench_recall's
``load_queries``), it times per query, interleaved, ``--rounds`` times after one warm-up
round, the wall clock and the thread's CPU time of:

* ``count``: FTS5's bare match of the OR query of every word,
  ``SELECT count(*) FROM episodes_fts WHERE episodes_fts MATCH fts5_query(:query)``;
  the floor every ratio is taken against;
* ``count_or``: the same without the query's stopwords (the scan the list runs);
* ``bm25``: ``ORDER BY bm25(episodes_fts), rowid LIMIT 50`` of that match;
* ``list_old``: the statement's BM25 list as it was before rrf_bm25_or_top (``OLD_BM25_SQL``: its
  bm25_stop / bm25_top / bm25_exact / bm25 CTEs; bm25_top scans with rrf_bm25_or);
* ``list_new``: bm25_top made by ``rrf_bm25_or_top`` (B16) in one call when no filter is set
  (``NEW_BM25_SQL``): the shipped statement's own CTEs, read from sql/recall.sql.

It CHECKS, on every query and round, that every list equals ``ORDER BY bm25(episodes_fts),
rowid LIMIT 50`` of the whole query (rows and values, bit for bit) and exits 2 if not.
Prints a table (median ms over queries x rounds, ratio to ``count``) and writes
``tests/bench/out/bm25.json``. ``--extension`` loads another build of the extension (e.g.
the one before this change: the lists that need a function it lacks are skipped).
``--compare PATH`` loads another build in a second connection to the same file as well,
and times its lists in the same loop (``list_old@cmp``, ``list_new@cmp``; checked the
same way): what a change of the extension costs, as ratios taken in one run.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from typing import Any, Dict, List, Tuple

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # numpy's threads would spin on the cores

import apsw

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import bench_recall as br

import sqlite_rrf

OUT_DIR = os.path.join(HERE, "out")
DB_DIR = os.path.join(OUT_DIR, "bm25")
SEED = 20240607
LIMIT = 50

#: The statement's older, slower BM25 list (sql/recall.sql's CTEs 1a-1d,
#: comments removed, ``params`` reduced to the one parameter they read).
OLD_BM25_SQL = """WITH
params AS (SELECT coalesce(:bm25_limit, 50) AS bm25_limit),
bm25_stop AS MATERIALIZED (
  SELECT coalesce(group_concat(json_extract(t.value, '$[1]'), ' '), '') AS words,
         count(*) AS dropped
  FROM json_each(fts5_query(:query, 'terms',
                            (SELECT CASE WHEN typeof(value) = 'text' THEN value END
                             FROM rrf_meta WHERE key = 'bm25_stopwords'),
                            'porter unicode61')) AS t
  WHERE (SELECT rrf_bm25_idf(episodes_fts) FROM episodes_fts
         WHERE episodes_fts MATCH json_extract(t.value, '$[0]') LIMIT 1) = 1e-6
),
bm25_top AS MATERIALIZED (
  SELECT rowid,
         rrf_bm25_or(episodes_fts, (SELECT nullif(max(bm25_limit, 0), 0) FROM params),
                     :query, s.words, 'porter unicode61') AS bm25_score
  FROM bm25_stop AS s CROSS JOIN episodes_fts
  WHERE episodes_fts MATCH coalesce(fts5_query(:query, 'or', s.words, 'porter unicode61'),
                                    '""')
    AND (:scope IS NULL AND :kind IS NULL AND :since IS NULL AND :until IS NULL
         OR EXISTS (SELECT 1 FROM episodes INDEXED BY idx_episodes_filters
                    WHERE rowid = episodes_fts.rowid
                      AND scope = coalesce(:scope, scope)
                      AND (:kind IS NULL OR kind = :kind)
                      AND created_at >= coalesce(:since, created_at)
                      AND created_at < coalesce(:until, created_at + 1)))
  ORDER BY bm25_score, rowid
  LIMIT (SELECT bm25_limit FROM params)
),
bm25_exact AS MATERIALIZED (
  SELECT s.dropped = 0
         OR (p.bm25_limit >= 0
             AND (SELECT count(*) FROM bm25_top
                  WHERE bm25_score < -2.2000022e-6 * s.dropped) >= p.bm25_limit) AS exact
  FROM bm25_stop AS s, params AS p
),
bm25 AS MATERIALIZED (
  SELECT rowid, bm25_score,
         dense_rank() OVER (ORDER BY bm25_score) AS bm25_rank
  FROM (SELECT t.rowid, t.bm25_score FROM bm25_exact AS x, bm25_top AS t WHERE x.exact
        UNION ALL
        SELECT * FROM (
          SELECT rowid,
                 rrf_bm25(episodes_fts, (SELECT nullif(max(bm25_limit, 0), 0) FROM params))
                   AS bm25_score
          FROM bm25_exact AS x CROSS JOIN episodes_fts
          WHERE NOT x.exact
            AND episodes_fts MATCH coalesce(fts5_query(:query), '""')
            AND (:scope IS NULL AND :kind IS NULL AND :since IS NULL AND :until IS NULL
                 OR EXISTS (SELECT 1 FROM episodes INDEXED BY idx_episodes_filters
                            WHERE rowid = episodes_fts.rowid
                              AND scope = coalesce(:scope, scope)
                              AND (:kind IS NULL OR kind = :kind)
                              AND created_at >= coalesce(:since, created_at)
                              AND created_at < coalesce(:until, created_at + 1)))
          ORDER BY bm25_score, rowid
          LIMIT (SELECT bm25_limit FROM params)))
)
SELECT rowid, bm25_score FROM bm25 ORDER BY bm25_score, rowid"""


def _statement_bm25_sql() -> str:
    """The BM25 list as the shipped statement has it now (its CTEs up to ``bm25``, whose
    ``bm25_top`` calls rrf_bm25_or_top when no filter is set: csrc/bm25_top.c B16), read from
    sql/recall.sql rather than copied, so this times what users run."""
    from sqlite_rrf.core.sql_files import read_sql

    sql = read_sql("recall.sql")
    head = sql[: sql.index("\n-- 2. ") + 1].rstrip()
    assert head.endswith("),") and "rrf_bm25_or_top(" in head
    return head[:-1] + "\nSELECT rowid, bm25_score FROM bm25 ORDER BY bm25_score, rowid"


NEW_BM25_SQL = _statement_bm25_sql()

COUNT_SQL = "SELECT count(*) FROM episodes_fts WHERE episodes_fts MATCH fts5_query(:query)"
COUNT_OR_SQL = (
    "SELECT count(*) FROM episodes_fts WHERE episodes_fts MATCH "
    "coalesce(fts5_query(:query, 'or', (SELECT value FROM rrf_meta "
    "WHERE key = 'bm25_stopwords'), 'porter unicode61'), '\"\"')"
)
BM25_SQL = (
    "SELECT rowid, bm25(episodes_fts) AS s FROM episodes_fts "
    "WHERE episodes_fts MATCH fts5_query(:query) ORDER BY s, rowid LIMIT :bm25_limit"
)
METHODS: List[Tuple[str, str]] = [
    ("count", COUNT_SQL),
    ("count_or", COUNT_OR_SQL),
    ("bm25", BM25_SQL),
    ("list_old", OLD_BM25_SQL),
    ("list_new", NEW_BM25_SQL),
]
CHECKED = ("list_old", "list_new")


def db_for(n: int) -> str:
    """The N-episode database, built in a child process when missing."""
    os.makedirs(DB_DIR, exist_ok=True)
    path = os.path.join(DB_DIR, f"bm25_{n}.db")
    if not os.path.exists(path):
        code = (
            "import sys; sys.path.insert(0, %r); import bench_recall as b; "
            "b.build_db(%r, %d, %d)" % (HERE, path, n, SEED)
        )
        subprocess.run([sys.executable, "-c", code], check=True)
    return path


def bindings(sql: str, query: str) -> Dict[str, Any]:
    b: Dict[str, Any] = dict.fromkeys(br.statement_params(sql))
    b.update(query=query, bm25_limit=LIMIT)
    return b


def connect(path: str, extension: str) -> apsw.Connection:
    conn = apsw.Connection(path, flags=apsw.SQLITE_OPEN_READONLY)
    if extension:
        conn.enable_load_extension(True)
        conn.load_extension(extension, "sqlite3_rrf_init")
    else:
        sqlite_rrf.load(conn)
    return conn


def run_size(n: int, queries: List[str], rounds: int, extension: str, compare: str = "") -> dict:
    conns = {"": connect(db_for(n), extension)}
    if compare:  # the other build: its own connection (only its entry point is exported)
        conns["@cmp"] = connect(db_for(n), compare)
    methods = []
    for suffix, c in conns.items():
        for m, sql in METHODS:  # a build without the new functions: skip what needs them
            if suffix and m not in CHECKED:
                continue
            try:
                c.execute(sql, bindings(sql, queries[0])).fetchall()
                methods.append((m + suffix, sql, c))
            except apsw.SQLError as e:
                print(f"{n:,}: {m + suffix} skipped ({e})", file=sys.stderr)
    wall: Dict[str, List[float]] = {m: [] for m, _, _ in methods}
    cpu: Dict[str, List[float]] = {m: [] for m, _, _ in methods}
    bad: List[str] = []
    hits: List[int] = []
    for r in range(rounds + 1):  # round 0 warms the cache up, untimed
        for qi, q in enumerate(queries):
            res = {}
            for m, sql, c in methods:
                b = bindings(sql, q)
                t0, c0 = time.perf_counter(), time.thread_time()
                res[m] = c.execute(sql, b).fetchall()
                c1, t1 = time.thread_time(), time.perf_counter()
                if r:
                    wall[m].append((t1 - t0) * 1000)
                    cpu[m].append((c1 - c0) * 1000)
            if r == 0:
                hits.append(res["count"][0][0])
            for m in res:
                if m.split("@")[0] in CHECKED and res[m] != res["bm25"]:
                    bad.append(f"{n}: {m} differs from bm25() on claim {qi} ({q[:40]!r})")
    for c in conns.values():
        c.close()
    out = {
        "n": n,
        "queries": len(queries),
        "rounds": rounds,
        "median_matches": statistics.median(hits),
        "wall_ms": {m: statistics.median(v) for m, v in wall.items()},
        "cpu_ms": {m: statistics.median(v) for m, v in cpu.items()},
        "mismatches": bad,
    }
    for kind in ("wall_ms", "cpu_ms"):
        base = out[kind]["count"]
        out[kind.replace("_ms", "_ratio")] = {m: v / base for m, v in out[kind].items()}
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default="100000,1000000")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--queries", type=int, default=20)
    ap.add_argument("--extension", default="", help="load this build of the extension")
    ap.add_argument(
        "--compare", default="", help="also time the lists of this build, in the same run"
    )
    ap.add_argument("--out", default=os.path.join(OUT_DIR, "bm25.json"))
    a = ap.parse_args(argv)
    queries = [text for _, text, _ in br.load_queries(a.queries)]
    results = [
        run_size(int(s), queries, a.rounds, a.extension, a.compare) for s in a.sizes.split(",")
    ]
    print(
        f"median ms over {a.queries} claims x {a.rounds} rounds (interleaved); "
        "x = ratio to count (FTS5's bare match of the whole OR query)"
    )
    print(f"{'N':>9} {'method':14} {'wall ms':>9} {'x':>6} {'cpu ms':>9} {'x':>6}")
    for res in results:
        for m in res["wall_ms"]:
            print(
                f"{res['n']:>9,} {m:14} {res['wall_ms'][m]:9.2f} {res['wall_ratio'][m]:6.2f} "
                f"{res['cpu_ms'][m]:9.2f} {res['cpu_ratio'][m]:6.2f}"
            )
    with open(a.out, "w", encoding="utf-8") as f:
        json.dump(
            {
                "extension": a.extension or sqlite_rrf.loadable_path(),
                "compare": a.compare or None,
                "loadavg": os.getloadavg(),
                "results": results,
            },
            f,
            indent=2,
        )
    bad = [b for res in results for b in res["mismatches"]]
    for b in bad[:20]:
        print("MISMATCH", b, file=sys.stderr)
    return 2 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
