"""The recall statement (sql/recall.sql) against a plain-Python reference of the
same fusion, and the properties DESIGN.md lists for it."""

from __future__ import annotations

import json
import math
import re
import shutil
import subprocess
import time

import apsw
import numpy as np
import pytest

import sqlite_rrf
from sqlite_rrf.core.sql_files import read_sql
from sqlite_rrf.core.statements import recall_defaults, recall_parameters, recall_statement
from sqlite_rrf.store import Store, StoreError

DIM = 16
DEFAULTS = dict(k=60.0, w=(1.0, 1.0, 0.6, 0.4), bm25_limit=50, pool_size=200, limit=3)
NOW = 1_800_000_000_000  # a fixed clock for ages (ms)
PROFILES = ("hybrid", "memory", "rrf", "decay", "weighted", "convex")
WORDS = (
    "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi omicron pi "
    "rho sigma tau upsilon phi chi psi omega"
).split()


# ---- the plain-Python reference ----


def reference_recall(
    conn,
    query,
    qvec,
    *,
    pool="recent",
    k=None,
    w=(1.0, 1.0, 0.6, 0.4),
    bm25_limit=50,
    pool_size=200,
    limit=3,
    candidates_from=("pool", "bm25"),
    profile="rrf",
    alpha=0.5,
    min_similarity=None,
    now=NOW,
    scope=None,
    kind=None,
    since=None,
    until=None,
    oversample=40,
    time_from=None,
    time_to=None,
    w_time=None,
):
    """The fusion of DESIGN.md and docs/profiles.md computed in Python. Only the BM25
    list comes from SQLite (FTS5's own ranking: the one thing not ours to recompute).
    ``scope``, ``kind``, ``since``, ``until`` keep the episodes that pass them, in both
    lists; ``scope`` may be a tuple of scopes (the episodes of any of them)."""
    if k is None:
        k = 30.0 if profile == "decay" else 60.0
    rows = {
        r[0]: r
        for r in conn.execute(
            "SELECT rowid, id, embedding, created_at, accessed_at, access_count, importance, "
            "strength, depth, session_spread, stability, scope, kind FROM episodes"
        )
    }

    def passes(r):
        return (
            (scope is None or r[11] in (scope if isinstance(scope, tuple) else (scope,)))
            and (kind is None or r[12] == kind)
            and (since is None or r[3] >= since)
            and (until is None or r[3] < until)
        )

    rows = {c: r for c, r in rows.items() if passes(r)}
    # FTS5's own bm25() over the OR query of every word of the query (the statement's
    # list must be exactly this, whatever its stopword speed-up drops), the best
    # bm25_limit of the rows that pass the filters
    everything = conn.execute(
        "SELECT rowid, bm25(episodes_fts) FROM episodes_fts "
        "WHERE episodes_fts MATCH fts5_query(?) "
        "ORDER BY bm25(episodes_fts), rowid",
        (query,),
    ).fetchall()
    hits = [h for h in everything if h[0] in rows][:bm25_limit]
    bm25_score = dict(hits)
    distinct = sorted(set(bm25_score.values()))  # dense ranks: equal scores share a rank
    bm25_rank = {rowid: distinct.index(v) + 1 for rowid, v in bm25_score.items()}
    with_emb = [r for r in rows.values() if r[2] is not None]
    qf = None if qvec is None else np.asarray(qvec, "<f4")

    def cosine(r):
        v = np.frombuffer(r[2], "<f4").astype(np.float64)
        q64 = qf.astype(np.float64)
        return float(v @ q64 / (np.linalg.norm(v) * np.linalg.norm(q64)))

    def nearest(rs, n):  # the n best by cosine; ties: smaller rowid
        return sorted(rs, key=lambda r: (-cosine(r), r[0]))[:n]

    if pool == "recent":
        pool_ids = [r[0] for r in sorted(with_emb, key=lambda r: (-r[4], r[0]))[:pool_size]]
    elif qf is None or pool_size == 0:
        pool_ids = []  # 'all' and 'quantized' are the nearest to the query vector
    elif pool == "all":
        pool_ids = [r[0] for r in nearest(with_emb, pool_size)]
    else:  # 'quantized': nearest by the Hamming distance of sign codes, then by cosine
        qcode = np.packbits(qf > 0, bitorder="little")

        def hamming(r):
            code = np.packbits(np.frombuffer(r[2], "<f4") > 0, bitorder="little")
            return int(np.unpackbits(code ^ qcode).sum())

        short = sorted(with_emb, key=lambda r: (hamming(r), r[0]))[: pool_size * oversample]
        pool_ids = [r[0] for r in nearest(short, pool_size)]
    cands = set()
    if "pool" in candidates_from:
        cands |= set(pool_ids)
    if "bm25" in candidates_from:
        cands |= set(bm25_rank)
    q = None if qvec is None else np.asarray(qvec, "<f4").astype(np.float64)
    sim = {}
    for c in cands:
        emb = rows[c][2]
        if emb is None or q is None:
            sim[c] = None
            continue
        v = np.frombuffer(emb, "<f4").astype(np.float64)
        sim[c] = float(v @ q / (np.linalg.norm(v) * np.linalg.norm(q)))
    if min_similarity is not None:
        cands = {
            c for c in cands if c in bm25_rank or (sim[c] is not None and sim[c] >= min_similarity)
        }

    def dense(values, reverse):
        order = sorted({v for v in values.values() if v is not None}, reverse=reverse)
        pos = {v: i + 1 for i, v in enumerate(order)}
        return {c: (None if v is None else pos[v]) for c, v in values.items()}

    ranks = {
        "bm25": {c: bm25_rank.get(c) for c in cands},
        "vector": dense({c: sim[c] for c in cands}, reverse=True),
        "recency": dense({c: rows[c][3] for c in cands}, reverse=True),
        "access": dense({c: rows[c][5] for c in cands}, reverse=True),
    }
    sims = [sim[c] for c in cands if sim[c] is not None]
    hit_scores = [bm25_score[c] for c in cands if c in bm25_score]
    max_count = max((rows[c][5] for c in cands), default=0)

    def cos_norm(c):
        if sim[c] is None:
            return 0.0
        lo, hi = min(sims), max(sims)
        return 1.0 if hi == lo else (sim[c] - lo) / (hi - lo)

    def bm25_norm(c):
        if c not in bm25_score:
            return 0.0
        lo, hi = min(hit_scores), max(hit_scores)
        return 0.5 if hi == lo else (hi - bm25_score[c]) / (hi - lo)

    w_b, w_v, w_r, w_a = w
    best = (w_b + w_v) / (k + 1)
    w_min = min(w_b, w_v) if w_b > 0 and w_v > 0 else max(w_b, w_v)
    runner_up = best - w_min * (1 / (k + 1) - 1 / (k + 2))
    max_boost = 0.99 * (best / runner_up - 1) if best > 0 and best > runner_up else 0.0

    out = []
    for c in cands:
        contrib = {}
        for name, weight in zip(("bm25", "vector", "recency", "access"), w):
            r = ranks[name][c]
            if r is not None and weight > 0:
                contrib[name] = weight / (k + r)
        rrf4 = sum(contrib.values())
        rrf2 = sum(v for n, v in contrib.items() if n in ("bm25", "vector"))
        age = (now - rows[c][3]) / 86400000.0
        high = rows[c][6] == "high"
        explain = contrib
        if profile == "rrf":
            score = rrf4
        elif profile == "memory":
            mean = (
                (
                    w_r * (k + 1) / (k + ranks["recency"][c])
                    + w_a * (k + 1) / (k + ranks["access"][c])
                )
                / (w_r + w_a)
                if w_r + w_a > 0
                else 0.0
            )
            score = rrf2 * (1 + max_boost * mean)
            explain = {n: v for n, v in contrib.items() if n in ("bm25", "vector")}
        elif profile == "decay":
            life = 1.0
            for m in rows[c][7:11]:
                life *= 1.0 if m is None else m
            score = rrf4 * (1 + 0.3 * math.exp(-age / 30)) * life
        elif profile == "weighted":
            rel = max(0.7 * (sim[c] or 0.0) + 0.3 * bm25_norm(c), 0.3 if high else 0.0)
            score = (
                0.5 * rel
                + 0.3 * math.exp(-math.log(2) / 30 * max(age, 0))
                + 0.2 * (rows[c][5] + 1) / (max_count + 1)
            )
            explain = None
        elif profile == "hybrid":
            pos = [max(v, 0.0) for v in sims]
            best_cos = max(pos, default=0.0)
            cos_frac = (
                0.0 if sim[c] is None or w_v <= 0 or best_cos == 0 else max(sim[c], 0.0) / best_cos
            )
            best_bm25 = min(hit_scores, default=0.0)
            bm25_frac = (
                0.0
                if c not in bm25_score or w_b <= 0
                else (1.0 if best_bm25 == 0 else bm25_score[c] / best_bm25)
            )
            blend = alpha * cos_frac + (1 - alpha) * bm25_frac
            # the query's time window (timeexpr): created in it gains w_time of relevance
            w_t = (
                0.0
                if time_from is None
                else (recall_defaults()["w_time"] if w_time is None else w_time)
            )
            in_window = time_from is not None and time_from <= rows[c][3] < time_to
            rel = (blend + w_t * in_window) / (1 + w_t)
            t = (
                (
                    w_r * (k + 1) / (k + ranks["recency"][c])
                    + w_a * (k + 1) / (k + ranks["access"][c])
                )
                / (w_r + w_a)
                if w_r + w_a > 0
                else 0.0
            )
            g = 1 - (1 - 0.02 * t) * (1 - (0.25 * blend if high else 0.0))
            score = rel + (1 - rel) * g
            explain = None
        else:  # convex
            score = alpha * cos_norm(c) + (1 - alpha) * bm25_norm(c)
            explain = None
        if high and profile in ("memory", "rrf", "decay"):
            score += 1 / (k + 1) - 1 / (k + 11)
        out.append(
            dict(
                rowid=c,
                id=rows[c][1],
                score=score,
                similarity=sim[c],
                bm25_rank=ranks["bm25"][c],
                vec_rank=ranks["vector"][c],
                recency_rank=ranks["recency"][c],
                access_rank=ranks["access"][c],
                explain=explain,
            )
        )
    out.sort(
        key=lambda h: (
            -h["score"],
            h["similarity"] is None,
            -(h["similarity"] or 0),
            h["recency_rank"],
            h["access_rank"],
            h["rowid"],
        )
    )
    return out[:limit]


