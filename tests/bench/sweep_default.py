"""Sweep of the default fusion on a BEIR collection's TRAIN split (SciFact by default).

    .venv/bin/python tests/bench/sweep_default.py [--data DIR] [--no-validate] [--no-plot]
                                                  [--test] [--validate-queries N]

What it does, in order:

1. **Lists, once per query, through the product.** The collection is loaded with
   ``sqlite_rrf.evaluation.cached_store.build_store`` (the eval's own store: every document with the
   same ``created_at``/``access_count``, so recency and use carry nothing). For each
   query of the split:

   * the BM25 list at depth ``MAX_DEPTH`` (1,000): ``Store.recall`` with an empty vector
     pool (pool ``recent``, ``pool_size`` 0), no query vector and only the BM25 list
     weighted, so the candidates are exactly the statement's BM25 CTE rows, in its
     order, with its ``bm25_score``;
   * the exact cosine of every document: the extension's ``vec_cosine(embedding, :q)``
     over the ``episodes`` table (the function the statement uses).

   Both are cached in ``tests/bench/out/sweep_lists_<split>.npz``.

2. **Fusion in numpy** for each configuration, reproducing the statement's semantics:
   candidates = the vector pool (the exact top ``pool_size`` by cosine, ties by rowid; or
   every document for pool ``all``) ∪ the BM25 list's top ``D``; dense ranks per list over
   the candidates; ``min-max`` normalisation over the candidates (BM25 over its hits, a
   lone hit 0.5, no hit 0); order: score desc, similarity desc, rowid.

3. **Validation** (unless ``--no-validate``): for configurations the statement has today
   (``rrf`` and ``memory`` with every document in the pool; ``convex``; ``weighted``; with
   the eval's BM25 depth 1,000 and the recall default 50; pools of 200 and 20 — pool
   ``all`` where the statement takes its exact top ``pool_size``, else sqlite-vec's
   ``knn`` pool — and the default pool ``recent``) the numpy fusion must give the same
   nDCG@10 and the same top 10 per query as ``Store.recall`` with those settings. Both are printed; a mismatch beyond 1e-9 on the
   mean (or any query whose top 10 differs) is reported and the exit status is 2.

4. **Sweep on train**: families ``rrf`` (weighted RRF: k, w_bm25 : w_vec, BM25 depth D,
   pool_size P), ``convex`` over normalised scores (alpha; normalisation ``mm`` =
   min-max over the candidates, ``max`` = the fraction of the list's best score
   (``max(cos, 0) / best cos``, ``bm25 / best bm25``; no hit 0), ``tmm`` = theoretical-min-max (Bruch et al.: cosine's
   lower bound -1, BM25's 0, the observed max), ``z`` = z-score, ``dbsf`` =
   distribution-based (mean ± 3 sd as the bounds)), ``rrf_tb`` (RRF, ties and near-ties
   broken by the convex score). One-parameter curves around each family's base point,
   a 2-fold stability check of the best alpha / k, and the curves plotted to
   ``tests/bench/out/sweep_default.png`` and ``docs/img/sweep_default.png``.

5. ``--test``: the final candidates on the TEST split too (train and test side by side,
   nDCG@10, R@100, MRR@10). Everything goes to ``tests/bench/out/sweep_default.json``.

Needs the ``bench`` extra (matplotlib) for the plot only.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
OUT = os.path.join(HERE, "out")
DEFAULT_DATA = os.path.join(ROOT, "..", "shared", "data", "scifact")
MAX_DEPTH = 1000  # the BM25 list is read once at this depth; shallower lists are its prefixes
TOP = 100  # results kept per query (R@100)

from sqlite_rrf.evaluation.beir import load_beir
from sqlite_rrf.evaluation.cached_store import EVAL_EPOCH_MS, build_store
from sqlite_rrf.evaluation.metrics import mrr_at_k, ndcg_at_k, recall_at_k

# ---------------------------------------------------------------------------------------
# 1. The lists
# ---------------------------------------------------------------------------------------


@dataclass
class Lists:
    """Per query: the BM25 list (positions into ``doc_ids``, bm25() scores, best first)
    and the cosine of every document (row q of ``cos``)."""

    split: str
    query_ids: List[str]
    doc_ids: List[str]  # by position; rowids[i] is doc_ids[i]'s rowid
    rowids: np.ndarray
    bm25_pos: List[np.ndarray]
    bm25_score: List[np.ndarray]
    cos: np.ndarray  # [queries, docs] float64
    qrels: Dict[str, Dict[str, int]]
    query_texts: List[str] = field(default_factory=list)
    qvecs: Optional[np.ndarray] = None


def _lists_path(split: str) -> str:
    return os.path.join(OUT, f"sweep_lists_{split}.npz")


def read_lists(store: Any, data: Any, split: str, refresh: bool = False) -> Lists:
    """The BM25 list (depth MAX_DEPTH) and every cosine for each query of ``data``,
    through the product's statement and ``vec_cosine``; cached on disk."""
    rows = store.conn.execute(
        "SELECT rowid, id FROM episodes WHERE embedding IS NOT NULL ORDER BY rowid"
    ).fetchall()
    rowids = np.array([r[0] for r in rows], dtype=np.int64)
    doc_ids = [r[1] for r in rows]
    pos_of = {int(r): i for i, r in enumerate(rowids)}
    path = _lists_path(split)
    if os.path.exists(path) and not refresh:
        z = np.load(path, allow_pickle=False)
        if list(z["query_ids"]) == list(data.query_ids) and np.array_equal(z["rowids"], rowids):
            offs = z["offsets"]
            pos, sc = z["bm25_pos"], z["bm25_score"]
            return Lists(
                split,
                list(data.query_ids),
                doc_ids,
                rowids,
                [pos[offs[i] : offs[i + 1]] for i in range(len(offs) - 1)],
                [sc[offs[i] : offs[i + 1]] for i in range(len(offs) - 1)],
                z["cos"],
                data.qrels,
                list(data.query_texts),
                data.query_embeddings,
            )
    t0 = time.perf_counter()
    bpos: List[np.ndarray] = []
    bsc: List[np.ndarray] = []
    cos = np.zeros((len(data.query_ids), len(rowids)), dtype=np.float64)
    for qi, (qid, text) in enumerate(zip(data.query_ids, data.query_texts)):
        hits = store.recall(
            text,
            MAX_DEPTH,
            touch=False,
            force=True,
            qvec=None,
            profile="rrf",
            weights=(1.0, 0.0, 0.0, 0.0),
            k=60,
            pool="recent",
            pool_size=0,
            bm25_limit=MAX_DEPTH,
            now=EVAL_EPOCH_MS,
        )
        bpos.append(np.array([pos_of[h.rowid] for h in hits], dtype=np.int64))
        bsc.append(np.array([h.bm25_score for h in hits], dtype=np.float64))
        q = np.asarray(data.query_embeddings[qi], dtype="<f4").tobytes()
        got = store.conn.execute(
            "SELECT rowid, vec_cosine(embedding, ?) FROM episodes "
            "WHERE embedding IS NOT NULL ORDER BY rowid",
            (q,),
        ).fetchall()
        cos[qi] = [g[1] for g in got]
    offs = np.cumsum([0] + [len(p) for p in bpos])
    os.makedirs(OUT, exist_ok=True)
    np.savez(
        path,
        query_ids=np.array(data.query_ids),
        rowids=rowids,
        offsets=offs,
        bm25_pos=np.concatenate(bpos),
        bm25_score=np.concatenate(bsc),
        cos=cos,
    )
    print(
        f"  lists of {len(data.query_ids)} {split} queries read in "
        f"{time.perf_counter() - t0:.1f} s -> {os.path.relpath(path, ROOT)}"
    )
    return Lists(
        split,
        list(data.query_ids),
        doc_ids,
        rowids,
        bpos,
        bsc,
        cos,
        data.qrels,
        list(data.query_texts),
        data.query_embeddings,
    )


