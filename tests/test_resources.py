"""Resource use of recall.

* **Flat memory over many recalls**: one process, one Store on a small database,
  ``RECALLS`` (10,000 in the suite; ``make soak`` runs 100,000) calls of
  ``Store.recall(touch=False, force=True, qvec=...)`` with varying query text and
  vectors. RSS (``/proc/self/statm``) after a warm-up of 1,000 recalls and at the end
  must differ by less than the stated bound (``RSS_BOUND_MB``: 2 MB over 10k recalls,
  5 MB over 100k, i.e. less than ~200 / ~50 bytes per recall), and SQLite's own heap
  (``SQLITE_STATUS_MEMORY_USED``) must be back to where it was.
* **Memory of one recall on a large database**: a fresh process opens a benchmark
  database of ``tests/bench/out/cache/`` **read-only** (``mode=ro``; built by
  ``make bench``; skipped when absent), runs one warm-up recall, resets the RSS
  high-water mark (``/proc/self/clear_refs``) and SQLite's heap high-water, runs one
  recall, and reports both high-waters above the level before. The stated bound:
  a recall with the default ``'recent'`` pool uses at most ``LARGE_BOUND_MB`` (16 MB)
  more than the open connection, at 100k and at 1M episodes — it reads the pool through
  an index, SQLite's page cache is capped by ``cache_size`` (2 MB by default), and the
  BM25 list's ``rrf_bm25_or_top`` (csrc/bm25_top.c, B16) holds, for its one call per
  query, the rowids of the scanned terms' rows (8 bytes each, trimmed to their count)
  and, for dense rowids, one byte of phrase bits (up to 8 phrases; a double beyond)
  and an int per rowid between the first and the last hit: ~5 bytes per episode on
  top of the postings. (Before 8 phrases were a byte and the lists were trimmed, a
  double per rowid and the lists' doubling slack took the 1M recall to SQLite heap
  +25.0 MB, rrf_bm25_or_top alone +23.4 MB.) The exact ``'all'`` pool scores and
  sorts every episode; SQLite's sorter and temporary tables spill to temporary files
  beyond their cache, so its memory levels off too: ``make soak`` (``--large``) checks it against
  ``ALL_BOUND_MB`` (64 MB) at 10k, 100k and 1M (not in the suite: 6 s at 100k, about
  90 s at 1M on a busy 2-core machine). Measured: 'recent' +0.3 / +1.2 MB RSS
  high-water (SQLite heap +3.1 / +9.4 MB) at 100k / 1M (schema of migration 0011);
  'all' +10.6 / +25.1 / +25.9 MB RSS (SQLite heap +11.7 / +26.6 / +27.6 MB) at 10k /
  100k / 1M (before ec55da7).

Run as a script for the long forms (what ``make soak`` does)::

    python tests/test_resources.py --recalls 100000
    python tests/test_resources.py --one-recall DB POOL
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import resource
import subprocess
import sys
import time
from typing import Any, Dict, List, Optional

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
CACHE = os.path.join(HERE, "bench", "out", "cache")
RECALLS = int(os.environ.get("RESOURCES_RECALLS", 10_000))
WARMUP = 1_000
DIM = 16
LARGE_BOUND_MB = 16.0
ALL_BOUND_MB = 64.0
QUERIES = [
    "memory agent",
    "which database did we pick",
    "vault credentials postgres",
    "rrf fusion window",
    '"quoted" AND OR NOT',
    "nothing matches this xyzzy",
    "*",
    "deploy server latency cache",
    "tok3 tok7 tok11",
    "",
]


#: Under AddressSanitizer (make asan-test) RSS holds ASan's shadow memory and its
#: quarantine of freed blocks, so only SQLite's own heap figures are checked there.
SANITIZED = "libasan" in os.environ.get("LD_PRELOAD", "") or "ASAN_OPTIONS" in os.environ


def rss_bound_mb(n: int) -> float:
    """The stated RSS growth bound for ``n`` recalls after the warm-up."""
    return 2.0 if n <= 10_000 else 5.0


def rss_mb() -> float:
    with open("/proc/self/statm", encoding="ascii") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / (1 << 20)


def hwm_mb() -> float:
    with open("/proc/self/status", encoding="ascii") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def reset_hwm() -> bool:
    """Reset the RSS high-water mark (Linux >= 4.0); False when not possible."""
    try:
        with open("/proc/self/clear_refs", "w", encoding="ascii") as f:
            f.write("5")
        return True
    except OSError:
        return False


def sqlite_heap(reset: bool = False):
    import apsw

    return apsw.status(apsw.SQLITE_STATUS_MEMORY_USED, reset)


# ------------------------------------------------------------------ many recalls


def many_recalls(path: str, n: int, sample_every: int = 1000) -> Dict[str, Any]:
    """``n`` recalls after a warm-up on a small database at ``path`` (made here)."""
    import numpy as np

    from sqlite_rrf.store import Store

    rng = np.random.default_rng(5)
    store = Store(path)
    words = "memory agent database vault credentials postgres rrf fusion deploy server".split()
    store.add_many(
        [
            dict(
                id=f"e{i}",
                content=f"tok{i} " + " ".join(rng.choice(words, 8)),
                embedding=rng.standard_normal(DIM),
                importance=("low", "normal", "high")[i % 3],
            )
            for i in range(24)
        ]
    )
    qvecs = [rng.standard_normal(DIM) for _ in range(64)]

    def one(i: int) -> None:
        r = store.recall(
            QUERIES[i % len(QUERIES)] + (f" tok{i % 24}" if i % 3 else ""),
            limit=1 + i % 5,
            touch=False,
            force=True,
            qvec=qvecs[i % len(qvecs)],
            pool=("recent", "all")[i % 2],
        )
        assert len(r) > 0

    for i in range(WARMUP):
        one(i)
    base = rss_mb()
    heap0 = sqlite_heap()[0]
    samples: List[float] = []
    t = time.perf_counter()
    for i in range(n):
        one(i)
        if (i + 1) % sample_every == 0:
            samples.append(rss_mb())
    dt = time.perf_counter() - t
    heap1 = sqlite_heap()[0]
    store.close()
    return {
        "recalls": n,
        "seconds": round(dt, 1),
        "per_recall_ms": round(dt / n * 1000, 3),
        "rss_after_warmup_mb": round(base, 2),
        "rss_end_mb": round(samples[-1], 2),
        "rss_max_mb": round(max(samples), 2),
        "growth_mb": round(samples[-1] - base, 3),
        "max_growth_mb": round(max(samples) - base, 3),
        "sqlite_heap_after_warmup": heap0,
        "sqlite_heap_end": heap1,
        "samples_mb": [round(s, 2) for s in samples],
    }


# ------------------------------------------------------------------ one large recall


def large_dbs() -> Dict[int, str]:
    """The cached benchmark databases built for the current schema (their file name ends
    with bench_recall's schema key; older ones are left for make bench to replace)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "bench_recall_for_resources", os.path.join(HERE, "bench", "bench_recall.py")
    )
    br = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(br)
    key = br.schema_key()
    out = {}
    for p in glob.glob(os.path.join(CACHE, f"recall_*_d*_s*_{key}.db")):
        try:
            out[int(os.path.basename(p).split("_")[1])] = p
        except ValueError:
            pass
    return out


