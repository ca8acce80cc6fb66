"""``sqlite-rrf eval``: its arguments (:func:`add_parser`, light: building the command
line's parser imports nothing of the evaluation) and its run (:func:`run_cli`)."""

from __future__ import annotations

import argparse
import json
import re
import sys
from typing import Any, Dict, List, Optional, Sequence

__all__ = ["add_parser", "run_cli"]


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register ``sqlite-rrf eval`` on an argparse subparsers object; the command runs
    :func:`run_cli`."""
    p: argparse.ArgumentParser = subparsers.add_parser(
        "eval",
        help="nDCG@10, recall@100 and MRR@10 on a BEIR-layout collection; "
        "LongMemEval's metrics on its JSON file",
        description="Load a BEIR-layout collection (corpus.jsonl, queries.jsonl, "
        "qrels/<split>.tsv, optional *.minilm.npy embedding caches) into a cached "
        "store and evaluate the recall statement's runs: bm25, vector, rrf and "
        "every fusion profile (recency and access weights 0). Given a "
        "LongMemEval file (*.json or *.json.xz) instead, each question's chat "
        "history becomes a memory (one episode per user turn, dated) and the "
        "benchmark's own session- and turn-level recall_any/recall_all/NDCG at "
        "5 and 10 are reported per question type (see docs/evaluation.md).",
    )
    p.add_argument(
        "data_dir",
        metavar="DATA_DIR",
        help="the collection's directory, or a LongMemEval .json[.xz] file",
    )
    p.add_argument("--json", action="store_true", help="print the results as JSON")
    p.add_argument(
        "--profile",
        metavar="NAME",
        nargs="+",
        action="extend",
        default=None,
        help="evaluate these profiles (with the bm25, vector and rrf runs; default: every profile)",
    )
    p.add_argument(
        "--run",
        metavar="NAME",
        nargs="+",
        action="extend",
        default=None,
        help="evaluate exactly these runs (any of bm25, vector, rrf and the profiles)",
    )
    p.add_argument(
        "--set",
        metavar="RUN.PARAM=VALUE",
        action="append",
        default=None,
        dest="set_params",
        help="override a Store.recall parameter of one run, e.g. convex.alpha=0.6 "
        "(VALUE is JSON, else text); repeatable",
    )
    p.add_argument("--split", default="test", help="qrels split (default test)")
    p.add_argument("--plot", metavar="PNG", help="write a bar chart of nDCG@10 per run")
    p.add_argument(
        "--db",
        metavar="PATH",
        help="the evaluation database (default: cached under ~/.cache/sqlite-rrf/eval/)",
    )
    p.add_argument("--rebuild", action="store_true", help="rebuild the cached database")
    p.add_argument(
        "--knn",
        action="store_true",
        help="also build the 'knn' pool's sqlite-vec index, for runs set to "
        "pool knn (e.g. --set rrf.pool=knn --set rrf.pool_size=1000)",
    )
    from ..embedding.models import DEFAULT_MODEL

    p.add_argument(
        "--model",
        metavar="MODEL",
        help="embedding model for vectors not in the caches: a GGUF file or "
        "hf:ORG/REPO/FILE.gguf (default: $SQLITE_RRF_MODEL, else "
        f"{DEFAULT_MODEL})",
    )
    p.add_argument(
        "--jobs",
        "-j",
        type=int,
        default=1,
        metavar="N",
        help="run the queries in N processes (default 1; latencies are then "
        "measured under that load)",
    )
    p.add_argument(
        "--no-progress", action="store_true", dest="no_progress", help="no progress bars"
    )
    p.add_argument(
        "--cache",
        metavar="PATH",
        default=None,
        help="LongMemEval: the embedding cache (default ~/.cache/sqlite-rrf/embeddings.sqlite)",
    )
    p.add_argument(
        "--limit",
        metavar="N",
        type=int,
        default=None,
        help="LongMemEval: only the first N questions",
    )
    p.add_argument(
        "--unit",
        choices=("session", "turn"),
        default="session",
        help="LongMemEval: one episode per session (default) or per user turn",
    )
    p.set_defaults(func=run_cli)
    return p


def _parse_sets(items: Optional[Sequence[str]]) -> Dict[str, Dict[str, Any]]:
    out: Dict[str, Dict[str, Any]] = {}
    for item in items or ():
        m = re.fullmatch(r"([^.=]+)\.([A-Za-z_][A-Za-z0-9_]*)=(.*)", item, re.S)
        if not m:
            raise ValueError(f"--set: expected RUN.PARAM=VALUE, got {item!r}")
        run, param, raw = m.groups()
        try:
            value = json.loads(raw)
        except ValueError:
            value = raw
        if isinstance(value, list):
            value = tuple(value)
        out.setdefault(run, {})[param] = value
    return out


def run_cli(args: argparse.Namespace) -> int:
    """Run ``sqlite-rrf eval`` with parsed arguments: print the table (or JSON with
    ``--json``), write ``--plot``; returns the exit status (1 with a one-line message
    on stderr for a bad collection, option, cache or model)."""
    from ..embedding.embedder import EmbeddingError, ModelNotFoundError
    from ..evaluation.beir import BeirFormatError
    from ..evaluation.cached_store import EvalCacheError
    from ..evaluation.report import format_table, plot
    from ..evaluation.runner import evaluate
    from ..evaluation.runs import BASELINE_RUNS, available_runs

    progress = not getattr(args, "no_progress", False) and sys.stderr.isatty()
    from ..evaluation.longmemeval_data import is_longmemeval_file

    if is_longmemeval_file(args.data_dir):
        return _run_longmemeval(args, progress)
    try:
        specs = available_runs()
        chosen: List[str] = list(getattr(args, "run", None) or [])
        profiles_asked: List[str] = list(getattr(args, "profile", None) or [])
        runs: Optional[List[str]] = None
        if chosen or profiles_asked:
            runs = chosen if chosen else list(BASELINE_RUNS)
            runs += [p for p in profiles_asked if p not in runs]
        if runs is not None:
            unknown = [r for r in runs if r not in specs]
            if unknown:
                profiles = [r for r in specs if r not in BASELINE_RUNS]
                raise ValueError(
                    f"unknown run or profile {unknown[0]!r}; runs: "
                    f"{', '.join(BASELINE_RUNS)}; profiles: "
                    f"{', '.join(profiles) or 'none in this version'}"
                )
        params = _parse_sets(getattr(args, "set_params", None))
        results = evaluate(
            args.data_dir,
            runs=runs,
            split=args.split,
            profile_params=params,
            progress=progress,
            db_path=getattr(args, "db", None),
            model_path=getattr(args, "model", None),
            rebuild=getattr(args, "rebuild", False),
            jobs=getattr(args, "jobs", 1),
            knn=getattr(args, "knn", False),
        )
        if getattr(args, "plot", None):
            plot(results, args.plot)
    except (
        BeirFormatError,
        EvalCacheError,
        ModelNotFoundError,
        EmbeddingError,
        ValueError,
        RuntimeError,
    ) as e:
        print(f"sqlite-rrf eval: {e}", file=sys.stderr)
        return 1
    if getattr(args, "json", False):
        print(json.dumps(results, indent=2))
    else:
        print(format_table(results))
        if getattr(args, "plot", None):
            print(f"\nplot: {args.plot}")
    return 0


def _run_longmemeval(args: argparse.Namespace, progress: bool) -> int:
    """``sqlite-rrf eval FILE.json[.xz]``: LongMemEval's metrics (see
    :mod:`sqlite_rrf.evaluation.longmemeval`)."""
    from ..embedding.embedder import EmbeddingError, ModelNotFoundError
    from ..evaluation.longmemeval import evaluate_longmemeval, format_lme_table, lme_runs
    from ..evaluation.longmemeval_data import LongMemEvalFormatError

    try:
        if (
            getattr(args, "plot", None)
            or getattr(args, "knn", False)
            or getattr(args, "db", None)
            or getattr(args, "split", "test") != "test"
        ):
            raise ValueError(
                "--plot, --knn, --db and --split are for BEIR collections, not a LongMemEval file"
            )
        runs: Optional[List[str]] = None
        chosen = list(getattr(args, "run", None) or [])
        profiles = list(getattr(args, "profile", None) or [])
        if chosen or profiles:
            runs = chosen if chosen else ["default", "bm25", "vector"]
            runs += [p for p in profiles if p not in runs]
            specs = lme_runs()
            unknown = [r for r in runs if r not in specs]
            if unknown:
                raise ValueError(f"unknown run or profile {unknown[0]!r}; runs: {', '.join(specs)}")
        limit = getattr(args, "limit", None)
        if limit is not None and limit < 1:
            raise ValueError(f"--limit: must be >= 1, got {limit}")
        res = evaluate_longmemeval(
            args.data_dir,
            unit=getattr(args, "unit", "session"),
            runs=runs,
            run_params=_parse_sets(getattr(args, "set_params", None)),
            limit=limit,
            cache_path=getattr(args, "cache", None),
            model_path=getattr(args, "model", None),
            progress=progress,
        )
    except (
        LongMemEvalFormatError,
        ModelNotFoundError,
        EmbeddingError,
        ValueError,
        RuntimeError,
    ) as e:
        print(f"sqlite-rrf eval: {e}", file=sys.stderr)
        return 1
    print(json.dumps(res, indent=2) if getattr(args, "json", False) else format_lme_table(res))
    return 0
