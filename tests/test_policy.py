"""What the recall statement shows, and what a recall touches.

- The relevance the statement computes is :func:`sqlite_rrf.core.relevance.relevance`'s.
- The shown-hit policy (``:min_relevance`` with ``:min_share``) is the statement's: a hit
  is shown when its relevance reaches the floor and is at least ``min_share`` of the best
  hit's; without ``min_relevance`` every returned hit is shown.
- A recall touches only what it returned after the policy: 50 prompts through the
  prompt hook's own code path on the packaged sample memory, and no filler (a hit of the
  unfiltered top 3 that the policy does not show) gains an access, so no filler's access
  rank climbs.
- The packaged sample memory, asked as the hook asks: no shown hit below half the best
  shown hit's relevance, and at least 18 of 20 off-topic prompts silent.
- A superseded episode (``superseded_by`` set) is left out unless
  ``include_superseded`` (Store, CLI ``--include-superseded``, the statement's
  ``:include_superseded``).
"""

from __future__ import annotations

import contextlib
import io
import json
from typing import Any, Dict

import numpy as np
import pytest

from conftest import embedding_model, needs_model
from sqlite_rrf.core.relevance import DEFAULT_MIN_RELEVANCE, query_idf_mass, relevance
from sqlite_rrf.core.sql_files import data_path
from sqlite_rrf.core.statements import recall_defaults
from sqlite_rrf.store import Store

DIM = 8
TEXTS = [
    "deploys go out on Tuesdays after the stand-up",
    "the staging cluster runs Kubernetes on three nodes",
    "postgres backups are taken every six hours",
    "the user prefers tea over coffee",
    "alerts go to the forecast alerts channel",
    "deploys are frozen during the holidays",
    "the dashboard loads slowly on Monday mornings",
    "feature flags older than 90 days must be removed",
]


def _memory(path: Any = ":memory:", vectors: bool = True) -> Store:
    rng = np.random.default_rng(7)
    st = Store(str(path))
    st.add_many(
        [
            {
                "id": f"e{i}",
                "content": t,
                "embedding": rng.standard_normal(DIM).astype("<f4") if vectors else None,
                "created_at": 1_700_000_000_000 + i * 86_400_000,
            }
            for i, t in enumerate(TEXTS)
        ]
    )
    return st


def _qvec(seed: int = 3) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(DIM).astype("<f4")


@pytest.mark.parametrize("with_vector", [True, False])
def test_the_statements_relevance_is_the_python_reference(with_vector):
    st = _memory()
    q = "when do deploys go out, and the postgres backups?"
    hits = st.recall(q, limit=8, qvec=_qvec() if with_vector else None, touch=False)
    assert len(hits) >= 3
    ev = query_idf_mass(st.conn, q)
    for h in hits:
        want = relevance(h.similarity, h.bm25_score, ev.idf_mass, ev.terms)
        assert h.relevance == pytest.approx(want, rel=1e-12, abs=1e-15), h.id


@pytest.mark.parametrize("share", [0.0, 0.5, 0.9])
@pytest.mark.parametrize("floor", [0.0, 0.05, 0.3])
def test_the_policy_is_a_filter_of_the_ranking(floor, share):
    st = _memory()
    q = "deploys and postgres backups and the dashboard"
    every = st.recall(q, limit=6, qvec=_qvec(), touch=False)
    shown = st.recall(q, limit=6, qvec=_qvec(), touch=False, min_relevance=floor, min_share=share)
    best = max(h.relevance for h in every)
    want = [h.id for h in every if h.relevance >= floor and h.relevance >= share * best]
    assert [h.id for h in shown] == want
    assert [h.score for h in shown] == sorted((h.score for h in shown), reverse=True)
    if not want:
        assert shown.reason and "min_relevance" in shown.reason