def run_recall(conn, query, qvec, **params):
    """The recall statement of the pool and profile asked (default: 'recent', 'rrf';
    None: the default one's, sql/recall.sql) through apsw, as dicts."""
    names = (
        "id content score bm25_rank vec_rank recency_rank access_rank similarity "
        "bm25_score explain importance created_at accessed_at access_count rowid"
    ).split()
    b = dict.fromkeys(recall_parameters())  # every parameter, None = the default
    b.update(
        {
            "query": query,
            "qvec": None if qvec is None else np.asarray(qvec, "<f4").tobytes(),
            "profile": "rrf",
            "pool": "recent",
            "now": NOW,
        }
    )
    b.update(params)
    sql = recall_statement(b["pool"], b["profile"])
    return [dict(zip(names, r)) for r in conn.execute(sql, b)]


def assert_same(got, want):
    assert [h["id"] for h in got] == [h["id"] for h in want]
    for g, r in zip(got, want):
        assert g["score"] == pytest.approx(r["score"], rel=1e-12, abs=1e-15)
        for key in ("bm25_rank", "vec_rank", "recency_rank", "access_rank"):
            assert g[key] == r[key], key
        if r["similarity"] is None:
            assert g["similarity"] is None
        else:
            assert g["similarity"] == pytest.approx(r["similarity"], abs=1e-12)
        if r["explain"] is None:
            continue
        explain = json.loads(g["explain"]) if g["explain"] else {}
        contributions = {n: e["contribution"] for n, e in explain.items() if "contribution" in e}
        assert contributions == pytest.approx(r["explain"], rel=1e-12)


# ---- data ----


def make_episodes(n, rng, *, dim=DIM, t0=1_700_000_000_000, with_embedding=0.9, high=0.1):
    eps = []
    for i in range(n):
        words = rng.choice(WORDS, size=int(rng.integers(3, 12)))
        created = t0 + int(rng.integers(0, 10**10))
        eps.append(
            dict(
                id=f"e{i}",
                content=" ".join(words),
                embedding=(rng.normal(size=dim) if rng.random() < with_embedding else None),
                created_at=created,
                accessed_at=created + int(rng.integers(0, 10**9)),
                access_count=int(rng.zipf(2.0)) - 1,
                importance=("high" if rng.random() < high else "normal"),
            )
        )
    return eps


