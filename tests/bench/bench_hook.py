"""End-to-end latency of ``sqlite-rrf hook DB`` per prompt, process start included.

    .venv/bin/python tests/bench/bench_hook.py [--episodes 500] [--runs 20] [--model PATH]

Builds two databases of ``--episodes`` short notes in a temporary directory: one without
embeddings (the hook then loads no model: BM25, recency and access) and, when a model is
available (``--model`` or ``$SQLITE_RRF_MODEL``), one embedded with it (the hook loads the
model and embeds each prompt). Then runs the hook ``--runs`` times on each, as an agent does
(a new ``python -m sqlite_rrf hook DB`` process, the payload on stdin, a new prompt and
session each time, so the topic gate never skips the recall), and prints the median (p50),
p90 and max wall time from process start to exit, beside two baselines: ``python -c pass``
and ``python -m sqlite_rrf --version``.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List, Optional

TOPICS = ["postgres", "deploy", "vault", "kafka", "invoice", "login", "cache", "backup",
          "docker", "billing", "search", "email", "redis", "metrics", "alerts", "python"]
VERBS = ["moved to", "depends on", "is configured in", "was replaced by", "breaks without",
         "is documented in", "runs before", "is owned by"]


def notes(n: int, seed: int = 7) -> List[Dict[str, str]]:
    rng = random.Random(seed)
    return [{"id": f"n{i}", "scope": "bench",
             "content": f"The {rng.choice(TOPICS)} service {rng.choice(VERBS)} the "
                        f"{rng.choice(TOPICS)} {rng.choice(['job', 'cluster', 'config', 'team'])}"
                        f" (note {i})."} for i in range(n)]


def timed(argv: List[str], stdin: bytes = b"", env: Optional[Dict[str, str]] = None) -> float:
    t = time.perf_counter()
    p = subprocess.run(argv, input=stdin, capture_output=True, env=env)
    dt = time.perf_counter() - t
    if p.returncode != 0:
        raise SystemExit(f"{argv} failed: {p.stderr.decode()}")
    return dt


def summary(name: str, times: List[float]) -> str:
    ts = sorted(times)
    p90 = ts[min(len(ts) - 1, int(round(0.9 * (len(ts) - 1))))]
    return (f"{name:<44} p50 {statistics.median(ts) * 1000:7.0f} ms   p90 {p90 * 1000:7.0f} ms"
            f"   max {ts[-1] * 1000:7.0f} ms   (n={len(ts)})")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--episodes", type=int, default=500)
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--model", default=os.environ.get("SQLITE_RRF_MODEL"))
    args = ap.parse_args()

    from sqlite_rrf.store import Store

    py = sys.executable
    tmp = Path(tempfile.mkdtemp(prefix="bench-hook-"))
    cache = tmp / "empty-hf-cache"
    cache.mkdir()
    no_model = {k: v for k, v in os.environ.items() if k != "SQLITE_RRF_MODEL"}
    no_model.update(HF_HUB_OFFLINE="1", HF_HUB_CACHE=str(cache), HF_HOME=str(cache))
    dbs = {"no model (BM25, recency, access)": (tmp / "plain.db", no_model)}
    with Store(dbs["no model (BM25, recency, access)"][0]) as s:
        s.add_many(notes(args.episodes))
    if args.model and os.path.isfile(args.model):
        from sqlite_rrf.embed import Embedder

        with Embedder(args.model) as emb, Store(tmp / "model.db", embedder=emb) as s:
            s.add_many(notes(args.episodes), progress=False)
        dbs[f"model {os.path.basename(args.model)}"] = (
            tmp / "model.db", dict(os.environ, SQLITE_RRF_MODEL=args.model))
    else:
        print("no model (--model or $SQLITE_RRF_MODEL): the model case is not measured")

    rng = random.Random(1)
    print(f"{args.episodes} episodes, {args.runs} runs each, on {os.cpu_count()} CPUs")
    print(summary("python -c pass", [timed([py, "-c", "pass"]) for _ in range(args.runs)]))
    print(summary("python -m sqlite_rrf --version",
                  [timed([py, "-m", "sqlite_rrf", "--version"]) for _ in range(args.runs)]))
    for name, (db, env) in dbs.items():
        times = []
        for i in range(args.runs):
            payload = {"session_id": f"bench-{time.time_ns()}-{i}", "cwd": str(tmp),
                       "prompt": f"what does the {rng.choice(TOPICS)} service "
                                 f"{rng.choice(VERBS)}?", "hook_event_name": "UserPromptSubmit"}
            times.append(timed([py, "-m", "sqlite_rrf", "hook", str(db), "--scope", "bench"],
                               json.dumps(payload).encode(), env))
        print(summary(f"hook, {name}", times))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
