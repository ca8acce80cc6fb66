#!/usr/bin/env python3
"""Benchmark: recall latency vs N for the pool modes 'recent', 'knn' and 'all', with
sqlite-vec's KNN query alone as the reference for 'knn' (issue 4, item 6).

Run by hand (not part of the test suite)::

    .venv/bin/python tests/bench/bench_scale.py [--sizes 10000,100000,1000000]
                                                [--queries N] [--repeat R]

For each size N:

1. takes the cached database of ``bench_recall.py`` (``tests/bench/out/cache/``, built
   with its builder if missing; the cache is never modified) and copies it to a private
   file in ``tests/bench/out/scale/`` (deleted at the end, unless ``--keep``);
2. opens the copy with :class:`sqlite_rrf.store.Store` and times ``Store.enable_knn()``
   (the sqlite-vec ``vec0`` cosine index over every embedding, ``sql/knn.sql``), then the
   WAL checkpoint that writes the index into the database file;
3. for the first ``--queries`` SciFact test claims (``qrels/test.tsv`` order) with their
   cached MiniLM embeddings, runs one warm-up round and then ``--repeat`` rounds,
   interleaved per query, timing (wall clock and the thread's CPU time) on the Store's own
   apsw connection:

   - ``recent`` / ``knn`` / ``all``: the statement of ``recall_statement(pool)`` with the
     bindings ``Store.recall`` would pass (``Store._recall_params``: default profile,
     ``pool_size`` 200, ``limit`` 3, everything else its default); the SELECT only, as
     ``Store.recall(touch=False, force=True)`` runs it minus the Python wrapping;
   - ``vec_knn``: sqlite-vec's KNN query alone,
     ``SELECT rowid, distance FROM episodes_vec WHERE embedding MATCH :qvec AND k = 200``;
   - ``bm25``: the statement's BM25 query alone (the ``bm25`` CTE's query; context).

   ``all`` reads and ranks every episode: its first run decides how often it is run.
   If it takes longer than ``--all-max-s`` (60 s) that single timing is reported; else
   it runs on as many queries as fit in ``--all-budget-s`` (one round).
4. diagnostics for 'knn' (``--diag-queries`` queries, one round each): the time of
   ``WITH <CTEs up to X> SELECT count(*) FROM X`` for each CTE X of the knn statement,
   the pool CTE with a literal ``k = 200``, the statement with an empty query (no BM25
   work), and ``EXPLAIN QUERY PLAN``; plus the top-3 agreement of 'knn' with 'all'.

Prints a table (size x method, median ms), the target line (at 1M, 'knn' recall
<= 1.3x sqlite-vec's KNN alone) and the index build times; writes
``tests/bench/out/scale.json``, ``scale.md`` (the table) and ``scale.png`` (log-log).
Exit status 0 even when the target is missed (a measurement, not a test).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import sys
import time
from typing import Any, Dict, List, Optional, Sequence, Tuple

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)

import apsw  # noqa: E402
import numpy as np  # noqa: E402

import bench_recall as br  # noqa: E402  (data builder, cache, queries, CTE splitting)
from sqlite_rrf.resources import recall_statement  # noqa: E402
from sqlite_rrf.store import Store  # noqa: E402

OUT_DIR = os.path.join(HERE, "out")
CACHE_DIR = os.path.join(OUT_DIR, "cache")
SCALE_DIR = os.path.join(OUT_DIR, "scale")
SEED = 20240607  # bench_recall's default seed: its cached databases
POOL_SIZE = 200
LIMIT = 3
TARGET_SIZE = 1_000_000
TARGET_RATIO = 1.3
POOLS = ("recent", "knn", "all")
METHODS = ("recent", "knn", "all", "vec_knn", "bm25")
KNN_ALONE_SQL = ("SELECT rowid, distance FROM episodes_vec "
                 "WHERE embedding MATCH :qvec AND k = 200")
LABELS = {"recent": "recall, pool 'recent'", "knn": "recall, pool 'knn'",
          "all": "recall, pool 'all'", "vec_knn": "sqlite-vec KNN alone (k 200)",
          "bm25": "BM25 query alone"}


# ---------------------------------------------------------------- helpers


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def cached_db(n: int, seed: int) -> Tuple[str, str]:
    """(path of bench_recall's cached database for ``n``, how it was found)."""
    path = br.db_path(CACHE_DIR, n, seed)
    if os.path.exists(path) and os.path.exists(path + ".json"):
        return path, "cache"
    # a cache from another schema version: Store migrates the private copy
    prefix = f"recall_{n}_d{br.DATA_VERSION}_s{seed}_"
    others = sorted(f for f in os.listdir(CACHE_DIR) if f.startswith(prefix)
                    and f.endswith(".db") and os.path.exists(os.path.join(CACHE_DIR, f + ".json"))
                    ) if os.path.isdir(CACHE_DIR) else []
    if others:
        return os.path.join(CACHE_DIR, others[-1]), "cache (other schema key)"
    log(f"  no cached database for N={n:,}: building one with bench_recall's builder")
    path, _, _ = br.ensure_db(CACHE_DIR, n, seed, False)
    return path, "built now"


def private_copy(src: str, dst: str) -> Tuple[float, str]:
    """Copy ``src`` to ``dst`` without touching ``src``: a plain file copy when its WAL is
    empty, else SQLite's online backup (which reads the WAL too). (seconds, how)."""
    for suffix in ("", "-wal", "-shm", "-journal"):
        if os.path.exists(dst + suffix):
            os.remove(dst + suffix)
    t0 = time.perf_counter()
    wal = src + "-wal"
    if not os.path.exists(wal) or os.path.getsize(wal) == 0:
        shutil.copyfile(src, dst)
        how = "file copy"
    else:
        source = apsw.Connection(src, flags=apsw.SQLITE_OPEN_READONLY)
        dest = apsw.Connection(dst)
        with dest.backup("main", source, "main") as b:
            while not b.done:
                b.step(4096)
        dest.close()
        source.close()
        how = "sqlite backup (source WAL not empty)"
    return time.perf_counter() - t0, how


def remove_db(path: str) -> None:
    for suffix in ("", "-wal", "-shm", "-journal"):
        try:
            os.remove(path + suffix)
        except FileNotFoundError:
            pass


def timed(conn: "apsw.Connection", sql: str, bindings: Dict[str, Any]) -> Tuple[float, float, list]:
    """(wall ms, thread CPU ms, rows) of one run of ``sql``."""
    c0 = time.thread_time()
    t0 = time.perf_counter()
    rows = conn.execute(sql, bindings).fetchall()
    t1 = time.perf_counter()
    c1 = time.thread_time()
    return (t1 - t0) * 1000, (c1 - c0) * 1000, rows


def summary(wall: Sequence[float], cpu: Sequence[float]) -> Dict[str, Any]:
    return {"runs": len(wall), "median_ms": statistics.median(wall),
            "median_cpu_ms": statistics.median(cpu),
            "p10_ms": float(np.percentile(wall, 10)), "p90_ms": float(np.percentile(wall, 90)),
            "min_ms": min(wall), "max_ms": max(wall)}


def page_bytes(conn: "apsw.Connection") -> int:
    pc = conn.execute("PRAGMA page_count").fetchall()[0][0]
    ps = conn.execute("PRAGMA page_size").fetchall()[0][0]
    return int(pc) * int(ps)


def plan_lines(conn: "apsw.Connection", sql: str, bindings: Dict[str, Any]) -> List[str]:
    depth: Dict[int, int] = {0: -1}
    out = []
    for node, parent, _, detail in conn.execute("EXPLAIN QUERY PLAN " + sql, bindings):
        depth[node] = depth.get(parent, -1) + 1
        out.append("  " * depth[node] + detail)
    return out


# ---------------------------------------------------------------- one size


def bench_size(n: int, queries: List[Tuple[str, str, bytes]], args: argparse.Namespace) -> dict:
    src, origin = cached_db(n, args.seed)
    os.makedirs(SCALE_DIR, exist_ok=True)
    dst = os.path.join(SCALE_DIR, f"scale_{n}.db")
    res: Dict[str, Any] = {"n": n, "source_db": os.path.relpath(src, HERE), "source": origin}
    try:
        copy_s, how = private_copy(src, dst)
        res["copy"] = {"seconds": copy_s, "how": how, "bytes": os.path.getsize(dst)}
        log(f"  N={n:,}: copied {os.path.getsize(dst) / 1e6:,.0f} MB in {copy_s:.1f} s ({how})")
        store = Store(dst)
        try:
            res.update(run_on_store(store, n, queries, args))
        finally:
            store.close()
    finally:
        if not args.keep:
            remove_db(dst)
    return res


def run_on_store(store: Store, n: int, queries: List[Tuple[str, str, bytes]],
                 args: argparse.Namespace) -> dict:
    conn = store.conn
    rows = conn.execute("SELECT count(*) FROM episodes WHERE embedding IS NOT NULL").fetchall()[0][0]
    before = page_bytes(conn)
    t0 = time.perf_counter()
    store.enable_knn()
    knn_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    ckpt_s = time.perf_counter() - t0
    vec_rows = conn.execute("SELECT count(*) FROM episodes_vec").fetchall()[0][0]
    index = {"enable_knn_s": knn_s, "checkpoint_s": ckpt_s, "embeddings": rows,
             "vec_rows": vec_rows, "index_bytes": page_bytes(conn) - before,
             "rows_per_s": rows / knn_s if knn_s > 0 else None}
    log(f"  N={n:,}: enable_knn {knn_s:.1f} s ({vec_rows:,} vectors), checkpoint {ckpt_s:.1f} s, "
        f"+{index['index_bytes'] / 1e6:,.0f} MB")

    sqls = {p: recall_statement(p) for p in POOLS}
    sqls["vec_knn"] = KNN_ALONE_SQL
    sqls["bm25"] = br.BM25_SQL

    def bindings(method: str, q: Tuple[str, str, bytes]) -> Dict[str, Any]:
        if method == "vec_knn":
            return {"qvec": q[2]}
        if method == "bm25":
            return {"query": q[1], "bm25_limit": 50}
        # what Store.recall(q, limit=3, pool=..., pool_size=200, touch=False, force=True) binds
        return dict(Store._recall_params(LIMIT, None, None, method, POOL_SIZE, None),
                    query=q[1], qvec=q[2])

    wall: Dict[str, List[float]] = {m: [] for m in METHODS}
    cpu: Dict[str, List[float]] = {m: [] for m in METHODS}
    per_query: Dict[str, Dict[str, List[float]]] = {m: {} for m in METHODS}
    top3: Dict[str, Dict[str, List[str]]] = {m: {} for m in POOLS}

    # 'all' first: its first run decides how it is run
    w, c, r = timed(conn, sqls["all"], bindings("all", queries[0]))
    top3["all"][queries[0][0]] = [x[0] for x in r]
    all_info: Dict[str, Any] = {"first_run_ms": w}
    if w > args.all_max_s * 1000:
        wall["all"].append(w)
        cpu["all"].append(c)
        per_query["all"].setdefault(queries[0][0], []).append(w)
        all_info["mode"] = f"single run (> {args.all_max_s:g} s): no warm-up"
        all_queries: List[Tuple[str, str, bytes]] = []
    else:
        fit = int(args.all_budget_s * 1000 // max(w, 1e-3))
        if fit >= len(queries) * (args.repeat + 1):
            all_queries = []  # cheap: it joins the interleaved rounds
            all_info["mode"] = "interleaved with the others"
        else:
            all_queries = queries[:max(1, min(len(queries), fit))]
            all_info["mode"] = (f"one round over {len(all_queries)} of {len(queries)} queries "
                                f"after that warm-up run (budget {args.all_budget_s:g} s)")
    log(f"  N={n:,}: 'all' first run {w / 1000:.2f} s -> {all_info['mode']}")
    interleaved = [m for m in METHODS if m != "all" or (all_info["mode"].startswith("interleaved"))]

    # warm-up round (not timed), then the timed rounds, interleaved per query
    for q in queries:
        for m in interleaved:
            _, _, r = timed(conn, sqls[m], bindings(m, q))
            if m in POOLS:
                top3[m][q[0]] = [x[0] for x in r]
    for rnd in range(args.repeat):
        for q in queries:
            for m in interleaved:
                w, c, _ = timed(conn, sqls[m], bindings(m, q))
                wall[m].append(w)
                cpu[m].append(c)
                per_query[m].setdefault(q[0], []).append(w)
        log(f"  N={n:,}: round {rnd + 1}/{args.repeat}: " + ", ".join(
            f"{m} {statistics.median(wall[m]):.1f}" for m in interleaved) + " ms")
    for q in all_queries:
        w, c, r = timed(conn, sqls["all"], bindings("all", q))
        wall["all"].append(w)
        cpu["all"].append(c)
        per_query["all"].setdefault(q[0], []).append(w)
        top3["all"][q[0]] = [x[0] for x in r]
    all_info["runs"] = len(wall["all"])

    methods = {m: summary(wall[m], cpu[m]) for m in METHODS if wall[m]}
    qids = [q[0] for q in queries]
    paired_knn = [statistics.median(per_query["knn"][qid]) / statistics.median(per_query["vec_knn"][qid])
                  for qid in qids]
    ratio = {"knn_over_vec_knn": methods["knn"]["median_ms"] / methods["vec_knn"]["median_ms"],
             "knn_over_vec_knn_cpu": (methods["knn"]["median_cpu_ms"]
                                      / methods["vec_knn"]["median_cpu_ms"]),
             "knn_over_vec_knn_paired": statistics.median(paired_knn)}
    common = [qid for qid in top3["all"] if qid in top3["knn"]]
    agree = {"queries": len(common),
             "top3_identical": sum(top3["knn"][q] == top3["all"][q] for q in common),
             "top3_same_set": sum(set(top3["knn"][q]) == set(top3["all"][q]) for q in common)}
    diag = diagnose(conn, sqls, bindings, queries[:args.diag_queries], methods)
    return {"index": index, "methods": methods, "ratio": ratio, "all": all_info,
            "knn_vs_all_top3": agree, "diagnostics": diag,
            "per_query_ms": {m: {q: statistics.median(v) for q, v in per_query[m].items()}
                             for m in METHODS}}


def diagnose(conn, sqls: Dict[str, str], bindings, queries, methods) -> dict:
    """Where the 'knn' statement's time goes."""
    knn = sqls["knn"]
    out: Dict[str, Any] = {"queries": len(queries)}
    runs: Dict[str, List[Tuple[float, float]]] = {}

    def run(label: str, sql: str, b_of) -> None:
        for q in queries:
            w, c, _ = timed(conn, sql, b_of(q))
            runs.setdefault(label, []).append((w, c))

    knn_b = lambda q: bindings("knn", q)  # noqa: E731
    for stage, sql in br.stage_sqls(knn):
        run("stage:" + stage, sql, knn_b)
    # the pool CTE with a literal k (no scalar subquery for sqlite-vec's k constraint)
    ctes, final = br.split_ctes(knn)
    lit = [(name, body.replace("k = (SELECT pool_size FROM params)", f"k = {POOL_SIZE}")
            if name == "pool" else body) for name, body in ctes]
    upto = [b for name, b in lit[:[c for c, _ in lit].index("pool") + 1]]
    run("pool CTE, literal k", "WITH " + ",\n".join(upto) + "\nSELECT count(*) FROM pool", knn_b)
    run("whole, literal k", "WITH\n" + ",\n".join(b for _, b in lit) + "\n" + final, knn_b)
    # no BM25 work: the same statement with the query '' (fts5_query gives '""')
    run("whole, empty query", knn, lambda q: dict(bindings("knn", q), query=""))
    run("vec_knn (same queries)", sqls["vec_knn"], lambda q: bindings("vec_knn", q))
    run("bm25 (same queries)", sqls["bm25"], lambda q: bindings("bm25", q))
    out["timings"] = [{"what": k, "median_ms": statistics.median(w for w, _ in v),
                       "median_cpu_ms": statistics.median(c for _, c in v)} for k, v in runs.items()]
    out["plan_knn"] = plan_lines(conn, knn, bindings("knn", queries[0]))
    out["plan_vec_knn"] = plan_lines(conn, sqls["vec_knn"], bindings("vec_knn", queries[0]))
    cand = conn.execute("WITH " + ",\n".join(b for _, b in ctes[:[c for c, _ in ctes].index("candidates") + 1])
                        + "\nSELECT count(*) FROM candidates", bindings("knn", queries[0])).fetchall()[0][0]
    out["candidates_first_query"] = cand
    return out


# ---------------------------------------------------------------- report


def fmt_ms(m: Optional[dict]) -> str:
    if not m:
        return "-"
    s = f"{m['median_ms']:,.1f}" if m["median_ms"] < 10_000 else f"{m['median_ms']:,.0f}"
    return s + ("" if m["runs"] > 1 else " (1 run)")


def table_md(results: List[dict]) -> str:
    cols = ["N", "recent", "knn", "all", "sqlite-vec KNN alone", "BM25 alone", "knn / KNN alone",
            "enable_knn s"]
    lines = ["| " + " | ".join(cols) + " |", "|" + "|".join("---:" for _ in cols) + "|"]
    for r in results:
        m = r["methods"]
        lines.append("| " + " | ".join([
            f"{r['n']:,}", fmt_ms(m.get("recent")), fmt_ms(m.get("knn")), fmt_ms(m.get("all")),
            fmt_ms(m.get("vec_knn")), fmt_ms(m.get("bm25")),
            f"{r['ratio']['knn_over_vec_knn']:.2f}x (cpu {r['ratio']['knn_over_vec_knn_cpu']:.2f}x, "
            f"paired {r['ratio']['knn_over_vec_knn_paired']:.2f}x)",
            f"{r['index']['enable_knn_s']:.1f}"]) + " |")
    return "\n".join(lines)


def target_line(results: List[dict]) -> str:
    at = [r for r in results if r["n"] == TARGET_SIZE]
    r = at[0] if at else max(results, key=lambda x: x["n"])
    x = r["methods"]["knn"]["median_ms"]
    y = r["ratio"]["knn_over_vec_knn"]
    where = "1M" if at else f"{r['n']:,} (1M not run)"
    verdict = "met" if y <= TARGET_RATIO else "NOT MET"
    return (f"knn recall at {where}: {x:,.1f} ms = {y:.2f}x sqlite-vec KNN alone "
            f"(target <= {TARGET_RATIO:g}x) -- {verdict}; cpu {r['ratio']['knn_over_vec_knn_cpu']:.2f}x, "
            f"paired {r['ratio']['knn_over_vec_knn_paired']:.2f}x")


def report(result: dict) -> str:
    res = result["results"]
    info = result["info"]
    out = [f"Recall latency vs N: median wall-clock ms per query, {info['queries']} SciFact test "
           f"claims x {info['repeat']} rounds after a warm-up (default profile, pool_size "
           f"{POOL_SIZE}, limit {LIMIT}; load average at start {info['loadavg_start']})", "",
           table_md(res), ""]
    for r in res:
        a = r["all"]
        out.append(f"  N={r['n']:,}: 'all' {a['mode']} ({a['runs']} timed runs); "
                   f"knn vs all top-3: {r['knn_vs_all_top3']['top3_identical']}/"
                   f"{r['knn_vs_all_top3']['queries']} identical, "
                   f"{r['knn_vs_all_top3']['top3_same_set']} same set")
    out.append("")
    out.append("Index build (Store.enable_knn, then PRAGMA wal_checkpoint(TRUNCATE))")
    for r in res:
        i = r["index"]
        out.append(f"  N={r['n']:,}: enable_knn {i['enable_knn_s']:.1f} s "
                   f"({i['vec_rows']:,} vectors, {i['rows_per_s'] or 0:,.0f}/s), checkpoint "
                   f"{i['checkpoint_s']:.1f} s, index +{i['index_bytes'] / 1e6:,.0f} MB; "
                   f"private copy {r['copy']['seconds']:.1f} s")
    out.append("")
    out.append("Where the 'knn' statement's time goes (median wall / cpu ms over the diagnostic "
               "queries; stage X = WITH <CTEs up to X> SELECT count(*) FROM X)")
    for r in res:
        d = r["diagnostics"]
        out.append(f"  N={r['n']:,} ({d['queries']} queries, candidates {d['candidates_first_query']} "
                   "on the first): " + ", ".join(
                       f"{t['what'].replace('stage:', '')} {t['median_ms']:.1f}/{t['median_cpu_ms']:.1f}"
                       for t in d["timings"]))
    out.append("")
    out.append(target_line(res))
    return "\n".join(out)


def plot(result: dict, path: str) -> Optional[str]:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        log("(matplotlib not importable: no plot)")
        return None
    res = result["results"]
    fig, ax = plt.subplots(figsize=(8, 5.2))
    styles = {"recent": "o-", "knn": "s-", "all": "D-", "vec_knn": "^--", "bm25": "v:"}
    for m in METHODS:
        pts = [(r["n"], r["methods"][m]) for r in res if m in r["methods"]]
        if not pts:
            continue
        ns = [p[0] for p in pts]
        med = [p[1]["median_ms"] for p in pts]
        lo = [p[1]["median_ms"] - p[1]["p10_ms"] for p in pts]
        hi = [p[1]["p90_ms"] - p[1]["median_ms"] for p in pts]
        ax.errorbar(ns, med, yerr=[lo, hi], fmt=styles[m], capsize=3, label=LABELS[m])
        for n, s in zip(ns, [p[1] for p in pts]):
            if s["runs"] == 1:
                ax.annotate("1 run", (n, s["median_ms"]), textcoords="offset points",
                            xytext=(5, 5), fontsize=7)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("episodes (N, 384-d)")
    ax.set_ylabel("median wall-clock ms per query (bars: p10-p90)")
    info = result["info"]
    ax.set_title(f"recall latency vs N by pool mode: {info['queries']} SciFact claims x "
                 f"{info['repeat']}", fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


# ---------------------------------------------------------------- main


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="10000,100000,1000000")
    ap.add_argument("--queries", type=int, default=20)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--diag-queries", type=int, default=5)
    ap.add_argument("--all-max-s", type=float, default=60.0,
                    help="'all' slower than this on its first run: report that one timing")
    ap.add_argument("--all-budget-s", type=float, default=120.0,
                    help="wall-clock budget for the timed 'all' runs of one size")
    ap.add_argument("--seed", type=int, default=SEED)
    ap.add_argument("--keep", action="store_true", help="keep the private database copies")
    ap.add_argument("--out", default=OUT_DIR)
    ap.add_argument("--no-plot", action="store_true")
    args = ap.parse_args(argv)
    sizes = [int(s.replace("_", "")) for s in args.sizes.split(",") if s.strip()]
    queries = br.load_queries(args.queries)
    args.diag_queries = max(1, min(args.diag_queries, len(queries)))
    try:
        loadavg = " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        loadavg = "?"
    import sqlite_vec  # type: ignore[import-not-found]

    info = {"sizes": sizes, "queries": len(queries), "repeat": args.repeat,
            "pool_size": POOL_SIZE, "limit": LIMIT, "profile": "default",
            "sqlite": apsw.sqlite_lib_version(), "apsw": apsw.apsw_version(),
            "sqlite_vec": getattr(sqlite_vec, "__version__", "?"),
            "python": platform.python_version(), "cpu": br._cpu_name(),
            "cpus": os.cpu_count(), "loadavg_start": loadavg,
            "query_ids": [q[0] for q in queries],
            "started": time.strftime("%Y-%m-%dT%H:%M:%S")}
    results = []
    t_start = time.perf_counter()
    try:
        for n in sizes:
            log(f"N={n:,}")
            results.append(bench_size(n, queries, args))
    finally:
        if not args.keep and os.path.isdir(SCALE_DIR) and not os.listdir(SCALE_DIR):
            os.rmdir(SCALE_DIR)
    info["elapsed_s"] = time.perf_counter() - t_start
    try:
        info["loadavg_end"] = " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        pass
    result = {"info": info, "results": results,
              "target": {"size": TARGET_SIZE, "max_ratio": TARGET_RATIO,
                         "line": target_line(results)}}
    os.makedirs(args.out, exist_ok=True)
    text = report(result)
    print(text)
    with open(os.path.join(args.out, "scale.json"), "w", encoding="utf-8") as f:
        json.dump(result, f, indent=2)
    with open(os.path.join(args.out, "scale.md"), "w", encoding="utf-8") as f:
        f.write(f"# Recall latency vs N (`tests/bench/bench_scale.py`)\n\nMedian wall-clock ms per "
                f"query; {info['queries']} SciFact test claims x {info['repeat']} rounds after a "
                f"warm-up; default profile, pool_size {POOL_SIZE}, limit {LIMIT}; {info['cpu']}, "
                f"{info['cpus']} cores, shared (load average {loadavg} at start).\n\n"
                + table_md(results) + "\n\n" + target_line(results) + "\n")
    if not args.no_plot:
        p = plot(result, os.path.join(args.out, "scale.png"))
        if p:
            log(f"wrote {p}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
