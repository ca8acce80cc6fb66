#!/usr/bin/env python3
"""Benchmark: Litestream replication of a memory — the restore time and the
replica's disk at N memories, and the read replicas' lag and recall latency against the
primary's.

Run by hand (not part of the test suite; needs the ``replicate`` extra)::

    .venv/bin/python tests/bench/bench_replica.py restore [--sizes 100000,1000000] [--check]
    .venv/bin/python tests/bench/bench_replica.py replicas [--sizes 10000,100000]
                                                  [--seconds 20] [--queries 20]

Both take the cached databases of ``bench_recall.py`` (``tests/bench/out/cache/``: SciFact
texts, 384-d MiniLM vectors; built by its builder when missing; never modified) and copy
the one of each size to ``tests/bench/out/replica/`` (deleted at the end, unless
``--keep``).

``restore``, per size: the copy opened once as a Store (WAL); ``sqlite-rrf replicate
--once`` to a new directory replica (the first sync: a full snapshot); the replica's bytes
on disk; ``litestream restore`` of it to a new file (``sqlite_rrf.app.replicate.restore``);
with ``--check`` the full check of ``sqlite-rrf check`` on the restored file, timed apart.

``replicas``, per size: ``sqlite-rrf replicate`` runs on the copy; three reader processes
open the primary itself (``Store(readonly=True)``), the replica through the Litestream VFS
(``sqlite_rrf.app.replicate.open_replica``) and a copy kept by ``litestream restore -f``
(``sqlite_rrf.app.replicate.follow``, polled every 500 ms). A writer adds one memory every
``--interval`` s for ``--seconds`` s and logs each commit's time; each reader polls for
the new ids every 20 ms and notes when it first sees each: the lag. A fourth reader opens
a copy that ``sqlite-rrf restore --refresh 5s`` restores again every 5 s
(``sqlite_rrf.app.replicate.refresh``); the copies' readers open them anew for every poll
(a connection kept open sees no later write). Then each reader runs
``--queries`` SciFact test claims (``Store.recall``, its default pool and profile, the
claims' cached MiniLM vectors, no touch) ``--repeat`` times after one warm-up round: the
recall latency, wall clock. Prints a table (markdown) and writes
``tests/bench/out/replica.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import time
from typing import Any, Dict, List, Optional

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)

import bench_recall as br

from sqlite_rrf.app import replicate

OUT_DIR = os.path.join(HERE, "out")
WORK = os.path.join(OUT_DIR, "replica")


def du(path: str) -> int:
    total = 0
    for root, _d, files in os.walk(path):
        for f in files:
            try:
                total += os.path.getsize(os.path.join(root, f))
            except OSError:
                pass
    return total


def fresh_copy(n: int, seed: int) -> Dict[str, Any]:
    """The cached database of ``n`` memories copied to a private directory, opened once
    as a Store (schema, WAL)."""
    from sqlite_rrf.store import Store

    src, _info, _built = br.ensure_db(os.path.join(OUT_DIR, "cache"), n, seed, False)
    work = os.path.join(WORK, str(n))
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    db = os.path.join(work, "primary.db")
    t = time.monotonic()
    shutil.copyfile(src, db)
    copy_s = time.monotonic() - t
    t = time.monotonic()
    Store(db).close()
    return {
        "work": work,
        "db": db,
        "copy_s": copy_s,
        "open_s": time.monotonic() - t,
        "db_bytes": os.path.getsize(db),
    }


def bench_restore(n: int, seed: int, check: bool, keep: bool) -> Dict[str, Any]:
    c = fresh_copy(n, seed)
    work, db = c["work"], c["db"]
    rep = os.path.join(work, "replica")
    t = time.monotonic()
    r = subprocess.run(
        [sys.executable, "-m", "sqlite_rrf", "replicate", db, "--to", rep, "--once"],
        capture_output=True,
        text=True,
    )
    if r.returncode != 0:
        raise SystemExit(f"replicate --once failed: {r.stderr[-2000:]}")
    snap_s = time.monotonic() - t
    out = os.path.join(work, "restored.db")
    t = time.monotonic()
    replicate.restore(rep, out, check=False)
    restore_s = time.monotonic() - t
    res = {
        "n": n,
        "db_bytes": c["db_bytes"],
        "copy_s": round(c["copy_s"], 2),
        "first_sync_s": round(snap_s, 2),
        "replica_bytes": du(rep),
        "restore_s": round(restore_s, 2),
        "restored_bytes": os.path.getsize(out),
    }
    if check:
        from sqlite_rrf.doctor import check_path

        t = time.monotonic()
        rep_ = check_path(out)
        res["check_s"] = round(time.monotonic() - t, 2)
        res["check_ok"] = rep_.ok
    if not keep:
        shutil.rmtree(work, ignore_errors=True)
    return res


READER = r"""
import json, os, sys, time
import numpy as np
mode, target, stop, nq, repeat = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
sys.path.insert(0, %(here)r)
import bench_recall as br
from sqlite_rrf.store import Store
from sqlite_rrf.app import replicate
t0 = time.monotonic()
if mode == "vfs":
    store = replicate.open_replica(target)
