"""Hostile embedding input through the Store and the CLI.

tests/test_embed.py covers the Embedder itself (empty text, text far beyond the
context, binary junk, missing and corrupt GGUF files). This file covers the paths
into it: ``Store.add``/``add_many``/``recall`` and ``sqlite-rrf import/add/recall``
with empty, NUL-only, binary and megabyte text. Each must give results, a
documented truncation, or a clear Python error with nothing written — never a crash,
and on the command line never a traceback.

Tests that need the GGUF model are marked ``embed``; the rest (the Store's own
checks, and junk queries reaching ``fts5_query`` in C) run without it, also under
``make asan-test``.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys

import numpy as np
import pytest

from sqlite_rrf.store import MAX_QUERY_CHARS, Store, StoreError

DIM = 8
RNG = random.Random(20240607)
JUNK = bytes(RNG.randrange(256) for _ in range(4096))
JUNK_QUERIES = {
    "latin-1 junk": JUNK.decode("latin-1"),  # control characters and NULs
    "junk with NULs": "memory\x00\x00agent\x00" + JUNK[:200].decode("latin-1"),
    "control chars": "\x01\x02\x03\x1b[31m\x7f",
    "1 MB text": ("memory agent vault " * 60_000)[: 1 << 20],
    "1 MB one token": "x" * (1 << 20),
    "RTL and emoji": "\u202e\u200b\ufeff שלום 🙂" * 50,
    "fts syntax": '"unbalanced NEAR( AND OR NOT * ^ col:val',
}


def _empty_db_facts(store: Store):
    return (
        store.count(),
        store.conn.execute("SELECT count(*) FROM rrf_meta").fetchall()[0][0],
        store.conn.execute("SELECT count(*) FROM episodes_fts").fetchall()[0][0],
    )


def _vec(seed: int) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(DIM)


@pytest.fixture
def store(tmp_path):
    s = Store(str(tmp_path / "mem.db"))
    yield s
    s.close()


# ---- the Store's own checks (no model) ----


@pytest.mark.parametrize("content", ["", " ", "\n\t\r  ", None, 42, b"bytes"])
def test_add_empty_or_non_text_content_is_a_store_error_and_nothing_is_written(store, content):
    with pytest.raises(StoreError, match="content"):
        store.add(content, embedding=_vec(1))  # type: ignore[arg-type]
    assert _empty_db_facts(store) == (0, 0, 0)  # not even the dimension was recorded


def test_a_bad_episode_fails_the_whole_batch(store):
    batch = [dict(id=f"e{i}", content=f"episode {i}", embedding=_vec(i)) for i in range(5)]
    batch[3]["content"] = "   "
    with pytest.raises(StoreError, match=r"episode 3: content"):
        store.add_many(batch)
    assert _empty_db_facts(store) == (0, 0, 0)


def test_lone_surrogates_in_content_are_a_clear_error_and_nothing_is_written(store):
    # What Python makes of undecodable bytes (surrogateescape). SQLite stores UTF-8
    # only; the write must fail as a ValueError (UnicodeEncodeError) with no rows left.
    with pytest.raises(ValueError):
        store.add("ok \udcff text", embedding=_vec(2))
    assert store.count() == 0
    store.add("fine afterwards", embedding=_vec(3))
    assert store.count() == 1


@pytest.mark.parametrize("name", sorted(JUNK_QUERIES))
@pytest.mark.parametrize("with_qvec", [False, True], ids=["no-qvec", "qvec"])
def test_junk_queries_recall_without_crashing(store, name, with_qvec):
    store.add_many(
        [
            dict(id=f"e{i}", content=f"memory agent vault episode {i}", embedding=_vec(i))
            for i in range(20)
        ]
    )
    q = JUNK_QUERIES[name]
    res = store.recall(q, limit=5, force=True, touch=True, qvec=_vec(99) if with_qvec else None)
    assert len(res.query) == min(len(q), MAX_QUERY_CHARS)  # the documented cut
    assert all(h.id.startswith("e") for h in res)
    # the connection still answers, and the store is intact
    assert store.recall("memory", force=True, qvec=_vec(7)).hits
    assert store.conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    store.conn.execute("INSERT INTO episodes_fts(episodes_fts, rank) VALUES('integrity-check', 1)")


def test_lone_surrogate_query_is_a_clear_error_not_a_crash(store):
    store.add("memory agent", embedding=_vec(1))
    try:
        store.recall("\udcff memory", force=True, qvec=_vec(2))
    except ValueError:
        pass  # UnicodeEncodeError: acceptable from the Python API (see the CLI test below)
    assert store.recall("memory", force=True, qvec=_vec(3)).hits


# ---- with the GGUF model ----


@pytest.fixture(scope="module")
def embedder():
    pytest.importorskip(
        "llama_cpp", reason="llama-cpp-python is not installed: pip install 'sqlite-rrf[embed]'"
    )
    from sqlite_rrf.embedding.embedder import Embedder, default_model_path

    path = default_model_path()
    if path is None or not os.path.isfile(path):
        pytest.skip("embedding model not found (SQLITE_RRF_MODEL, ../shared/models/)")
    e = Embedder(path, n_threads=1)  # faster than two threads on a busy machine
    yield e
    e.close()


@pytest.fixture
def estore(tmp_path, embedder):
    s = Store(str(tmp_path / "emb.db"), embedder=embedder)
    yield s
    s.close()


@pytest.mark.embed
@pytest.mark.parametrize("content", ["", "   ", "\x00", "\x00 \x00\n"])
def test_store_add_empty_text_with_embedder_raises_and_writes_nothing(estore, content):
    from sqlite_rrf.embedding.embedder import EmbeddingError

    with pytest.raises((StoreError, EmbeddingError), match="empty"):
        estore.add(content)
    assert estore.count() == 0
    assert estore.conn.execute("SELECT count(*) FROM episodes_fts").fetchall()[0][0] == 0


@pytest.mark.embed
def test_store_add_long_text_is_stored_whole_and_embedded_truncated(estore, embedder):
    long_text = ("The agent stored its notes about the vault. " * 2_000)[: 64 << 10]
    eid = estore.add(long_text)
    ep = estore.get(eid)
    assert ep.content == long_text  # the text is kept whole ...
    # ... and its vector is the one of its first n_ctx tokens (the documented truncation)
    assert float(ep.embedding @ embedder.embed(long_text[:5_000])) > 0.9999
    assert estore.recall("notes about the vault", force=True).hits[0].id == eid


@pytest.mark.embed
def test_store_recall_of_junk_with_embedder(estore):
    estore.add_many(
        [
            {"content": t}
            for t in (
                "the vault holds the postgres credentials",
                "we deploy on fridays",
                "memory of the agent",
            )
        ]
    )
    # the embedder's own junk tests are in test_embed.py: here, the Store path (one
    # embedding per query, which is slow on a busy machine, so only three)
    for name in ("latin-1 junk", "junk with NULs", "1 MB text"):
        res = estore.recall(JUNK_QUERIES[name], force=True)
        assert not res.skipped and len(res) <= 3, name
    assert estore.recall("where are the credentials?", force=True).hits


@pytest.mark.embed
def test_store_recall_nul_only_query_behaves_like_an_empty_query(estore):
    """Nothing to embed and no word to match: nothing is recalled (and nothing fails)."""
    estore.add("memory of the agent")
    assert len(estore.recall("memory", force=True)) == 1
    assert len(estore.recall("", force=True)) == 0
    assert len(estore.recall("\x00\x00", force=True)) == 0


# ---- the command line: one-line errors, never a traceback ----


def _cli(*args, env=None):
    return subprocess.run(
        [sys.executable, "-m", "sqlite_rrf", *args], capture_output=True, timeout=300, env=env
    )


def _one_line_error(proc) -> None:
    err = proc.stderr.decode("utf-8", "replace")
    assert proc.returncode == 1, (proc.returncode, err)
    assert "Traceback" not in err, err
    assert err.startswith("sqlite-rrf: ") and err.count("\n") == 1, err


@pytest.mark.embed
def test_cli_import_nul_only_content_is_a_one_line_error(tmp_path, embedder):
    db = str(tmp_path / "cli.db")
    f = tmp_path / "nul.jsonl"
    f.write_text(
        json.dumps({"id": "a", "content": "fine"})
        + "\n"
        + json.dumps({"id": "b", "content": "\u0000"})
        + "\n"
    )
    Store(db).close()  # an existing memory: import says only what went wrong
    proc = _cli("import", db, str(f), "--model", embedder.model_path)
    _one_line_error(proc)
    assert b"line 2" in proc.stderr
    with Store(db) as s:
        assert s.count() == 0


@pytest.mark.embed
@pytest.mark.parametrize("cmd", ["recall", "add"])
def test_cli_invalid_utf8_argument_is_not_a_traceback(tmp_path, embedder, cmd):
    db = str(tmp_path / "cli.db")
    Store(db).close()
    proc = _cli(cmd, db, b"memory \xff\xfe junk", "--model", embedder.model_path)
    err = proc.stderr.decode("utf-8", "replace")
    assert "Traceback" not in err, err
    if proc.returncode != 0:
        _one_line_error(proc)
