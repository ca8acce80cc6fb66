"""Silence when nothing is relevant: how often the prompt hook prints
nothing for prompts its memory cannot answer, and what the relevance floor costs the
questions it can.

Each LongMemEval_S dev question's haystack becomes a memory file (one episode per user
turn, dated by its session, as ``sqlite-rrf eval`` builds it; vectors from the evaluation's
embedding cache, :mod:`sqlite_rrf.evaluation.embcache`). Then:

(a) abstention questions (``_abs``) of the dev half, each asked of its own memory;
(b) chit-chat (:data:`CHIT_CHAT`, written for this bench, never used to calibrate) asked
    of the last ``--chat-memories`` memories;
(c) SciFact train claims (the even positions of the sorted train ids: the odd ones were
    used to calibrate) asked of the memories in turn;
(e) the chit-chat again, asked of an agent's memory of facts and decisions: the packaged
    sample memory (``sqlite_rrf/data/sample_episodes.jsonl``, what ``sqlite-rrf demo``
    loads), embedded with the model;

each through the real hook (``sqlite-rrf hook DB --scope ''``, a subprocess with the real
model, as an agent runs it; the default floor): the share of prompts for which it printed
nothing. The hook is slow to start (the model loads each time), so ``--hook-sample``
prompts of each set go through it; every prompt also goes through ``Store.recall`` with
the hook's parameters (limit 3, the default floor), the hook's own code path, and both
shares are printed.

(d) the answerable (scored) questions: LongMemEval's session-level recall_any@5 and
    recall_all@5 (its own definitions, :func:`score_question`) of ``Store.recall`` (limit
    50, ``now`` = the question's date), without a floor and with the default floor: the
    ranking counts only when the recall with the hook's limit (3) and the floor is not
    empty (when the hook would print), else the question gets an empty ranking.

A sweep of the floor closes the table (Store.recall; silence read from the top 3), with,
for comparison, the other way a floor could work: dropping each hit below it.

Run: ``python tests/bench/bench_silence.py [--hook-sample 40] [--cached-only]``
(needs $SQLITE_RRF_MODEL; the first run of the evaluation fills the embedding cache).
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from sqlite_rrf.core.relevance import DEFAULT_MIN_RELEVANCE
from sqlite_rrf.core.sql_files import data_path
from sqlite_rrf.embedding.embedder import DEFAULT_N_CTX
from sqlite_rrf.evaluation.embcache import EmbeddingCache, model_fingerprint
from sqlite_rrf.evaluation.longmemeval import LmeQuestion, load_longmemeval, score_question
from sqlite_rrf.store import Store

ROOT = Path(__file__).resolve().parents[3]
LME = ROOT / "shared" / "data" / "longmemeval-s" / "longmemeval_s_dev.json.xz"
SCIFACT = ROOT / "shared" / "data" / "scifact"

#: What an agent's user types that no memory answers: greetings, thanks, small talk,
#: jokes, recipes, weather, trivia.
CHIT_CHAT = [
    "hi",
    "hello there!",
    "good morning",
    "hey, how are you today?",
    "thanks, that worked!",
    "thank you so much",
    "ok cool",
    "great, perfect",
    "never mind",
    "bye for now",
    "tell me a joke about cats",
    "tell me a joke",
    "make me laugh",
    "what's a good pun about programmers?",
    "banana bread recipe with yeast",
    "how do I make pancakes from scratch?",
    "what's a quick vegetarian dinner idea?",
    "how long should I boil an egg?",
    "what's the weather like today?",
    "will it rain tomorrow in Lisbon?",
    "is it going to be sunny this weekend?",
    "what time is it in Tokyo right now?",
    "who won the world cup in 2010?",
    "what is the capital of Australia?",
    "how many legs does a spider have?",
    "write a haiku about autumn",
    "sing me a song",
    "what's your favourite color?",
    "can you recommend a good movie for tonight?",
    "lol",
]


def hook_prints(db: str, prompt: str, env: Dict[str, str]) -> bool:
    """Whether the hook printed anything for ``prompt`` (it must exit 0 either way)."""
    p = subprocess.run(
        [sys.executable, "-m", "sqlite_rrf", "hook", db, "--scope", ""],
        input=json.dumps({"prompt": prompt, "session_id": "bench"}).encode(),
        capture_output=True,
        timeout=300,
        env=env,
    )
    if p.returncode != 0 or p.stderr.strip():
        raise RuntimeError(f"hook failed for {prompt!r}: {p.stderr.decode()[-500:]}")
    return bool(p.stdout.strip())


def vectors(
    questions: Sequence[LmeQuestion], cache: EmbeddingCache, cached_only: bool, embed: Any
) -> Tuple[Dict[str, np.ndarray], List[LmeQuestion]]:
    """{text: vector} of every question and turn, and the questions that have them all."""
    texts = list(
        dict.fromkeys(
            [q.question for q in questions] + [t.content for q in questions for t in q.turns]
        )
    )
    found, missing = cache.get_many(texts)
    vecs = {texts[i]: v for i, v in found.items()}
    if missing and not cached_only:
        got = embed([texts[i] for i in missing])
        cache.put_many([texts[i] for i in missing], got)
        vecs.update({texts[i]: v for i, v in zip(missing, got)})
    kept = [q for q in questions if q.question in vecs and all(t.content in vecs for t in q.turns)]
    return vecs, kept


def build(q: LmeQuestion, vecs: Dict[str, np.ndarray], where: str) -> str:
    path = os.path.join(where, f"{q.question_id}.db")
    with Store(path) as st:
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
        st.conn.execute(
            "INSERT OR REPLACE INTO rrf_meta VALUES ('embedding_model', ?)",
            (os.environ["SQLITE_RRF_MODEL"],),
        )
    return path


def scifact_claims() -> List[str]:
    """The measurement half of SciFact's train claims (even positions of the sorted ids)."""
    with open(SCIFACT / "qrels" / "train.tsv", encoding="utf-8") as f:
        ids = sorted({r["query-id"] for r in csv.DictReader(f, delimiter="\t")}, key=int)
    text = {}
    with open(SCIFACT / "queries.jsonl", encoding="utf-8") as f:
        for line in f:
            j = json.loads(line)
            text[j["_id"]] = j["text"]
    return [text[i] for i in ids[0::2]]