@pytest.fixture
def store(tmp_path):
    s = Store(tmp_path / "m.db")
    yield s
    s.close()


@pytest.fixture
def small_store(store):
    rng = np.random.default_rng(7)
    store.add_many(make_episodes(150, rng))
    return store


# ---- the statement equals the reference ----


@pytest.mark.parametrize("seed", range(5))
def test_below_pool_size_equals_python_fusion(small_store, seed):
    """< 200 episodes: the pool holds them all; every returned row equals the reference."""
    rng = np.random.default_rng(100 + seed)
    query = " ".join(rng.choice(WORDS, size=3))
    qvec = rng.normal(size=DIM)
    got = run_recall(small_store.conn, query, qvec, limit=150)
    want = reference_recall(small_store.conn, query, qvec, limit=150)
    n_emb = small_store.conn.execute(
        "SELECT count(*) FROM episodes WHERE embedding IS NOT NULL"
    ).fetchall()[0][0]
    assert len(got) >= n_emb  # the pool covers every episode with an embedding
    assert_same(got, want)


@pytest.mark.parametrize(
    "params",
    [
        dict(k=10.0),
        dict(k=0.0),
        dict(w=(0.0, 1.0, 0.6, 0.4)),
        dict(w=(1.0, 0.0, 0.0, 0.0)),
        dict(w=(2.0, 0.5, 0.0, 1.5)),
        dict(pool="all"),
        dict(pool="all", pool_size=20),
        dict(pool="quantized"),
        dict(pool="quantized", pool_size=10, oversample=3),
        dict(pool_size=20),
        dict(pool_size=0),
        dict(bm25_limit=5),
        dict(bm25_limit=0),
    ],
)
def test_parameters_equal_python_fusion(tmp_path, params):
    """Every parameter of the statement does what the reference does, at 400 episodes."""
    rng = np.random.default_rng(11)
    with Store(tmp_path / "p.db") as s:
        s.add_many(make_episodes(400, rng))
        query, qvec = "alpha omega sigma", rng.normal(size=DIM)
        sql = {"limit": 40}
        ref = {"limit": 40}
        for key, v in params.items():
            if key == "w":
                sql.update(w_bm25=v[0], w_vec=v[1], w_recency=v[2], w_access=v[3])
            else:
                sql[key] = v
            ref[key] = v
        assert_same(
            run_recall(s.conn, query, qvec, **sql), reference_recall(s.conn, query, qvec, **ref)
        )


def test_defaults_are_the_designs(small_store):
    """Unbound parameters take DESIGN.md's defaults (k 60, weights 1/1/0.6/0.4,
    bm25_limit 50, pool_size 200, limit 3) and the departures' (profile 'hybrid', pool
    'quantized', oversample 40, alpha 0.5: docs/design-departures.md; a time the query
    names weighs 0.2, chosen on the LongMemEval_S dev half: docs/evaluation.md)."""
    cte = re.search(r"\nparams AS \((.*?)\n\),", read_sql("recall.sql"), re.S).group(1)
    names = set(re.findall(r":(\w+)", cte))
    cur = small_store.conn.execute(cte, dict.fromkeys(names))
    params = dict(zip([d[0] for d in cur.getdescription()], cur.fetchall()[0]))
    assert abs(params.pop("now_ms") - time.time() * 1000) < 60_000
    assert params == dict(
        profile="hybrid",
        k=60.0,
        w_bm25=1.0,
        w_vec=1.0,
        w_recency=0.6,
        w_access=0.4,
        bm25_limit=50,
        pool_size=200,
        pool="quantized",
        oversample=40,
        result_limit=3,
        alpha=0.5,
        min_similarity=None,
        w_time=0.2,
        time_from=None,
        time_to=None,
        collapse=1,
        min_relevance=None,
        min_share=recall_defaults()["min_share"],
        include_superseded=0,
    )
    rng = np.random.default_rng(3)
    qvec = rng.normal(size=DIM)
    assert len(run_recall(small_store.conn, "alpha", qvec)) == 3
    assert_same(
        run_recall(small_store.conn, "alpha", qvec),
        reference_recall(small_store.conn, "alpha", qvec, **DEFAULTS),
    )
    every_default = run_recall(small_store.conn, "alpha", qvec, profile=None, pool=None)
    assert_same(
        every_default,
        reference_recall(small_store.conn, "alpha", qvec, profile="hybrid", pool="quantized"),
    )


def test_store_recall_scores_equal_reference(small_store):
    """Store.recall's default is the 'hybrid' profile over the 'quantized' pool; in
    'memory' the explain accounts for the score.

    Each call asks for the statement's own ranking: no post-ranking step
    (``collapse=False``: diversify would fold near-duplicates and put a newer hit
    on the same topic in an older one's slot, from the 2*limit+10 rows it reads,
    which the reference does not model) and no time window from the query's words
    (``time_expressions=False``), at the reference's clock (``now=NOW``)."""
    statement = dict(touch=False, now=NOW, collapse=False, time_expressions=False)
    rng = np.random.default_rng(5)
    qvec = rng.normal(size=DIM)
    want = reference_recall(
        small_store.conn, "beta gamma", qvec, limit=10, profile="hybrid", pool="quantized"
    )
    got = small_store.recall("beta gamma", limit=10, qvec=qvec, **statement)
    assert [h.id for h in got] == [h["id"] for h in want]
    for h, r in zip(got, want):
        assert h.score == pytest.approx(r["score"], rel=1e-12)
        rel = h.explain["relevance"]
        g = h.explain["recency_access_importance"]["nudge"]
        r_ = rel["alpha"] * rel["cosine"] + (1 - rel["alpha"]) * rel["bm25"]
        assert r_ + (1 - r_) * g == pytest.approx(h.score, rel=1e-12)
    want = reference_recall(small_store.conn, "beta gamma", qvec, limit=10, profile="memory")
    got = small_store.recall(
        "beta gamma", limit=10, qvec=qvec, profile="memory", pool="recent", force=True, **statement
    )
    assert [h.id for h in got] == [h["id"] for h in want]
    for h, r in zip(got, want):
        assert h.score == pytest.approx(r["score"], rel=1e-12)
        e = h.explain
        rel = sum(v["contribution"] for v in e.values() if "contribution" in v)
        boost = e.get("importance", {}).get("boost", 0.0)
        assert rel * e["recency_access"]["multiplier"] + boost == pytest.approx(h.score, rel=1e-12)
    rrf = small_store.recall("beta gamma", limit=10, qvec=qvec, profile="rrf", **statement)
    for h in rrf:  # in 'rrf' the contributions add up to the score
        assert sum(
            v.get("contribution", v.get("boost", 0)) for v in h.explain.values()
        ) == pytest.approx(h.score, rel=1e-12)


