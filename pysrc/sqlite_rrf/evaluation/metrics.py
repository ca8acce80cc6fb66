"""Ranking metrics as BEIR reports them (pytrec_eval / trec_eval definitions).

* **nDCG@k** — gain = the qrels grade (grades <= 0 give nothing), discount
  ``1/log2(rank + 1)``, normalised by the ideal DCG of the query's qrels (all its judged
  documents, whether or not they are in the corpus);
* **recall@k** — relevant documents (grade > 0) in the top k / all relevant documents;
* **MRR@k** — 1 / rank of the first relevant document in the top k (0 if none).

:func:`score_run` averages each over **every** query of a split: a query with nothing
relevant retrieved (or nothing retrieved) counts as 0, and so does a query without any
relevant judgment. A ranking may be given as a list of ids (in rank order) or as
``{doc_id: score}`` (ties broken as trec_eval does: by doc id, descending).
"""

from __future__ import annotations

import math
from typing import Dict, List, Mapping, Optional, Sequence, Union

__all__ = ["METRICS", "Qrels", "Ranking", "mrr_at_k", "ndcg_at_k", "recall_at_k", "score_run"]

#: A ranking: doc ids in rank order, or ``{doc_id: score}``.
Ranking = Union[Sequence[str], Mapping[str, float]]
#: Judgments: ``{query_id: {doc_id: grade}}``.
Qrels = Mapping[str, Mapping[str, int]]


def _ranked_list(ranked: Ranking) -> List[str]:
    """Doc ids in rank order. A mapping ``{doc_id: score}`` is sorted by score
    descending, ties by doc id descending (trec_eval's order); a repeated id in a list
    keeps its first (best) position."""
    if isinstance(ranked, Mapping):
        items = sorted(ranked.items(), key=lambda kv: (float(kv[1]), str(kv[0])), reverse=True)
        return [str(d) for d, _ in items]
    if isinstance(ranked, (str, bytes)):
        raise TypeError(
            "ranked must be a sequence of doc ids or a {doc_id: score} mapping, not a single string"
        )
    out: List[str] = []
    seen = set()
    for d in ranked:
        d = str(d)
        if d not in seen:
            seen.add(d)
            out.append(d)
    return out


def _check_k(k: int) -> None:
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ValueError(f"k must be a positive integer, got {k!r}")


def ndcg_at_k(ranked: Ranking, qrels_for_q: Mapping[str, int], k: int = 10) -> float:
    """nDCG@k of one ranking: Σ_{i≤k} grade(d_i)/log2(i+1) over the ideal DCG of the
    qrels (grades ≤ 0 give no gain). 0.0 when the query has no positive judgment."""
    _check_k(k)
    gains = sorted((g for g in qrels_for_q.values() if g > 0), reverse=True)[:k]
    idcg = sum(g / math.log2(i + 2) for i, g in enumerate(gains))
    if idcg <= 0:
        return 0.0
    dcg = 0.0
    for i, d in enumerate(_ranked_list(ranked)[:k]):
        g = qrels_for_q.get(d, 0)
        if g > 0:
            dcg += g / math.log2(i + 2)
    return dcg / idcg


def recall_at_k(ranked: Ranking, qrels_for_q: Mapping[str, int], k: int = 100) -> float:
    """Recall@k of one ranking: relevant documents (grade > 0) in the top k over all
    relevant documents of the query. 0.0 when the query has none."""
    _check_k(k)
    relevant = {d for d, g in qrels_for_q.items() if g > 0}
    if not relevant:
        return 0.0
    return len(relevant.intersection(_ranked_list(ranked)[:k])) / len(relevant)


def mrr_at_k(ranked: Ranking, qrels_for_q: Mapping[str, int], k: int = 10) -> float:
    """Reciprocal rank of the first relevant document (grade > 0) in the top k; 0.0 if
    there is none."""
    _check_k(k)
    for i, d in enumerate(_ranked_list(ranked)[:k]):
        if qrels_for_q.get(d, 0) > 0:
            return 1.0 / (i + 1)
    return 0.0


#: The metrics reported per run: name → (function, k).
METRICS = {"ndcg@10": (ndcg_at_k, 10), "recall@100": (recall_at_k, 100), "mrr@10": (mrr_at_k, 10)}


def score_run(
    rankings: Mapping[str, Ranking], qrels: Qrels, query_ids: Optional[Sequence[str]] = None
) -> Dict[str, float]:
    """The mean of each metric of :data:`METRICS` over ``query_ids`` (default: every
    query of ``qrels``); a query without a ranking counts as 0."""
    qids = list(qrels) if query_ids is None else list(query_ids)
    if not qids:
        raise ValueError("no queries to score")
    out: Dict[str, float] = {}
    for name, (fn, k) in METRICS.items():
        out[name] = sum(fn(rankings.get(q, []), qrels.get(q, {}), k) for q in qids) / len(qids)
    return out
