#!/usr/bin/env python3
"""Benchmark: ``vec_cosine`` in a full-table scan, and the cffi cosine kernel.

Run by ``make bench`` (not part of the test suite)::

    .venv/bin/python tests/bench/bench_vec_cosine.py [--rows N] [--dim D] [--repeat R]

In one run (defaults: 100,000 rows of 384-d float32 embeddings, seeded):

1. builds a temporary on-disk database ``t(id INTEGER PRIMARY KEY, embedding BLOB)``
   of L2-normalised random vectors and warms SQLite's page cache (the whole table
   fits in it, so every scan below reads memory, not disk);
2. times ``SELECT max(...) FROM t`` full scans, median of R runs, for
   ``vec_cosine`` (query as a float32 BLOB and as JSON text), ``vec_cosine`` with
   the scalar kernel (this script re-run as a child process with
   ``SQLITE_RRF_SIMD=scalar``, driven over a pipe one scan per round),
   sqlite-vec's ``1 - vec_distance_cosine``, a Python UDF on numpy, and two
   baselines for the cost all of them share: ``max(length(embedding))`` (the row
   scan; length() does not read the blob) and ``max(embedding)`` (the row scan
   plus SQLite copying each blob out of its page, which it does for every
   function that takes the blob). Methods are timed round-robin, so noise from
   the machine spreads over all of them alike;
3. checks that every method finds the same maximum (within 1e-5) before reporting;
4. times the cffi kernel ``kernels.cosine_many(q, M)`` (default and scalar paths)
   against numpy on the same matrix in memory, with the effective bandwidth
   (bytes of M / time) as a fraction of this machine's single-thread memory read
   bandwidth, measured in the same run (the faster of ``a.sum()`` and ``a.max()``
   over a 1 GiB float32 array);
5. prints a table and the target line
   ``vec_cosine vs sqlite-vec vec_distance_cosine: X.XX× (target ≥ 1.5×)``, and
   writes ``tests/bench/out/vec_cosine.json`` (and ``vec_cosine.png`` when
   matplotlib is importable).

Exit status is 0 even when the target is missed (this is a measurement, not a
test); it is 2 when the methods disagree on the maximum.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Callable, Dict, List, Optional

# One BLAS thread (unless the caller chose otherwise): the C kernel and the memory
# bandwidth figure are single-threaded, so numpy's M @ q is measured the same way.
# Must be set before numpy loads OpenBLAS.
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import numpy as np

try:
    import apsw
except ImportError:  # pragma: no cover - the bench extra installs it
    sys.exit("bench_vec_cosine: apsw is required (pip install apsw)")

import sqlite_rrf
from sqlite_rrf.core import kernels

HERE = os.path.dirname(os.path.abspath(__file__))
OUT_DIR = os.path.join(HERE, "out")
TOLERANCE = 1e-5
TARGET = 1.5
CHILD_FLAG = "--_child-scalar-scan"


# ---------------------------------------------------------------- helpers


def median_ms(
    fn: Callable[[], object], repeat: int, warmup: int = 1
) -> "tuple[float, List[float], object]":
    """Run fn `warmup` times untimed, then `repeat` times; (median ms, all ms, last result)."""
    result = None
    for _ in range(warmup):
        result = fn()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        result = fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times), times, result


def open_db(path: str, *, with_vec: bool = True) -> "apsw.Connection":
    conn = apsw.Connection(path)
    # Big enough for the whole table: scans then read SQLite's page cache, not the OS.
    conn.execute("PRAGMA cache_size = -1048576")  # 1 GiB
    conn.execute("PRAGMA temp_store = MEMORY")
    sqlite_rrf.load(conn)
    if with_vec:
        try:
            import sqlite_vec
        except ImportError:
            pass
        else:
            conn.enable_load_extension(True)
            conn.load_extension(sqlite_vec.loadable_path())
            conn.enable_load_extension(False)
    return conn


def scalar1(conn: "apsw.Connection", sql: str, params=()) -> object:
    return conn.execute(sql, params).fetchall()[0][0]


def warm(conn: "apsw.Connection") -> None:
    """Read every page and every blob of t twice, so SQLite's page cache holds the table."""
    for _ in range(2):
        conn.execute("SELECT max(embedding) FROM t").fetchall()


def make_data(rows: int, dim: int, seed: int) -> "tuple[np.ndarray, np.ndarray]":
    rng = np.random.default_rng(seed)
    m = rng.standard_normal((rows, dim), dtype=np.float32)
    m /= np.linalg.norm(m, axis=1, keepdims=True)
    q = rng.standard_normal(dim, dtype=np.float32)
    q /= np.linalg.norm(q)
    return m, q


