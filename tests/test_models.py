"""Models for people outside this repository.

- a model is a path or ``hf:ORG/REPO/FILE.gguf``, fetched through huggingface_hub; here the
  Hugging Face cache is filled offline (``HF_HUB_OFFLINE=1``) from the shared GGUF model,
  laid out as huggingface_hub lays out a download;
- the order: ``--model``, ``SQLITE_RRF_MODEL``, the default; the database's own model is
  never loaded or downloaded because the database names it;
- a database remembers its model by name, dimension and fingerprint, and refuses another
  model of the same dimension (a real second GGUF: the shared one with its token
  embeddings shuffled);
- without a model, ``add``, ``import``, ``recall`` and ``demo`` work and say so once;
  ``embed`` backfills in batches, each all or nothing, and resumes after a kill;
- the demo never removes a database it did not make;
- no message a user sees mentions this repository's layout.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import apsw
import numpy as np
import pytest

from conftest import SHARED_MODEL, fill_hf_cache
from sqlite_rrf.embedding.models import (
    DEFAULT_MODEL,
    FINGERPRINT_TEXTS,
    MODEL_ENV,
    ModelNotFoundError,
    choose_model,
    fingerprint_cosine,
    parse_spec,
    resolve_model,
)

HAVE_MODEL = SHARED_MODEL.is_file()


def _llama() -> bool:
    try:
        import llama_cpp  # noqa: F401
    except ImportError:
        return False
    return True


needs_model = pytest.mark.skipif(
    not (HAVE_MODEL and _llama()),
    reason="needs the embed extra (pip install 'sqlite-rrf[embed]') and the GGUF model",
)


def _hub() -> bool:
    try:
        import huggingface_hub  # noqa: F401
    except ImportError:
        return False
    return True


needs_hub = pytest.mark.skipif(
    not _hub(), reason="needs huggingface_hub (pip install 'sqlite-rrf[embed]')"
)

# ---- the spec ----


@pytest.mark.parametrize(
    "spec, repo, filename, revision",
    [
        ("hf:org/repo/model.gguf", "org/repo", "model.gguf", None),
        ("hf:org/repo/sub/dir/model.gguf", "org/repo", "sub/dir/model.gguf", None),
        ("hf:org/repo@v1.2/model.gguf", "org/repo", "model.gguf", "v1.2"),
        (
            DEFAULT_MODEL,
            "second-state/All-MiniLM-L6-v2-Embedding-GGUF",
            "all-MiniLM-L6-v2-ggml-model-f16.gguf",
            None,
        ),
    ],
)
def test_hf_specs_parse(spec, repo, filename, revision):
    p = parse_spec(spec)
    assert (p.is_hub, p.repo_id, p.filename, p.revision) == (True, repo, filename, revision)
    assert p.name == os.path.basename(filename)


@pytest.mark.parametrize(
    "spec", ["hf:", "hf:org", "hf:org/repo", "hf:org//x.gguf", "hf:org/@v/x.gguf", "", "   "]
)
def test_malformed_specs_are_refused(spec):
    with pytest.raises(ValueError, match="hf:ORG/REPO|GGUF file path"):
        parse_spec(spec)


def test_a_path_spec_expands_the_home_directory(monkeypatch, tmp_path):
    monkeypatch.setenv("HOME", str(tmp_path))
    p = parse_spec("~/m.gguf")
    assert not p.is_hub and p.path == str(tmp_path / "m.gguf")


# ---- the order ----


def test_choice_order(monkeypatch):
    monkeypatch.delenv(MODEL_ENV, raising=False)
    assert choose_model() == DEFAULT_MODEL
    # the database's model is never chosen because the database names it
    assert choose_model(remembered="hf:a/b/c.gguf") == DEFAULT_MODEL
    assert choose_model(remembered="/abs/m.gguf") == DEFAULT_MODEL
    assert choose_model(remembered="all-MiniLM-L6-v2-f16.gguf") == DEFAULT_MODEL
    monkeypatch.setenv(MODEL_ENV, "/env/m.gguf")
    assert choose_model(remembered="hf:a/b/c.gguf") == "/env/m.gguf"
    assert choose_model("hf:x/y/z.gguf", remembered="hf:a/b/c.gguf") == "hf:x/y/z.gguf"


def test_a_foreign_model_is_one_the_user_did_not_name(monkeypatch):
    from sqlite_rrf.embedding.models import foreign_model

    monkeypatch.delenv(MODEL_ENV, raising=False)
    assert foreign_model(None, "hf:someone/else/evil.gguf") == "hf:someone/else/evil.gguf"
    assert foreign_model(None, "/etc/passwd") == "/etc/passwd"
    assert foreign_model(None, "~/m.gguf") == "~/m.gguf"
    assert foreign_model(None, DEFAULT_MODEL) is None  # the documented default
    assert foreign_model(None, "all-MiniLM-L6-v2-f16.gguf") is None  # older databases' name
    assert foreign_model(None, None) is None
    assert foreign_model("/mine.gguf", "/etc/passwd") is None  # the user's model is used
    monkeypatch.setenv(MODEL_ENV, "/env/m.gguf")
    assert foreign_model(None, "hf:someone/else/evil.gguf") is None


# ---- resolving ----


def test_a_missing_path_says_what_to_do(tmp_path):
    with pytest.raises(ModelNotFoundError) as ei:
        resolve_model(str(tmp_path / "nope.gguf"))
    msg = str(ei.value)
    assert "nope.gguf" in msg and "--model" in msg and MODEL_ENV in msg
    assert "shared" not in msg


@needs_hub
def test_hf_offline_and_not_cached_says_what_to_do(tmp_path, monkeypatch):
    use_hf_cache(monkeypatch, tmp_path / "cache")
    with pytest.raises(ModelNotFoundError) as ei:
        resolve_model(DEFAULT_MODEL)
    msg = str(ei.value)
    assert "HF_HUB_OFFLINE" in msg and f"sqlite-rrf model {DEFAULT_MODEL}" in msg
    assert "--model" in msg and "shared" not in msg


@needs_hub
def test_hf_unreachable_hub_fails_fast_with_a_clear_message(tmp_path, monkeypatch):
    """No network and no cache: an answer within seconds, not after the hub client's
    minute of retries (the endpoint's host name does not resolve)."""
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setenv("HF_ENDPOINT", "https://no-such-host.invalid")
    t = time.monotonic()
    with pytest.raises(ModelNotFoundError, match="cannot be reached"):
        resolve_model("hf:org/repo/model.gguf")
    assert time.monotonic() - t < 10


def use_hf_cache(monkeypatch, cache: Path) -> None:
    """Point huggingface_hub at ``cache``, offline (it reads its settings at import, so
    the imported module's constant is set too)."""
    import huggingface_hub.constants

    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(cache))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


