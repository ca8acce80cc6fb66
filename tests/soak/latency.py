#!/usr/bin/env python3
"""Writer latency with and without concurrent touching recalls
(``make soak``).

Readers never block writers: a recall reads in a read transaction and touches its hits
afterwards in a short write transaction of its own (``Store._touch``). This tool shows it
in figures. On one WAL database of ``--episodes`` episodes with ``--dim``-dimensional
random vectors (30,000 x 384 by default, where a pool-``all`` recall scores every vector
and takes a few hundred ms), it runs one configuration after another, each on a fresh
copy of the same database for ``--seconds``:

``alone``     two writer processes, nothing else;
``recent``    the writers and one reader process recalling with ``pool='recent'``;
``all``       the writers and one reader recalling with ``pool='all'``;
``mixed``     the writers, one ``all`` reader and one ``recent`` reader (the issue's setup);
``control``   the writers and one ``all`` reader that recalls the way Store once did:
              ``BEGIN IMMEDIATE``, the statement, the touch, ``COMMIT`` — the
              write lock held for the whole statement. Not the product: it shows that the
              figures can tell a writer that waits for recalls from one that does not.

Every reader recall touches (``touch=True``, the default). The writers are paced (each
starts an operation every ``1 / --rate`` s, so every configuration offers them the same
load) and add (with an embedding), upsert or delete their own episodes through
:class:`sqlite_rrf.store.Store`. Each operation's latency is measured around the Store
call. To tell waiting for a lock from waiting for the CPU (two cores, shared), every
connection's busy handler is replaced by one that sleeps on SQLite's own default schedule
(1, 2, 5, 10, 15, 20, 25, 25, 25, 50, 50, 100 ms, then 100 ms, up to the Store's 10 s)
and adds up how long each operation slept in it: the *lock wait*.

The figures per configuration: writer operations, latency p50/p90/p99/max, how many
operations met a busy lock at all and their lock wait p99/max/total, reader recalls with
latency p50/p99, touches made and not made, and the ``BusyError``s (and any other
exception) that reached a caller. After each configuration the database passes
``PRAGMA integrity_check`` and both FTS5 integrity checks.

    python tests/soak/latency.py --episodes 30000 --dim 384 --seconds 20 --workdir build/latency

exits 1 if any BusyError or other exception reached a caller, a child failed, or a
check failed. Timings are shown, never asserted.
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
from typing import Any, Dict, List, Optional

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)

from soak import VOCAB, _busy_errors, fts_checks

#: reader processes of each configuration: (pool, how)
CONFIGS: Dict[str, List[List[str]]] = {
    "alone": [],
    "recent": [["recent", "store"]],
    "all": [["all", "store"]],
    "mixed": [["all", "store"], ["recent", "store"]],
    "control": [["all", "locked"]],
    # not run by default: readers that do not touch (reads only)
    "recent-notouch": [["recent", "notouch"]],
    "all-notouch": [["all", "notouch"]],
}
DEFAULT_CONFIGS = ("alone", "recent", "all", "mixed", "control")
#: SQLite's default busy handler's delays (ms), sqliteDefaultBusyCallback
SQLITE_DELAYS_MS = (1, 2, 5, 10, 15, 20, 25, 25, 25, 50, 50, 100)
BUSY_TIMEOUT_MS = 10_000


class BusyMeter:
    """A busy handler with SQLite's default schedule that measures the time slept."""

    def __init__(self, timeout_ms: int = BUSY_TIMEOUT_MS) -> None:
        self.timeout_ms = timeout_ms
        self.slept = 0.0  # seconds, since the last reset()
        self.calls = 0

    def reset(self) -> None:
        self.slept = 0.0
        self.calls = 0

    def __call__(self, count: int) -> bool:
        if count < len(SQLITE_DELAYS_MS):
            delay = SQLITE_DELAYS_MS[count]
            prior = sum(SQLITE_DELAYS_MS[:count])
        else:
            delay = SQLITE_DELAYS_MS[-1]
            prior = sum(SQLITE_DELAYS_MS) + (count - len(SQLITE_DELAYS_MS)) * delay
        if prior + delay > self.timeout_ms:
            delay = self.timeout_ms - prior
            if delay <= 0:
                return False
        t = time.perf_counter()
        time.sleep(delay / 1000.0)
        self.slept += time.perf_counter() - t
        self.calls += 1
        return True


