"""Tests of sqlite_rrf.embedding.embedder against the real all-MiniLM-L6-v2 GGUF model.

The cached SciFact embeddings in ../shared/data/scifact/*.minilm.npy were made with the
same model and settings (n_ctx 256, token truncation); the embedder must reproduce them.
"""

from __future__ import annotations

import json
import os
import random
import struct
import subprocess
import sys
import textwrap
from typing import Iterator

import numpy as np
import pytest

pytest.importorskip(
    "llama_cpp", reason="llama-cpp-python is not installed (pip install 'sqlite-rrf[embed]')"
)

from conftest import SHARED_MODEL
from sqlite_rrf.embedding.embedder import (
    MODEL_ENV,
    Embedder,
    EmbeddingError,
    ModelNotFoundError,
    default_model_path,
)

MODEL = default_model_path()
if MODEL is None or not os.path.isfile(MODEL):
    pytest.skip(
        f"embedding model not found (looked for {MODEL_ENV} and {SHARED_MODEL})",
        allow_module_level=True,
    )

pytestmark = pytest.mark.embed

DATA = os.path.join(os.path.dirname(os.path.abspath(MODEL)), "..", "data", "scifact")
MIN_COSINE = 0.999
SAMPLE = 20


@pytest.fixture(scope="module")
def emb() -> Iterator[Embedder]:
    e = Embedder(MODEL)
    yield e
    e.close()


def _needs_cache() -> None:
    if os.path.basename(MODEL) != SHARED_MODEL.name:
        pytest.skip(f"cached vectors belong to {SHARED_MODEL.name}, not {os.path.basename(MODEL)}")
    if not os.path.isfile(os.path.join(DATA, "corpus.minilm.npy")):
        pytest.skip(f"SciFact embedding cache not found under {DATA}")


def _sample_rows(n_rows: int, k: int) -> list:
    """k row indices spread over the whole file, deterministic."""
    rng = random.Random(1234)
    return sorted(rng.sample(range(n_rows), k))


def _load(kind: str):
    """(texts, cached vectors) for a deterministic sample of corpus docs or queries."""
    _needs_cache()
    ids = json.load(open(os.path.join(DATA, f"{kind}.minilm.ids.json"), encoding="utf-8"))
    vecs = np.load(os.path.join(DATA, f"{kind}.minilm.npy"))
    rows = _sample_rows(len(ids), SAMPLE)
    wanted = {ids[r]: r for r in rows}
    texts = {}
    with open(os.path.join(DATA, f"{kind}.jsonl"), encoding="utf-8") as fh:
        for line in fh:
            d = json.loads(line)
            if d["_id"] in wanted:
                texts[d["_id"]] = (d["title"] + " " + d["text"]) if kind == "corpus" else d["text"]
    assert len(texts) == SAMPLE
    return [texts[ids[r]] for r in rows], vecs[rows]


@pytest.fixture(scope="module")
def corpus_sample():
    return _load("corpus")


@pytest.fixture(scope="module")
def query_sample():
    return _load("queries")


# -- reproduction of the cached SciFact vectors ------------------------------------------


def test_corpus_matches_cache(emb, corpus_sample):
    texts, cached = corpus_sample
    got = emb.embed_many(texts)
    assert got.shape == (SAMPLE, 384) and got.dtype == np.float32
    cos = (got * cached).sum(axis=1)
    assert cos.min() >= MIN_COSINE, f"cosines vs cache: min {cos.min():.6f}, mean {cos.mean():.6f}"
    # Most abstracts exceed 256 tokens: the sample exercises truncation too.
    assert sum(emb.count_tokens(t) > emb.n_ctx for t in texts) >= 1


def test_queries_match_cache(emb, query_sample):
    texts, cached = query_sample
    got = np.stack([emb.embed(t) for t in texts])
    cos = (got * cached).sum(axis=1)
    assert cos.min() >= MIN_COSINE, f"cosines vs cache: min {cos.min():.6f}, mean {cos.mean():.6f}"


def test_embed_many_equals_embed(emb, query_sample, corpus_sample):
    texts = query_sample[0] + corpus_sample[0][:4]
    many = emb.embed_many(texts)
    single = np.stack([emb.embed(t) for t in texts])
    np.testing.assert_allclose(many, single, atol=1e-4)
    assert ((many * single).sum(axis=1) > 0.99999).all()


def test_embed_many_batches_smaller_than_input(query_sample):
    # batch_size 3 over 20 texts: several llama calls, a short last one; same result.
    texts, cached = query_sample
    with Embedder(MODEL, batch_size=3) as e:
        got = e.embed_many(texts)
    assert ((got * cached).sum(axis=1) >= MIN_COSINE).all()


# -- basic properties --------------------------------------------------------------------


