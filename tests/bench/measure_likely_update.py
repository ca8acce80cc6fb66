"""Measure the cosine from which ``remember`` names an older memory a new one may update
(:data:`sqlite_rrf.store.facts.LIKELY_UPDATE_COSINE`), on real data: LongMemEval_S, the
development half (../shared/data), its knowledge-update questions.

Each such question's history states a fact and later a changed one, inside chat turns
marked ``has_answer`` (in date order). A memory is one fact, so the unit is the sentence:
in the earliest and the latest evidence turn (another session) the sentence nearest to
the question is the fact. A *positive* is that pair (the new text updates the old one).
A *negative* is the new sentence and its nearest sentence (by cosine) among the
sentences of ``--sample`` user turns of the same history that are not evidence: the
nearest thing that is not an update. For each threshold T the hint fires when the cosine
is at least T and :func:`sqlite_rrf.store.facts.differs_in_detail` finds a changed
number, day or name. We report the share of positives it fires on and of negatives
(false hints), the threshold with the best difference (Youden's J), and the product's
rule: the lowest threshold with at most :data:`MAX_FALSE_HINTS` false hints.

Measured (2026-11-29, all-MiniLM-L6-v2 f16, --sample 60: 35 positives, 35 negatives,
4,560 sentences): positives' median cosine 0.688, negatives' 0.549; T 0.65: 0.514 / 0.143,
T 0.70: 0.400 / 0.086, T 0.75: 0.343 / 0.029; Youden's J is best at 0.50 and 0.65 (0.371);
the rule gives 0.70. With --sample 20 (fewer candidates) the false hints at 0.70 are 0.029.
The split is the dev half only (35 pairs: a small sample; no held-out check).

    .venv/bin/python tests/bench/measure_likely_update.py [--sample 80]

Embeddings come from the evaluation's cache (texts truncated to the model's context).
"""

from __future__ import annotations

import argparse
import json
import lzma
import os
import random
import re
import sys
from pathlib import Path
from typing import Any, Dict, List, Tuple

import numpy as np

REPO = Path(__file__).resolve().parents[2]
DATA = REPO.parent / "shared" / "data" / "longmemeval-s" / "longmemeval_s_dev.json.xz"
MODEL = os.environ.get("SQLITE_RRF_MODEL") or str(
    REPO.parent / "shared" / "models" / "all-MiniLM-L6-v2-f16.gguf"
)


#: The product's rule: the lowest threshold at which at most this share of new texts whose
#: nearest sentence is not an update get a hint (a wrong hint costs the agent a look).
MAX_FALSE_HINTS = 0.10

_SENTENCE = re.compile(r"(?<=[.!?])\s+")


def sentences(text: str) -> List[str]:
    """The sentences of a chat turn (split after . ! ?), those of 4 words or more."""
    return [x.strip() for x in _SENTENCE.split(text) if len(x.split()) >= 4]


def questions(sample: int, seed: int = 0) -> List[Dict[str, Any]]:
    """Per knowledge-update question (not an abstention): its question, the sentences of
    its earliest and latest evidence turns (in other sessions), and the sentences of
    ``sample`` non-evidence user turns of its history."""
    rng = random.Random(seed)
    data = json.load(lzma.open(DATA))
    out = []
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
        picked = rng.sample(others, min(sample, len(others)))
        out.append(
            dict(
                question=q["question"],
                old=sentences(evidence[0][1]) or [evidence[0][1]],
                new=sentences(evidence[-1][1]) or [evidence[-1][1]],
                others=[x for t in picked for x in sentences(t)],
            )
        )
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sample", type=int, default=80)
    args = ap.parse_args()
    sys.path.insert(0, str(REPO / "pysrc"))
    from sqlite_rrf.embedding.embedder import Embedder
    from sqlite_rrf.evaluation.embcache import (
        EmbeddingCache,
        default_cache_path,
        embed_cached,
        model_fingerprint,
    )
    from sqlite_rrf.store.facts import differs_in_detail

    qs = questions(args.sample)
    texts = sorted({t for q in qs for t in [q["question"], *q["old"], *q["new"], *q["others"]]})
    n_ctx = 256
    cache = EmbeddingCache(model_fingerprint(MODEL, n_ctx), default_cache_path())
    vecs, embedded, secs = embed_cached(
        texts, cache, lambda: Embedder(MODEL, n_ctx=n_ctx), progress=True
    )
    vecs = vecs / np.linalg.norm(vecs, axis=1, keepdims=True)
    row = {t: i for i, t in enumerate(texts)}

    def cos(a: str, b: str) -> float:
        return float(vecs[row[a]] @ vecs[row[b]])

    scored_pos: List[Tuple[float, bool]] = []
    scored_neg: List[Tuple[float, bool]] = []
    for q in qs:
        # the fact in each evidence turn: its sentence nearest to the question
        old = max(q["old"], key=lambda x: cos(q["question"], x))
        new = max(q["new"], key=lambda x: cos(q["question"], x))
        scored_pos.append((cos(old, new), differs_in_detail(old, new) is not None))
        best = max(q["others"], key=lambda o: cos(new, o))
        scored_neg.append((cos(new, best), differs_in_detail(best, new) is not None))
    pos, neg = scored_pos, scored_neg
    print(
        f"LongMemEval_S dev half, knowledge-update, sentences: {len(pos)} positives, "
        f"{len(neg)} negatives (nearest sentence of {args.sample} sampled user turns); "
        f"{embedded} texts "
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
    for t in np.arange(0.40, 0.96, 0.05):  # the rule the product uses
        fp = sum(c >= t and d for c, d in scored_neg) / len(scored_neg)
        if fp <= MAX_FALSE_HINTS:
            tp = sum(c >= t and d for c, d in scored_pos) / len(scored_pos)
            print(
                f"lowest threshold with false hints <= {MAX_FALSE_HINTS:.0%}: {t:.2f} (hint on "
                f"{tp:.3f} of positives, {fp:.3f} of negatives)"
            )
            break
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
