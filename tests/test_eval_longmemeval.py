"""The agent-memory evaluation on LongMemEval's format (sqlite_rrf.evaluation.longmemeval):
the benchmark's metric definitions on hand-worked rankings, the reader's errors, the
embedding cache, and a small real haystack (cut from the dev half) through
``sqlite-rrf eval FILE`` with the real model."""

from __future__ import annotations

import json
import lzma
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from conftest import needs_model
from sqlite_rrf.evaluation import longmemeval_data as lme_data, longmemeval_metrics as lme_metrics
from sqlite_rrf.evaluation.embcache import EmbeddingCache, embed_cached

DEV = (
    Path(__file__).resolve().parents[2]
    / "shared"
    / "data"
    / "longmemeval-s"
    / "longmemeval_s_dev.json.xz"
)


def _log2(i: int) -> float:
    return math.log2(i)


# -- LongMemEval's definitions, worked by hand ------------------------------------------


def test_turn_metrics_by_hand():
    corpus = ["a_1", "noans_s_1", "answer_s_2", "b_1", "answer_t_1", "c_1"]
    gold = ["answer_s_2", "answer_t_1"]
    ranked = ["b_1", "answer_s_2", "c_1", "answer_t_1", "a_1", "noans_s_1"]
    m = lme_metrics.lme_turn_metrics(ranked, corpus, gold, 3)
    assert m["recall_any"] == 1.0 and m["recall_all"] == 0.0
    # DCG: rank 1 undiscounted, rank i >= 2 over log2(i): the hit at rank 2 counts 1/1
    assert m["ndcg"] == pytest.approx((1 / _log2(2)) / (1 + 1 / _log2(2)))
    m5 = lme_metrics.lme_turn_metrics(ranked, corpus, gold, 5)
    assert m5["recall_all"] == 1.0
    assert m5["ndcg"] == pytest.approx((1 + 1 / _log2(4)) / 2)


def test_session_metrics_grow_k_until_k_sessions():
    # turn ids lose their last _N; noans_s and answer_s are different "sessions"
    corpus = ["answer_s_1", "noans_s_2", "noans_s_3", "x_1", "x_2", "answer_t_4", "y_1"]
    gold = ["answer_s_1", "answer_t_4"]
    ranked = ["answer_s_1", "noans_s_2", "noans_s_3", "x_1", "x_2", "answer_t_4", "y_1"]
    m = lme_metrics.lme_session_metrics(ranked, corpus, gold, 3)
    # the top 3 turns span answer_s, noans_s (twice): k grows to 4 (x), sessions
    # {answer_s, noans_s, x}: answer_t is out
    assert m["recall_any"] == 1.0 and m["recall_all"] == 0.0
    m4 = lme_metrics.lme_session_metrics(ranked, corpus, gold, 4)
    assert m4["recall_all"] == 1.0  # k grows to 6: answer_t is the 4th session
    # NDCG at the grown depth still counts gold turns, against every gold turn
    assert m4["ndcg"] == pytest.approx((1 + 1 / _log2(6)) / (1 + 1 / _log2(2)))


def test_published_style_dedupes_sessions_and_ideal_is_the_gold_count():
    ranked = ["s1", "s1", "s2", "s3", "s1", "s4"]
    m = lme_metrics.published_metrics(ranked, ["s3", "s4"], 3)
    assert m == {
        "recall_any": 1.0,
        "recall_all": 0.0,
        "ndcg": pytest.approx((1 / _log2(3)) / (1 + 1 / _log2(2))),
    }
    m4 = lme_metrics.published_metrics(ranked, ["s3", "s4"], 4)
    assert m4["recall_all"] == 1.0


def _question(qid="q1", qtype="multi-session", sessions=None, answer_ids=("answer_a_1",)):
    sessions = sessions or [
        (
            "answer_a_1",
            [
                ("user", "I adopted a cat named Miso", True),
                ("assistant", "Nice", False),
                ("user", "what food is best", False),
            ],
        ),
        ("other_1", [("user", "tell me about rust lifetimes", False)]),
    ]
    return {
        "question_id": qid,
        "question_type": qtype,
        "question": "what is my cat called?",
        "question_date": "2023/05/30 (Tue) 10:00",
        "answer": "Miso",
        "answer_session_ids": list(answer_ids),
        "haystack_dates": ["2023/05/01 (Mon) 09:00"] * len(sessions),
        "haystack_session_ids": [s for s, _ in sessions],
        "haystack_sessions": [
            [{"role": r, "content": c, "has_answer": h} for r, c, h in msgs] for _, msgs in sessions
        ],
    }


