#!/usr/bin/env python3
"""Benchmark: recall latency vs N for every pool, the stages and baselines it is made of,
the quantized pool's quality, and the memory each needs (the target: "a million
episodes in under 100 ms").

Run by hand or by ``make bench`` (not part of the test suite)::

    .venv/bin/python tests/bench/bench_scale.py [--sizes 10000,100000,1000000]
                                                [--queries 20] [--repeat 3]

For each size N:

1. takes the cached database of ``bench_recall.py`` (``tests/bench/out/cache/``, built
   with its builder if missing; the cache is never modified) and copies it to a private
   file in ``tests/bench/out/scale/`` (deleted at the end, unless ``--keep``);
2. opens the copy with :class:`sqlite_rrf.store.Store`, timed: the migrations a cache
   from an older schema needs, and ``Store.fill_codes`` (the builder writes without a
   Store, so every sign code is pending: this is the upgrade cost of an existing
   database; the migrations, ``fill_codes`` and the ``pack_codes`` it ends with are timed
   apart); then times ``Store.enable_knn()`` (sqlite-vec's ``vec0`` index) and the
   WAL checkpoint;
3. memory: bytes on disk per table (SQLite's ``dbstat`` virtual table when compiled in,
   else none), the process RSS after each method's first run, and SQLite's heap high
   water per method (``apsw.memory_high_water``);
4. for the first ``--queries`` SciFact test claims with their cached MiniLM embeddings,
   one warm-up round, then ``--repeat`` rounds, every method interleaved per query (order
   rotated), wall clock and thread CPU time, on the Store's own apsw connection:

   - ``recent`` / ``all`` / ``quantized`` / ``knn``: the statement Store runs,
     ``recall_statement(pool, <default profile>)`` (checked to be 'hybrid'), with the
     bindings ``Store.recall`` passes (``RecallOptions.params``: pool_size 200, limit 3,
     the rest default);
   - ``quantized_mmap``: the ``quantized`` recall through a second Store over the same
     file, opened with ``Store(path, mmap_size=64 GiB)`` (SQLite caps it);
   - baselines: ``scan`` = ``SELECT max(vec_cosine(embedding, :qvec)) FROM
     episodes_vectors`` (the bare exact scan), ``hamming`` = the same over the sign codes
     (``rrf_hamming(code, vec_signbits(:qvec))``), ``vec_knn`` = sqlite-vec's brute-force
     KNN (``SELECT rowid, distance FROM episodes_vec WHERE embedding MATCH :qvec AND
     k = 200``), ``bm25`` = the statement's BM25 list alone;
   - the pool stages alone (``WITH <the statement's CTEs up to X> SELECT count(*) FROM X``):
     ``st:all`` (pool_all), ``st:codes`` (the Hamming stage of 'quantized'),
     ``st:quantized`` (both stages), ``st:recent``;
5. quality, per query: the recall of the exact top 200 (pool 'all') by the pools
   'quantized' and 'knn' (|pool ∩ all| / |all|), and the top-3 agreement of their recalls
   with pool 'all''s (identical lists; same set).

Prints a table (size x method, median ms), the issue's target lines (0: 'all' <= 1.3x
the bare scan at 100k and 1M; 1: quantized recall >= 0.95, top-3 agreement >= 95 %, the
quantized pool <= 10 % of sqlite-vec's KNN at 1M; 2: the whole recall, pool 'quantized',
<= 100 ms at 1M, with Store's defaults and with mmap) and the per-stage slopes (ms per million rows); writes
``tests/bench/out/scale.json``, ``scale.md`` and ``scale.png`` (log-log).
Exit status 0 even when a target is missed (a measurement, not a test).
"""

from __future__ import annotations

import argparse
import hashlib
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

import apsw
import bench_recall as br
import numpy as np

from sqlite_rrf.core.statements import recall_defaults, recall_statement
from sqlite_rrf.store import RecallOptions, Store

