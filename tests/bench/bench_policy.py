"""The shown-hit policy of the recall statement: what an agent is shown, measured.

The statement shows a hit only when its relevance reaches ``:min_relevance`` and is at
least ``:min_share`` of the best returned hit's (``sql/recall/top.sql``, 7d). This bench
recalls each question once without the policy (``min_relevance=None``, the hook's limit
or ``--limit``), keeps every returned hit's relevance, and applies each rule of a grid
to those lists (the policy is a filter on the returned rows, so a rule's shown set is
exactly what the statement returns with it; ``--check`` reruns the statement with the
chosen rule on every question and asserts that).

Per rule, over the answerable questions of each set:

- ``shown``: the mean number of hits shown;
- ``evidence_share``: the share of shown hits that are evidence;
- ``recall_any`` / ``recall_all``: whether some / every gold item is shown;
- ``silent``: the share of questions shown nothing.

Sets: the LongMemEval_S dev half (``--unit session`` or ``turn``; gold: LongMemEval's
gold turns, i.e. the evidence sessions at the session unit) and SciFact **train**
(``--scifact``; gold: the qrels). Each LongMemEval question is asked of its own
haystack (as ``sqlite-rrf eval`` builds it; vectors from the evaluation's embedding
cache), with ``now`` = the question's date.

    python tests/bench/bench_policy.py --unit session --json /tmp/policy_session.json
    python tests/bench/bench_policy.py --scifact --json /tmp/policy_scifact.json
    python tests/bench/bench_policy.py --from /tmp/policy_session.json   # the sweep only
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

ROOT = Path(__file__).resolve().parents[3]
LME = ROOT / "shared" / "data" / "longmemeval-s" / "longmemeval_s_dev.json.xz"
SCIFACT = ROOT / "shared" / "data" / "scifact"

FLOORS = (0.0, 0.05, 0.1, 0.12, 0.14, 0.17, 0.2, 0.25)
SHARES = (0.0, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)


def lme_lists(
    unit: str, limit: int, n: Optional[int], only: Optional[Sequence[str]] = None
) -> List[Dict[str, Any]]:
    """Per answerable question: type, the returned hits (corpus id, relevance), gold."""
    from sqlite_rrf.embedding.models import DEFAULT_N_CTX, choose_model, resolve_model
    from sqlite_rrf.evaluation.embcache import EmbeddingCache, model_fingerprint
    from sqlite_rrf.evaluation.longmemeval import load_longmemeval
    from sqlite_rrf.store import Store

    qs = [q for q in load_longmemeval(str(LME), unit) if q.scored]
    if only is not None:
        qs = [q for q in qs if q.question_id in set(only)]
    if n:
        qs = qs[:: max(1, len(qs) // n)][:n]
    model = resolve_model(choose_model())
    texts = [q.question for q in qs] + [t.content for q in qs for t in q.turns]
    with EmbeddingCache(model_fingerprint(model, DEFAULT_N_CTX), None) as cache:
        found, missing = cache.get_many(list(dict.fromkeys(texts)))
        if missing:
            raise SystemExit(f"{len(missing)} texts are not in the embedding cache: run eval first")
        uniq = list(dict.fromkeys(texts))
        vecs = {uniq[i]: v for i, v in found.items()}
    out = []
    for q in qs:
        st = Store(":memory:")
        st.add_many(
            [
                {
                    "id": t.episode_id,
                    "content": t.content,
                    "embedding": vecs[t.content],
                    "created_at": t.created_at,
                    "accessed_at": t.created_at,
                }
                for t in q.turns
            ]
        )
        by_ep = {t.episode_id: t for t in q.turns}
        hits = st.recall(
            q.question,
            limit,
            qvec=vecs[q.question],
            now=q.question_date_ms,
            touch=False,
            force=True,
        )
        out.append(
            {
                "qid": q.question_id,
                "type": q.question_type,
                "hits": [[by_ep[h.id].corpus_id, h.relevance] for h in hits],
                "gold": q.gold_turns,
            }
        )
        st.close()
    return out


def scifact_lists(limit: int, n: Optional[int]) -> List[Dict[str, Any]]:
    """Per SciFact train query: the returned hits (doc id, relevance) and the qrels."""
    from sqlite_rrf.evaluation.beir import load_beir
    from sqlite_rrf.evaluation.cached_store import build_store

    data = load_beir(str(SCIFACT), "train")
    st = build_store(data, progress=False)
    out = []
    idx = list(range(len(data.query_ids)))
    if n:
        idx = idx[:: max(1, len(idx) // n)][:n]
    for i in idx:
        qid = data.query_ids[i]
        gold = sorted(d for d, s in data.qrels.get(qid, {}).items() if s > 0)
        if not gold:
            continue
        hits = st.recall(
            data.query_texts[i],
            limit,
            qvec=data.query_embeddings[i],
            touch=False,
            force=True,
        )
        out.append(
            {
                "qid": qid,
                "type": "scifact",
                "hits": [[h.id, h.relevance] for h in hits],
                "gold": gold,
            }
        )
    st.close()
    return out


def shown(hits: Sequence[Tuple[str, float]], floor: float, share: float) -> List[str]:
    """The statement's policy (top.sql 7d) on one returned list."""
    if not hits:
        return []
    best = max(r for _, r in hits)
    return [i for i, r in hits if r >= floor and r >= share * best]