def test_properties(emb):
    assert emb.dim == 384
    assert emb.n_ctx == 256
    assert emb.model_path == MODEL
    assert emb.model_name == os.path.basename(MODEL)
    assert "384" in repr(emb)


def test_unit_norm_float32(emb):
    v = emb.embed("The quick brown fox jumps over the lazy dog.")
    assert v.shape == (384,) and v.dtype == np.float32
    assert abs(float(np.linalg.norm(v)) - 1.0) < 1e-5


def test_embed_many_empty_list(emb):
    out = emb.embed_many([])
    assert out.shape == (0, 384) and out.dtype == np.float32


def test_related_texts_are_closer(emb):
    a, b, c = emb.embed_many(
        [
            "Aspirin reduces the risk of heart attack.",
            "Acetylsalicylic acid lowers myocardial infarction risk.",
            "The train leaves the station at noon.",
        ]
    )
    assert float(a @ b) > float(a @ c) + 0.2


# -- input robustness ----------------------------------------------------------------------


def test_long_text_is_truncated_to_context(emb, corpus_sample):
    base = " ".join(corpus_sample[0]) * 8
    long_text = base[:50_000]
    assert len(long_text) == 50_000
    assert emb.count_tokens(long_text) > 10 * emb.n_ctx
    v_long = emb.embed(long_text)
    assert np.isfinite(v_long).all() and abs(float(np.linalg.norm(v_long)) - 1) < 1e-5
    # Everything after the first n_ctx tokens is ignored.
    prefix = long_text[:5_000]  # still well over 256 tokens
    assert emb.count_tokens(prefix) > emb.n_ctx
    v_prefix = emb.embed(prefix)
    v_more = emb.embed(prefix + " completely different words about astronomy and cooking" * 500)
    assert float(v_long @ v_prefix) > 0.99999
    assert float(v_more @ v_prefix) > 0.99999
    # Whereas a text within the context is not truncated: appending changes it.
    short = "Vitamin D deficiency is common in the elderly."
    assert float(emb.embed(short) @ emb.embed(short + " Astronomy and cooking.")) < 0.999


@pytest.mark.parametrize("text", ["", " ", "\n\t  \r\n", "\x00", "\x00 \x00"])
def test_empty_text_is_an_error(emb, text):
    with pytest.raises(EmbeddingError, match="cannot embed empty text"):
        emb.embed(text)


def test_empty_item_in_embed_many_names_its_index(emb):
    with pytest.raises(EmbeddingError, match=r"texts\[1\]"):
        emb.embed_many(["fine", "   "])


@pytest.mark.parametrize("bad", [None, b"bytes", 42, ["a list"]])
def test_non_str_is_a_type_error(emb, bad):
    with pytest.raises(TypeError):
        emb.embed(bad)  # type: ignore[arg-type]


def test_embed_many_refuses_bare_string(emb):
    with pytest.raises(TypeError):
        emb.embed_many("not a list")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"texts\[0\]"):
        emb.embed_many([b"bytes"])  # type: ignore[list-item]


def test_binary_junk_gives_a_vector(emb):
    rng = random.Random(7)
    junk = bytes(rng.randrange(256) for _ in range(4000))
    texts = [
        junk.decode("latin-1"),  # control characters, NULs
        junk.decode("utf-8", errors="surrogateescape"),  # lone surrogates
        "abc\x00def\x00\x00ghi",  # embedded NULs
        "\ud800\udfff\ud83d\ude00 lone \udc80 surrogates",
        "\x01\x02\x03\x7f",  # no word at all
        "\u200b\ufeff\u202e mixed RTL \u05e9\u05dc\u05d5\u05dd \U0001f600" * 200,
    ]
    for t in texts:
        v = emb.embed(t)
        assert v.shape == (384,) and np.isfinite(v).all()
        assert abs(float(np.linalg.norm(v)) - 1) < 1e-5
    many = emb.embed_many(texts)
    assert np.isfinite(many).all()
    # NUL behaves as a separator, like whitespace.
    assert float(emb.embed("abc\x00def") @ emb.embed("abc def")) > 0.99999


# -- model files ---------------------------------------------------------------------------


def test_missing_model_names_the_path(tmp_path):
    missing = tmp_path / "nowhere" / "model.gguf"
    with pytest.raises(ModelNotFoundError) as ei:
        Embedder(missing)
    msg = str(ei.value)
    assert str(missing) in msg and MODEL_ENV in msg and "--model" in msg
    assert isinstance(ei.value, FileNotFoundError)


def test_model_env_var_is_used_even_if_missing(tmp_path, monkeypatch):
    missing = str(tmp_path / "env-model.gguf")
    monkeypatch.setenv(MODEL_ENV, missing)
    assert default_model_path() == missing
    with pytest.raises(ModelNotFoundError, match="env-model.gguf"):
        Embedder()