@needs_hub
@pytest.mark.skipif(not HAVE_MODEL, reason="needs the GGUF model")
def test_hf_model_resolves_from_the_cache_offline(tmp_path, monkeypatch):
    snap = fill_hf_cache(tmp_path / "cache", DEFAULT_MODEL, SHARED_MODEL)
    use_hf_cache(monkeypatch, tmp_path / "cache")
    path = resolve_model(DEFAULT_MODEL)
    assert os.path.samefile(path, snap)
    assert Path(path).read_bytes()[:4] == b"GGUF"


@needs_hub
@needs_model
def test_default_model_through_the_hf_cache_embeds_like_the_shared_model(tmp_path, monkeypatch):
    """The default (an hf: model) loads from the cache with no configuration, and its
    vectors agree with the shared model's and with the cached SciFact query embeddings."""
    from sqlite_rrf.embedding.embedder import Embedder

    fill_hf_cache(tmp_path / "cache", DEFAULT_MODEL, SHARED_MODEL)
    use_hf_cache(monkeypatch, tmp_path / "cache")
    monkeypatch.delenv(MODEL_ENV, raising=False)
    data = SHARED_MODEL.parent.parent / "data" / "scifact"
    import json

    ids = json.loads((data / "queries.minilm.ids.json").read_text())
    cached = np.load(data / "queries.minilm.npy")
    texts = {}
    with open(data / "queries.jsonl", encoding="utf-8") as f:
        for line in f:
            q = json.loads(line)
            texts[q["_id"]] = q["text"]
    with Embedder() as hub, Embedder(str(SHARED_MODEL)) as local:
        assert hub.model_spec == DEFAULT_MODEL and hub.dim == 384
        for i in range(0, len(ids), len(ids) // 10):
            v = hub.embed(texts[ids[i]])
            assert float(v @ local.embed(texts[ids[i]])) >= 0.999
            assert float(v @ cached[i]) >= 0.999


# ---- the database's model ----


@pytest.fixture(scope="module")
def other_model(tmp_path_factory) -> Path:
    """A second real GGUF model of the same dimension: the shared model with its token
    embedding rows shuffled (so every text embeds elsewhere)."""
    gguf = pytest.importorskip(
        "gguf", reason="gguf is not installed: pip install 'sqlite-rrf[test]'"
    )
    if not HAVE_MODEL:
        pytest.skip("needs the GGUF model")
    path = tmp_path_factory.mktemp("other") / "other-model.gguf"
    path.write_bytes(SHARED_MODEL.read_bytes())
    reader = gguf.GGUFReader(str(path), "r+")
    (tensor,) = [t for t in reader.tensors if t.name == "token_embd.weight"]
    rows = np.random.default_rng(0).permutation(tensor.data.shape[0])
    tensor.data[:] = tensor.data[rows]
    reader.data.flush()
    del reader
    return path


@needs_model
def test_a_database_remembers_its_model_and_refuses_another_of_the_same_size(tmp_path, other_model):
    from sqlite_rrf.embedding.embedder import Embedder
    from sqlite_rrf.store import Store, StoreError

    db = tmp_path / "m.db"
    with Embedder(str(SHARED_MODEL)) as emb, Store(db, embedder=emb) as store:
        store.add("Production Postgres credentials are kept in Vault.", id="a")
        assert store.model == str(SHARED_MODEL)
        fp = store.meta("embedding_fingerprint")
        assert isinstance(fp, bytes) and len(fp) == 4 * 384 * len(FINGERPRINT_TEXTS)
    with apsw.Connection(str(db)) as c:
        before = c.execute("SELECT key, value FROM rrf_meta ORDER BY key").fetchall()
    with Embedder(str(other_model)) as other:
        assert other.dim == 384
        with pytest.raises(StoreError) as ei:
            Store(db, embedder=other)
        msg = str(ei.value)
        assert "other-model.gguf" in msg and str(SHARED_MODEL) in msg and "cosine" in msg
        with Store(db) as store:  # attach later: refused the same way, nothing written
            with pytest.raises(StoreError, match="not the model"):
                store.attach_embedder(other)
            assert store.embedder is None
    with apsw.Connection(str(db)) as c:
        assert c.execute("SELECT key, value FROM rrf_meta ORDER BY key").fetchall() == before
    # the same model (opened again) is accepted
    with Embedder(str(SHARED_MODEL)) as emb, Store(db, embedder=emb) as store:
        assert store.recall("postgres credentials", force=True)[0].id == "a"


@needs_model
def test_fingerprints_tell_models_apart(other_model):
    from sqlite_rrf.embedding.embedder import Embedder
    from sqlite_rrf.embedding.models import FINGERPRINT_MIN_COSINE, fingerprint

    with (
        Embedder(str(SHARED_MODEL)) as a,
        Embedder(str(SHARED_MODEL)) as a2,
        Embedder(str(other_model)) as b,
    ):
        fa, fa2, fb = fingerprint(a), fingerprint(a2), fingerprint(b)
    assert fingerprint_cosine(fa, fa2) >= 0.9999
    assert fingerprint_cosine(fa, fb) < FINGERPRINT_MIN_COSINE
    assert fingerprint_cosine(fa, fa[:-4]) is None


# ---- the command line with and without a model ----


def cli(*args, cwd, env=None, model=None, timeout=300):
    """The CLI with no model available (no SQLITE_RRF_MODEL; the default looked up offline
    in an empty Hugging Face cache) unless ``model`` or ``env`` give one."""
    e = dict(os.environ)
    e.pop(MODEL_ENV, None)
    e.pop("SQLITE_RRF_LOADABLE", None)
    e["HF_HUB_OFFLINE"] = "1"
    e["HF_HUB_CACHE"] = str(Path(cwd) / "empty-hf-cache")
    if model:
        e[MODEL_ENV] = str(model)
    e.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "sqlite_rrf", *map(str, args)],
        cwd=str(cwd),
        env=e,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def ok(p):
    assert p.returncode == 0, f"exit {p.returncode}\n{p.stdout}\n{p.stderr}"
    assert "Traceback" not in p.stderr, p.stderr
    return p


