"""Agent-memory evaluation on LongMemEval's JSON format (``sqlite-rrf eval FILE.json[.xz]``).

LongMemEval (Wu et al., ICLR 2025, github.com/xiaowu0162/LongMemEval) gives each question a
*haystack*: a chat history of dated sessions, a few of which hold the evidence. Here
each question's haystack becomes its own memory — a fresh in-memory
:class:`~sqlite_rrf.store.Store` — and the question is asked of it through
:meth:`Store.recall <sqlite_rrf.store.Store.recall>`, the product's own statement, with
``now`` = the question's date, the question's vector given, ``limit`` 50, ``touch=False``,
``force=True``.

**The episode unit** (``unit``) is ``'session'`` by default: one episode per session,
its user messages joined by a blank line, ``created_at`` = the session's date (UTC);
``'turn'`` gives one episode per non-empty user message instead. Both are LongMemEval's
own granularities (``run_retrieval.py --granularity session|turn``), so each has the
benchmark's definitions: the session unit its session-level metrics, the turn unit its
turn-level ones and the session level through ``turn2session``. Why the session is the
default: the benchmark's evidence is a session (``answer_session_ids``) and its questions
ask about what happened in one ("how many doctor's appointments in March" is answered
by a few turns of each of three sessions), so a memory of sessions recalls the evidence
whole; with one episode per turn, LongMemEval's ``turn2session`` counts the other turns of
an evidence session as a separate, wrong session (``noans_…``), and those turns — on the
same topic as the evidence — take the slots of the other evidence sessions (22 of the 41
misses of recall_all@5 at the turn unit had every evidence session among the first five
sessions retrieved). The turn unit stays available for the turn-level metrics. Assistant
messages are not indexed (as in LongMemEval's own retrieval): they are 7x longer and
mostly generic.

**Metrics, as LongMemEval defines them** (``src/retrieval/eval_utils.py`` and
``run_retrieval.py``, reimplemented here):

* corpus ids: a user turn's id is ``<session id>_<turn number, from 1, counting every
  message>``; in an evidence session (``answer`` in its id) a turn without
  ``has_answer`` is renamed ``noans_…``. The gold turns are the ids that still contain
  ``answer``: the ``has_answer`` user turns of evidence sessions.
* turn level: ``recall_any@k`` (a gold turn in the top k), ``recall_all@k`` (every gold
  turn in the top k), ``ndcg_any@k`` (binary gains, log2 discount with rank 1
  undiscounted, the ideal DCG over every turn of the haystack).
* session level (``evaluate_retrieval_turn2session``): each turn id loses its last
  ``_N`` (so ``noans_X`` and ``answer_X`` are different "sessions"), k grows until the top
  k turns span k distinct sessions, and the turn-level metrics are taken at that depth
  against the evidence sessions. NDCG there still counts gold *turns*.
* averages skip abstention questions (``_abs``) and questions with no ``has_answer`` user
  turn (LongMemEval does the same): 215 of the dev half's 255 questions are scored.

**The style agent-memory projects publish** (``published``): the ranked turns are mapped
to their sessions in first-retrieved order, gold = ``answer_session_ids``, every question
(abstention included); ``recall_any@k``, ``recall_all@k`` and NDCG@k with binary gains
and the ideal DCG of ``min(k, #gold)`` relevant sessions (the standard ideal; MemPalace's
script takes the ideal over the retrieved list only, which is more lenient).

Abstention questions are also reported on their own (``abstention``): there silence is
right, and the per-question output carries each run's top hits with their scores so
that a relevance floor can be measured.

Vectors come from an :class:`~sqlite_rrf.evaluation.embcache.EmbeddingCache` (keyed by
the model and the text's hash); the first run embeds ~54,000 user turns (about 15
minutes on two cores) with a progress bar, a rerun reads them back in seconds.

Python entry point::

    from sqlite_rrf.evaluation.longmemeval import evaluate_longmemeval, format_lme_table
    res = evaluate_longmemeval("longmemeval_s_dev.json.xz", runs=["default", "bm25"],
                               per_question=True)   # limit=..., question_ids=..., types=...
    print(format_lme_table(res))
    res["per_question"]["default"]["<question id>"]  # ranked ids, top hits, metrics

or ``python -m sqlite_rrf.evaluation.longmemeval FILE [--run NAME ...] [--json]``, or
``sqlite-rrf eval FILE``.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np

from .._version import __version__
from ..store import PROFILES, Store
from .embcache import EmbeddingCache, default_cache_path, embed_cached, model_fingerprint
from .longmemeval_data import (
    DEFAULT_UNIT,
    UNITS,
    LmeQuestion,
    LongMemEvalFormatError,
    load_longmemeval,
)
from .longmemeval_metrics import score_question
from .progress import progress_bar

__all__ = ["LME_DEPTH", "evaluate_longmemeval", "format_lme_table", "lme_runs", "main"]

#: Results asked of each recall (the issue's protocol: limit 50).
LME_DEPTH = 50


# -- runs --------------------------------------------------------------------------------

#: A vector pool that holds every turn of any haystack.
_EVERY = 1_000_000


def lme_runs() -> Dict[str, Tuple[str, Dict[str, Any], bool]]:
    """The runs: name -> (description, Store.recall parameters, send the query vector).

    ``default`` is the recall as users run it (every default); ``bm25`` and ``vector``
    are the two lists alone; each profile is that profile with every other default
    (time is real here, so recency and access keep their default weights)."""
    runs: Dict[str, Tuple[str, Dict[str, Any], bool]] = {
        "default": ("every default", {}, True),
        "bm25": (
            "BM25 list alone (pool 'recent' of size 0, no query vector)",
            {
                "profile": "rrf",
                "weights": (1.0, 0.0, 0.0, 0.0),
                "pool": "recent",
                "pool_size": 0,
                "bm25_limit": 1000,
            },
            False,
        ),
        "vector": (
            "vector list alone, exact cosine over every turn",
            {"profile": "rrf", "weights": (0.0, 1.0, 0.0, 0.0), "pool": "all", "pool_size": _EVERY},
            True,
        ),
    }
    for p in PROFILES:
        runs[p] = (f"profile {p!r}, every other default", {"profile": p}, True)
    return runs


# -- the evaluation ----------------------------------------------------------------------


def _build_memory(q: LmeQuestion, vecs: Mapping[str, np.ndarray]) -> Store:
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
    return st


def _hit_summary(h: Any) -> Dict[str, Any]:
    d = {"id": h.id, "score": h.score, "similarity": h.similarity, "bm25_score": h.bm25_score}
    for extra in ("relevance",):
        if hasattr(h, extra):
            d[extra] = getattr(h, extra)
    return d


def _mean(xs: Sequence[float]) -> float:
    return float(np.mean(xs)) if xs else float("nan")


def _aggregate(
    questions: Sequence[LmeQuestion], scores: Mapping[str, Mapping[str, float]]
) -> Dict[str, Any]:
    """Means per group: LongMemEval's (scored questions; overall and per type),
    published (every question; overall and per type), abstention (published metrics)."""
    out: Dict[str, Any] = {"lme": {}, "published": {}, "abstention": {}}
    groups: Dict[str, List[LmeQuestion]] = {"all": [q for q in questions if q.scored]}
    for q in questions:
        if q.scored:
            groups.setdefault(q.question_type, []).append(q)
    for g, qs in groups.items():
        keys = [k for k in scores[qs[0].question_id] if not k.startswith("published.")]
        out["lme"][g] = {
            "n": len(qs),
            **{k: _mean([scores[q.question_id][k] for q in qs]) for k in keys},
        }
    pgroups: Dict[str, List[LmeQuestion]] = {"all": list(questions)}
    for q in questions:
        pgroups.setdefault(q.question_type, []).append(q)
    for g, qs in pgroups.items():
        keys = [k for k in scores[qs[0].question_id] if k.startswith("published.")]
        out["published"][g] = {
            "n": len(qs),
            **{k: _mean([scores[q.question_id][k] for q in qs]) for k in keys},
        }
    abs_q = [q for q in questions if q.abstention]
    if abs_q:
        keys = [k for k in scores[abs_q[0].question_id] if k.startswith("published.")]
        out["abstention"] = {
            "n": len(abs_q),
            **{k: _mean([scores[q.question_id][k] for q in abs_q]) for k in keys},
        }
    return out


def evaluate_longmemeval(
    path: str,
    *,
    unit: str = DEFAULT_UNIT,
    runs: Optional[Sequence[str]] = None,
    run_params: Optional[Mapping[str, Mapping[str, Any]]] = None,
    extra_runs: Optional[Mapping[str, Mapping[str, Any]]] = None,
    limit: Optional[int] = None,
    question_ids: Optional[Sequence[str]] = None,
    types: Optional[Sequence[str]] = None,
    cache_path: Optional[str] = None,
    model_path: Optional[str] = None,
    embedder: Optional[Callable[[], Any]] = None,
    progress: bool = False,
    per_question: bool = False,
    top_hits: int = 10,
    recall: Optional[Callable[..., Any]] = None,
) -> Dict[str, Any]:
    """Evaluate the recall on a LongMemEval file (see the module docstring).

    Args:
        path: the ``.json`` or ``.json.xz`` file.
        unit: the episode unit, ``'session'`` (default) or ``'turn'`` (:data:`UNITS`).
        runs: run names of :func:`lme_runs` (default: all).
        run_params: per run, Store.recall parameters that override the run's.
        extra_runs: more runs, name -> Store.recall parameters (the vector is sent).
        limit: only the first ``limit`` questions (after ``question_ids``/``types``).
        question_ids, types: only these questions / question types.
        cache_path: the embedding cache (default
            :func:`~sqlite_rrf.evaluation.embcache.default_cache_path`).
        model_path: the GGUF model (default: ``$SQLITE_RRF_MODEL``, else the default model).
        embedder: a factory of an embedder, called only when a text is not cached.
        progress: progress bars on stderr.
        per_question: also return, per run and question, the ranked ids, the top
            ``top_hits`` hits (id, score, similarity, bm25 score) and the metrics.
        recall: instead of ``Store.recall`` (for offline experiments): a function
            ``(store, question, qvec, now, params) -> hits``.

    Returns:
        a dict with ``runs`` (per run: ``lme``, ``published`` and ``abstention``
        aggregates), ``questions``, ``timings``, ``notes`` and, if asked, ``per_question``.
    """
    t0 = time.perf_counter()
    questions = load_longmemeval(path, unit)
    if question_ids is not None:
        wanted = set(question_ids)
        questions = [q for q in questions if q.question_id in wanted]
    if types is not None:
        questions = [q for q in questions if q.question_type in set(types)]
    if limit is not None:
        questions = questions[:limit]
    if not questions:
        raise ValueError("no question selected")
    specs = lme_runs()
    for name, p in (extra_runs or {}).items():
        specs[name] = (f"extra run {name}", dict(p), True)
    names = list(specs) if runs is None else list(dict.fromkeys(runs))
    for n in names:
        if n not in specs:
            raise ValueError(f"unknown run {n!r}; the runs are: {', '.join(specs)}")
    for n in run_params or {}:
        if n not in specs:
            raise ValueError(f"run_params: unknown run {n!r}")
    t_load = time.perf_counter() - t0

    # vectors: every question and every user turn, through the cache
    from ..embedding.embedder import Embedder
    from ..embedding.models import DEFAULT_N_CTX, choose_model, resolve_model

    model = resolve_model(model_path or choose_model())
    made: List[Any] = []

    def factory() -> Any:
        if embedder is not None:
            e = embedder()
        else:
            e = Embedder(model, n_threads=min(2, os.cpu_count() or 1))
        made.append(e)
        return e

    texts = [q.question for q in questions] + [t.content for q in questions for t in q.turns]
    t1 = time.perf_counter()
    with EmbeddingCache(model_fingerprint(model, DEFAULT_N_CTX), cache_path) as cache:
        mat, n_embedded, _emb_secs = embed_cached(
            texts, cache, factory, progress=progress, desc="embedding (cached for reruns)"
        )
        cache_file = cache.path
    for e in made:
        e.close()
    vecs = {t: mat[i] for i, t in enumerate(texts)}
    t_emb = time.perf_counter() - t1

    scores: Dict[str, Dict[str, Dict[str, float]]] = {n: {} for n in names}
    perq: Dict[str, Dict[str, Any]] = {n: {} for n in names}
    lat: Dict[str, List[float]] = {n: [] for n in names}
    t_build = 0.0
    bar = progress_bar(len(questions), "questions", progress)
    try:
        for q in questions:
            tb = time.perf_counter()
            st = _build_memory(q, vecs)
            t_build += time.perf_counter() - tb
            try:
                qv = vecs[q.question]
                for n in names:
                    _, params, send_vec = specs[n]
                    kw = dict(params)
                    kw.update((run_params or {}).get(n, {}))
                    tq = time.perf_counter()
                    if recall is not None:
                        hits = recall(
                            st, q.question, qv if send_vec else None, q.question_date_ms, kw
                        )
                    else:
                        kw.setdefault("now", q.question_date_ms)
                        hits = st.recall(
                            q.question,
                            LME_DEPTH,
                            touch=False,
                            force=True,
                            qvec=qv if send_vec else None,
                            **kw,
                        )
                    lat[n].append(time.perf_counter() - tq)
                    ids = [h.id for h in hits]
                    s = score_question(q, ids)
                    scores[n][q.question_id] = s
                    if per_question:
                        perq[n][q.question_id] = {
                            "type": q.question_type,
                            "abstention": q.abstention,
                            "scored": q.scored,
                            "ranked": ids,
                            "top": [_hit_summary(h) for h in list(hits)[:top_hits]],
                            "metrics": s,
                        }
            finally:
                st.close()
            if bar is not None:
                bar.update(1)
    finally:
        if bar is not None:
            bar.close()

    out: Dict[str, Any] = {
        "benchmark": "longmemeval",
        "file": os.path.abspath(path),
        "unit": unit,
        "questions": len(questions),
        "scored": sum(q.scored for q in questions),
        "abstention": sum(q.abstention for q in questions),
        "episodes": sum(len(q.turns) for q in questions),
        "runs": {n: _aggregate(questions, scores[n]) for n in names},
        "params": {
            n: {
                k: (list(v) if isinstance(v, tuple) else v)
                for k, v in {**specs[n][1], **(run_params or {}).get(n, {})}.items()
            }
            for n in names
        },
        "timings": {
            "load_seconds": round(t_load, 3),
            "embedding_seconds": round(t_emb, 3),
            "embedded_texts": n_embedded,
            "build_seconds": round(t_build, 3),
            "total_seconds": round(time.perf_counter() - t0, 3),
            "ms_per_query_median": {n: round(1000 * float(np.median(lat[n])), 3) for n in names},
        },
        "embedding_cache": cache_file,
        "version": __version__,
        "notes": [
            "one memory per question (an in-memory Store); "
            + (
                "one episode per session (its user messages joined)"
                if unit == "session"
                else "one episode per non-empty user turn"
            )
            + ", created_at = accessed_at = its session's date (UTC); Store.recall with "
            f"limit {LME_DEPTH}, now = the question's date, the question's vector, "
            "touch=False, force=True",
            (
                "lme: LongMemEval's own definitions (eval_utils.py, granularity session): "
                "evaluate_retrieval on session ids, an evidence session without a has_answer "
                "user turn renamed noans; "
                if unit == "session"
                else "lme: LongMemEval's own definitions (eval_utils.py, granularity turn): turn "
                "level on has_answer turns, session level through turn2session (k grows until "
                "k distinct sessions); "
            )
            + "averaged over the non-abstention questions with a has_answer user turn",
            "published: sessions in first-retrieved order, gold = answer_session_ids, every "
            "question; NDCG ideal = min(k, #gold)",
        ],
    }
    if per_question:
        out["per_question"] = perq
    return out


def _c(m: Mapping[str, float], key: str, w: int) -> str:
    """A table cell: the value to 3 decimals, or '-' when the unit has no such metric."""
    v = m.get(key)
    return f"{'-':>{w}}" if v is None or math.isnan(v) else f"{v:{w}.3f}"


def format_lme_table(res: Mapping[str, Any]) -> str:
    """The results as text: per run the headline numbers, then per question type."""
    lines = [
        f"LongMemEval ({os.path.basename(res['file'])}, one episode per "
        f"{res.get('unit', 'turn')}): {res['questions']} questions, "
        f"{res['scored']} scored by LongMemEval's rules, {res['abstention']} abstention, "
        f"{res['episodes']:,} episodes",
        "",
    ]
    head = (
        f"{'run':<10} {'any@5':>6} {'all@5':>6} {'all@10':>6} {'ndcg@10':>7} |"
        f" {'t.any@5':>7} {'t.all@10':>8} {'t.ndcg@10':>9} | {'pub.any@5':>9}"
        f" {'pub.all@5':>9} {'pub.ndcg@10':>11} | {'ms':>5}"
    )
    lines += [
        "session level (LongMemEval's definitions) | turn level | published style",
        head,
        "-" * len(head),
    ]
    for n, r in res["runs"].items():
        a = r["lme"].get("all", {})
        p = r["published"].get("all", {})
        ms = res["timings"]["ms_per_query_median"].get(n, float("nan"))
        lines.append(
            f"{n:<10} {_c(a, 'session.recall_any@5', 6)} {_c(a, 'session.recall_all@5', 6)} "
            f"{_c(a, 'session.recall_all@10', 6)} {_c(a, 'session.ndcg@10', 7)} | "
            f"{_c(a, 'turn.recall_any@5', 7)} {_c(a, 'turn.recall_all@10', 8)} "
            f"{_c(a, 'turn.ndcg@10', 9)} | {_c(p, 'published.recall_any@5', 9)} "
            f"{_c(p, 'published.recall_all@5', 9)} {_c(p, 'published.ndcg@10', 11)} | "
            f"{ms:5.1f}"
        )
    types = sorted({t for r in res["runs"].values() for t in r["published"] if t != "all"})
    lines += ["", "per question type, session.recall_all@5 (LongMemEval) / published.recall_all@5"]
    w = max(len(t) for t in types) if types else 4
    lines.append(f"{'run':<10} " + " ".join(f"{t[:w]:>{w}}" for t in types))
    for n, r in res["runs"].items():
        cells = []
        for t in types:
            a = r["lme"].get(t, {}).get("session.recall_all@5")
            p = r["published"].get(t, {}).get("published.recall_all@5")
            cells.append(
                ("  -  " if a is None else f"{a:.3f}")
                + "/"
                + ("  -  " if p is None else f"{p:.3f}")
            )
        lines.append(f"{n:<10} " + " ".join(f"{c:>{w}}" for c in cells))
    t = res["timings"]
    lines += [
        "",
        f"wall {t['total_seconds']:.1f} s (embedding {t['embedding_seconds']:.1f} s, "
        f"{t['embedded_texts']} texts embedded; building memories "
        f"{t['build_seconds']:.1f} s); embedding cache {res['embedding_cache']}",
        "",
        "notes:",
    ] + [f"  - {x}" for x in res["notes"]]
    return "\n".join(lines)


def main(argv: Optional[Sequence[str]] = None) -> int:
    """``python -m sqlite_rrf.evaluation.longmemeval FILE [--run NAME ...] [--json]``."""
    ap = argparse.ArgumentParser(
        prog="python -m sqlite_rrf.evaluation.longmemeval",
        description="LongMemEval retrieval through Store.recall",
    )
    ap.add_argument("file")
    ap.add_argument("--run", nargs="+", action="extend", default=None)
    ap.add_argument("--unit", choices=UNITS, default=DEFAULT_UNIT)
    ap.add_argument("--limit", type=int, default=None)
    ap.add_argument("--type", nargs="+", action="extend", default=None, dest="types")
    ap.add_argument(
        "--cache", default=None, help=f"embedding cache (default {default_cache_path()})"
    )
    ap.add_argument("--model", default=None)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--per-question", action="store_true")
    ap.add_argument("--no-progress", action="store_true")
    a = ap.parse_args(argv)
    try:
        res = evaluate_longmemeval(
            a.file,
            unit=a.unit,
            runs=a.run,
            limit=a.limit,
            types=a.types,
            cache_path=a.cache,
            model_path=a.model,
            progress=not a.no_progress and sys.stderr.isatty(),
            per_question=a.per_question,
        )
    except (LongMemEvalFormatError, ValueError, RuntimeError) as e:
        print(f"longmemeval: {e}", file=sys.stderr)
        return 1
    print(json.dumps(res, indent=1) if a.json else format_lme_table(res))
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