OUT_DIR = os.path.join(HERE, "out")
CACHE_DIR = os.path.join(OUT_DIR, "cache")
SCALE_DIR = os.path.join(OUT_DIR, "scale")
SEED = 20240607  # bench_recall's default seed: its cached databases
POOL_SIZE = 200
LIMIT = 3
POOLS = ("recent", "all", "quantized", "knn")
# the default recall again, through a second Store opened with mmap_size=MMAP_SIZE
MMAP = "quantized_mmap"
MMAP_SIZE = 1 << 36  # 64 GiB: SQLite caps it (SQLITE_MAX_MMAP_SIZE)
BASELINES = ("scan", "hamming", "vec_knn", "bm25")
STAGES = {
    "st:all": ("all", "pool_all"),
    "st:codes": ("quantized", "pool_codes"),
    "st:quantized": ("quantized", "pool_quantized"),
    "st:recent": ("recent", "pool_recent"),
}
METHODS = POOLS + (MMAP,) + BASELINES + tuple(STAGES)
SCAN_SQL = "SELECT max(vec_cosine(embedding, :qvec)) FROM episodes_vectors"
HAMMING_SQL = "SELECT max(rrf_hamming(code, vec_signbits(:qvec))) FROM episodes_codes"
KNN_ALONE_SQL = "SELECT rowid, distance FROM episodes_vec WHERE embedding MATCH :qvec AND k = 200"
LABELS = {
    "recent": "recall, pool 'recent'",
    "all": "recall, pool 'all'",
    "quantized": "recall, pool 'quantized'",
    MMAP: "recall, pool 'quantized', Store(mmap_size=64 GiB)",
    "knn": "recall, pool 'knn'",
    "scan": "bare cosine scan (max)",
    "hamming": "bare Hamming scan (max)",
    "vec_knn": "sqlite-vec KNN alone (k 200)",
    "bm25": "BM25 list alone",
    "st:all": "stage: pool_all alone",
    "st:codes": "stage: Hamming top pool_size x oversample alone",
    "st:quantized": "stage: pool_quantized alone",
    "st:recent": "stage: pool_recent alone",
}
# the targets
T0_RATIO = 1.3  # 'all' / bare scan, at 100k and 1M
T1_RECALL = 0.95  # quantized pool's recall of the exact top 200, at 100k and 1M
T1_TOP3 = 0.95  # top-3 agreement of the recall, quantized vs all
T1_SPEED = 0.10  # quantized pool / sqlite-vec KNN, at 1M
T2_MS = 100.0  # whole recall, pool 'quantized', p50 at 1M
BIG = (100_000, 1_000_000)
# narrow objects whose bytes are reported one by one (the rest is "everything else")
SIZE_OBJECTS = (
    "episodes",
    "episodes_vectors",
    "episodes_codes",
    "episodes_code_blocks",
    "idx_episodes_codes_pending",
    "idx_episodes_codes_loose",
)


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
    others = (
        sorted(
            (
                f
                for f in os.listdir(CACHE_DIR)
                if f.startswith(prefix)
                and f.endswith(".db")
                and os.path.exists(os.path.join(CACHE_DIR, f + ".json"))
            ),
            key=lambda f: os.path.getmtime(os.path.join(CACHE_DIR, f)),
        )
        if os.path.isdir(CACHE_DIR)
        else []
    )
    if others:
        return os.path.join(CACHE_DIR, others[-1]), "cache (other schema key: migrated)"
    log(f"  no cached database for N={n:,}: building one with bench_recall's builder")
    path, _, _ = br.ensure_db(CACHE_DIR, n, seed, False)
    return path, "built now"


def private_copy(src: str, dst: str) -> Tuple[float, str]:
    """Copy ``src`` to ``dst`` without touching ``src``: a plain file copy when its WAL is
    empty, else SQLite's online backup (which reads the WAL too). (seconds, how)."""
    remove_db(dst)
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
    return {
        "runs": len(wall),
        "median_ms": statistics.median(wall),
        "median_cpu_ms": statistics.median(cpu),
        "p10_ms": float(np.percentile(wall, 10)),
        "p90_ms": float(np.percentile(wall, 90)),
        "min_ms": min(wall),
        "max_ms": max(wall),
    }


def rss_mb() -> Tuple[float, float]:
    """(VmRSS, VmHWM) of this process in MB (Linux; NaN elsewhere)."""
    out = {"VmRSS": float("nan"), "VmHWM": float("nan")}
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                k = line.split(":")[0]
                if k in out:
                    out[k] = int(line.split()[1]) / 1024
    except OSError:
        pass
    return out["VmRSS"], out["VmHWM"]


def page_bytes(conn: "apsw.Connection") -> int:
    pc = conn.execute("PRAGMA page_count").fetchall()[0][0]
    ps = conn.execute("PRAGMA page_size").fetchall()[0][0]
    return int(pc) * int(ps)


