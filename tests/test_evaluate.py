"""The evaluation (the sqlite_rrf.evaluation package): metrics
against hand-computed values and an independent brute-force reference, BEIR loading and
its errors, the cached store, an end-to-end evaluation on a tiny collection whose rankings
are obvious, the ``eval`` command's JSON, and what the modules offer and import.

Everything here runs on a five-document collection written to ``tmp_path`` with cached
(hand-made, 8-dimensional) embeddings; only the test marked ``embed`` loads the GGUF
model, for a collection without caches.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import os
import random
import subprocess
import sys

import apsw
import numpy as np
import pytest

from sqlite_rrf.cli import evaluate as cli
from sqlite_rrf.evaluation import beir, cached_store, metrics, report, runner, runs
from sqlite_rrf.evaluation.metrics import mrr_at_k, ndcg_at_k, recall_at_k

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODEL = os.environ.get("SQLITE_RRF_MODEL") or os.path.join(
    os.path.dirname(REPO), "shared", "models", "all-MiniLM-L6-v2-f16.gguf"
)
L2_3 = math.log2(3)


# ---------------------------------------------------------------------------------------
# Metrics: hand-computed
# ---------------------------------------------------------------------------------------


def test_single_relevant_at_rank_two():
    ranked, qrels = ["a", "b", "c"], {"b": 1}
    assert ndcg_at_k(ranked, qrels, 10) == pytest.approx(1 / L2_3)  # 0.63093
    assert mrr_at_k(ranked, qrels, 10) == pytest.approx(0.5)
    assert recall_at_k(ranked, qrels, 100) == 1.0
    assert recall_at_k(ranked, qrels, 1) == 0.0
    assert ndcg_at_k(ranked, qrels, 1) == 0.0


def test_graded_relevance():
    # DCG = 2/log2(3) + 1/log2(4) = 1.2618595 + 0.5 = 1.7618595
    # IDCG over the qrels {c:3, a:2, b:1} = 3/1 + 2/log2(3) + 1/2 = 4.7618595
    ranked, qrels = ["x", "a", "b"], {"a": 2, "b": 1, "c": 3}
    assert ndcg_at_k(ranked, qrels, 10) == pytest.approx(0.3699937, abs=1e-6)
    assert ndcg_at_k(["c", "a", "b"], qrels, 10) == pytest.approx(1.0)
    # The gain is the grade itself (trec_eval), not 2^grade - 1: swapping a (2) and b (1)
    # in the ideal ranking costs (2-1)*(1/log2(3) - 1/2)/IDCG.
    assert ndcg_at_k(["c", "b", "a"], qrels, 10) == pytest.approx(
        1 - (1 / L2_3 - 0.5) / 4.7618595, abs=1e-6
    )
    # The ideal DCG is cut at k too: with k = 2, IDCG = 3 + 2/log2(3).
    assert ndcg_at_k(["a", "c"], qrels, 2) == pytest.approx((2 + 3 / L2_3) / (3 + 2 / L2_3))
    # Recall and MRR count every grade > 0 as relevant.
    assert recall_at_k(ranked, qrels, 100) == pytest.approx(2 / 3)
    assert mrr_at_k(ranked, qrels, 10) == pytest.approx(0.5)


def test_zero_and_negative_grades_are_not_relevant():
    qrels = {"a": 0, "b": -1, "c": 1}
    ranked = ["a", "b", "c"]
    assert ndcg_at_k(ranked, qrels, 10) == pytest.approx(0.5)  # 1/log2(4)
    assert mrr_at_k(ranked, qrels, 10) == pytest.approx(1 / 3)
    assert recall_at_k(ranked, qrels, 100) == 1.0
    # A query with no positive judgment scores 0 (not NaN, not skipped).
    assert ndcg_at_k(ranked, {"a": 0}, 10) == 0.0
    assert recall_at_k(ranked, {"a": 0}, 100) == 0.0
    assert mrr_at_k(ranked, {}, 10) == 0.0


def test_ties_in_a_score_mapping_break_by_doc_id_descending():
    # trec_eval (pytrec_eval, BEIR) sorts by score, then doc id descending: b before a.
    run = {"a": 1.0, "b": 1.0, "c": 0.5}
    assert ndcg_at_k(run, {"a": 1}, 10) == pytest.approx(1 / L2_3)
    assert mrr_at_k(run, {"a": 1}, 10) == pytest.approx(0.5)
    assert mrr_at_k(run, {"b": 1}, 10) == 1.0
    assert mrr_at_k(run, {"c": 1}, 10) == pytest.approx(1 / 3)
    assert ndcg_at_k({"d10": 2.0, "d9": 2.0}, {"d10": 1}, 10) == pytest.approx(1 / L2_3)


def test_cut_off_and_degenerate_rankings():
    ranked = [f"n{i}" for i in range(10)] + ["rel"]  # rank 11
    assert ndcg_at_k(ranked, {"rel": 1}, 10) == 0.0
    assert mrr_at_k(ranked, {"rel": 1}, 10) == 0.0
    assert recall_at_k(ranked, {"rel": 1}, 100) == 1.0
    assert ndcg_at_k(ranked, {"rel": 1}, 11) == pytest.approx(1 / math.log2(12))
    assert ndcg_at_k([], {"a": 1}, 10) == 0.0
    assert recall_at_k([], {"a": 1}, 100) == 0.0
    # A repeated id keeps its first position (it is not counted twice).
    assert ndcg_at_k(["a", "a", "b"], {"b": 1}, 10) == pytest.approx(1 / L2_3)
    # Relevant documents that are not in the corpus still count in the denominators.
    assert recall_at_k(["a"], {"a": 1, "gone": 1}, 100) == 0.5
    with pytest.raises(ValueError):
        ndcg_at_k(["a"], {"a": 1}, 0)
    with pytest.raises(TypeError):
        ndcg_at_k("abc", {"a": 1}, 10)


def test_score_run_averages_over_every_query():
    qrels = {"q1": {"a": 1}, "q2": {"b": 1}, "q3": {"c": 1}}
    rankings = {"q1": ["a"], "q2": ["x", "b"]}  # q3: nothing
    m = metrics.score_run(rankings, qrels)
    assert m["ndcg@10"] == pytest.approx((1 + 1 / L2_3 + 0) / 3)
    assert m["mrr@10"] == pytest.approx((1 + 0.5 + 0) / 3)
    assert m["recall@100"] == pytest.approx(2 / 3)
    assert set(m) == {"ndcg@10", "recall@100", "mrr@10"}


# ---------------------------------------------------------------------------------------
# Metrics: against a brute-force reference written independently
# ---------------------------------------------------------------------------------------


def ref_ndcg(ranked, qrels, k):
    """DCG over an explicit position loop; the ideal DCG as the best DCG over every
    ordering of the judged documents (brute force, no sorting)."""

    def dcg(seq):
        total = 0.0
        for pos in range(1, min(k, len(seq)) + 1):
            g = max(qrels.get(seq[pos - 1], 0), 0)
            total += g * (1.0 / math.log(pos + 1, 2))
        return total

    judged = list(qrels)
    best = max((dcg(list(p)) for p in itertools.permutations(judged)), default=0.0)
    seen, seq = set(), []
    for d in ranked:
        if d not in seen:
            seen.add(d)
            seq.append(d)
    return dcg(seq) / best if best > 0 else 0.0


def ref_recall(ranked, qrels, k):
    rel = [d for d, g in qrels.items() if g >= 1]
    top = []
    for d in ranked:
        if d not in top:
            top.append(d)
    top = top[:k]
    return (sum(1 for d in rel if d in top) / len(rel)) if rel else 0.0


def ref_mrr(ranked, qrels, k):
    pos = 0
    seen = set()
    for d in ranked:
        if d in seen:
            continue
        seen.add(d)
        pos += 1
        if pos > k:
            break
        if qrels.get(d, 0) >= 1:
            return 1.0 / pos
    return 0.0


@pytest.mark.parametrize("seed", range(40))
def test_metrics_match_brute_force_reference(seed):
    rnd = random.Random(seed)
    docs = [f"d{i}" for i in range(rnd.randint(3, 25))]
    qrels = {
        d: rnd.choice([0, 1, 1, 2, 3]) for d in rnd.sample(docs, rnd.randint(1, min(6, len(docs))))
    }
    ranked = rnd.sample(docs, rnd.randint(0, len(docs)))
    if ranked and rnd.random() < 0.3:
        ranked.insert(rnd.randrange(len(ranked)), rnd.choice(ranked))  # a duplicate
    for k in (1, 3, 5, 10):
        assert ndcg_at_k(ranked, qrels, k) == pytest.approx(ref_ndcg(ranked, qrels, k))
        assert mrr_at_k(ranked, qrels, k) == pytest.approx(ref_mrr(ranked, qrels, k))
        assert recall_at_k(ranked, qrels, k) == pytest.approx(ref_recall(ranked, qrels, k))
    # A score mapping with ties gives the same as the list in trec_eval's order.
    scores = {d: float(rnd.randint(0, 3)) for d in docs}
    order = sorted(docs, key=lambda d: (-scores[d], [-ord(c) for c in d] + [1]))
    for k in (1, 5, 10):
        assert ndcg_at_k(scores, qrels, k) == pytest.approx(ref_ndcg(order, qrels, k))
        assert mrr_at_k(scores, qrels, k) == pytest.approx(ref_mrr(order, qrels, k))


# ---------------------------------------------------------------------------------------
# A tiny BEIR collection
# ---------------------------------------------------------------------------------------

DOCS = [
    ("d1", "Solar panels", "Photovoltaic cells convert sunlight into electricity."),
    ("d2", "Honey bees", "Bees pollinate flowers and produce honey in their hives."),
    ("d3", "Volcanoes", "Magma rises through the crust and erupts as lava."),
    ("d4", "Chess openings", "The Sicilian defence is a popular chess opening."),
    ("d5", "Sourdough", "Wild yeast leavens bread dough over many hours."),
]
QUERIES = [
    ("q1", "how do photovoltaic cells make electricity"),
    ("q2", "bees honey hives"),
    ("q3", "lava and magma"),
    ("q9", "a training query about sourdough bread"),  # judged only in train
]
QRELS = {
    "test": [("q1", "d1", 2), ("q2", "d2", 1), ("q2", "d5", 0), ("q3", "d3", 1)],
    "train": [("q9", "d5", 1)],
}
DIM = 8


def _unit(v):
    v = np.asarray(v, dtype=np.float32)
    return v / np.linalg.norm(v)


def doc_vectors():
    """d_i close to the i-th axis (plus a shared small component)."""
    return {
        d: _unit([1.0 if j == i else 0.05 for j in range(DIM)]) for i, (d, _, _) in enumerate(DOCS)
    }


def query_vectors():
    """q1, q2 point at their documents; q3 points at d4 (wrong) with d3 second, so the
    vector list alone ranks q3's relevant document 2nd and fusion with BM25 fixes it."""
    e = np.eye(DIM, dtype=np.float32)
    return {
        "q1": _unit(e[0] + 0.02),
        "q2": _unit(e[1] + 0.02),
        "q3": _unit(0.9 * e[3] + 0.3 * e[2] + 0.02),
        "q9": _unit(e[4] + 0.02),
    }


