"""Absolute relevance and the floor (silence when nothing is relevant).

- every hit's ``relevance`` equals a plain reference computed here from the texts (FTS5's
  IDF and bm25 formulas written out, the logistic model of :mod:`sqlite_rrf.core.relevance`);
- ``min_relevance`` empties a recall none of whose hits reaches it (after the ranking;
  a recall that passes keeps its hits as ranked), through Store, the command line, the
  prompt hook and MCP (the real SDK client); the hook and MCP ``recall`` use
  DEFAULT_MIN_RELEVANCE, so an off-topic prompt gets nothing and an on-topic one its memory;
- without a model, a high-importance memory that matches no word of the query never
  outranks a keyword match (the 'hybrid' profile's importance nudge scales with relevance).
"""

from __future__ import annotations

import asyncio
import json
import math
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any, Dict, List, Tuple

import numpy as np
import pytest

from conftest import embedding_model, needs_model
from sqlite_rrf.core import relevance as R
from sqlite_rrf.core.statements import recall_defaults
from sqlite_rrf.store import Store, StoreError

#: A small agent memory: project facts and preferences.
MEMORY = [
    ("shell", "The user uses fish shell, not bash, on the office laptop."),
    ("deploy", "Deploys go out with scripts/deploy.sh after the nightly Postgres backup."),
    ("vault", "The staging database password is kept in Vault under secret/staging/db."),
    ("tabs", "Alice prefers tabs over spaces in the Python code base."),
    ("ci", "CI runs on GitHub Actions with Ubuntu 22.04 runners."),
    ("standup", "The team standup is at 9:30 every weekday in the small meeting room."),
    ("lint", "Run ruff and mypy before every commit; the pre-commit hook does both."),
    ("oncall", "Bob is on call this week; page him through PagerDuty for outages."),
]
#: Prompts about nothing in MEMORY (what an agent's user types besides work).
OFF_TOPIC = [
    "hi",
    "thanks, that worked!",
    "tell me a joke about cats",
    "banana bread recipe with yeast",
    "what's the weather like in Lisbon tomorrow?",
]
#: Prompts about one memory each.
ON_TOPIC = [
    ("which shell does the user use?", "shell"),
    ("where is the staging database password?", "vault"),
    ("who is on call this week?", "oncall"),
]


def make_memory(path: Any, embedder: Any = None) -> Store:
    store = Store(path, embedder=embedder)
    for eid, text in MEMORY:
        store.add(text, id=eid)
    return store


@pytest.fixture(scope="module")
def embedder():
    if embedding_model() is None:
        pytest.skip("needs the embedding model")
    from sqlite_rrf.embedding.embedder import Embedder

    with Embedder(embedding_model()) as e:
        yield e


@pytest.fixture(scope="module")
def model_db(tmp_path_factory, embedder) -> Path:
    path = tmp_path_factory.mktemp("relevance") / "memory.db"
    make_memory(path, embedder).close()
    return path


# ---- the relevance against a plain reference ----

WORDS = "alpha beta gamma delta kappa lambda sigma omega zeta theta".split()


def reference_relevance(docs: Dict[str, str], query: str, doc: str, cosine: Any) -> float:
    """FTS5's bm25 of ``doc`` for ``query`` (k1 1.2, b 0.75; IDF ln((N - n + 0.5) /
    (n + 0.5)), at least 1e-6), divided by the query's IDF mass (a word no document
    holds counted as if one did) times n / (n + 2) for a query of n distinct words, capped
    at 2, through the documented logistic model.
    Words are plain lower-case tokens that the porter stemmer leaves as they are."""
    toks = {k: v.split() for k, v in docs.items()}
    n_docs = len(docs)
    avgdl = sum(len(t) for t in toks.values()) / n_docs
    qwords = list(dict.fromkeys(query.lower().split()))

    def idf(w: str) -> float:
        n = sum(1 for t in toks.values() if w in t)
        n = max(n, 1)  # absent: as if one document held it
        return max(math.log((n_docs - n + 0.5) / (n + 0.5)), 1e-6)

    mass = sum(idf(w) for w in qwords)
    tf = Counter(toks[doc])
    dl = len(toks[doc])
    bm25 = sum(
        idf(w) * tf[w] * 2.2 / (tf[w] + 1.2 * (1 - 0.75 + 0.75 * dl / avgdl))
        for w in qwords
        if tf[w]
    )
    n = len(qwords)
    b = min(bm25 / mass * n / (n + 2), 2.0) if mass > 0 else 0.0
    if cosine is None:
        z = -2.55 + 7.08 * b
    else:
        z = -3.79 + 6.35 * cosine + 4.07 * b
    return 1 / (1 + math.exp(-z))