def build_db(path: str, m: np.ndarray) -> None:
    conn = apsw.Connection(path)
    conn.execute("PRAGMA journal_mode = OFF; PRAGMA synchronous = OFF")
    conn.execute("CREATE TABLE t(id INTEGER PRIMARY KEY, embedding BLOB)")
    with conn:
        conn.executemany(
            "INSERT INTO t(id, embedding) VALUES (?, ?)",
            ((i + 1, m[i].tobytes()) for i in range(m.shape[0])),
        )
    conn.close()


def memory_read_bandwidth(repeat: int) -> Dict[str, float]:
    """This machine's single-thread memory bandwidth, GB/s (medians of `repeat` runs).

    Read: a.sum() and a.max() over a 1 GiB float32 array; numpy's float32 sum is a
    pairwise sum and can be compute-bound below the memory's speed, so the
    reference (``read_gbs``) is the faster of the two. Copy: np.copyto between two
    512 MiB arrays (bytes read + bytes written), for information.
    """
    a = np.ones(1 << 28, dtype=np.float32)  # 1 GiB, pages touched
    ms_sum, _, _ = median_ms(a.sum, repeat)
    ms_max, _, _ = median_ms(a.max, repeat)
    del a
    src = np.ones(1 << 27, dtype=np.float32)  # 512 MiB
    dst = np.zeros_like(src)
    ms_c, _, _ = median_ms(lambda: np.copyto(dst, src), max(3, repeat // 2))
    gib = float(1 << 30)
    res = {
        "read_sum_gbs": gib / (ms_sum / 1e3) / 1e9,
        "read_max_gbs": gib / (ms_max / 1e3) / 1e9,
        "copy_gbs": gib / (ms_c / 1e3) / 1e9,
    }
    res["read_gbs"] = max(res["read_sum_gbs"], res["read_max_gbs"])
    return res


# ------------------------------------------------- scalar-kernel child


SCALAR_SQL = "SELECT max(vec_cosine(embedding, ?)) FROM t"


def child_scalar_scan(db: str, qhex: str) -> None:
    """The child process, started with SQLITE_RRF_SIMD=scalar. It warms its own page
    cache, says it is ready (with its rrf_debug()), then times one vec_cosine scan per
    line it reads on stdin, one JSON line back each, until EOF; so the parent can put
    the scalar scan in its round-robin like the other methods."""
    conn = open_db(db, with_vec=False)
    warm(conn)
    q = bytes.fromhex(qhex)
    scalar1(conn, SCALAR_SQL, (q,))  # untimed run
    print(json.dumps({"rrf_debug": scalar1(conn, "SELECT rrf_debug()")}), flush=True)
    for _ in sys.stdin:
        t0 = time.perf_counter()
        mx = scalar1(conn, SCALAR_SQL, (q,))
        print(json.dumps({"ms": (time.perf_counter() - t0) * 1e3, "max": mx}), flush=True)


class ScalarChild:
    """The parent's handle on child_scalar_scan (.ok is False when it cannot be used)."""

    def __init__(self, db: str, q: np.ndarray) -> None:
        self.ok = False
        self.note = ""
        env = dict(os.environ, SQLITE_RRF_SIMD="scalar")
        cmd = [sys.executable, os.path.abspath(__file__), CHILD_FLAG, db, q.tobytes().hex()]
        try:
            self.proc = subprocess.Popen(
                cmd, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1
            )
            hello = json.loads(self.proc.stdout.readline())
        except (OSError, ValueError) as e:
            self.note = f"child process failed: {e}"
            self.close()
            return
        simd = [ln for ln in hello["rrf_debug"].splitlines() if ln.startswith("simd:")]
        if simd != ["simd: scalar"]:
            self.note = f"child did not run the scalar kernel ({simd})"
            self.close()
            return
        self.ok = True

    def scan(self) -> "tuple[float, object]":
        self.proc.stdin.write("scan\n")
        self.proc.stdin.flush()
        res = json.loads(self.proc.stdout.readline())
        return res["ms"], res["max"]

    def close(self) -> None:
        proc = getattr(self, "proc", None)
        if proc is not None and proc.poll() is None:
            proc.stdin.close()
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


# ---------------------------------------------------------------- main


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--dim", type=int, default=384)
    ap.add_argument("--repeat", type=int, default=9, help="timed runs per method (median reported)")
    ap.add_argument("--seed", type=int, default=20240601)
    ap.add_argument("--out", default=OUT_DIR, help="directory for vec_cosine.json / .png")
    ap.add_argument("--no-plot", action="store_true")
    args = ap.parse_args(argv)
    if args.repeat < 1:
        ap.error("--repeat must be >= 1")

    t_start = time.perf_counter()
    info = {
        "rows": args.rows,
        "dim": args.dim,
        "repeat": args.repeat,
        "seed": args.seed,
        "python": platform.python_version(),
        "machine": platform.machine(),
        "cpu": _cpu_name(),
        "cpus": os.cpu_count(),
        "sqlite": apsw.sqlite_lib_version(),
        "sqlite_rrf": sqlite_rrf.__version__,
        "simd_paths": kernels.simd_paths(),
        "simd_default": kernels.simd_current(),
        "blas_threads": os.environ.get("OPENBLAS_NUM_THREADS"),
    }
    try:
        import sqlite_vec

        info["sqlite_vec"] = getattr(sqlite_vec, "__version__", "?")
    except ImportError:
        sqlite_vec = None
        info["sqlite_vec"] = None

    print(
        f"sqlite-rrf {info['sqlite_rrf']}, SQLite {info['sqlite']}, sqlite-vec {info['sqlite_vec']}, "
        f"numpy {np.__version__}, Python {info['python']}"
    )
    print(
        f"CPU: {info['cpu']} ({info['cpus']} cpus); kernel paths {info['simd_paths']}, default {info['simd_default']}"
    )
    print(
        f"data: {args.rows:,} rows x {args.dim}-d float32 (L2-normalised, seed {args.seed}); "
        f"median of {args.repeat} runs\n"
    )

    m, q = make_data(args.rows, args.dim, args.seed)
    ref = (m.astype(np.float64) @ q.astype(np.float64)) / (
        np.linalg.norm(m.astype(np.float64), axis=1) * np.linalg.norm(q.astype(np.float64))
    )
    ref_max = float(ref.max())

    sql_rows: List[dict] = []
    kern_rows: List[dict] = []
    failures: List[str] = []

    with tempfile.TemporaryDirectory(prefix="bench_vec_cosine_") as tmp:
        db = os.path.join(tmp, "bench.db")
        t0 = time.perf_counter()
        build_db(db, m)
        info["db_bytes"] = os.path.getsize(db)
        info["db_build_s"] = time.perf_counter() - t0
        print(f"built {db} ({info['db_bytes'] / 1e6:.0f} MB) in {info['db_build_s']:.1f} s")

        conn = open_db(db)
        info["rrf_debug"] = scalar1(conn, "SELECT rrf_debug()")
        warm(conn)

        qblob = q.tobytes()
        # Each float32 written as its exact float64 value (shortest repr): parsed back
        # to float32, the JSON vector is q.
        qjson = json.dumps([float(x) for x in q])

        def py_cosine(a, b):
            x = np.frombuffer(a, dtype=np.float32)
            y = np.frombuffer(b, dtype=np.float32)
            return float(np.dot(x, y) / (np.linalg.norm(x) * np.linalg.norm(y)))

        conn.create_scalar_function("py_cosine", py_cosine, 2, deterministic=True)

        scans = [
            ("vec_cosine (BLOB query)", "SELECT max(vec_cosine(embedding, ?)) FROM t", (qblob,)),
            ("vec_cosine (JSON query)", "SELECT max(vec_cosine(embedding, ?)) FROM t", (qjson,)),
        ]
        if sqlite_vec is not None:
            scans.append(
                (
                    "sqlite-vec 1 - vec_distance_cosine",
                    "SELECT max(1 - vec_distance_cosine(embedding, ?)) FROM t",
                    (qblob,),
                )
            )
        scans += [
            (
                "Python UDF py_cosine (numpy)",
                "SELECT max(py_cosine(embedding, ?)) FROM t",
                (qblob,),
            ),
            ("baseline max(length(embedding))", "SELECT max(length(embedding)) FROM t", ()),
            # length() reads only the record header; max(embedding) also makes SQLite copy
            # every blob out of its page (OP_Column does that for any BLOB/TEXT argument),
            # which every function taking the blob pays too.
            ("baseline max(embedding)", "SELECT max(embedding) FROM t", ()),
        ]
        # Round-robin: every round times each method once, so drift and noise from
        # other processes on the machine spread over all methods alike. The Python UDF
        # is ~10x slower than the rest and runs in the first few rounds only.
        udf_rounds = max(3, min(args.repeat, 5))
        child = ScalarChild(db, q)
        if not child.ok:
            print(f"note: scalar-kernel scan skipped ({child.note})", file=sys.stderr)
            info["note_scalar_scan"] = "skipped: " + child.note
        times: Dict[str, List[float]] = {name: [] for name, _, _ in scans}
        results: Dict[str, object] = {}
        child_times: List[float] = []
        child_max: object = None
        for name, sql, params in scans:  # one untimed run each
            results[name] = scalar1(conn, sql, params)
        try:
            for rnd in range(args.repeat):
                for name, sql, params in scans:
                    if "py_cosine" in sql and rnd >= udf_rounds:
                        continue
                    t0 = time.perf_counter()
                    results[name] = scalar1(conn, sql, params)
                    times[name].append((time.perf_counter() - t0) * 1e3)
                if child.ok:
                    try:
                        ms, child_max = child.scan()
                        child_times.append(ms)
                    except (OSError, ValueError) as e:
                        child.ok = False
                        info["note_scalar_scan"] = f"child process failed mid-run: {e}"
                        print(f"note: scalar-kernel scan stopped ({e})", file=sys.stderr)
        finally:
            child.close()
        for name, sql, _ in scans:
            ms = statistics.median(times[name])
            sql_rows.append(
                {
                    "method": name,
                    "sql": sql,
                    "median_ms": ms,
                    "times_ms": times[name],
                    "max": results[name],
                    "runs": len(times[name]),
                }
            )
            print(f"  timed {name}: {ms:.1f} ms")
        conn.close()

        if child_times:
            ms = statistics.median(child_times)
            sql_rows.insert(
                2,
                {
                    "method": "vec_cosine (BLOB, scalar kernel)",
                    "sql": SCALAR_SQL + "  -- child process, SQLITE_RRF_SIMD=scalar",
                    "median_ms": ms,
                    "times_ms": child_times,
                    "max": child_max,
                    "runs": len(child_times),
                },
            )
            print(f"  timed vec_cosine (BLOB, scalar kernel; child process): {ms:.1f} ms")

    # ---- agreement of the SQL methods (3)
    blob_max = max(m[i].tobytes() for i in range(m.shape[0]))  # memcmp order, as SQLite's
    for r in sql_rows:
        if r["method"] == "baseline max(length(embedding))":
            ok = r["max"] == args.dim * 4
        elif r["method"] == "baseline max(embedding)":
            ok = r["max"] == blob_max
            r["max"] = f"<{len(r['max'])}-byte blob>" if isinstance(r["max"], bytes) else r["max"]
        else:
            ok = isinstance(r["max"], float) and abs(r["max"] - ref_max) <= TOLERANCE
        r["agrees"] = ok
        if not ok:
            failures.append(f"{r['method']}: max {r['max']!r} vs float64 reference {ref_max!r}")

    # ---- memory bandwidth, then the cffi kernel vs numpy (4)
    bw = memory_read_bandwidth(max(5, args.repeat))
    info["memory"] = bw
    print(
        f"  memory, one thread, 1 GiB float32: a.sum() {bw['read_sum_gbs']:.1f} GB/s, "
        f"a.max() {bw['read_max_gbs']:.1f} GB/s (read); np.copyto {bw['copy_gbs']:.1f} GB/s (read+write)"
    )
    mem_bw = bw["read_gbs"]

    m_bytes = m.nbytes
    kcases = [
        (f"cffi cosine_many ({kernels.simd_current()})", lambda: kernels.cosine_many(q, m)),
        ("cffi cosine_many (scalar)", lambda: kernels.cosine_many(q, m, simd="scalar")),
        (
            "numpy M@q / (norm(M,1)*norm(q))",
            lambda: (m @ q) / (np.linalg.norm(m, axis=1) * np.linalg.norm(q)),
        ),
        ("numpy M@q (pre-normalised M, q)", lambda: m @ q),
    ]
    ktimes: Dict[str, List[float]] = {name: [] for name, _ in kcases}
    kres: Dict[str, object] = {name: fn() for name, fn in kcases}  # untimed run each
    for _ in range(args.repeat):
        for name, fn in kcases:
            t0 = time.perf_counter()
            fn()
            ktimes[name].append((time.perf_counter() - t0) * 1e3)
    for name, _ in kcases:
        ms = statistics.median(ktimes[name])
        err = float(np.max(np.abs(np.asarray(kres[name], dtype=np.float64) - ref)))
        gbs = m_bytes / (ms / 1e3) / 1e9
        ok = err <= TOLERANCE
        kern_rows.append(
            {
                "method": name,
                "median_ms": ms,
                "times_ms": ktimes[name],
                "max_abs_err": err,
                "gbs": gbs,
                "frac_of_read_bw": gbs / mem_bw,
                "agrees": ok,
            }
        )
        if not ok:
            failures.append(f"{name}: max |err| {err:.3g} vs float64 reference")
        print(f"  timed {name}: {ms:.1f} ms")

    # ---- report (5)
    base = next(r for r in sql_rows if r["method"] == "vec_cosine (BLOB query)")["median_ms"]
    scan = next(r for r in sql_rows if r["method"] == "baseline max(length(embedding))")[
        "median_ms"
    ]
    copy = next(r for r in sql_rows if r["method"] == "baseline max(embedding)")["median_ms"]
    for r in sql_rows:
        r["ratio_vs_vec_cosine"] = r["median_ms"] / base
        r["net_of_scan_ms"] = r["median_ms"] - scan
        r["net_of_blob_copy_ms"] = r["median_ms"] - copy
        r["per_row_ns"] = r["median_ms"] * 1e6 / args.rows

    print()
    print(
        f"Full-table scan SELECT max(f(embedding, :q)) FROM t, {args.rows:,} rows x {args.dim}-d, "
        f"median of {args.repeat} runs"
    )
    print(
        "  x vec_cosine = time / time of vec_cosine (BLOB query); "
        "net = time minus baseline max(length(embedding)) (row scan, blob not read);"
    )
    print(
        "  net2 = time minus baseline max(embedding) (row scan + SQLite copying each blob out of its page)"
    )
    hdr = (
        f"{'method':<36} {'median ms':>10} {'x vec_cosine':>12} {'net ms':>7} {'net2 ms':>8} "
        f"{'ns/row':>7}  {'max':>16}  agrees"
    )
    print(hdr)
    print("-" * len(hdr))
    for r in sql_rows:
        mx = f"{r['max']:.6f}" if isinstance(r["max"], float) else str(r["max"])
        print(
            f"{r['method']:<36} {r['median_ms']:>10.1f} {r['ratio_vs_vec_cosine']:>11.2f}x "
            f"{r['net_of_scan_ms']:>7.1f} {r['net_of_blob_copy_ms']:>8.1f} {r['per_row_ns']:>7.0f}  "
            f"{mx:>16}  {'yes' if r['agrees'] else 'NO'}"
        )
    print(f"(float64 numpy reference max: {ref_max:.6f}; agreement tolerance {TOLERANCE:g})")

    print()
    print(
        f"In memory: one query vs the {args.rows:,}x{args.dim} float32 matrix M "
        f"({m_bytes / 1e6:.0f} MB), median of {args.repeat} runs;"
    )
    print(
        f"  GB/s = bytes of M / time; machine read bandwidth {mem_bw:.1f} GB/s "
        f"(best of a.sum()/a.max() over 1 GiB float32, one thread); "
        f"BLAS threads: {info['blas_threads']}"
    )
    hdr2 = f"{'method':<36} {'median ms':>10} {'GB/s':>7} {'% of mem bw':>11} {'max |err|':>10}  agrees"
    print(hdr2)
    print("-" * len(hdr2))
    for r in kern_rows:
        print(
            f"{r['method']:<36} {r['median_ms']:>10.2f} {r['gbs']:>7.1f} {100 * r['frac_of_read_bw']:>10.0f}% "
            f"{r['max_abs_err']:>10.1e}  {'yes' if r['agrees'] else 'NO'}"
        )

    print()
    summary = {}
    vd = next((r for r in sql_rows if r["method"].startswith("sqlite-vec")), None)
    if vd is not None:
        speedup = vd["median_ms"] / base
        net = (vd["median_ms"] - scan) / (base - scan) if base > scan else None
        net2 = (vd["median_ms"] - copy) / (base - copy) if base > copy else None
        summary = {
            "speedup_vs_sqlite_vec": speedup,
            "speedup_vs_sqlite_vec_net_of_scan": net,
            "speedup_vs_sqlite_vec_net_of_blob_copy": net2,
            "target": TARGET,
            "target_met": speedup >= TARGET,
        }
        print(
            f"vec_cosine vs sqlite-vec vec_distance_cosine: {speedup:.2f}\u00d7 (target \u2265 {TARGET}\u00d7)"
            f"{'' if speedup >= TARGET else '  -- NOT MET'}"
        )
        fmt = lambda x: "n/a" if x is None else f"{x:.2f}\u00d7"  # noqa: E731
        print(
            f"  the function calls alone: {fmt(net)} net of max(length(embedding)), "
            f"{fmt(net2)} net of max(embedding)"
        )
    else:
        print("vec_cosine vs sqlite-vec vec_distance_cosine: n/a (sqlite-vec not installed)")
    dflt = kern_rows[0]
    summary["kernel_fraction_of_memory_bandwidth"] = dflt["frac_of_read_bw"]
    print(
        f"cffi cosine_many ({kernels.simd_current()}) reaches {dflt['gbs']:.1f} GB/s = "
        f"{100 * dflt['frac_of_read_bw']:.0f}% of the measured memory read bandwidth"
    )

    info["total_s"] = time.perf_counter() - t_start
    print(f"(whole run {info['total_s']:.0f} s)")

    os.makedirs(args.out, exist_ok=True)
    result = {
        "info": info,
        "reference_max": ref_max,
        "sql_scans": sql_rows,
        "kernels": kern_rows,
        "summary": summary,
        "failures": failures,
    }
    json_path = os.path.join(args.out, "vec_cosine.json")
    with open(json_path, "w", encoding="utf-8") as f:
        json.dump(result, f, indent=2)
    print(f"wrote {os.path.relpath(json_path)}")
    if not args.no_plot:
        png = plot(result, os.path.join(args.out, "vec_cosine.png"))
        if png:
            print(f"wrote {os.path.relpath(png)}")

    if failures:
        print("\nDISAGREEMENT:\n  " + "\n  ".join(failures), file=sys.stderr)
        return 2
    return 0


def plot(result: dict, path: str) -> Optional[str]:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("(matplotlib not importable: no plot)")
        return None
    info = result["info"]
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(13, 4.8), gridspec_kw={"width_ratios": [3, 2]})
    rows = result["sql_scans"]
    names = [r["method"] for r in rows][::-1]
    vals = [r["median_ms"] for r in rows][::-1]
    colors = [
        "#1f77b4"
        if n.startswith("vec_cosine")
        else "#ff7f0e"
        if n.startswith("sqlite-vec")
        else "#7f7f7f"
        if n.startswith("baseline")
        else "#2ca02c"
        for n in names
    ]
    # Linear scale, cut at 1.35x the slowest C method: the Python UDF runs off the
    # chart and is labelled with its time.
    cmax = max(v for n, v in zip(names, vals) if "Python UDF" not in n)
    xmax = 1.35 * cmax
    ax1.barh(names, [min(v, xmax) for v in vals], color=colors)
    ax1.set_xlim(0, xmax)
    ax1.set_xlabel("median ms (lower is better)")
    ax1.set_title(
        f"SELECT max(f(embedding, :q)) FROM t \u2014 {info['rows']:,} x {info['dim']}-d",
        fontsize=10,
    )
    for y, v in enumerate(vals):
        if v > xmax:
            ax1.text(
                xmax * 0.98,
                y,
                f"{v:.0f} ms \u2192",
                va="center",
                ha="right",
                fontsize=8,
                color="white",
                fontweight="bold",
            )
        else:
            ax1.text(v, y, f" {v:.1f}", va="center", fontsize=8)
    scan = next(
        (r["median_ms"] for r in rows if r["method"].startswith("baseline max(length")), None
    )
    if scan:
        ax1.axvline(scan, color="#7f7f7f", ls=":", lw=1)
    k = result["kernels"]
    ax2.barh([r["method"] for r in k][::-1], [r["gbs"] for r in k][::-1], color="#9467bd")
    bw = info["memory"]["read_gbs"]
    ax2.axvline(bw, color="k", ls="--", lw=1, label=f"memory read {bw:.1f} GB/s (1 thread)")
    ax2.set_xlim(0, 1.3 * max([bw] + [r["gbs"] for r in k]))
    ax2.legend(loc="upper right", fontsize=8)
    ax2.set_xlabel("effective GB/s (bytes of M / time)")
    ax2.set_title("one query vs the matrix in memory", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == CHILD_FLAG:
        child_scalar_scan(sys.argv[2], sys.argv[3])
        sys.exit(0)
    sys.exit(main())