def test_without_a_model_everything_works_and_says_so_once(tmp_path):
    db = tmp_path / "m.db"
    p = ok(cli("add", db, "Postgres credentials are kept in Vault", "--id", "a", cwd=tmp_path))
    assert p.stdout.strip() == "a"
    notes = [ln for ln in p.stderr.splitlines() if ln.strip() and "created a new memory" not in ln]
    assert len(notes) == 1 and "vector list is off" in notes[0]
    assert "sqlite-rrf model" in notes[0] and "--model" in notes[0]
    assert "shared" not in p.stderr
    jsonl = tmp_path / "e.jsonl"
    jsonl.write_text(
        '{"id": "b", "content": "The user prefers green tea"}\n'
        '{"id": "c", "content": "Backups of Postgres run every six hours"}\n'
    )
    p = ok(cli("import", db, jsonl, cwd=tmp_path))
    # said once a day per database: the add above said it
    assert "imported 2" in p.stdout and "vector list is off" not in p.stderr
    p = ok(cli("recall", db, "postgres credentials", "--json", cwd=tmp_path))
    import json

    hits = json.loads(p.stdout)
    assert hits[0]["id"] == "a" and all(h["vec_rank"] is None for h in hits)
    assert p.stderr.count("vector list is off") == 1 and "embed" in p.stderr
    p = ok(cli("demo", tmp_path / "d.db", cwd=tmp_path))
    assert "without embeddings" in p.stdout and "1. ep-001" in p.stdout
    assert p.stderr.count("vector list is off") == 1 and "shared" not in p.stderr


