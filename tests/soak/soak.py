#!/usr/bin/env python3
"""Concurrency soak of the memory store (``make soak``).

Several processes work on one WAL database through :class:`sqlite_rrf.store.Store`
for a fixed time:

* **writers** add, add_many, upsert (existing and new ids), delete (existing and
  missing ids) episodes with small random embeddings (``embedding=``, no model), plus
  operations that must fail and leave nothing behind: an ``add`` of an id that exists
  (StoreError before the transaction), batches that race other writers for a shared
  id ``c-<bucket>`` (one wins; the losers raise, often inside the transaction after
  some rows were inserted, and must leave none of their rows), and large batches
  cancelled from a timer thread with ``conn.interrupt()`` (most finish first: SQLite
  only interrupts a running statement). Each writer owns its other ids
  (``w<N>-<k>``), logs ``about`` before every call and ``ack`` (after the call
  returned) or ``err`` (it raised) to its own JSONL log, flushed per line. Every
  content version carries a unique token (``tokw<N>s<seq>n<j>``).
* **readers** recall continuously with normal and hostile query text, random
  ``qvec`` (or none), random pools and profiles, ``touch=True`` most of the time (so
  they write too), and remember every (id, content hash) they were shown.

All processes open the store at the same moment on a database that does not exist
yet, so creation, the WAL switch and the migrations race as well.

Afterwards the orchestrator checks: every child exited 0; no ``apsw.BusyError`` (or
any unexpected exception) reached a caller; ``PRAGMA integrity_check`` is ok; FTS5's
``integrity-check`` passes, also with ``rank = 1`` (against the content table); the
episodes are exactly the writers' acknowledged state (each id once, with its last
acknowledged content; deleted ids absent); no version from an operation that raised
is visible; the FTS index agrees with ``episodes`` (a MATCH of each episode's token
finds exactly its row, and the index's ``tokw*`` terms, read with ``fts5vocab``,
are exactly the live tokens, each in one row); readers never saw a version that
was rolled back; and the total ``access_count`` does not exceed the hits the readers'
committed touching recalls returned.

    python tests/soak/soak.py --seconds 60 --writers 3 --readers 2 --workdir build/soak

prints the figures (operations per second per kind) and the checks, writes them as
JSON with ``--json FILE``, and exits 1 if any check failed.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import shutil
import subprocess
import sys
import threading
import time
import traceback
from collections import Counter, defaultdict
from typing import Any, Dict, List, Optional, Tuple

DIM = 16
VOCAB = (
    "memory agent database sqlite postgres vector index recall episode token "
    "credentials vault deploy server latency cache kernel python rust query rank "
    "fusion window journal checkpoint writer reader lock busy timeout crash"
).split()
UNICODE_WORDS = ("naïve", "Straße", "日本語", "данные", "café", "ελληνικά", "🙂", "عربى")
HOSTILE_QUERIES = [
    "",
    " ",
    "\t\n",
    '"',
    '""',
    "'",
    "''",
    "*",
    "-",
    "^",
    ":",
    "(",
    ")",
    "((((",
    "))))",
    "AND",
    "OR",
    "NOT",
    "NEAR",
    "AND OR NOT NEAR",
    "NEAR(memory agent, 2)",
    "memory AND",
    "OR recall",
    "NOT vector",
    "memory*",
    "^memory",
    "-memory",
    "content:memory",
    "episodes_fts:vault",
    "{content}: memory",
    "'; DROP TABLE episodes; --",
    '" OR 1=1 --',
    "memory\x00agent",
    "\x00",
    "\x00\x00\x00",
    "🙂🙂🙂",
    "\ufeffmemory",
    "\u202eevil\u202c",
    "a" * 10_000,
    ("memory " * 3000).strip(),
    "tokw0s1n0",
    "tokw1s*",
    "x" * 7000 + " memory",
    "%_%",
    "\\",
    "NEAR/3",
    "memory + agent",
    "a-b-c d/e/f",
]
KINDS = (
    "add",
    "add_many",
    "upsert",
    "upsert_new",
    "delete",
    "delete_missing",
    "add_dup",
    "contested",
    "interrupted",
)
WEIGHTS = (30, 8, 25, 5, 15, 2, 3, 8, 6)
#: Writers race for the ids ``c-<bucket>`` (one bucket per CONTEST_S seconds): each
#: adds one inside a batch of its own new ids; exactly one batch may win, the others
#: must raise with nothing of theirs written.
CONTEST_S = 0.2


def chash(content: str) -> str:
    """Short content hash used in the logs."""
    return hashlib.sha256(content.encode("utf-8")).hexdigest()[:20]


def _busy_errors() -> Tuple[type, ...]:
    import apsw

    return (apsw.BusyError, apsw.LockedError)


def _wait_until(t: float) -> None:
    while True:
        d = t - time.time()
        if d <= 0:
            return
        time.sleep(min(d, 0.05))


def _ready_and_go(args: argparse.Namespace) -> None:
    """Tell the orchestrator this child has imported everything, wait for its go
    file (start time and deadline, the same for every child), then for the start."""
    open(args.go + f".ready-{os.getpid()}", "w").close()
    t_end = time.time() + 300
    while not os.path.exists(args.go):
        if time.time() > t_end:
            raise SystemExit("no go file from the orchestrator")
        time.sleep(0.02)
    with open(args.go, encoding="utf-8") as f:
        go = json.load(f)
    args.start_at, args.deadline = go["start_at"], go["deadline"]
    _wait_until(args.start_at)


# ------------------------------------------------------------------ children


def writer(args: argparse.Namespace) -> int:
    import apsw
    import numpy as np

    from sqlite_rrf.store import Store, StoreError

    rng = random.Random(args.seed)
    nrng = np.random.default_rng(args.seed)
    w = args.index
    log = open(args.log, "w", encoding="utf-8")

    def emit(rec: Dict[str, Any]) -> None:
        log.write(json.dumps(rec, ensure_ascii=False) + "\n")
        log.flush()

    counts: Counter = Counter()
    outcome: Counter = Counter()
    busy = 0
    unexpected: List[str] = []
    _ready_and_go(args)
    t0 = time.time()
    try:
        store = Store(args.db)
    except _busy_errors() as e:
        _summary(args, role="writer", busy=1, unexpected=[f"open: {e!r}"], counts={}, t0=t0)
        return 0
    live: Dict[str, str] = {}  # own id -> hash (acknowledged state)
    op_s = 0.01  # running mean of an operation's duration
    next_id = 0
    seq = 0

    def new_content(seq: int, j: int) -> Tuple[str, str]:
        token = f"tokw{w}s{seq}n{j}"
        words = [rng.choice(VOCAB) for _ in range(rng.randint(3, 14))]
        if rng.random() < 0.1:
            words.append(rng.choice(UNICODE_WORDS))
        if rng.random() < 0.05:
            words.append(rng.choice(['"quoted"', "it's", "a-b", "x:y", "(paren)", "NEAR", "OR"]))
        rng.shuffle(words)
        return f"{token} " + " ".join(words), token

    def emb() -> List[float]:
        v = nrng.standard_normal(DIM)
        return v.tolist()

    while time.time() < args.deadline:
        seq += 1
        kind = rng.choices(KINDS, WEIGHTS)[0]
        if kind in ("upsert", "delete", "add_dup") and not live:
            kind = "add"
        eps: List[List[Any]] = []  # [id, hash or None (delete), token or None]
        call = None
        if kind in ("add", "upsert_new"):
            eid = f"w{w}-{next_id}"
            next_id += 1
            content, tok = new_content(seq, 0)
            eps.append([eid, chash(content), tok])
            vec = emb()
            if kind == "add":
                call = lambda: store.add(  # noqa: E731
                    content,
                    id=eid,
                    embedding=vec,
                    importance=rng.choice(("low", "normal", "high")),
                )
            else:
                call = lambda: store.upsert(content, id=eid, embedding=vec)  # noqa: E731
        elif kind in ("add_many", "interrupted"):
            batch = []
            use_upsert = kind == "interrupted" and bool(live) and rng.random() < 0.3
            if use_upsert:
                eid = rng.choice(sorted(live))
                content, tok = new_content(seq, 0)
                eps.append([eid, chash(content), tok])
                vec = emb()
                call = lambda: store.upsert(content, id=eid, embedding=vec)  # noqa: E731
            else:
                for j in range(rng.randint(2, 8) if kind == "add_many" else rng.randint(20, 80)):
                    eid = f"w{w}-{next_id}"
                    next_id += 1
                    content, tok = new_content(seq, j)
                    eps.append([eid, chash(content), tok])
                    batch.append(
                        dict(
                            id=eid,
                            content=content,
                            embedding=emb(),
                            metadata={"w": w, "seq": seq, "j": j},
                        )
                    )
                call = lambda: store.add_many(batch)  # noqa: E731
        elif kind == "contested":
            batch = []
            n_own = rng.randint(1, 4)
            at = rng.randint(0, n_own)
            for j in range(n_own + 1):
                if j == at:
                    eid = f"c-{int(time.time() / CONTEST_S)}"
                else:
                    eid = f"w{w}-{next_id}"
                    next_id += 1
                content, tok = new_content(seq, j)
                eps.append([eid, chash(content), tok])
                batch.append(dict(id=eid, content=content, embedding=emb()))
            call = lambda: store.add_many(batch)  # noqa: E731
        elif kind == "upsert":
            eid = rng.choice(sorted(live))
            content, tok = new_content(seq, 0)
            eps.append([eid, chash(content), tok])
            vec = emb()
            call = lambda: store.upsert(content, id=eid, embedding=vec)  # noqa: E731
        elif kind == "delete":
            eid = rng.choice(sorted(live))
            eps.append([eid, None, None])
            call = lambda: store.delete(eid)  # noqa: E731
        elif kind == "delete_missing":
            eid = f"w{w}-missing-{seq}"
            eps.append([eid, None, None])
            call = lambda: store.delete(eid)  # noqa: E731
        elif kind == "add_dup":
            eid = rng.choice(sorted(live))
            content, tok = new_content(seq, 0)
            eps.append([eid, chash(content), tok])
            vec = emb()
            call = lambda: store.add(content, id=eid, embedding=vec)  # noqa: E731
        emit({"t": "about", "s": seq, "op": kind, "eps": eps})
        timer = None
        if kind == "interrupted":
            timer = threading.Timer(rng.uniform(0.0, 1.5 * op_s), store.conn.interrupt)
            timer.start()
        t_op = time.perf_counter()
        try:
            ret = call()
        except _busy_errors() as e:
            busy += 1
            emit({"t": "err", "s": seq, "op": kind, "exc": f"{type(e).__name__}: {e}"})
            outcome[f"{kind}:busy"] += 1
        except (StoreError, apsw.InterruptError) as e:
            emit({"t": "err", "s": seq, "op": kind, "exc": f"{type(e).__name__}: {e}"})
            expected = (
                kind in ("add_dup", "contested")
                and isinstance(e, StoreError)
                and "already exists" in str(e)
            ) or (kind == "interrupted" and isinstance(e, apsw.InterruptError))
            if not expected:
                unexpected.append(f"{kind} seq {seq}: {type(e).__name__}: {e}")
            where = (
                ("in_txn" if "UNIQUE constraint" in str(e) else "before_txn")
                if kind == "contested"
                else ""
            )
            outcome[f"{kind}:raised{'_' + where if where else ''}"] += 1
        except Exception as e:
            emit({"t": "err", "s": seq, "op": kind, "exc": f"{type(e).__name__}: {e}"})
            unexpected.append(
                f"{kind} seq {seq}: {type(e).__name__}: {e}\n" + traceback.format_exc(limit=4)
            )
            outcome[f"{kind}:raised"] += 1
        else:
            emit({"t": "ack", "s": seq, "op": kind, "ret": ret if isinstance(ret, bool) else None})
            outcome[f"{kind}:ok"] += 1
            if kind == "add_dup":
                unexpected.append(f"add_dup seq {seq}: adding an existing id did not raise")
            for eid, h, _tok in eps:
                if h is None:
                    existed = eid in live
                    live.pop(eid, None)
                    if ret is not existed:
                        unexpected.append(
                            f"delete {eid} seq {seq}: returned {ret}, expected {existed}"
                        )
                elif not eid.startswith("c-"):
                    live[eid] = h
        finally:
            op_s = 0.9 * op_s + 0.1 * (time.perf_counter() - t_op)
            if timer is not None:
                timer.cancel()
                timer.join()
        counts[kind] += 1
        if len(unexpected) > 50:
            break
    store.close()
    log.close()
    _summary(
        args,
        role="writer",
        busy=busy,
        unexpected=unexpected,
        counts=dict(counts),
        t0=t0,
        outcome=dict(outcome),
    )
    return 0


def reader(args: argparse.Namespace) -> int:
    import numpy as np

    from sqlite_rrf.store import PROFILES, Store

    rng = random.Random(args.seed)
    nrng = np.random.default_rng(args.seed)
    counts: Counter = Counter()
    busy = 0
    unexpected: List[str] = []
    seen: Dict[str, set] = defaultdict(set)
    touched_hits = 0
    _ready_and_go(args)
    t0 = time.time()
    try:
        store = Store(args.db)
    except _busy_errors() as e:
        _summary(args, role="reader", busy=1, unexpected=[f"open: {e!r}"], counts={}, t0=t0)
        return 0
    while time.time() < args.deadline:
        if rng.random() < 0.5:
            query = rng.choice(HOSTILE_QUERIES)
        else:
            query = " ".join(rng.choice(VOCAB) for _ in range(rng.randint(1, 6)))
        touch = rng.random() < args.touch
        qvec = nrng.standard_normal(DIM) if rng.random() < 0.7 else None
        kw: Dict[str, Any] = dict(
            limit=rng.randint(1, 10),
            touch=touch,
            qvec=qvec,
            force=rng.random() < 0.7,
            pool=rng.choice((None, None, "recent", "all")),
            profile=rng.choice((None,) + tuple(PROFILES)),
        )
        kind = "recall_touch" if touch else "recall"
        try:
            res = store.recall(query, **kw)
        except _busy_errors() as e:
            busy += 1
            unexpected.append(f"{kind} {query[:40]!r}: {type(e).__name__}: {e}")
        except Exception as e:
            unexpected.append(
                f"{kind} {query[:40]!r} {kw.get('pool')} {kw.get('profile')}: "
                f"{type(e).__name__}: {e}\n" + traceback.format_exc(limit=4)
            )
        else:
            if res.skipped:
                counts["recall_skipped"] += 1
            for h in res:
                seen[h.id].add(chash(h.content))
            if touch:
                touched_hits += len(res)
        counts[kind] += 1
        if len(unexpected) > 50:
            break
    store.close()
    _summary(
        args,
        role="reader",
        busy=busy,
        unexpected=unexpected,
        counts=dict(counts),
        t0=t0,
        seen={k: sorted(v) for k, v in seen.items()},
        touched_hits=touched_hits,
    )
    return 0


def _summary(args: argparse.Namespace, **kw: Any) -> None:
    kw["elapsed"] = time.time() - kw.pop("t0")
    kw["index"] = args.index
    with open(args.summary, "w", encoding="utf-8") as f:
        json.dump(kw, f)


# ------------------------------------------------------------------ checks


def fts_checks(conn: Any) -> Dict[str, str]:
    """PRAGMA integrity_check and both FTS5 integrity checks: 'ok' or the error."""
    out = {}
    rows = conn.execute("PRAGMA integrity_check").fetchall()
    out["integrity_check"] = "ok" if rows == [("ok",)] else repr(rows[:10])
    for name, sql in (
        ("fts_integrity_check", "INSERT INTO episodes_fts(episodes_fts) VALUES('integrity-check')"),
        (
            "fts_integrity_check_rank1",
            "INSERT INTO episodes_fts(episodes_fts, rank) VALUES('integrity-check', 1)",
        ),
    ):
        try:
            conn.execute(sql)
            out[name] = "ok"
        except Exception as e:
            out[name] = f"{type(e).__name__}: {e}"
    return out


def read_log(path: str) -> List[Dict[str, Any]]:
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def verify(db: str, logs: List[str], readers: List[Dict[str, Any]]) -> Dict[str, Any]:
    import apsw

    checks: Dict[str, Any] = {}
    failures: List[str] = []

    expected: Dict[str, Tuple[str, str]] = {}  # id -> (hash, token) acknowledged last
    attempted: Dict[str, set] = defaultdict(set)  # id -> hashes of every version tried
    failed_versions: Dict[str, set] = defaultdict(set)  # id -> hashes of raised ops
    all_tokens: set = set()
    contested_acks: Counter = Counter()
    acks = errs = dangling = 0
    for path in logs:
        recs = read_log(path)
        about: Dict[int, Dict[str, Any]] = {}
        for r in recs:
            if r["t"] == "about":
                about[r["s"]] = r
                for eid, h, tok in r["eps"]:
                    if h is not None:
                        attempted[eid].add(h)
                        all_tokens.add(tok)
                continue
            a = about.pop(r["s"])
            if r["t"] == "ack":
                acks += 1
                for eid, h, tok in a["eps"]:
                    if eid.startswith("c-"):
                        contested_acks[eid] += 1
                    if h is None:
                        expected.pop(eid, None)
                    else:
                        expected[eid] = (h, tok)
            else:
                errs += 1
                for eid, h, _tok in a["eps"]:
                    if h is not None:
                        failed_versions[eid].add(h)
        dangling += len(about)
    checks["acknowledged_ops"] = acks
    checks["contested_ids_won"] = len(contested_acks)
    twice = [c for c, n in contested_acks.items() if n > 1]
    checks["contested_ids_acknowledged_twice"] = len(twice)
    if twice:
        failures.append(f"{len(twice)} contested ids acknowledged to several writers: {twice[:5]}")
    checks["raised_ops"] = errs
    if dangling:
        failures.append(f"{dangling} 'about' records without ack/err (a writer died mid-call)")

    conn = apsw.Connection(db)
    conn.set_busy_timeout(10_000)
    checks.update(fts_checks(conn))
    for k in ("integrity_check", "fts_integrity_check", "fts_integrity_check_rank1"):
        if checks[k] != "ok":
            failures.append(f"{k}: {checks[k]}")

    rows = conn.execute("SELECT rowid, id, content, access_count FROM episodes").fetchall()
    dup_ids = conn.execute(
        "SELECT id, count(*) FROM episodes GROUP BY id HAVING count(*) > 1"
    ).fetchall()
    if dup_ids:
        failures.append(f"duplicate ids: {dup_ids[:10]}")
    db_state = {eid: (rowid, content) for rowid, eid, content, _ in rows}
    missing = [e for e in expected if e not in db_state]
    extra = [e for e in db_state if e not in expected]
    wrong = [e for e, (h, _) in expected.items() if e in db_state and chash(db_state[e][1]) != h]
    unacked_visible = [
        e for e, (_, c) in db_state.items() if chash(c) in failed_versions.get(e, ())
    ]
    checks.update(
        episodes=len(rows),
        expected_episodes=len(expected),
        missing_acknowledged=len(missing),
        unexpected_present=len(extra),
        wrong_content=len(wrong),
        raised_versions_visible=len(unacked_visible),
    )
    if missing:
        failures.append(f"{len(missing)} acknowledged episodes missing, e.g. {missing[:5]}")
    if extra:
        failures.append(
            f"{len(extra)} episodes present that no acknowledged write left, e.g. {extra[:5]}"
        )
    if wrong:
        failures.append(
            f"{len(wrong)} episodes hold other than their last acknowledged "
            f"content, e.g. {wrong[:5]}"
        )
    if unacked_visible:
        failures.append(
            f"{len(unacked_visible)} versions from operations that raised are "
            f"visible, e.g. {unacked_visible[:5]}"
        )

    # The FTS index against the episodes: each live token finds exactly its row ...
    fts_bad = []
    for eid, (h, tok) in expected.items():
        if eid not in db_state:
            continue
        got = [
            r[0]
            for r in conn.execute(
                "SELECT rowid FROM episodes_fts WHERE episodes_fts MATCH ?", (f'"{tok}"',)
            )
        ]
        if got != [db_state[eid][0]]:
            fts_bad.append((eid, tok, got))
    # ... and the index holds no other token: not of a replaced, deleted or failed version.
    conn.execute("CREATE VIRTUAL TABLE temp.soak_vocab USING fts5vocab(main, episodes_fts, row)")
    vocab = dict(
        conn.execute("SELECT term, doc FROM temp.soak_vocab WHERE term >= 'tokw' AND term < 'tokx'")
    )
    live_tokens = {tok for _h, tok in expected.values()}
    stale = sorted(set(vocab) - live_tokens)
    absent = sorted(live_tokens - set(vocab))
    multi = sorted(t for t, d in vocab.items() if d != 1)
    checks.update(
        fts_match_mismatches=len(fts_bad),
        fts_stale_terms=len(stale),
        fts_missing_terms=len(absent),
        fts_terms_in_several_rows=len(multi),
        versions_written=len(all_tokens),
    )
    if fts_bad:
        failures.append(
            f"{len(fts_bad)} tokens whose MATCH is not exactly their row, e.g. {fts_bad[:3]}"
        )
    if stale:
        failures.append(f"{len(stale)} FTS terms of no live episode, e.g. {stale[:5]}")
    if absent:
        failures.append(f"{len(absent)} live tokens not in the FTS index, e.g. {absent[:5]}")
    if multi:
        failures.append(f"{len(multi)} tokens indexed in more than one row, e.g. {multi[:5]}")

    # Readers saw only versions some writer wrote, never one that was rolled back.
    phantom = dirty = 0
    for rs in readers:
        for eid, hashes in rs.get("seen", {}).items():
            for h in hashes:
                if h not in attempted.get(eid, ()):
                    phantom += 1
                elif h in failed_versions.get(eid, ()):
                    dirty += 1
    checks.update(reader_phantom_versions=phantom, reader_saw_raised_versions=dirty)
    if phantom:
        failures.append(f"readers saw {phantom} (id, content) pairs no writer wrote")
    if dirty:
        failures.append(f"readers saw {dirty} versions of operations that raised")
    touched = sum(rs.get("touched_hits", 0) for rs in readers)
    total_access = sum(r[3] for r in rows)
    checks.update(touched_hits=touched, total_access_count=total_access)
    if total_access > touched:
        failures.append(
            f"access_count total {total_access} exceeds the {touched} hits "
            "touching recalls returned"
        )
    conn.close()
    checks["failures"] = failures
    return checks


# ------------------------------------------------------------------ orchestrator


def run(
    seconds: float = 60.0,
    writers: int = 3,
    readers: int = 2,
    workdir: str = "build/soak",
    seed: int = 0,
    quiet: bool = False,
    touch: float = 0.8,
) -> Dict[str, Any]:
    """Run the soak and the checks; returns the report (``report['ok']``)."""
    if os.path.isdir(workdir):
        shutil.rmtree(workdir)
    os.makedirs(workdir)
    db = os.path.join(workdir, "soak.db")
    seed = seed or random.randrange(1, 2**31)
    go = os.path.join(workdir, "go.json")
    procs = []
    me = os.path.abspath(__file__)
    for role, n in (("_writer", writers), ("_reader", readers)):
        for i in range(n):
            name = f"{role[1:]}-{i}"
            cmd = [
                sys.executable,
                me,
                role,
                "--db",
                db,
                "--index",
                str(i),
                "--seed",
                str(seed * 100 + i + (50 if role == "_reader" else 0)),
                "--go",
                go,
                "--touch",
                str(touch),
                "--log",
                os.path.join(workdir, f"{name}.jsonl"),
                "--summary",
                os.path.join(workdir, f"{name}.summary.json"),
            ]
            err = open(os.path.join(workdir, f"{name}.stderr"), "w")
            procs.append((name, subprocess.Popen(cmd, stderr=err), err))
    if not quiet:
        print(
            f"soak: {writers} writers, {readers} readers, {seconds:g} s on {db} (seed {seed})",
            flush=True,
        )
    failures: List[str] = []
    # Wait until every child has imported its modules, then start them together:
    # every child opens the (new) store at the same moment.
    t_end = time.time() + 120
    while (
        sum(f.startswith("go.json.ready-") for f in os.listdir(workdir)) < len(procs)
        and time.time() < t_end
        and all(p.poll() is None for _n, p, _e in procs)
    ):
        time.sleep(0.05)
    start_at = time.time() + 0.3
    deadline = start_at + seconds
    with open(go + ".tmp", "w", encoding="utf-8") as f:
        json.dump({"start_at": start_at, "deadline": deadline}, f)
    os.replace(go + ".tmp", go)
    for name, p, err in procs:
        try:
            rc = p.wait(timeout=max(0.0, deadline - time.time()) + 120)
        except subprocess.TimeoutExpired:
            p.kill()
            rc = p.wait()
            failures.append(f"{name} did not finish in time (killed)")
        err.close()
        if rc != 0:
            tail = open(os.path.join(workdir, f"{name}.stderr")).read()[-2000:]
            failures.append(f"{name} exited {rc}: {tail}")
    summaries = {}
    for name, _p, _e in procs:
        path = os.path.join(workdir, f"{name}.summary.json")
        if os.path.exists(path):
            with open(path, encoding="utf-8") as f:
                summaries[name] = json.load(f)
        else:
            failures.append(f"{name}: no summary")
    busy = sum(s["busy"] for s in summaries.values())
    unexpected = [f"{n}: {u}" for n, s in summaries.items() for u in s["unexpected"]]
    if busy:
        failures.append(f"{busy} SQLITE_BUSY (apsw.BusyError/LockedError) reached a caller")
    if unexpected:
        failures.append(f"{len(unexpected)} unexpected exceptions: " + " | ".join(unexpected[:5]))
    counts: Counter = Counter()
    outcomes: Counter = Counter()
    for s in summaries.values():
        counts.update(s["counts"])
        outcomes.update(s.get("outcome", {}))
    elapsed = max((s["elapsed"] for s in summaries.values()), default=seconds)
    logs = [os.path.join(workdir, f"writer-{i}.jsonl") for i in range(writers)]
    logs = [p for p in logs if os.path.exists(p)]
    t = time.time()
    checks = verify(db, logs, [s for n, s in summaries.items() if n.startswith("reader")])
    verify_s = time.time() - t
    failures += checks.pop("failures")
    writes = sum(v for k, v in counts.items() if not k.startswith("recall"))
    recalls = counts["recall"] + counts["recall_touch"]
    report = {
        "seconds": seconds,
        "elapsed": round(elapsed, 2),
        "writers": writers,
        "readers": readers,
        "touch": touch,
        "seed": seed,
        "db": db,
        "ops": dict(sorted(counts.items())),
        "ops_per_s": {k: round(v / elapsed, 1) for k, v in sorted(counts.items())},
        "writes_per_s": round(writes / elapsed, 1),
        "recalls_per_s": round(recalls / elapsed, 1),
        "outcomes": dict(sorted(outcomes.items())),
        "busy_escaped": busy,
        "unexpected_exceptions": len(unexpected),
        "checks": checks,
        "verify_s": round(verify_s, 2),
        "failures": failures,
        "ok": not failures,
        "db_bytes": os.path.getsize(db) if os.path.exists(db) else 0,
    }
    if not quiet:
        print_report(report)
    return report


def print_report(r: Dict[str, Any]) -> None:
    print(
        f"duration {r['elapsed']} s; writes {r['writes_per_s']}/s, recalls {r['recalls_per_s']}/s"
    )
    for k, v in r["ops"].items():
        print(f"  {k:>16}: {v:7d}  {r['ops_per_s'][k]:8.1f}/s")
    print("outcomes: " + ", ".join(f"{k} {v}" for k, v in r["outcomes"].items()))
    print(
        f"busy reaching a caller: {r['busy_escaped']}; unexpected exceptions: "
        f"{r['unexpected_exceptions']}"
    )
    for k, v in r["checks"].items():
        print(f"  {k}: {v}")
    print(f"verification {r['verify_s']} s; database {r['db_bytes'] / 1e6:.1f} MB")
    if r["ok"]:
        print("SOAK OK")
    else:
        print("SOAK FAILED:")
        for f in r["failures"]:
            print("  - " + f)


def main(argv: Optional[List[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("role", nargs="?", default="run", choices=("run", "_writer", "_reader"))
    p.add_argument("--seconds", type=float, default=float(os.environ.get("SOAK_SECONDS", 60)))
    p.add_argument("--writers", type=int, default=3)
    p.add_argument("--readers", type=int, default=2)
    p.add_argument("--workdir", default="build/soak")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--touch",
        type=float,
        default=0.8,
        help="fraction of the readers' recalls that touch (write) (default 0.8)",
    )
    p.add_argument("--json", help="also write the report to this file")
    # children
    p.add_argument("--db")
    p.add_argument("--index", type=int, default=0)
    p.add_argument("--go")
    p.add_argument("--log")
    p.add_argument("--summary")
    args = p.parse_args(argv)
    if args.role == "_writer":
        return writer(args)
    if args.role == "_reader":
        return reader(args)
    report = run(
        args.seconds, args.writers, args.readers, args.workdir, args.seed, touch=args.touch
    )
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(report, f, indent=2)
    return 0 if report["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
