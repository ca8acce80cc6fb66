"""Many tenants, one server: ``sqlite-rrf serve --dir DIR --http PORT`` with one
memory file per tenant, asked by the MCP SDK's streamable-HTTP client.

    .venv/bin/python tests/bench/bench_tenants.py [--tenants 100] [--clients 3,5,10]
                                                  [--requests 30] [--model PATH]

The tenants: the SciFact corpus (5,183 abstracts) dealt round-robin into ``--tenants``
files (about 52 episodes each at 100), each abstract with its precomputed all-MiniLM-L6-v2
embedding (``corpus.minilm.npy``), the model bound to every file beforehand as a served
memory has it. The queries: SciFact test claims, embedded by the server's model (``--model``
or ``$SQLITE_RRF_MODEL``; required).

1. **Time to first answer**, server started with ``--max-open`` = the number of tenants (so
   none is closed): for each tenant in turn, one client (this process) opens a session
   (``initialize``) and calls ``recall``: *cold* (the tenant's endpoint built and its store
   opened by this call), then the same again in a new session (*warm*: endpoint and store
   open), and a second ``recall`` in that session (*call*: the tool call alone). p50/p90
   over the tenants. After each tenant the server's RSS (``VmRSS``) and its open files
   under DIR (``/proc/PID/fd``) are read: the table shows them at 0, 1, 10, 25, 50 and 100
   open stores.
2. **Requests per second**: C client processes at once (``--clients``), each ``--requests``
   recalls on tenants drawn uniformly at random (seeded), one session per tenant,
   initialized before the start signal (only the recalls are timed); the rate is all
   recalls over the wall time from the start signal to the last answer, with each
   recall's p50/p90. Run twice: every store open (``--max-open`` = tenants), and
   with the default ``--max-open`` (:data:`sqlite_rrf.serve.MAX_OPEN_STORES`), where a
   request for a closed tenant opens its store and closes the least recently used.

The clients run on the same machine as the server (on a 2-core machine they take CPU from
it). Writes ``tests/bench/out/tenants.json``. A measurement, not a test: exit status 0.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import signal
import socket
import subprocess
import sys
import tempfile
import time
from typing import Any, Dict, List, Optional

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
SCIFACT = os.environ.get(
    "SQLITE_RRF_SCIFACT", os.path.join(os.path.dirname(ROOT), "shared", "data", "scifact")
)
OUT = os.path.join(HERE, "out")
OPEN_POINTS = (0, 1, 10, 25, 50, 100)


def pct(xs: List[float], q: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, int(round(q * (len(s) - 1))))] if s else float("nan")


def claims(n: int) -> List[str]:
    """The first ``n`` SciFact test claims."""
    order: List[str] = []
    with open(os.path.join(SCIFACT, "qrels", "test.tsv"), encoding="utf-8") as f:
        next(f)
        for line in f:
            qid = line.split("\t")[0]
            if qid not in order:
                order.append(qid)
    text = {}
    with open(os.path.join(SCIFACT, "queries.jsonl"), encoding="utf-8") as f:
        for line in f:
            q = json.loads(line)
            text[q["_id"]] = q["text"]
    return [text[q] for q in order if q in text][:n]


def build(directory: str, tenants: int, model: str) -> int:
    """The tenants' files; how many episodes in all."""
    import numpy as np

    from sqlite_rrf.embedding.embedder import Embedder
    from sqlite_rrf.store import Store

    ids = json.load(open(os.path.join(SCIFACT, "corpus.minilm.ids.json"), encoding="utf-8"))
    vecs = np.load(os.path.join(SCIFACT, "corpus.minilm.npy")).astype(np.float32)
    row = {d: i for i, d in enumerate(ids)}
    docs = []
    with open(os.path.join(SCIFACT, "corpus.jsonl"), encoding="utf-8") as f:
        for line in f:
            d = json.loads(line)
            if d["_id"] in row:
                docs.append((d["_id"], f"{d['title']} {d['text']}", vecs[row[d["_id"]]]))
    emb = Embedder(model)
    try:
        for t in range(tenants):
            with Store(os.path.join(directory, f"tenant-{t:03d}.db")) as s:
                s.attach_embedder(emb)
                s.add_many(
                    [dict(id=i, content=c, embedding=v, scope="") for i, c, v in docs[t::tenants]]
                )
                s.attach_embedder(None)
    finally:
        emb.close()
    return len(docs)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """``sqlite-rrf serve --dir DIR --http PORT [--max-open N]``."""

    def __init__(self, directory: str, env: Dict[str, str], max_open: Optional[int]) -> None:
        self.port = free_port()
        self.directory = directory
        argv = [
            sys.executable,
            "-m",
            "sqlite_rrf",
            "serve",
            "--dir",
            directory,
            "--http",
            str(self.port),
        ] + (["--max-open", str(max_open)] if max_open else [])
        self.proc = subprocess.Popen(
            argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
        )
        deadline = time.time() + 120
        while True:
            with (
                contextlib.suppress(OSError),
                socket.create_connection(("127.0.0.1", self.port), timeout=1),
            ):
                break
            if self.proc.poll() is not None or time.time() > deadline:
                raise SystemExit(f"the server did not start: {self.proc.stderr.read()!r}")
            time.sleep(0.1)

    def rss_mb(self) -> float:
        with open(f"/proc/{self.proc.pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
        return float("nan")

    def files(self) -> int:
        n = 0
        fd_dir = f"/proc/{self.proc.pid}/fd"
        for fd in os.listdir(fd_dir):
            with contextlib.suppress(OSError):
                n += os.readlink(os.path.join(fd_dir, fd)).startswith(self.directory + "/")
        return n

    def fds(self) -> int:
        return len(os.listdir(f"/proc/{self.proc.pid}/fd"))

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.proc.stderr.close()


def _client_imports() -> None:
    """The SDK client's modules, imported before anything is timed."""
    global httpx2, ClientSession, streamable_http_client
    import httpx2
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client


@contextlib.asynccontextmanager
async def session(url: str) -> Any:
    async with httpx2.AsyncClient(timeout=300) as http:
        async with streamable_http_client(url, http_client=http) as (read, write):
            async with ClientSession(read, write) as s:
                await s.initialize()
                yield s


async def recall(s: Any, query: str) -> None:
    r = await s.call_tool("recall", {"query": query, "limit": 5})
    if r.is_error:
        raise SystemExit(f"recall failed: {r.content[0].text}")


async def first_answers(srv: Server, tenants: int, queries: List[str]) -> Dict[str, Any]:
    """Phase 1: cold, warm and call latencies per tenant; RSS and files by open stores."""
    _client_imports()
    cold, warm, call, points = [], [], [], []
    points.append({"open": 0, "rss_mb": srv.rss_mb(), "files": srv.files(), "fds": srv.fds()})
    for t in range(tenants):
        url = f"http://127.0.0.1:{srv.port}/t/tenant-{t:03d}/mcp"
        q = queries[t % len(queries)]
        t0 = time.perf_counter()
        async with session(url) as s:
            await recall(s, q)
            cold.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        async with session(url) as s:
            await recall(s, queries[(t + 1) % len(queries)])
            warm.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            await recall(s, queries[(t + 2) % len(queries)])
            call.append(time.perf_counter() - t0)
        if t + 1 in OPEN_POINTS:
            points.append(
                {"open": t + 1, "rss_mb": srv.rss_mb(), "files": srv.files(), "fds": srv.fds()}
            )
    ms = lambda xs: {"p50": 1000 * pct(xs, 0.5), "p90": 1000 * pct(xs, 0.9)}  # noqa: E731
    return {"cold": ms(cold), "warm": ms(warm), "call": ms(call), "by_open": points}


def client_main(argv: List[str]) -> None:
    """A throughput client: ``client PORT TENANTS REQUESTS SEED BARRIER NAME``."""
    port, tenants, requests, seed = map(int, argv[:4])
    barrier, name = argv[4], argv[5]
    _client_imports()
    queries = claims(300)
    rng = random.Random(seed)
    plan = [(rng.randrange(tenants), rng.choice(queries)) for _ in range(requests)]

    async def main() -> Dict[str, Any]:
        lat: List[float] = []
        async with contextlib.AsyncExitStack() as stack:
            sessions: Dict[int, Any] = {}
            for t, _ in plan:  # initialized before the start: only recalls are timed
                if t not in sessions:
                    sessions[t] = await stack.enter_async_context(
                        session(f"http://127.0.0.1:{port}/t/tenant-{t:03d}/mcp")
                    )
            open(os.path.join(barrier, name), "w").close()
            while not os.path.exists(os.path.join(barrier, "go")):
                await asyncio.sleep(0.01)
            start = time.time()
            for t, q in plan:
                t0 = time.perf_counter()
                await recall(sessions[t], q)
                lat.append(time.perf_counter() - t0)
            end = time.time()
        return {"start": start, "end": end, "lat": lat}

    print(json.dumps(asyncio.run(main())))


def throughput(
    srv: Server, tenants: int, clients: int, requests: int, env: Dict[str, str]
) -> Dict[str, Any]:
    """Phase 2: ``clients`` processes at once, ``requests`` recalls each."""
    with tempfile.TemporaryDirectory() as barrier:
        procs = [
            subprocess.Popen(
                [
                    sys.executable,
                    __file__,
                    "client",
                    str(srv.port),
                    str(tenants),
                    str(requests),
                    str(1000 * clients + c),
                    barrier,
                    f"c{c}",
                ],
                env=env,
                stdout=subprocess.PIPE,
            )
            for c in range(clients)
        ]
        while not all(os.path.exists(os.path.join(barrier, f"c{c}")) for c in range(clients)):
            time.sleep(0.05)
        go = time.time()
        open(os.path.join(barrier, "go"), "w").close()
        outs = [json.loads(p.communicate()[0]) for p in procs]
    end = max(o["end"] for o in outs)
    lat = [x for o in outs for x in o["lat"]]
    return {
        "clients": clients,
        "requests": len(lat),
        "seconds": end - go,
        "per_s": len(lat) / (end - go),
        "p50_ms": 1000 * pct(lat, 0.5),
        "p90_ms": 1000 * pct(lat, 0.9),
        "rss_mb": srv.rss_mb(),
        "files": srv.files(),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tenants", type=int, default=100)
    ap.add_argument("--clients", default="3,5,10")
    ap.add_argument("--requests", type=int, default=30, help="recalls per client")
    ap.add_argument("--model", default=os.environ.get("SQLITE_RRF_MODEL"))
    args = ap.parse_args()
    if not args.model:
        raise SystemExit("--model PATH or $SQLITE_RRF_MODEL: the server embeds the queries")
    from sqlite_rrf.serve import MAX_OPEN_STORES

    clients = [int(c) for c in args.clients.split(",")]
    env = dict(os.environ, SQLITE_RRF_MODEL=args.model)
    queries = claims(300)
    result: Dict[str, Any] = {"tenants": args.tenants, "load_before": os.getloadavg()}
    with tempfile.TemporaryDirectory() as directory:
        t0 = time.time()
        result["episodes"] = build(directory, args.tenants, args.model)
        result["build_s"] = time.time() - t0
        print(
            f"{args.tenants} tenants, {result['episodes']} SciFact abstracts "
            f"(~{result['episodes'] // args.tenants} each), built in "
            f"{result['build_s']:.1f} s; load {os.getloadavg()[0]:.1f}",
            flush=True,
        )
        srv = Server(directory, env, max_open=args.tenants)
        try:
            result["first"] = asyncio.run(first_answers(srv, args.tenants, queries))
            result["all_open"] = [
                throughput(srv, args.tenants, c, args.requests, env) for c in clients
            ]
        finally:
            srv.stop()
        srv = Server(directory, env, max_open=None)
        try:
            result["default_max_open"] = MAX_OPEN_STORES
            result["lru"] = [throughput(srv, args.tenants, c, args.requests, env) for c in clients]
        finally:
            srv.stop()
    result["load_after"] = os.getloadavg()
    first = result["first"]
    print(
        f"\ntime to first answer (new session: initialize + recall), ms over {args.tenants} tenants"
    )
    print("| case | p50 | p90 |\n| --- | ---: | ---: |")
    for case, what in (
        ("cold", "cold: endpoint built, store opened"),
        ("warm", "warm: endpoint and store open"),
        ("call", "a recall in an open session"),
    ):
        print(f"| {what} | {first[case]['p50']:.1f} | {first[case]['p90']:.1f} |")
    print("\nthe server by open stores (model loaded once)")
    print("| open stores | RSS MB | files under DIR | fds |\n| ---: | ---: | ---: | ---: |")
    for p in first["by_open"]:
        print(f"| {p['open']} | {p['rss_mb']:.1f} | {p['files']} | {p['fds']} |")
    print(f"\nrequests/s, {args.requests} recalls a client on uniformly random tenants")
    print(
        "| clients | stores kept open | recalls/s | p50 ms | p90 ms | RSS MB |\n"
        "| ---: | --- | ---: | ---: | ---: | ---: |"
    )
    for label, rows in (
        (f"all {args.tenants}", result["all_open"]),
        (f"--max-open {MAX_OPEN_STORES} (default)", result["lru"]),
    ):
        for r in rows:
            print(
                f"| {r['clients']} | {label} | {r['per_s']:.1f} | {r['p50_ms']:.1f} | "
                f"{r['p90_ms']:.1f} | {r['rss_mb']:.1f} |"
            )
    print(
        f"\nload average before {result['load_before'][0]:.1f}, after "
        f"{result['load_after'][0]:.1f} ({os.cpu_count()} cores)"
    )
    os.makedirs(OUT, exist_ok=True)
    with open(os.path.join(OUT, "tenants.json"), "w", encoding="utf-8") as f:
        json.dump(result, f, indent=1)
    return 0


if __name__ == "__main__":
    if sys.argv[1:2] == ["client"]:
        client_main(sys.argv[2:])
        sys.exit(0)
    sys.exit(main())