def pct(values: List[float], q: float) -> Optional[float]:
    """The q-th percentile (nearest rank) of ``values``, or None."""
    if not values:
        return None
    s = sorted(values)
    i = min(len(s) - 1, max(0, int(round(q / 100.0 * len(s) + 0.5)) - 1))
    return s[i]


def r2(x: Optional[float]) -> Optional[float]:
    return None if x is None else round(x, 2)


def _text(rng: random.Random, tag: str) -> str:
    return tag + " " + " ".join(rng.choice(VOCAB) for _ in range(rng.randint(5, 20)))


def build(path: str, episodes: int, dim: int, seed: int, key: Dict[str, Any]) -> float:
    """The base database: ``episodes`` random texts with random vectors; returns seconds."""
    import numpy as np

    from sqlite_rrf.store import Store

    t = time.time()
    rng = random.Random(seed)
    nrng = np.random.default_rng(seed)
    tmp = path + ".tmp"
    for suffix in ("", "-wal", "-shm"):
        if os.path.exists(tmp + suffix):
            os.remove(tmp + suffix)
    with Store(tmp) as s:
        for b in range(0, episodes, 2000):
            n = min(2000, episodes - b)
            vecs = nrng.standard_normal((n, dim)).astype("<f4")
            s.add_many(
                [
                    dict(id=f"base-{b + i}", content=_text(rng, f"base{b + i}"), embedding=vecs[i])
                    for i in range(n)
                ]
            )
        s.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    os.replace(tmp, path)
    for suffix in ("-wal", "-shm"):
        if os.path.exists(tmp + suffix):
            os.remove(tmp + suffix)
    with open(path + ".json", "w", encoding="utf-8") as f:
        json.dump(key, f)
    return time.time() - t


# ------------------------------------------------------------------ children


def _wait_go(args: argparse.Namespace) -> None:
    open(args.go + f".ready-{os.getpid()}", "w").close()
    t_end = time.time() + 300
    while not os.path.exists(args.go):
        if time.time() > t_end:
            raise SystemExit("no go file from the orchestrator")
        time.sleep(0.02)
    with open(args.go, encoding="utf-8") as f:
        go = json.load(f)
    args.deadline = go["deadline"]
    while time.time() < go["start_at"]:
        time.sleep(0.005)


def _open(args: argparse.Namespace) -> Any:
    from sqlite_rrf.store import Store

    store = Store(args.db)
    if args.synchronous:
        store.conn.execute(f"PRAGMA synchronous = {args.synchronous}")
    meter = BusyMeter()
    store.conn.set_busy_handler(meter)
    return store, meter


def writer(args: argparse.Namespace) -> int:
    import numpy as np

    from sqlite_rrf.store import StoreError

    rng = random.Random(args.seed)
    nrng = np.random.default_rng(args.seed)
    _wait_go(args)
    store, meter = _open(args)
    ops: List[List[Any]] = []  # [kind, latency ms, lock wait ms]
    busy = 0
    unexpected: List[str] = []
    live: List[str] = []
    n = 0
    # Poisson arrivals (exponential gaps of mean 1 / rate), so the writers do not start
    # their operations in lockstep; an operation that starts late does not shift the rest
    next_t = time.perf_counter() + rng.expovariate(args.rate)
    while time.time() < args.deadline:
        now = time.perf_counter()
        if now < next_t:
            time.sleep(next_t - now)
        next_t += rng.expovariate(args.rate)
        r = rng.random()
        kind = "add" if r < 0.6 or not live else ("upsert" if r < 0.85 else "delete")
        vec = nrng.standard_normal(args.dim).astype("<f4")
        if kind == "add":
            eid = f"w{args.index}-{n}"
            n += 1
            call = lambda: store.add(_text(rng, eid), id=eid, embedding=vec)  # noqa: E731
        elif kind == "upsert":
            eid = rng.choice(live)
            call = lambda: store.upsert(_text(rng, eid), id=eid, embedding=vec)  # noqa: E731
        else:
            eid = live.pop(rng.randrange(len(live)))
            call = lambda: store.delete(eid)  # noqa: E731
        meter.reset()
        t = time.perf_counter()
        try:
            call()
        except _busy_errors() as e:
            busy += 1
            unexpected.append(f"{kind}: {type(e).__name__}: {e}")
        except (StoreError, Exception) as e:
            unexpected.append(f"{kind}: {type(e).__name__}: {e}\n" + traceback.format_exc(limit=3))
        else:
            if kind == "add":
                live.append(eid)
        ops.append([kind, (time.perf_counter() - t) * 1000.0, meter.slept * 1000.0])
        if len(unexpected) > 20:
            break
    store.close()
    _summary(args, role="writer", ops=ops, busy=busy, unexpected=unexpected)
    return 0