def test_the_policys_default_share_is_the_statements():
    st = _memory()
    q = "deploys and postgres backups and the dashboard"
    a = st.recall(q, limit=6, qvec=_qvec(), touch=False, min_relevance=0.0)
    b = st.recall(
        q,
        limit=6,
        qvec=_qvec(),
        touch=False,
        min_relevance=0.0,
        min_share=recall_defaults()["min_share"],
    )
    assert [h.id for h in a] == [h.id for h in b]


def test_a_superseded_episode_is_left_out_unless_asked(tmp_path):
    from sqlite_rrf.cli import main

    st = _memory()
    st.add("deploys moved from Tuesdays to Thursdays", id="new", embedding=_qvec(11))
    st.conn.execute("UPDATE episodes SET superseded_by = 'new' WHERE id = 'e0'")
    q = "when do deploys go out on Tuesdays"
    for qvec in (_qvec(), None):
        for pool in ("recent", "all", "quantized"):
            got = [h.id for h in st.recall(q, limit=8, qvec=qvec, pool=pool, touch=False)]
            assert "e0" not in got and "new" in got, (pool, got)
            every = st.recall(
                q, limit=8, qvec=qvec, pool=pool, touch=False, include_superseded=True
            )
            assert "e0" in [h.id for h in every], pool
    st.close()
    path = tmp_path / "m.db"  # the command line embeds the query: a memory without vectors
    st = _memory(path, vectors=False)
    st.add("deploys moved from Tuesdays to Thursdays", id="new")
    st.conn.execute("UPDATE episodes SET superseded_by = 'new' WHERE id = 'e0'")
    st.close()
    for extra, present in (([], False), (["--include-superseded"], True)):
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            rc = main(["recall", str(path), q, "--json", "--no-touch", "--scope", "*", *extra])
        assert rc == 0
        ids = [h["id"] for h in json.loads(out.getvalue())]
        assert ("e0" in ids) == present, (extra, ids)
    out = io.StringIO()  # the text output says which fact replaced a hit
    with contextlib.redirect_stdout(out):
        rc = main(["recall", str(path), q, "--no-touch", "--scope", "*", "--include-superseded"])
    assert rc == 0
    (line,) = [l for l in out.getvalue().splitlines() if " e0 " in l]
    assert line.endswith("[replaced by new]"), line


# ---------------------------------------------------------------- the sample memory, as the hook

#: Prompts an agent's user might type that the sample memory (a team's infrastructure
#: and decisions) cannot answer; written for this test.
OFF_TOPIC = [
    "hi there",
    "thanks a lot!",
    "what's the capital of Canada?",
    "tell me a joke about penguins",
    "how do I bake sourdough bread?",
    "recommend a sci-fi novel",
    "what is 17 times 23?",
    "translate 'good night' into Italian",
    "who painted the Mona Lisa?",
    "how tall is Mount Everest?",
    "give me a synonym for happy",
    "what rhymes with orange?",
    "how do I tie a bowline knot?",
    "what's the best way to learn the guitar?",
    "write a limerick about a frog",
    "how many planets are in the solar system?",
    "what's the boiling point of water in Fahrenheit?",
    "suggest a name for my goldfish",
    "ok, sounds good",
    "explain photosynthesis to a child",
]

#: Prompts about the sample memory (repeated to make 50 recalls).
ON_TOPIC = [
    "where are the production postgres credentials?",
    "when do we deploy to production?",
    "write a migration that renames the column customer_name to full_name",
    "which kubernetes version does staging run?",
    "how often are the postgres backups taken?",
    "why is the dashboard slow on monday mornings?",
    "what happened with the nightly ETL job?",
    "who gets paged for anomaly alerts?",
    "which CI system do we use?",
    "how should I format code review comments?",
    "how are feature flags managed?",
    "what's the current sprint goal?",
    "where do the grafana dashboards live?",
    "what did we decide about customer invoices?",
    "why did we choose FastAPI?",
    "where do analytics events go now?",
    "when is the forecasting model retrained?",
    "how is the frontend deployed?",
    "what's the anomaly alert threshold?",
    "can I run the database migration on Friday?",
    "what python version does the data science team use?",
    "what is the on-call rotation?",
    "which slack channel gets the alerts?",
    "what should happen to the cron jobs on the old VM?",
    "how did the certificate expiry incident get fixed?",
]


