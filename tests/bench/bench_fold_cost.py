"""What moving the fold, the relevance and the policy into the recall statement costs:
the default ``Store.recall`` of this checkout against the same call of an earlier
revision (default: the one before the move, whose fold, relevance and floor ran in
Python after the statement), on the same database, in the same run.

The database is ``bench_recall.py``'s cached memory of ``--n`` episodes (build it with
``python tests/bench/bench_recall.py --sizes 100000`` first). The earlier revision is
exported with ``git archive`` into a temporary directory and runs with this checkout's
extension (a superset of the functions it calls). Each side runs in its own child
process, ``--rounds`` times, interleaved (old, new, old, new, ...); a child times
``--repeat`` passes over ``--queries`` SciFact test claims (their cached vectors),
``Store.recall(query, qvec=..., touch=False, force=True, now=...)`` with every other
option at its default (limit 3, the fold on), after one warm-up pass. Prints the median
latency (wall clock, and the thread's CPU time, which a busy machine disturbs less) of
each side and their ratio (new / old).

    python tests/bench/bench_fold_cost.py [--n 100000] [--rev acd90c5~1]
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import List, Optional, Sequence

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
SCIFACT = ROOT.parent / "shared" / "data" / "scifact"

CHILD = r"""
import json, sys, time
import numpy as np
from sqlite_rrf.store import Store
db, qfile, repeat = sys.argv[1], sys.argv[2], int(sys.argv[3])
qs = json.load(open(qfile))
st = Store(db)  # a copy: a writable Store computes pending sign codes once
now = 1_800_000_000_000
def one(q):
    t, c = time.perf_counter(), time.thread_time()
    hits = st.recall(q["text"], qvec=np.asarray(q["vec"], dtype="<f4"), touch=False,
                     force=True, now=now)
    return time.perf_counter() - t, time.thread_time() - c, [h.id for h in hits]
ids = [one(q)[2] for q in qs]  # warm-up
runs = [one(q) for _ in range(repeat) for q in qs]
print(json.dumps({"times": [r[0] for r in runs], "cpu": [r[1] for r in runs], "ids": ids}))
"""


def queries(n: int) -> List[dict]:
    import numpy as np

    ids = json.load(open(SCIFACT / "queries.minilm.ids.json"))
    vecs = np.load(SCIFACT / "queries.minilm.npy")
    text = {}
    with open(SCIFACT / "queries.jsonl", encoding="utf-8") as f:
        for line in f:
            o = json.loads(line)
            text[o["_id"]] = o["text"]
    test = []
    with open(SCIFACT / "qrels" / "test.tsv", encoding="utf-8") as f:
        next(f)
        for line in f:
            q = line.split("\t")[0]
            if q not in test:
                test.append(q)
    pos = {q: i for i, q in enumerate(ids)}
    return [{"text": text[q], "vec": vecs[pos[q]].tolist()} for q in test[:n]]


def main(argv: Optional[Sequence[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--rev", default="acd90c5~1", help="the earlier revision")
    ap.add_argument("--queries", type=int, default=20)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args(argv)
    found = sorted(glob.glob(str(HERE / "out" / "cache" / f"recall_{a.n}_*.db")))
    if not found:
        raise SystemExit(f"no cached database of {a.n} episodes: run bench_recall.py first")
    with tempfile.TemporaryDirectory() as tmp:
        old = Path(tmp) / "old"
        old.mkdir()
        tar = subprocess.run(
            ["git", "-C", str(ROOT), "archive", a.rev, "pysrc/sqlite_rrf", "sql"],
            check=True,
            capture_output=True,
        ).stdout
        subprocess.run(["tar", "-x", "-C", str(old)], input=tar, check=True)
        pkg = ROOT / "pysrc" / "sqlite_rrf"
        for so in list(pkg.glob("rrf.so")) + list(pkg.glob("_kernels*.so")):
            shutil.copy(so, old / "pysrc" / "sqlite_rrf" / so.name)
        qfile = Path(tmp) / "q.json"
        qfile.write_text(json.dumps(queries(a.queries)))
        db = Path(tmp) / "m.db"
        shutil.copyfile(found[-1], db)
        sides = {"old": str(old / "pysrc"), "new": str(ROOT / "pysrc")}
        times = {k: [] for k in sides}
        cpu = {k: [] for k in sides}
        ids = {}
        for _ in range(a.rounds):
            for name, path in sides.items():
                env = dict(os.environ, PYTHONPATH=path, OMP_NUM_THREADS="1")
                out = subprocess.run(
                    [sys.executable, "-c", CHILD, str(db), str(qfile), str(a.repeat)],
                    env=env,
                    check=True,
                    capture_output=True,
                    text=True,
                ).stdout
                got = json.loads(out)
                times[name] += got["times"]
                cpu[name] += got["cpu"]
                ids[name] = got["ids"]
    p50 = {k: statistics.median(v) * 1000 for k, v in times.items()}
    c50 = {k: statistics.median(v) * 1000 for k, v in cpu.items()}
    same = sum(o == n for o, n in zip(ids["old"], ids["new"]))
    print(f"{a.n} episodes, {a.queries} SciFact test claims x {a.repeat} x {a.rounds} rounds")
    print(
        f"old ({a.rev}) p50 {p50['old']:.2f} ms; new p50 {p50['new']:.2f} ms; "
        f"new/old {p50['new'] / p50['old']:.3f}"
    )
    print(
        f"CPU time (the thread's): old p50 {c50['old']:.2f} ms; new p50 {c50['new']:.2f} ms; "
        f"new/old {c50['new'] / c50['old']:.3f}"
    )
    print(f"same ids in the same order: {same} of {len(ids['new'])} queries")
    return 0


if __name__ == "__main__":
    sys.exit(main())