def disk_bytes(conn: "apsw.Connection") -> Dict[str, Any]:
    """Bytes per table/index (dbstat, aggregated per object), grouped: the narrow tables
    one by one, the vec0 index (its shadow tables), FTS5 (its shadow tables), and the
    rest. Walks only the objects named (dbstat's name constraint)."""
    try:
        conn.execute("SELECT 1 FROM dbstat LIMIT 0").fetchall()
    except apsw.SQLError:
        return {"dbstat": False, "file_bytes": page_bytes(conn)}
    names = [
        r[0]
        for r in conn.execute(
            "SELECT name FROM sqlite_schema WHERE type IN ('table', 'index') AND rootpage > 0"
        )
    ]
    per: Dict[str, int] = {}
    for name in names:
        row = conn.execute(
            "SELECT pgsize FROM dbstat('main', 1) WHERE name = ?", (name,)
        ).fetchall()
        per[name] = int(row[0][0]) if row and row[0][0] is not None else 0
    groups: Dict[str, int] = {k: per.get(k, 0) for k in SIZE_OBJECTS}
    groups["episodes indexes"] = sum(
        v for k, v in per.items() if k.startswith("idx_episodes") and k not in SIZE_OBJECTS
    )
    groups["vec0 index (episodes_vec*)"] = sum(
        v for k, v in per.items() if k.startswith("episodes_vec_") or k == "episodes_vec"
    )
    groups["fts5 (episodes_fts*)"] = sum(v for k, v in per.items() if k.startswith("episodes_fts"))
    total = page_bytes(conn)
    groups["everything else"] = total - sum(groups.values())
    return {"dbstat": True, "file_bytes": total, "groups": groups, "objects": per}


def stage_sql(statement: str, cte: str) -> str:
    """``WITH <the statement's CTEs up to cte> SELECT count(*) FROM cte``."""
    ctes, _ = br.split_ctes(statement)
    names = [c for c, _ in ctes]
    return (
        "WITH "
        + ",\n".join(b for _, b in ctes[: names.index(cte) + 1])
        + f"\nSELECT count(*) FROM {cte}"
    )


def pool_rows_sql(statement: str, cte: str) -> str:
    ctes, _ = br.split_ctes(statement)
    names = [c for c, _ in ctes]
    return (
        "WITH "
        + ",\n".join(b for _, b in ctes[: names.index(cte) + 1])
        + f"\nSELECT rowid FROM {cte}"
    )


def slope(results: List[dict], method: str) -> Optional[float]:
    """ms per million rows between the two largest sizes run (None with fewer than two)."""
    pts = sorted(
        (r["n"], r["methods"][method]["median_ms"])
        for r in results
        if method in r.get("methods", {})
    )
    if len(pts) < 2:
        return None
    (n0, t0), (n1, t1) = pts[-2], pts[-1]
    return (t1 - t0) / (n1 - n0) * 1e6


# ---------------------------------------------------------------- one size


class TimedStore(Store):
    """Store that adds up the seconds its ``fill_codes`` and ``pack_codes`` take (the
    upgrade's two steps after the migrations)."""

    fill_s = 0.0
    pack_s = 0.0

    def fill_codes(self) -> int:
        t0 = time.perf_counter()
        try:
            return super().fill_codes()
        finally:
            self.fill_s += time.perf_counter() - t0

    def pack_codes(self, block: Optional[int] = None) -> int:
        t0 = time.perf_counter()
        try:
            return super().pack_codes(block)
        finally:
            self.pack_s += time.perf_counter() - t0


def bench_size(n: int, queries: List[Tuple[str, str, bytes]], args: argparse.Namespace) -> dict:
    src, origin = cached_db(n, args.seed)
    os.makedirs(SCALE_DIR, exist_ok=True)
    dst = os.path.join(SCALE_DIR, f"scale_{n}.db")
    res: Dict[str, Any] = {"n": n, "source_db": os.path.relpath(src, HERE), "source": origin}
    try:
        copy_s, how = private_copy(src, dst)
        res["copy"] = {"seconds": copy_s, "how": how, "bytes": os.path.getsize(dst)}
        log(f"  N={n:,}: copied {os.path.getsize(dst) / 1e6:,.0f} MB in {copy_s:.1f} s ({how})")
        probe = apsw.Connection(dst)
        try:
            pending = probe.execute(
                "SELECT count(*) FROM episodes_codes WHERE code IS NULL"
            ).fetchall()[0][0]
        except apsw.SQLError:
            pending = None  # no codes table yet: migration 0007 makes it
        probe.close()
        t0 = time.perf_counter()
        store = TimedStore(dst)
        store.fill_codes()  # an open does no upkeep: the upgrade's last step
        open_s = time.perf_counter() - t0
        res["upgrade"] = {
            "store_open_s": open_s,
            "codes_pending_before": pending,
            "fill_codes_s": store.fill_s - store.pack_s,
            "pack_codes_s": store.pack_s,
            "migrations_s": open_s - store.fill_s,
            "blocks": store.conn.execute("SELECT count(*) FROM episodes_code_blocks").fetchall()[0][
                0
            ],
            "codes_pending_after": store.conn.execute(
                "SELECT count(*) FROM episodes_codes WHERE code IS NULL"
            ).fetchall()[0][0],
        }
        log(
            f"  N={n:,}: Store open (migrations + fill_codes of {pending if pending is not None else 'all'} "
            f"codes) {open_s:.1f} s: migrations {res['upgrade']['migrations_s']:.1f} s, fill_codes "
            f"{res['upgrade']['fill_codes_s']:.1f} s, pack_codes {store.pack_s:.1f} s "
            f"({res['upgrade']['blocks']:,} blocks)"
        )
        try:
            res.update(run_on_store(store, n, queries, args))
        finally:
            store.close()
    finally:
        if not args.keep:
            remove_db(dst)
    return res