# ---- the design's fix: old keyword hits are not lost ----


def test_old_never_accessed_keyword_hit_is_recalled(tmp_path):
    """1,000 episodes: the pool-only design loses an old, never-accessed episode that
    carries the query's words; the union pool recalls it."""
    rng = np.random.default_rng(42)
    t0 = 1_700_000_000_000
    eps = make_episodes(999, rng, t0=t0 + 10**9, with_embedding=1.0, high=0.0)
    qvec = rng.normal(size=DIM)
    old_vec = qvec + 0.3 * rng.normal(size=DIM)  # related, but not the closest in the corpus
    eps.append(
        dict(
            id="old",
            content="the zanzibar ferry timetable changed in march",
            embedding=old_vec,
            created_at=t0,
            accessed_at=t0,
            access_count=0,
        )
    )
    with Store(tmp_path / "big.db") as s:
        s.add_many(eps)
        query = "when does the zanzibar ferry leave?"
        # the old design: candidates = the 200 most recently accessed only
        old_design = reference_recall(s.conn, query, qvec, limit=3, candidates_from=("pool",))
        assert "old" not in [h["id"] for h in old_design]
        assert "old" not in [
            r[0]
            for r in s.conn.execute(
                "SELECT id FROM episodes WHERE embedding IS NOT NULL "
                "ORDER BY accessed_at DESC, rowid LIMIT 200"
            )
        ]
        got = run_recall(s.conn, query, qvec)
        assert "old" in [h["id"] for h in got]
        hit = next(h for h in got if h["id"] == "old")
        assert hit["bm25_rank"] == 1
        assert_same(got, reference_recall(s.conn, query, qvec))


# ---- importance, empty lists, hostile text ----


def test_high_importance_adds_the_boost(store):
    rng = np.random.default_rng(9)
    eps = make_episodes(30, rng, high=0.0)
    store.add_many(eps)
    qvec = rng.normal(size=DIM)
    before = {h["id"]: h["score"] for h in run_recall(store.conn, "alpha beta", qvec, limit=30)}
    target = sorted(before)[5]
    store.conn.execute("UPDATE episodes SET importance = 'high' WHERE id = ?", (target,))
    after = {h["id"]: h for h in run_recall(store.conn, "alpha beta", qvec, limit=30)}
    for k in (60.0, 10.0):
        got = {
            h["id"]: h["score"] for h in run_recall(store.conn, "alpha beta", qvec, limit=30, k=k)
        }
        store.conn.execute("UPDATE episodes SET importance = 'normal' WHERE id = ?", (target,))
        base = {
            h["id"]: h["score"] for h in run_recall(store.conn, "alpha beta", qvec, limit=30, k=k)
        }
        store.conn.execute("UPDATE episodes SET importance = 'high' WHERE id = ?", (target,))
        assert got[target] - base[target] == pytest.approx(1 / (k + 1) - 1 / (k + 11), rel=1e-9)
        assert all(got[i] == base[i] for i in got if i != target)
    boost = json.loads(after[target]["explain"])["importance"]["boost"]
    assert boost == pytest.approx(1 / 61 - 1 / 71)


def test_empty_bm25_list_contributes_nothing(small_store):
    rng = np.random.default_rng(1)
    qvec = rng.normal(size=DIM)
    got = run_recall(small_store.conn, "nothing-matches-this qwertyuiop", qvec, limit=20)
    assert got and all(h["bm25_rank"] is None for h in got)
    assert all("bm25" not in json.loads(h["explain"]) for h in got)
    # the same as turning the list off
    off = run_recall(
        small_store.conn, "nothing-matches-this qwertyuiop", qvec, limit=20, w_bm25=0.0
    )
    assert [(h["id"], h["score"]) for h in got] == [(h["id"], h["score"]) for h in off]
    assert_same(got, reference_recall(small_store.conn, "qwertyuiop", qvec, limit=20))


def test_no_query_vector_means_no_vector_list(small_store):
    got = run_recall(small_store.conn, "alpha", None, limit=10)
    assert got and all(h["vec_rank"] is None and h["similarity"] is None for h in got)
    assert_same(got, reference_recall(small_store.conn, "alpha", None, limit=10))


HOSTILE = [
    '"',
    "'",
    "-",
    "*",
    "^",
    ":",
    "(",
    ")",
    "AND",
    "OR NOT",
    "NEAR(a b, 3)",
    "content:alpha",
    "{content}: beta",
    "alpha*",
    '"unterminated',
    "a AND OR b",
    "",
    "   ",
    "\x00",
    "ünïcödé 北京 🙂",
    "-alpha -beta",
    "((((",
    "x" * 6000,
    " ".join(WORDS) * 40,
    "'; DROP TABLE episodes; --",
]


@pytest.mark.parametrize("query", HOSTILE)
def test_hostile_query_text_never_fails(small_store, query):
    qvec = np.ones(DIM)
    got = small_store.recall(query, limit=5, qvec=qvec, touch=False, force=True)
    assert len(got) == 5
    assert small_store.count() == 150


def test_query_truncated_to_6000_chars(small_store):
    long = "alpha " * 999 + "zzzz" + " omega" * 2000  # 'omega' lies past 6,000 characters
    assert len(long) > 6000
    got = small_store.recall(long, limit=3, qvec=np.ones(DIM), touch=False, profile="rrf")
    assert got.query == long[:6000]
    want = run_recall(small_store.conn, long[:6000], np.ones(DIM))
    assert [h.id for h in got] == [h["id"] for h in want]


# ---- touch and the topic gate ----


def test_touch_updates_returned_rows_only(small_store):
    before = dict(small_store.conn.execute("SELECT id, access_count FROM episodes"))
    res = small_store.recall("alpha", limit=3, qvec=np.ones(DIM))
    after = {
        r[0]: r[1:]
        for r in small_store.conn.execute("SELECT id, access_count, accessed_at FROM episodes")
    }
    returned = {h.id for h in res}
    assert len(returned) == 3
    for i, count in before.items():
        assert after[i][0] == count + (1 if i in returned else 0)
    now = max(a[1] for a in after.values())
    assert all(after[i][1] == now for i in returned)
    res2 = small_store.recall("omega", limit=3, qvec=-np.ones(DIM), touch=False)
    assert dict(small_store.conn.execute("SELECT id, access_count FROM episodes")) == {
        i: a[0] for i, a in after.items()
    }
    assert len(res2) == 3