def measure(lists: Sequence[Dict[str, Any]], floor: float, share: float) -> Dict[str, float]:
    n = len(lists)
    tot_shown = ev = anyk = allk = silent = 0
    for q in lists:
        s = shown(q["hits"], floor, share)
        gold = set(q["gold"])
        tot_shown += len(s)
        ev += sum(1 for i in s if i in gold)
        anyk += bool(gold & set(s))
        allk += gold <= set(s)
        silent += not s
    return {
        "shown": tot_shown / n,
        "evidence_share": ev / tot_shown if tot_shown else float("nan"),
        "recall_any": anyk / n,
        "recall_all": allk / n,
        "silent": silent / n,
    }


def sweep(lists: Sequence[Dict[str, Any]]) -> str:
    rows = ["| floor | share | shown | evidence share | recall_any | recall_all | silent |"]
    rows.append("|" + " --- |" * 7)
    for f in FLOORS:
        for s in SHARES:
            m = measure(lists, f, s)
            rows.append(
                f"| {f:g} | {s:g} | {m['shown']:.2f} | {m['evidence_share']:.3f} | "
                f"{m['recall_any']:.3f} | {m['recall_all']:.3f} | {m['silent']:.3f} |"
            )
    return "\n".join(rows)


def main(argv: Optional[Sequence[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--unit", default="session", choices=("session", "turn"))
    ap.add_argument("--scifact", action="store_true", help="SciFact train instead")
    ap.add_argument("--limit", type=int, default=3, help="hits returned (the hook's: 3)")
    ap.add_argument("--n", type=int, default=None, help="a subsample of questions")
    ap.add_argument("--questions", help="a file of question ids (one a line): only these")
    ap.add_argument("--json", help="save the lists here")
    ap.add_argument("--from", dest="src", help="read saved lists instead of recalling")
    a = ap.parse_args(argv)
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    if a.src:
        with open(a.src, encoding="utf-8") as f:
            lists = json.load(f)
    elif a.scifact:
        lists = scifact_lists(a.limit, a.n)
    else:
        only = open(a.questions).read().split() if a.questions else None
        lists = lme_lists(a.unit, a.limit, a.n, only)
    if a.json:
        with open(a.json, "w", encoding="utf-8") as f:
            json.dump(lists, f)
    print(f"{len(lists)} questions")
    print(sweep(lists))
    return 0


if __name__ == "__main__":
    sys.exit(main())