def run_on_store(
    store: Store, n: int, queries: List[Tuple[str, str, bytes]], args: argparse.Namespace
) -> dict:
    conn = store.conn
    rows = conn.execute("SELECT count(*) FROM episodes WHERE embedding IS NOT NULL").fetchall()[0][
        0
    ]
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    before = page_bytes(conn)
    t0 = time.perf_counter()
    store.enable_knn()
    knn_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    ckpt_s = time.perf_counter() - t0
    vec_rows = conn.execute("SELECT count(*) FROM episodes_vec").fetchall()[0][0]
    index = {
        "enable_knn_s": knn_s,
        "checkpoint_s": ckpt_s,
        "embeddings": rows,
        "vec_rows": vec_rows,
        "index_bytes": page_bytes(conn) - before,
        "rows_per_s": rows / knn_s if knn_s > 0 else None,
    }
    log(
        f"  N={n:,}: enable_knn {knn_s:.1f} s ({vec_rows:,} vectors), checkpoint {ckpt_s:.1f} s, "
        f"+{index['index_bytes'] / 1e6:,.0f} MB"
    )
    t0 = time.perf_counter()
    disk = disk_bytes(conn)
    disk["seconds"] = time.perf_counter() - t0

    profile = recall_defaults()["profile"]
    assert profile == "hybrid", profile
    # the same file through a second Store, opened with mmap_size: the default recall again
    mstore = Store(store.path, mmap_size=MMAP_SIZE)
    try:
        return _run_methods(store, mstore, n, queries, args, index, disk, profile)
    finally:
        mstore.close()


