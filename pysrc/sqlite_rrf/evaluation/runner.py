"""The evaluation itself: every query of a split through ``Store.recall``, per run, scored.

:func:`evaluate` loads a collection (:mod:`.beir`) into a cached store (:mod:`.cached_store`),
sends every query of a split through :meth:`Store.recall <sqlite_rrf.store.Store.recall>`
— the product's own SQL statement; there is no second scoring code path here — for each
run (:mod:`.runs`), in this process or in worker processes (:mod:`.workers`), and reports
nDCG@10, recall@100 and MRR@10 per run (:mod:`.metrics`). Vectors missing from the
collection's embedding caches are embedded with an :class:`~sqlite_rrf.embedding.embedder.Embedder`
(the default all-MiniLM-L6-v2 unless a model is given).
"""

from __future__ import annotations

import math
import time
from concurrent.futures import as_completed
from typing import TYPE_CHECKING, Any, Dict, Iterable, List, Mapping, Optional

import numpy as np

from .._version import __version__
from ..store import StoreError
from .beir import PathLike, load_beir
from .cached_store import EvalCacheError, build_store, make_embedder
from .metrics import METRICS, score_run
from .progress import progress_bar
from .runs import DEPTH, RUN_PARAMETERS, available_runs, resolve_runs
from .workers import recall_queries, start_workers

if TYPE_CHECKING:
    from ..embedding.embedder import Embedder

__all__ = ["evaluate"]


