"""LongMemEval's retrieval metrics: recall_any, recall_all and nDCG at 5 and 10 over
the question's episodes (turns or sessions), and the published protocol's over sessions
(:func:`score_question` reports both)."""

from __future__ import annotations

from typing import Dict, Iterable, List, Sequence

import numpy as np

from .longmemeval_data import LmeQuestion

#: The cut-offs reported.
KS = (5, 10)
#: Metric names of each level, in report order.
METRIC_NAMES = ("recall_any", "recall_all", "ndcg")


def _dcg(rels: Sequence[float], k: int) -> float:
    """LongMemEval's DCG: rank 1 undiscounted, rank i >= 2 divided by log2(i)."""
    r = np.asarray(rels, dtype=float)[:k]
    if not r.size:
        return 0.0
    return float(r[0] + np.sum(r[1:] / np.log2(np.arange(2, r.size + 1))))


def lme_turn_metrics(
    ranked: Sequence[str], corpus: Sequence[str], gold: Iterable[str], k: int
) -> Dict[str, float]:
    """LongMemEval's ``evaluate_retrieval``: ``ranked`` are corpus ids in rank order (the
    retrieved ones), ``corpus`` every corpus id of the haystack, ``gold`` the correct ids."""
    g = set(gold)
    top = set(ranked[:k])
    rels = [1.0 if c in g else 0.0 for c in ranked[:k]]
    ideal = _dcg(sorted((1.0 if c in g else 0.0 for c in corpus), reverse=True), k)
    return {
        "recall_any": float(any(c in top for c in g)),
        "recall_all": float(all(c in top for c in g)),
        "ndcg": _dcg(rels, k) / ideal if ideal else 0.0,
    }


def _strip_turn(cid: str) -> str:
    return "_".join(cid.split("_")[:-1])


def lme_session_metrics(
    ranked: Sequence[str], corpus: Sequence[str], gold: Iterable[str], k: int
) -> Dict[str, float]:
    """LongMemEval's ``evaluate_retrieval_turn2session`` on turn-level ids: k grows until
    the top k turns span k sessions (or the retrieved list ends), then the metrics are
    taken at that depth against the gold sessions."""
    gsess = {_strip_turn(c) for c in gold}
    r_s = [_strip_turn(c) for c in ranked]
    c_s = [_strip_turn(c) for c in corpus]
    eff = k
    while eff < len(r_s) and len(set(r_s[:eff])) < k:
        eff += 1
    return lme_turn_metrics(r_s, c_s, gsess, eff)


def published_metrics(
    ranked_sessions: Sequence[str], gold: Iterable[str], k: int
) -> Dict[str, float]:
    """The published style: sessions in first-retrieved order against ``gold``
    (``answer_session_ids``); NDCG's ideal is ``min(k, #gold)`` relevant sessions."""
    g = set(gold)
    order: List[str] = []
    for s in ranked_sessions:
        if s not in order:
            order.append(s)
    top = set(order[:k])
    ideal = _dcg([1.0] * min(k, len(g)), k)
    rels = [1.0 if s in g else 0.0 for s in order[:k]]
    return {
        "recall_any": float(any(s in top for s in g)),
        "recall_all": float(all(s in top for s in g)) if g else 0.0,
        "ndcg": _dcg(rels, k) / ideal if ideal else 0.0,
    }


def score_question(q: LmeQuestion, ranked_episode_ids: Sequence[str]) -> Dict[str, float]:
    """Every metric of one question's ranking (episode ids in rank order), flat:
    ``session.recall_all@5``, ``turn.ndcg@10``, ``published.recall_any@5``, … For the
    session unit, ``session.*`` is LongMemEval's ``evaluate_retrieval`` on session ids
    (there is no turn level)."""
    by_ep = {t.episode_id: t for t in q.turns}
    ranked = [by_ep[e] for e in ranked_episode_ids if e in by_ep]
    rc = [t.corpus_id for t in ranked]
    corpus = [t.corpus_id for t in q.turns]
    gold = q.gold_turns
    out: Dict[str, float] = {}
    for k in KS:
        if gold and q.unit == "session":
            for m, v in lme_turn_metrics(rc, corpus, gold, k).items():
                out[f"session.{m}@{k}"] = v
        elif gold:
            for lvl, fn in (("turn", lme_turn_metrics), ("session", lme_session_metrics)):
                for m, v in fn(rc, corpus, gold, k).items():
                    out[f"{lvl}.{m}@{k}"] = v
        for m, v in published_metrics(
            [t.session_id for t in ranked], q.answer_session_ids, k
        ).items():
            out[f"published.{m}@{k}"] = v
    return out