def test_a_model_named_by_the_user_that_is_missing_is_an_error(tmp_path):
    for how in (["--model", tmp_path / "nope.gguf"], []):
        env = {} if how else {MODEL_ENV: str(tmp_path / "nope.gguf")}
        p = cli("add", tmp_path / "m.db", "text", *how, cwd=tmp_path, env=env)
        assert p.returncode == 1 and "Traceback" not in p.stderr
        assert "nope.gguf" in p.stderr and "does not exist" in p.stderr
        assert "shared" not in p.stderr
        assert not (tmp_path / "m.db").exists() or _count(tmp_path / "m.db") == 0


def _count(db, where="1"):
    with apsw.Connection(str(db)) as c:
        return c.execute(f"SELECT count(*) FROM episodes WHERE {where}").fetchall()[0][0]


@needs_hub
@needs_model
def test_model_command_and_the_databases_own_model(tmp_path):
    """`sqlite-rrf model SPEC` prints the cached file; a database made with an hf: model
    recalls with it again with no --model, from its memory."""
    cache = tmp_path / "cache"
    fill_hf_cache(cache, DEFAULT_MODEL, SHARED_MODEL)
    env = {"HF_HUB_CACHE": str(cache)}
    p = ok(cli("model", cwd=tmp_path, env=env))
    assert p.stdout.splitlines()[0] == DEFAULT_MODEL
    assert os.path.samefile(p.stdout.splitlines()[1], next(cache.rglob("*.gguf")))
    db = tmp_path / "m.db"
    ok(
        cli(
            "add",
            db,
            "Production Postgres credentials are kept in Vault",
            "--id",
            "a",
            cwd=tmp_path,
            env=env,
        )
    )
    with apsw.Connection(str(db)) as c:
        assert (
            c.execute("SELECT value FROM rrf_meta WHERE key = 'embedding_model'").fetchall()[0][0]
            == DEFAULT_MODEL
        )
    p = ok(cli("recall", db, "where are the db passwords?", "--json", cwd=tmp_path, env=env))
    import json

    assert json.loads(p.stdout)[0]["vec_rank"] == 1 and "vector list is off" not in p.stderr