# ---------------------------------------------------------------------------------------
# 2. Fusion in numpy
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Config:
    """One fusion configuration. ``pool_size`` None = every document (pool 'all')."""

    family: str  # rrf | convex | weighted | rrf_tb | bm25 | vector
    depth: int = 50  # BM25 list depth D
    pool_size: Optional[int] = 200
    k: float = 60.0
    w_bm25: float = 1.0
    w_vec: float = 1.0
    alpha: float = 0.5  # convex: weight of the cosine
    norm: str = "mm"  # convex: mm | max | tmm | z | dbsf
    pool: str = "all"  # 'all': the exact top pool_size by cosine; 'recent': the
    #                             pool_size most recently accessed = by rowid here (the eval
    #                             store gives every document the same accessed_at)

    def label(self) -> str:
        pool = "all" if self.pool_size is None else str(self.pool_size)
        if self.pool == "recent":
            pool += " recent"
        if self.family in ("rrf", "rrf_tb"):
            return (
                f"{self.family} k={self.k:g} w={self.w_bm25:g}:{self.w_vec:g} "
                f"D={self.depth} P={pool}"
            )
        if self.family == "convex":
            return f"convex-{self.norm} a={self.alpha:g} D={self.depth} P={pool}"
        return f"{self.family} D={self.depth} P={pool}"


def _dense_rank_desc(x: np.ndarray) -> np.ndarray:
    """1 = largest; equal values share a rank (SQL dense_rank)."""
    _, inv = np.unique(-x, return_inverse=True)
    return inv.astype(np.float64) + 1.0


def _minmax(x: np.ndarray) -> np.ndarray:
    lo, hi = x.min(), x.max()
    if hi == lo:
        return np.ones_like(x)
    return (x - lo) / (hi - lo)