def reader(args: argparse.Namespace) -> int:
    import numpy as np

    from sqlite_rrf.core.sql_files import statement_params
    from sqlite_rrf.core.statements import recall_statement
    from sqlite_rrf.store import RecallOptions

    rng = random.Random(args.seed)
    nrng = np.random.default_rng(args.seed)
    _wait_go(args)
    store, meter = _open(args)
    recalls: List[List[float]] = []  # [latency ms, lock wait ms, hits]
    touches: List[List[float]] = []  # [ms in Store._touch, lock wait ms in it]
    touch = store._touch

    def timed_touch(*a: Any, **kw: Any) -> Any:
        # measurement only: how long the touch's write transaction (and its wait) takes
        before = meter.slept
        t = time.perf_counter()
        if args.touch_synchronous:  # the product change proposed in docs/benchmarks.md
            store.conn.execute(f"PRAGMA synchronous = {args.touch_synchronous}")
        try:
            return touch(*a, **kw)
        finally:
            if args.touch_synchronous:
                store.conn.execute(f"PRAGMA synchronous = {args.synchronous or 'FULL'}")
            touches.append([(time.perf_counter() - t) * 1000.0, (meter.slept - before) * 1000.0])

    store._touch = timed_touch
    busy = 0
    touched = not_touched = 0
    touch_errors: List[str] = []
    unexpected: List[str] = []
    while time.time() < args.deadline:
        query = " ".join(rng.choice(VOCAB) for _ in range(rng.randint(1, 5)))
        qvec = nrng.standard_normal(args.dim).astype("<f4")
        meter.reset()
        t = time.perf_counter()
        try:
            if args.how == "locked":
                # Store.recall as it once was: the write lock for the whole statement
                params = RecallOptions(limit=10, pool=args.pool).params()
                sql = recall_statement(args.pool)
                b = {
                    **dict.fromkeys(statement_params(sql)),  # None: the statement's default
                    **params,
                    "query": query,
                    "qvec": qvec.tobytes(),
                }
                store.conn.execute("BEGIN IMMEDIATE")
                try:
                    cur = store.conn.execute(sql, b)
                    at = [d[0] for d in cur.getdescription()].index("rowid")
                    rows = cur.fetchall()
                    store.conn.executemany(
                        "UPDATE episodes SET accessed_at = ?, access_count = access_count + 1 "
                        "WHERE rowid = ?",
                        [(int(time.time() * 1000), r[at]) for r in rows],
                    )
                    store.conn.execute("COMMIT")
                except BaseException:
                    if not store.conn.getautocommit():
                        store.conn.execute("ROLLBACK")
                    raise
                hits, ok, why = len(rows), True, None
            else:
                res = store.recall(
                    query,
                    limit=10,
                    qvec=qvec,
                    pool=args.pool,
                    force=True,
                    touch=args.how != "notouch",
                )
                hits, ok, why = len(res), res.touched, res.touch_error
                if args.how == "notouch":
                    ok = False  # counted as neither touched nor a failed touch
                    hits = 0
        except _busy_errors() as e:
            busy += 1
            unexpected.append(f"recall {args.pool}: {type(e).__name__}: {e}")
        except Exception as e:
            unexpected.append(
                f"recall {args.pool}: {type(e).__name__}: {e}\n" + traceback.format_exc(limit=3)
            )
        else:
            recalls.append([(time.perf_counter() - t) * 1000.0, meter.slept * 1000.0, hits])
            if ok:
                touched += 1
            elif hits:
                not_touched += 1
                if why and len(touch_errors) < 5:
                    touch_errors.append(why)
        if len(unexpected) > 20:
            break
    store.close()
    _summary(
        args,
        role="reader",
        pool=args.pool,
        how=args.how,
        recalls=recalls,
        touches=touches,
        busy=busy,
        touched=touched,
        not_touched=not_touched,
        touch_errors=touch_errors,
        unexpected=unexpected,
    )
    return 0


