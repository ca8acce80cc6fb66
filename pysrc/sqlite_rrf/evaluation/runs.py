"""The evaluation's runs: named sets of :meth:`Store.recall <sqlite_rrf.store.Store.recall>`
parameters.

``default`` is the recall exactly as a user runs it: no parameter but the clock, so every
depth, the pool, the profile and the weights are the statement's own defaults. The
others are labelled by what they change: ``bm25``, ``vector``, ``rrf`` and one per
fusion profile, each with the BM25 list 1,000 deep and every document in the vector
pool, and the recency and access weights 0 (BEIR has no time or usage signal).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, Iterable, List, Mapping, Optional

from ..core.options import FIELDS
from ..store import PROFILES
from .cached_store import EVAL_EPOCH_MS

__all__ = [
    "BASELINE_RUNS",
    "BM25_DEPTH",
    "DEPTH",
    "RUN_PARAMETERS",
    "TUNED",
    "RunSpec",
    "available_runs",
    "resolve_runs",
]

#: Results per query: enough for recall@100.
DEPTH = 100
#: BM25 candidates per query for the runs that fuse BM25 (deeper than the statement's default).
BM25_DEPTH = 1000
#: The runs that do not depend on a profile.
BASELINE_RUNS = ("default", "bm25", "vector", "rrf")
#: A vector pool that holds every document of any collection the evaluation loads (the
#: 'all' pool keeps the pool_size nearest; rrf_topk takes up to a million).
EVERY_DOCUMENT = 1_000_000
#: The fields of :class:`~sqlite_rrf.core.options.RecallOptions` (``Store.recall``'s
#: keywords) that a run may set (or ``--set`` override): all but ``limit``, ``touch``,
#: ``force`` and ``qvec``, which every run passes the same way (``limit=DEPTH,
#: touch=False, force=True``, the query's vector).
RUN_PARAMETERS = tuple(f for f in FIELDS if f not in ("limit", "touch", "force", "qvec"))
#: Parameters tuned on SciFact's **train** split (reported on test; docs/evaluation.md).
#: convex: alpha swept 0.3-0.7 on train, nDCG@10 0.7242 / 0.7308 / 0.7368 / 0.7388 /
#: 0.7372: 0.6 is kept. The statement's own default stays 0.5.
TUNED: Dict[str, Dict[str, Any]] = {"convex": {"alpha": 0.6}}


@dataclass(frozen=True)
class RunSpec:
    """A named evaluation run: the keyword arguments of ``Store.recall`` it uses
    (besides ``limit=100, touch=False, force=True`` and the query vector), and whether
    the query vector is passed at all."""

    name: str
    description: str
    params: Mapping[str, Any]
    vector: bool = True


def available_runs() -> Dict[str, RunSpec]:
    """The runs, in report order: ``bm25``, ``vector``, ``rrf`` and one per profile of
    :data:`sqlite_rrf.store.PROFILES` (recency and access weights 0)."""
    base: Dict[str, Any] = {"profile": "rrf"}
    runs: Dict[str, RunSpec] = {
        "default": RunSpec(
            "default",
            "the recall as users run it: every parameter the "
            "statement's default (profile, pool, depths, weights)",
            {"now": EVAL_EPOCH_MS},
        ),
        # The BM25 list alone: an empty vector pool (recent, size 0) leaves the BM25
        # hits as the only candidates, and no query vector is sent.
        "bm25": RunSpec(
            "bm25",
            "BM25 list alone (FTS5 bm25, top 1000 candidates)",
            dict(
                base,
                weights=(1.0, 0.0, 0.0, 0.0),
                k=60,
                pool="recent",
                pool_size=0,
                bm25_limit=BM25_DEPTH,
            ),
            vector=False,
        ),
        "vector": RunSpec(
            "vector",
            "vector list alone, exact cosine over every document",
            dict(base, weights=(0.0, 1.0, 0.0, 0.0), k=60, pool="all", pool_size=EVERY_DOCUMENT),
        ),
        "rrf": RunSpec(
            "rrf",
            "RRF (k 60) of BM25 (top 1000) and vector (every document)",
            dict(
                base,
                weights=(1.0, 1.0, 0.0, 0.0),
                k=60,
                pool="all",
                pool_size=EVERY_DOCUMENT,
                bm25_limit=BM25_DEPTH,
            ),
        ),
    }
    for p in PROFILES:
        if p in runs:  # the rrf profile with recency/access 0 is the rrf run
            continue
        params: Dict[str, Any] = {
            "profile": p,
            "weights": {"recency": 0.0, "access": 0.0},
            "pool": "all",
            "pool_size": EVERY_DOCUMENT,
            "bm25_limit": BM25_DEPTH,
            "now": EVAL_EPOCH_MS,
        }
        params.update(TUNED.get(p, {}))
        tuned = ", ".join(f"{k} {v}" for k, v in TUNED.get(p, {}).items())
        runs[p] = RunSpec(
            p,
            f"profile {p!r} (BM25 top {BM25_DEPTH}, every document, "
            "recency and access weights 0"
            + (f"; {tuned}, tuned on SciFact train" if tuned else "")
            + ")",
            params,
        )
    return runs


def resolve_runs(runs: Optional[Iterable[str]], specs: Mapping[str, RunSpec]) -> List[str]:
    """The names of ``runs`` (every run of ``specs`` when None), each once, in the order
    given; ValueError for an unknown run or an empty selection."""
    if runs is None:
        return list(specs)
    names = []
    for r in runs:
        if r not in specs:
            raise ValueError(f"unknown run {r!r}; the runs are: {', '.join(specs)}")
        if r not in names:
            names.append(r)
    if not names:
        raise ValueError("no runs selected")
    return names