def evaluate(
    data_dir: PathLike,
    runs: Optional[Iterable[str]] = None,
    split: str = "test",
    profile_params: Optional[Mapping[str, Mapping[str, Any]]] = None,
    progress: bool = True,
    *,
    db_path: Optional[PathLike] = None,
    embedder: Optional[Embedder] = None,
    model_path: Optional[str] = None,
    per_query: bool = False,
    rebuild: bool = False,
    jobs: int = 1,
    knn: bool = False,
) -> Dict[str, Any]:
    """Evaluate runs (default: every run of :func:`available_runs`) on one split.

    ``profile_params`` maps a run name to extra or overriding ``Store.recall`` keyword
    arguments (e.g. ``{"convex": {"alpha": 0.6}}``). ``db_path`` / ``embedder`` /
    ``model_path`` / ``rebuild`` / ``knn`` go to :func:`build_store` (the embedder is needed only
    for vectors missing from the caches). ``jobs`` > 1 spreads the queries over that
    many processes (each opens the database read-only in effect: ``touch=False``);
    the per-query latencies are then measured under that concurrency. Every query
    goes through ``Store.recall`` with ``limit=100, touch=False, force=True`` and its
    cached (or embedded) vector.

    Returns ``{"runs": {name: {"ndcg@10", "recall@100", "mrr@10"}}, "split",
    "queries", "corpus", "collection", "data_dir", "db", "params", "timings",
    "notes"}`` (and ``"per_query": {name: {qid: {metric: value}}}`` when asked).
    """
    if isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1:
        raise ValueError(f"jobs: must be a positive integer, got {jobs!r}")
    t0 = time.perf_counter()
    specs = available_runs()
    names = resolve_runs(runs, specs)
    profile_params = dict(profile_params or {})
    for r, ps in profile_params.items():
        if r not in specs:
            raise ValueError(f"profile_params: unknown run {r!r}; the runs are: {', '.join(specs)}")
        bad = [p for p in ps if p not in RUN_PARAMETERS]
        if bad:
            raise ValueError(
                f"profile_params: {r}: {bad[0]!r} is not a parameter of "
                f"Store.recall that a run may set ({', '.join(RUN_PARAMETERS)})"
            )
    # Worker processes start first, before this process opens a database or loads a
    # model: a forked child must not inherit either.
    pool_exec = start_workers(jobs)
    try:
        data = load_beir(data_dir, split)
        t_load = time.perf_counter() - t0

        own_embedder = None
        if data.needs_embedder() and embedder is None:
            own_embedder = embedder = make_embedder(None, model_path)
        model_used = getattr(embedder, "model_name", None) or type(embedder).__name__
        try:
            t1 = time.perf_counter()
            qvecs = None if data.query_embeddings is None else data.query_embeddings.copy()
            if data.query_missing:
                assert embedder is not None  # needs_embedder(): made above when not given
                embedded = embedder.embed_many(
                    [data.query_texts[i] for i in data.query_missing],
                    progress=progress,
                    desc="embedding queries",
                )
                if qvecs is None:
                    qvecs = np.zeros((len(data.query_ids), embedded.shape[1]), dtype=np.float32)
                elif embedded.shape[1] != qvecs.shape[1]:
                    raise EvalCacheError(
                        f"the model gives {embedded.shape[1]}-dimensional vectors "
                        f"but the query embedding cache is {qvecs.shape[1]}-"
                        "dimensional"
                    )
                qvecs[np.asarray(data.query_missing, dtype=int)] = embedded
            t_qemb = time.perf_counter() - t1
            t2 = time.perf_counter()
            store = build_store(
                data,
                db_path,
                embedder=embedder if data.corpus_missing else None,
                progress=progress,
                model_path=model_path,
                rebuild=rebuild,
                knn=knn,
            )
            # Query vectors are always passed explicitly (qvec); a run without one (bm25)
            # must not have the store embed the query.
            store.embedder = None
            t_store = time.perf_counter() - t2
        finally:
            if own_embedder is not None:
                own_embedder.close()
        assert qvecs is not None

        results: Dict[str, Dict[str, float]] = {}
        timings: Dict[str, Dict[str, float]] = {}
        used: Dict[str, Dict[str, Any]] = {}
        per_q: Dict[str, Dict[str, Dict[str, float]]] = {}
        try:
            corpus_n = store.count()
            for name in names:
                spec = specs[name]
                kwargs = dict(spec.params)
                kwargs.update(profile_params.get(name, {}))
                used[name] = {
                    k: (list(v) if isinstance(v, tuple) else v) for k, v in kwargs.items()
                }
                queries = [
                    (qid, qtext, qvecs[qi] if spec.vector else None)
                    for qi, (qid, qtext) in enumerate(zip(data.query_ids, data.query_texts))
                ]
                rankings: Dict[str, List[str]] = {}
                lat: List[float] = []
                bar = progress_bar(len(queries), f"{name:>8}", progress)
                t_run = time.perf_counter()
                try:
                    if pool_exec is None:
                        for qid, ids, sec in recall_queries(store, kwargs, queries, bar):
                            rankings[qid] = ids
                            lat.append(sec)
                    else:
                        size = max(1, math.ceil(len(queries) / (4 * jobs)))
                        futures = [
                            pool_exec.submit(
                                recall_queries, store.path, kwargs, queries[i : i + size]
                            )
                            for i in range(0, len(queries), size)
                        ]
                        for fut in as_completed(futures):
                            part = fut.result()
                            for qid, ids, sec in part:
                                rankings[qid] = ids
                                lat.append(sec)
                            if bar is not None:
                                bar.update(len(part))
                except StoreError as e:
                    raise StoreError(f"run {name}: {e}") from None
                finally:
                    if bar is not None:
                        bar.close()
                wall = time.perf_counter() - t_run
                results[name] = score_run(rankings, data.qrels, data.query_ids)
                timings[name] = {
                    "seconds": round(wall, 3),
                    "ms_per_query_median": round(1000 * float(np.median(lat)), 3),
                    "ms_per_query_p95": round(1000 * float(np.percentile(lat, 95)), 3),
                }
                if per_query:
                    per_q[name] = {
                        q: {m: fn(rankings[q], data.qrels[q], k) for m, (fn, k) in METRICS.items()}
                        for q in data.query_ids
                    }
            db = store.path
        finally:
            store.close()

        notes = [
            "recency and access weights are 0 in every run: a BEIR collection has no time or "
            "usage signal (every document is loaded with the same created_at/accessed_at and "
            "access_count 0)",
            f"every query goes through Store.recall (sql/recall.sql), limit {DEPTH}, touch=False, "
            "force=True; nDCG@10, recall@100 and MRR@10 as pytrec_eval/BEIR define them, averaged "
            "over every query of the split (a query with no relevant document retrieved counts 0)",
            "vectors: "
            + (
                "the collection's embedding caches"
                if not data.needs_embedder()
                else f"{len(data.corpus_missing)} document(s) and "
                f"{len(data.query_missing)} query(ies) embedded with {model_used} "
                "(not in the caches)"
            ),
        ]
        notes.append(
            'BM25 is FTS5\'s bm25() (k1 1.2, b 0.75) over one column, title + " " + '
            "text, the store's tokenizer (stemmed); the query is the OR of its distinct "
            "tokens (fts5_query)"
        )
        if "bm25" in names:
            notes.append(
                "bm25: the BM25 list alone — an empty vector pool (pool 'recent', "
                "pool_size 0) and no query vector, so the candidates are the FTS5 hits"
            )
        notes.extend(data.notes)
        out: Dict[str, Any] = {
            "runs": results,
            "split": split,
            "queries": len(data.query_ids),
            "corpus": corpus_n,
            "collection": data.name,
            "data_dir": data.data_dir,
            "db": db,
            "params": used,
            "timings": {
                "load_seconds": round(t_load, 3),
                "store_seconds": round(t_store, 3),
                "query_embedding_seconds": round(t_qemb, 3),
                "total_seconds": round(time.perf_counter() - t0, 3),
                "runs": timings,
            },
            "version": __version__,
            "notes": notes,
        }
        if per_query:
            out["per_query"] = per_q
        return out
    finally:
        if pool_exec is not None:
            pool_exec.shutdown(cancel_futures=True)
