#!/usr/bin/env python3
"""The restore drill: lose the machine while several processes write, restore
from the Litestream replica, and count what was lost.

One run, in a fresh directory:

1. a primary memory (``Store``, 16-d vectors, no model) with ``--seed-rows`` memories;
2. ``sqlite-rrf replicate primary.db --to replica/`` (the real Litestream from the
   ``replicate`` extra), in a process group of its own;
3. ``--writers`` writer processes, each adding memories through ``Store.add`` in a loop
   and appending ``id commit-time`` to its own log right after each commit (so every
   logged id is committed; an id committed but not yet logged when the writer dies is
   fine: it may or may not be restored and is not counted);
4. for ``--seconds``: at random moments a writer is killed with SIGKILL and started again
   (ids of a new generation), and the replicator's whole group (the wrapper and
   Litestream) is killed with SIGKILL and started again;
5. the disaster: every writer and the replicator are killed with SIGKILL at the same
   moment, then the primary file, its ``-wal``, ``-shm`` and Litestream's local state are
   deleted;
6. ``sqlite-rrf restore --from replica/ -o restored.db`` (:func:`sqlite_rrf.app.replicate.restore`,
   which runs the full check of ``sqlite-rrf check``);
7. counts the committed ids missing from the restored file, and how long before the
   disaster each was committed; a rebuilt copy (the restored rows inserted into a fresh
   Store in rowid order) must recall exactly as the restored file does (ids and scores).

Litestream replicates asynchronously: it looks at the WAL every second (its monitor
interval) and ships what it found every sync interval (1 s by default), so what a lost
machine takes with it is the writes of about the last two seconds. ``lost`` writes
committed longer ago than ``window`` are the drill's failure.

Run by hand for longer drills (``make drill``)::

    .venv/bin/python tests/drill/drill.py --seconds 120 --rounds 3
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from typing import Any, Dict, List, Optional, Tuple

import numpy as np

DIM = 16
WORDS = (
    "postgres backup deploy staging token rotate cache invoice latency replica "
    "schema migration alert pager retry queue tenant quota bucket region"
).split()
QUERIES = [
    "postgres backup replica",
    "rotate token cache",
    "tenant quota bucket",
    "deploy staging alert",
    "latency retry queue migration",
]
#: The recall's time, fixed so that the restored and the rebuilt copy are asked the same.
NOW = 1_900_000_000_000

WRITER = r"""
import os, sys, time, zlib
import numpy as np
from sqlite_rrf.store import Store
db, name, gen, log = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
words = %(words)r
fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
store = Store(db)
i = 0
while True:
    eid = f"{name}-g{gen}-{i}"
    rng = np.random.default_rng(zlib.crc32(eid.encode()))
    text = " ".join(rng.choice(words, 6)) + " " + eid
    store.add(text, id=eid, embedding=rng.standard_normal(%(dim)d).astype("float32"),
              kind=("note", "fact")[i %% 2], scope=("", "proj")[i %% 3 == 0],
              created_at=1_800_000_000_000 + i * 1000)
    os.write(fd, f"{eid} {time.time():.6f}\n".encode())
    i += 1
    time.sleep(%(pause)r)