def open_readonly_store(path: str) -> Any:
    """A Store on ``path`` opened read-only: the benchmark caches are never written."""
    from sqlite_rrf.store import Store

    store = Store(path, readonly=True)
    assert store.readonly
    return store


def one_recall(path: str, pool: str) -> Dict[str, Any]:
    import numpy as np

    store = open_readonly_store(path)
    dim = store.dim
    rng = np.random.default_rng(11)
    store.recall(
        "warm up the connection",
        touch=False,
        force=True,
        qvec=rng.standard_normal(dim),
        pool_size=1,
        bm25_limit=1,
    )
    before = rss_mb()
    exact = reset_hwm()
    sqlite_heap(reset=True)
    heap_before = sqlite_heap()[0]
    t = time.perf_counter()
    res = store.recall(
        "the effect of vitamin d on protein levels in patients",
        limit=10,
        touch=False,
        force=True,
        qvec=rng.standard_normal(dim),
        pool=pool,
    )
    dt = time.perf_counter() - t
    heap_hw = sqlite_heap()[1]
    peak = hwm_mb()
    n = store.conn.execute("SELECT max(rowid) FROM episodes").fetchall()[0][0]
    store.close()
    return {
        "db": os.path.basename(path),
        "episodes": n,
        "pool": pool,
        "hits": len(res),
        "seconds": round(dt, 2),
        "rss_before_mb": round(before, 1),
        "rss_hwm_mb": round(peak, 1),
        "rss_hwm_exact": exact,
        "recall_rss_mb": round(peak - before, 1),
        "sqlite_heap_before_mb": round(heap_before / 2**20, 2),
        "sqlite_heap_hwm_mb": round(heap_hw / 2**20, 2),
        "recall_sqlite_heap_mb": round((heap_hw - heap_before) / 2**20, 2),
    }