def _run_methods(
    store: Store,
    mstore: Store,
    n: int,
    queries: List[Tuple[str, str, bytes]],
    args: argparse.Namespace,
    index: dict,
    disk: dict,
    profile: str,
) -> dict:
    conn = store.conn
    mmap_got = mstore.conn.execute("PRAGMA mmap_size").fetchall()[0][0]
    log(f"  N={n:,}: second Store with mmap_size {MMAP_SIZE:,}: PRAGMA mmap_size = {mmap_got:,}")
    index["mmap_size"] = mmap_got
    sqls: Dict[str, str] = {p: recall_statement(p, profile) for p in POOLS}
    sqls[MMAP] = sqls["quantized"]
    conns = {m: (mstore.conn if m == MMAP else conn) for m in METHODS}
    sqls.update(scan=SCAN_SQL, hamming=HAMMING_SQL, vec_knn=KNN_ALONE_SQL, bm25=br.BM25_SQL)
    for m, (pool, cte) in STAGES.items():
        sqls[m] = stage_sql(sqls[pool], cte)

    def bindings(method: str, q: Tuple[str, str, bytes]) -> Dict[str, Any]:
        if method in ("scan", "hamming", "vec_knn"):
            return {"qvec": q[2]}
        if method == "bm25":
            return br.bm25_bindings(br.BM25_SQL, q[1])
        pool = STAGES[method][0] if method in STAGES else method
        pool = "quantized" if pool == MMAP else pool
        # what Store.recall(q, limit=3, pool=..., pool_size=200, touch=False, force=True) binds
        return dict(
            RecallOptions(limit=LIMIT, pool=pool, pool_size=POOL_SIZE).params(),
            query=q[1],
            qvec=q[2],
        )

    wall: Dict[str, List[float]] = {m: [] for m in METHODS}
    cpu: Dict[str, List[float]] = {m: [] for m in METHODS}
    per_query: Dict[str, Dict[str, List[float]]] = {m: {} for m in METHODS}
    top3: Dict[str, Dict[str, List[str]]] = {m: {} for m in POOLS + (MMAP,)}

    # warm-up, one method at a time (not timed): memory per method
    memory: Dict[str, Any] = {"rss_after_open_mb": rss_mb()[0], "methods": {}}
    for m in METHODS:
        apsw.memory_high_water(True)
        base = apsw.memory_used()
        r0 = rss_mb()[0]
        for q in queries:
            _, _, r = timed(conns[m], sqls[m], bindings(m, q))
            if m in top3:
                top3[m][q[0]] = [x[0] for x in r]
        memory["methods"][m] = {
            "sqlite_heap_peak_mb": (apsw.memory_high_water(True) - base) / (1 << 20),
            "rss_growth_mb": rss_mb()[0] - r0,
        }
    memory["rss_after_warmup_mb"], memory["rss_peak_mb"] = rss_mb()
    log(
        f"  N={n:,}: warm-up done; RSS {memory['rss_after_warmup_mb']:.0f} MB "
        f"(peak {memory['rss_peak_mb']:.0f} MB)"
    )

    names = list(METHODS)
    for rnd in range(args.repeat):
        for qi, q in enumerate(queries):
            shift = (rnd + qi) % len(names)
            for m in names[shift:] + names[:shift]:
                w, c, _ = timed(conns[m], sqls[m], bindings(m, q))
                wall[m].append(w)
                cpu[m].append(c)
                per_query[m].setdefault(q[0], []).append(w)
        log(
            f"  N={n:,}: round {rnd + 1}/{args.repeat}: "
            + ", ".join(f"{m} {statistics.median(wall[m]):.1f}" for m in names)
            + " ms"
        )

    methods = {m: summary(wall[m], cpu[m]) for m in METHODS if wall[m]}
    io = io_diagnostic(conn, sqls, bindings, queries[: args.diag_queries], n)
    qids = [q[0] for q in queries]
    pq = {m: {q: statistics.median(v) for q, v in per_query[m].items()} for m in METHODS}

    def ratio(a: str, b: str) -> Dict[str, float]:
        return {
            "median": methods[a]["median_ms"] / methods[b]["median_ms"],
            "cpu": methods[a]["median_cpu_ms"] / methods[b]["median_cpu_ms"],
            "paired": statistics.median(pq[a][q] / pq[b][q] for q in qids),
        }

    ratios = {
        "all/scan": ratio("all", "scan"),
        "st:all/scan": ratio("st:all", "scan"),
        "st:quantized/vec_knn": ratio("st:quantized", "vec_knn"),
        "quantized/vec_knn": ratio("quantized", "vec_knn"),
        "mmap/quantized": ratio(MMAP, "quantized"),
        "st:codes/hamming": ratio("st:codes", "hamming"),
        "knn/vec_knn": ratio("knn", "vec_knn"),
    }

    # quality: the pools' rowids against pool 'all''s, per query
    pool_rows = {p: pool_rows_sql(sqls[p], "pool_" + p) for p in ("all", "quantized", "knn")}
    rec: Dict[str, List[float]] = {"quantized": [], "knn": []}
    for q in queries:
        exact = {r[0] for r in conn.execute(pool_rows["all"], bindings("all", q))}
        for p in rec:
            got = {r[0] for r in conn.execute(pool_rows[p], bindings(p, q))}
            rec[p].append(len(got & exact) / max(1, len(exact)))
    quality: Dict[str, Any] = {}
    for p in ("quantized", "knn", "recent", MMAP):
        common = [qid for qid in qids if qid in top3[p] and qid in top3["all"]]
        quality[p] = {
            "queries": len(common),
            "top3_identical": sum(top3[p][q] == top3["all"][q] for q in common) / len(common),
            "top3_same_set": sum(set(top3[p][q]) == set(top3["all"][q]) for q in common)
            / len(common),
        }
        if p in rec:
            quality[p].update(
                pool_recall_mean=statistics.fmean(rec[p]), pool_recall_min=min(rec[p])
            )
    statements = {p: hashlib.sha256(sqls[p].encode()).hexdigest()[:16] for p in POOLS}
    return {
        "index": index,
        "disk": disk,
        "memory": memory,
        "methods": methods,
        "ratios": ratios,
        "quality": quality,
        "profile": profile,
        "per_query_ms": pq,
        "io": io,
        "statements_sha256": statements,
    }


DIAG_METHODS = (
    "scan",
    "all",
    "st:all",
    "hamming",
    "st:codes",
    "st:quantized",
    "quantized",
    "vec_knn",
    "bm25",
)


def io_diagnostic(conn, sqls: Dict[str, str], bindings, queries, n: int) -> Dict[str, Any]:
    """What the page I/O costs: the methods above again on ``queries`` (one warm-up, one
    timed round, interleaved) with ``PRAGMA mmap_size`` as large as this SQLite allows,
    against Store's default (no mmap, a 2 MB page cache: every page read is a read()
    call). Restores the setting."""
    if not queries:
        return {}
    old = conn.execute("PRAGMA mmap_size").fetchall()[0][0]
    got = conn.execute(f"PRAGMA mmap_size = {1 << 36}").fetchall()
    mmap = int(got[0][0]) if got else 0
    out: Dict[str, Any] = {"mmap_size": mmap, "queries": len(queries), "methods": {}}
    try:
        for q in queries:
            for m in DIAG_METHODS:
                timed(conn, sqls[m], bindings(m, q))
        wall: Dict[str, List[float]] = {m: [] for m in DIAG_METHODS}
        for q in queries:
            for m in DIAG_METHODS:
                wall[m].append(timed(conn, sqls[m], bindings(m, q))[0])
        out["methods"] = {m: statistics.median(v) for m, v in wall.items()}
    finally:
        conn.execute(f"PRAGMA mmap_size = {int(old)}")
    log(
        f"  N={n:,}: with mmap_size {mmap / 1e9:.1f} GB: "
        + ", ".join(f"{m} {v:.1f}" for m, v in out["methods"].items())
        + " ms"
    )
    return out