def _summary(args: argparse.Namespace, **kw: Any) -> None:
    with open(args.summary, "w", encoding="utf-8") as f:
        json.dump(kw, f)


# ------------------------------------------------------------------ orchestrator


def run_config(
    name: str,
    readers: List[List[str]],
    base: str,
    workdir: str,
    *,
    seconds: float,
    writers: int,
    rate: float,
    dim: int,
    seed: int,
    synchronous: Optional[str] = None,
    touch_synchronous: Optional[str] = None,
) -> Dict[str, Any]:
    """One configuration on a fresh copy of ``base``; its figures and failures."""
    cdir = os.path.join(workdir, name)
    if os.path.isdir(cdir):
        shutil.rmtree(cdir)
    os.makedirs(cdir)
    db = os.path.join(cdir, "m.db")
    shutil.copyfile(base, db)
    go = os.path.join(cdir, "go.json")
    me = os.path.abspath(__file__)
    procs = []
    roles = [("_writer", i, None) for i in range(writers)] + [
        ("_reader", i, r) for i, r in enumerate(readers)
    ]
    for role, i, r in roles:
        pname = f"{role[1:]}-{i}"
        cmd = [
            sys.executable,
            me,
            role,
            "--db",
            db,
            "--index",
            str(i),
            "--go",
            go,
            "--seed",
            str(seed * 1000 + i + (100 if role == "_reader" else 0)),
            "--dim",
            str(dim),
            "--rate",
            str(rate),
            "--summary",
            os.path.join(cdir, pname + ".json"),
        ]
        if r:
            cmd += ["--pool", r[0], "--how", r[1]]
        if synchronous:
            cmd += ["--synchronous", synchronous]
        if touch_synchronous:
            cmd += ["--touch-synchronous", touch_synchronous]
        err = open(os.path.join(cdir, pname + ".stderr"), "w")
        procs.append((pname, subprocess.Popen(cmd, stderr=err), err))
    failures: List[str] = []
    t_end = time.time() + 120
    while (
        sum(f.startswith("go.json.ready-") for f in os.listdir(cdir)) < len(procs)
        and time.time() < t_end
        and all(p.poll() is None for _n, p, _e in procs)
    ):
        time.sleep(0.05)
    start_at = time.time() + 0.5
    deadline = start_at + seconds
    with open(go + ".tmp", "w", encoding="utf-8") as f:
        json.dump({"start_at": start_at, "deadline": deadline}, f)
    os.replace(go + ".tmp", go)
    for pname, p, err in procs:
        try:
            rc = p.wait(timeout=max(0.0, deadline - time.time()) + 120)
        except subprocess.TimeoutExpired:
            p.kill()
            rc = p.wait()
            failures.append(f"{name}/{pname} did not finish in time (killed)")
        err.close()
        if rc != 0:
            tail = open(os.path.join(cdir, pname + ".stderr")).read()[-2000:]
            failures.append(f"{name}/{pname} exited {rc}: {tail}")
    wops: List[List[Any]] = []
    recalls: Dict[str, List[List[float]]] = {}
    touches: List[List[float]] = []
    busy = 0
    unexpected: List[str] = []
    touched = not_touched = 0
    touch_errors: List[str] = []
    for pname, _p, _e in procs:
        path = os.path.join(cdir, pname + ".json")
        if not os.path.exists(path):
            failures.append(f"{name}/{pname}: no summary")
            continue
        with open(path, encoding="utf-8") as f:
            s = json.load(f)
        busy += s["busy"]
        unexpected += [f"{pname}: {u}" for u in s["unexpected"]]
        if s["role"] == "writer":
            wops += s["ops"]
        else:
            recalls.setdefault(
                s["pool"] + ("" if s["how"] == "store" else "-" + s["how"]), []
            ).extend(s["recalls"])
            touched += s["touched"]
            touches += s["touches"]
            not_touched += s["not_touched"]
            touch_errors += s["touch_errors"]
    if busy:
        failures.append(f"{name}: {busy} BusyError/LockedError reached a caller")
    if unexpected:
        failures.append(
            f"{name}: {len(unexpected)} unexpected exceptions: " + " | ".join(unexpected[:3])
        )
    import apsw

    conn = apsw.Connection(db)
    conn.set_busy_timeout(10_000)
    checks = fts_checks(conn)
    episodes = conn.execute("SELECT count(*) FROM episodes").fetchall()[0][0]
    conn.close()
    for k, v in checks.items():
        if v != "ok":
            failures.append(f"{name}: {k}: {v}")
    raw = {
        "wops": wops,
        "recalls": recalls,
        "touches": touches,
        "busy": busy,
        "unexpected": len(unexpected),
        "touched": touched,
        "not_touched": not_touched,
        "touch_errors": touch_errors,
    }
    return {"raw": raw, "checks": checks, "episodes_after": episodes, "failures": failures}


