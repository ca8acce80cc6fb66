#!/usr/bin/env python3
"""What a filter costs: the recall statement at N episodes (default 100k) with no filter,
with a scope that holds 1 %, 10 % or 50 % of the rows, with a kind, and with a time range
(the target: "indexes make a filtered recall at 100k cost no more than an
unfiltered one"), and with two scopes, a project's and the shared one (:scope2:
what the hook, MCP and the CLI recall by default), in the default pool and in 'recent'.

The database is bench_recall's (built once and cached under tests/bench/out/cache), copied
and given scopes and kinds: rowid % 100 == 7 is scope 'tiny' (1 %), rowid % 10 == 3 (the
rest of it) 'tenth' (10 % together... 9 %), odd rowids 'half' otherwise, '' (the shared
scope) the even rest (45 %); kind 'fact' on every fifth row. The 20 SciFact claims of bench_recall, each run in turn for every case,
--rounds times (round-robin, so the machine's noise hits every case alike); the median
per case and its ratio to the unfiltered median of the same run. Every filtered result is
checked to hold only rows that pass the filter.

    python tests/bench/bench_filters.py [--size 100000] [--rounds 5]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from bench import bench_recall as br
from sqlite_rrf.core.statements import recall_parameters, recall_statement
from sqlite_rrf.store import Store

CASES = {
    "no filter": {},
    "scope 1%": {"scope": "tiny"},
    "scope 9%": {"scope": "tenth"},
    "scope 45%": {"scope": "half"},
    "kind 20%": {"kind": "fact"},
    "since (last 6 months)": {"since": br.NOW_MS - 182 * 86_400_000},
    "scope 1% + kind": {"scope": "tiny", "kind": "fact"},
    "scope 1% + shared 45%": {"scope": "tiny", "scope2": ""},
    "scope 9% + shared 45%": {"scope": "tenth", "scope2": ""},
    "scopes 1% + 9%": {"scope": "tiny", "scope2": "tenth"},
    "recent: no filter": {"pool": "recent"},
    "recent: scope 9%": {"pool": "recent", "scope": "tenth"},
    "recent: scope 9% + shared": {"pool": "recent", "scope": "tenth", "scope2": ""},
    "recent: scopes 1% + 9%": {"pool": "recent", "scope": "tiny", "scope2": "tenth"},
}


def prepare(size: int) -> str:
    src, _, _ = br.ensure_db(os.path.join(br.OUT_DIR, "cache"), size, 20240607, False)
    path = os.path.join(br.OUT_DIR, f"filters_{size}.db")
    if not os.path.exists(path) or os.path.getmtime(path) < os.path.getmtime(src):
        for suffix in ("", "-wal", "-shm"):
            if os.path.exists(path + suffix):
                os.remove(path + suffix)
        shutil.copyfile(src, path)
        with Store(path) as s:  # migrates: scope column and its indexes
            s.conn.execute("BEGIN IMMEDIATE")
            s.conn.execute(
                "UPDATE episodes SET scope = CASE WHEN rowid % 100 = 7 THEN 'tiny' "
                "WHEN rowid % 10 = 3 THEN 'tenth' WHEN rowid % 2 = 1 THEN 'half' "
                "ELSE '' END, kind = CASE WHEN rowid % 5 = 0 THEN 'fact' END"
            )
            s.conn.execute("COMMIT")
            s.conn.execute("ANALYZE")
    return path


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", type=int, default=br.TARGET_SIZE)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args(argv)
    path = prepare(args.size)
    conn = br.open_db(path)
    sql = recall_statement()
    names = recall_parameters()
    queries = br.load_queries(20)
    passes = {
        "scope": lambda r, v: r[0] == v,
        "kind": lambda r, v: r[1] == v,
        "since": lambda r, v: r[2] >= v,
    }
    scopes = lambda f: {f[k] for k in ("scope", "scope2") if k in f}  # noqa: E731
    facts = {
        row[0]: row[1:] for row in conn.execute("SELECT id, scope, kind, created_at FROM episodes")
    }
    times = {name: [] for name in CASES}
    for _ in range(args.rounds):
        for _, text, qvec in queries:
            for name, filters in CASES.items():
                b = dict.fromkeys(names)
                b.update(query=text, qvec=qvec, **filters)
                t0 = time.perf_counter()
                rows = conn.execute(sql, b).fetchall()
                times[name].append(time.perf_counter() - t0)
                for row in rows:
                    for key, value in filters.items():
                        if key in passes and key != "scope":
                            assert passes[key](facts[row[0]], value), (name, row[0])
                    if scopes(filters):
                        assert facts[row[0]][0] in scopes(filters), (name, row[0])
    base = statistics.median(times["no filter"])
    out = {}
    print(
        f"recall statement at {args.size:,} episodes, {len(queries)} queries x "
        f"{args.rounds} rounds, median ms (ratio to no filter, same run)"
    )
    for name, ts in times.items():
        med = statistics.median(ts)
        out[name] = {"p50_ms": med * 1000, "ratio": med / base}
        print(f"  {name:<24} {med * 1000:8.2f} ms   {med / base:5.2f}x")
    os.makedirs(br.OUT_DIR, exist_ok=True)
    with open(os.path.join(br.OUT_DIR, "filters.json"), "w") as f:
        json.dump({"size": args.size, "rounds": args.rounds, "cases": out}, f, indent=2)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