def write_collection(
    root, *, cache=True, split_files=("test", "train"), shuffle_cache=True, drop_from_cache=()
):
    root.mkdir(parents=True, exist_ok=True)
    with open(root / "corpus.jsonl", "w", encoding="utf-8") as f:
        for d, title, text in DOCS:
            f.write(json.dumps({"_id": d, "title": title, "text": text, "metadata": {}}) + "\n")
    with open(root / "queries.jsonl", "w", encoding="utf-8") as f:
        for q, text in QUERIES:
            f.write(json.dumps({"_id": q, "text": text, "metadata": {}}) + "\n")
    (root / "qrels").mkdir(exist_ok=True)
    for split in split_files:
        with open(root / "qrels" / f"{split}.tsv", "w", encoding="utf-8") as f:
            f.write("query-id\tcorpus-id\tscore\n")
            for q, d, s in QRELS[split]:
                f.write(f"{q}\t{d}\t{s}\n")
    if cache:
        for prefix, vecs in (("corpus", doc_vectors()), ("queries", query_vectors())):
            ids = [i for i in vecs if i not in drop_from_cache]
            if shuffle_cache:
                ids = ids[::-1]  # not the order of the .jsonl files
            np.save(root / f"{prefix}.minilm.npy", np.stack([vecs[i] for i in ids]))
            (root / f"{prefix}.minilm.ids.json").write_text(json.dumps(ids))
    return root