@needs_model
def test_a_database_with_embeddings_recalls_without_a_model_and_says_so(tmp_path):
    db = tmp_path / "m.db"
    gone = tmp_path / "model-that-goes-away.gguf"
    gone.write_bytes(SHARED_MODEL.read_bytes())
    ok(
        cli(
            "add",
            db,
            "Production Postgres credentials are kept in Vault",
            "--id",
            "a",
            cwd=tmp_path,
            model=gone,
        )
    )
    gone.unlink()  # the database's model is no longer there, and none is named
    p = ok(cli("recall", db, "postgres credentials", "--json", cwd=tmp_path))
    import json

    hits = json.loads(p.stdout)
    assert hits[0]["id"] == "a" and hits[0]["vec_rank"] is None
    assert p.stderr.count("vector list is off") == 1
    assert str(gone) in p.stderr  # the database's own model, which is missing
    p = ok(cli("add", db, "another one", "--id", "b", cwd=tmp_path))
    # the recall above said that the vector list is off (once a day per database)
    assert "vector list is off" not in p.stderr and f"sqlite-rrf embed {db}" in p.stderr
    assert _count(db, "embedding IS NULL") == 1 and _count(db) == 2


# ---- embed: the backfill ----


@needs_model
def test_embed_backfills_in_batches_and_resumes_after_a_kill(tmp_path):
    db = tmp_path / "m.db"
    n = 300
    jsonl = tmp_path / "e.jsonl"
    with open(jsonl, "w") as f:
        for i in range(n):
            f.write(
                f'{{"id": "e{i}", "content": "episode number {i} about topic {i % 17} and '
                f'a longer tail of words to embed {i * 7}"}}\n'
            )
    ok(cli("import", db, jsonl, cwd=tmp_path))
    assert _count(db, "embedding IS NULL") == n
    e = dict(os.environ, HF_HUB_OFFLINE="1", **{MODEL_ENV: str(SHARED_MODEL)})
    proc = subprocess.Popen(
        [sys.executable, "-m", "sqlite_rrf", "embed", str(db), "--batch-size", "8"],
        cwd=str(tmp_path),
        env=e,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    seen = []
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            done = _count(db, "embedding IS NOT NULL")
        except apsw.BusyError:
            continue
        seen.append(done)
        if done >= 16:
            break
        time.sleep(0.01)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    done = _count(db, "embedding IS NOT NULL")
    assert 16 <= done < n, "the kill came before the end"
    assert all(k % 8 == 0 for k in seen + [done]), "every batch lands whole or not at all"
    p = ok(cli("embed", db, cwd=tmp_path, model=SHARED_MODEL))
    assert f"embedded {n - done} episodes" in p.stdout
    assert _count(db, "embedding IS NULL") == 0
    p = ok(cli("embed", db, cwd=tmp_path, model=SHARED_MODEL))
    assert "every episode has an embedding" in p.stdout
    # the backfilled vectors are the model's
    from sqlite_rrf.embedding.embedder import Embedder

    with Embedder(str(SHARED_MODEL)) as emb, apsw.Connection(str(db)) as c:
        for content, blob in c.execute(
            "SELECT content, embedding FROM episodes WHERE id IN ('e0', 'e150', 'e299')"
        ):
            assert float(np.frombuffer(blob, "<f4") @ emb.embed(content)) >= 0.9999


def test_embed_without_a_model_fails_clearly(tmp_path):
    db = tmp_path / "m.db"
    ok(cli("add", db, "some text", cwd=tmp_path))
    p = cli("embed", db, cwd=tmp_path)
    assert p.returncode == 1 and "Traceback" not in p.stderr
    assert "HF_HUB_OFFLINE" in p.stderr and "--model" in p.stderr
    assert _count(db, "embedding IS NULL") == 1


# ---- the demo never destroys data ----


def test_demo_never_replaces_a_database_it_did_not_make(tmp_path):
    real = tmp_path / "memory.db"
    ok(cli("add", real, "my real memory", "--id", "mine", cwd=tmp_path))
    before = real.read_bytes()
    p = cli("demo", real, cwd=tmp_path)
    assert p.returncode == 1 and "never replaces" in p.stderr and "Traceback" not in p.stderr
    assert real.read_bytes() == before and _count(real) == 1
    other = tmp_path / "notes.txt"
    other.write_text("not a database")
    p = cli("demo", other, cwd=tmp_path)
    assert p.returncode == 1 and other.read_text() == "not a database"
    # its own database, made by a previous run, is replaced; the default path is its own
    ok(cli("demo", cwd=tmp_path))
    ok(cli("demo", cwd=tmp_path))
    assert (tmp_path / "sqlite-rrf-demo.db").exists() and not (tmp_path / "memory.db-wal").exists()
    # a demo database someone added a real episode to is no longer the demo's
    ok(cli("add", tmp_path / "sqlite-rrf-demo.db", "a real note", "--id", "real", cwd=tmp_path))
    p = cli("demo", cwd=tmp_path)
    assert p.returncode == 1 and _count(tmp_path / "sqlite-rrf-demo.db", "id = 'real'") == 1


# ---- a model named only by the database is not loaded ----


def _set_remembered(db: Path, spec: str) -> None:
    """What anyone who can write the file can do: name another model in rrf_meta."""
    with apsw.Connection(str(db)) as c:
        c.execute("UPDATE rrf_meta SET value = ? WHERE key = 'embedding_model'", (spec,))


def _no_model_env(tmp_path: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if k != MODEL_ENV}
    env.update(HF_HUB_OFFLINE="1", HF_HUB_CACHE=str(tmp_path / "empty-hf-cache"))
    return env


@needs_hub
@needs_model
def test_a_path_named_by_the_database_is_never_opened(tmp_path):
    """A database whose rrf_meta names a GGUF file by its absolute path (here a real model,
    so that loading it would work): recall, hook and embed do not open that file unless the
    user names it; they say which model the database was made with and how to pass it."""
    import json

    planted = tmp_path / "elsewhere" / "planted.gguf"
    planted.parent.mkdir()
    planted.write_bytes(SHARED_MODEL.read_bytes())
    db = tmp_path / "m.db"
    ok(
        cli(
            "add",
            db,
            "Production Postgres credentials are kept in Vault",
            "--id",
            "a",
            cwd=tmp_path,
            model=SHARED_MODEL,
        )
    )
    ok(cli("add", db, "The user prefers green tea", "--id", "b", cwd=tmp_path))  # unembedded
    _set_remembered(db, str(planted))

    def untouched() -> float:  # an atime before the mtime: the next read moves it (relatime)
        st = planted.stat()
        os.utime(planted, (st.st_mtime - 3600, st.st_mtime))
        return planted.stat().st_atime

    atime = untouched()
    p = ok(cli("recall", db, "postgres credentials", "--json", cwd=tmp_path))
    assert planted.stat().st_atime == atime, "the planted model file was read"
    hits = json.loads(p.stdout)
    assert hits[0]["id"] == "a" and hits[0]["vec_rank"] is None
    assert p.stderr.count("vector list is off") == 1, p.stderr
    assert f"made with the model {str(planted)!r}" in p.stderr
    assert f"--model {str(planted)!r}" in p.stderr and MODEL_ENV in p.stderr
    hook = subprocess.run(
        [sys.executable, "-m", "sqlite_rrf", "hook", str(db), "--scope", ""],
        input=json.dumps({"prompt": "postgres credentials"}),
        text=True,
        capture_output=True,
        timeout=300,  # notes of its own
        env=dict(_no_model_env(tmp_path), XDG_CACHE_HOME=str(tmp_path / "c")),
    )
    assert hook.returncode == 0 and "_(id `a`" in hook.stdout, hook.stderr
    assert str(planted) in hook.stderr
    p = cli("embed", db, cwd=tmp_path)
    assert p.returncode == 1 and f"made with the model {str(planted)!r}" in p.stderr
    assert _count(db, "embedding IS NULL") == 1
    assert planted.stat().st_atime == atime, "the planted model file was read"

    # the default model, when it is in the cache, is used: the fingerprint shows that it is
    # the model the database was made with; the planted file is still not read
    cache = tmp_path / "hf-cache"
    fill_hf_cache(cache, DEFAULT_MODEL, SHARED_MODEL)
    p = ok(
        cli(
            "recall",
            db,
            "where are the db passwords?",
            "--json",
            cwd=tmp_path,
            env={"HF_HUB_CACHE": str(cache)},
        )
    )
    assert json.loads(p.stdout)[0]["vec_rank"] == 1 and "vector list is off" not in p.stderr
    assert planted.stat().st_atime == atime, "the planted model file was read"

    # the check can fail: the user names the file, and it is read and used
    p = ok(
        cli("recall", db, "where are the db passwords?", "--json", "--model", planted, cwd=tmp_path)
    )
    assert json.loads(p.stdout)[0]["vec_rank"] == 1
    assert planted.stat().st_atime != atime


@needs_hub
@needs_model
def test_an_hf_model_named_by_the_database_is_never_downloaded(tmp_path):
    """A database whose rrf_meta names hf:someone/else/evil.gguf, with a Hub that answers
    (a local HTTP server as HF_ENDPOINT, recording every request) and an empty cache:
    recall, hook and embed ask the Hub for nothing (neither that model nor the default,
    which is not downloaded for a database of another model)."""
    import http.server
    import json
    import threading

    requests: list = []

    class Hub(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            requests.append(self.path)
            self.send_error(404)

        do_HEAD = do_GET

        def log_message(self, *a) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Hub)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        db = tmp_path / "m.db"
        ok(
            cli(
                "add",
                db,
                "Production Postgres credentials are kept in Vault",
                "--id",
                "a",
                cwd=tmp_path,
                model=SHARED_MODEL,
            )
        )
        ok(cli("add", db, "The user prefers green tea", "--id", "b", cwd=tmp_path))
        evil = "hf:someone/else/evil.gguf"
        _set_remembered(db, evil)
        hub = {
            "HF_HUB_OFFLINE": "0",
            "HF_ENDPOINT": f"http://127.0.0.1:{server.server_port}",
            "HF_HUB_CACHE": str(tmp_path / "hf-cache"),
            "HF_HOME": str(tmp_path / "hf"),
        }
        p = ok(cli("recall", db, "postgres credentials", "--json", cwd=tmp_path, env=hub))
        assert requests == [], requests  # not even a HEAD request for the file
        assert json.loads(p.stdout)[0]["vec_rank"] is None
        assert f"made with the model {evil!r}" in p.stderr and f"--model {evil!r}" in p.stderr
        env = dict(_no_model_env(tmp_path), **hub)
        hook = subprocess.run(
            [sys.executable, "-m", "sqlite_rrf", "hook", str(db), "--scope", ""],
            input=json.dumps({"prompt": "postgres"}),
            text=True,
            capture_output=True,
            timeout=300,
            env=env,
        )
        assert hook.returncode == 0 and "_(id `a`" in hook.stdout, hook.stderr
        p = cli("embed", db, cwd=tmp_path, env=hub)
        assert p.returncode == 1 and evil in p.stderr
        assert requests == [], requests
        assert not any((tmp_path / "hf-cache").rglob("*.gguf"))
    finally:
        server.shutdown()
        server.server_close()