def _norm(values: np.ndarray, how: str, lower: float) -> np.ndarray:
    """Normalise one list's scores (higher = better)."""
    if values.size == 0:
        return values
    if how == "mm":
        return _minmax(values)
    if how == "max":  # fraction of the list's best score; both lower bounds taken as 0
        v = np.maximum(values, 0.0)
        hi = v.max()
        return v / hi if hi > 0 else np.ones_like(v)
    if how == "tmm":  # Bruch et al. 2023: theoretical min, observed max
        hi = values.max()
        return (values - lower) / (hi - lower) if hi > lower else np.ones_like(values)
    if how == "z":
        sd = values.std()
        return (values - values.mean()) / sd if sd > 0 else np.zeros_like(values)
    if how == "dbsf":  # distribution-based score fusion: mean ± 3 sd as the bounds
        mu, sd = values.mean(), values.std()
        if sd == 0:
            return np.full_like(values, 0.5)
        return np.clip((values - (mu - 3 * sd)) / (6 * sd), 0.0, 1.0)
    raise ValueError(how)


class Fuser:
    """Fuses one query's lists under a configuration (numpy, statement semantics)."""

    def __init__(self, lists: Lists):
        self.L = lists
        # per query: documents by (cosine desc, rowid asc) for the exact top-P pool
        self.by_cos = [
            np.lexsort((lists.rowids, -lists.cos[q])) for q in range(len(lists.query_ids))
        ]
        self.by_rowid = np.argsort(lists.rowids)

    def candidates(self, q: int, c: Config) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(candidate positions, BM25 score or NaN, is-a-BM25-hit) for query q."""
        L = self.L
        bpos = L.bm25_pos[q][: c.depth]
        bsc = L.bm25_score[q][: c.depth]
        if c.pool_size is None:
            cand = np.arange(len(L.rowids))
        else:
            pool = self.by_rowid if c.pool == "recent" else self.by_cos[q]
            cand = np.union1d(pool[: c.pool_size], bpos)
        b = np.full(len(L.rowids), np.nan)
        b[bpos] = bsc
        bc = b[cand]
        return cand, bc, ~np.isnan(bc)

    def scores(self, q: int, c: Config) -> Tuple[np.ndarray, np.ndarray]:
        """(candidate positions, fused score)."""
        cand, bc, hit = self.candidates(q, c)
        sim = self.L.cos[q][cand]
        if c.family == "vector":
            return cand, sim
        if c.family == "bm25":
            cand, bc = cand[hit], bc[hit]
            return cand, -bc
        rv = _dense_rank_desc(sim)
        rb = np.full(len(cand), np.nan)
        if hit.any():
            rb[hit] = _dense_rank_desc(-bc[hit])  # bm25() is negative: lower is better
        bnorm_mm = np.zeros(len(cand))
        if hit.any():
            hb = bc[hit]
            lo, hi = hb.max(), hb.min()  # worst, best
            bnorm_mm[hit] = (lo - hb) / (lo - hi) if lo != hi else 0.5
        if c.family in ("rrf", "rrf_tb"):
            s = np.where(hit, c.w_bm25 / (c.k + np.nan_to_num(rb, nan=1.0)), 0.0)
            if c.w_bm25 == 0:
                s = np.zeros(len(cand))
            s = s + c.w_vec / (c.k + rv) if c.w_vec > 0 else s
            if c.family == "rrf_tb":
                cosn = _minmax(sim)
                s = s + 1e-6 * (0.5 * cosn + 0.5 * bnorm_mm)
            return cand, s
        if c.family == "weighted":
            rel = np.maximum(0.7 * sim + 0.3 * bnorm_mm, 0.0)
            return cand, 0.5 * rel + 0.3 * math.exp(-0.6931471805599453 / 30 * 0.0) + 0.2 * (
                0 + 1.0
            ) / (0 + 1.0)
        if c.family == "convex":
            if c.norm == "mm":
                cn = _minmax(sim)
                bn = bnorm_mm
            else:
                cn = _norm(sim, c.norm, -1.0)
                bn = np.zeros(len(cand))
                if hit.any():
                    bn[hit] = _norm(-bc[hit], c.norm, 0.0)
                if c.norm == "z" and hit.any():
                    bn[~hit] = bn[hit].min()  # no hit: as low as the worst hit
            return cand, c.alpha * cn + (1 - c.alpha) * bn
        raise ValueError(c.family)

    def ranking(self, q: int, c: Config, top: int = TOP) -> List[str]:
        cand, s = self.scores(q, c)
        sim = self.L.cos[q][cand]
        order = np.lexsort((self.L.rowids[cand], -sim, -s))[:top]
        return [self.L.doc_ids[i] for i in cand[order]]


def measure(fuser: Fuser, c: Config, full: bool = False) -> Dict[str, float]:
    """Mean nDCG@10 (and R@100, MRR@10 when ``full``) over every query of the split."""
    L = fuser.L
    nd = r100 = mrr = 0.0
    for q, qid in enumerate(L.query_ids):
        ids = fuser.ranking(q, c, TOP if full else 10)
        rel = L.qrels.get(qid, {})
        nd += ndcg_at_k(ids, rel, 10)
        if full:
            r100 += recall_at_k(ids, rel, 100)
            mrr += mrr_at_k(ids, rel, 10)
    n = len(L.query_ids)
    out = {"ndcg@10": nd / n}
    if full:
        out.update({"recall@100": r100 / n, "mrr@10": mrr / n})
    return out


def per_query_ndcg(fuser: Fuser, c: Config) -> np.ndarray:
    L = fuser.L
    return np.array(
        [
            ndcg_at_k(fuser.ranking(q, c, 10), L.qrels.get(qid, {}), 10)
            for q, qid in enumerate(L.query_ids)
        ]
    )


# ---------------------------------------------------------------------------------------
# 3. Validation against Store.recall
# ---------------------------------------------------------------------------------------


def _recall_kwargs(c: Config, profile: str, pool: str = "all") -> Dict[str, Any]:
    kw: Dict[str, Any] = {
        "profile": profile,
        "weights": {"bm25": c.w_bm25, "vector": c.w_vec, "recency": 0.0, "access": 0.0},
        "k": c.k,
        "bm25_limit": c.depth,
        "now": EVAL_EPOCH_MS,
    }
    # pool 'all' is the exact top :pool_size by cosine; every document = a size >= N
    kw.update(pool=pool, pool_size=1_000_000 if c.pool_size is None else c.pool_size)
    if profile == "convex":
        kw["alpha"] = c.alpha
    return kw


def validate(store: Any, fuser: Fuser, n_queries: int) -> Tuple[bool, List[Dict[str, Any]]]:
    """The numpy fusion against Store.recall on the first ``n_queries`` queries."""
    L = fuser.L
    from sqlite_rrf.core.statements import recall_statement

    # Does pool 'all' take the exact top :pool_size (the new statement) or every document?
    bounded = "rrf_topk" in recall_statement("all")
    # a pool of P < N: pool 'all' when it is bounded, else sqlite-vec's 'knn' (the same
    # nearest P, by float32 distance: a tie at the P-th place may differ)
    PP = "all" if bounded else ("knn" if getattr(store, "has_knn", False) else None)
    A = "all"
    checks = [
        ("rrf", A, Config("rrf", depth=1000, pool_size=None)),
        ("memory", A, Config("rrf", depth=1000, pool_size=None)),
        ("memory", A, Config("rrf", depth=50, pool_size=None)),
        ("convex", A, Config("convex", depth=1000, pool_size=None, alpha=0.6)),
        ("convex", A, Config("convex", depth=50, pool_size=None, alpha=0.5)),
        ("weighted", A, Config("weighted", depth=1000, pool_size=None)),
        ("weighted", A, Config("weighted", depth=50, pool_size=None)),
    ]
    if PP:
        checks += [
            ("memory", PP, Config("rrf", depth=50, pool_size=200)),
            ("memory", PP, Config("rrf", depth=20, pool_size=20, k=10.0, w_bm25=1.2, w_vec=0.8)),
            ("convex", PP, Config("convex", depth=50, pool_size=200, alpha=0.5)),
            ("weighted", PP, Config("weighted", depth=50, pool_size=200)),
        ]
    # the 'recent' pool (the statement's default): every accessed_at is equal, so rowid order
    checks += [
        ("memory", "recent", Config("rrf", depth=50, pool_size=200, pool="recent")),
        ("convex", "recent", Config("convex", depth=50, pool_size=200, alpha=0.5, pool="recent")),
    ]
    print(
        f"  pool 'all' of this statement: {'exact top pool_size' if bounded else 'every document'}"
        f"; pools of P < N checked with pool {PP!r}"
    )
    qs = list(range(min(n_queries, len(L.query_ids))))
    ok = True
    report = []
    print(f"\n  validation on {len(qs)} {L.split} queries: nDCG@10 numpy vs Store.recall")
    for profile, pool, c in checks:
        kw = _recall_kwargs(c, profile, pool)
        nd_np = nd_sql = 0.0
        differ = 0
        t0 = time.perf_counter()
        for q in qs:
            qid = L.query_ids[q]
            mine = fuser.ranking(q, c, 10)
            hits = store.recall(
                L.query_texts[q], 10, touch=False, force=True, qvec=L.qvecs[q], **kw
            )
            theirs = [h.id for h in hits]
            nd_np += ndcg_at_k(mine, L.qrels[qid], 10)
            nd_sql += ndcg_at_k(theirs, L.qrels[qid], 10)
            differ += mine != theirs
        nd_np /= len(qs)
        nd_sql /= len(qs)
        # the knn pool is sqlite-vec's float32 distance: its top P may differ at a tie
        exact = pool in ("all", "recent")
        good = abs(nd_np - nd_sql) < 1e-9 and (differ == 0 or not exact)
        ok &= good or not exact
        row = {
            "profile": profile,
            "config": c.label(),
            "numpy": nd_np,
            "store_recall": nd_sql,
            "queries_top10_differ": differ,
            "queries": len(qs),
            "pool": pool,
            "ok": bool(good),
        }
        report.append(row)
        print(
            f"    {profile:>8} {pool:>3}  {c.label():<42} numpy {nd_np:.6f}  Store.recall {nd_sql:.6f}"
            f"  top-10 differs on {differ}/{len(qs)}  {'ok' if good else 'MISMATCH'}"
            f"  ({time.perf_counter() - t0:.0f} s)"
        )
    return ok, report


# ---------------------------------------------------------------------------------------
# 4. The sweep
# ---------------------------------------------------------------------------------------

POOLS: Sequence[Optional[int]] = (10, 20, 50, 100, 200, 500, 1000, None)
DEPTHS = (10, 20, 50, 100, 200, 500, 1000)
KS = (1, 2, 5, 10, 20, 30, 40, 60, 80, 100, 150, 200, 400)
RATIOS = (0.25, 0.33, 0.5, 0.67, 0.8, 1.0, 1.25, 1.5, 2.0, 3.0, 4.0)  # w_bm25 / w_vec
ALPHAS = tuple(round(a, 2) for a in np.arange(0.0, 1.0001, 0.05))
NORMS = ("mm", "max", "tmm", "z", "dbsf")


def _w(ratio: float) -> Tuple[float, float]:
    """(w_bm25, w_vec) with the given ratio and mean 1."""
    return 2 * ratio / (1 + ratio), 2 / (1 + ratio)


def sweep(fuser: Fuser, base: Dict[str, Config]) -> Dict[str, Any]:
    """One-parameter curves around each family's base configuration."""
    from dataclasses import replace

    curves: Dict[str, Any] = {}
    done: Dict[Config, float] = {}

    def nd(c: Config) -> float:
        if c not in done:
            done[c] = measure(fuser, c)["ndcg@10"]
        return done[c]

    t0 = time.perf_counter()
    b = base["rrf"]
    curves["rrf.k"] = [(k, nd(replace(b, k=float(k)))) for k in KS]
    curves["rrf.ratio"] = [(r, nd(replace(b, w_bm25=_w(r)[0], w_vec=_w(r)[1]))) for r in RATIOS]
    curves["rrf.depth"] = [(d, nd(replace(b, depth=d))) for d in DEPTHS]
    curves["rrf.pool"] = [(p, nd(replace(b, pool_size=p))) for p in POOLS]
    # symmetric depth: both lists cut at the same n (the peers' form)
    curves["rrf.both_depth"] = [
        (d, nd(replace(b, depth=d, pool_size=d))) for d in (10, 20, 50, 100, 200, 500, 1000)
    ]
    print(f"  rrf curves: {time.perf_counter() - t0:.0f} s")
    for norm in NORMS:
        t0 = time.perf_counter()
        b = replace(base["convex"], norm=norm)
        curves[f"convex-{norm}.alpha"] = [(a, nd(replace(b, alpha=a))) for a in ALPHAS]
        best_a = max(curves[f"convex-{norm}.alpha"], key=lambda t: t[1])[0]
        curves[f"convex-{norm}.depth"] = [(d, nd(replace(b, depth=d))) for d in DEPTHS]
        curves[f"convex-{norm}.pool"] = [(p, nd(replace(b, pool_size=p))) for p in POOLS]
        curves[f"convex-{norm}.best_alpha"] = best_a
        print(f"  convex-{norm} curves: {time.perf_counter() - t0:.0f} s (best alpha {best_a})")
    b = base["rrf_tb"]
    curves["rrf_tb.k"] = [(k, nd(replace(b, k=float(k)))) for k in KS]
    b = base["weighted"]
    curves["weighted.depth"] = [(d, nd(replace(b, depth=d))) for d in DEPTHS]
    curves["weighted.pool"] = [(p, nd(replace(b, pool_size=p))) for p in POOLS]
    # a joint grid k x ratio for rrf (the two interact)
    grid = {}
    for k in (5, 10, 20, 40, 60, 100):
        for r in (0.5, 0.67, 1.0, 1.5, 2.0):
            grid[f"{k}:{r}"] = nd(replace(base["rrf"], k=float(k), w_bm25=_w(r)[0], w_vec=_w(r)[1]))
    curves["rrf.grid_k_ratio"] = grid
    curves["_all"] = {c.label(): v for c, v in done.items()}
    return curves