def test_the_module_constants_are_the_documented_model():
    """The reference above writes the coefficients out; they are the module's."""
    assert R.WITH_VECTOR == (-3.79, 6.35, 4.07) and R.BM25_ONLY == (-2.55, 7.08)
    assert R.BM25_CAP == 2.0 and R.TERMS_PRIOR == 2.0 and 0 < R.DEFAULT_MIN_RELEVANCE < 1


@pytest.mark.parametrize("with_vectors", [True, False])
def test_relevance_equals_a_plain_reference(with_vectors):
    rng = np.random.default_rng(11)
    docs = {f"d{i}": " ".join(rng.choice(WORDS, size=int(rng.integers(3, 12)))) for i in range(40)}
    vecs = {k: rng.normal(size=16) for k in docs}
    with Store(":memory:") as store:
        store.add_many(
            [
                {"id": k, "content": v, "embedding": vecs[k] if with_vectors else None}
                for k, v in docs.items()
            ]
        )
        checked = 0
        for query in [
            "alpha beta",
            "gamma omega sigma",
            "kappa unseenword",
            "zeta zeta theta",
            "nothing matches here",
        ]:
            qvec = rng.normal(size=16)
            got = store.recall(query, limit=40, qvec=qvec if with_vectors else None, touch=False)
            for h in got:
                cos = None
                if with_vectors:
                    v = vecs[h.id]
                    cos = float(v @ qvec / np.linalg.norm(v) / np.linalg.norm(qvec))
                    assert h.similarity == pytest.approx(cos, abs=1e-5)
                want = reference_relevance(docs, query, h.id, cos)
                assert h.relevance == pytest.approx(want, abs=1e-5), (query, h.id)
                checked += 1
        assert checked > 100


def test_relevance_is_absolute_not_relative_to_the_best():
    """The top hit of a query about nothing is not a perfect match (the 'hybrid' score
    of the top hit is near 1 whatever the query)."""
    with Store(":memory:") as store:
        for eid, text in MEMORY:
            store.add(text, id=eid)
        strong = store.recall("staging database password Vault", touch=False)[0]
        weak = store.recall("thanks, that is the plan", touch=False)[0]
        assert strong.id == "vault" and strong.relevance > 0.5
        assert weak.relevance < R.DEFAULT_MIN_RELEVANCE
        assert weak.score > 0.5  # what the relevance is there for


def test_query_idf_mass_counts_absent_words():
    with Store(":memory:") as store:
        store.add_many([{"content": t} for t in ("alpha beta", "alpha gamma", "delta")])
        ev = R.query_idf_mass(store.conn, "Alpha delta nowhere nowhere")
        assert (ev.terms, ev.absent, ev.rows) == (3, 1, 3)
        # alpha in 2 of 3: the floor; delta in 1 of 3; nowhere: as if in 1
        one = math.log((3 - 1 + 0.5) / 1.5)
        assert ev.idf_mass == pytest.approx(1e-6 + one + one)
        assert R.query_idf_mass(store.conn, "  ...  ").idf_mass == 0.0


# ---- the floor through Store ----


