"""The store that holds a collection for the evaluation, cached on disk.

:func:`build_store` loads a collection's corpus into a :class:`~sqlite_rrf.store.Store`
(the cached vectors, or vectors embedded with the model) and keeps the database under
:func:`cache_dir` (``$XDG_CACHE_HOME/sqlite-rrf/eval/``, i.e. ``~/.cache/sqlite-rrf/eval/``;
or a path of the caller's) under a key made of the corpus file's size and modification
time, the embedding caches' (or the model's), the package version and the schema
migrations, so repeated evaluations skip the load.

Recency and access lists carry no signal in BEIR (documents have no time or usage):
every document gets the same ``created_at``/``accessed_at`` (:data:`EVAL_EPOCH_MS`) and
``access_count`` 0.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import time
from typing import TYPE_CHECKING, Any, Dict, List, Mapping, Optional, Union

import numpy as np

from .._version import __version__
from ..core.sql_files import sql_dir
from ..store import Store
from .beir import CORPUS_CACHE, BeirData, PathLike, load_beir
from .progress import progress_bar

if TYPE_CHECKING:
    from ..embedding.embedder import Embedder

__all__ = [
    "CACHE_FORMAT",
    "EVAL_EPOCH_MS",
    "EvalCacheError",
    "build_store",
    "cache_dir",
    "make_embedder",
]

#: ``created_at`` = ``accessed_at`` of every loaded document (2020-09-13, ms since the
#: epoch). Any constant would do: BEIR has no time, so recency must not separate documents.
EVAL_EPOCH_MS = 1_600_000_000_000


#: Bump when the way a collection is loaded into a store changes (invalidates caches).
CACHE_FORMAT = 1


class EvalCacheError(RuntimeError):
    """The cached evaluation database cannot be used or written (e.g. ``--db`` names a
    database that the evaluation did not create)."""


def cache_dir() -> str:
    """Where evaluation databases are cached: ``$XDG_CACHE_HOME/sqlite-rrf/eval``
    (``~/.cache/sqlite-rrf/eval`` when XDG_CACHE_HOME is not set)."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "sqlite-rrf", "eval")


def _file_sig(path: str) -> Optional[List[int]]:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return [st.st_size, st.st_mtime_ns]


def _schema_hash() -> str:
    h = hashlib.sha256()
    mdir = os.path.join(sql_dir(), "migrations")
    for name in sorted(os.listdir(mdir)):
        if name.endswith(".sql"):
            h.update(name.encode())
            with open(os.path.join(mdir, name), "rb") as f:
                h.update(f.read())
    return h.hexdigest()[:16]


def _cache_key(
    data: BeirData, embedder: Optional[Embedder], model_path: Optional[str]
) -> Dict[str, Any]:
    """What the cached database depends on (its sidecar JSON stores it)."""
    key: Dict[str, Any] = {
        "format": CACHE_FORMAT,
        "version": __version__,
        "schema": _schema_hash(),
        "corpus": _file_sig(data.corpus_path),
        "corpus_cache": [_file_sig(os.path.join(data.data_dir, f)) for f in CORPUS_CACHE],
    }
    if data.corpus_missing:  # vectors that the model, not the cache, provides
        if embedder is not None:
            mp = getattr(embedder, "model_path", None)
            name = getattr(embedder, "model_name", None) or type(embedder).__name__
        else:
            from ..embedding.embedder import default_model_path

            mp = model_path or default_model_path()
            name = os.path.basename(mp) if mp else None
        key["model"] = [name, _file_sig(mp) if mp else None, getattr(embedder, "n_ctx", 256)]
    return key


def _key_digest(key: Mapping[str, Any]) -> str:
    return hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:16]


def _read_sidecar(path: str) -> Optional[Dict[str, Any]]:
    try:
        with open(path, encoding="utf-8") as f:
            obj = json.load(f)
    except (OSError, ValueError):
        return None
    return obj if isinstance(obj, dict) else None


def _remove_db(path: str) -> None:
    for suffix in ("", "-wal", "-shm", "-journal"):
        try:
            os.remove(path + suffix)
        except FileNotFoundError:
            pass


def _default_db_path(data: BeirData, digest: str) -> str:
    where = hashlib.sha256(data.data_dir.encode()).hexdigest()[:8]
    safe = re.sub(r"[^A-Za-z0-9._-]+", "_", data.name) or "collection"
    return os.path.join(cache_dir(), f"{safe}-{where}-{digest}.db")


def make_embedder(embedder: Optional[Embedder], model_path: Optional[str]) -> Embedder:
    """``embedder`` when given, else an :class:`~sqlite_rrf.embedding.embedder.Embedder` of
    ``model_path`` (the default model when None)."""
    if embedder is not None:
        return embedder
    from ..embedding.embedder import Embedder

    return Embedder(model_path)


