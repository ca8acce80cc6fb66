"""Two peer libraries on a BEIR collection's test split, with the same MiniLM embeddings.

    pip install adhara==0.1.2 sqlite-hybrid-search==0.2.0 apsw   # next to sqlite-rrf
    python tests/bench/bench_peers.py [--data ../shared/data/scifact] [--split test]

The peers, each through its documented default API, with the collection's cached
all-MiniLM-L6-v2 vectors (``corpus.minilm.npy``, ``queries.minilm.npy``) passed in —
neither embeds anything here:

* **adhara 0.1.2** (SQLite loadable extension, the core of litesearch): a litesearch
  store — table ``store(content, embedding)`` with the vectors as float16 (litesearch's
  default dtype), FTS5 table ``store_fts`` (external content) with adhara's tokenizer
  ``adhara.TOKENIZE`` — queried with ``adhara_hybrid('store', q, qvec, k)``: an FTS5 list
  and an exact cosine list (no HNSW index: ``ann`` is only used when litesearch built one),
  each ``k`` deep, fused by RRF (k 60), the top ``k`` returned. ``q`` is what litesearch's
  ``fts_or`` builds from the query's words: every word quoted, OR-ed. Runs: ``k`` = 10
  (the README's example) and 100.
* **sqlite-hybrid-search 0.2.0** (C++ engine, FTS5 + usearch HNSW, RRF k 60):
  ``Engine(path, dim)``, ``add(documents, embeddings)`` with each document's text and
  vector, ``search_hybrid(query_text, query_vec, top_k)``. Runs: ``top_k`` = 10 (the
  list depth follows ``top_k``) and 100.

nDCG@10, recall@100 and MRR@10 come from ``sqlite_rrf.evaluation`` (the metrics of
``sqlite-rrf eval``); a run that returns fewer than 100 results scores its recall@100 on
what it returned. A peer that is not installed is skipped with a message. Writes
``tests/bench/out/peers.json``.
"""

from __future__ import annotations

import argparse
import importlib.metadata as md
import json
import os
import re
import sys
import tempfile
import time
from typing import Any, Callable, Dict, List, Optional, Sequence

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
OUT = os.path.join(HERE, "out")
DEFAULT_DATA = os.path.join(ROOT, "..", "shared", "data", "scifact")

from sqlite_rrf.evaluation.beir import load_beir
from sqlite_rrf.evaluation.metrics import mrr_at_k, ndcg_at_k, recall_at_k

#: The versions measured (another version is run, and its version is reported).
PEERS = {"adhara": "0.1.2", "sqlite-hybrid-search": "0.2.0"}


def _version(dist: str) -> Optional[str]:
    try:
        return md.version(dist)
    except md.PackageNotFoundError:
        return None


def fts_or(text: str) -> str:
    """litesearch's ``fts_or`` over the query's words: each distinct word quoted, OR-ed."""
    words = []
    for w in re.findall(r"\w+", text):
        if w not in words:
            words.append(w)
    return " OR ".join('"' + w.replace('"', '""') + '"' for w in words) or '""'


# ---------------------------------------------------------------------------------------


def adhara_runner(data: Any, workdir: str) -> Callable[[int, int], List[str]]:
    """Build the litesearch-layout store; return ``search(query_index, k) -> doc ids``."""
    import adhara
    import apsw

    db = adhara.load(apsw.Connection(os.path.join(workdir, "adhara.db")))
    db.execute("CREATE TABLE store(id INTEGER PRIMARY KEY, content TEXT, embedding BLOB)")
    db.execute(
        "CREATE VIRTUAL TABLE store_fts USING fts5(content, content='store', "
        f"content_rowid='id', tokenize='{adhara.TOKENIZE}')"
    )
    vecs = data.corpus_embeddings.astype(np.float16)
    with db:
        db.executemany(
            "INSERT INTO store(id, content, embedding) VALUES (?, ?, ?)",
            ((i + 1, t, vecs[i].tobytes()) for i, t in enumerate(data.corpus_texts) if t.strip()),
        )
        db.execute("INSERT INTO store_fts(store_fts) VALUES ('rebuild')")
    qv = data.query_embeddings.astype(np.float16)
    ids = data.corpus_ids

    def search(qi: int, k: int) -> List[str]:
        rows = db.execute(
            "SELECT id, score FROM adhara_hybrid('store', ?, ?, ?)",
            (fts_or(data.query_texts[qi]), qv[qi].tobytes(), k),
        ).fetchall()
        rows.sort(key=lambda r: -r[1])  # the function returns them in this order already
        return [ids[r[0] - 1] for r in rows]

    return search


