"""Evaluation on BEIR-layout collections: does the recall statement rank well?

``sqlite-rrf eval DATA_DIR`` (and :func:`evaluate`) loads a collection in the BEIR layout
into a :class:`~sqlite_rrf.store.Store`, sends every query of a split through
:meth:`Store.recall <sqlite_rrf.store.Store.recall>` — the product's own SQL statement;
there is no second scoring code path here — and reports nDCG@10, recall@100 and MRR@10
per *run* (a named set of recall parameters: :func:`available_runs`).

This module gathers the public names of the :mod:`sqlite_rrf.evaluation` package, where
each concern has its own module: the collection's layout and its errors in
:mod:`~sqlite_rrf.evaluation.beir`, the metrics' definitions in
:mod:`~sqlite_rrf.evaluation.metrics`, the on-disk cache of loaded collections in
:mod:`~sqlite_rrf.evaluation.cached_store`, the runs in
:mod:`~sqlite_rrf.evaluation.runs`, the evaluation itself in
:mod:`~sqlite_rrf.evaluation.runner`, the table and plot in
:mod:`~sqlite_rrf.evaluation.report` and the command in
:mod:`~sqlite_rrf.evaluation.cli`.

Recency and access lists carry no signal in BEIR (documents have no time or usage):
every document gets the same ``created_at``/``accessed_at`` and ``access_count`` 0, and
every run sets the recency and access weights to 0.
"""

from __future__ import annotations

from typing import Any

from .evaluation.beir import CORPUS_CACHE, QUERY_CACHE, BeirData, BeirFormatError, load_beir
from .evaluation.cached_store import (CACHE_FORMAT, EVAL_EPOCH_MS, EvalCacheError,
                                      build_store, cache_dir)
from .evaluation.cli import add_parser, run_cli
from .evaluation.metrics import (METRICS, Qrels, Ranking, mrr_at_k, ndcg_at_k, recall_at_k,
                                 score_run)
from .evaluation.report import PUBLISHED_SCIFACT, format_table, plot
from .evaluation.runner import evaluate
from .evaluation.runs import (BASELINE_RUNS, BM25_DEPTH, DEPTH, RUN_PARAMETERS, TUNED,
                              RunSpec, available_runs)

__all__ = [
    "BeirData", "BeirFormatError", "EvalCacheError", "RunSpec", "RUNS", "BASELINE_RUNS",
    "PUBLISHED_SCIFACT", "load_beir", "build_store", "ndcg_at_k", "recall_at_k", "mrr_at_k",
    "available_runs", "evaluate", "plot", "format_table", "add_parser", "run_cli",
    "score_run", "METRICS", "TUNED", "DEPTH", "BM25_DEPTH", "EVAL_EPOCH_MS", "CACHE_FORMAT",
    "CORPUS_CACHE", "QUERY_CACHE", "RUN_PARAMETERS", "Qrels", "Ranking", "cache_dir",
]


def __getattr__(name: str) -> Any:
    """``RUNS``: the runs of :func:`available_runs`, made when asked for (not at import)."""
    if name == "RUNS":
        return available_runs()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