def main(argv: Optional[Sequence[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--hook-sample",
        type=int,
        default=40,
        help="prompts of each set asked through the hook process (default 40)",
    )
    ap.add_argument(
        "--chat-memories",
        type=int,
        default=10,
        help="memories the chit-chat is asked of (default 10)",
    )
    ap.add_argument(
        "--cached-only",
        action="store_true",
        help="use only the questions whose vectors are all cached (no embedding)",
    )
    ap.add_argument("--json", help="also write the numbers to this file")
    a = ap.parse_args(argv)
    model = os.environ.get("SQLITE_RRF_MODEL")
    if not model:
        raise SystemExit("set SQLITE_RRF_MODEL to the GGUF model")
    from sqlite_rrf.embedding.embedder import Embedder

    emb = Embedder(model)
    env = dict(os.environ)
    floor = DEFAULT_MIN_RELEVANCE
    t0 = time.time()
    questions = load_longmemeval(str(LME))
    with EmbeddingCache(model_fingerprint(model, DEFAULT_N_CTX)) as cache:
        vecs, questions = vectors(
            questions, cache, a.cached_only, lambda ts: emb.embed_many(ts, progress=True)
        )
    abstain = [q for q in questions if q.abstention]
    scored = [q for q in questions if q.scored]
    rows: Dict[str, Any] = {"floor": floor, "questions": len(questions)}
    tmp = tempfile.mkdtemp(prefix="bench_silence-")
    dbs = {q.question_id: build(q, vecs, tmp) for q in abstain + scored}
    pool = [dbs[q.question_id] for q in scored] or list(dbs.values())
    facts = os.path.join(tmp, "facts.db")
    with open(data_path("sample_episodes.jsonl"), encoding="utf-8") as f:
        sample = [json.loads(line) for line in f if line.strip()]
    with Store(facts, embedder=emb) as st:
        st.add_many(sample)

    def store_silent(db: str, prompt: str) -> bool:
        """Whether Store.recall with the hook's parameters (its default limit, the floor)
        returns nothing."""
        with Store(db, embedder=emb) as st:
            return not st.recall(prompt, touch=False, min_relevance=floor).hits

    sets: Dict[str, List[Tuple[str, str]]] = {
        "abstention (LongMemEval_S dev, _abs)": [(dbs[q.question_id], q.question) for q in abstain],
        "chit-chat (30 prompts x memories)": [
            (db, p) for db in pool[-a.chat_memories :] for p in CHIT_CHAT
        ],
        "SciFact train claims (measurement half)": [
            (pool[i % len(pool)], c) for i, c in enumerate(scifact_claims())
        ],
        "chit-chat (30 prompts, an agent's memory of facts)": [(facts, p) for p in CHIT_CHAT],
    }
    table = []
    for name, items in sets.items():
        silent = [store_silent(db, p) for db, p in items]
        step = max(1, len(items) // a.hook_sample) if a.hook_sample else 0
        sample = items[::step][: a.hook_sample] if step else []
        hooked = [not hook_prints(db, p, env) for db, p in sample]
        table.append(
            (
                name,
                len(items),
                float(np.mean(silent)),
                len(sample),
                float(np.mean(hooked)) if hooked else float("nan"),
            )
        )
        rows[name] = {
            "n": len(items),
            "store_silent": table[-1][2],
            "hook_n": len(sample),
            "hook_silent": table[-1][4],
        }

    # (d) answerable: LongMemEval's session-level metrics, without and with the floor
    ranked: Dict[str, List[Tuple[str, float]]] = {}
    best3: Dict[str, float] = {}
    for q in scored:
        with Store(dbs[q.question_id]) as st:
            # force: the same question three times on one Store (no topic gate)
            r = st.recall(
                q.question,
                limit=50,
                qvec=vecs[q.question],
                now=q.question_date_ms,
                touch=False,
                force=True,
            )
            ranked[q.question_id] = [(h.id, h.relevance) for h in r]
            r3 = st.recall(
                q.question, qvec=vecs[q.question], now=q.question_date_ms, touch=False, force=True
            )  # the hook's limit
            best3[q.question_id] = max((h.relevance for h in r3), default=0.0)
            if not st.recall(
                q.question,
                qvec=vecs[q.question],
                now=q.question_date_ms,
                touch=False,
                force=True,
                min_relevance=floor,
            ).hits:
                assert best3[q.question_id] < floor  # the product's floor is this rule
    by_id = {q.question_id: q for q in scored}

    def metrics(f: Optional[float], each: bool = False) -> Dict[str, float]:
        ms = []
        for k, v in ranked.items():
            if f is None:
                ids = [i for i, _ in v]
            elif each:  # the alternative: every hit below the floor dropped
                ids = [i for i, rel in v if rel >= f]
            else:  # the product: the whole ranking when the hook's recall speaks
                ids = [i for i, _ in v] if best3[k] >= f else []
            ms.append(score_question(by_id[k], ids))
        return {
            m: float(np.mean([x[m] for x in ms]))
            for m in ("session.recall_any@5", "session.recall_all@5", "session.recall_all@10")
        }

    without, with_floor = metrics(None), metrics(floor)
    rows["answerable"] = {"n": len(scored), "without": without, "with": with_floor}

    # the sweep (Store.recall, limit 50; silence read from the top 3)
    top3: Dict[str, List[List[float]]] = {}
    for name, items in sets.items():
        top3[name] = []
        for db, p in items:
            with Store(db, embedder=emb) as st:
                top3[name].append([h.relevance for h in st.recall(p, touch=False, limit=3)])
    sweep = []
    for f in (0.05, 0.1, 0.125, 0.15, 0.17, 0.2, 0.25, 0.3, 0.4, 0.5):
        m, e = metrics(f), metrics(f, each=True)
        sweep.append(
            (
                f,
                *[float(np.mean([max(r, default=0) < f for r in v])) for v in top3.values()],
                m["session.recall_any@5"],
                m["session.recall_all@5"],
                e["session.recall_any@5"],
            )
        )
    rows["sweep"] = sweep

    print(
        f"# Silence (issue 20, item 3): default floor min_relevance {floor:g}; "
        f"{len(questions)} LongMemEval_S dev questions with vectors "
        f"({len(abstain)} abstention, {len(scored)} scored); {time.time() - t0:.0f} s\n"
    )
    print(
        "| prompts | n | silent (Store.recall, hook's parameters) | hook runs | silent (the hook) |"
    )
    print("| --- | --- | --- | --- | --- |")
    for name, n, s, hn, hs in table:
        print(f"| {name} | {n} | {s:.3f} | {hn} | {hs:.3f} |")
    print(
        f"\n| answerable ({len(scored)} scored, LongMemEval session level) | recall_any@5 | "
        "recall_all@5 | recall_all@10 |"
    )
    print("| --- | --- | --- | --- |")
    for name, m in (("no floor", without), (f"floor {floor:g}", with_floor)):
        print(
            f"| {name} | {m['session.recall_any@5']:.3f} | {m['session.recall_all@5']:.3f} | "
            f"{m['session.recall_all@10']:.3f} |"
        )
    names = list(top3)
    print(
        "\n| floor | "
        + " | ".join(f"silent: {n}" for n in names)
        + " | recall_any@5 | recall_all@5 | recall_any@5, each hit below dropped |"
    )
    print("| --- " * (len(names) + 4) + "|")
    for f, *rest in sweep:
        print(f"| {f:g} | " + " | ".join(f"{x:.3f}" for x in rest) + " |")
    if a.json:
        with open(a.json, "w", encoding="utf-8") as fh:
            json.dump(rows, fh, indent=2)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