def test_topic_gate(tmp_path):
    rng = np.random.default_rng(2)
    path = tmp_path / "g.db"
    with Store(path) as s:
        s.add_many(make_episodes(50, rng))
        q = rng.normal(size=DIM)
        first = s.recall("alpha", qvec=q, topic_gate=True)
        assert not first.skipped and len(first) == 3
        near = q + 0.05 * rng.normal(size=DIM)  # cosine > 0.85
        assert np.dot(q, near) / np.linalg.norm(q) / np.linalg.norm(near) > 0.85
        assert not s.recall("alpha again", qvec=near).skipped  # off unless asked for
        second = s.recall("alpha again", qvec=near, topic_gate=True)
        assert second.skipped and len(second) == 0 and second.gate_cosine > 0.85
        assert "force" in second.reason
        assert not s.recall("alpha again", qvec=near, force=True, topic_gate=True).skipped
        far = rng.normal(size=DIM)
        assert not s.recall("something else", qvec=far, topic_gate=True).skipped
    gate = dict(topic_gate=True)
    with Store(path) as s:  # the gate belongs to the instance: a new one is not gated
        assert not s.recall("something else", qvec=far, **gate).skipped
        # with a session, the gate holds across instances and processes (rrf_meta) ...
        assert not s.recall("first", qvec=q, session="agent-a", **gate).skipped
    with Store(path) as s:
        assert not s.recall("first again", qvec=near, session="agent-a").skipped  # off
        assert s.recall("first again", qvec=near, session="agent-a", **gate).skipped
        # ... and belongs to that session only: another agent sharing the memory is not gated
        assert not s.recall(
            "first again", qvec=near, session="agent-b", touch=False, **gate
        ).skipped
        # a recall that does not touch does not move its session's gate
        assert not s.recall("x", qvec=far, session="agent-c", touch=False, **gate).skipped
        assert not s.recall("x", qvec=far, session="agent-c", **gate).skipped
        assert s.recall("x", qvec=far, session="agent-c", **gate).skipped


# ---- validation: nothing written on bad input ----


@pytest.mark.parametrize(
    "bad,match",
    [
        (dict(content="x", embedding=[1.0] * (DIM - 1)), "dimension mismatch"),
        (dict(content="x", embedding=[float("nan")] * DIM), "non-finite"),
        (dict(content="x", embedding=[0.0] * DIM), "zero vector"),
        (dict(content="x", embedding=b"abc"), "not float32"),
        (dict(content=""), "content"),
        (dict(content="x", importance="urgent"), "importance"),
        (dict(content="x", created_at=-1), "created_at"),
        (dict(content="x", metadata={"a": float("inf")}), "metadata"),
        (dict(content="x", embedding=[1e39] * DIM), "float32 range"),
    ],
)
def test_bad_episode_in_batch_writes_nothing(small_store, bad, match):
    good = dict(content="fine", embedding=np.ones(DIM))
    with pytest.raises(StoreError, match=match):
        small_store.add_many([good, bad])
    assert small_store.count() == 150


def test_database_rejects_wrong_dimension_even_in_raw_sql(small_store):
    with pytest.raises(apsw.ConstraintError, match="embedding_dim"):
        small_store.conn.execute(
            "INSERT INTO episodes(id, content, embedding) "
            "VALUES ('raw', 'x', x'0000803f0000803f0000803f')"
        )  # 3 floats
    assert small_store.count() == 150


def test_recall_parameter_errors(small_store):
    for kwargs, match in [
        (dict(limit=0), "limit"),
        (dict(pool="nearest"), "pool"),
        (dict(weights=(1, 1)), "weights"),
        (dict(k=-1), "k"),
        (dict(weights={"bm25": -1}), "bm25"),
        (dict(weights={"colour": 1}), "unknown"),
        (dict(qvec=[1.0, 2.0]), "dimension mismatch"),
    ]:
        with pytest.raises(StoreError, match=match):
            small_store.recall("alpha", **kwargs)


@pytest.mark.parametrize("query", ["", "   ", "zzzqqq nothingmatches", '*"-:'])
@pytest.mark.parametrize("profile", PROFILES)
def test_a_query_with_nothing_to_match_returns_nothing_and_touches_nothing(
    small_store, query, profile
):
    before = small_store.conn.execute(
        "SELECT id, accessed_at, access_count FROM episodes ORDER BY id"
    ).fetchall()
    res = small_store.recall(query, profile=profile, pool="all")
    assert len(res) == 0 and not res.touched
    assert (
        small_store.conn.execute(
            "SELECT id, accessed_at, access_count FROM episodes ORDER BY id"
        ).fetchall()
        == before
    )
    # with a query vector there is something to match: the vector list
    assert len(small_store.recall(query, profile=profile, qvec=np.ones(DIM), touch=False)) == 3


# ---- the same statement in the sqlite3 shell ----


@pytest.mark.skipif(shutil.which("sqlite3") is None, reason="the sqlite3 shell is not installed")
def test_statement_runs_unchanged_in_sqlite3_shell(small_store, tmp_path):
    qvec = np.random.default_rng(8).normal(size=DIM)
    want = run_recall(
        small_store.conn, "gamma delta", qvec, limit=7, k=30, profile=None, now=None
    )  # the default profile, the shell's clock
    script = "\n".join(
        [
            f".load {sqlite_rrf.loadable_path()}",
            ".param init",
            ".param set :query 'gamma delta'",
            f".param set :qvec '{json.dumps([float(np.float32(x)) for x in qvec])}'",
            ".param set :limit 7",
            ".param set :k 30",
            ".mode json",
            f".read {tmp_path / 'recall.sql'}",
        ]
    )
    (tmp_path / "recall.sql").write_text(read_sql("recall.sql"))
    out = subprocess.run(
        ["sqlite3", small_store.path], input=script, text=True, capture_output=True, timeout=60
    )
    assert out.returncode == 0 and not out.stderr, out.stderr
    rows = json.loads(out.stdout)
    assert [r["id"] for r in rows] == [h["id"] for h in want]
    for r, h in zip(rows, want):
        assert r["score"] == pytest.approx(h["score"], rel=1e-9)
        assert r["similarity"] == pytest.approx(h["similarity"], abs=1e-6)