def test_session_unit_ids_follow_longmemeval(tmp_path):
    x = _question(
        sessions=[
            (
                "answer_a_1",
                [
                    ("user", "I adopted a cat named Miso", True),
                    ("assistant", "Nice", False),
                    ("user", "what food is best", False),
                ],
            ),
            ("answer_b_2", [("user", "hello", False), ("assistant", "the cat is Miso", True)]),
            ("other_1", [("user", "tell me about rust lifetimes", False)]),
        ],
        answer_ids=("answer_a_1", "answer_b_2"),
    )
    p = tmp_path / "q.json"
    p.write_text(json.dumps([x]))
    (q,) = lme_data.load_longmemeval(str(p), unit="session")
    # an evidence session whose answer is only in the assistant's message is "noans"
    assert [t.corpus_id for t in q.turns] == ["answer_a_1", "noans_b_2", "other_1"]
    assert q.turns[0].content == "I adopted a cat named Miso\n\nwhat food is best"
    s = lme_metrics.score_question(q, ["s2", "s1", "s0"])
    assert s["session.recall_all@5"] == 1.0 and not any(k.startswith("turn.") for k in s)
    assert s["session.ndcg@5"] == pytest.approx(1 / _log2(3))
    assert s["published.recall_all@5"] == 1.0  # gold = answer_session_ids there


def test_corpus_ids_follow_longmemeval(tmp_path):
    p = tmp_path / "q.json"
    p.write_text(json.dumps([_question()]))
    (q,) = lme_data.load_longmemeval(str(p))
    assert [t.corpus_id for t in q.turns] == ["answer_a_1_1", "noans_a_1_3", "other_1_1"]
    assert q.gold_turns == ["answer_a_1_1"] and q.scored and not q.abstention
    assert q.turns[0].created_at == lme_data.parse_lme_date("2023/05/01 (Mon) 09:00")
    s = lme_metrics.score_question(q, [t.episode_id for t in (q.turns[2], q.turns[1], q.turns[0])])
    assert s["turn.recall_any@5"] == 1.0 and s["published.recall_all@5"] == 1.0
    # the evidence session's other turn is a "noans" session of its own: the gold turn
    # is the third session
    assert s["session.ndcg@5"] == pytest.approx(1 / _log2(3))
    assert s["published.ndcg@5"] == pytest.approx(1 / _log2(2))


def test_parse_date_is_utc():
    assert lme_data.parse_lme_date("2023/03/27 (Mon) 23:35") == 1679960100000
    with pytest.raises(lme_data.LongMemEvalFormatError, match="not a date"):
        lme_data.parse_lme_date("27.03.2023")


@pytest.mark.parametrize(
    "damage, message",
    [
        (lambda x: x.pop("question_date"), "no 'question_date' field"),
        (lambda x: x.update(question_date="soon"), "question_date: 'soon' is not a date"),
        (lambda x: x.update(haystack_dates=[]), "must be lists of one length"),
        (
            lambda x: x.update(haystack_sessions=[[{"role": "assistant", "content": "hi"}]] * 2),
            "no user message",
        ),
    ],
)
def test_format_errors_name_the_question_and_fault(tmp_path, damage, message):
    x = _question()
    damage(x)
    p = tmp_path / "bad.json"
    p.write_text(json.dumps([x]))
    with pytest.raises(lme_data.LongMemEvalFormatError, match=message) as e:
        lme_data.load_longmemeval(str(p))
    assert "question 'q1'" in str(e.value) or "question 0" in str(e.value)


def test_not_json_and_not_xz(tmp_path):
    p = tmp_path / "x.json"
    p.write_text("{")
    with pytest.raises(lme_data.LongMemEvalFormatError, match="not JSON"):
        lme_data.load_longmemeval(str(p))
    z = tmp_path / "x.json.xz"
    z.write_bytes(b"plain")
    with pytest.raises(lme_data.LongMemEvalFormatError, match="not an xz file"):
        lme_data.load_longmemeval(str(z))


# -- the embedding cache -------------------------------------------------------------------


class _CountingEmbedder:
    dim = 4

    def __init__(self):
        self.seen = []

    def embed_many(self, texts, progress=False):
        self.seen.extend(texts)
        return np.array([[len(t), 1, 0, 0] for t in texts], dtype=np.float32)


def test_cache_embeds_each_text_once_and_keys_by_model(tmp_path):
    path = str(tmp_path / "c.sqlite")
    emb = _CountingEmbedder()
    with EmbeddingCache("model-a", path) as c:
        v, n, _ = embed_cached(["aa", "b", "aa"], c, lambda: emb)
        assert n == 2 and emb.seen == ["aa", "b"]
        assert v[:, 0].tolist() == [2, 1, 2]
        v2, n2, _ = embed_cached(["b", "aa"], c, lambda: pytest.fail("nothing to embed"))
        assert n2 == 0 and v2[:, 0].tolist() == [1, 2]
    with EmbeddingCache("model-b", path) as c:  # another model reads none of a's vectors
        _, n3, _ = embed_cached(["aa"], c, lambda: emb)
        assert n3 == 1