"""


def _vec(rng: np.random.Generator) -> np.ndarray:
    return rng.standard_normal(DIM).astype("float32")


def _spawn_writer(
    py: str, db: str, name: str, gen: int, log: str, pause: float
) -> subprocess.Popen:
    code = WRITER % {"words": WORDS, "dim": DIM, "pause": pause}
    return subprocess.Popen(
        [py, "-c", code, db, name, str(gen), log], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )


def _spawn_replicator(py: str, db: str, replica: str, config: str, log: Any) -> subprocess.Popen:
    # A group of its own: SIGKILL to the group kills the wrapper and Litestream at once,
    # as a lost machine does.
    return subprocess.Popen(
        [py, "-m", "sqlite_rrf", "replicate", db, "--to", replica, "--config", config],
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()


def _read_logs(paths: List[str]) -> Dict[str, float]:
    out: Dict[str, float] = {}
    for p in paths:
        if not os.path.exists(p):
            continue
        with open(p, encoding="utf-8") as f:
            for line in f:
                parts = line.split()
                if len(parts) == 2 and line.endswith("\n"):  # a torn last line is no record
                    out[parts[0]] = float(parts[1])
    return out


def _rows(db: str) -> List[Dict[str, Any]]:
    import apsw

    conn = apsw.Connection(
        f"file:{db}?mode=ro", flags=apsw.SQLITE_OPEN_READONLY | apsw.SQLITE_OPEN_URI
    )
    try:
        cols = (
            "id",
            "content",
            "embedding",
            "created_at",
            "accessed_at",
            "access_count",
            "importance",
            "kind",
            "scope",
        )
        return [
            dict(zip(cols, r))
            for r in conn.execute(f"SELECT {', '.join(cols)} FROM episodes ORDER BY rowid")
        ]
    finally:
        conn.close()


def rebuilt_copy(restored: str, path: str) -> int:
    """The restored rows inserted into a fresh Store at ``path`` in rowid order."""
    from sqlite_rrf.store import Store

    rows = _rows(restored)
    with Store(path) as store:
        store.add_many(
            [dict(r, embedding=np.frombuffer(r["embedding"], dtype="<f4")) for r in rows],
            dedupe=False,
        )
    return len(rows)


def recall_table(db: str) -> List[List[Tuple[str, float]]]:
    """Every query of :data:`QUERIES` on ``db`` (read-only, no touch), top 10 as (id, score),
    over every scope."""
    from sqlite_rrf.store import Store

    out = []
    with Store(db, readonly=True) as store:
        for i, q in enumerate(QUERIES):
            qvec = np.random.default_rng(1000 + i).standard_normal(DIM).astype("float32")
            res = store.recall(
                q,
                limit=10,
                qvec=qvec,
                now=NOW,
                touch=False,
                scope=None,
                collapse=False,
                time_expressions=False,
            )
            out.append([(h.id, h.score) for h in res.hits])
    return out


def run(
    seconds: float = 20.0,
    writers: int = 3,
    workdir: Optional[str] = None,
    seed: int = 0,
    seed_rows: int = 200,
    pause: float = 0.01,
    sync_interval: float = 1.0,
    restart_replicator: bool = True,
    quiet: bool = True,
) -> Dict[str, Any]:
    """One drill; returns its report (see the module's docstring). The first random event
    kills the replicator; ``restart_replicator=False`` leaves it dead from then on (the
    drill's control: writes after that are lost, however old)."""
    from sqlite_rrf.app.replicate import restore
    from sqlite_rrf.store import Store

    rnd = random.Random(seed)
    work = workdir or tempfile.mkdtemp(prefix="rrf-drill-")
    os.makedirs(work, exist_ok=True)
    py = sys.executable
    db = os.path.join(work, "primary.db")
    replica = os.path.join(work, "replica")
    config = os.path.join(work, "litestream.yml")
    restored = os.path.join(work, "restored.db")
    rebuilt = os.path.join(work, "rebuilt.db")
    rlog = open(os.path.join(work, "replicator.log"), "ab")

    rng = np.random.default_rng(seed)
    with Store(db) as store:
        store.add_many(
            [
                dict(
                    id=f"seed-{i}",
                    content=" ".join(rng.choice(WORDS, 6)) + f" seed {i}",
                    embedding=_vec(rng),
                    created_at=1_700_000_000_000 + i * 1000,
                )
                for i in range(seed_rows)
            ],
            dedupe=False,
        )

    events: List[Tuple[float, str]] = []
    t0 = time.time()
    rep = _spawn_replicator(py, db, replica, config, rlog)
    deadline = time.monotonic() + 60
    while not os.path.isdir(os.path.join(replica, "ltx")):
        if rep.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"the replicator did not start (see {work}/replicator.log)")
        time.sleep(0.1)
    events.append((time.time() - t0, "replicating"))

    logs = [os.path.join(work, f"w{k}.log") for k in range(writers)]
    gens = [0] * writers
    procs = [_spawn_writer(py, db, f"w{k}", 0, logs[k], pause) for k in range(writers)]
    writer_kills = replicator_kills = 0
    # The replicator's last kill is at least 40 % of the run before the disaster, so that
    # it has long since caught up again; writers die until the end.
    end = time.monotonic() + seconds
    last_rep_kill = time.monotonic() + 0.6 * seconds
    while True:
        left = end - time.monotonic()
        if left <= 0:
            break
        time.sleep(min(left, rnd.uniform(0.5, 2.0)))
        if time.monotonic() >= end:
            break
        if (
            rep is not None
            and time.monotonic() < last_rep_kill
            and (replicator_kills == 0 or rnd.random() < 0.35)
        ):
            _kill_group(rep)
            replicator_kills += 1
            events.append((time.time() - t0, "replicator killed"))
            rep = None
            if restart_replicator:
                time.sleep(rnd.uniform(0.2, 1.5))
                rep = _spawn_replicator(py, db, replica, config, rlog)
                events.append((time.time() - t0, "replicator started"))
        else:
            k = rnd.randrange(writers)
            procs[k].kill()
            procs[k].wait()
            writer_kills += 1
            gens[k] += 1
            events.append((time.time() - t0, f"writer w{k} killed"))
            procs[k] = _spawn_writer(py, db, f"w{k}", gens[k], logs[k], pause)

    # The disaster: everything dies at once, then the machine's disk is gone.
    for p in procs:
        p.send_signal(signal.SIGKILL)
    if rep is not None:
        _kill_group(rep)
    t_kill = time.time()
    for p in procs:
        p.wait()
        err = p.stderr.read().decode(errors="replace") if p.stderr else ""
        if p.returncode != -signal.SIGKILL:
            raise RuntimeError(f"a writer failed before the disaster: {err[-2000:]}")
    events.append((t_kill - t0, "disaster"))
    rlog.close()
    for suffix in ("", "-wal", "-shm"):
        if os.path.exists(db + suffix):
            os.remove(db + suffix)
    shutil.rmtree(os.path.join(work, ".primary.db-litestream"), ignore_errors=True)

    t = time.monotonic()
    report = restore(replica, restored)
    restore_s = time.monotonic() - t

    committed = _read_logs(logs)
    present = {r["id"] for r in _rows(restored)}
    lost = {i: t_kill - ts for i, ts in committed.items() if i not in present}
    seeds_missing = [f"seed-{i}" for i in range(seed_rows) if f"seed-{i}" not in present]
    unknown = sorted(i for i in present - set(committed) if not i.startswith("seed-"))
    rebuilt_rows = rebuilt_copy(restored, rebuilt)
    a, b = recall_table(restored), recall_table(rebuilt)
    out = {
        "seconds": seconds,
        "writers": writers,
        "sync_interval_s": sync_interval,
        "committed": len(committed),
        "restored_rows": len(present),
        "lost": len(lost),
        "lost_max_age_s": max(lost.values(), default=0.0),
        "lost_min_age_s": min(lost.values(), default=0.0),
        "committed_last_2s": sum(1 for ts in committed.values() if t_kill - ts <= 2.0),
        "unlogged_restored": len(unknown),
        "seeds_missing": seeds_missing,
        "writer_kills": writer_kills,
        "replicator_kills": replicator_kills,
        "restore_s": round(restore_s, 3),
        "check_ok": report.ok,
        "check_findings": [f"{f.part}: {f.message}" for f in report.findings],
        "rebuilt_rows": rebuilt_rows,
        "recall_equal": a == b,
        "recall_restored": a,
        "recall_rebuilt": b,
        "replica_bytes": _du(replica),
        "workdir": work,
        # full snapshots Litestream took: 1 at the start, more when it lost track of the
        # WAL (a checkpoint it did not make, a restart after SIGKILL)
        "snapshots": _count(os.path.join(work, "replicator.log"), "snapshot complete"),
        "events": [(round(ts, 2), e) for ts, e in events],
    }
    if not quiet:
        print(
            json.dumps(
                {k: v for k, v in out.items() if k not in ("recall_restored", "recall_rebuilt")},
                indent=1,
            )
        )
    return out


def _count(path: str, what: str) -> int:
    with open(path, encoding="utf-8", errors="replace") as f:
        return sum(what in line for line in f)


def _du(path: str) -> int:
    total = 0
    for root, _dirs, files in os.walk(path):
        for f in files:
            try:
                total += os.path.getsize(os.path.join(root, f))
            except OSError:
                pass
    return total


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--writers", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--pause", type=float, default=0.01, help="seconds each writer sleeps between two commits"
    )
    ap.add_argument("--workdir", default=None)
    args = ap.parse_args(argv)
    rows = []
    for r in range(args.rounds):
        work = os.path.join(args.workdir, f"round{r}") if args.workdir else None
        rep = run(
            seconds=args.seconds,
            writers=args.writers,
            workdir=work,
            seed=args.seed + r,
            pause=args.pause,
        )
        rows.append(rep)
        if not args.workdir:
            shutil.rmtree(rep["workdir"], ignore_errors=True)
    print(
        "| round | s | committed | lost | oldest lost (s before the loss) | committed in "
        "the last 2 s | writer kills | replicator kills | snapshots | restore s | check | "
        "recall = rebuilt |"
    )
    print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- |")
    for i, r in enumerate(rows):
        print(
            f"| {i} | {r['seconds']:g} | {r['committed']} | {r['lost']} | "
            f"{r['lost_max_age_s']:.2f} | {r['committed_last_2s']} | {r['writer_kills']} | "
            f"{r['replicator_kills']} | {r['snapshots']} | {r['restore_s']:.2f} | "
            f"{'ok' if r['check_ok'] else r['check_findings']} | {r['recall_equal']} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