# ---- fusion profiles (docs/profiles.md) ----


@pytest.fixture(scope="module")
def profile_db(tmp_path_factory):
    """400 episodes with some lifecycle multipliers set and some high importance."""
    rng = np.random.default_rng(23)
    path = tmp_path_factory.mktemp("profiles") / "p.db"
    with Store(path) as s:
        s.add_many(make_episodes(400, rng, t0=NOW - 10**10))
        for col in ("strength", "depth", "session_spread", "stability"):
            s.conn.execute(
                f"UPDATE episodes SET {col} = abs(random() % 200) / 100.0 "
                "WHERE abs(random()) % 3 = 0"
            )
    s = Store(path)
    yield s
    s.close()


@pytest.mark.parametrize("profile", PROFILES)
@pytest.mark.parametrize(
    "params",
    [
        {},
        dict(k=5.0),
        dict(w=(2.0, 0.5, 1.0, 3.0)),
        dict(w=(1.0, 1.0, 0.0, 0.0)),
        dict(w=(0.0, 1.0, 0.6, 0.4)),
        dict(pool="all"),
        dict(pool_size=30),
        dict(pool="quantized", pool_size=30, oversample=2),
        dict(min_similarity=0.2),
        dict(alpha=0.8),
        dict(bm25_limit=3),
        dict(time_from=NOW - 6 * 10**9, time_to=NOW - 3 * 10**9),
        dict(time_from=NOW - 6 * 10**9, time_to=NOW - 3 * 10**9, w_time=0.7),
    ],
)
def test_profiles_equal_python_reference(profile_db, profile, params):
    rng = np.random.default_rng(len(profile) * 7 + len(params))
    qvec = rng.normal(size=DIM)
    query = "alpha omega sigma tau"
    sql = {"limit": 60, "profile": profile}
    ref = {"limit": 60, "profile": profile}
    for key, v in params.items():
        if key == "w":
            sql.update(w_bm25=v[0], w_vec=v[1], w_recency=v[2], w_access=v[3])
        else:
            sql[key] = v
        ref[key] = v
    got = run_recall(profile_db.conn, query, qvec, **sql)
    want = reference_recall(profile_db.conn, query, qvec, **ref)
    assert len(got) == len(want) > 10
    assert_same(got, want)


def test_min_similarity_drops_only_vector_only_candidates(profile_db):
    qvec = np.random.default_rng(4).normal(size=DIM)
    got = run_recall(profile_db.conn, "alpha", qvec, limit=1000, pool="all", min_similarity=0.3)
    assert all(h["bm25_rank"] is not None or h["similarity"] >= 0.3 for h in got)
    assert any(
        h["bm25_rank"] is not None and h["similarity"] is not None and h["similarity"] < 0.3
        for h in got
    )  # BM25 hits stay whatever their cosine
    everything = run_recall(profile_db.conn, "alpha", qvec, limit=1000, pool="all")
    assert len(everything) > len(got)


def test_decay_lifecycle_multipliers_are_neutral_when_null(store):
    rng = np.random.default_rng(6)
    store.add_many(make_episodes(40, rng, t0=NOW - 10**9))
    qvec = rng.normal(size=DIM)
    base = {
        h["id"]: h["score"] for h in run_recall(store.conn, "beta", qvec, limit=40, profile="decay")
    }
    target = sorted(base)[3]
    store.conn.execute("UPDATE episodes SET strength = 2, stability = 1.5 WHERE id = ?", (target,))
    after = {
        h["id"]: h["score"] for h in run_recall(store.conn, "beta", qvec, limit=40, profile="decay")
    }
    assert after[target] == pytest.approx(base[target] * 3.0, rel=1e-12)
    assert all(after[i] == base[i] for i in base if i != target)


def _double_first_scenario(tmp_path, n=1000):
    """An old, never-used episode first in both BM25 and vector among n episodes,
    most of them recent and often used."""
    rng = np.random.default_rng(31)
    q = np.zeros(DIM)
    q[0] = 1.0
    eps = []
    for i in range(n - 2):
        v = rng.normal(size=DIM)
        v[0] = abs(v[0]) * 0.5 + 0.3 * np.linalg.norm(v[1:]) / 4  # related, never the best
        eps.append(
            dict(
                id=f"r{i}",
                content=f"ferry {' '.join(rng.choice(WORDS, size=8))}",
                embedding=v,
                created_at=NOW - int(rng.integers(0, 10**8)),
                accessed_at=NOW - int(rng.integers(0, 10**7)),
                access_count=int(rng.integers(5, 50)),
            )
        )
    second = q.copy()
    second[1] = 0.2
    eps.append(
        dict(
            id="runner",
            content="ferry zanzibar",
            embedding=second,
            created_at=NOW - 1000,
            accessed_at=NOW - 1000,
            access_count=100,
        )
    )
    eps.append(
        dict(
            id="old",
            content="zanzibar ferry zanzibar timetable",
            embedding=q,
            created_at=NOW - 400 * 86400000,
            accessed_at=NOW - 400 * 86400000,
            access_count=0,
        )
    )
    s = Store(tmp_path / "double.db")
    s.add_many(eps)
    return s, q