def build_store(
    data_dir: Union[PathLike, BeirData],
    db_path: Optional[PathLike] = None,
    embedder: Optional[Embedder] = None,
    progress: bool = True,
    *,
    model_path: Optional[str] = None,
    rebuild: bool = False,
    knn: bool = False,
) -> Store:
    """A :class:`~sqlite_rrf.store.Store` holding the collection's corpus.

    Episode id = document id, content = ``title + " " + text``, embedding from the cache
    (or embedded with ``embedder`` — an :class:`~sqlite_rrf.embedding.embedder.Embedder` made from
    ``model_path`` / the default model when None — with a progress bar), and the same
    ``created_at`` = ``accessed_at`` (:data:`EVAL_EPOCH_MS`) and ``access_count`` 0 for
    every document: BEIR has no time or usage signal.

    The database is cached: at ``db_path`` when given, else under :func:`cache_dir`,
    with a sidecar ``<db>.eval.json`` holding the key (corpus file size and mtime,
    embedding caches or model, package version, schema). A valid cache is opened as is;
    otherwise the database is built in a temporary file and moved into place. An
    existing ``db_path`` without the sidecar is refused (it is not an evaluation
    database, and would be overwritten). ``data_dir`` may also be a :class:`BeirData`
    already loaded. ``knn`` also creates the ``'knn'`` pool's sqlite-vec index
    (:meth:`Store.enable_knn <sqlite_rrf.store.Store.enable_knn>`). The caller closes the
    returned store.
    """
    data = data_dir if isinstance(data_dir, BeirData) else load_beir(data_dir)
    key = _cache_key(data, embedder, model_path)
    digest = _key_digest(key)
    if db_path is None:
        path = _default_db_path(data, digest)
        user_path = False
    else:
        path = os.path.abspath(os.fspath(db_path))
        user_path = True
    sidecar = path + ".eval.json"
    n_docs = sum(1 for t in data.corpus_texts if t.strip())

    side = _read_sidecar(sidecar)
    if os.path.exists(path) and side is None and user_path:
        raise EvalCacheError(
            f"{path}: exists and is not an evaluation database made by `sqlite-rrf eval` "
            f"(no {os.path.basename(sidecar)} next to it); choose another --db path or "
            "remove the file"
        )
    if not rebuild and side is not None and side.get("digest") == digest and os.path.isfile(path):
        store = Store(path, embedder=embedder)
        if store.count() == n_docs:
            return _with_knn(store, knn)
        store.close()

    parent = os.path.dirname(path)
    os.makedirs(parent, exist_ok=True)
    if not user_path:  # older caches of the same collection
        prefix = os.path.basename(path)[: -len(digest) - 3]
        for name in os.listdir(parent):
            if (
                name.startswith(prefix)
                and re.fullmatch(re.escape(prefix) + r"[0-9a-f]{16}\.db", name)
                and name != os.path.basename(path)
            ):
                _remove_db(os.path.join(parent, name))
                with contextlib.suppress(OSError):
                    os.remove(os.path.join(parent, name + ".eval.json"))

    # Vectors: the cache, plus whatever it does not cover.
    dim = None if data.corpus_embeddings is None else data.corpus_embeddings.shape[1]
    vecs = None if data.corpus_embeddings is None else data.corpus_embeddings.copy()
    missing = [i for i in data.corpus_missing if data.corpus_texts[i].strip()]
    if missing:
        emb = make_embedder(embedder, model_path)
        embedded = emb.embed_many(
            [data.corpus_texts[i] for i in missing],
            progress=progress,
            desc=f"embedding {data.name} corpus",
        )
        if vecs is None:
            vecs = np.zeros((len(data.corpus_ids), embedded.shape[1]), dtype=np.float32)
        elif embedded.shape[1] != dim:
            raise EvalCacheError(
                f"the model gives {embedded.shape[1]}-dimensional vectors but "
                f"the corpus embedding cache is {dim}-dimensional"
            )
        vecs[np.asarray(missing, dtype=int)] = embedded
        if embedder is None:
            emb.close()
    assert vecs is not None

    tmp = f"{path}.building-{os.getpid()}"
    _remove_db(tmp)
    try:
        with Store(tmp) as store:
            rows = [i for i, t in enumerate(data.corpus_texts) if t.strip()]
            bar = progress_bar(len(rows), f"loading {data.name}", progress, unit="doc")
            try:
                for start in range(0, len(rows), 5000):
                    chunk = rows[start : start + 5000]
                    store.add_many(
                        [
                            {
                                "id": data.corpus_ids[i],
                                "content": data.corpus_texts[i],
                                "embedding": vecs[i],
                                "created_at": EVAL_EPOCH_MS,
                                "accessed_at": EVAL_EPOCH_MS,
                                "access_count": 0,
                            }
                            for i in chunk
                        ],
                        progress=False,
                    )
                    if bar is not None:
                        bar.update(len(chunk))
            finally:
                if bar is not None:
                    bar.close()
            # Merge the FTS5 index into one b-tree (faster queries; same bm25 scores).
            store.optimize_index()
        _remove_db(path)
        os.replace(tmp, path)
    except BaseException:
        _remove_db(tmp)
        raise
    side_tmp = f"{sidecar}.{os.getpid()}"
    with open(side_tmp, "w", encoding="utf-8") as f:
        json.dump(
            {
                "digest": digest,
                "key": key,
                "data_dir": data.data_dir,
                "documents": n_docs,
                "built_at": time.time(),
            },
            f,
            indent=2,
        )
    os.replace(side_tmp, sidecar)
    return _with_knn(Store(path, embedder=embedder), knn)


def _with_knn(store: Store, knn: bool) -> Store:
    """``store``, with the 'knn' pool's sqlite-vec index when ``knn`` (closed on failure)."""
    if knn:
        try:
            store.enable_knn()
        except BaseException:
            store.close()
            raise
    return store