@pytest.fixture(scope="module")
def embedder():
    from sqlite_rrf.embedding.embedder import Embedder

    e = Embedder(embedding_model(), n_threads=1)
    yield e
    e.close()


@pytest.fixture(scope="module")
def sample_db(tmp_path_factory, embedder):
    path = tmp_path_factory.mktemp("sample") / "sample.db"
    with open(data_path("sample_episodes.jsonl"), encoding="utf-8") as f:
        rows = [json.loads(line) for line in f if line.strip()]
    st = Store(str(path), embedder=embedder)
    st.add_many(rows)
    st.close()
    return path


def _hook(st: Store, prompt: str) -> Any:
    from sqlite_rrf.app.prompt_recall import respond

    req: Dict[str, Any] = {
        "prompt": prompt,
        "scope": None,
        "max_chars": 0,
        "max_total": 0,
        "format": "markdown",
    }
    return respond(st, req)


@needs_model
def test_the_sample_memory_as_the_hook(sample_db, embedder):
    st = Store(str(sample_db), embedder=embedder)
    silent = sum(1 for p in OFF_TOPIC if not _hook(st, p)[0])
    assert silent >= 18, silent
    shown_any = 0
    for p in ON_TOPIC:
        text, result = _hook(st, p)
        if result is None or not len(result):
            continue
        shown_any += 1
        best = max(h.relevance for h in result)
        assert all(h.relevance >= 0.5 * best for h in result), (p, [h.relevance for h in result])
        assert all(h.relevance >= DEFAULT_MIN_RELEVANCE for h in result)
    assert shown_any >= len(ON_TOPIC) * 0.8
    st.close()


@needs_model
def test_fifty_prompts_touch_only_what_was_shown(sample_db, embedder, tmp_path):
    import shutil

    path = tmp_path / "touch.db"
    shutil.copyfile(sample_db, path)
    st = Store(str(path), embedder=embedder)

    def counts() -> Dict[str, int]:
        return dict(st.conn.execute("SELECT id, access_count FROM episodes").fetchall())

    def ranks(c: Dict[str, int]) -> Dict[str, int]:
        """Each episode's access rank among all: 1 + how many were used more."""
        return {k: 1 + sum(1 for o in c.values() if o > v) for k, v in c.items()}

    before = counts()
    shown: Dict[str, int] = {}
    fillers: set = set()
    qualified: set = set()
    limit = recall_defaults()["result_limit"]
    share = recall_defaults().get("min_share", 0.5)  # (0.5 for a revision without it)
    prompts = (ON_TOPIC * 2)[:50]
    for p in prompts:
        # a filler: a hit of the unfiltered top 3 below the floor or half the best's relevance
        every = st.recall(p, limit=limit, touch=False, force=True)
        best = max((h.relevance for h in every), default=0.0)
        for h in every:
            ok = h.relevance >= DEFAULT_MIN_RELEVANCE and h.relevance >= share * best
            (qualified if ok else fillers).add(h.id)
        text, result = _hook(st, p)
        for h in result if result is not None else []:
            shown[h.id] = shown.get(h.id, 0) + 1
        if result is not None:
            st.touch(result)
    after = counts()
    # every access is a shown hit's
    for k in after:
        assert after[k] - before[k] == shown.get(k, 0), k
    # the fillers that never qualified: never touched, their access rank never better
    only_fillers = fillers - qualified
    assert only_fillers, "no filler: the test would prove nothing"
    rb, ra = ranks(before), ranks(after)
    for k in only_fillers:
        assert after[k] == before[k] and ra[k] >= rb[k], (k, rb[k], ra[k])
    st.close()