def test_memory_profile_never_lets_recency_outvote_a_double_first(tmp_path):
    s, q = _double_first_scenario(tmp_path)
    with s:
        query = "zanzibar ferry"
        rrf = run_recall(s.conn, query, q, limit=10, profile="rrf", pool="all")
        old_rrf = next(h for h in rrf if h["id"] == "old")
        assert old_rrf["bm25_rank"] == 1 and old_rrf["vec_rank"] == 1
        # DESIGN.md's weights: recency and usage outvote the double first place
        assert 2 <= [h["id"] for h in rrf].index("old") + 1 <= 9
        for w in [(1.0, 1.0, 0.6, 0.4), (2.0, 1.0, 1.0, 1.0), (1.0, 0.5, 3.0, 3.0)]:
            for k in (60.0, 10.0, 1.0):
                got = run_recall(
                    s.conn,
                    query,
                    q,
                    limit=3,
                    profile="memory",
                    pool="all",
                    k=k,
                    w_bm25=w[0],
                    w_vec=w[1],
                    w_recency=w[2],
                    w_access=w[3],
                )
                assert got[0]["id"] == "old", (w, k)
                assert got[1]["id"] == "runner", (w, k)  # first in one list, second in other
                assert_same(
                    got,
                    reference_recall(
                        s.conn, query, q, limit=3, profile="memory", pool="all", k=k, w=w
                    ),
                )
        # the Store's default (the statement's ranking, before diversify's reordering)
        assert s.recall(query, qvec=q, touch=False, collapse=False)[0].id == "old"
        # the default profile, 'hybrid': a double first scores 1 whatever the weights
        for w in [(1.0, 1.0, 0.6, 0.4), (2.0, 1.0, 1.0, 1.0), (1.0, 0.5, 3.0, 3.0)]:
            for alpha in (0.5, 0.2, 0.9):
                got = run_recall(
                    s.conn,
                    query,
                    q,
                    limit=3,
                    profile=None,
                    pool=None,
                    alpha=alpha,
                    w_bm25=w[0],
                    w_vec=w[1],
                    w_recency=w[2],
                    w_access=w[3],
                )
                assert got[0]["id"] == "old" and got[0]["score"] == 1.0, (w, alpha)
                assert_same(
                    got,
                    reference_recall(
                        s.conn,
                        query,
                        q,
                        limit=3,
                        profile="hybrid",
                        pool="quantized",
                        w=w,
                        alpha=alpha,
                    ),
                )


def test_memory_profile_breaks_ties_by_recency_and_use(store):
    """Equally relevant episodes: the more recent and more used one ranks first."""
    v = np.ones(DIM)
    common = dict(content="identical words here", embedding=v)
    store.add_many(
        [
            dict(
                id="stale",
                created_at=NOW - 10**9,
                accessed_at=NOW - 10**9,
                access_count=0,
                **common,
            ),
            dict(id="fresh", created_at=NOW, accessed_at=NOW, access_count=9, **common),
        ]
    )
    for profile in ("hybrid", "memory"):
        got = store.recall(
            "identical words",
            qvec=v,
            touch=False,
            limit=2,
            profile=profile,
            force=True,
            collapse=False,
        )  # the same text: one hit otherwise
        assert [h.id for h in got] == ["fresh", "stale"], profile
    got = store.recall(
        "identical words",
        qvec=v,
        touch=False,
        limit=2,
        profile="memory",
        force=True,
        collapse=False,
    )
    assert [h.id for h in got] == ["fresh", "stale"]
    assert got[0].bm25_rank == got[1].bm25_rank or got[0].vec_rank == got[1].vec_rank
    assert got[0].score > got[1].score


def test_equal_scores_come_newest_first(store):
    """Candidates the relevance lists cannot tell apart (no hit, the same similarity) in
    the 'rrf' profile with recency and access off: recency then use order them."""
    store.add_many(
        [
            dict(
                id=f"t{i}",
                content=f"plain words {i}",
                created_at=NOW - i * 1000,
                accessed_at=NOW,
                access_count=i % 3,
                embedding=np.ones(DIM),
            )
            for i in range(8)
        ]
    )
    got = store.recall(
        "zzzz-nothing",
        limit=8,
        touch=False,
        qvec=np.ones(DIM),
        profile="rrf",
        weights={"recency": 0, "access": 0},
    )
    assert len({h.score for h in got}) == 1 and got[0].score > 0
    assert [h.id for h in got] == [f"t{i}" for i in range(8)]


# ---- vectors the store cannot use ----


def test_unusable_vectors_are_refused_where_the_extension_is_loaded(small_store):
    n = small_store.count()
    nan = np.ones(DIM, dtype="<f4")
    nan[5] = np.nan
    for blob, match in [
        (nan.tobytes(), "vec_cosine: argument 1 has NaN at index 5"),
        (np.full(DIM, np.inf, "<f4").tobytes(), "vec_cosine: argument 1 has"),
        (np.zeros(DIM, "<f4").tobytes(), "zero vector"),
    ]:
        with pytest.raises(apsw.Error, match=match):
            small_store.conn.execute(
                "INSERT INTO episodes(id, content, embedding) VALUES ('bad', 'x', ?)", (blob,)
            )
        with pytest.raises(apsw.Error, match=match):
            small_store.conn.execute("UPDATE episodes SET embedding = ? WHERE rowid = 1", (blob,))
    assert small_store.count() == n


def test_a_nan_vector_from_another_client_is_skipped_and_named(tmp_path):
    """A client without the extension writes a NaN vector (the schema cannot check NaN
    without it): every recall still works, leaves that row out of the vector list and
    says which row; the other rows rank as before."""
    rng = np.random.default_rng(11)
    path = tmp_path / "nan.db"
    with Store(path) as s:
        s.add_many(make_episodes(80, rng))
        q = rng.normal(size=DIM)
        want = [
            h.id
            for h in s.recall("alpha", qvec=q, pool="all", limit=10, touch=False, collapse=False)
        ]
    bad = np.asarray(rng.normal(size=DIM), "<f4")
    bad[5] = np.nan
    other = apsw.Connection(str(path))  # no extension loaded
    other.execute("UPDATE episodes SET embedding = ? WHERE id = ?", (bad.tobytes(), want[0]))
    other.close()
    with Store(path) as s:
        rowid = s.get(want[0]).rowid
        for pool in ("all", "recent"):
            res = s.recall("alpha", qvec=q, pool=pool, limit=10, touch=False, force=True)
            assert want[0] not in [h.id for h in res if h.vec_rank is not None]
            assert len(res.warnings) == 1 and f"rowid {rowid}" in res.warnings[0]
            assert "nan at index 5" in res.warnings[0].lower()
        res = s.recall(
            "alpha", qvec=q, pool="all", limit=10, touch=False, force=True, collapse=False
        )
        assert [h.id for h in res if h.id != want[0]][:5] == want[1:6]


# ---- filters: scope, kind, since, until ----


@pytest.fixture(scope="module")
def filter_db(tmp_path_factory):
    """2,000 episodes: 1 % in scope 'tiny', the rest spread over two scopes and the
    shared one; kinds and creation times spread so that every filter cuts."""
    rng = np.random.default_rng(12)
    eps = make_episodes(2000, rng)
    for i, ep in enumerate(eps):
        ep["scope"] = "tiny" if i % 100 == 7 else ("proj-a", "proj-b", "")[i % 3]
        ep["kind"] = ("fact", "event", None)[i % 3 if i % 5 else 0]
    s = Store(tmp_path_factory.mktemp("filters") / "f.db")
    s.add_many(eps)
    yield s
    s.close()