def merge_raw(a: Optional[Dict[str, Any]], b: Dict[str, Any]) -> Dict[str, Any]:
    """Two rounds' raw figures of one configuration as one."""
    if a is None:
        return b
    out = dict(a)
    for k in ("wops", "touches", "touch_errors"):
        out[k] = a[k] + b[k]
    for k in ("busy", "unexpected", "touched", "not_touched"):
        out[k] = a[k] + b[k]
    out["recalls"] = {
        k: a["recalls"].get(k, []) + b["recalls"].get(k, [])
        for k in set(a["recalls"]) | set(b["recalls"])
    }
    return out


def figures(
    raw: Dict[str, Any], readers: List[List[str]], checks: Dict[str, str], episodes: int
) -> Dict[str, Any]:
    """The figures of one configuration from its raw measurements."""
    wops, recalls, touches = raw["wops"], raw["recalls"], raw["touches"]
    lat = [o[1] for o in wops]
    waits = [o[2] for o in wops]
    waited = [w for w in waits if w > 0]
    fig: Dict[str, Any] = {
        "readers": [p + ("" if h == "store" else "-" + h) for p, h in readers],
        "writer_ops": len(wops),
        "writer_ops_by_kind": {
            k: sum(1 for o in wops if o[0] == k) for k in ("add", "upsert", "delete")
        },
        "writer_ms": {
            "p50": r2(pct(lat, 50)),
            "p90": r2(pct(lat, 90)),
            "p99": r2(pct(lat, 99)),
            "max": r2(max(lat, default=None)),
        },
        "writer_ops_that_waited_for_a_lock": len(waited),
        "lock_wait_ms": {
            "p99": r2(pct(waits, 99)),
            "max": r2(max(waits, default=None)),
            "total": r2(sum(waits)),
        },
        "recalls": {
            k: {
                "n": len(v),
                "p50_ms": r2(pct([x[0] for x in v], 50)),
                "p99_ms": r2(pct([x[0] for x in v], 99)),
                "lock_wait_total_ms": r2(sum(x[1] for x in v)),
            }
            for k, v in sorted(recalls.items())
        },
        "touch_ms": {
            "n": len(touches),
            "p50": r2(pct([x[0] for x in touches], 50)),
            "p99": r2(pct([x[0] for x in touches], 99)),
            "lock_wait_p99": r2(pct([x[1] for x in touches], 99)),
        },
        "touched": raw["touched"],
        "not_touched": raw["not_touched"],
        "touch_errors": raw["touch_errors"][:3],
        "busy_escaped": raw["busy"],
        "unexpected_exceptions": raw["unexpected"],
        "checks": checks,
        "episodes_after": episodes,
    }
    return fig