@needs_model
def test_store_floor_silences_off_topic_and_keeps_on_topic(model_db, embedder):
    with Store(model_db, embedder=embedder) as store:
        for prompt in OFF_TOPIC:
            every = store.recall(prompt, touch=False, force=True)
            assert len(every) == 3  # Store's own default: no floor
            assert all(h.relevance is not None and 0 <= h.relevance <= 1 for h in every)
            got = store.recall(
                prompt, touch=False, force=True, min_relevance=R.DEFAULT_MIN_RELEVANCE
            )
            assert list(got) == [], (prompt, [(h.id, h.relevance) for h in got])
            assert not got.skipped and "min_relevance" in got.reason
        for prompt, want in ON_TOPIC:
            got = store.recall(
                prompt, touch=False, force=True, min_relevance=R.DEFAULT_MIN_RELEVANCE
            )
            assert got[0].id == want and got.reason is None
            assert got[0].relevance >= R.DEFAULT_MIN_RELEVANCE
        # the policy is per hit: a weak hit under a strong one is not shown (the floor and
        # the share of the best hit's relevance, the statement's :min_share)
        every = store.recall("which shell does the user use?", limit=8, touch=False, force=True)
        assert min(h.relevance for h in every) < R.DEFAULT_MIN_RELEVANCE < every[0].relevance
        kept = store.recall(
            "which shell does the user use?",
            limit=8,
            touch=False,
            force=True,
            min_relevance=R.DEFAULT_MIN_RELEVANCE,
        )
        share = recall_defaults()["min_share"]
        best = max(h.relevance for h in every)
        want = [
            (h.id, h.relevance)
            for h in every
            if h.relevance >= R.DEFAULT_MIN_RELEVANCE and h.relevance >= share * best
        ]
        assert [(h.id, h.relevance) for h in kept] == want and len(want) < len(every)
        assert len(store.recall("hi", touch=False, force=True, min_relevance=0)) == 3


@pytest.mark.parametrize("bad", [-0.1, 1.5, "high", True, float("nan")])
def test_store_refuses_a_bad_floor(bad):
    with Store(":memory:") as store:
        store.add("something")
        with pytest.raises(StoreError, match=r"^min_relevance: must be a number from 0 to 1"):
            store.recall("something", min_relevance=bad)


def test_floor_without_a_model():
    """Without a model the BM25-only model gives the relevance; the floor still drops a
    prompt that shares only a common word with the memory."""
    with Store(":memory:") as store:
        for eid, text in MEMORY:
            store.add(text, id=eid)
        got = store.recall(
            "where is the staging database password kept?",
            touch=False,
            min_relevance=R.DEFAULT_MIN_RELEVANCE,
        )
        assert got[0].id == "vault" and got[0].similarity is None
        assert (
            list(
                store.recall(
                    "thanks, that is the plan", touch=False, min_relevance=R.DEFAULT_MIN_RELEVANCE
                )
            )
            == []
        )


# ---- without a model, importance does not outrank relevance ----


def test_importance_never_outranks_a_keyword_match_without_a_model():
    """High-importance memories that share only a stopword ('the', 'is') with the query
    rank below every memory that matches one of its words. (Before: the importance
    nudge, 0.25 of the gap, was worth more than a keyword match, whose relevance is at
    most 0.5 without a model.)"""
    rng = np.random.default_rng(1)
    for pool in (None, "recent"):
        with Store(":memory:") as store:  # vectors stored, as a model wrote them; none now
            for text, imp in [
                ("The deploy script lives in scripts/deploy.sh and runs on Fridays.", "normal"),
                ("Staging deploys need a green CI run first.", "normal"),
                ("Always answer the user in British English.", "high"),
                ("The cat's name is Miso.", "high"),
                ("Lunch is at noon in the cafeteria.", "normal"),
                ("Deploy freezes start on December 20th.", "normal"),
                ("Invoices are generated by a nightly cron job.", "normal"),
                ("The office wifi password changes monthly.", "normal"),
                ("Bob is on call this week.", "normal"),
                ("Alice prefers tabs over spaces.", "normal"),
            ]:
                store.add(text, importance=imp, embedding=rng.normal(size=8))
            got = store.recall("how does the deploy script run?", pool=pool, limit=10, touch=False)
            words = {"deploy", "script", "run", "how", "does"}
            matches = [
                h
                for h in got
                if words
                & set(re.findall(r"[a-z]+", h.content.lower().replace("deploys", "deploy")))
            ]
            assert len(matches) == 3
            first_high = min(i for i, h in enumerate(got) if h.importance == "high")
            assert first_high >= len(matches), [(h.content, h.importance, h.score) for h in got]