def shs_runner(data: Any, workdir: str) -> Callable[[int, int], List[str]]:
    import sqlite_hybrid_search as shs

    eng = shs.Engine(os.path.join(workdir, "shs.sqlite3"), dim=data.corpus_embeddings.shape[1])
    docs, embs = [], []
    for i, t in enumerate(data.corpus_texts):
        if t.strip():
            docs.append({"id": data.corpus_ids[i], "text": t})
            embs.append(data.corpus_embeddings[i].astype(np.float32).tolist())
    for s in range(0, len(docs), 1000):
        eng.add(documents=docs[s : s + 1000], embeddings=embs[s : s + 1000])
    qv = data.query_embeddings.astype(np.float32)

    def search(qi: int, k: int) -> List[str]:
        hits = eng.search_hybrid(data.query_texts[qi], qv[qi].tolist(), top_k=k)
        return [h["document_id"] for h in hits]

    return search


RUNNERS = {
    "adhara": (adhara_runner, "adhara"),
    "sqlite-hybrid-search": (shs_runner, "sqlite_hybrid_search"),
}
DEPTHS = {"adhara": (10, 100), "sqlite-hybrid-search": (10, 100)}


def main(argv: Optional[Sequence[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", default=DEFAULT_DATA)
    ap.add_argument("--split", default="test")
    ap.add_argument("--out", default=os.path.join(OUT, "peers.json"))
    args = ap.parse_args(argv)

    data = load_beir(args.data, args.split)
    if data.corpus_embeddings is None or data.query_embeddings is None or data.needs_embedder():
        print(
            "bench_peers: the collection needs its embedding caches (corpus.minilm.npy, "
            "queries.minilm.npy) for every document and query",
            file=sys.stderr,
        )
        return 1
    results: Dict[str, Any] = {
        "collection": data.name,
        "split": args.split,
        "queries": len(data.query_ids),
        "peers": {},
    }
    rows = []
    for peer, (make, module) in RUNNERS.items():
        ver = _version(peer)
        if ver is None:
            msg = f"{peer} is not installed: skipped (pip install {peer}=={PEERS[peer]})"
            print(msg)
            results["peers"][peer] = {"skipped": msg}
            continue
        if ver != PEERS[peer]:
            print(f"note: {peer} {ver} is installed; these figures were defined for {PEERS[peer]}")
        with tempfile.TemporaryDirectory(prefix="bench-peers-") as wd:
            t0 = time.perf_counter()
            search = make(data, wd)
            t_build = time.perf_counter() - t0
            entry: Dict[str, Any] = {"version": ver, "build_seconds": round(t_build, 2), "runs": {}}
            for depth in DEPTHS[peer]:
                t0 = time.perf_counter()
                nd = r100 = mrr = 0.0
                lat = []
                for qi, qid in enumerate(data.query_ids):
                    t = time.perf_counter()
                    ids = search(qi, depth)
                    lat.append(time.perf_counter() - t)
                    rel = data.qrels.get(qid, {})
                    nd += ndcg_at_k(ids, rel, 10)
                    r100 += recall_at_k(ids, rel, 100)
                    mrr += mrr_at_k(ids, rel, 10)
                n = len(data.query_ids)
                run = {
                    "ndcg@10": nd / n,
                    "recall@100": r100 / n,
                    "mrr@10": mrr / n,
                    "ms_per_query_median": round(1000 * float(np.median(lat)), 3),
                }
                name = f"{peer} {ver}, lists {depth} deep" + (" (default)" if depth == 10 else "")
                entry["runs"][str(depth)] = run
                rows.append((name, run))
            results["peers"][peer] = entry
    if rows:
        w = max(len(r[0]) for r in rows)
        print(
            f"\n{data.name} ({args.split}, {len(data.query_ids)} queries), "
            "the collection's MiniLM vectors for every peer\n"
        )
        print(f"{'peer / run':<{w}}  nDCG@10   R@100  MRR@10  ms/query")
        for name, m in rows:
            print(
                f"{name:<{w}}  {m['ndcg@10']:7.4f}  {m['recall@100']:6.4f}  {m['mrr@10']:6.4f}"
                f"  {m['ms_per_query_median']:8.2f}"
            )
        print(
            "\n(a run returns at most as many results as its lists are deep: recall@100 "
            "of a 10-deep run counts only its 10)"
        )
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(results, f, indent=1)
    print(f"\njson: {os.path.relpath(args.out, ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