def run(
    episodes: int = 30_000,
    dim: int = 384,
    seconds: float = 20.0,
    writers: int = 2,
    rate: float = 25.0,
    configs: Optional[List[str]] = None,
    workdir: str = "build/latency",
    seed: int = 1,
    quiet: bool = False,
    rounds: int = 1,
    synchronous: Optional[str] = None,
    touch_synchronous: Optional[str] = None,
) -> Dict[str, Any]:
    """Build (or reuse) the base database, run each configuration; the report."""
    configs = configs or list(DEFAULT_CONFIGS)
    for c in configs:
        if c not in CONFIGS:
            raise SystemExit(f"unknown configuration {c!r}; known: {', '.join(CONFIGS)}")
    os.makedirs(workdir, exist_ok=True)
    base = os.path.join(workdir, "base.db")
    from sqlite_rrf.core.migrations import available

    # rebuilt when the schema's migrations change
    want = {
        "episodes": episodes,
        "dim": dim,
        "seed": seed,
        "migrations": [m.checksum for m in available()],
    }
    have = None
    if os.path.exists(base + ".json") and os.path.exists(base):
        with open(base + ".json", encoding="utf-8") as f:
            have = json.load(f)
    build_s = None
    if have != want:
        if not quiet:
            print(f"latency: building {episodes} episodes x {dim}-d in {base}", flush=True)
        build_s = round(build(base, episodes, dim, seed, want), 1)
    report: Dict[str, Any] = {
        "episodes": episodes,
        "dim": dim,
        "seconds": seconds,
        "rounds": rounds,
        "writers": writers,
        "writer_rate_per_s": rate,
        "seed": seed,
        "build_s": build_s,
        "configs": {},
        "failures": [],
        "cpus": os.cpu_count(),
        "synchronous": synchronous or "Store default",
        "touch_synchronous": touch_synchronous or "as the connection",
    }
    raws: Dict[str, Dict[str, Any]] = {}
    for rnd in range(rounds):
        # each round runs every configuration once, so that a slow spell of the shared
        # machine falls on all of them alike
        for c in configs:
            if not quiet:
                print(f"latency: {c} ({seconds:g} s, round {rnd + 1} of {rounds})", flush=True)
            out = run_config(
                c,
                CONFIGS[c],
                base,
                workdir,
                seconds=seconds,
                writers=writers,
                rate=rate,
                dim=dim,
                seed=seed + 7919 * rnd,
                synchronous=synchronous,
                touch_synchronous=touch_synchronous,
            )
            raws[c] = merge_raw(raws.get(c), out["raw"])
            fig = figures(raws[c], CONFIGS[c], out["checks"], out["episodes_after"])
            if any(how == "locked" for _p, how in CONFIGS[c]):
                # the control emulates the old Store: its BusyErrors are what it is there
                # to show, not a failure of the product (its other failures still count)
                found = [f for f in out["failures"] if "BusyError" in f or "unexpected" in f]
                fig["control_findings"] = (
                    report["configs"].get(c, {}).get("control_findings", []) + found
                )
                report["failures"] += [f for f in out["failures"] if f not in found]
            else:
                report["failures"] += out["failures"]
            report["configs"][c] = fig
    report["busy_escaped"] = sum(
        f["busy_escaped"] for c, f in report["configs"].items() if "control_findings" not in f
    )
    report["control_busy_escaped"] = sum(
        f["busy_escaped"] for f in report["configs"].values() if "control_findings" in f
    )
    report["ok"] = not report["failures"]
    if not quiet:
        print_report(report)
    return report