else:
    while not os.path.exists(target):
        time.sleep(0.05)
    store = None
    while store is None:
        try:
            store = Store(target, readonly=True)
        except Exception:
            time.sleep(0.1)
open_s = time.monotonic() - t0
print(json.dumps({"ready": True}), flush=True)
seen = {}
poll_errors = []
last = store.conn.execute("SELECT max(rowid) FROM episodes").fetchall()[0][0] or 0
while not os.path.exists(stop):
    try:
        if mode in ("copy", "refreshed"):  # a connection kept open sees no later write
            import apsw
            c = apsw.Connection(target, flags=apsw.SQLITE_OPEN_READONLY)
            rows = c.execute("SELECT rowid, id FROM episodes WHERE rowid > ?",
                             (last,)).fetchall()
            c.close()
        else:
            rows = store.conn.execute("SELECT rowid, id FROM episodes WHERE rowid > ?",
                                      (last,)).fetchall()
    except Exception as e:
        poll_errors.append(f"{type(e).__name__}: {e}")
        rows = []
    now = time.time()
    for rowid, eid in rows:
        seen.setdefault(eid, now)
        last = max(last, rowid)
    time.sleep(0.02)
queries = br.load_queries(nq)
lat = []
errors = []
if mode in ("copy", "refreshed"):  # reopened, to recall on the latest
    store.close()
    store = Store(target, readonly=True)
for r in range(repeat + 1):
    for _qid, text, vec in queries:
        t = time.perf_counter()
        try:
            store.recall(text, qvec=np.frombuffer(vec, dtype="<f4"), touch=False)
        except Exception as e:  # counted and shown: a replica that fails a recall
            errors.append(f"{type(e).__name__}: {e}")
            continue
        if r:
            lat.append((time.perf_counter() - t) * 1000)
print(json.dumps({"open_s": open_s, "seen": seen, "lat_ms": lat, "errors": errors,
                  "poll_errors": poll_errors}), flush=True)
"""

WRITER = r"""
import sys, time
import numpy as np
from sqlite_rrf.store import Store
db, seconds, interval, log = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
store = Store(db)
rng = np.random.default_rng(7)
out = open(log, "w")
end = time.monotonic() + seconds
i = 0
while time.monotonic() < end:
    eid = f"lag-{i}"
    store.add(f"a memory written to measure the replicas' lag {i}", id=eid,
              embedding=rng.standard_normal(384).astype("float32"))
    out.write(f"{eid} {time.time():.6f}\n"); out.flush()
    i += 1
    time.sleep(interval)