# ---------------------------------------------------------------- report


def fmt_ms(m: Optional[dict]) -> str:
    if not m:
        return "-"
    return f"{m['median_ms']:,.1f}" if m["median_ms"] < 10_000 else f"{m['median_ms']:,.0f}"


def table_md(results: List[dict]) -> str:
    cols = ["N"] + [LABELS[m] for m in METHODS]
    lines = ["| " + " | ".join(cols) + " |", "|" + "|".join("---:" for _ in cols) + "|"]
    for r in results:
        lines.append(
            "| "
            + " | ".join([f"{r['n']:,}"] + [fmt_ms(r["methods"].get(m)) for m in METHODS])
            + " |"
        )
    return "\n".join(lines)


def quality_md(results: List[dict]) -> str:
    lines = [
        "| N | quantized: recall of the exact top 200 (mean / min) | quantized: top-3 identical "
        "/ same set | knn: recall of top 200 (mean / min) | knn: top-3 identical | recent: top-3 "
        "identical |",
        "|---:|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        q, k, rc = r["quality"]["quantized"], r["quality"]["knn"], r["quality"]["recent"]
        lines.append(
            f"| {r['n']:,} | {q['pool_recall_mean']:.4f} / {q['pool_recall_min']:.3f} | "
            f"{q['top3_identical']:.0%} / {q['top3_same_set']:.0%} | "
            f"{k['pool_recall_mean']:.4f} / {k['pool_recall_min']:.3f} | "
            f"{k['top3_identical']:.0%} | {rc['top3_identical']:.0%} |"
        )
    return "\n".join(lines)


def memory_md(results: List[dict]) -> str:
    groups = list(results[0]["disk"].get("groups", {}))
    lines = [
        "| N | file MB | "
        + " | ".join(f"{g} MB" for g in groups)
        + " | bytes/row vectors | bytes/row codes | bytes/row vec0 | RSS after warm-up MB | "
        "RSS peak MB |",
        "|" + "---:|" * (len(groups) + 7),
    ]
    for r in results:
        d = r["disk"]
        g = d.get("groups", {})
        per_row = lambda k: f"{g.get(k, 0) / r['n']:.0f}"  # noqa: E731
        lines.append(
            f"| {r['n']:,} | {d['file_bytes'] / 1e6:,.0f} | "
            + " | ".join(f"{g[x] / 1e6:,.1f}" for x in groups)
            + f" | {per_row('episodes_vectors')} | {per_row('episodes_codes')} | "
            f"{per_row('vec0 index (episodes_vec*)')} | "
            f"{r['memory']['rss_after_warmup_mb']:,.0f} | {r['memory']['rss_peak_mb']:,.0f} |"
        )
    return "\n".join(lines)


def target_lines(results: List[dict]) -> List[str]:
    by_n = {r["n"]: r for r in results}
    out = []

    def verdict(ok: bool) -> str:
        return "met" if ok else "NOT MET"

    for n in BIG:
        r = by_n.get(n)
        if not r:
            out.append(f"target 0 at {n:,}: not run")
            continue
        x = r["ratios"]["all/scan"]
        out.append(
            f"target 0 at {n:,}: pool 'all' recall {r['methods']['all']['median_ms']:,.1f} ms = "
            f"{x['median']:.2f}x the bare cosine scan ({r['methods']['scan']['median_ms']:,.1f} ms; "
            f"cpu {x['cpu']:.2f}x, paired {x['paired']:.2f}x; the pool stage alone "
            f"{r['ratios']['st:all/scan']['median']:.2f}x) (target <= {T0_RATIO:g}x) -- "
            f"{verdict(x['median'] <= T0_RATIO)}"
        )
    for n in BIG:
        r = by_n.get(n)
        if not r:
            out.append(f"target 1 at {n:,}: not run")
            continue
        q = r["quality"]["quantized"]
        out.append(
            f"target 1 at {n:,}: quantized recall of the exact top {POOL_SIZE} "
            f"{q['pool_recall_mean']:.4f} (min {q['pool_recall_min']:.3f}) (target >= {T1_RECALL:g}) "
            f"-- {verdict(q['pool_recall_mean'] >= T1_RECALL)}; top-3 agreement with 'all' "
            f"{q['top3_identical']:.0%} identical, {q['top3_same_set']:.0%} same set "
            f"(target >= {T1_TOP3:.0%}) -- {verdict(q['top3_identical'] >= T1_TOP3)}"
        )
    r = by_n.get(1_000_000)
    if r:
        s = r["ratios"]["st:quantized/vec_knn"]
        out.append(
            f"target 1 at 1,000,000: quantized pool alone {r['methods']['st:quantized']['median_ms']:,.1f} ms "
            f"= {s['median']:.1%} of sqlite-vec's KNN ({r['methods']['vec_knn']['median_ms']:,.1f} ms; "
            f"paired {s['paired']:.1%}; whole recall {r['ratios']['quantized/vec_knn']['median']:.1%}) "
            f"(target <= {T1_SPEED:.0%}) -- {verdict(s['median'] <= T1_SPEED)}"
        )
        m = r["methods"]["quantized"]
        out.append(
            f"target 2 at 1,000,000: recall, pool 'quantized', profile '{r['profile']}': p50 "
            f"{m['median_ms']:,.1f} ms (cpu {m['median_cpu_ms']:,.1f}, p90 {m['p90_ms']:,.1f}) "
            f"(target <= {T2_MS:g} ms) -- {verdict(m['median_ms'] <= T2_MS)}"
        )
        m = r["methods"][MMAP]
        out.append(
            f"target 2 at 1,000,000, Store(mmap_size={MMAP_SIZE}): p50 "
            f"{m['median_ms']:,.1f} ms (cpu {m['median_cpu_ms']:,.1f}, p90 {m['p90_ms']:,.1f}) "
            f"(target <= {T2_MS:g} ms) -- {verdict(m['median_ms'] <= T2_MS)}"
        )
    else:
        out.append("targets 1 (speed) and 2 at 1,000,000: not run")
    return out


def report(result: dict) -> str:
    res = result["results"]
    info = result["info"]
    out = [
        f"Recall latency vs N: median wall-clock ms per query, {info['queries']} SciFact test "
        f"claims x {info['repeat']} rounds after a warm-up (profile '{info['profile']}', pool_size "
        f"{POOL_SIZE}, limit {LIMIT}; load average {info['loadavg_start']} at start, "
        f"{info.get('loadavg_end', '?')} at the end)",
        "",
        table_md(res),
        "",
        "Quality against pool 'all' (the exact top 200 by cosine)",
        "",
        quality_md(res),
        "",
        "Memory (bytes on disk from dbstat; RSS of this process)",
        "",
        memory_md(res),
        "",
    ]
    for r in res:
        i, u = r["index"], r["upgrade"]
        out.append(
            f"  N={r['n']:,}: Store open {u['store_open_s']:.1f} s (migrations "
            f"{u['migrations_s']:.1f} s, fill_codes {u['fill_codes_s']:.1f} s, pack_codes "
            f"{u['pack_codes_s']:.1f} s, {u['blocks']:,} blocks; codes pending before "
            f"{u['codes_pending_before']}, after {u['codes_pending_after']}); enable_knn "
            f"{i['enable_knn_s']:.1f} s ({i['vec_rows']:,} vectors), checkpoint "
            f"{i['checkpoint_s']:.1f} s, index +{i['index_bytes'] / 1e6:,.0f} MB; private copy "
            f"{r['copy']['seconds']:.1f} s"
        )
    out.append("")
    for r in res:
        io = r.get("io") or {}
        if io.get("methods"):
            out.append(
                f"  N={r['n']:,}, PRAGMA mmap_size {io['mmap_size'] / 1e9:.1f} GB instead of "
                f"Store's default (median of {io['queries']} queries, one round): "
                + ", ".join(
                    f"{m} {v:,.1f} ms (default {r['methods'][m]['median_ms']:,.1f})"
                    for m, v in io["methods"].items()
                )
            )
    out.append("")
    sl = result.get("slopes", {})
    if sl:
        out.append(
            "Slopes between the two largest sizes (ms per million rows): "
            + ", ".join(f"{m} {v:,.1f}" for m, v in sl.items() if v is not None)
        )
        out.append("")
    out += result["target_lines"]
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
    fig, axes = plt.subplots(1, 2, figsize=(13, 5.4), sharey=True)
    styles = {
        "recent": "o-",
        "all": "D-",
        "quantized": "s-",
        MMAP: "s--",
        "knn": "P-",
        "scan": "x--",
        "hamming": "+--",
        "vec_knn": "^--",
        "bm25": "v:",
        "st:all": "d:",
        "st:codes": "1:",
        "st:quantized": "s:",
        "st:recent": "o:",
    }
    groups = (
        (
            "the recall statement (Store's), and the bare scans / KNN it competes with",
            ("recent", "all", "quantized", MMAP, "knn", "scan", "vec_knn"),
        ),
        (
            "the stages alone (pools, Hamming, BM25)",
            ("st:recent", "st:all", "st:codes", "st:quantized", "hamming", "bm25"),
        ),
    )
    for ax, (title, ms) in zip(axes, groups):
        for m in ms:
            pts = [(r["n"], r["methods"][m]) for r in res if m in r["methods"]]
            if not pts:
                continue
            ns = [p[0] for p in pts]
            med = [p[1]["median_ms"] for p in pts]
            lo = [p[1]["median_ms"] - p[1]["p10_ms"] for p in pts]
            hi = [p[1]["p90_ms"] - p[1]["median_ms"] for p in pts]
            ax.errorbar(ns, med, yerr=[lo, hi], fmt=styles[m], capsize=3, label=LABELS[m])
        ax.axhline(T2_MS, color="grey", lw=0.8, ls="-.")
        ax.annotate(
            "100 ms",
            (min(r["n"] for r in res), T2_MS),
            textcoords="offset points",
            xytext=(2, 3),
            fontsize=7,
            color="grey",
        )
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("episodes (N, 384-d)")
        ax.set_title(title, fontsize=9)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)
    axes[0].set_ylabel("median wall-clock ms per query (bars: p10-p90)")
    info = result["info"]
    fig.suptitle(
        f"latency vs N: {info['queries']} SciFact claims x {info['repeat']} rounds, "
        f"profile '{info['profile']}', pool_size {POOL_SIZE}; shared 2-core machine",
        fontsize=10,
    )
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


