"""End-to-end latency of ``sqlite-rrf hook DB`` per prompt, process start included, with
and without a warm server, and through Claude Code's HTTP hook.

    .venv/bin/python tests/bench/bench_hook.py [--sizes 10000,100000] [--runs 20]
                                               [--server-sizes 1000000] [--model PATH]

For each size N (bench_recall's cached databases: SciFact rows and noise, embeddings of
all-MiniLM-L6-v2's dimension; built with its builder when missing, never by embedding),
a private copy in a temporary directory, maintained first (``Store.maintain``: the codes
the builder left pending), and the model (``--model`` or
``$SQLITE_RRF_MODEL``; without one the hook recalls with BM25, recency and access). Each
run is a new ``sqlite-rrf hook DB`` process (the console script, as an agent host runs
it), a SciFact test claim as the prompt on stdin, a new session each time, timed from
process start to exit, wall clock and CPU (the child's user + system time), Python's
bytecode cache on as in an installed package (``PYTHONDONTWRITEBYTECODE`` is dropped
from the children's environment). The cases,
interleaved run by run so that the machine's load falls on all alike:

- ``python3 -c pass``: the baseline, the same interpreter;
- ``cold``: no server (``--no-server``): the hook opens the database and loads the model;
- ``server``: ``sqlite-rrf serve DB`` running (started once, warm; not timed): the hook
  only hands the prompt over its Unix socket;
- ``http``: Claude Code's ``"type": "http"`` hook, no process per prompt: the same
  payload POSTed (a new connection each time, from this running process, as the host
  posts it) to the same server's ``/hook`` (``--http``), the same options (``?scope=*``);
  its CPU is the server's, not counted in the CPU column;
- ``cold, lock held`` and ``server, lock held``: the same while another process holds the
  database's write lock (``BEGIN IMMEDIATE`` and a written row, never committed).

Reports p50 and p90 (ms), each case's p50 as a ratio to ``python3 -c pass``'s p50 in the
same run, and the mean CPU per prompt. Then, for ``--server-sizes`` (default the sizes
and 1,000,000), the recall in the warm server alone: the socket round trip of a client
that is already running (the server's default recall: embed the prompt, the statement,
render), p50/p90 over the same prompts.

Targets: with the server and the model, p50 <= 2.5x ``python3 -c pass``;
without a server, <= 240 ms of CPU; under a held write lock, the same as without one.
Exit status 0 even when a target is missed (a measurement, not a test).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from typing import Dict, List, Optional, Tuple

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import bench_recall as br
import bench_scale as bs

CASES = (
    "python3 -c pass",
    "cold",
    "server",
    "http",
    "cold, lock held",
    "server, lock held",
    "http, lock held",
)


def pct(xs: List[float], q: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, int(round(q * (len(s) - 1))))]


class Child:
    """CPU time of reaped children, from the rusage deltas."""

    def __init__(self) -> None:
        r = resource.getrusage(resource.RUSAGE_CHILDREN)
        self.t = r.ru_utime + r.ru_stime

    def lap(self) -> float:
        r = resource.getrusage(resource.RUSAGE_CHILDREN)
        t = r.ru_utime + r.ru_stime
        dt, self.t = t - self.t, t
        return dt


def timed(
    argv: List[str], stdin: bytes, env: Dict[str, str], clock: Child
) -> Tuple[float, float, bytes]:
    clock.lap()
    t = time.perf_counter()
    p = subprocess.run(argv, input=stdin, capture_output=True, env=env)
    wall = time.perf_counter() - t
    cpu = clock.lap()
    if p.returncode != 0 or b"sqlite-rrf hook:" in p.stderr:
        raise SystemExit(f"{argv} failed ({p.returncode}): {p.stderr.decode()[-2000:]}")
    return wall, cpu, p.stdout


def posted(port: int, body: bytes) -> Tuple[float, bytes]:
    """The HTTP hook's POST, timed as the host sees it: connect, send, read the answer."""
    import http.client

    t = time.perf_counter()
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        c.request("POST", "/hook?scope=*", body=body, headers={"Content-Type": "application/json"})
        r = c.getresponse()
        out = r.read()
    finally:
        c.close()
    wall = time.perf_counter() - t
    if r.status != 200:
        raise SystemExit(f"the HTTP hook answered {r.status}: {out[:2000]!r}")
    return wall, out


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(
    db: str, sock: str, env: Dict[str, str], port: Optional[int] = None
) -> subprocess.Popen:
    from sqlite_rrf.hook import ask_server

    http = ["--http", str(port)] if port else []
    proc = subprocess.Popen(
        [
            os.path.join(os.path.dirname(sys.executable), "sqlite-rrf"),
            "serve",
            db,
            "--socket",
            sock,
            *http,
        ],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    deadline = time.time() + 300
    while ask_server(sock, {"v": 1, "op": "ping"}, timeout=2) is None:
        if proc.poll() is not None:
            raise SystemExit(f"the server did not start: {proc.stderr.read().decode()}")
        if time.time() > deadline:
            proc.kill()
            raise SystemExit("the server did not start in 300 s")
        time.sleep(0.2)
    return proc


def stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def lock_holder(db: str) -> subprocess.Popen:
    """Another process holding the write lock: BEGIN IMMEDIATE and a row written, never
    committed, until it is killed."""
    code = (
        "import apsw, sys, time\n"
        f"c = apsw.Connection({db!r})\n"
        "c.execute('BEGIN IMMEDIATE')\n"
        "c.execute(\"INSERT OR REPLACE INTO rrf_meta VALUES ('bench_hook_lock', 1)\")\n"
        "print('held', flush=True)\n"
        "time.sleep(3600)\n"
    )
    p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE)
    assert p.stdout.readline().strip() == b"held"
    return p