# ---- the command line and the hook ----


def cli(*argv: str, stdin: bytes = b"") -> Tuple[int, str, str]:
    p = subprocess.run(
        [sys.executable, "-m", "sqlite_rrf", *argv], input=stdin, capture_output=True, timeout=300
    )
    return p.returncode, p.stdout.decode(), p.stderr.decode()


def hook(db: Path, prompt: str, *args: str) -> Tuple[int, str, str]:
    return cli(
        "hook",
        str(db),
        "--scope",
        "",
        *args,
        stdin=json.dumps({"prompt": prompt, "session_id": "s1"}).encode(),
    )


@needs_model
def test_hook_prints_nothing_for_off_topic_prompts(model_db):
    for prompt in OFF_TOPIC:
        rc, out, err = hook(model_db, prompt)
        assert (rc, out, err) == (0, "", ""), prompt
    for prompt, want in ON_TOPIC:
        rc, out, err = hook(model_db, prompt)
        assert rc == 0 and err == ""
        assert f"`{want}`" in out.splitlines()[1], out
    # the floor can be set: 0 shows the hits close enough to the best one, 1 none
    rc, out, _ = hook(model_db, "tell me a joke about cats", "--min-relevance", "0")
    assert rc == 0 and 1 <= len([l for l in out.splitlines() if l.startswith("- ")]) <= 3
    rc, out, _ = hook(model_db, "which shell does the user use?", "--min-relevance", "1")
    assert (rc, out) == (0, "")
    rc, out, err = hook(model_db, "hi", "--min-relevance", "2")
    assert (rc, out) == (0, "")
    assert err.startswith("sqlite-rrf hook: --min-relevance: must be a number from 0 to 1")


@needs_model
def test_cli_recall_min_relevance(model_db):
    rc, out, _ = cli("recall", str(model_db), "banana bread recipe with yeast", "--no-touch")
    assert rc == 0 and out.count("relevance ") == 3  # the command line's default: no floor
    rc, out, _ = cli(
        "recall",
        str(model_db),
        "banana bread recipe with yeast",
        "--no-touch",
        "--min-relevance",
        str(R.DEFAULT_MIN_RELEVANCE),
    )
    assert rc == 0 and out.startswith("nothing relevant enough: no hit reaches min_relevance")
    rc, out, _ = cli(
        "recall",
        str(model_db),
        "which shell does the user use?",
        "--no-touch",
        "--json",
        "--min-relevance",
        "0.5",
    )
    hits = json.loads(out)
    # the policy per hit: only the hits that reach the floor (and half the best's)
    assert hits[0]["id"] == "shell" and all(h["relevance"] >= 0.5 for h in hits)
    rc, out, _ = cli(
        "recall",
        str(model_db),
        "which shell does the user use?",
        "--no-touch",
        "--json",
        "--min-relevance",
        "1",
    )
    assert rc == 0 and json.loads(out) == []
    rc, out, err = cli("recall", str(model_db), "hi", "--min-relevance", "-1")
    assert rc != 0 and "--min-relevance: must be a number from 0 to 1" in err


# ---- MCP, through the real SDK client ----