def one_recall_in_child(path: str, pool: str, timeout: float = 600) -> Dict[str, Any]:
    proc = subprocess.run(
        [sys.executable, os.path.abspath(__file__), "--one-recall", path, pool],
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


# ------------------------------------------------------------------ tests


@pytest.mark.slow
def test_many_recalls_keep_memory_flat(tmp_path, capsys):
    r = many_recalls(str(tmp_path / "small.db"), RECALLS)
    with capsys.disabled():
        print(
            f"\n{RECALLS} recalls in {r['seconds']} s ({r['per_recall_ms']} ms each): RSS "
            f"{r['rss_after_warmup_mb']} MB after warm-up, {r['rss_end_mb']} MB at the end "
            f"(growth {r['growth_mb']} MB, max {r['max_growth_mb']} MB); SQLite heap "
            f"{r['sqlite_heap_after_warmup']} -> {r['sqlite_heap_end']} bytes"
        )
    bound = rss_bound_mb(RECALLS)
    if not SANITIZED:
        assert r["growth_mb"] < bound, r
        assert r["max_growth_mb"] < bound, r
    # SQLite's heap is back where it was (statement cache and page cache are full after
    # the warm-up): no allocation of the extension or the statement outlives a recall.
    assert abs(r["sqlite_heap_end"] - r["sqlite_heap_after_warmup"]) < 256 * 1024, r


def test_open_readonly_store_reads_and_never_writes(tmp_path):
    # The large-database test runs only where `make bench` left its databases; the way it
    # opens them (a real Store, read-only) is checked here on a small one, every time.
    import numpy as np

    from sqlite_rrf.store import Store, StoreError

    path = str(tmp_path / "ro.db")
    rng = np.random.default_rng(3)
    qvec = rng.standard_normal(DIM)
    with Store(path) as store:
        store.add_many(
            [
                dict(id=f"e{i}", content=f"memory agent tok{i}", embedding=rng.standard_normal(DIM))
                for i in range(8)
            ]
        )
        want = [
            (h.id, h.score)
            for h in store.recall("memory agent tok3", limit=5, touch=False, force=True, qvec=qvec)
        ]
    with open(path, "rb") as f:
        before = f.read()
    store = open_readonly_store(path)
    try:
        got = [
            (h.id, h.score)
            for h in store.recall("memory agent tok3", limit=5, force=True, qvec=qvec)
        ]
        with pytest.raises(StoreError, match="read-only"):
            store.add("a write")
    finally:
        store.close()
    assert got == want and len(got) == 5
    with open(path, "rb") as f:  # (SQLite may make the -wal and -shm files of a
        assert f.read() == before  # WAL database, read-only or not)


@pytest.mark.slow
@pytest.mark.parametrize(
    "n,pool,bound", [(100_000, "recent", LARGE_BOUND_MB), (1_000_000, "recent", LARGE_BOUND_MB)]
)
def test_one_recall_on_a_large_database_within_bound(n, pool, bound, capsys):
    dbs = large_dbs()
    if n not in dbs:
        pytest.skip(
            f"no {n:,}-episode benchmark database in {CACHE} (make bench builds it); "
            "make soak reports the figure when it is there"
        )
    r = one_recall_in_child(dbs[n], pool)
    with capsys.disabled():
        print(
            f"\nrecall on {r['episodes']:,} episodes, pool {pool}: {r['seconds']} s, RSS "
            f"high-water +{r['recall_rss_mb']} MB over {r['rss_before_mb']} MB, SQLite heap "
            f"high-water +{r['recall_sqlite_heap_mb']} MB"
        )
    assert r["hits"] > 0
    if not SANITIZED:
        assert r["recall_rss_mb"] < bound, r
    assert r["recall_sqlite_heap_mb"] < bound, r


# ------------------------------------------------------------------ script


def main(argv: Optional[List[str]] = None) -> int:
    p = argparse.ArgumentParser(description="recall resource figures (make soak)")
    p.add_argument("--recalls", type=int, default=0, help="run N recalls on a small database")
    p.add_argument("--workdir", default="build/soak")
    p.add_argument("--one-recall", nargs=2, metavar=("DB", "POOL"))
    p.add_argument(
        "--large",
        action="store_true",
        help="one recall on each cached benchmark database (pools recent, all)",
    )
    p.add_argument(
        "--all-pool-max",
        type=int,
        default=1_000_000,
        help="largest database to try the 'all' pool on",
    )
    args = p.parse_args(argv)
    if args.one_recall:
        print(json.dumps(one_recall(*args.one_recall)))
        return 0
    ok = True
    if args.recalls:
        os.makedirs(args.workdir, exist_ok=True)
        path = os.path.join(args.workdir, "resources.db")
        for suffix in ("", "-wal", "-shm"):
            if os.path.exists(path + suffix):
                os.remove(path + suffix)
        r = many_recalls(path, args.recalls, sample_every=max(1000, args.recalls // 20))
        bound = rss_bound_mb(args.recalls)
        good = r["growth_mb"] < bound and r["max_growth_mb"] < bound
        ok &= good
        print(
            f"{args.recalls} recalls in {r['seconds']} s ({r['per_recall_ms']} ms each): RSS "
            f"{r['rss_after_warmup_mb']} MB after {WARMUP} warm-up recalls, "
            f"{r['rss_end_mb']} MB at the end: growth {r['growth_mb']} MB (max "
            f"{r['max_growth_mb']} MB; bound {bound} MB) {'OK' if good else 'FAILED'}; "
            f"SQLite heap {r['sqlite_heap_after_warmup']} -> {r['sqlite_heap_end']} bytes"
        )
        print("RSS samples (MB): " + " ".join(f"{s:.1f}" for s in r["samples_mb"]))
    if args.large:
        dbs = large_dbs()
        if not dbs:
            print(f"no benchmark databases in {CACHE} (make bench builds them): skipped")
        for n in sorted(dbs):
            for pool in ("recent", "all"):
                if pool == "all" and n > args.all_pool_max:
                    continue
                r = one_recall_in_child(dbs[n], pool, timeout=1800)
                bound = LARGE_BOUND_MB if pool == "recent" else ALL_BOUND_MB
                good = r["recall_rss_mb"] < bound and r["recall_sqlite_heap_mb"] < bound
                ok &= good
                print(
                    f"one recall on {r['episodes']:>9,} episodes, pool {pool:6s}: "
                    f"{r['seconds']:6.2f} s, RSS high-water +{r['recall_rss_mb']} MB "
                    f"(over {r['rss_before_mb']} MB), SQLite heap high-water "
                    f"+{r['recall_sqlite_heap_mb']} MB; bound {bound} MB "
                    f"{'OK' if good else 'EXCEEDED'}",
                    flush=True,
                )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