"""


def pct(xs: List[float], p: float) -> float:
    if not xs:
        return float("nan")
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


def bench_replicas(
    n: int,
    seed: int,
    seconds: float,
    interval: float,
    nq: int,
    repeat: int,
    keep: bool,
    settle: float = 75.0,
    refresh: float = 5.0,
) -> Dict[str, Any]:
    c = fresh_copy(n, seed)
    work, db = c["work"], c["db"]
    rep_dir = os.path.join(work, "replica")
    url = replicate.replica_url(rep_dir)
    copy = os.path.join(work, "followed.db")
    stop = os.path.join(work, "stop")
    rlog = open(os.path.join(work, "replicate.log"), "wb")
    rep = subprocess.Popen(
        [sys.executable, "-m", "sqlite_rrf", "replicate", db, "--to", rep_dir],
        stdout=rlog,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    procs: Dict[str, subprocess.Popen] = {}
    follower = None
    refresher = None
    try:
        deadline = time.monotonic() + 600
        while not os.path.isdir(os.path.join(rep_dir, "ltx")):
            if time.monotonic() > deadline or rep.poll() is not None:
                raise SystemExit("the replicator did not start")
            time.sleep(0.1)
        while "snapshot complete" not in open(rlog.name, encoding="utf-8", errors="replace").read():
            if time.monotonic() > deadline or rep.poll() is not None:
                raise SystemExit("the replicator took no snapshot")
            time.sleep(0.2)
        t = time.monotonic()
        follower = replicate.follow(url, copy, interval="500ms")
        while not os.path.exists(copy):
            if follower.poll() is not None:
                raise SystemExit("litestream restore -f failed")
            time.sleep(0.05)
        refreshed = os.path.join(work, "refreshed.db")
        refresher = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "sqlite_rrf",
                "restore",
                "--from",
                url,
                "-o",
                refreshed,
                "--refresh",
                f"{refresh:g}s",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        while not os.path.exists(refreshed):
            if refresher.poll() is not None:
                raise SystemExit("restore --refresh failed")
            time.sleep(0.05)
        code = READER % {"here": HERE}
        for mode, target in (
            ("primary", db),
            ("vfs", url),
            ("copy", copy),
            ("refreshed", refreshed),
        ):
            env = dict(os.environ, LITESTREAM_REPLICA_URL=url)
            procs[mode] = subprocess.Popen(
                [sys.executable, "-c", code, mode, target, stop, str(nq), str(repeat)],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                env=env,
            )
        for mode, p in procs.items():
            line = p.stdout.readline()
            if not line:
                raise SystemExit(f"reader {mode} failed: {p.stderr.read()[-3000:]}")
        first_copy_s = time.monotonic() - t
        log = os.path.join(work, "writes.log")
        subprocess.run(
            [sys.executable, "-c", WRITER, db, str(seconds), str(interval), log], check=True
        )
        time.sleep(settle)  # the last write reaches every replica (the followed copy
        # waits for Litestream's 30 s compaction of the new LTX files: see docs/scaling.md)
        open(stop, "w").close()
        results = {}
        for mode, p in procs.items():
            out, err = p.communicate(timeout=1800)
            lines = [ln for ln in out.splitlines() if ln.strip()]
            if p.returncode != 0 or not lines:
                raise SystemExit(f"reader {mode} failed: {err[-3000:]}")
            results[mode] = json.loads(lines[-1])
        commits = {}
        with open(log, encoding="utf-8") as f:
            for line in f:
                eid, ts = line.split()
                commits[eid] = float(ts)
        table = {}
        for mode, r in results.items():
            lags = [(r["seen"][e] - ts) * 1000 for e, ts in commits.items() if e in r["seen"]]
            table[mode] = {
                "open_s": round(r["open_s"], 3),
                "seen": len(lags),
                "written": len(commits),
                "lag_ms_p50": round(pct(lags, 50), 1),
                "lag_ms_p95": round(pct(lags, 95), 1),
                "lag_ms_max": round(max(lags), 1) if lags else None,
                "recall_ms_p50": round(statistics.median(r["lat_ms"]), 2) if r["lat_ms"] else None,
                "recall_ms_p95": round(pct(r["lat_ms"], 95), 2),
                "recall_errors": len(r["errors"]),
                "poll_errors": len(r["poll_errors"]),
                "first_error": (r["errors"] + r["poll_errors"] + [None])[0],
            }
        return {
            "n": n,
            "db_bytes": c["db_bytes"],
            "replica_bytes": du(rep_dir),
            "followed_first_copy_s": round(first_copy_s, 2),
            "modes": table,
        }
    finally:
        for p in procs.values():
            if p.poll() is None:
                p.kill()
                p.wait()
        if refresher is not None and refresher.poll() is None:
            refresher.kill()
            refresher.wait()
        if follower is not None and follower.poll() is None:
            follower.send_signal(signal.SIGINT)
            try:
                follower.wait(timeout=30)
            except subprocess.TimeoutExpired:
                follower.kill()
                follower.wait()
        try:
            os.killpg(rep.pid, signal.SIGINT)
            rep.wait(timeout=60)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            os.killpg(rep.pid, signal.SIGKILL)
            rep.wait()
        rlog.close()
        if not keep:
            shutil.rmtree(work, ignore_errors=True)


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("part", choices=("restore", "replicas"))
    ap.add_argument("--sizes", default=None)
    ap.add_argument("--seed", type=int, default=br.SEED if hasattr(br, "SEED") else 20240607)
    ap.add_argument("--check", action="store_true", help="restore: time the full check too")
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--interval", type=float, default=0.5)
    ap.add_argument("--queries", type=int, default=20)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--keep", action="store_true")
    args = ap.parse_args(argv)
    sizes = [
        int(s)
        for s in (args.sizes or ("100000" if args.part == "restore" else "10000,100000")).split(",")
    ]
    os.makedirs(WORK, exist_ok=True)
    path = os.path.join(OUT_DIR, "replica.json")
    try:
        with open(path, encoding="utf-8") as f:
            saved = json.load(f)
    except (OSError, ValueError):
        saved = {}
    rows = []
    for n in sizes:
        if args.part == "restore":
            r = bench_restore(n, args.seed, args.check, args.keep)
        else:
            r = bench_replicas(
                n, args.seed, args.seconds, args.interval, args.queries, args.repeat, args.keep
            )
        rows.append(r)
        print(json.dumps(r), flush=True)
        saved.setdefault(args.part, {})[str(n)] = r
        with open(path, "w", encoding="utf-8") as f:
            json.dump(saved, f, indent=1)
    if args.part == "restore":
        print(
            "\n| memories | database | replica on disk | first sync (snapshot) | restore | "
            "full check |"
        )
        print("| ---: | ---: | ---: | ---: | ---: | ---: |")
        for r in rows:
            chk = (
                f"{r['check_s']:.1f} s ({'ok' if r['check_ok'] else 'FAILED'})"
                if "check_s" in r
                else "not run"
            )
            print(
                f"| {r['n']:,} | {r['db_bytes'] / 1e6:,.0f} MB | "
                f"{r['replica_bytes'] / 1e6:,.0f} MB | {r['first_sync_s']:.1f} s | "
                f"{r['restore_s']:.1f} s | {chk} |"
            )
    else:
        print(
            "\n| memories | reader | seen / written | lag p50 | lag p95 | lag max | "
            "recall p50 | recall p95 | failed recalls / polls |"
        )
        print("| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
        for r in rows:
            for mode, m in r["modes"].items():
                print(
                    f"| {r['n']:,} | {mode} | {m['seen']}/{m['written']} | "
                    f"{m['lag_ms_p50']:.0f} ms | {m['lag_ms_p95']:.0f} ms | "
                    f"{m['lag_ms_max'] or float('nan'):.0f} ms | "
                    f"{m['recall_ms_p50'] or float('nan'):.1f} ms | "
                    f"{m['recall_ms_p95']:.1f} ms | {m['recall_errors']} / "
                    f"{m['poll_errors']} |"
                )
    return 0


if __name__ == "__main__":
    sys.exit(main())
