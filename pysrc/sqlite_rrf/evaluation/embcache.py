"""An on-disk cache of text embeddings, keyed by the model and the text's hash.

The agent-memory evaluation (:mod:`.longmemeval`) embeds ~55,000 chat turns; on two CPU
cores that takes minutes to most of an hour, so every vector is kept in one SQLite file
(:func:`default_cache_path`: ``$XDG_CACHE_HOME/sqlite-rrf/embeddings.sqlite``, i.e.
``~/.cache/sqlite-rrf/embeddings.sqlite``; or a path of the caller's) under the key
``sha256(model fingerprint + NUL + text)``. A rerun then costs seconds.

The model fingerprint (:func:`model_fingerprint`) is the model file's name, size and the
SHA-256 of its first and last MiB, with the context size (texts are truncated to it):
another model, or the same model truncating elsewhere, never reads another's vectors.

The cache is written in batches, each in its own transaction, so an interrupted fill
keeps what it has done and the next run resumes where it stopped.
"""

from __future__ import annotations

import hashlib
import os
import time
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import apsw
import numpy as np

from .progress import progress_bar

__all__ = ["EmbeddingCache", "default_cache_path", "embed_cached", "model_fingerprint"]

_MIB = 1 << 20


def default_cache_path() -> str:
    """``$XDG_CACHE_HOME/sqlite-rrf/embeddings.sqlite`` (``~/.cache/...`` when
    XDG_CACHE_HOME is not set)."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "sqlite-rrf", "embeddings.sqlite")


def model_fingerprint(model_path: str, n_ctx: int) -> str:
    """What identifies a model's vectors: its file name, size, the SHA-256 of its first
    and last MiB, and the context size ``n_ctx`` (the truncation length)."""
    st = os.stat(model_path)
    h = hashlib.sha256()
    with open(model_path, "rb") as f:
        h.update(f.read(_MIB))
        if st.st_size > 2 * _MIB:
            f.seek(st.st_size - _MIB)
        h.update(f.read(_MIB))
    return f"{os.path.basename(model_path)}:{st.st_size}:{h.hexdigest()[:16]}:ctx{n_ctx}"


def _key(fingerprint: str, text: str) -> bytes:
    return hashlib.sha256(
        fingerprint.encode() + b"\0" + text.encode("utf-8", "surrogatepass")
    ).digest()


class EmbeddingCache:
    """Vectors of one model, in a SQLite file (created with its directory if missing).

    Args:
        fingerprint: the model's :func:`model_fingerprint`.
        path: the cache file (default :func:`default_cache_path`).
    """

    def __init__(self, fingerprint: str, path: Optional[str] = None) -> None:
        self.path = os.path.abspath(path or default_cache_path())
        self.fingerprint = fingerprint
        d = os.path.dirname(self.path)
        if d:
            os.makedirs(d, exist_ok=True)
        self._conn = apsw.Connection(self.path)
        self._conn.setbusytimeout(30_000)
        self._conn.execute("PRAGMA journal_mode=WAL")
        self._conn.execute(
            "CREATE TABLE IF NOT EXISTS vectors (key BLOB PRIMARY KEY, "
            "vec BLOB NOT NULL) WITHOUT ROWID"
        )

    def close(self) -> None:
        """Close the file."""
        self._conn.close()

    def __enter__(self) -> "EmbeddingCache":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def get_many(self, texts: Sequence[str]) -> Tuple[Dict[int, np.ndarray], List[int]]:
        """({index: vector} of the cached texts, indices of the texts not cached)."""
        found: Dict[int, np.ndarray] = {}
        missing: List[int] = []
        keys = [_key(self.fingerprint, t) for t in texts]
        step = 500
        for start in range(0, len(keys), step):
            chunk = keys[start : start + step]
            q = ",".join("?" * len(chunk))
            got: Dict[bytes, bytes] = {
                k: v
                for k, v in self._conn.execute(
                    f"SELECT key, vec FROM vectors WHERE key IN ({q})", chunk
                )
                if isinstance(k, bytes) and isinstance(v, bytes)
            }
            for i, k in enumerate(chunk, start):
                v = got.get(k)
                if v is None:
                    missing.append(i)
                else:
                    found[i] = np.frombuffer(v, dtype="<f4")
        return found, missing

    def put_many(self, texts: Sequence[str], vecs: np.ndarray) -> None:
        """Store the vectors of ``texts`` (row i of ``vecs`` belongs to ``texts[i]``)."""
        with self._conn:
            self._conn.executemany(
                "INSERT OR REPLACE INTO vectors(key, vec) VALUES (?, ?)",
                [
                    (_key(self.fingerprint, t), np.asarray(v, dtype="<f4").tobytes())
                    for t, v in zip(texts, vecs)
                ],
            )

    def count(self) -> int:
        """How many vectors the file holds (of every model)."""
        return int(self._conn.execute("SELECT count(*) FROM vectors").get)


def embed_cached(
    texts: Sequence[str],
    cache: EmbeddingCache,
    embedder: Callable[[], Any],
    *,
    progress: bool = False,
    desc: str = "embedding",
    chunk: int = 256,
) -> Tuple[np.ndarray, int, float]:
    """The vectors of ``texts`` (float32, one row each), from the cache, embedding the
    texts it lacks with ``embedder()`` (called once, only when something is missing) and
    storing them ``chunk`` at a time.

    Returns (vectors, how many were embedded, seconds spent embedding)."""
    uniq: Dict[str, int] = {}
    for t in texts:
        uniq.setdefault(t, len(uniq))
    utexts = list(uniq)
    found, missing = cache.get_many(utexts)
    dim = None
    if found:
        dim = len(next(iter(found.values())))
    t0 = time.perf_counter()
    if missing:
        emb = embedder()
        dim = emb.dim
        bar = progress_bar(len(missing), desc, progress, unit="text")
        try:
            for s in range(0, len(missing), chunk):
                idx = missing[s : s + chunk]
                batch = [utexts[i] for i in idx]
                vecs = emb.embed_many(batch, progress=False)
                cache.put_many(batch, vecs)
                for i, v in zip(idx, vecs):
                    found[i] = v
                if bar is not None:
                    bar.update(len(idx))
        finally:
            if bar is not None:
                bar.close()
    secs = time.perf_counter() - t0
    out = np.zeros((len(texts), dim or 0), dtype=np.float32)
    for r, t in enumerate(texts):
        out[r] = found[uniq[t]]
    return out, len(missing), secs