@pytest.fixture
def tiny(tmp_path):
    return write_collection(tmp_path / "tiny")


@pytest.fixture(autouse=True)
def _no_home_cache(tmp_path, monkeypatch):
    """Never write to the user's ~/.cache, and never load the model by accident."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg-cache"))


# ---------------------------------------------------------------------------------------
# load_beir
# ---------------------------------------------------------------------------------------


def test_load_beir_with_cache(tiny):
    data = beir.load_beir(tiny)
    assert data.corpus_ids == [d for d, _, _ in DOCS]
    assert (
        data.corpus_texts[0] == "Solar panels Photovoltaic cells convert sunlight into electricity."
    )
    assert data.query_ids == ["q1", "q2", "q3"]  # q9 is not in the test split
    assert data.query_texts[2] == "lava and magma"
    assert data.qrels == {"q1": {"d1": 2}, "q2": {"d2": 1, "d5": 0}, "q3": {"d3": 1}}
    assert all(isinstance(g, int) for r in data.qrels.values() for g in r.values())
    # The caches were written in reverse order: rows are realigned by id.
    dv, qv = doc_vectors(), query_vectors()
    assert data.corpus_embeddings.shape == (5, DIM)
    for i, d in enumerate(data.corpus_ids):
        np.testing.assert_array_equal(data.corpus_embeddings[i], dv[d])
    for i, q in enumerate(data.query_ids):
        np.testing.assert_array_equal(data.query_embeddings[i], qv[q])
    assert data.corpus_missing == [] and data.query_missing == []
    assert not data.needs_embedder()
    train = beir.load_beir(tiny, split="train")
    assert train.query_ids == ["q9"] and train.qrels == {"q9": {"d5": 1}}


def test_load_beir_without_cache(tmp_path):
    data = beir.load_beir(write_collection(tmp_path / "nocache", cache=False))
    assert data.corpus_embeddings is None and data.query_embeddings is None
    assert data.corpus_missing == list(range(5)) and data.query_missing == [0, 1, 2]
    assert data.needs_embedder()


def test_load_beir_partial_cache(tmp_path):
    data = beir.load_beir(write_collection(tmp_path / "partial", drop_from_cache=("d3", "q2")))
    assert data.corpus_missing == [2] and data.query_missing == [1]
    assert not data.corpus_embeddings[2].any()
    np.testing.assert_array_equal(data.corpus_embeddings[3], doc_vectors()["d4"])


def _corrupt(root, name, text, mode="w"):
    path = root / name
    if mode == "a":
        with open(path, "a", encoding="utf-8") as f:
            f.write(text)
    else:
        path.write_text(text, encoding="utf-8")


@pytest.mark.parametrize(
    "damage, message",
    [
        (lambda r: os.remove(r / "corpus.jsonl"), r"corpus\.jsonl: missing"),
        (lambda r: os.remove(r / "queries.jsonl"), r"queries\.jsonl: missing"),
        (
            lambda r: _corrupt(r, "corpus.jsonl", "{not json\n", "a"),
            r"corpus\.jsonl: line 6: invalid JSON",
        ),
        (lambda r: _corrupt(r, "corpus.jsonl", "[1, 2]\n", "a"), r"line 6: expected a JSON object"),
        (
            lambda r: _corrupt(r, "corpus.jsonl", '{"title": "t", "text": "x"}\n', "a"),
            r'line 6: no "_id" field',
        ),
        (
            lambda r: _corrupt(r, "corpus.jsonl", '{"_id": "d1", "text": "again"}\n', "a"),
            r"line 6: _id 'd1' already on line 1",
        ),
        (
            lambda r: _corrupt(r, "corpus.jsonl", '{"_id": "d9", "text": 5}\n', "a"),
            r'line 6: "text" must be a string',
        ),
        (
            lambda r: _corrupt(r, "queries.jsonl", '{"_id": "q1", "text": "dup"}\n', "a"),
            r"queries\.jsonl: line 5: _id 'q1' appears twice",
        ),
        (
            lambda r: _corrupt(r, "qrels/test.tsv", "q1 d2 1\n", "a"),
            r"test\.tsv: line 6: expected 3",
        ),
        (lambda r: _corrupt(r, "qrels/test.tsv", "q1\td2\thigh\n", "a"), r"line 6: score 'high'"),
        (lambda r: _corrupt(r, "qrels/test.tsv", "q1\td2\t0.5\n", "a"), r"not an integer grade"),
        (
            lambda r: _corrupt(r, "qrels/test.tsv", "q7\td2\t1\n", "a"),
            r"judged query is not in queries\.jsonl \(e\.g\. 'q7'\)",
        ),
        (lambda r: _corrupt(r, "qrels/test.tsv", "query-id\tcorpus-id\tscore\n"), r"no judgments"),
        (
            lambda r: os.remove(r / "qrels" / "test.tsv"),
            r"test\.tsv: missing .*available splits: train",
        ),
        (lambda r: os.remove(r / "corpus.minilm.ids.json"), r"corpus\.minilm\.ids\.json: missing"),
        (
            lambda r: np.save(r / "corpus.minilm.npy", np.ones((4, DIM), np.float32)),
            r"shape \(4, 8\) does not match the 5 ids",
        ),
        (lambda r: _corrupt(r, "queries.minilm.ids.json", '{"a": 1}'), r"expected a JSON list"),
        (lambda r: _corrupt(r, "corpus.minilm.npy", "not numpy"), r"not a readable \.npy"),
        (
            lambda r: np.save(r / "queries.minilm.npy", np.ones((4, 3), np.float32)),
            r"corpus embedding cache is 8-dimensional but the query cache is 3",
        ),
    ],
)
def test_load_beir_errors_name_the_file_and_fault(tiny, damage, message):
    damage(tiny)
    with pytest.raises(beir.BeirFormatError, match=message):
        beir.load_beir(tiny)


def test_load_beir_not_a_directory(tmp_path):
    with pytest.raises(beir.BeirFormatError, match="not a directory"):
        beir.load_beir(tmp_path / "nowhere")


# ---------------------------------------------------------------------------------------
# build_store
# ---------------------------------------------------------------------------------------


def test_build_store_contents_and_cache(tiny, tmp_path, monkeypatch):
    db = tmp_path / "eval.db"
    with cached_store.build_store(tiny, db, progress=False) as store:
        assert store.count() == 5
        ep = store.get("d3")
        assert ep.content == "Volcanoes Magma rises through the crust and erupts as lava."
        np.testing.assert_allclose(ep.embedding, doc_vectors()["d3"])
    conn = apsw.Connection(str(db))
    rows = conn.execute(
        "SELECT DISTINCT created_at, accessed_at, access_count FROM episodes"
    ).fetchall()
    conn.close()
    assert rows == [
        (cached_store.EVAL_EPOCH_MS, cached_store.EVAL_EPOCH_MS, 0)
    ]  # no time or usage signal
    side = json.loads((tmp_path / "eval.db.eval.json").read_text())
    assert side["documents"] == 5

    # A second call reuses the database: nothing is written.
    from sqlite_rrf.store import Store

    def refuse(*a, **k):
        raise AssertionError("the cached database was rebuilt")

    monkeypatch.setattr(Store, "add_many", refuse)
    with cached_store.build_store(tiny, db, progress=False) as store:
        assert store.count() == 5
    # A changed corpus file (size or mtime) invalidates it.
    st = os.stat(tiny / "corpus.jsonl")
    os.utime(tiny / "corpus.jsonl", ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
    with pytest.raises(AssertionError, match="rebuilt"):
        cached_store.build_store(tiny, db, progress=False)
    monkeypatch.undo()
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg-cache"))
    with cached_store.build_store(tiny, db, progress=False) as store:
        assert store.count() == 5
    assert not [p for p in os.listdir(tmp_path) if ".building" in p]


def test_build_store_default_location_and_stale_caches(tiny, tmp_path):
    with cached_store.build_store(tiny, progress=False) as store:
        first = store.path
    assert first.startswith(str(tmp_path / "xdg-cache" / "sqlite-rrf" / "eval"))
    assert os.path.basename(first).startswith("tiny-")
    with open(tiny / "corpus.jsonl", "a", encoding="utf-8") as f:
        f.write("\n")  # a new size: a new key
    with cached_store.build_store(tiny, progress=False) as store:
        second = store.path
    assert second != first and os.path.exists(second)
    assert not os.path.exists(first) and not os.path.exists(first + ".eval.json")


def test_build_store_refuses_a_foreign_database(tiny, tmp_path):
    from sqlite_rrf.store import Store

    mine = tmp_path / "memory.db"
    with Store(str(mine)) as s:
        s.add("my precious memory", embedding=[1.0, 0.0])
    with pytest.raises(cached_store.EvalCacheError, match="not an evaluation database"):
        cached_store.build_store(tiny, mine, progress=False)
    with Store(str(mine)) as s:
        assert s.count() == 1


class KeywordEmbedder:
    """A stand-in for the Embedder: a one-hot vector per topic word (no model)."""

    dim = DIM
    model_name = "keyword-test-embedder"
    topics = ["photovoltaic", "bees", "lava", "chess", "dough"]

    def __init__(self):
        self.calls = []

    def embed(self, text):
        return self.embed_many([text])[0]

    def embed_many(self, texts, progress=None, desc=""):
        self.calls.append(list(texts))
        out = np.full((len(texts), DIM), 0.01, dtype=np.float32)
        for i, t in enumerate(texts):
            for j, w in enumerate(self.topics):
                if w in t.lower():
                    out[i, j] = 1.0
        return out / np.linalg.norm(out, axis=1, keepdims=True)

    def close(self):
        pass


def test_missing_vectors_are_embedded(tmp_path):
    root = write_collection(tmp_path / "partial", drop_from_cache=("d3", "q2"))
    emb = KeywordEmbedder()
    res = runner.evaluate(
        root, runs=["vector"], embedder=emb, progress=False, db_path=tmp_path / "p.db"
    )
    from sqlite_rrf.embedding.models import FINGERPRINT_TEXTS

    # the missing vectors, and the fixed texts of the database's model fingerprint
    assert sorted(emb.calls) == sorted(
        [
            ["Volcanoes Magma rises through the crust and erupts as lava."],
            ["bees honey hives"],
            list(FINGERPRINT_TEXTS),
        ]
    )
    assert res["runs"]["vector"]["ndcg@10"] == pytest.approx((1 + 1 + 1 / L2_3) / 3)
    assert any("1 document(s) and 1 query(ies) embedded" in n for n in res["notes"])


# ---------------------------------------------------------------------------------------
# evaluate(): end to end on the tiny collection
# ---------------------------------------------------------------------------------------


def test_evaluate_end_to_end(tiny, tmp_path):
    res = runner.evaluate(tiny, progress=False, db_path=tmp_path / "e.db")
    assert res["split"] == "test" and res["queries"] == 3 and res["corpus"] == 5
    assert res["collection"] == "tiny"
    by_run = res["runs"]
    assert list(by_run)[:4] == ["default", "bm25", "vector", "rrf"]
    for name, m in by_run.items():
        assert set(m) == {"ndcg@10", "recall@100", "mrr@10"}, name
        assert all(0.0 <= v <= 1.0 for v in m.values()), name
    # BM25 finds every relevant document first (the words are unambiguous).
    assert by_run["bm25"] == {"ndcg@10": 1.0, "recall@100": 1.0, "mrr@10": 1.0}
    # The vector list alone puts q3's document 2nd: nDCG (1 + 1 + 1/log2(3))/3.
    assert by_run["vector"]["ndcg@10"] == pytest.approx((2 + 1 / L2_3) / 3)
    assert by_run["vector"]["mrr@10"] == pytest.approx(2.5 / 3)
    assert by_run["vector"]["recall@100"] == 1.0
    # RRF: d3 (BM25 1st, vector 2nd) beats d4 (vector 1st only).
    assert by_run["rrf"] == {"ndcg@10": 1.0, "recall@100": 1.0, "mrr@10": 1.0}
    # One run per profile (the rrf profile with recency/access 0 is the rrf run).
    from sqlite_rrf.store import PROFILES

    profiles = [p for p in PROFILES if p != "rrf"]
    assert list(by_run)[4:] == profiles
    for p in profiles:
        w = res["params"][p]["weights"]
        assert w["recency"] == 0 and w["access"] == 0
    assert any("recency and access weights are 0" in n for n in res["notes"])
    assert res["timings"]["runs"]["bm25"]["ms_per_query_median"] > 0
    json.dumps(res)  # serialisable


def test_evaluate_run_selection_and_params(tiny, tmp_path):
    db = tmp_path / "e.db"
    res = runner.evaluate(
        tiny,
        runs=["rrf", "bm25"],
        progress=False,
        db_path=db,
        profile_params={"rrf": {"weights": (0.0, 1.0, 0.0, 0.0)}},
        per_query=True,
    )
    assert list(res["runs"]) == ["rrf", "bm25"]
    # With the BM25 weight overridden to 0 the rrf run is the vector run.
    assert res["runs"]["rrf"]["ndcg@10"] == pytest.approx((2 + 1 / L2_3) / 3)
    assert res["params"]["rrf"]["weights"] == [0.0, 1.0, 0.0, 0.0]
    assert res["per_query"]["rrf"]["q3"]["mrr@10"] == pytest.approx(0.5)
    with pytest.raises(ValueError, match="unknown run 'nope'"):
        runner.evaluate(tiny, runs=["nope"], progress=False, db_path=db)
    with pytest.raises(ValueError, match="profile_params: unknown run"):
        runner.evaluate(tiny, profile_params={"nope": {}}, progress=False, db_path=db)


def test_every_run_goes_through_store_recall(tiny, tmp_path, monkeypatch):
    from sqlite_rrf.store import Store

    seen = []
    real = Store.recall

    def spy(self, query, limit=3, **kw):
        seen.append((query, limit, kw))
        return real(self, query, limit, **kw)

    monkeypatch.setattr(Store, "recall", spy)
    res = runner.evaluate(tiny, progress=False, db_path=tmp_path / "e.db")
    assert len(seen) == 3 * len(res["runs"])
    assert all(lim == 100 and kw["touch"] is False and kw["force"] is True for _, lim, kw in seen)
    assert all((kw["qvec"] is None) == (kw.get("pool_size") == 0) for _, _, kw in seen)


def test_evaluate_in_two_processes_gives_the_same(tiny, tmp_path):
    one = runner.evaluate(
        tiny, runs=["bm25", "vector", "rrf"], progress=False, db_path=tmp_path / "e.db"
    )
    two = runner.evaluate(
        tiny, runs=["bm25", "vector", "rrf"], progress=False, db_path=tmp_path / "e.db", jobs=2
    )
    assert one["runs"] == two["runs"]


def test_knn_pool_covering_the_corpus_matches_all(tiny, tmp_path):
    pytest.importorskip(
        "sqlite_vec", reason="sqlite-vec is not installed: pip install 'sqlite-rrf[knn]'"
    )
    db = tmp_path / "k.db"
    full = runner.evaluate(tiny, runs=["rrf"], progress=False, db_path=db, per_query=True)
    knn = runner.evaluate(
        tiny,
        runs=["rrf"],
        progress=False,
        db_path=db,
        knn=True,
        per_query=True,
        profile_params={"rrf": {"pool": "knn", "pool_size": 5}},
    )
    assert knn["runs"] == full["runs"] and knn["per_query"] == full["per_query"]
    assert knn["params"]["rrf"]["pool"] == "knn"


def test_plot_and_table(tiny, tmp_path):
    pytest.importorskip(
        "matplotlib", reason="matplotlib is not installed: pip install 'sqlite-rrf[bench]'"
    )
    res = runner.evaluate(
        tiny, runs=["bm25", "vector", "rrf"], progress=False, db_path=tmp_path / "e.db"
    )
    png = tmp_path / "out" / "ndcg.png"
    report.plot(res, png)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    res["collection"] = "scifact"  # with reference lines
    report.plot(res, tmp_path / "sci.png")
    table = report.format_table(res)
    assert "nDCG@10" in table and "R@100" in table and "MRR@10" in table
    assert "0.6451" in table and "notes:" in table


# ---------------------------------------------------------------------------------------
# The command line
# ---------------------------------------------------------------------------------------


def _check_json_shape(out: dict) -> None:
    assert set(out) >= {"runs", "split", "queries", "corpus", "notes"}
    assert out["split"] == "test" and out["queries"] == 3 and out["corpus"] == 5
    assert {"bm25", "vector", "rrf"} <= set(out["runs"])
    for m in out["runs"].values():
        assert set(m) == {"ndcg@10", "recall@100", "mrr@10"}
        assert all(isinstance(v, float) for v in m.values())
    assert out["runs"]["rrf"]["ndcg@10"] == 1.0
    assert any("recency and access" in n for n in out["notes"])


def test_run_cli_json(tiny, tmp_path, capsys):
    parser = argparse.ArgumentParser(prog="sqlite-rrf")
    cli.add_parser(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["eval", str(tiny), "--json", "--db", str(tmp_path / "c.db")])
    assert args.func(args) == 0
    _check_json_shape(json.loads(capsys.readouterr().out))

    plot = ["--plot", str(tmp_path / "p.png")] if _has_matplotlib() else []
    args = parser.parse_args(
        [
            "eval",
            str(tiny),
            "--run",
            "bm25",
            "rrf",
            "--db",
            str(tmp_path / "c.db"),
            "--set",
            "rrf.k=1",
            *plot,
        ]
    )
    assert args.func(args) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0] == "tiny (test split): 3 queries, 5 documents"
    assert [ln.split()[0] for ln in out.splitlines()[4:6]] == ["bm25", "rrf"]
    assert os.path.exists(tmp_path / "p.png") or not _has_matplotlib()

    args = parser.parse_args(["eval", str(tiny), "--profile", "nope"])
    assert args.func(args) == 1
    assert "unknown run or profile 'nope'" in capsys.readouterr().err
    args = parser.parse_args(["eval", str(tmp_path / "missing")])
    assert args.func(args) == 1
    assert "not a directory" in capsys.readouterr().err


def _has_matplotlib() -> bool:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    return True


def test_cli_eval_json_subprocess(tiny, tmp_path):
    env = dict(
        os.environ,
        XDG_CACHE_HOME=str(tmp_path / "xdg"),
        SQLITE_RRF_MODEL=str(tmp_path / "no-model.gguf"),
    )
    p = subprocess.run(
        [sys.executable, "-m", "sqlite_rrf", "eval", str(tiny), "--json"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert p.returncode == 0, p.stderr
    _check_json_shape(json.loads(p.stdout))
    p = subprocess.run(
        [sys.executable, "-m", "sqlite_rrf", "eval", str(tmp_path / "none")],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert p.returncode == 1 and p.stderr.count("\n") == 1 and "not a directory" in p.stderr


# ---------------------------------------------------------------------------------------
# The modules: what the evaluation package offers, what importing costs
# ---------------------------------------------------------------------------------------


def test_run_parameters_are_store_recalls_keywords():
    # RUN_PARAMETERS is every field of the one options type a run may set
    import dataclasses

    from sqlite_rrf.store import RecallOptions

    fixed = {"limit", "touch", "force", "qvec"}
    names = {f.name for f in dataclasses.fields(RecallOptions)}
    assert set(runs.RUN_PARAMETERS) == names - fixed
    assert "min_share" in runs.RUN_PARAMETERS and "limit" not in runs.RUN_PARAMETERS


def test_runs_are_made_when_asked_for():
    from sqlite_rrf.store import PROFILES

    made = runs.available_runs()
    assert list(made) == (
        ["default", "bm25", "vector", "rrf"] + [p for p in PROFILES if p != "rrf"]
    )
    # the default run is the recall as users run it: nothing set but the clock
    assert dict(made["default"].params) == {"now": cached_store.EVAL_EPOCH_MS}
    assert made["memory"].params["now"] == cached_store.EVAL_EPOCH_MS


def test_the_eval_command_line_imports_nothing_heavy():
    # Building the command line's parser must not import the evaluation, the store or numpy.
    code = (
        "import sys, argparse; from sqlite_rrf.cli import evaluate as cli; "
        "cli.add_parser(argparse.ArgumentParser().add_subparsers()); "
        "print(sorted(m for m in ('numpy', 'apsw', 'sqlite_rrf.store', "
        "'sqlite_rrf.evaluation.runner') if m in sys.modules))"
    )
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == "[]"


# ---------------------------------------------------------------------------------------
# With the real embedder (no caches)
# ---------------------------------------------------------------------------------------


def _llama_importable() -> bool:
    try:
        import llama_cpp  # noqa: F401
    except Exception:
        return False
    return True


@pytest.mark.embed
@pytest.mark.skipif(not os.path.isfile(MODEL), reason=f"the embedding model {MODEL} is not there")
@pytest.mark.skipif(
    not _llama_importable(),
    reason="llama-cpp-python is not installed: pip install 'sqlite-rrf[embed]'",
)
def test_evaluate_without_cache_embeds_with_the_model(tmp_path):
    root = write_collection(tmp_path / "nocache", cache=False)
    res = runner.evaluate(
        root,
        runs=["bm25", "vector", "rrf"],
        progress=False,
        db_path=tmp_path / "n.db",
        model_path=MODEL,
    )
    assert res["runs"]["bm25"]["ndcg@10"] == 1.0
    # MiniLM sees the topics: every relevant document is first.
    assert res["runs"]["vector"]["mrr@10"] == 1.0
    assert res["runs"]["rrf"]["ndcg@10"] == 1.0
    assert any("5 document(s) and 3 query(ies) embedded" in n for n in res["notes"])
    with cached_store.build_store(
        root, tmp_path / "n.db", progress=False, model_path=MODEL
    ) as store:
        assert store.dim == 384 and store.count() == 5
