"""Snapshot every recall's rows on a SciFact sample, to show a refactoring left rankings bit-identical.

    python tests/bench/rankings_snapshot.py --out before.json     # on the old tree
    python tests/bench/rankings_snapshot.py --out after.json      # on the new tree
    python tests/bench/rankings_snapshot.py --compare before.json after.json

``--out`` builds one store in a temporary directory from the first ``--docs`` (1,500) SciFact
corpus documents with their cached MiniLM embeddings (no model is loaded) and explicit times,
scopes, kinds, importance and access counts, computes the sign codes (``maintain``) and the
``knn`` index, then runs ``Store.recall`` for the first ``--queries`` (40) queries of
queries.jsonl, each with its cached query vector as ``qvec``, for every pool (``POOL_MODES``)
x every profile (``PROFILES``) x 4 filters (none, a scope, a kind, a since/until window), with
``touch=False`` and a fixed ``now``: 3,840 recalls by default. It writes every hit's fields
(all of ``RecallHit.as_dict()`` but the content; floats as ``float.hex``, so equal means equal
bit for bit) as JSON. ``--compare`` prints the differences of two snapshots and exits 1 on any.

It imports only ``sqlite_rrf.store.Store`` and ``sqlite_rrf.statements`` (a name both the tree
before the package was re-homed and the tree after give), so one copy of this file runs on both:
``PYTHONPATH=<worktree>/pysrc python rankings_snapshot.py --out ...``.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Dict, List, Tuple

import numpy as np

DATA = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "scifact"
T0 = 1_700_000_000_000  # ms; document i is created at T0 + i hours
HOUR = 3_600_000
SCOPES = ("", "lab", "clinic")
KINDS = ("claim", "method", "result")


def episodes(data: Path, n: int) -> List[Dict[str, Any]]:
    """The first ``n`` corpus documents as episodes, with their cached embeddings."""
    ids = json.loads((data / "corpus.minilm.ids.json").read_text())
    vecs = np.load(data / "corpus.minilm.npy")
    row = {str(d): i for i, d in enumerate(ids)}
    out = []
    with open(data / "corpus.jsonl", encoding="utf-8") as f:
        for i, line in enumerate(f):
            if i == n:
                break
            doc = json.loads(line)
            created = T0 + i * HOUR
            out.append(
                {
                    "id": "d" + str(doc["_id"]),
                    "content": (doc.get("title", "") + " " + doc["text"]).strip(),
                    "embedding": [float(x) for x in vecs[row[str(doc["_id"])]]],
                    "created_at": created,
                    "accessed_at": created + (i * 7919 % 1000) * 60_000,
                    "access_count": i * 31 % 9,
                    "importance": "high" if i % 10 == 0 else "low" if i % 10 == 1 else "normal",
                    "kind": KINDS[i % 3],
                    "scope": SCOPES[(i // 3) % 3],
                }
            )
    return out


def queries(data: Path, n: int) -> List[Tuple[str, str, List[float]]]:
    """The first ``n`` queries of queries.jsonl with their cached vectors."""
    ids = json.loads((data / "queries.minilm.ids.json").read_text())
    vecs = np.load(data / "queries.minilm.npy")
    row = {str(d): i for i, d in enumerate(ids)}
    out: List[Tuple[str, str, List[float]]] = []
    with open(data / "queries.jsonl", encoding="utf-8") as f:
        for line in f:
            if len(out) == n:
                break
            q = json.loads(line)
            out.append((str(q["_id"]), q["text"], [float(x) for x in vecs[row[str(q["_id"])]]]))
    return out


def exact(v: Any) -> Any:
    """``v`` with every float as its hex form (JSON keeps it bit for bit)."""
    if isinstance(v, float):
        return v.hex()
    if isinstance(v, dict):
        return {str(k): exact(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [exact(x) for x in v]
    return v


def passes(e: Dict[str, Any], f: Dict[str, Any]) -> bool:
    """Whether episode ``e`` passes the filter ``f`` (keywords of ``Store.recall``)."""
    return (
        f.get("scope", e["scope"]) == e["scope"]
        and f.get("kind", e["kind"]) == e["kind"]
        and f.get("since", e["created_at"]) <= e["created_at"]
        and ("until" not in f or e["created_at"] < f["until"])
    )


def snapshot(data: Path, n_docs: int, n_queries: int, limit: int) -> Dict[str, Any]:
    import sqlite_rrf
    from sqlite_rrf import statements
    from sqlite_rrf.store import Store

    eps = episodes(data, n_docs)
    qs = queries(data, n_queries)
    now = T0 + n_docs * HOUR + 24 * HOUR
    third = n_docs // 3
    filters: Dict[str, Dict[str, Any]] = {
        "none": {},
        "scope=lab": {"scope": "lab"},
        "kind=result": {"kind": "result"},
        "window": {"since": T0 + third * HOUR, "until": T0 + 2 * third * HOUR},
    }
    by_id = {e["id"]: e for e in eps}
    selected = {f: sum(passes(e, kw) for e in eps) for f, kw in filters.items()}
    recalls: Dict[str, Any] = {}
    hits = 0
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        with Store(str(Path(tmp) / "snapshot.db")) as store:
            store.add_many(eps)
            store.maintain()
            store.enable_knn()
            for pool in statements.POOL_MODES:
                for profile in statements.PROFILES:
                    for fname, fkw in filters.items():
                        for qid, text, qvec in qs:
                            res = store.recall(
                                text, limit, pool=pool, profile=profile, qvec=qvec,
                                touch=False, now=now, **fkw,
                            )  # fmt: skip
                            rows = []
                            for h in res:
                                if not passes(by_id[h.id], fkw):
                                    raise SystemExit(f"{h.id} does not pass the filter {fname}")
                                d = h.as_dict()
                                d.pop("content", None)
                                rows.append(exact(d))
                            hits += len(rows)
                            recalls[f"{pool}/{profile}/{fname}/{qid}"] = {
                                "hits": rows,
                                "skipped": res.skipped,
                                "reason": res.reason,
                                "warnings": list(res.warnings),
                            }
    return {
        "package": sqlite_rrf.__file__,
        "version": sqlite_rrf.__version__,
        "docs": len(eps),
        "queries": len(qs),
        "limit": limit,
        "now": now,
        "pools": list(statements.POOL_MODES),
        "profiles": list(statements.PROFILES),
        "filters": filters,
        "selected": selected,
        "n_recalls": len(recalls),
        "n_hits": hits,
        "seconds": round(time.perf_counter() - started, 1),
        "recalls": recalls,
    }


def compare(a_path: str, b_path: str, most: int = 20) -> int:
    a = json.loads(Path(a_path).read_text())
    b = json.loads(Path(b_path).read_text())
    for key in ("docs", "queries", "limit", "now", "pools", "profiles", "filters", "selected"):
        if a[key] != b[key]:
            print(f"setup differs: {key}: {a[key]!r} != {b[key]!r}")
    ra, rb = a["recalls"], b["recalls"]
    differ = [k for k in ra if k in rb and ra[k] != rb[k]]
    only_a = [k for k in ra if k not in rb]
    only_b = [k for k in rb if k not in ra]
    for k in differ[:most]:
        ha, hb = ra[k]["hits"], rb[k]["hits"]
        print(f"{k}: ids {[h['id'] for h in ha]} vs {[h['id'] for h in hb]}")
        for i in range(max(len(ha), len(hb))):
            x = ha[i] if i < len(ha) else {}
            y = hb[i] if i < len(hb) else {}
            for f in sorted(set(x) | set(y)):
                if x.get(f) != y.get(f):
                    print(f"  hit {i} {f}: {x.get(f)!r} != {y.get(f)!r}")
        for f in ("skipped", "reason", "warnings"):
            if ra[k][f] != rb[k][f]:
                print(f"  {f}: {ra[k][f]!r} != {rb[k][f]!r}")
    for name, only in ((a_path, only_a), (b_path, only_b)):
        if only:
            print(f"{len(only)} recalls only in {name}, e.g. {only[:3]}")
    print(
        f"{len(ra)} / {len(rb)} recalls, {a['n_hits']} / {b['n_hits']} hits; "
        f"{len(differ)} recalls differ, {len(only_a) + len(only_b)} missing"
    )
    same = not differ and not only_a and not only_b
    print("identical" if same else "DIFFERENT")
    return 0 if same else 1


def main(argv: List[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    g = p.add_mutually_exclusive_group(required=True)
    g.add_argument("--out", metavar="FILE", help="write the snapshot of this tree's recalls")
    g.add_argument("--compare", nargs=2, metavar=("A", "B"), help="compare two snapshots")
    p.add_argument("--data", type=Path, default=DATA, help="the SciFact directory")
    p.add_argument("--docs", type=int, default=1500, help="corpus documents (default 1500)")
    p.add_argument("--queries", type=int, default=40, help="queries (default 40)")
    p.add_argument("--limit", type=int, default=10, help="hits per recall (default 10)")
    args = p.parse_args(argv)
    if args.compare:
        return compare(*args.compare)
    snap = snapshot(args.data, args.docs, args.queries, args.limit)
    Path(args.out).write_text(json.dumps(snap, sort_keys=True))
    print(
        f"{snap['n_recalls']} recalls, {snap['n_hits']} hits in {snap['seconds']} s "
        f"(episodes each filter selects: {snap['selected']}) "
        f"({snap['package']}) -> {args.out}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