# -- a small real haystack, end to end ---------------------------------------------------------


def _small_file(tmp_path: Path) -> Path:
    """Three real questions of the dev half (multi-session, temporal, abstention), each
    haystack cut to its evidence sessions and two others, each session to its first
    four messages and its has_answer turns."""
    with lzma.open(DEV, "rt", encoding="utf-8") as f:
        data = json.load(f)
    picked, kinds = [], set()
    for x in data:
        kind = "abs" if x["question_id"].endswith("_abs") else x["question_type"]
        if kind in kinds or kind not in ("multi-session", "temporal-reasoning", "abs"):
            continue
        kinds.add(kind)
        keep = [i for i, s in enumerate(x["haystack_session_ids"]) if s in x["answer_session_ids"]]
        keep += [
            i for i, s in enumerate(x["haystack_session_ids"]) if s not in x["answer_session_ids"]
        ][:2]
        keep.sort()
        y = dict(x)
        for f_ in ("haystack_session_ids", "haystack_dates"):
            y[f_] = [x[f_][i] for i in keep]
        y["haystack_sessions"] = [
            [m for j, m in enumerate(x["haystack_sessions"][i]) if j < 4 or m.get("has_answer")]
            for i in keep
        ]
        picked.append(y)
    out = tmp_path / "small.json.xz"
    with lzma.open(out, "wt", encoding="utf-8") as f:
        json.dump(picked, f)
    return out


@needs_model
@pytest.mark.skipif(not DEV.is_file(), reason="needs ../shared/data/longmemeval-s")
def test_eval_cli_runs_longmemeval_and_reruns_from_the_cache(tmp_path):
    small = _small_file(tmp_path)
    cache = tmp_path / "emb.sqlite"
    cmd = [
        sys.executable,
        "-m",
        "sqlite_rrf",
        "eval",
        str(small),
        "--cache",
        str(cache),
        "--run",
        "default",
        "bm25",
        "vector",
        "--json",
        "--no-progress",
        "--unit",
        "turn",
    ]
    env = dict(os.environ)
    first = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
    assert first.returncode == 0, first.stderr
    res = json.loads(first.stdout)
    assert res["questions"] == 3 and res["abstention"] == 1 and res["scored"] == 2
    assert res["timings"]["embedded_texts"] > 0
    for run in ("default", "bm25", "vector"):
        r = res["runs"][run]
        assert r["lme"]["all"]["n"] == 2
        assert set(r["lme"]) == {"all", "multi-session", "temporal-reasoning"}
        for key in ("session.recall_any@5", "session.recall_all@10", "turn.ndcg@10"):
            assert 0.0 <= r["lme"]["all"][key] <= 1.0
        assert r["published"]["all"]["n"] == 3
        assert r["abstention"]["n"] == 1
    # a haystack of a few sessions: every evidence session is in the top 10 sessions
    assert res["runs"]["default"]["published"]["all"]["published.recall_all@10"] == 1.0
    second = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
    assert second.returncode == 0, second.stderr
    res2 = json.loads(second.stdout)
    assert res2["timings"]["embedded_texts"] == 0
    assert res2["runs"] == res["runs"]
    # the session unit (the default): one episode per session, LongMemEval's session
    # granularity (no turn level)
    sess = subprocess.run(cmd[:-2], capture_output=True, text=True, env=env, timeout=600)
    assert sess.returncode == 0, sess.stderr
    rs = json.loads(sess.stdout)
    assert rs["unit"] == "session"
    assert rs["episodes"] == sum(len(x["haystack_sessions"]) for x in _load(small))
    d = rs["runs"]["default"]["lme"]["all"]
    assert "session.recall_all@5" in d and not any(k.startswith("turn.") for k in d)
    assert d["session.recall_all@10"] == 1.0  # five sessions: every one is in the top 10


def _load(path: Path):
    with lzma.open(path, "rt", encoding="utf-8") as f:
        return json.load(f)


def test_eval_cli_longmemeval_errors(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps([{"question_id": "x"}]))
    r = subprocess.run(
        [sys.executable, "-m", "sqlite_rrf", "eval", str(bad)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 1
    assert "sqlite-rrf eval:" in r.stderr and "no 'question_type' field" in r.stderr
    assert "Traceback" not in r.stderr
    ok = tmp_path / "ok.json"
    ok.write_text(json.dumps([_question()]))
    r = subprocess.run(
        [sys.executable, "-m", "sqlite_rrf", "eval", str(ok), "--run", "nope"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 1 and "unknown run or profile 'nope'" in r.stderr