@needs_model
def test_mcp_recall_uses_the_floor(model_db, tmp_path):
    pytest.importorskip("mcp.server.mcpserver")
    from mcp import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    async def main() -> Dict[str, Any]:
        params = StdioServerParameters(
            command=sys.executable,
            args=["-m", "sqlite_rrf", "mcp", str(model_db), "--scope", ""],
            env={"SQLITE_RRF_MODEL": str(embedding_model())},
        )
        out: Dict[str, Any] = {}
        with open(tmp_path / "err.txt", "w") as err:
            async with stdio_client(params, errlog=err) as (read, write):
                async with ClientSession(read, write) as s:
                    await s.initialize()

                    async def recall(**kw: Any) -> Any:
                        res = await s.call_tool("recall", kw)
                        return (
                            res.structured_content
                            if not res.is_error
                            else ("error", res.content[0].text)
                        )

                    out["off"] = [await recall(query=p) for p in OFF_TOPIC]
                    out["on"] = [await recall(query=p, explain=True) for p, _ in ON_TOPIC]
                    out["zero"] = await recall(
                        query="banana bread recipe with yeast", min_relevance=0
                    )
                    out["bad"] = await recall(query="hi", min_relevance=3)
                    tools = await s.list_tools()
                    out["schema"] = next(t for t in tools.tools if t.name == "recall").input_schema
        return out

    out = asyncio.run(main())
    for got in out["off"]:
        assert got["hits"] == [] and "min_relevance" in got["reason"]
    for got, (_, want) in zip(out["on"], ON_TOPIC):
        assert got["hits"][0]["id"] == want and "reason" not in got
        assert got["hits"][0]["explain"]["relevance"] >= R.DEFAULT_MIN_RELEVANCE
    assert len(out["zero"]["hits"]) == 3
    assert out["bad"][0] == "error" and "min_relevance" in out["bad"][1]
    prop = out["schema"]["properties"]["min_relevance"]
    assert prop["default"] == R.DEFAULT_MIN_RELEVANCE and prop["maximum"] == 1


# ---- Datasette: the canned query's relevance column and min_relevance ----


def test_datasette_recall_has_the_relevance_and_the_floor(tmp_path):
    """Through Datasette's own test client: the canned query's ``relevance`` column is
    Store's, and ``min_relevance`` keeps the rows that reach it."""
    datasette_app = pytest.importorskip("datasette.app", reason="needs datasette")
    from datasette.utils.sqlite import sqlite3 as ds_sqlite3

    if not hasattr(ds_sqlite3.connect(":memory:"), "enable_load_extension"):
        pytest.skip("Datasette's sqlite3 module cannot load extensions")
    import urllib.parse

    db = tmp_path / "memory.db"
    rng = np.random.default_rng(4)
    vecs = {eid: rng.normal(size=16) for eid, _ in MEMORY}
    with Store(db) as store:
        store.add_many(
            [{"id": eid, "content": text, "embedding": vecs[eid]} for eid, text in MEMORY]
        )
    qvec = (vecs["vault"] + 0.5 * rng.normal(size=16)).tolist()

    def rows(**params: Any) -> List[Dict[str, Any]]:
        async def go() -> Any:
            ds = datasette_app.Datasette([str(db)])
            await ds.invoke_startup()
            q = urllib.parse.urlencode(dict(params, _shape="array"))
            return await ds.client.get(f"/memory/recall.json?{q}")

        r = asyncio.run(go())
        assert r.status_code == 200, r.text
        return r.json()

    for query, qv in (
        ("where is the staging database password?", qvec),
        ("which shell does the user use", None),
    ):
        params = dict(query=query, limit=8, profile="rrf")
        if qv is not None:
            params["qvec"] = json.dumps(qv)
        got = rows(**params)
        with Store(db) as store:
            want = {
                h.id: h.relevance
                for h in store.recall(query, limit=8, profile="rrf", qvec=qv, touch=False)
            }
        assert len(got) >= 5 and {r["id"] for r in got} <= set(want)
        for r in got:
            assert r["relevance"] == pytest.approx(want[r["id"]], rel=1e-9), r["id"]
        floor = sorted(r["relevance"] for r in got)[-2]
        kept = rows(**params, min_relevance=floor, min_share=0)
        assert [r["id"] for r in kept] == [r["id"] for r in got if r["relevance"] >= floor]
        assert len(kept) == 2
        best = max(r["relevance"] for r in got)
        kept = rows(**params, min_relevance=0, min_share=0.9)
        assert [r["id"] for r in kept] == [r["id"] for r in got if r["relevance"] >= 0.9 * best]
