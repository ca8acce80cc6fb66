#!/usr/bin/env python3
"""Crash-safety harness of the memory store (``make crash``).

Kills (SIGKILL) a writing process at random points, at least ``--kills`` times, half
of them during imports and half during migrations, and after every kill checks the
database:

* **imports**: ``python -m sqlite_rrf import DB FILE.jsonl`` of a few thousand
  episodes with JSON embeddings into a database that already holds a base set and
  every import committed before (all-or-nothing: one transaction). After the kill
  the database must hold exactly the earlier episodes plus either all of the file or
  none of it.
* **migrations**: a copy of a database at schema version 1 (built by applying only
  the first migration, with a base set of episodes) is opened by a ``Store`` that
  applies the rest, plus a slow extra migration (``crash_slow``: 0.2 M rows, an
  index, an UPDATE of every episode) that widens the window and makes the
  transaction spill into the WAL before it commits. After the kill the version must
  be one a whole migration left (each runs in its own transaction), the schema must
  be that version's, and the episodes must be unchanged; then a Store opens it and
  applies the rest.

Every time: the database opens (a ``Store``), ``PRAGMA integrity_check`` is ok, FTS5's
``integrity-check`` passes, also with ``rank = 1`` (against the content table), the
FTS index holds exactly the committed episodes' terms (``fts5vocab``), a sample of
MATCHes finds exactly their rows, and a recall runs.

Kill times: half ``uniform`` over the calibrated run time (start-up included), half
``wal``: right after the WAL file starts to grow (the transaction is writing pages)
plus a random part of the rest of the run.

    python tests/crash/crash.py --kills 50 --workdir build/crash

prints the count of kills and of each outcome, and exits 1 on any failure.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from typing import Any, Dict, Iterator, List, Optional, Tuple

DIM = 32
SLOW_ROWS = 200_000  # crash_slow's rows (the test suite uses fewer)
WORDS = (
    "memory agent database sqlite vector index recall episode token vault deploy "
    "server latency cache kernel journal checkpoint writer reader lock"
).split()
HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))


def chash(content: str) -> str:
    return hashlib.sha256(content.encode("utf-8")).hexdigest()[:20]


def slow_migration(rows: int = SLOW_ROWS) -> Any:
    """The extra, slow migration that follows the shipped ones."""
    from sqlite_rrf.core.migrations import Migration, available

    return Migration(
        max(m.version for m in available()) + 1,
        "crash_slow",
        f"""