# ---------------------------------------------------------------- main


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="10000,100000,1000000")
    ap.add_argument("--queries", type=int, default=20)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument(
        "--diag-queries", type=int, default=5, help="queries for the mmap diagnostic (0: none)"
    )
    ap.add_argument("--seed", type=int, default=SEED)
    ap.add_argument("--keep", action="store_true", help="keep the private database copies")
    ap.add_argument("--out", default=OUT_DIR)
    ap.add_argument("--no-plot", action="store_true")
    args = ap.parse_args(argv)
    sizes = [int(s.replace("_", "")) for s in args.sizes.split(",") if s.strip()]
    if args.repeat < 1 or args.queries < 1 or not sizes:
        ap.error("--repeat, --queries and --sizes must be positive")
    queries = br.load_queries(args.queries)
    try:
        loadavg = " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        loadavg = "?"
    import sqlite_vec  # type: ignore[import-not-found]

    info = {
        "sizes": sizes,
        "queries": len(queries),
        "repeat": args.repeat,
        "pool_size": POOL_SIZE,
        "limit": LIMIT,
        "profile": recall_defaults()["profile"],
        "sqlite": apsw.sqlite_lib_version(),
        "apsw": apsw.apsw_version(),
        "sqlite_vec": getattr(sqlite_vec, "__version__", "?"),
        "python": platform.python_version(),
        "cpu": br._cpu_name(),
        "cpus": os.cpu_count(),
        "loadavg_start": loadavg,
        "query_ids": [q[0] for q in queries],
        "started": time.strftime("%Y-%m-%dT%H:%M:%S"),
    }
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
    result = {"info": info, "results": results, "slopes": {m: slope(results, m) for m in METHODS}}
    result["target_lines"] = target_lines(results)
    os.makedirs(args.out, exist_ok=True)
    text = report(result)
    print(text)
    with open(os.path.join(args.out, "scale.json"), "w", encoding="utf-8") as f:
        json.dump(result, f, indent=2)
    with open(os.path.join(args.out, "scale.md"), "w", encoding="utf-8") as f:
        f.write(
            f"# Recall latency vs N (`tests/bench/bench_scale.py`)\n\nMedian wall-clock ms per "
            f"query; {info['queries']} SciFact test claims x {info['repeat']} rounds after a "
            f"warm-up; profile '{info['profile']}', pool_size {POOL_SIZE}, limit {LIMIT}; "
            f"{info['cpu']}, {info['cpus']} cores, shared (load average {loadavg} at start).\n\n"
            + table_md(results)
            + "\n\n"
            + quality_md(results)
            + "\n\n"
            + memory_md(results)
            + "\n\n"
            + "\n".join(result["target_lines"])
            + "\n"
        )
    if not args.no_plot:
        p = plot(result, os.path.join(args.out, "scale.png"))
        if p:
            log(f"wrote {p}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
