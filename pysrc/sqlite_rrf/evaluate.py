"""Evaluation on BEIR-layout collections: does the recall statement rank well?

``sqlite-rrf eval DATA_DIR`` (and :func:`evaluate`) loads a collection in the BEIR layout
into a :class:`~sqlite_rrf.store.Store`, sends every query of a split through
:meth:`Store.recall <sqlite_rrf.store.Store.recall>` — the product's own SQL statement;
there is no second scoring code path here — and reports nDCG@10, recall@100 and MRR@10
per *run* (a named set of recall parameters: :data:`RUNS`).

The collection (``DATA_DIR``)::

    corpus.jsonl          {"_id", "title", "text", ...} per line
    queries.jsonl         {"_id", "text", ...} per line (every split)
    qrels/<split>.tsv     query-id <TAB> corpus-id <TAB> score (integer grade), header optional
    corpus.minilm.npy     optional: float32 [n, d] embeddings of title + " " + text, row i
    corpus.minilm.ids.json    belonging to ids[i]
    queries.minilm.npy    optional: the same for queries
    queries.minilm.ids.json

A document's text (what is indexed and embedded) is ``title + " " + text``. Vectors
missing from the caches are embedded with an :class:`~sqlite_rrf.embed.Embedder`
(``--model``; the default all-MiniLM-L6-v2) with a progress bar.

The loaded store is cached on disk (default ``$XDG_CACHE_HOME/sqlite-rrf/eval/``, i.e.
``~/.cache/sqlite-rrf/eval/``; or the ``--db`` path) under a key made of the corpus
file's size and modification time, the embedding caches' (or the model's), the package
version and the schema migrations, so repeated evaluations skip the load.

Metrics follow BEIR, which uses ``pytrec_eval`` (trec_eval):

* **nDCG@k** — gain = the qrels grade (grades <= 0 give nothing), discount
  ``1/log2(rank + 1)``, normalised by the ideal DCG of the query's qrels (all its judged
  documents, whether or not they are in the corpus);
* **recall@k** — relevant documents (grade > 0) in the top k / all relevant documents;
* **MRR@k** — 1 / rank of the first relevant document in the top k (0 if none).

Each is averaged over **every** query of the split: a query with nothing relevant
retrieved (or nothing retrieved) counts as 0, and so does a query without any relevant
judgment. A ranking may be given as a list of ids (in rank order) or as
``{doc_id: score}`` (ties broken as trec_eval does: by doc id, descending).

Recency and access lists carry no signal in BEIR (documents have no time or usage):
every document gets the same ``created_at``/``accessed_at`` and ``access_count`` 0, and
every run sets the recency and access weights to 0.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import inspect
import json
import math
import os
import re
import sys
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field
from typing import (Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple,
                    Union)

import numpy as np

from . import __version__
from .resources import sql_dir

__all__ = [
    "BeirData", "BeirFormatError", "EvalCacheError", "RunSpec", "RUNS", "BASELINE_RUNS",
    "PUBLISHED_SCIFACT", "load_beir", "build_store", "ndcg_at_k", "recall_at_k", "mrr_at_k",
    "available_runs", "evaluate", "plot", "format_table", "add_parser", "run_cli",
]

#: ``created_at`` = ``accessed_at`` of every loaded document (2020-09-13, ms since the
#: epoch). Any constant would do: BEIR has no time, so recency must not separate documents.
EVAL_EPOCH_MS = 1_600_000_000_000
#: Results per query: enough for recall@100.
DEPTH = 100
#: BM25 candidates per query for the runs that fuse BM25 (the statement's default is 50).
BM25_DEPTH = 1000
#: Bump when the way a collection is loaded into a store changes (invalidates caches).
CACHE_FORMAT = 1
#: File names of the optional embedding caches: (vectors, ids) for corpus and queries.
CORPUS_CACHE = ("corpus.minilm.npy", "corpus.minilm.ids.json")
QUERY_CACHE = ("queries.minilm.npy", "queries.minilm.ids.json")

#: Published nDCG@10 on SciFact's test split (see ../shared/data/README.md): BM25 from the
#: BEIR paper, all-MiniLM-L6-v2 from MTEB, RRF (k 60) of the two and a convex combination
#: from the cognica-io/bayesian-bm25 README.
PUBLISHED_SCIFACT: Dict[str, float] = {
    "BM25 (BEIR)": 0.665,
    "all-MiniLM-L6-v2 (MTEB)": 0.6451,
    "RRF k=60 (bayesian-bm25)": 0.7143,
    "convex (bayesian-bm25)": 0.7337,
}
#: The published number each run compares with on SciFact (for the table).
_PUBLISHED_BY_RUN = {"bm25": 0.665, "vector": 0.6451, "rrf": 0.7143, "convex": 0.7337}

Ranking = Union[Sequence[str], Mapping[str, float]]
Qrels = Mapping[str, Mapping[str, int]]
PathLike = Union[str, "os.PathLike[str]"]


class BeirFormatError(ValueError):
    """A collection file is missing or malformed (the message names the file, the line
    and the fault)."""


class EvalCacheError(RuntimeError):
    """The cached evaluation database cannot be used or written (e.g. ``--db`` names a
    database that the evaluation did not create)."""


# ---------------------------------------------------------------------------------------
# Loading a BEIR collection
# ---------------------------------------------------------------------------------------

@dataclass
class BeirData:
    """One split of a BEIR-layout collection, as :func:`load_beir` reads it.

    ``corpus_embeddings`` / ``query_embeddings`` are float32 arrays aligned with
    ``corpus_ids`` / ``query_ids`` when an embedding cache exists (None otherwise);
    ``corpus_missing`` / ``query_missing`` are the row indices the cache did not cover
    (their rows are zero and must be embedded).
    """

    data_dir: str
    name: str
    split: str
    corpus_ids: List[str]
    corpus_texts: List[str]
    query_ids: List[str]
    query_texts: List[str]
    qrels: Dict[str, Dict[str, int]]
    corpus_embeddings: Optional[np.ndarray] = None
    query_embeddings: Optional[np.ndarray] = None
    corpus_missing: List[int] = field(default_factory=list)
    query_missing: List[int] = field(default_factory=list)
    notes: List[str] = field(default_factory=list)

    @property
    def corpus_path(self) -> str:
        """Path of ``corpus.jsonl``."""
        return os.path.join(self.data_dir, "corpus.jsonl")

    def needs_embedder(self) -> bool:
        """True when some document or query vector is not in the caches."""
        return (self.corpus_embeddings is None or bool(self.corpus_missing)
                or self.query_embeddings is None or bool(self.query_missing))


def _need_file(path: str, what: str) -> None:
    if not os.path.isfile(path):
        raise BeirFormatError(
            f"{path}: missing ({what}; a BEIR collection holds corpus.jsonl, queries.jsonl "
            "and qrels/<split>.tsv)")


def _read_jsonl(path: str, kind: str) -> Iterable[Tuple[int, Dict[str, Any]]]:
    """(line number, object) for each non-blank line; BeirFormatError on a bad line."""
    try:
        f = open(path, encoding="utf-8")
    except OSError as e:
        raise BeirFormatError(f"{path}: cannot read ({e.strerror})") from None
    with f:
        try:
            for n, line in enumerate(f, 1):
                if not line.strip():
                    continue
                try:
                    obj = json.loads(line)
                except json.JSONDecodeError as e:
                    raise BeirFormatError(f"{path}: line {n}: invalid JSON ({e.msg} at column "
                                          f"{e.colno})") from None
                if not isinstance(obj, dict):
                    raise BeirFormatError(f"{path}: line {n}: expected a JSON object, got "
                                          f"{type(obj).__name__}")
                yield n, obj
        except UnicodeDecodeError as e:
            raise BeirFormatError(f"{path}: not UTF-8 text ({e})") from None


def _doc_id(path: str, n: int, obj: Mapping[str, Any]) -> str:
    if "_id" not in obj:
        raise BeirFormatError(f'{path}: line {n}: no "_id" field')
    v = obj["_id"]
    if isinstance(v, bool) or not isinstance(v, (str, int)) or (isinstance(v, str) and not v):
        raise BeirFormatError(f'{path}: line {n}: "_id" must be a non-empty string, got {v!r}')
    return str(v)


def _text_field(path: str, n: int, obj: Mapping[str, Any], key: str) -> str:
    v = obj.get(key)
    if v is None:
        return ""
    if not isinstance(v, str):
        raise BeirFormatError(f'{path}: line {n}: "{key}" must be a string, got '
                              f"{type(v).__name__}")
    return v


def _read_qrels(path: str) -> Dict[str, Dict[str, int]]:
    qrels: Dict[str, Dict[str, int]] = {}
    try:
        f = open(path, encoding="utf-8")
    except OSError as e:
        raise BeirFormatError(f"{path}: cannot read ({e.strerror})") from None
    with f:
        try:
            for n, line in enumerate(f, 1):
                line = line.rstrip("\r\n")
                if not line.strip():
                    continue
                cols = line.split("\t")
                if len(cols) != 3:
                    raise BeirFormatError(f"{path}: line {n}: expected 3 tab-separated columns "
                                          f"(query-id, corpus-id, score), got {len(cols)}")
                qid, did, score = (c.strip() for c in cols)
                try:
                    grade_f = float(score)
                except ValueError:
                    if n == 1 and not qrels:  # the header: query-id corpus-id score
                        continue
                    raise BeirFormatError(f"{path}: line {n}: score {score!r} is not a "
                                          "number") from None
                if not math.isfinite(grade_f) or grade_f != int(grade_f):
                    raise BeirFormatError(f"{path}: line {n}: score {score!r} is not an integer "
                                          "grade")
                if not qid or not did:
                    raise BeirFormatError(f"{path}: line {n}: empty query-id or corpus-id")
                qrels.setdefault(qid, {})[did] = int(grade_f)
        except UnicodeDecodeError as e:
            raise BeirFormatError(f"{path}: not UTF-8 text ({e})") from None
    if not qrels:
        raise BeirFormatError(f"{path}: no judgments")
    return qrels


def _load_cache(data_dir: str, files: Tuple[str, str], ids: Sequence[str], what: str
                ) -> Tuple[Optional[np.ndarray], List[int]]:
    """The cached vectors of ``ids`` (rows aligned with ``ids``; missing rows zero) and
    the indices of the missing rows; (None, all) when there is no cache."""
    npy, idf = (os.path.join(data_dir, f) for f in files)
    have_npy, have_ids = os.path.isfile(npy), os.path.isfile(idf)
    if not have_npy and not have_ids:
        return None, list(range(len(ids)))
    if have_npy != have_ids:
        present, absent = (npy, idf) if have_npy else (idf, npy)
        raise BeirFormatError(f"{absent}: missing, but {os.path.basename(present)} is there "
                              f"(a {what} embedding cache is a .npy and its .ids.json)")
    try:
        mat = np.load(npy, allow_pickle=False)
    except (OSError, ValueError) as e:
        raise BeirFormatError(f"{npy}: not a readable .npy array ({e})") from None
    try:
        with open(idf, encoding="utf-8") as f:
            cache_ids = json.load(f)
    except (OSError, ValueError) as e:
        raise BeirFormatError(f"{idf}: not readable JSON ({e})") from None
    if (not isinstance(cache_ids, list)
            or not all(isinstance(i, (str, int)) and not isinstance(i, bool) for i in cache_ids)):
        raise BeirFormatError(f"{idf}: expected a JSON list of ids")
    cache_ids = [str(i) for i in cache_ids]
    if mat.ndim != 2 or mat.shape[0] != len(cache_ids) or mat.shape[1] == 0:
        raise BeirFormatError(f"{npy}: shape {mat.shape} does not match the {len(cache_ids)} ids "
                              f"of {os.path.basename(idf)} (expected [{len(cache_ids)}, dim])")
    if not np.issubdtype(mat.dtype, np.floating):
        raise BeirFormatError(f"{npy}: dtype {mat.dtype} is not floating point")
    pos: Dict[str, int] = {}
    for i, cid in enumerate(cache_ids):
        if cid in pos:
            raise BeirFormatError(f"{idf}: id {cid!r} appears twice")
        pos[cid] = i
    out = np.zeros((len(ids), mat.shape[1]), dtype=np.float32)
    missing: List[int] = []
    for row, wanted in enumerate(ids):
        j = pos.get(wanted)
        if j is None:
            missing.append(row)
        else:
            out[row] = mat[j]
    present_rows = np.setdiff1d(np.arange(len(ids)), np.asarray(missing, dtype=int))
    sub = out[present_rows]
    if not np.isfinite(sub).all():
        raise BeirFormatError(f"{npy}: non-finite values")
    if sub.size and (np.linalg.norm(sub, axis=1) == 0).any():
        raise BeirFormatError(f"{npy}: a zero vector (cosine is undefined)")
    return out, missing


def load_beir(data_dir: PathLike, split: str = "test") -> BeirData:
    """Read one split of a BEIR-layout collection (see the module docstring).

    Returns every document (text = ``title + " " + text``, in file order), the queries
    that have judgments in ``qrels/<split>.tsv`` (in ``queries.jsonl`` order), the qrels
    ``{query_id: {doc_id: grade}}`` and the cached embeddings aligned by id when the
    cache files exist.

    Raises:
        BeirFormatError: a file is missing or malformed, an id repeats, a judged query
            is not in ``queries.jsonl``, or an embedding cache is inconsistent.
    """
    data_dir = os.path.abspath(os.fspath(data_dir))
    if not os.path.isdir(data_dir):
        raise BeirFormatError(f"{data_dir}: not a directory (expected a BEIR collection: "
                              "corpus.jsonl, queries.jsonl, qrels/<split>.tsv)")
    if not split or os.sep in split or split.startswith("."):
        raise BeirFormatError(f"split: not a valid split name: {split!r}")
    corpus_path = os.path.join(data_dir, "corpus.jsonl")
    queries_path = os.path.join(data_dir, "queries.jsonl")
    qrels_path = os.path.join(data_dir, "qrels", f"{split}.tsv")
    _need_file(corpus_path, "the documents")
    _need_file(queries_path, "the queries")
    if not os.path.isfile(qrels_path):
        qdir = os.path.join(data_dir, "qrels")
        splits = sorted(f[:-4] for f in os.listdir(qdir) if f.endswith(".tsv")) \
            if os.path.isdir(qdir) else []
        raise BeirFormatError(f"{qrels_path}: missing (the judgments of split {split!r}; "
                              f"available splits: {', '.join(splits) or 'none'})")

    ids: List[str] = []
    texts: List[str] = []
    seen: Dict[str, int] = {}
    for n, obj in _read_jsonl(corpus_path, "corpus"):
        did = _doc_id(corpus_path, n, obj)
        if did in seen:
            raise BeirFormatError(f"{corpus_path}: line {n}: _id {did!r} already on line "
                                  f"{seen[did]}")
        seen[did] = n
        ids.append(did)
        texts.append(_text_field(corpus_path, n, obj, "title") + " "
                     + _text_field(corpus_path, n, obj, "text"))
    if not ids:
        raise BeirFormatError(f"{corpus_path}: no documents")

    qrels = _read_qrels(qrels_path)
    all_queries: Dict[str, str] = {}
    order: List[str] = []
    for n, obj in _read_jsonl(queries_path, "queries"):
        qid = _doc_id(queries_path, n, obj)
        if qid in all_queries:
            raise BeirFormatError(f"{queries_path}: line {n}: _id {qid!r} appears twice")
        all_queries[qid] = _text_field(queries_path, n, obj, "text")
        order.append(qid)
    unknown = [q for q in qrels if q not in all_queries]
    if unknown:
        raise BeirFormatError(f"{qrels_path}: {len(unknown)} judged quer"
                              f"{'y is' if len(unknown) == 1 else 'ies are'} not in "
                              f"queries.jsonl (e.g. {unknown[0]!r})")
    query_ids = [q for q in order if q in qrels]
    query_texts = [all_queries[q] for q in query_ids]

    data = BeirData(data_dir=data_dir, name=os.path.basename(data_dir.rstrip(os.sep)),
                    split=split, corpus_ids=ids, corpus_texts=texts, query_ids=query_ids,
                    query_texts=query_texts, qrels=qrels)
    unjudged = sum(1 for rels in qrels.values() for d in rels if d not in seen)
    if unjudged:
        data.notes.append(f"{unjudged} judgment(s) name documents that are not in the corpus "
                          "(they count in the ideal DCG and recall denominators, as in BEIR)")
    empty = [i for i, t in enumerate(texts) if not t.strip()]
    if empty:
        data.notes.append(f"{len(empty)} document(s) have no text and are not loaded")
    data.corpus_embeddings, data.corpus_missing = _load_cache(data_dir, CORPUS_CACHE, ids,
                                                              "corpus")
    data.query_embeddings, data.query_missing = _load_cache(data_dir, QUERY_CACHE, query_ids,
                                                            "query")
    if (data.corpus_embeddings is not None and data.query_embeddings is not None
            and data.corpus_embeddings.shape[1] != data.query_embeddings.shape[1]):
        raise BeirFormatError(
            f"{data_dir}: the corpus embedding cache is {data.corpus_embeddings.shape[1]}-"
            f"dimensional but the query cache is {data.query_embeddings.shape[1]}-dimensional")
    return data


# ---------------------------------------------------------------------------------------
# Metrics (pytrec_eval / trec_eval definitions, as BEIR reports them)
# ---------------------------------------------------------------------------------------

def _ranked_list(ranked: Ranking) -> List[str]:
    """Doc ids in rank order. A mapping ``{doc_id: score}`` is sorted by score
    descending, ties by doc id descending (trec_eval's order); a repeated id in a list
    keeps its first (best) position."""
    if isinstance(ranked, Mapping):
        items = sorted(ranked.items(), key=lambda kv: (float(kv[1]), str(kv[0])), reverse=True)
        return [str(d) for d, _ in items]
    if isinstance(ranked, (str, bytes)):
        raise TypeError("ranked must be a sequence of doc ids or a {doc_id: score} mapping, "
                        "not a single string")
    out: List[str] = []
    seen = set()
    for d in ranked:
        d = str(d)
        if d not in seen:
            seen.add(d)
            out.append(d)
    return out


def _check_k(k: int) -> None:
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ValueError(f"k must be a positive integer, got {k!r}")


def ndcg_at_k(ranked: Ranking, qrels_for_q: Mapping[str, int], k: int = 10) -> float:
    """nDCG@k of one ranking: Σ_{i≤k} grade(d_i)/log2(i+1) over the ideal DCG of the
    qrels (grades ≤ 0 give no gain). 0.0 when the query has no positive judgment."""
    _check_k(k)
    gains = sorted((g for g in qrels_for_q.values() if g > 0), reverse=True)[:k]
    idcg = sum(g / math.log2(i + 2) for i, g in enumerate(gains))
    if idcg <= 0:
        return 0.0
    dcg = 0.0
    for i, d in enumerate(_ranked_list(ranked)[:k]):
        g = qrels_for_q.get(d, 0)
        if g > 0:
            dcg += g / math.log2(i + 2)
    return dcg / idcg


def recall_at_k(ranked: Ranking, qrels_for_q: Mapping[str, int], k: int = 100) -> float:
    """Recall@k of one ranking: relevant documents (grade > 0) in the top k over all
    relevant documents of the query. 0.0 when the query has none."""
    _check_k(k)
    relevant = {d for d, g in qrels_for_q.items() if g > 0}
    if not relevant:
        return 0.0
    return len(relevant.intersection(_ranked_list(ranked)[:k])) / len(relevant)


def mrr_at_k(ranked: Ranking, qrels_for_q: Mapping[str, int], k: int = 10) -> float:
    """Reciprocal rank of the first relevant document (grade > 0) in the top k; 0.0 if
    there is none."""
    _check_k(k)
    for i, d in enumerate(_ranked_list(ranked)[:k]):
        if qrels_for_q.get(d, 0) > 0:
            return 1.0 / (i + 1)
    return 0.0


#: The metrics reported per run: name → (function, k).
METRICS = {"ndcg@10": (ndcg_at_k, 10), "recall@100": (recall_at_k, 100),
           "mrr@10": (mrr_at_k, 10)}


def score_run(rankings: Mapping[str, Ranking], qrels: Qrels,
              query_ids: Optional[Sequence[str]] = None) -> Dict[str, float]:
    """The mean of each metric of :data:`METRICS` over ``query_ids`` (default: every
    query of ``qrels``); a query without a ranking counts as 0."""
    qids = list(qrels) if query_ids is None else list(query_ids)
    if not qids:
        raise ValueError("no queries to score")
    out: Dict[str, float] = {}
    for name, (fn, k) in METRICS.items():
        out[name] = sum(fn(rankings.get(q, []), qrels.get(q, {}), k) for q in qids) / len(qids)
    return out


# ---------------------------------------------------------------------------------------
# The store holding a collection (cached on disk)
# ---------------------------------------------------------------------------------------

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


def _cache_key(data: BeirData, embedder: Any, model_path: Optional[str]) -> Dict[str, Any]:
    """What the cached database depends on (its sidecar JSON stores it)."""
    key: Dict[str, Any] = {
        "format": CACHE_FORMAT, "version": __version__, "schema": _schema_hash(),
        "corpus": _file_sig(data.corpus_path),
        "corpus_cache": [_file_sig(os.path.join(data.data_dir, f)) for f in CORPUS_CACHE],
    }
    if data.corpus_missing:  # vectors that the model, not the cache, provides
        if embedder is not None:
            mp = getattr(embedder, "model_path", None)
            name = getattr(embedder, "model_name", None) or type(embedder).__name__
        else:
            from .embed import default_model_path
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


def _make_embedder(embedder: Any, model_path: Optional[str]) -> Any:
    if embedder is not None:
        return embedder
    from .embed import Embedder
    return Embedder(model_path)


def build_store(data_dir: Union[PathLike, BeirData], db_path: Optional[PathLike] = None,
                embedder: Any = None, progress: bool = True, *,
                model_path: Optional[str] = None, rebuild: bool = False,
                knn: bool = False) -> Any:
    """A :class:`~sqlite_rrf.store.Store` holding the collection's corpus.

    Episode id = document id, content = ``title + " " + text``, embedding from the cache
    (or embedded with ``embedder`` — an :class:`~sqlite_rrf.embed.Embedder` made from
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
    (:meth:`Store.enable_knn <sqlite_rrf.store.Store.enable_knn>`) when the store has
    one. The caller closes the returned store.
    """
    from .store import Store

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
            "remove the file")
    if (not rebuild and side is not None and side.get("digest") == digest
            and os.path.isfile(path)):
        store = Store(path, embedder=embedder)
        if store.count() == n_docs:
            return _with_knn(store, knn)
        store.close()

    parent = os.path.dirname(path)
    os.makedirs(parent, exist_ok=True)
    if not user_path:  # older caches of the same collection
        prefix = os.path.basename(path)[: -len(digest) - 3]
        for name in os.listdir(parent):
            if (name.startswith(prefix) and re.fullmatch(re.escape(prefix) + r"[0-9a-f]{16}\.db",
                                                         name) and name != os.path.basename(path)):
                _remove_db(os.path.join(parent, name))
                with contextlib.suppress(OSError):
                    os.remove(os.path.join(parent, name + ".eval.json"))

    # Vectors: the cache, plus whatever it does not cover.
    dim = None if data.corpus_embeddings is None else data.corpus_embeddings.shape[1]
    vecs = None if data.corpus_embeddings is None else data.corpus_embeddings.copy()
    missing = [i for i in data.corpus_missing if data.corpus_texts[i].strip()]
    if missing:
        emb = _make_embedder(embedder, model_path)
        embedded = emb.embed_many([data.corpus_texts[i] for i in missing], progress=progress,
                                  desc=f"embedding {data.name} corpus")
        if vecs is None:
            vecs = np.zeros((len(data.corpus_ids), embedded.shape[1]), dtype=np.float32)
        elif embedded.shape[1] != dim:
            raise EvalCacheError(f"the model gives {embedded.shape[1]}-dimensional vectors but "
                                 f"the corpus embedding cache is {dim}-dimensional")
        vecs[np.asarray(missing, dtype=int)] = embedded
        if embedder is None:
            emb.close()
    assert vecs is not None

    tmp = f"{path}.building-{os.getpid()}"
    _remove_db(tmp)
    try:
        with Store(tmp) as store:
            rows = [i for i, t in enumerate(data.corpus_texts) if t.strip()]
            bar = _bar(len(rows), f"loading {data.name}", progress, unit="doc")
            try:
                for start in range(0, len(rows), 5000):
                    chunk = rows[start:start + 5000]
                    store.add_many(
                        [{"id": data.corpus_ids[i], "content": data.corpus_texts[i],
                          "embedding": vecs[i], "created_at": EVAL_EPOCH_MS,
                          "accessed_at": EVAL_EPOCH_MS, "access_count": 0} for i in chunk],
                        progress=False)
                    if bar is not None:
                        bar.update(len(chunk))
            finally:
                if bar is not None:
                    bar.close()
            # Merge the FTS5 index into one b-tree (faster queries; same bm25 scores).
            store.conn.execute("INSERT INTO episodes_fts(episodes_fts) VALUES ('optimize')")
        _remove_db(path)
        os.replace(tmp, path)
    except BaseException:
        _remove_db(tmp)
        raise
    side_tmp = f"{sidecar}.{os.getpid()}"
    with open(side_tmp, "w", encoding="utf-8") as f:
        json.dump({"digest": digest, "key": key, "data_dir": data.data_dir,
                   "documents": n_docs, "built_at": time.time()}, f, indent=2)
    os.replace(side_tmp, sidecar)
    return _with_knn(Store(path, embedder=embedder), knn)


def _with_knn(store: Any, knn: bool) -> Any:
    if knn:
        if not hasattr(store, "enable_knn"):
            store.close()
            raise EvalCacheError("this version of the store has no 'knn' pool")
        try:
            store.enable_knn()
        except BaseException:
            store.close()
            raise
    return store


def _bar(total: int, desc: str, progress: bool, unit: str = "query") -> Any:
    if not progress:
        return None
    try:
        from tqdm import tqdm
    except ImportError:  # tqdm comes with the embed and bench extras
        return None
    return tqdm(total=total, desc=desc, unit=unit,
                file=sys.stderr, leave=False, dynamic_ncols=True)


# ---------------------------------------------------------------------------------------
# Runs
# ---------------------------------------------------------------------------------------

@dataclass(frozen=True)
class RunSpec:
    """A named evaluation run: the keyword arguments of ``Store.recall`` it uses
    (besides ``limit=100, touch=False, force=True`` and the query vector), and whether
    the query vector is passed at all."""

    name: str
    description: str
    params: Mapping[str, Any]
    vector: bool = True


def _profiles() -> Tuple[str, ...]:
    from . import store
    return tuple(getattr(store, "PROFILES", ()) or ())


def _recall_accepts(name: str) -> bool:
    from .store import Store
    return name in inspect.signature(Store.recall).parameters


#: Parameters tuned on SciFact's **train** split (reported on test; docs/evaluation.md).
#: convex: alpha swept 0.3-0.7 on train, nDCG@10 0.7242 / 0.7308 / 0.7368 / 0.7388 /
#: 0.7372: 0.6 is kept. The statement's own default stays 0.5.
TUNED: Dict[str, Dict[str, Any]] = {"convex": {"alpha": 0.6}}


def available_runs() -> Dict[str, RunSpec]:
    """The runs, in report order: ``bm25``, ``vector``, ``rrf`` and one per profile of
    ``sqlite_rrf.store.PROFILES`` (recency and access weights 0), built from the
    installed :class:`~sqlite_rrf.store.Store`."""
    profiles = _profiles()
    base: Dict[str, Any] = {"profile": "rrf"} if "rrf" in profiles else {}
    runs: Dict[str, RunSpec] = {
        # The BM25 list alone: an empty vector pool (recent, size 0) leaves the BM25
        # hits as the only candidates, and no query vector is sent.
        "bm25": RunSpec("bm25", "BM25 list alone (FTS5 bm25, top 1000 candidates)",
                        dict(base, weights=(1.0, 0.0, 0.0, 0.0), k=60, pool="recent",
                             pool_size=0, bm25_limit=BM25_DEPTH), vector=False),
        "vector": RunSpec("vector", "vector list alone, exact cosine over every document",
                          dict(base, weights=(0.0, 1.0, 0.0, 0.0), k=60, pool="all")),
        "rrf": RunSpec("rrf", "RRF (k 60) of BM25 (top 1000) and vector (every document)",
                       dict(base, weights=(1.0, 1.0, 0.0, 0.0), k=60, pool="all",
                            bm25_limit=BM25_DEPTH)),
    }
    with_now = _recall_accepts("now")
    for p in profiles:
        if p in runs:  # the rrf profile with recency/access 0 is the rrf run
            continue
        params: Dict[str, Any] = {"profile": p, "weights": {"recency": 0.0, "access": 0.0},
                                  "pool": "all", "bm25_limit": BM25_DEPTH}
        if with_now:
            params["now"] = EVAL_EPOCH_MS
        params.update(TUNED.get(p, {}))
        tuned = ", ".join(f"{k} {v}" for k, v in TUNED.get(p, {}).items())
        runs[p] = RunSpec(p, f"profile {p!r} (recency and access weights 0"
                             + (f"; {tuned}, tuned on SciFact train" if tuned else "") + ")",
                          params)
    return runs


#: The runs available when this module was imported (see :func:`available_runs`).
RUNS: Dict[str, RunSpec] = available_runs()
#: The runs that do not depend on a profile.
BASELINE_RUNS = ("bm25", "vector", "rrf")


def _recall_queries(store: Any, kwargs: Mapping[str, Any],
                    queries: Sequence[Tuple[str, str, Optional[np.ndarray]]],
                    bar: Any = None) -> List[Tuple[str, List[str], float]]:
    """(query id, ranked doc ids, seconds) for each query, through ``Store.recall``.
    ``store`` is a Store, or a database path (in a worker process) that is opened here."""
    from .store import Store

    own = not isinstance(store, Store)
    st = Store(store) if own else store
    out: List[Tuple[str, List[str], float]] = []
    try:
        for qid, text, qvec in queries:
            t = time.perf_counter()
            res = st.recall(text, DEPTH, touch=False, force=True, qvec=qvec, **kwargs)
            out.append((qid, [h.id for h in res], time.perf_counter() - t))
            if bar is not None:
                bar.update(1)
    finally:
        if own:
            st.close()
    return out


def _noop() -> None:
    return None


def _start_workers(jobs: int) -> Optional[ProcessPoolExecutor]:
    """A pool of ``jobs`` worker processes, all started now (None for one job).

    Forked where the platform can fork (so ``python -m sqlite_rrf`` works: a spawned
    child would re-run the command), which is why this runs before any database or
    model is opened; elsewhere spawned."""
    if jobs <= 1:
        return None
    import multiprocessing
    method = "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn"
    pool = ProcessPoolExecutor(max_workers=jobs,
                               mp_context=multiprocessing.get_context(method))
    try:
        # With fork, the first submit starts every worker.
        for f in [pool.submit(_noop) for _ in range(jobs)]:
            f.result()
    except BaseException:
        pool.shutdown(cancel_futures=True)
        raise
    return pool


def _resolve_runs(runs: Optional[Iterable[str]], specs: Mapping[str, RunSpec]) -> List[str]:
    if runs is None:
        return list(specs)
    names = []
    for r in runs:
        if r not in specs:
            raise ValueError(f"unknown run {r!r}; the runs are: {', '.join(specs)}")
        if r not in names:
            names.append(r)
    if not names:
        raise ValueError("no runs selected")
    return names


# ---------------------------------------------------------------------------------------
# Evaluation
# ---------------------------------------------------------------------------------------

def evaluate(data_dir: PathLike, runs: Optional[Iterable[str]] = None, split: str = "test",
             profile_params: Optional[Mapping[str, Mapping[str, Any]]] = None,
             progress: bool = True, *, db_path: Optional[PathLike] = None,
             embedder: Any = None, model_path: Optional[str] = None,
             per_query: bool = False, rebuild: bool = False, jobs: int = 1,
             knn: bool = False) -> Dict[str, Any]:
    """Evaluate runs (default: every run of :func:`available_runs`) on one split.

    ``profile_params`` maps a run name to extra or overriding ``Store.recall`` keyword
    arguments (e.g. ``{"convex": {"alpha": 0.6}}``). ``db_path`` / ``embedder`` /
    ``model_path`` / ``rebuild`` / ``knn`` go to :func:`build_store` (the embedder is needed only
    for vectors missing from the caches). ``jobs`` > 1 spreads the queries over that
    many processes (each opens the database read-only in effect: ``touch=False``);
    the per-query latencies are then measured under that concurrency. Every query
    goes through ``Store.recall`` with ``limit=100, touch=False, force=True`` and its
    cached (or embedded) vector.

    Returns ``{"runs": {name: {"ndcg@10", "recall@100", "mrr@10"}}, "split",
    "queries", "corpus", "collection", "data_dir", "db", "params", "timings",
    "notes"}`` (and ``"per_query": {name: {qid: {metric: value}}}`` when asked).
    """
    if isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1:
        raise ValueError(f"jobs: must be a positive integer, got {jobs!r}")
    from .store import StoreError

    t0 = time.perf_counter()
    specs = available_runs()
    names = _resolve_runs(runs, specs)
    profile_params = dict(profile_params or {})
    from .store import Store
    settable = [p for p in inspect.signature(Store.recall).parameters
                if p not in ("self", "query", "limit", "touch", "force", "qvec")]
    for r, ps in profile_params.items():
        if r not in specs:
            raise ValueError(f"profile_params: unknown run {r!r}; the runs are: "
                             f"{', '.join(specs)}")
        bad = [p for p in ps if p not in settable]
        if bad:
            raise ValueError(f"profile_params: {r}: {bad[0]!r} is not a parameter of "
                             f"Store.recall that a run may set ({', '.join(settable)})")
    # Worker processes start first, before this process opens a database or loads a
    # model: a forked child must not inherit either.
    pool_exec = _start_workers(jobs)
    try:
        data = load_beir(data_dir, split)
        t_load = time.perf_counter() - t0

        own_embedder = None
        if data.needs_embedder() and embedder is None:
            own_embedder = embedder = _make_embedder(None, model_path)
        model_used = getattr(embedder, "model_name", None) or type(embedder).__name__
        try:
            t1 = time.perf_counter()
            qvecs = None if data.query_embeddings is None else data.query_embeddings.copy()
            if data.query_missing:
                embedded = embedder.embed_many([data.query_texts[i] for i in data.query_missing],
                                               progress=progress, desc="embedding queries")
                if qvecs is None:
                    qvecs = np.zeros((len(data.query_ids), embedded.shape[1]), dtype=np.float32)
                elif embedded.shape[1] != qvecs.shape[1]:
                    raise EvalCacheError(f"the model gives {embedded.shape[1]}-dimensional vectors "
                                         f"but the query embedding cache is {qvecs.shape[1]}-"
                                         "dimensional")
                qvecs[np.asarray(data.query_missing, dtype=int)] = embedded
            t_qemb = time.perf_counter() - t1
            t2 = time.perf_counter()
            store = build_store(data, db_path, embedder=embedder if data.corpus_missing else None,
                                progress=progress, model_path=model_path, rebuild=rebuild,
                                knn=knn)
            # Query vectors are always passed explicitly (qvec); a run without one (bm25)
            # must not have the store embed the query.
            store.embedder = None
            t_store = time.perf_counter() - t2
        finally:
            if own_embedder is not None:
                own_embedder.close()
        assert qvecs is not None

        results: Dict[str, Dict[str, float]] = {}
        timings: Dict[str, Dict[str, float]] = {}
        used: Dict[str, Dict[str, Any]] = {}
        per_q: Dict[str, Dict[str, Dict[str, float]]] = {}
        try:
            corpus_n = store.count()
            for name in names:
                spec = specs[name]
                kwargs = dict(spec.params)
                kwargs.update(profile_params.get(name, {}))
                used[name] = {k: (list(v) if isinstance(v, tuple) else v) for k, v in kwargs.items()}
                queries = [(qid, qtext, qvecs[qi] if spec.vector else None)
                           for qi, (qid, qtext) in enumerate(zip(data.query_ids, data.query_texts))]
                rankings: Dict[str, List[str]] = {}
                lat: List[float] = []
                bar = _bar(len(queries), f"{name:>8}", progress)
                t_run = time.perf_counter()
                try:
                    if pool_exec is None:
                        for qid, ids, sec in _recall_queries(store, kwargs, queries, bar):
                            rankings[qid] = ids
                            lat.append(sec)
                    else:
                        size = max(1, math.ceil(len(queries) / (4 * jobs)))
                        futures = [pool_exec.submit(_recall_queries, store.path, kwargs,
                                                    queries[i:i + size])
                                   for i in range(0, len(queries), size)]
                        for fut in as_completed(futures):
                            part = fut.result()
                            for qid, ids, sec in part:
                                rankings[qid] = ids
                                lat.append(sec)
                            if bar is not None:
                                bar.update(len(part))
                except StoreError as e:
                    raise StoreError(f"run {name}: {e}") from None
                finally:
                    if bar is not None:
                        bar.close()
                wall = time.perf_counter() - t_run
                results[name] = score_run(rankings, data.qrels, data.query_ids)
                timings[name] = {"seconds": round(wall, 3),
                                 "ms_per_query_median": round(1000 * float(np.median(lat)), 3),
                                 "ms_per_query_p95": round(1000 * float(np.percentile(lat, 95)), 3)}
                if per_query:
                    per_q[name] = {q: {m: fn(rankings[q], data.qrels[q], k)
                                       for m, (fn, k) in METRICS.items()} for q in data.query_ids}
            db = store.path
        finally:
            store.close()

        notes = [
            "recency and access weights are 0 in every run: a BEIR collection has no time or "
            "usage signal (every document is loaded with the same created_at/accessed_at and "
            "access_count 0)",
            f"every query goes through Store.recall (sql/recall.sql), limit {DEPTH}, touch=False, "
            "force=True; nDCG@10, recall@100 and MRR@10 as pytrec_eval/BEIR define them, averaged "
            "over every query of the split (a query with no relevant document retrieved counts 0)",
            "vectors: "
            + ("the collection's embedding caches" if not data.needs_embedder() else
               f"{len(data.corpus_missing)} document(s) and {len(data.query_missing)} query(ies) "
               f"embedded with {model_used} (not in the caches)"),
        ]
        notes.append("BM25 is FTS5's bm25() (k1 1.2, b 0.75) over one column, title + \" \" + "
                     "text, tokenizer porter unicode61; the query is the OR of its distinct tokens "
                     "(fts5_query)")
        if "bm25" in names:
            notes.append("bm25: the BM25 list alone — an empty vector pool (pool 'recent', "
                         "pool_size 0) and no query vector, so the candidates are the FTS5 hits")
        if not _profiles():
            notes.append("no fusion profiles: this sqlite_rrf.store has no PROFILES")
        notes.extend(data.notes)
        out: Dict[str, Any] = {
            "runs": results, "split": split, "queries": len(data.query_ids), "corpus": corpus_n,
            "collection": data.name, "data_dir": data.data_dir, "db": db, "params": used,
            "timings": {"load_seconds": round(t_load, 3), "store_seconds": round(t_store, 3),
                        "query_embedding_seconds": round(t_qemb, 3),
                        "total_seconds": round(time.perf_counter() - t0, 3), "runs": timings},
            "version": __version__, "notes": notes,
        }
        if per_query:
            out["per_query"] = per_q
        return out
    finally:
        if pool_exec is not None:
            pool_exec.shutdown(cancel_futures=True)


# ---------------------------------------------------------------------------------------
# Output: table, plot
# ---------------------------------------------------------------------------------------

def format_table(results: Mapping[str, Any]) -> str:
    """A readable table of :func:`evaluate`'s results (run, nDCG@10, R@100, MRR@10,
    ms/query, and the published nDCG@10 on SciFact), followed by the notes."""
    scifact = results.get("collection") == "scifact"
    runs = results["runs"]
    timing = results.get("timings", {}).get("runs", {})
    w = max([len("run")] + [len(r) for r in runs])
    head = f"{'run':<{w}}  nDCG@10   R@100  MRR@10  ms/query"
    if scifact:
        head += "  published nDCG@10"
    lines = [f"{results.get('collection', '?')} ({results['split']} split): "
             f"{results['queries']:,} queries, {results['corpus']:,} documents", "", head,
             "-" * len(head)]
    for name, m in runs.items():
        ms = timing.get(name, {}).get("ms_per_query_median")
        line = (f"{name:<{w}}  {m['ndcg@10']:7.4f}  {m['recall@100']:6.4f}  {m['mrr@10']:6.4f}"
                f"  {'' if ms is None else f'{ms:8.1f}'}")
        if scifact and name in _PUBLISHED_BY_RUN:
            line += f"  {_PUBLISHED_BY_RUN[name]:.4f}"
        lines.append(line.rstrip())
    t = results.get("timings", {})
    if "total_seconds" in t:
        lines.append("")
        lines.append(f"wall time {t['total_seconds']:.1f} s (load {t['load_seconds']:.1f} s, "
                     f"store {t['store_seconds']:.1f} s)")
    notes = results.get("notes") or []
    if notes:
        lines.append("")
        lines.append("notes:")
        lines.extend(f"  - {n}" for n in notes)
    return "\n".join(lines)


def plot(results: Mapping[str, Any], path: PathLike,
         references: Optional[Mapping[str, float]] = None) -> str:
    """Write a bar chart (PNG) of nDCG@10 per run to ``path`` and return the path.

    ``references`` are horizontal lines (label → nDCG@10); by default the published
    SciFact numbers (:data:`PUBLISHED_SCIFACT`) when the collection is SciFact. Needs
    matplotlib (the ``bench`` extra), imported here only.
    """
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as e:
        raise RuntimeError("--plot needs matplotlib: pip install 'sqlite-rrf[bench]' "
                           f"({e})") from None
    if references is None:
        references = PUBLISHED_SCIFACT if results.get("collection") == "scifact" else {}
    names = list(results["runs"])
    values = [results["runs"][n]["ndcg@10"] for n in names]
    fig, ax = plt.subplots(figsize=(max(6.0, 1.1 * len(names) + 3)
                                    + (2.5 if references else 0), 4.5), dpi=120)
    bars = ax.bar(names, values, color="#4C72B0", zorder=2)
    for b, v in zip(bars, values):
        ax.annotate(f"{v:.4f}", (b.get_x() + b.get_width() / 2, v), ha="center",
                    va="bottom", fontsize=8, xytext=(0, 2), textcoords="offset points")
    styles = ["--", ":", "-.", (0, (5, 1))]
    colors = ["#C44E52", "#55A868", "#8172B2", "#CCB974"]
    for i, (label, y) in enumerate(references.items()):
        ax.axhline(y, linestyle=styles[i % len(styles)], color=colors[i % len(colors)],
                   linewidth=1.2, label=f"{label} {y:.4f}", zorder=3)
    allv = values + list(references.values())
    lo = max(0.0, math.floor((min(allv) - 0.08) * 20) / 20) if allv else 0.0
    hi = min(1.0, max(allv) + 0.04) if allv else 1.0
    ax.set_ylim(lo, hi)
    ax.set_ylabel(f"nDCG@10 (axis from {lo:.2f})" if lo > 0 else "nDCG@10")
    ax.set_title(f"sqlite-rrf on {results.get('collection', '?')} ({results['split']} split, "
                 f"{results['queries']} queries)")
    ax.grid(axis="y", alpha=0.3, zorder=0)
    if references:
        ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), title="published",
                  title_fontsize=8, frameon=False)
    plt.setp(ax.get_xticklabels(), rotation=20 if len(names) > 5 else 0)
    fig.tight_layout()
    out = os.fspath(path)
    parent = os.path.dirname(os.path.abspath(out))
    os.makedirs(parent, exist_ok=True)
    fig.savefig(out)
    plt.close(fig)
    return out


# ---------------------------------------------------------------------------------------
# Command line: sqlite-rrf eval
# ---------------------------------------------------------------------------------------

def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register ``sqlite-rrf eval`` on an argparse subparsers object; the command runs
    :func:`run_cli`."""
    p: argparse.ArgumentParser = subparsers.add_parser(
        "eval", help="nDCG@10, recall@100 and MRR@10 on a BEIR-layout collection",
        description="Load a BEIR-layout collection (corpus.jsonl, queries.jsonl, "
                    "qrels/<split>.tsv, optional *.minilm.npy embedding caches) into a cached "
                    "store and evaluate the recall statement's runs: bm25, vector, rrf and "
                    "every fusion profile (recency and access weights 0).")
    p.add_argument("data_dir", metavar="DATA_DIR", help="the collection's directory")
    p.add_argument("--json", action="store_true", help="print the results as JSON")
    p.add_argument("--profile", metavar="NAME", nargs="+", action="extend", default=None,
                   help="evaluate these profiles (with the bm25, vector and rrf runs; "
                        "default: every profile)")
    p.add_argument("--run", metavar="NAME", nargs="+", action="extend", default=None,
                   help="evaluate exactly these runs (any of bm25, vector, rrf and the "
                        "profiles)")
    p.add_argument("--set", metavar="RUN.PARAM=VALUE", action="append", default=None,
                   dest="set_params",
                   help="override a Store.recall parameter of one run, e.g. convex.alpha=0.6 "
                        "(VALUE is JSON, else text); repeatable")
    p.add_argument("--split", default="test", help="qrels split (default test)")
    p.add_argument("--plot", metavar="PNG", help="write a bar chart of nDCG@10 per run")
    p.add_argument("--db", metavar="PATH",
                   help="the evaluation database (default: cached under "
                        "~/.cache/sqlite-rrf/eval/)")
    p.add_argument("--rebuild", action="store_true", help="rebuild the cached database")
    p.add_argument("--knn", action="store_true",
                   help="also build the 'knn' pool's sqlite-vec index, for runs set to "
                        "pool knn (e.g. --set rrf.pool=knn --set rrf.pool_size=1000)")
    p.add_argument("--model", metavar="PATH",
                   help="GGUF embedding model for vectors not in the caches (default: "
                        "$SQLITE_RRF_MODEL, else ../shared/models/all-MiniLM-L6-v2-f16.gguf)")
    p.add_argument("--jobs", "-j", type=int, default=1, metavar="N",
                   help="run the queries in N processes (default 1; latencies are then "
                        "measured under that load)")
    p.add_argument("--no-progress", action="store_true", dest="no_progress",
                   help="no progress bars")
    p.set_defaults(func=run_cli)
    return p


def _parse_sets(items: Optional[Sequence[str]]) -> Dict[str, Dict[str, Any]]:
    out: Dict[str, Dict[str, Any]] = {}
    for item in items or ():
        m = re.fullmatch(r"([^.=]+)\.([A-Za-z_][A-Za-z0-9_]*)=(.*)", item, re.S)
        if not m:
            raise ValueError(f"--set: expected RUN.PARAM=VALUE, got {item!r}")
        run, param, raw = m.groups()
        try:
            value = json.loads(raw)
        except ValueError:
            value = raw
        if isinstance(value, list):
            value = tuple(value)
        out.setdefault(run, {})[param] = value
    return out


def run_cli(args: argparse.Namespace) -> int:
    """Run ``sqlite-rrf eval`` with parsed arguments: print the table (or JSON with
    ``--json``), write ``--plot``; returns the exit status (1 with a one-line message
    on stderr for a bad collection, option, cache or model)."""
    from .embed import EmbeddingError, ModelNotFoundError

    progress = not getattr(args, "no_progress", False) and sys.stderr.isatty()
    try:
        specs = available_runs()
        chosen: List[str] = list(getattr(args, "run", None) or [])
        profiles_asked: List[str] = list(getattr(args, "profile", None) or [])
        runs: Optional[List[str]] = None
        if chosen or profiles_asked:
            runs = chosen if chosen else list(BASELINE_RUNS)
            runs += [p for p in profiles_asked if p not in runs]
        if runs is not None:
            unknown = [r for r in runs if r not in specs]
            if unknown:
                profiles = [r for r in specs if r not in BASELINE_RUNS]
                raise ValueError(f"unknown run or profile {unknown[0]!r}; runs: "
                                 f"{', '.join(BASELINE_RUNS)}; profiles: "
                                 f"{', '.join(profiles) or 'none in this version'}")
        params = _parse_sets(getattr(args, "set_params", None))
        results = evaluate(args.data_dir, runs=runs, split=args.split, profile_params=params,
                           progress=progress, db_path=getattr(args, "db", None),
                           model_path=getattr(args, "model", None),
                           rebuild=getattr(args, "rebuild", False),
                           jobs=getattr(args, "jobs", 1), knn=getattr(args, "knn", False))
        if getattr(args, "plot", None):
            plot(results, args.plot)
    except (BeirFormatError, EvalCacheError, ModelNotFoundError, EmbeddingError,
            ValueError, RuntimeError) as e:
        print(f"sqlite-rrf eval: {e}", file=sys.stderr)
        return 1
    if getattr(args, "json", False):
        print(json.dumps(results, indent=2))
    else:
        print(format_table(results))
        if getattr(args, "plot", None):
            print(f"\nplot: {args.plot}")
    return 0
