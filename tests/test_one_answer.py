"""One statement, one answer: every client of a memory gets the same rows, in the same
order, with the same final scores (within 1e-9), because the recall statement alone
decides them (the fold, the order, the relevance and the shown-hit policy are in it).

The clients: the statement ``sqlite-rrf sql`` prints, run through apsw and through the
Debian ``sqlite3`` 3.40 shell with the extension loaded (the shell has no ``:qvec``: it
gets the BM25, recency and access lists, compared with apsw without a query vector);
``Store.recall``; ``sqlite-rrf recall --json`` (the command line's own code, in this
process); MCP ``recall`` through the SDK's client (a server subprocess; default pool,
its default ``min_relevance``, so the policy is on); Datasette's ``recall.json``.

Data: the LongMemEval_S dev half at both units (a subsample, to keep the test fast:
:data:`LME_QUESTIONS` scored questions per unit among every 16th, each asked of its own
haystack) and SciFact
(the whole corpus, :data:`SCIFACT_QUERIES` test claims), for every pool that needs only
the extension and every profile.

The clock: the apsw statement, the shell, ``Store.recall`` and Datasette are given the
same ``now``; the command line and MCP have no such option and read the clock, so for
the two profiles whose score depends on an episode's age (``decay``, ``weighted``) their
scores are compared with a relative tolerance of 1e-6 (ids and order still exactly).
MCP rounds scores to 3 decimals in its output: compared to that rounding.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, List, Sequence, Tuple

import apsw
import numpy as np
import pytest

import sqlite_rrf
from conftest import embedding_model, needs_model
from sqlite_rrf.core.statements import POOLS, PROFILES, recall_parameters, recall_statement

ROOT = Path(__file__).resolve().parents[2]
LME = ROOT / "shared" / "data" / "longmemeval-s" / "longmemeval_s_dev.json.xz"
SCIFACT = ROOT / "shared" / "data" / "scifact"
SHELL = "/usr/bin/sqlite3"
EXT = str(Path(sqlite_rrf.__file__).with_name("rrf.so"))
NOW = 1_800_000_000_000
#: Questions per LongMemEval unit (a spread subsample of the scored ones).
LME_QUESTIONS = 2
#: SciFact test claims asked.
SCIFACT_QUERIES = 3
#: Profiles whose score reads the clock (an episode's age).
CLOCKED = ("decay", "weighted")

pytestmark = [
    needs_model,
    pytest.mark.skipif(not LME.is_file(), reason="the LongMemEval_S dev half is missing"),
    pytest.mark.skipif(not os.path.isfile(SHELL), reason="the Debian sqlite3 shell is missing"),
]


def _store(path: Path, embedder: Any = None) -> Any:
    from sqlite_rrf.store import Store

    return Store(str(path), embedder=embedder) if embedder is not None else Store(str(path))


@pytest.fixture(scope="module")
def embedder():
    from sqlite_rrf.embedding.embedder import Embedder

    e = Embedder(embedding_model())
    yield e
    e.close()


@pytest.fixture(scope="module")
def memories(tmp_path_factory, embedder) -> List[Tuple[str, Path, List[str]]]:
    """(name, database, queries): LongMemEval haystacks at both units and SciFact."""
    from sqlite_rrf.embedding.models import DEFAULT_N_CTX
    from sqlite_rrf.evaluation.beir import load_beir
    from sqlite_rrf.evaluation.cached_store import build_store
    from sqlite_rrf.evaluation.embcache import EmbeddingCache, embed_cached, model_fingerprint
    from sqlite_rrf.evaluation.longmemeval import load_longmemeval

    base = tmp_path_factory.mktemp("one-answer")
    out: List[Tuple[str, Path, List[str]]] = []
    model = embedding_model()
    for unit in ("session", "turn"):
        # every 16th question (the order the evaluation's cache is filled in), scored ones
        qs = [q for q in load_longmemeval(str(LME), unit)[::16] if q.scored][:LME_QUESTIONS]
        texts = [q.question for q in qs] + [t.content for q in qs for t in q.turns]
        with EmbeddingCache(model_fingerprint(model, DEFAULT_N_CTX), None) as cache:
            mat, _, _ = embed_cached(texts, cache, lambda: embedder)
        vecs = {t: mat[i] for i, t in enumerate(texts)}
        for q in qs:
            path = base / f"{unit}-{q.question_id}.db"
            st = _store(path)
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
            st.close()
            out.append((f"lme-{unit}-{q.question_id}", path, [q.question]))
    data = load_beir(str(SCIFACT), "test")
    st = build_store(data, progress=False)
    src = st.path if hasattr(st, "path") else None
    st.close()
    path = base / "scifact.db"
    shutil.copyfile(src, path)
    step = len(data.query_ids) // SCIFACT_QUERIES
    out.append(("scifact", path, list(data.query_texts[::step][:SCIFACT_QUERIES])))
    return out


def _window(query: str) -> Dict[str, Any]:
    """The time window the query names, as Store.recall binds it (sqlite_rrf.core.timeexpr)."""
    from sqlite_rrf.core.timeexpr import resolve

    w = resolve(query, NOW)
    return {"time_from": w.start, "time_to": w.end} if w is not None else {}


def _bindings(pool: str, profile: str, **given: Any) -> Dict[str, Any]:
    b: Dict[str, Any] = dict.fromkeys(recall_parameters(pool, profile))
    b.update(given)
    b.update(_window(given["query"]))
    return b


def _apsw(path: Path, pool: str, profile: str, **given: Any) -> List[Dict[str, Any]]:
    conn = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READONLY)
    conn.enable_load_extension(True)
    conn.load_extension(EXT)
    cur = conn.cursor()
    cur.execute(recall_statement(pool, profile), _bindings(pool, profile, **given))
    names = [d[0] for d in cur.getdescription()]
    rows = cur.fetchall()
    conn.close()
    return [dict(zip(names, r)) for r in rows]


def _same(
    got: Sequence[Dict[str, Any]],
    want: Sequence[Dict[str, Any]],
    what: str,
    rel: float = 0.0,
    abs_: float = 1e-9,
) -> None:
    assert [g["id"] for g in got] == [w["id"] for w in want], what
    for g, w in zip(got, want):
        tol = max(abs_, rel * abs(w["score"]))
        assert abs(g["score"] - w["score"]) <= tol, (what, g["id"], g["score"], w["score"])
        if g.get("relevance") is not None and w.get("relevance") is not None:
            assert abs(g["relevance"] - w["relevance"]) <= max(abs_, rel), (what, g["id"])


def _shell(path: Path, runs: Sequence[Tuple[str, str, str]], tmp: Path) -> List[List[Dict]]:
    """Each (query, pool, profile) through the sqlite3 shell: the statement as
    ``sqlite-rrf sql`` prints it, read with .read, :query and :now set, no :qvec."""
    lines = [f".load {EXT[:-3]}", ".mode json", ".param init"]
    for i, (query, pool, profile) in enumerate(runs):
        f = tmp / f"recall-{pool}-{profile}.sql"
        if not f.exists():
            out = io.StringIO()
            from sqlite_rrf.cli import main

            with contextlib.redirect_stdout(out):
                assert main(["sql", "--pool", pool, "--profile", profile]) == 0
            f.write_text(out.getvalue())
        q = query.replace("'", "''")
        lines += [  # SQL, not .param set, so that any text is one value
            f"INSERT OR REPLACE INTO temp.sqlite_parameters(key, value) VALUES (':query', '{q}');",
            f"INSERT OR REPLACE INTO temp.sqlite_parameters(key, value) VALUES (':now', {NOW});",
            "DELETE FROM temp.sqlite_parameters WHERE key IN (':time_from', ':time_to');",
            *[
                f"INSERT INTO temp.sqlite_parameters(key, value) VALUES (':{k}', {v});"
                for k, v in _window(query).items()
            ],
            f".print ===RUN {i}",
            f".read {f}",
        ]
    p = subprocess.run(
        [SHELL, "-readonly", str(path)],
        input="\n".join(lines) + "\n",
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert p.returncode == 0 and not p.stderr, p.stderr
    parts = p.stdout.split("===RUN ")[1:]
    assert len(parts) == len(runs)
    out: List[List[Dict]] = []
    for part in parts:
        body = part.split("\n", 1)[1].strip()
        out.append(json.loads(body) if body else [])
    return out


def _cli(path: Path, query: str, pool: str, profile: str, *extra: str) -> List[Dict]:
    from sqlite_rrf.cli import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        rc = main(
            [
                "recall",
                str(path),
                query,
                "--json",
                "--no-touch",
                "--scope",
                "*",
                "--pool",
                pool,
                "--profile",
                profile,
                *extra,
            ]
        )
    assert rc == 0
    return json.loads(out.getvalue())


def test_every_client_gets_the_same_rows(memories, embedder, tmp_path, monkeypatch):
    monkeypatch.setenv("SQLITE_RRF_MODEL", embedding_model())
    for name, path, queries in memories:
        st = _store(path, embedder)
        runs = [(q, pool, prof) for q in queries for pool in POOLS for prof in PROFILES]
        shell_rows = _shell(path, runs, tmp_path)
        for (query, pool, profile), sh in zip(runs, shell_rows):
            what = f"{name} {pool}/{profile} {query[:40]!r}"
            qvec = np.asarray(embedder.embed(query), dtype="<f4").tobytes()
            # the statement through apsw, with and without the query vector
            ap = _apsw(path, pool, profile, query=query, qvec=qvec, now=NOW)
            ap0 = _apsw(path, pool, profile, query=query, now=NOW)
            assert ap, what
            # the shell (no :qvec) = apsw without the vector
            _same(sh, ap0, "shell " + what)
            # Store.recall
            hits = st.recall(query, pool=pool, profile=profile, now=NOW, touch=False, force=True)
            _same([h.as_dict() for h in hits], ap, "Store.recall " + what)
            # the command line (its own clock)
            now_hits = st.recall(query, pool=pool, profile=profile, touch=False, force=True)
            rel = 1e-6 if profile in CLOCKED else 0.0
            _same(
                _cli(path, query, pool, profile),
                [h.as_dict() for h in now_hits],
                "cli " + what,
                rel=rel,
            )
        st.close()


def test_datasette_and_mcp_get_the_statements_rows(memories, embedder, tmp_path, monkeypatch):
    import urllib.parse

    datasette_app = pytest.importorskip("datasette.app")
    pytest.importorskip("mcp.server.mcpserver")
    from mcp import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    monkeypatch.setenv("SQLITE_RRF_MODEL", embedding_model())
    dbs = []
    for name, path, queries in memories:
        copy = tmp_path / f"{name}.db"
        shutil.copyfile(path, copy)
        dbs.append((name, copy, queries))

    async def datasette_rows() -> List[Tuple[str, List[Dict], Dict]]:
        ds = datasette_app.Datasette(
            [str(d) for _, d, _ in dbs], settings={"sql_time_limit_ms": 120_000}
        )
        await ds.invoke_startup()
        got = []
        for name, path, queries in dbs:
            for q in queries:
                for pool in POOLS:
                    for prof in PROFILES:
                        qs = urllib.parse.urlencode(
                            {
                                "query": q,
                                "pool": pool,
                                "profile": prof,
                                "now": NOW,
                                "_shape": "array",
                            }
                        )
                        r = await ds.client.get(f"/{path.stem}/recall.json?{qs}")
                        assert r.status_code == 200, r.text
                        got.append((str(path), r.json(), dict(query=q, pool=pool, profile=prof)))
        return got

    for path, rows, k in asyncio.run(datasette_rows()):
        st = _store(Path(path), embedder)
        hits = st.recall(
            k["query"], pool=k["pool"], profile=k["profile"], now=NOW, touch=False, force=True
        )
        st.close()
        _same(rows, [h.as_dict() for h in hits], f"datasette {path} {k}")

    from sqlite_rrf.core.relevance import DEFAULT_MIN_RELEVANCE
    from sqlite_rrf.core.statements import recall_defaults

    async def mcp_check(path: Path, queries: Sequence[str]) -> int:
        params = StdioServerParameters(
            command=sys.executable,
            args=["-m", "sqlite_rrf", "mcp", str(path)],
            env={
                "SQLITE_RRF_MODEL": embedding_model(),
                **(
                    {"PYTHONPATH": os.environ["PYTHONPATH"]} if os.environ.get("PYTHONPATH") else {}
                ),
            },
        )
        n = 0
        st = _store(path, embedder)
        with open(tmp_path / "mcp.log", "a", encoding="utf-8") as err:
            async with stdio_client(params, errlog=err) as (read, write):
                async with ClientSession(read, write) as session:
                    await session.initialize()
                    for q in queries:
                        for prof in PROFILES:
                            # MCP touches what it returns: the Store's answer just before
                            want = st.recall(
                                q,
                                profile=prof,
                                touch=False,
                                force=True,
                                min_relevance=DEFAULT_MIN_RELEVANCE,
                                limit=recall_defaults()["result_limit"],
                            )
                            res = await session.call_tool(
                                "recall", {"query": q, "profile": prof, "scope": "*"}
                            )
                            assert not res.is_error, res.content
                            got = res.structured_content["hits"]
                            assert [h["id"] for h in got] == [h.id for h in want], (path, q, prof)
                            for g, w in zip(got, want):
                                assert abs(g["score"] - w.score) <= 5e-4 + 1e-9
                            n += 1
        st.close()
        return n

    total = sum(asyncio.run(mcp_check(path, queries)) for _, path, queries in dbs)
    assert total == sum(len(q) for _, _, q in dbs) * len(PROFILES)
