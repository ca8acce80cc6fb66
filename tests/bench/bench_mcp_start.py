"""How long ``sqlite-rrf mcp`` takes to answer ``initialize`` over stdio, and its first
tool call, from the moment the host starts the process: through the MCP SDK's own
stdio client, with the real model ($SQLITE_RRF_MODEL), on a fresh memory of a few
episodes, in the same run as ``python -c pass`` (the floor of any Python server).

    .venv/bin/python tests/bench/bench_mcp_start.py [--runs 5] [--pythonpath DIR]

``--pythonpath`` runs the servers from another copy of the package (to compare two
versions in one run); ``--cold`` gives each start an empty cache, so that ``initialize``
waits for the SDK (a first start). Prints the median and the spread of each, in seconds.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List, Tuple

from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client


def _env(pythonpath: str, home: str = "") -> Dict[str, str]:
    """The server's environment; ``home`` (default: the temporary directory) holds the
    remembered ``initialize`` answers (~/.cache/sqlite-rrf)."""
    env = {
        "SQLITE_RRF_MODEL": os.environ["SQLITE_RRF_MODEL"],
        "HOME": home or tempfile.gettempdir(),
    }
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    return env


def children_cpu() -> float:
    """The CPU seconds (user and system) this process's children have used so far, read
    from /proc (Linux): the server's, independent of how loaded the machine is. It
    includes what the server does beside the answer (it goes on importing the SDK)."""
    me, total = os.getpid(), 0
    tick = os.sysconf("SC_CLK_TCK")
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == me:  # ppid
            total += int(fields[11]) + int(fields[12])  # utime, stime
    return total / tick


async def one(db: Path, pythonpath: str, n: int, home: str = "") -> Tuple[float, float, float]:
    """(seconds to the initialize answer, the server's CPU seconds then, seconds to the
    first call's answer: a ``remember`` of a new text, which the model embeds)."""
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "sqlite_rrf", "mcp", str(db), "--scope", "bench"],
        env=_env(pythonpath, home),
        cwd=str(db.parent),
    )
    with open(os.devnull, "w") as err:
        t0 = time.perf_counter()
        async with stdio_client(params, errlog=err) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                t_init = time.perf_counter() - t0
                cpu = children_cpu()
                res = await session.call_tool(
                    "remember", {"content": f"Benchmark note number {n} of this run."}
                )
                t_call = time.perf_counter() - t0
                assert not res.is_error, res.content
                assert res.structured_content["embedded"] is True
    return t_init, cpu, t_call


def python_pass() -> float:
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-c", "pass"], check=True)
    return time.perf_counter() - t0


def summary(name: str, xs: List[float]) -> str:
    return f"{name:<34} p50 {statistics.median(xs):6.3f} s  (min {min(xs):.3f}, max {max(xs):.3f})"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--pythonpath", default="", help="run the servers from this copy")
    ap.add_argument(
        "--cold",
        action="store_true",
        help="each start with an empty cache (a new HOME): no remembered initialize answer",
    )
    args = ap.parse_args()
    if not os.path.isfile(os.environ.get("SQLITE_RRF_MODEL", "")):
        sys.exit("set SQLITE_RRF_MODEL to the GGUF model")
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "bench.db"
        env = dict(os.environ, **_env(args.pythonpath))
        for text in ("The staging database is rebuilt nightly.", "Deploys go out on Tuesdays."):
            subprocess.run(
                [sys.executable, "-m", "sqlite_rrf", "add", str(db), text, "--scope", "bench"],
                check=True,
                env=env,
                capture_output=True,
            )
        asyncio.run(one(db, args.pythonpath, 0))  # warm the page cache: every run alike
        inits, cpus, calls, floor = [], [], [], []
        for n in range(args.runs):
            home = tempfile.mkdtemp(dir=tmp) if args.cold else ""
            t_init, cpu, t_call = asyncio.run(one(db, args.pythonpath, n + 1, home))
            inits.append(t_init)
            cpus.append(cpu)
            calls.append(t_call)
            floor.append(python_pass())
    cache = "an empty cache each start" if args.cold else "the initialize answer remembered"
    print(
        f"sqlite-rrf mcp over stdio, {args.runs} runs, {cache}, "
        f"model {os.environ['SQLITE_RRF_MODEL']}"
    )
    print(summary("python -c pass", floor))
    print(summary("start to the initialize answer", inits))
    print(summary("the server's CPU at that answer", cpus))
    print(summary("start to the first call's answer", calls))


if __name__ == "__main__":
    main()
