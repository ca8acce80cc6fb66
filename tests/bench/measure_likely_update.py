"""Measure the cosine from which ``remember`` names an older memory a new one may update
(:data:`sqlite_rrf.store.facts.LIKELY_UPDATE_COSINE`), on real data: LongMemEval_S, the
development half (../shared/data), its knowledge-update questions.

Each such question's history states a fact, and later a changed one (the turns marked
``has_answer`` in its evidence sessions, in date order). A *positive* is the pair (the
earliest evidence turn, the latest evidence turn in another session): the new text is
an update of the old one. A *negative* is the latest evidence turn and its nearest other
user turn (by cosine) among ``--sample`` user turns of the same history that are not
evidence: the nearest thing that is not an update. For each threshold T the hint fires
when the cosine is at least T and :func:`sqlite_rrf.store.facts.differs_in_detail` finds
a changed number, day or name; we report the share of positives it fires on (recall)
and of negatives (false hints), and the threshold with the best difference (Youden's J).

    .venv/bin/python tests/bench/measure_likely_update.py [--sample 80]

Embeddings come from the evaluation's cache (texts truncated to the model's context).
"""

from __future__ import annotations

import argparse
import json
import lzma
import os
import random
import sys
from pathlib import Path
from typing import Any, List, Tuple

import numpy as np

REPO = Path(__file__).resolve().parents[2]
DATA = REPO.parent / "shared" / "data" / "longmemeval-s" / "longmemeval_s_dev.json.xz"
MODEL = os.environ.get("SQLITE_RRF_MODEL") or str(
    REPO.parent / "shared" / "models" / "all-MiniLM-L6-v2-f16.gguf"
)


def pairs(sample: int, seed: int = 0) -> Tuple[List[Tuple[str, str]], List[Tuple[str, List[str]]]]:
    """Positives (old, new) and, per new text, the non-evidence user turns to search."""
    rng = random.Random(seed)
    data = json.load(lzma.open(DATA))
    pos: List[Tuple[str, str]] = []
    neg: List[Tuple[str, List[str]]] = []
    for q in data:
        if q["question_type"] != "knowledge-update" or q["question_id"].endswith("_abs"):
            continue
        order = sorted(range(len(q["haystack_dates"])), key=lambda i: q["haystack_dates"][i])
        evidence: List[Tuple[int, str]] = []
        others: List[str] = []
        for rank, i in enumerate(order):
            for t in q["haystack_sessions"][i]:
                if t.get("has_answer"):
                    evidence.append((rank, t["content"]))
                elif t["role"] == "user":
                    others.append(t["content"])
        if len({r for r, _ in evidence}) < 2:
            continue
        first, last = evidence[0], evidence[-1]
        pos.append((first[1], last[1]))
        neg.append((last[1], rng.sample(others, min(sample, len(others)))))
    return pos, neg


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sample", type=int, default=80)
    args = ap.parse_args()
    sys.path.insert(0, str(REPO / "pysrc"))
    from sqlite_rrf.embed import Embedder
    from sqlite_rrf.evaluation.embcache import (
        EmbeddingCache,
        default_cache_path,
        embed_cached,
        model_fingerprint,
    )
    from sqlite_rrf.store.facts import differs_in_detail

    pos, neg = pairs(args.sample)
    texts = sorted({t for p in pos for t in p} | {t for n, o in neg for t in [n, *o]})
    n_ctx = 256
    cache = EmbeddingCache(default_cache_path(), model_fingerprint(MODEL, n_ctx))
    vecs, embedded, secs = embed_cached(
        texts, cache, lambda: Embedder(MODEL, n_ctx=n_ctx), progress=True
    )
    row = {t: i for i, t in enumerate(texts)}

    def cos(a: str, b: str) -> float:
        va, vb = vecs[row[a]], vecs[row[b]]
        return float(va @ vb / (np.linalg.norm(va) * np.linalg.norm(vb)))

    scored_pos = [(cos(o, n), differs_in_detail(o, n) is not None) for o, n in pos]
    scored_neg: List[Tuple[float, bool]] = []
    for n, others in neg:
        best = max(others, key=lambda o: cos(n, o))
        scored_neg.append((cos(n, best), differs_in_detail(best, n) is not None))
    print(
        f"LongMemEval_S dev half, knowledge-update: {len(pos)} positives, {len(neg)} "
        f"negatives (nearest of {args.sample} sampled user turns); {embedded} texts "
        f"embedded in {secs:.0f} s"
    )
    print(
        f"cosine of positives: median {np.median([c for c, _ in scored_pos]):.3f}; "
        f"of negatives: median {np.median([c for c, _ in scored_neg]):.3f}"
    )
    best: Any = None
    print(" T      hint on positives  hint on negatives  J")
    for t in np.arange(0.40, 0.96, 0.05):
        tp = sum(c >= t and d for c, d in scored_pos) / len(scored_pos)
        fp = sum(c >= t and d for c, d in scored_neg) / len(scored_neg)
        print(f" {t:.2f}   {tp:.3f}              {fp:.3f}              {tp - fp:+.3f}")
        if best is None or tp - fp > best[1] - best[2]:
            best = (t, tp, fp)
    print(
        f"best threshold (Youden's J): {best[0]:.2f} (hint on {best[1]:.3f} of positives, "
        f"{best[2]:.3f} of negatives)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