def two_fold(fuser: Fuser, configs: Dict[str, List[Config]]) -> Dict[str, Any]:
    """For each parameter family, the best value on each half of the split (odd/even
    queries): a parameter whose best moves a lot between halves is being fitted to noise."""
    out = {}
    for name, cs in configs.items():
        pq = np.array([per_query_ndcg(fuser, c) for c in cs])  # [configs, queries]
        halves = [pq[:, 0::2].mean(axis=1), pq[:, 1::2].mean(axis=1)]
        out[name] = {
            "values": [c.label() for c in cs],
            "best_half_a": cs[int(np.argmax(halves[0]))].label(),
            "best_half_b": cs[int(np.argmax(halves[1]))].label(),
            "half_a": [round(float(x), 4) for x in halves[0]],
            "half_b": [round(float(x), 4) for x in halves[1]],
        }
    return out


# ---------------------------------------------------------------------------------------
# 5. Plot
# ---------------------------------------------------------------------------------------


def plot(curves: Dict[str, Any], chosen: Config, paths: Sequence[str], split: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    def xs(pts):
        return [len(POOLS) and (2000 if p is None else p) for p, _ in pts]

    fig, axes = plt.subplots(2, 3, figsize=(15, 8.5), dpi=110)
    ax = axes[0, 0]
    for norm, col in zip(NORMS, ("#4C72B0", "#000000", "#DD8452", "#55A868", "#C44E52")):
        pts = curves[f"convex-{norm}.alpha"]
        ax.plot(
            [a for a, _ in pts], [v for _, v in pts], marker=".", color=col, label=f"convex, {norm}"
        )
    ax.set_xlabel("alpha (weight of the cosine)")
    ax.set_title("convex: alpha, per normalisation")
    ax = axes[0, 1]
    pts = curves["rrf.k"]
    ax.plot([k for k, _ in pts], [v for _, v in pts], marker="o", label="rrf (w 1:1)")
    pts = curves["rrf_tb.k"]
    ax.plot(
        [k for k, _ in pts], [v for _, v in pts], marker=".", ls="--", label="rrf + score tie-break"
    )
    ax.set_xscale("log")
    ax.set_xlabel("k")
    ax.set_title("RRF: k")
    ax = axes[0, 2]
    pts = curves["rrf.ratio"]
    ax.plot([r for r, _ in pts], [v for _, v in pts], marker="o", label="rrf")
    ax.set_xscale("log")
    ax.set_xticks([0.25, 0.5, 1, 2, 4])
    ax.set_xticklabels(["1:4", "1:2", "1:1", "2:1", "4:1"])
    ax.minorticks_off()
    ax.set_xlabel("w_bm25 : w_vec (k 60)")
    ax.set_title("RRF: balance of the lists")
    ax = axes[1, 0]
    for key, lab in (
        ("rrf.depth", "rrf k 60"),
        ("convex-mm.depth", "convex mm a 0.5"),
        ("convex-max.depth", "convex max a 0.5"),
        ("convex-z.depth", "convex z a 0.5"),
        ("weighted.depth", "weighted"),
    ):
        pts = curves[key]
        ax.plot([d for d, _ in pts], [v for _, v in pts], marker="o", label=lab)
    ax.set_xscale("log")
    ax.set_xlabel("BM25 depth D")
    ax.set_title("BM25 list depth")
    ax = axes[1, 1]
    for key, lab in (
        ("rrf.pool", "rrf k 60"),
        ("convex-mm.pool", "convex mm a 0.5"),
        ("convex-max.pool", "convex max a 0.5"),
        ("convex-z.pool", "convex z a 0.5"),
        ("weighted.pool", "weighted"),
    ):
        pts = curves[key]
        ax.plot(xs(pts), [v for _, v in pts], marker="o", label=lab)
    ax.set_xscale("log")
    ax.set_xlabel("vector pool size P (2000 = all)")
    ax.set_title("vector pool size")
    ax = axes[1, 2]
    grid = curves["rrf.grid_k_ratio"]
    for r in (0.5, 1.0, 1.5, 2.0):
        ks = [k for k in (5, 10, 20, 40, 60, 100)]
        ax.plot(ks, [grid[f"{k}:{r}"] for k in ks], marker="o", label=f"w_bm25 : w_vec = {r:g}")
    pts = curves["rrf.both_depth"]
    ax.plot([], [])
    ax.set_xscale("log")
    ax.set_xlabel("k")
    ax.set_title("RRF: k x balance (best RRF < 0.735)")
    # the chosen point
    lab = f"chosen: {chosen.label()}"
    cv = curves.get("_chosen_ndcg")
    if chosen.family == "convex":
        axes[0, 0].plot([chosen.alpha], [cv], marker="*", ms=16, color="black", ls="", label=lab)
        axes[1, 0].plot([chosen.depth], [cv], marker="*", ms=16, color="black", ls="")
        axes[1, 1].plot(
            [2000 if chosen.pool_size is None else chosen.pool_size],
            [cv],
            marker="*",
            ms=16,
            color="black",
            ls="",
        )
    else:
        axes[0, 1].plot([chosen.k], [cv], marker="*", ms=16, color="black", ls="", label=lab)
    for a in axes.flat:
        a.axhline(0.735, color="grey", lw=0.8, ls=":")
        a.set_ylabel(f"nDCG@10 ({split})")
        a.grid(alpha=0.3)
        a.legend(fontsize=7)
    fig.suptitle(
        f"SciFact {split} split: nDCG@10 of the fusion vs each parameter "
        "(others at the family's base point; dotted: 0.735)"
    )
    fig.tight_layout()
    for p in paths:
        os.makedirs(os.path.dirname(p), exist_ok=True)
        fig.savefig(p)
    plt.close(fig)


# ---------------------------------------------------------------------------------------


def main(argv: Optional[Sequence[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", default=DEFAULT_DATA)
    ap.add_argument(
        "--db",
        default=os.path.join(OUT, "sweep_scifact.db"),
        help="the evaluation store (built once; with the knn index)",
    )
    ap.add_argument("--no-validate", action="store_true")
    ap.add_argument("--validate-queries", type=int, default=200)
    ap.add_argument("--validate-only", action="store_true")
    ap.add_argument("--no-plot", action="store_true")
    ap.add_argument(
        "--test", action="store_true", help="also report the final candidates on the test split"
    )
    ap.add_argument("--refresh", action="store_true", help="re-read the cached lists")
    args = ap.parse_args(argv)

    os.makedirs(OUT, exist_ok=True)
    train = load_beir(args.data, "train")
    t0 = time.perf_counter()
    store = build_store(train, args.db, progress=False, knn=True)
    store.embedder = None
    print(
        f"store: {store.count()} documents ({time.perf_counter() - t0:.1f} s), "
        f"knn pool: {getattr(store, 'has_knn', False)}"
    )
    L = read_lists(store, train, "train", args.refresh)
    fuser = Fuser(L)
    result: Dict[str, Any] = {"split": "train", "queries": len(L.query_ids)}

    ok = True
    if not args.no_validate:
        ok, result["validation"] = validate(store, fuser, args.validate_queries)
        if args.validate_only:
            with open(os.path.join(OUT, "sweep_validation.json"), "w") as f:
                json.dump(result["validation"], f, indent=1)
            store.close()
            return 0 if ok else 2

    # single lists (for the strength-of-list rule)
    singles = {
        "bm25 D=1000": Config("bm25", depth=1000, pool_size=0),
        "vector all": Config("vector", depth=0, pool_size=None),
    }
    result["single_lists_train"] = {n: measure(fuser, c, full=True) for n, c in singles.items()}
    print(
        "\n  single lists on train:",
        {n: round(v["ndcg@10"], 4) for n, v in result["single_lists_train"].items()},
    )

    base = {
        "rrf": Config("rrf", depth=50, pool_size=200, k=60.0),
        "convex": Config("convex", depth=50, pool_size=200, alpha=0.5),
        "rrf_tb": Config("rrf_tb", depth=50, pool_size=200, k=60.0),
        "weighted": Config("weighted", depth=50, pool_size=200),
    }
    print("\n  sweep (train):")
    curves = sweep(fuser, base)
    result["curves"] = curves

    # the strength rule: alpha = nDCG(vector) / (nDCG(vector) + nDCG(bm25)) on train
    sl = result["single_lists_train"]
    alpha_rule = round(
        sl["vector all"]["ndcg@10"] / (sl["vector all"]["ndcg@10"] + sl["bm25 D=1000"]["ndcg@10"]),
        2,
    )
    result["alpha_strength_rule"] = alpha_rule
    print(f"  alpha by the strength rule (train): {alpha_rule}")
    finals = final_candidates(alpha_rule)
    chosen = finals["chosen"]
    curves["_chosen_ndcg"] = measure(fuser, chosen)["ndcg@10"]
    from dataclasses import replace

    result["two_fold"] = two_fold(
        fuser,
        {
            "convex-mm alpha": [
                replace(base["convex"], alpha=a)
                for a in (0.3, 0.4, 0.45, 0.5, 0.55, 0.6, 0.65, 0.7)
            ],
            "convex-max alpha": [
                replace(base["convex"], norm="max", alpha=a)
                for a in (0.3, 0.4, 0.45, 0.5, 0.55, 0.6, 0.65, 0.7)
            ],
            "convex-z alpha": [
                replace(base["convex"], norm="z", alpha=a)
                for a in (0.3, 0.4, 0.45, 0.5, 0.55, 0.6, 0.65, 0.7)
            ],
            "rrf k": [replace(base["rrf"], k=float(k)) for k in (5, 10, 20, 40, 60, 100)],
            "rrf ratio": [
                replace(base["rrf"], w_bm25=_w(r)[0], w_vec=_w(r)[1])
                for r in (0.5, 0.67, 1.0, 1.5, 2.0)
            ],
        },
    )
    splits = [("train", fuser)]
    if args.test:
        test = load_beir(args.data, "test")
        splits.append(("test", Fuser(read_lists(store, test, "test", args.refresh))))
    table = {}
    for name, c in finals.items():
        table[name] = {"config": asdict(c), "label": c.label()}
        for sp, fu in splits:
            table[name][sp] = measure(fu, c, full=True)
    result["finals"] = table
    # paired bootstrap (per query, 2,000 resamples) of each final against the chosen one
    rng = np.random.default_rng(0)
    for sp, fu in splits:
        ref = per_query_ndcg(fu, chosen)
        idx = rng.integers(0, len(ref), size=(2000, len(ref)))
        for name, c in finals.items():
            d = ref - per_query_ndcg(fu, c)
            boots = d[idx].mean(axis=1)
            table[name][sp]["chosen_minus_this"] = float(d.mean())
            table[name][sp]["chosen_minus_this_ci95"] = [
                float(np.percentile(boots, 2.5)),
                float(np.percentile(boots, 97.5)),
            ]
    print("\n  final candidates:")
    head = f"    {'name':<22} {'config':<44}" + "".join(
        f" {sp + ' nDCG@10':>14} {'R@100':>7} {'MRR@10':>7}" for sp, _ in splits
    )
    print(head)
    for name, row in table.items():
        line = f"    {name:<22} {row['label']:<44}"
        for sp, _ in splits:
            m = row[sp]
            line += f" {m['ndcg@10']:14.4f} {m['recall@100']:7.4f} {m['mrr@10']:7.4f}"
        for sp, _ in splits:
            lo, hi = row[sp]["chosen_minus_this_ci95"]
            line += f"  {sp}: chosen {row[sp]['chosen_minus_this']:+.4f} [{lo:+.4f}, {hi:+.4f}]"
        print(line)
    store.close()
    if not args.no_plot:
        try:
            paths = [
                os.path.join(OUT, "sweep_default.png"),
                os.path.join(ROOT, "docs", "img", "sweep_default.png"),
            ]
            plot(curves, chosen, paths, "train")
            print("\n  plot: " + ", ".join(os.path.relpath(p, ROOT) for p in paths))
        except ImportError as e:
            print(f"\n  no plot (matplotlib: {e})")
    with open(os.path.join(OUT, "sweep_default.json"), "w") as f:
        json.dump(result, f, indent=1, default=str)
    print("  json: tests/bench/out/sweep_default.json")
    if not ok:
        print("VALIDATION FAILED: the numpy fusion does not reproduce Store.recall")
        return 2
    return 0


def final_candidates(alpha_rule: float = 0.5) -> Dict[str, Config]:
    """The configurations reported on train and test (the first is the recommendation)."""
    return {
        "chosen": Config("convex", depth=50, pool_size=200, alpha=0.5, norm="max"),
        "convex-max strength a": Config(
            "convex", depth=50, pool_size=200, alpha=alpha_rule, norm="max"
        ),
        "convex-max D100": Config("convex", depth=100, pool_size=200, alpha=0.5, norm="max"),
        "convex-max D1000 all": Config("convex", depth=1000, pool_size=None, alpha=0.5, norm="max"),
        "convex-max a0.6": Config("convex", depth=50, pool_size=200, alpha=0.6, norm="max"),
        "convex-z a0.5": Config("convex", depth=50, pool_size=200, alpha=0.5, norm="z"),
        "convex-tmm a0.7": Config("convex", depth=50, pool_size=200, alpha=0.7, norm="tmm"),
        "convex-mm a0.5": Config("convex", depth=50, pool_size=200, alpha=0.5, norm="mm"),
        "convex-mm a0.6": Config("convex", depth=50, pool_size=200, alpha=0.6, norm="mm"),
        "rrf k5 w1.5:1": Config("rrf", depth=50, pool_size=200, k=5.0, w_bm25=1.2, w_vec=0.8),
        "chosen, pool recent": Config(
            "convex", depth=50, pool_size=200, alpha=0.5, norm="max", pool="recent"
        ),
        "memory today (recent)": Config("rrf", depth=50, pool_size=200, k=60.0, pool="recent"),
        "memory today (all)": Config("rrf", depth=50, pool_size=None, k=60.0),
        "rrf k60 D1000 all": Config("rrf", depth=1000, pool_size=None, k=60.0),
        "weighted D50": Config("weighted", depth=50, pool_size=200),
        "weighted D1000 all": Config("weighted", depth=1000, pool_size=None),
        "convex a0.6 D1000 all": Config("convex", depth=1000, pool_size=None, alpha=0.6),
    }


if __name__ == "__main__":
    sys.exit(main())