CREATE TABLE crash_slow(x INTEGER PRIMARY KEY, pad BLOB NOT NULL);
WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < {int(rows)})
INSERT INTO crash_slow SELECT x, randomblob(48) FROM c;
CREATE INDEX crash_slow_pad ON crash_slow(pad);
UPDATE episodes SET kind = 'slow-migrated';
""",
    )


@contextlib.contextmanager
def with_slow_migration(rows: int = SLOW_ROWS) -> Iterator[None]:
    """Make ``migrate()`` (and so ``Store``) see the shipped migrations + crash_slow."""
    import sqlite_rrf.core.migrations as mig

    orig = mig.available
    slow = slow_migration(rows)
    mig.available = lambda directory=None: orig(directory) + [slow]  # type: ignore[assignment]
    try:
        yield
    finally:
        mig.available = orig  # type: ignore[assignment]


def child_migrate(db: str, rows: int) -> int:
    """The process that gets killed: open a Store (applies 0002.. and crash_slow)."""
    from sqlite_rrf.store import Store

    with with_slow_migration(rows):
        Store(db).close()
    return 0


# ------------------------------------------------------------------ data


def episode(tag: str, i: int, rng: random.Random) -> Dict[str, Any]:
    content = f"{tag} {tag}x{i} " + " ".join(rng.choice(WORDS) for _ in range(rng.randint(5, 25)))
    return {
        "id": f"{tag}-{i:05d}",
        "content": content,
        "embedding": [round(rng.gauss(0, 1), 6) for _ in range(DIM)],
        "created_at": 1_700_000_000_000 + i,
        "importance": rng.choice(("low", "normal", "high")),
    }


def write_jsonl(path: str, tag: str, n: int, rng: random.Random) -> Dict[str, str]:
    out = {}
    with open(path, "w", encoding="utf-8") as f:
        for i in range(n):
            ep = episode(tag, i, rng)
            f.write(json.dumps(ep) + "\n")
            out[ep["id"]] = chash(ep["content"])
    return out


def remove_db(path: str) -> None:
    for suffix in ("", "-wal", "-shm", "-journal"):
        with contextlib.suppress(FileNotFoundError):
            os.remove(path + suffix)


# ------------------------------------------------------------------ checks


def integrity(conn: Any) -> List[str]:
    """Failures of PRAGMA integrity_check and both FTS5 integrity checks."""
    bad = []
    rows = conn.execute("PRAGMA integrity_check").fetchall()
    if rows != [("ok",)]:
        bad.append(f"integrity_check: {rows[:5]}")
    for sql in (
        "INSERT INTO episodes_fts(episodes_fts) VALUES('integrity-check')",
        "INSERT INTO episodes_fts(episodes_fts, rank) VALUES('integrity-check', 1)",
    ):
        try:
            conn.execute(sql)
        except Exception as e:
            bad.append(f"{sql}: {type(e).__name__}: {e}")
    return bad


def content_checks(
    conn: Any, expected: Dict[str, str], tags: Dict[str, int], rng: random.Random
) -> List[str]:
    """The episodes are exactly ``expected`` (id -> content hash); the FTS index's
    tag terms are exactly ``tags`` (term -> rows); sampled unique tokens MATCH their row."""
    bad = []
    rows = conn.execute("SELECT rowid, id, content FROM episodes").fetchall()
    got = {eid: chash(c) for _r, eid, c in rows}
    if len(got) != len(rows):
        bad.append(f"{len(rows) - len(got)} duplicated ids")
    missing = [e for e in expected if e not in got]
    extra = [e for e in got if e not in expected]
    wrong = [e for e in expected if e in got and got[e] != expected[e]]
    if missing:
        bad.append(f"{len(missing)} committed episodes missing, e.g. {missing[:3]}")
    if extra:
        bad.append(f"{len(extra)} episodes that were never committed, e.g. {extra[:3]}")
    if wrong:
        bad.append(f"{len(wrong)} episodes with other content, e.g. {wrong[:3]}")
    conn.execute(
        "CREATE VIRTUAL TABLE IF NOT EXISTS temp.crash_vocab "
        "USING fts5vocab(main, episodes_fts, row)"
    )
    vocab = dict(
        conn.execute(
            "SELECT term, doc FROM temp.crash_vocab "
            "WHERE term >= 'crash' AND term < 'crasi' AND term NOT GLOB '*x*'"
        )
    )
    if vocab != tags:
        diff = {
            k: (vocab.get(k), tags.get(k))
            for k in set(vocab) | set(tags)
            if vocab.get(k) != tags.get(k)
        }
        bad.append(f"FTS tag terms (index, expected) differ: {dict(list(diff.items())[:5])}")
    for rowid, _eid, content in rng.sample(rows, min(25, len(rows))):
        tok = content.split()[1]
        hit = [
            r[0]
            for r in conn.execute(
                "SELECT rowid FROM episodes_fts WHERE episodes_fts MATCH ?", (f'"{tok}"',)
            )
        ]
        if hit != [rowid]:
            bad.append(f"MATCH {tok!r} gave rows {hit}, expected [{rowid}]")
            break
    conn.execute("DROP TABLE temp.crash_vocab")
    return bad


def recall_works(store: Any, rng: random.Random) -> List[str]:
    try:
        store.recall(
            "crash memory vault",
            qvec=[rng.gauss(0, 1) for _ in range(DIM)],
            touch=False,
            force=True,
        )
    except Exception as e:
        return [f"recall failed: {type(e).__name__}: {e}"]
    return []


# ------------------------------------------------------------------ killing


def spawn_and_kill(
    cmd: List[str],
    db: str,
    strategy: str,
    t_total: float,
    t_wal: float,
    rng: random.Random,
    log: str,
) -> Dict[str, Any]:
    """Start ``cmd``, SIGKILL it at a point chosen by ``strategy``; returns what
    happened (killed or not, when, the WAL size left)."""
    wal = db + "-wal"
    errf = open(log, "w")
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=errf, cwd=REPO)
    if strategy == "uniform":
        at = rng.uniform(0.0, 1.05 * t_total)
    else:
        # wait for the transaction's pages to reach the WAL, then a random part of the rest
        size0 = os.path.getsize(wal) if os.path.exists(wal) else 0
        while p.poll() is None:
            try:
                if os.path.getsize(wal) > size0:
                    break
            except FileNotFoundError:
                pass
            time.sleep(0.0005)
        now = time.perf_counter() - t0
        at = now + rng.uniform(0.0, max(0.02, 1.05 * (t_total - t_wal)))
    while p.poll() is None and time.perf_counter() - t0 < at:
        time.sleep(0.0005)
    killed = False
    if p.poll() is None:
        os.kill(p.pid, signal.SIGKILL)
        killed = True
    try:
        rc = p.wait(timeout=120)
    except subprocess.TimeoutExpired:  # pragma: no cover
        p.kill()
        rc = p.wait()
    t_end = time.perf_counter() - t0
    errf.close()
    return {
        "killed": killed and rc == -signal.SIGKILL,
        "rc": rc,
        "at": round(at, 4),
        "t_end": round(t_end, 4),
        "wal_left": os.path.getsize(wal) if os.path.exists(wal) else 0,
        "stderr": open(log).read()[-1500:],
    }


def timed_run(cmd: List[str], db: str, log: str) -> Tuple[float, float, int]:
    """Run ``cmd`` to the end; returns (total s, s until the WAL grew, rc)."""
    wal = db + "-wal"
    size0 = os.path.getsize(wal) if os.path.exists(wal) else 0
    with open(log, "w") as errf:
        t0 = time.perf_counter()
        p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=errf, cwd=REPO)
        t_wal = None
        while p.poll() is None:
            if t_wal is None:
                try:
                    if os.path.getsize(wal) > size0:
                        t_wal = time.perf_counter() - t0
                except FileNotFoundError:
                    pass
            time.sleep(0.0005)
        total = time.perf_counter() - t0
    return total, t_wal if t_wal is not None else total * 0.7, p.returncode


# ------------------------------------------------------------------ scenarios


class ImportScenario:
    def __init__(self, workdir: str, n: int, rng: random.Random) -> None:
        from sqlite_rrf.store import Store

        self.rng = rng
        self.n = n
        self.dir = os.path.join(workdir, "import")
        os.makedirs(self.dir)
        self.db = os.path.join(self.dir, "import.db")
        base = [episode("crashb0", i, rng) for i in range(300)]
        with Store(self.db) as st:
            st.add_many(base)
        self.expected = {e["id"]: chash(e["content"]) for e in base}
        self.tags = {"crashb0": len(base)}
        self.run_no = 0
        self.t_total = self.t_wal = 0.0

    def _cmd(self, path: str) -> List[str]:
        return [sys.executable, "-m", "sqlite_rrf", "import", self.db, path]

    def _file(self) -> Tuple[str, str, Dict[str, str]]:
        self.run_no += 1
        tag = f"crashrun{self.run_no}"
        path = os.path.join(self.dir, "batch.jsonl")
        return tag, path, write_jsonl(path, tag, self.n, self.rng)

    def calibrate(self) -> None:
        tag, path, eps = self._file()
        self.t_total, self.t_wal, rc = timed_run(
            self._cmd(path), self.db, os.path.join(self.dir, "stderr.txt")
        )
        if rc != 0:
            raise SystemExit(
                f"calibration import failed with status {rc}: "
                + open(os.path.join(self.dir, "stderr.txt")).read()[-1500:]
            )
        self.expected.update(eps)
        self.tags[tag] = self.n

    def once(self, strategy: str) -> Dict[str, Any]:
        from sqlite_rrf.store import Store

        tag, path, eps = self._file()
        r = spawn_and_kill(
            self._cmd(path),
            self.db,
            strategy,
            self.t_total,
            self.t_wal,
            self.rng,
            os.path.join(self.dir, "stderr.txt"),
        )
        failures = []
        if not r["killed"]:
            if r["rc"] != 0:
                failures.append(f"import exited {r['rc']}: {r['stderr']}")
            # a run that finished tells the new duration
            self.t_total = 0.7 * self.t_total + 0.3 * r["t_end"]
        try:
            store = Store(self.db)
        except Exception as e:
            return dict(r, outcome="does not open", failures=[f"Store() failed: {e!r}"])
        try:
            present = store.conn.execute(
                "SELECT count(*) FROM episodes WHERE id >= ? AND id < ?", (f"{tag}-", f"{tag}.")
            )
            present = present.fetchall()[0][0]
            if present == self.n:
                outcome = "import committed" if r["killed"] else "finished before the kill"
                self.expected.update(eps)
                self.tags[tag] = self.n
            elif present == 0:
                outcome = "import rolled back"
                if not r["killed"] and not failures:
                    failures.append("the import finished but nothing was written")
            else:
                outcome = f"PARTIAL IMPORT ({present} of {self.n})"
                failures.append(f"{present} of {self.n} episodes of an all-or-nothing import")
            failures += integrity(store.conn)
            failures += content_checks(store.conn, self.expected, self.tags, self.rng)
            failures += recall_works(store, self.rng)
        finally:
            store.close()
        return dict(r, outcome=outcome, failures=failures)


class MigrationScenario:
    def __init__(
        self, workdir: str, n: int, rng: random.Random, slow_rows: int = SLOW_ROWS
    ) -> None:
        import apsw
        import numpy as np

        import sqlite_rrf
        from sqlite_rrf.core.migrations import available, migrate

        self.rng = rng
        self.slow_rows = slow_rows
        self.dir = os.path.join(workdir, "migrate")
        os.makedirs(self.dir)
        self.template = os.path.join(self.dir, "v1-template.db")
        self.db = os.path.join(self.dir, "migrate.db")
        conn = apsw.Connection(self.template)
        conn.execute("PRAGMA journal_mode = WAL")
        sqlite_rrf.load(conn)
        migrate(conn, migrations=available()[:1])
        eps = [episode("crashm0", i, rng) for i in range(n)]
        with conn:
            conn.execute("INSERT INTO rrf_meta VALUES ('embedding_dim', ?)", (DIM,))
            conn.executemany(
                "INSERT INTO episodes(id, content, embedding, created_at, accessed_at, importance)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                [
                    (
                        e["id"],
                        e["content"],
                        np.asarray(e["embedding"], "<f4").tobytes(),
                        e["created_at"],
                        e["created_at"],
                        e["importance"],
                    )
                    for e in eps
                ],
            )
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        conn.close()
        self.expected = {e["id"]: chash(e["content"]) for e in eps}
        self.tags = {"crashm0": n}
        self.v_old = 1
        self.shipped = len(available())
        self.v_new = self.shipped + 1  # with crash_slow
        self.t_total = self.t_wal = 0.0

    def _fresh(self) -> None:
        remove_db(self.db)
        shutil.copyfile(self.template, self.db)

    def _cmd(self) -> List[str]:
        return [sys.executable, os.path.abspath(__file__), "_migrate", self.db, str(self.slow_rows)]

    def calibrate(self) -> None:
        self._fresh()
        self.t_total, self.t_wal, rc = timed_run(
            self._cmd(), self.db, os.path.join(self.dir, "stderr.txt")
        )
        if rc != 0:
            raise SystemExit(
                f"calibration migration failed with status {rc}: "
                + open(os.path.join(self.dir, "stderr.txt")).read()[-1500:]
            )

    def schema_failures(self, conn: Any, version: int) -> List[str]:
        bad = []
        versions = [
            r[0] for r in conn.execute("SELECT version FROM schema_migrations ORDER BY version")
        ]
        if versions != list(range(1, version + 1)):
            bad.append(f"schema_migrations holds {versions}")
        cols = {r[1] for r in conn.execute("PRAGMA table_info(episodes)")}
        lifecycle = {"strength", "depth", "session_spread", "stability"}
        has_slow = bool(
            conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'crash_slow'").fetchall()
        )
        migrated = conn.execute(
            "SELECT count(*) FROM episodes WHERE kind = 'slow-migrated'"
        ).fetchall()[0][0]
        if version >= 2 and not lifecycle <= cols:
            bad.append(f"version {version} without the lifecycle columns: {sorted(cols)}")
        if version < 2 and lifecycle & cols:
            bad.append(f"version {version} with lifecycle columns {sorted(lifecycle & cols)}")
        if version == self.v_new:
            n = conn.execute("SELECT count(*) FROM crash_slow").fetchall()[0][0]
            idx = conn.execute(
                "SELECT 1 FROM sqlite_master WHERE name = 'crash_slow_pad'"
            ).fetchall()
            if n != self.slow_rows or not idx or migrated != len(self.expected):
                bad.append(
                    f"version {version}: crash_slow has {n} rows, index {bool(idx)}, "
                    f"{migrated} episodes migrated"
                )
        elif has_slow or migrated:
            bad.append(
                f"version {version} with crash_slow's work: table {has_slow}, "
                f"{migrated} episodes migrated"
            )
        return bad

    def once(self, strategy: str) -> Dict[str, Any]:
        import apsw

        from sqlite_rrf.store import Store

        self._fresh()
        r = spawn_and_kill(
            self._cmd(),
            self.db,
            strategy,
            self.t_total,
            self.t_wal,
            self.rng,
            os.path.join(self.dir, "stderr.txt"),
        )
        failures: List[str] = []
        if not r["killed"]:
            if r["rc"] != 0:
                failures.append(f"migration exited {r['rc']}: {r['stderr']}")
            self.t_total = 0.7 * self.t_total + 0.3 * r["t_end"]
        # 1. As the kill left it (a plain connection: a Store would migrate it).
        try:
            conn = apsw.Connection(self.db)
            conn.set_busy_timeout(10_000)
            version = conn.execute("SELECT max(version) FROM schema_migrations").fetchall()[0][0]
        except Exception as e:
            return dict(r, outcome="does not open", failures=[f"open failed: {e!r}"])
        try:
            if version not in range(self.v_old, self.v_new + 1):
                failures.append(f"version {version} after the kill")
            failures += integrity(conn)
            failures += self.schema_failures(conn, version)
            failures += content_checks(conn, self.expected, self.tags, self.rng)
        finally:
            conn.close()
        if r["killed"]:
            outcome = f"killed at version {version}" + (
                " (old)"
                if version == self.v_old
                else " (new)"
                if version == self.v_new
                else " (between)"
            )
        else:
            outcome = "finished before the kill"
            if version != self.v_new:
                failures.append(f"the migration finished at version {version}")
        # 2. A Store opens it and applies the rest.
        try:
            with with_slow_migration(self.slow_rows):
                store = Store(self.db)
        except Exception as e:
            return dict(r, outcome=outcome, failures=failures + [f"Store() failed: {e!r}"])
        try:
            failures += [
                f"after Store(): {f}"
                for f in integrity(store.conn) + self.schema_failures(store.conn, self.v_new)
            ]
            failures += recall_works(store, self.rng)
        finally:
            store.close()
        return dict(r, outcome=outcome, version=version, failures=failures)


# ------------------------------------------------------------------ driver


def run(
    kills: int = 50,
    workdir: str = "build/crash",
    seed: int = 0,
    import_n: int = 3000,
    migrate_n: int = 2000,
    slow_rows: int = SLOW_ROWS,
    quiet: bool = False,
) -> Dict[str, Any]:
    """Kill ``kills`` writers (half imports, half migrations); returns the report."""
    workdir = os.path.abspath(workdir)
    if os.path.isdir(workdir):
        shutil.rmtree(workdir)
    os.makedirs(workdir)
    seed = seed or random.randrange(1, 2**31)
    rng = random.Random(seed)
    t_start = time.time()
    scenarios = {
        "import": ImportScenario(workdir, import_n, rng),
        "migration": MigrationScenario(workdir, migrate_n, rng, slow_rows),
    }
    for sc in scenarios.values():
        sc.calibrate()
    if not quiet:
        print(
            f"crash: {kills} kills, seed {seed}; calibrated: import "
            f"{scenarios['import'].t_total:.2f} s (WAL from "
            f"{scenarios['import'].t_wal:.2f} s), migration "
            f"{scenarios['migration'].t_total:.2f} s (WAL from "
            f"{scenarios['migration'].t_wal:.2f} s)",
            flush=True,
        )
    want = {"import": (kills + 1) // 2, "migration": kills // 2}
    done: Counter = Counter()
    outcomes: Counter = Counter()
    by_strategy: Counter = Counter()
    hot_wal = 0
    failures: List[str] = []
    runs = []
    attempts = 0
    while any(done[k] < want[k] for k in want) and attempts < 4 * kills + 10:
        for name, sc in scenarios.items():
            if done[name] >= want[name]:
                continue
            attempts += 1
            strategy = ("uniform", "wal")[attempts // 2 % 2]
            r = sc.once(strategy)
            r.update(scenario=name, strategy=strategy)
            runs.append(r)
            outcomes[f"{name}: {r['outcome']}"] += 1
            if r["killed"]:
                done[name] += 1
                by_strategy[f"{name}/{strategy}"] += 1
                hot_wal += r["wal_left"] > 0
            for f in r["failures"]:
                failures.append(f"{name} run {len(runs)} ({strategy}, kill at {r['at']} s): {f}")
            if not quiet:
                print(
                    f"  {len(runs):3d} {name:9s} {strategy:7s} "
                    f"{'kill at %.3f s' % r['at'] if r['killed'] else 'no kill':16s} "
                    f"WAL left {r['wal_left']:>9d}  {r['outcome']}"
                    + ("  FAILED: " + "; ".join(r["failures"]) if r["failures"] else ""),
                    flush=True,
                )
    total_kills = sum(done.values())
    if total_kills < kills:
        failures.append(f"only {total_kills} kills in {attempts} attempts")
    report = {
        "kills": total_kills,
        "kills_by_scenario": dict(done),
        "attempts": attempts,
        "kills_by_strategy": dict(by_strategy),
        "kills_leaving_a_hot_wal": hot_wal,
        "outcomes": dict(sorted(outcomes.items())),
        "failures": failures,
        "ok": not failures,
        "seconds": round(time.time() - t_start, 1),
        "seed": seed,
        "import_episodes": import_n,
        "slow_migration_rows": slow_rows,
        "import_db_episodes": len(scenarios["import"].expected),
    }
    if not quiet:
        print_report(report)
    return report


def print_report(r: Dict[str, Any]) -> None:
    print(
        f"kills: {r['kills']} ({', '.join(f'{k} {v}' for k, v in r['kills_by_scenario'].items())}"
        f"; {', '.join(f'{k} {v}' for k, v in r['kills_by_strategy'].items())}) in "
        f"{r['attempts']} runs, {r['seconds']} s; {r['kills_leaving_a_hot_wal']} kills left a "
        "non-empty WAL"
    )
    for k, v in r["outcomes"].items():
        print(f"  {k}: {v}")
    if r["ok"]:
        print(
            "CRASH OK: every database opened, passed the integrity checks and held exactly "
            "the committed episodes"
        )
    else:
        print("CRASH FAILED:")
        for f in r["failures"]:
            print("  - " + f)


def main(argv: Optional[List[str]] = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["_migrate"]:
        return child_migrate(argv[1], int(argv[2]))
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--kills", type=int, default=int(os.environ.get("CRASH_RUNS", 50)))
    p.add_argument("--workdir", default="build/crash")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--import-episodes", type=int, default=3000, dest="import_n")
    p.add_argument(
        "--slow-rows",
        type=int,
        default=SLOW_ROWS,
        dest="slow_rows",
        help=f"rows the slow extra migration writes (default {SLOW_ROWS})",
    )
    p.add_argument("--json", help="also write the report to this file")
    args = p.parse_args(argv)
    report = run(args.kills, args.workdir, args.seed, args.import_n, slow_rows=args.slow_rows)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(report, f, indent=2)
    return 0 if report["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