@pytest.mark.parametrize(
    "filters",
    [
        dict(scope="tiny"),
        dict(scope="proj-a"),
        dict(scope=""),
        dict(kind="fact"),
        dict(since=1_700_000_000_000 + 6 * 10**9),
        dict(until=1_700_000_000_000 + 3 * 10**9),
        dict(scope="proj-b", kind="event", since=1_700_000_000_000 + 2 * 10**9),
        dict(scope="no-such-scope"),
    ],
)
@pytest.mark.parametrize("pool", ["recent", "all"])
def test_filtered_recall_matches_the_reference(filter_db, filters, pool):
    rng = np.random.default_rng(hash(str(sorted(filters.items()))) % 2**32)
    for query in ("alpha beta", "gamma delta epsilon", "omega"):
        q = rng.normal(size=DIM)
        got = run_recall(
            filter_db.conn, query, q, limit=10, pool=pool, pool_size=20, bm25_limit=15, **filters
        )
        want = reference_recall(
            filter_db.conn, query, q, limit=10, pool=pool, pool_size=20, bm25_limit=15, **filters
        )
        assert_same(got, want)
        ids = {h["id"] for h in got}
        rows = {
            r[0]: r
            for r in filter_db.conn.execute("SELECT id, scope, kind, created_at FROM episodes")
        }
        for i in ids:
            _, sc, kd, created = rows[i]
            assert filters.get("scope", sc) == sc and filters.get("kind", kd) == kd
            assert created >= filters.get("since", created)
            assert created < filters.get("until", created + 1)
    if filters == dict(scope="no-such-scope"):
        assert got == []


def test_a_tiny_scope_gets_a_full_bm25_list(filter_db):
    """The BM25 list is the top of the scope's rows, not the top of all rows filtered
    afterwards: a 1 % scope still gets :bm25_limit hits when it has that many."""
    hits = filter_db.recall(
        "alpha", scope="tiny", limit=50, touch=False, profile="rrf", bm25_limit=10, force=True
    )
    in_bm25 = [h for h in hits if h.bm25_rank is not None]
    n_match = filter_db.conn.execute(
        "SELECT count(*) FROM episodes_fts JOIN episodes AS e ON e.rowid = episodes_fts.rowid "
        "WHERE episodes_fts MATCH 'alpha' AND e.scope = 'tiny'"
    ).fetchall()[0][0]
    assert len(in_bm25) == min(10, n_match) > 0
    assert all(h.id for h in hits)


def test_each_pool_and_profile_statement_equals_the_reference(tmp_path):
    """The statement of each pool and profile (what Store, the CLI, MCP and Datasette
    run; sql/recall.sql is the default one's) returns what the Python reference
    computes, explanations included."""
    from sqlite_rrf.core.statements import POOLS, PROFILES

    rng = np.random.default_rng(5)
    with Store(tmp_path / "s.db") as s:
        s.add_many(make_episodes(300, rng))
        assert read_sql("recall.sql") == recall_statement()
        for query, qvec in (
            ("alpha omega", rng.normal(size=DIM)),
            ("sigma", None),
            ("", rng.normal(size=DIM)),
        ):
            for pool in POOLS:
                for profile in PROFILES:
                    kw = dict(pool=pool, profile=profile, limit=25, pool_size=40, oversample=2)
                    got = run_recall(s.conn, query, qvec, **kw)
                    assert_same(got, reference_recall(s.conn, query, qvec, **kw))
                    assert len(got) > 0 or (not query.strip() and qvec is None)


def test_mmap_size_maps_the_file_and_recalls_the_same(tmp_path):
    """Store(mmap_size=...) sets SQLite's memory-mapped I/O; the recall is the same."""
    rng = np.random.default_rng(9)
    eps = make_episodes(200, rng)
    with Store(tmp_path / "m.db") as s:
        s.add_many(eps)
        qvec = rng.normal(size=DIM)
        want = [(h.id, h.score) for h in s.recall("alpha beta", qvec=qvec, touch=False)]
    with Store(tmp_path / "m.db", mmap_size=1 << 30) as s:
        assert s.conn.execute("PRAGMA mmap_size").fetchall()[0][0] > 0
        got = [(h.id, h.score) for h in s.recall("alpha beta", qvec=qvec, touch=False)]
    assert got == want
    for bad in (-1, 1.5, "big", True):
        with pytest.raises(StoreError, match="mmap_size: must be an integer"):
            Store(tmp_path / "m.db", mmap_size=bad)


# ---- time expressions in the query (sqlite_rrf.core.timeexpr) ----


def test_a_time_in_the_query_raises_the_episodes_of_its_window(tmp_path):
    """Two equally good matches, one written yesterday and one a month ago: 'yesterday'
    in the query puts yesterday's first, 'a month ago' the other; without a time, or
    with time_expressions=False or time_weight=0, the order is the statement's usual
    one (newer first on a tie). The window is a signal: the other match stays."""
    day = 86_400_000
    now = 1_700_000_000_000 - 1_700_000_000_000 % day + 15 * 3_600_000  # 15:00 UTC
    with Store(tmp_path / "t.db") as s:
        s.add(
            "the plumber fixed the kitchen sink",
            id="old",
            created_at=now - 30 * day,
            accessed_at=now - 30 * day,
        )
        s.add(
            "the plumber fixed the kitchen sink",
            id="new",
            created_at=now - day,
            accessed_at=now - day,
        )
        s.add(
            "unrelated note about taxes",
            id="x",
            created_at=now - 5 * day,
            accessed_at=now - 5 * day,
        )

        def ids(q, **kw):
            return [h.id for h in s.recall(q, 3, now=now, touch=False, collapse=False, **kw)]

        assert ids("what did the plumber fix yesterday")[:2] == ["new", "old"]
        assert ids("what did the plumber fix a month ago")[:2] == ["old", "new"]
        assert ids("what did the plumber fix")[:2] == ["new", "old"]
        assert ids("what did the plumber fix a month ago", time_expressions=False)[:2] == [
            "new",
            "old",
        ]
        assert ids("what did the plumber fix a month ago", time_weight=0)[:2] == ["new", "old"]
        with pytest.raises(StoreError, match="time_weight: must be a finite number >= 0"):
            s.recall("plumber", time_weight=-1)