def table(report: Dict[str, Any]) -> str:
    """The figures as a Markdown table (docs/benchmarks.md)."""

    def v(x: Any) -> str:
        return "—" if x is None else f"{x:g}" if isinstance(x, float) else str(x)

    lines = [
        "| configuration | writer ops | writer p50 / p90 / p99 / max (ms) | ops that waited "
        "for a lock | lock wait p99 / max (ms) | recalls: n, p50 / p99 (ms) | touch "
        "p50 / p99 (ms) | touches made / not made | BusyError to a caller |",
        "| --- | ---: | --- | ---: | --- | --- | --- | --- | ---: |",
    ]
    for name, f in report["configs"].items():
        w = f["writer_ms"]
        rec = (
            "; ".join(
                f"{k} {r['n']}, {v(r['p50_ms'])} / {v(r['p99_ms'])}"
                for k, r in f["recalls"].items()
            )
            or "—"
        )
        lines.append(
            f"| {name} | {f['writer_ops']} | {v(w['p50'])} / {v(w['p90'])} / {v(w['p99'])} / "
            f"{v(w['max'])} | {f['writer_ops_that_waited_for_a_lock']} | "
            f"{v(f['lock_wait_ms']['p99'])} / {v(f['lock_wait_ms']['max'])} | {rec} | "
            f"{v(f['touch_ms']['p50'])} / {v(f['touch_ms']['p99'])} | {f['touched']} / "
            f"{f['not_touched']} | {f['busy_escaped']} |"
        )
    return "\n".join(lines)


def print_report(r: Dict[str, Any]) -> None:
    print(
        f"{r['episodes']} episodes x {r['dim']}-d, {r['writers']} writers at "
        f"{r['writer_rate_per_s']:g} ops/s each, {r['rounds']} x {r['seconds']:g} s per "
        "configuration, "
        f"{r['cpus']} CPUs, synchronous: {r['synchronous']}, touches: "
        f"{r['touch_synchronous']}"
    )
    print(table(r))
    for name, f in r["configs"].items():
        bad = {k: v for k, v in f["checks"].items() if v != "ok"}
        if bad or f["touch_errors"]:
            print(f"  {name}: checks {bad or 'ok'}; touch errors {f['touch_errors']}")
    print(
        f"BusyError reaching a caller: {r['busy_escaped']} (the control, which emulates "
        f"the old Store.recall: {r['control_busy_escaped']})"
    )
    if r["ok"]:
        print("LATENCY SOAK OK")
    else:
        print("LATENCY SOAK FAILED:")
        for f in r["failures"]:
            print("  - " + f)


def main(argv: Optional[List[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("role", nargs="?", default="run", choices=("run", "_writer", "_reader"))
    p.add_argument("--episodes", type=int, default=30_000)
    p.add_argument("--dim", type=int, default=384)
    p.add_argument("--seconds", type=float, default=20.0, help="per configuration and round")
    p.add_argument(
        "--rounds",
        type=int,
        default=1,
        help="run every configuration this many times, interleaved (default 1)",
    )
    p.add_argument("--writers", type=int, default=2)
    p.add_argument(
        "--rate",
        type=float,
        default=25.0,
        help="operations per second each writer starts (default 25)",
    )
    p.add_argument(
        "--configs",
        default=",".join(DEFAULT_CONFIGS),
        help=f"comma-separated, from {', '.join(CONFIGS)} (default: {', '.join(DEFAULT_CONFIGS)})",
    )
    p.add_argument("--workdir", default="build/latency")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument(
        "--synchronous",
        choices=("OFF", "NORMAL", "FULL", "EXTRA"),
        help="PRAGMA synchronous on every connection (default: the Store's own)",
    )
    p.add_argument(
        "--touch-synchronous",
        choices=("OFF", "NORMAL", "FULL", "EXTRA"),
        help="PRAGMA synchronous for the touches' write transactions only "
        "(default: the connection's)",
    )
    p.add_argument("--json", help="also write the report to this file")
    # children
    p.add_argument("--db")
    p.add_argument("--index", type=int, default=0)
    p.add_argument("--go")
    p.add_argument("--summary")
    p.add_argument("--pool", default="recent")
    p.add_argument("--how", default="store", choices=("store", "locked", "notouch"))
    args = p.parse_args(argv)
    if args.role == "_writer":
        return writer(args)
    if args.role == "_reader":
        return reader(args)
    report = run(
        args.episodes,
        args.dim,
        args.seconds,
        args.writers,
        args.rate,
        [c for c in args.configs.split(",") if c],
        args.workdir,
        args.seed,
        rounds=args.rounds,
        synchronous=args.synchronous,
        touch_synchronous=args.touch_synchronous,
    )
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(report, f, indent=2)
    return 0 if report["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