def private_db(n: int, tmp: str, name: str) -> Tuple[str, str]:
    """A private copy of bench_recall's database of ``n`` episodes, maintained (its sign
    codes computed and packed, as a Store's writes leave them: the builder writes
    without a Store, so every code is pending in the cache)."""
    from sqlite_rrf.store import Store

    src, how = bs.cached_db(n, bs.SEED)
    db = os.path.join(tmp, f"{name}_{n}.db")
    bs.private_copy(src, db)
    with Store(db) as s:
        s.maintain()
        s.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return db, how


def child_env() -> Dict[str, str]:
    """The environment of the processes measured: this one's, with Python's bytecode
    cache on (an installed package has its modules compiled; with
    PYTHONDONTWRITEBYTECODE set and a changed source, every process would compile them
    again)."""
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def prompts(n: int) -> List[str]:
    return [text for _, text, _ in br.load_queries(n)]


def bench_size(n: int, args: argparse.Namespace, tmp: str, texts: List[str]) -> dict:
    db, how = private_db(n, tmp, "hook")
    env = child_env()
    env.pop("SQLITE_RRF_TOKEN", None)
    if args.model:
        env["SQLITE_RRF_MODEL"] = args.model
    else:
        env.pop("SQLITE_RRF_MODEL", None)
        env.update(HF_HUB_OFFLINE="1")
    script = os.path.join(os.path.dirname(sys.executable), "sqlite-rrf")
    sock = os.path.join(tmp, f"s{n}.sock")
    # one cold run first: the open check and the model's fingerprint cache, as after any
    # first prompt
    payload0 = json.dumps({"prompt": texts[0], "session_id": "warm", "cwd": tmp}).encode()
    clock = Child()
    timed([script, "hook", db, "--scope", "*", "--no-server"], payload0, env, clock)
    port = free_port()
    server = start_server(db, sock, env, port)
    deadline = time.time() + 60
    while True:  # the HTTP side starts after the socket
        try:
            posted(port, payload0)
            break
        except (OSError, SystemExit):
            if time.time() > deadline:
                raise
            time.sleep(0.2)
    times: Dict[str, List[float]] = {c: [] for c in CASES}
    cpus: Dict[str, List[float]] = {c: [] for c in CASES}
    same = True
    try:
        for locked in (False, True):
            holder = lock_holder(db) if locked else None
            try:
                for i in range(args.runs):
                    text = texts[(i + (args.runs if locked else 0)) % len(texts)]
                    payload = json.dumps(
                        {"prompt": text, "cwd": tmp, "session_id": f"bench-{time.time_ns()}"}
                    ).encode()
                    order = (["python3 -c pass"] if not locked else []) + (
                        ["cold", "server", "http"]
                        if not locked
                        else ["cold, lock held", "server, lock held", "http, lock held"]
                    )
                    order = order[i % len(order) :] + order[: i % len(order)]
                    outs = {}
                    for case in order:
                        if case.startswith("http"):
                            w, out = posted(port, payload)
                            times[case].append(w)
                            outs[case] = out
                            continue
                        if case == "python3 -c pass":
                            argv = [sys.executable, "-c", "pass"]
                        elif case.startswith("cold"):
                            argv = [script, "hook", db, "--scope", "*", "--no-server"]
                        else:
                            argv = [script, "hook", db, "--scope", "*", "--socket", sock]
                        w, c, out = timed(argv, payload, env, clock)
                        times[case].append(w)
                        cpus[case].append(c)
                        outs[case] = out
                    if not locked:
                        same &= outs["cold"].split(b"\n")[1:] == outs["server"].split(b"\n")[1:]
                        same &= outs["cold"].split(b"\n")[1:] == as_markdown(outs["http"])[1:]
            finally:
                if holder is not None:
                    holder.kill()
                    holder.wait()
    finally:
        stop(server)
    base = statistics_p50(times["python3 -c pass"])
    rows = {
        c: {
            "p50_ms": statistics_p50(times[c]) * 1000,
            "p90_ms": pct(times[c], 0.9) * 1000,
            "ratio": statistics_p50(times[c]) / base,
            "cpu_ms": sum(cpus[c]) / len(cpus[c]) * 1000 if cpus[c] else None,
        }
        for c in CASES
        if times[c]
    }
    bs.remove_db(db)
    return {"n": n, "source": how, "runs": args.runs, "cases": rows, "same_output": same}