def test_default_model_path_never_downloads(tmp_path, monkeypatch):
    """Without SQLITE_RRF_MODEL the default is the hf: model, looked up in the Hugging Face
    cache only: an empty cache gives None (no network is tried), and the message of the
    Embedder that would download names what to do, not this repository's layout."""
    monkeypatch.delenv(MODEL_ENV, raising=False)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty-cache"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.chdir(tmp_path)
    assert default_model_path() is None
    with pytest.raises(ModelNotFoundError) as ei:
        Embedder()
    msg = str(ei.value)
    assert "HF_HUB_OFFLINE" in msg and "--model" in msg and "sqlite-rrf model" in msg
    assert "shared" not in msg


def test_directory_is_not_a_model(tmp_path):
    with pytest.raises(ModelNotFoundError, match="not a file"):
        Embedder(tmp_path)


@pytest.mark.parametrize("content", [b"", b"GG", b"not a model at all" * 100, os.urandom(4096)])
def test_non_gguf_file_is_refused(tmp_path, content):
    p = tmp_path / "fake.gguf"
    p.write_bytes(content)
    with pytest.raises(EmbeddingError, match="not a GGUF file"):
        Embedder(p)


def test_context_beyond_training_window_is_refused():
    # llama.cpp would abort the process on a long text with positions >= 512.
    with pytest.raises(EmbeddingError, match="training context"):
        Embedder(MODEL, n_ctx=1024)


@pytest.mark.parametrize("kw", [{"n_ctx": 0}, {"n_ctx": -5}, {"batch_size": 0}, {"n_threads": 0}])
def test_bad_parameters(kw):
    with pytest.raises(ValueError):
        Embedder(MODEL, **kw)


def test_corrupt_gguf_is_an_error_not_a_crash(tmp_path):
    truncated = tmp_path / "truncated.gguf"
    with open(MODEL, "rb") as src:
        truncated.write_bytes(src.read(1 << 20))
    garbage = tmp_path / "garbage.gguf"
    garbage.write_bytes(b"GGUF" + random.Random(3).randbytes(64 * 1024))
    # A crash inside llama.cpp would kill the interpreter: run it in a child process.
    script = textwrap.dedent(
        """
        import sys
        from sqlite_rrf.embedding.embedder import Embedder, EmbeddingError
        for path in sys.argv[1:]:
            try:
                Embedder(path)
            except EmbeddingError as exc:
                assert path in str(exc), str(exc)
                print("EmbeddingError", path, flush=True)
            else:
                print("LOADED", path, flush=True)
        print("SURVIVED", flush=True)
        """
    )
    proc = subprocess.run(
        [sys.executable, "-c", script, str(truncated), str(garbage)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, f"child exited {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    lines = proc.stdout.splitlines()
    assert lines == [f"EmbeddingError {truncated}", f"EmbeddingError {garbage}", "SURVIVED"], (
        proc.stdout
    )


def test_missing_llama_cpp_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "llama_cpp", None)  # makes `import llama_cpp` fail
    with pytest.raises(EmbeddingError, match=r"pip install 'sqlite-rrf\[embed\]'"):
        Embedder(MODEL)


def test_closed_embedder_raises(tmp_path):
    e = Embedder(MODEL)
    e.close()
    e.close()  # idempotent
    with pytest.raises(EmbeddingError, match="closed"):
        e.embed("hello")


# -- blobs and progress ------------------------------------------------------------------


def test_blob_round_trip(emb):
    v = emb.embed("round trip")
    blob = Embedder.to_blob(v)
    assert isinstance(blob, bytes) and len(blob) == 4 * 384
    back = Embedder.from_blob(blob)
    assert back.dtype == np.float32 and back.flags.writeable
    np.testing.assert_array_equal(back, v)
    assert Embedder.to_blob([1.0, -2.5]) == struct.pack("<2f", 1.0, -2.5)  # little-endian
    np.testing.assert_array_equal(Embedder.from_blob(memoryview(blob)), v)
    with pytest.raises(ValueError):
        Embedder.from_blob(b"abc")
    with pytest.raises(ValueError):
        Embedder.to_blob(np.zeros((2, 2)))


def test_progress_bar(emb, capsys):
    texts = [f"sentence number {i}" for i in range(10)]
    with_bar = emb.embed_many(texts, progress=True, desc="pbar-test")
    err = capsys.readouterr().err
    assert "pbar-test" in err and "10/10" in err
    without = emb.embed_many(texts, progress=False, desc="pbar-test")
    assert "pbar-test" not in capsys.readouterr().err
    np.testing.assert_allclose(with_bar, without, atol=1e-6)