def as_markdown(answer: bytes) -> List[bytes]:
    """The HTTP hook's answer (hookSpecificOutput JSON, or empty) as the command hook's
    Markdown lines, to compare the two."""
    if not answer:
        return [b""]
    text = json.loads(answer)["hookSpecificOutput"]["additionalContext"]
    return text.encode("utf-8").split(b"\n")


def statistics_p50(xs: List[float]) -> float:
    import statistics

    return statistics.median(xs)


def bench_server_recall(n: int, args: argparse.Namespace, tmp: str, texts: List[str]) -> dict:
    """The warm server's recall alone: a running client's socket round trip."""
    from sqlite_rrf.hook import ask_server

    db, how = private_db(n, tmp, "server")
    env = child_env()
    if args.model:
        env["SQLITE_RRF_MODEL"] = args.model
    sock = os.path.join(tmp, f"r{n}.sock")
    server = start_server(db, sock, env)
    walls = []
    try:
        req = {
            "v": 1,
            "op": "hook",
            "db": os.path.realpath(db),
            "scope": None,
            "max_chars": 400,
            "max_total": 6000,
            "format": "markdown",
            "topic_gate": False,
        }
        for i, text in enumerate(texts[:3] + texts):  # 3 warm-up prompts
            t = time.perf_counter()
            ans = ask_server(sock, dict(req, prompt=text, session=f"b{i}"), timeout=60)
            dt = time.perf_counter() - t
            if not ans or not ans.get("ok"):
                raise SystemExit(f"server recall failed: {ans}")
            if i >= 3:
                walls.append(dt)
    finally:
        stop(server)
        bs.remove_db(db)
    return {
        "n": n,
        "source": how,
        "p50_ms": statistics_p50(walls) * 1000,
        "p90_ms": pct(walls, 0.9) * 1000,
        "prompts": len(walls),
    }


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="10000,100000")
    ap.add_argument(
        "--server-sizes",
        default=None,
        dest="server_sizes",
        help="sizes for the warm server's recall alone (default: --sizes and 1000000)",
    )
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--model", default=os.environ.get("SQLITE_RRF_MODEL"))
    args = ap.parse_args(argv)
    if args.model and not os.path.isfile(args.model):
        raise SystemExit(f"--model: {args.model} is not a file")
    sizes = [int(s) for s in args.sizes.split(",") if s]
    server_sizes = (
        [int(s) for s in args.server_sizes.split(",") if s]
        if args.server_sizes is not None
        else sorted(set(sizes) | {1_000_000})
    )
    texts = prompts(max(args.runs * 2, 40))
    tmp = tempfile.mkdtemp(prefix="bench-hook-")
    model = os.path.basename(args.model) if args.model else "no model"
    print(
        f"bench_hook: {model}; {args.runs} prompts per case (SciFact test claims); "
        f"{os.cpu_count()} CPUs; load {os.getloadavg()[0]:.1f}",
        flush=True,
    )
    results = []
    try:
        for n in sizes:
            r = bench_size(n, args, tmp, texts)
            results.append(r)
            print(
                f"\nN = {n:,} ({r['source']}); the server's output "
                f"{'equals' if r['same_output'] else 'DIFFERS FROM'} the cold hook's"
            )
            print("| case | p50 ms | p90 ms | p50 / python3 -c pass | CPU ms |")
            print("| --- | ---: | ---: | ---: | ---: |")
            for case, row in r["cases"].items():
                cpu = "server's" if row["cpu_ms"] is None else f"{row['cpu_ms']:.0f}"
                print(
                    f"| {case} | {row['p50_ms']:.1f} | {row['p90_ms']:.1f} | "
                    f"{row['ratio']:.2f}x | {cpu} |",
                    flush=True,
                )
        warm = []
        for n in server_sizes:
            r = bench_server_recall(n, args, tmp, texts)
            warm.append(r)
        print("\nthe warm server's recall alone (a running client's socket round trip)")
        print("| N | p50 ms | p90 ms |")
        print("| ---: | ---: | ---: |")
        for r in warm:
            print(f"| {r['n']:,} | {r['p50_ms']:.1f} | {r['p90_ms']:.1f} |")
        os.makedirs(bs.OUT_DIR, exist_ok=True)
        with open(os.path.join(bs.OUT_DIR, "hook.json"), "w", encoding="utf-8") as f:
            json.dump({"model": model, "hook": results, "server_recall": warm}, f, indent=2)
        print("\ntargets (issue 21):")
        for r in results:
            c = r["cases"]
            print(
                f"  N={r['n']:,}: server p50 {c['server']['ratio']:.2f}x python3 -c pass "
                f"(<= 2.5x: {'met' if c['server']['ratio'] <= 2.5 else 'missed'}); cold CPU "
                f"{c['cold']['cpu_ms']:.0f} ms (<= 240 ms: "
                f"{'met' if c['cold']['cpu_ms'] <= 240 else 'missed'}); lock held: cold "
                f"{c['cold, lock held']['p50_ms'] / c['cold']['p50_ms']:.2f}x, server "
                f"{c['server, lock held']['p50_ms'] / c['server']['p50_ms']:.2f}x of "
                "without"
            )
            print(
                f"  N={r['n']:,}: the HTTP hook p50 {c['http']['p50_ms']:.1f} ms "
                f"({c['http']['ratio']:.2f}x python3 -c pass; lock held "
                f"{c['http, lock held']['p50_ms'] / c['http']['p50_ms']:.2f}x of without)"
            )
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
