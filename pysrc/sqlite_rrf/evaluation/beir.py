"""Reading a collection in the BEIR layout (one split of it) for the evaluation.

The collection's directory::

    corpus.jsonl          {"_id", "title", "text", ...} per line
    queries.jsonl         {"_id", "text", ...} per line (every split)
    qrels/<split>.tsv     query-id <TAB> corpus-id <TAB> score (integer grade), header optional
    corpus.minilm.npy     optional: float32 [n, d] embeddings of title + " " + text, row i
    corpus.minilm.ids.json    belonging to ids[i]
    queries.minilm.npy    optional: the same for queries
    queries.minilm.ids.json

A document's text (what is indexed and embedded) is ``title + " " + text``. A malformed
file raises :class:`BeirFormatError` naming the file, the line and the fault.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, field
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np

__all__ = ["CORPUS_CACHE", "QUERY_CACHE", "BeirData", "BeirFormatError", "PathLike", "load_beir"]

#: File names of the optional embedding caches: (vectors, ids) for corpus and queries.
CORPUS_CACHE = ("corpus.minilm.npy", "corpus.minilm.ids.json")
QUERY_CACHE = ("queries.minilm.npy", "queries.minilm.ids.json")


#: A path given as text or as an os.PathLike.
PathLike = Union[str, "os.PathLike[str]"]


class BeirFormatError(ValueError):
    """A collection file is missing or malformed (the message names the file, the line
    and the fault)."""


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
        return (
            self.corpus_embeddings is None
            or bool(self.corpus_missing)
            or self.query_embeddings is None
            or bool(self.query_missing)
        )


def _need_file(path: str, what: str) -> None:
    if not os.path.isfile(path):
        raise BeirFormatError(
            f"{path}: missing ({what}; a BEIR collection holds corpus.jsonl, queries.jsonl "
            "and qrels/<split>.tsv)"
        )


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
                    raise BeirFormatError(
                        f"{path}: line {n}: invalid JSON ({e.msg} at column {e.colno})"
                    ) from None
                if not isinstance(obj, dict):
                    raise BeirFormatError(
                        f"{path}: line {n}: expected a JSON object, got {type(obj).__name__}"
                    )
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
        raise BeirFormatError(f'{path}: line {n}: "{key}" must be a string, got {type(v).__name__}')
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
                    raise BeirFormatError(
                        f"{path}: line {n}: expected 3 tab-separated columns "
                        f"(query-id, corpus-id, score), got {len(cols)}"
                    )
                qid, did, score = (c.strip() for c in cols)
                try:
                    grade_f = float(score)
                except ValueError:
                    if n == 1 and not qrels:  # the header: query-id corpus-id score
                        continue
                    raise BeirFormatError(
                        f"{path}: line {n}: score {score!r} is not a number"
                    ) from None
                if not math.isfinite(grade_f) or grade_f != int(grade_f):
                    raise BeirFormatError(
                        f"{path}: line {n}: score {score!r} is not an integer grade"
                    )
                if not qid or not did:
                    raise BeirFormatError(f"{path}: line {n}: empty query-id or corpus-id")
                qrels.setdefault(qid, {})[did] = int(grade_f)
        except UnicodeDecodeError as e:
            raise BeirFormatError(f"{path}: not UTF-8 text ({e})") from None
    if not qrels:
        raise BeirFormatError(f"{path}: no judgments")
    return qrels


def _load_cache(
    data_dir: str, files: Tuple[str, str], ids: Sequence[str], what: str
) -> Tuple[Optional[np.ndarray], List[int]]:
    """The cached vectors of ``ids`` (rows aligned with ``ids``; missing rows zero) and
    the indices of the missing rows; (None, all) when there is no cache."""
    npy, idf = (os.path.join(data_dir, f) for f in files)
    have_npy, have_ids = os.path.isfile(npy), os.path.isfile(idf)
    if not have_npy and not have_ids:
        return None, list(range(len(ids)))
    if have_npy != have_ids:
        present, absent = (npy, idf) if have_npy else (idf, npy)
        raise BeirFormatError(
            f"{absent}: missing, but {os.path.basename(present)} is there "
            f"(a {what} embedding cache is a .npy and its .ids.json)"
        )
    try:
        mat = np.load(npy, allow_pickle=False)
    except (OSError, ValueError) as e:
        raise BeirFormatError(f"{npy}: not a readable .npy array ({e})") from None
    try:
        with open(idf, encoding="utf-8") as f:
            cache_ids = json.load(f)
    except (OSError, ValueError) as e:
        raise BeirFormatError(f"{idf}: not readable JSON ({e})") from None
    if not isinstance(cache_ids, list) or not all(
        isinstance(i, (str, int)) and not isinstance(i, bool) for i in cache_ids
    ):
        raise BeirFormatError(f"{idf}: expected a JSON list of ids")
    cache_ids = [str(i) for i in cache_ids]
    if mat.ndim != 2 or mat.shape[0] != len(cache_ids) or mat.shape[1] == 0:
        raise BeirFormatError(
            f"{npy}: shape {mat.shape} does not match the {len(cache_ids)} ids "
            f"of {os.path.basename(idf)} (expected [{len(cache_ids)}, dim])"
        )
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
    """Read one split of a BEIR-layout collection (see this module's docstring).

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
        raise BeirFormatError(
            f"{data_dir}: not a directory (expected a BEIR collection: "
            "corpus.jsonl, queries.jsonl, qrels/<split>.tsv)"
        )
    if not split or os.sep in split or split.startswith("."):
        raise BeirFormatError(f"split: not a valid split name: {split!r}")
    corpus_path = os.path.join(data_dir, "corpus.jsonl")
    queries_path = os.path.join(data_dir, "queries.jsonl")
    qrels_path = os.path.join(data_dir, "qrels", f"{split}.tsv")
    _need_file(corpus_path, "the documents")
    _need_file(queries_path, "the queries")
    if not os.path.isfile(qrels_path):
        qdir = os.path.join(data_dir, "qrels")
        splits = (
            sorted(f[:-4] for f in os.listdir(qdir) if f.endswith(".tsv"))
            if os.path.isdir(qdir)
            else []
        )
        raise BeirFormatError(
            f"{qrels_path}: missing (the judgments of split {split!r}; "
            f"available splits: {', '.join(splits) or 'none'})"
        )

    ids: List[str] = []
    texts: List[str] = []
    seen: Dict[str, int] = {}
    for n, obj in _read_jsonl(corpus_path, "corpus"):
        did = _doc_id(corpus_path, n, obj)
        if did in seen:
            raise BeirFormatError(
                f"{corpus_path}: line {n}: _id {did!r} already on line {seen[did]}"
            )
        seen[did] = n
        ids.append(did)
        texts.append(
            _text_field(corpus_path, n, obj, "title")
            + " "
            + _text_field(corpus_path, n, obj, "text")
        )
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
        raise BeirFormatError(
            f"{qrels_path}: {len(unknown)} judged quer"
            f"{'y is' if len(unknown) == 1 else 'ies are'} not in "
            f"queries.jsonl (e.g. {unknown[0]!r})"
        )
    query_ids = [q for q in order if q in qrels]
    query_texts = [all_queries[q] for q in query_ids]

    data = BeirData(
        data_dir=data_dir,
        name=os.path.basename(data_dir.rstrip(os.sep)),
        split=split,
        corpus_ids=ids,
        corpus_texts=texts,
        query_ids=query_ids,
        query_texts=query_texts,
        qrels=qrels,
    )
    unjudged = sum(1 for rels in qrels.values() for d in rels if d not in seen)
    if unjudged:
        data.notes.append(
            f"{unjudged} judgment(s) name documents that are not in the corpus "
            "(they count in the ideal DCG and recall denominators, as in BEIR)"
        )
    empty = [i for i, t in enumerate(texts) if not t.strip()]
    if empty:
        data.notes.append(f"{len(empty)} document(s) have no text and are not loaded")
    data.corpus_embeddings, data.corpus_missing = _load_cache(data_dir, CORPUS_CACHE, ids, "corpus")
    data.query_embeddings, data.query_missing = _load_cache(
        data_dir, QUERY_CACHE, query_ids, "query"
    )
    if (
        data.corpus_embeddings is not None
        and data.query_embeddings is not None
        and data.corpus_embeddings.shape[1] != data.query_embeddings.shape[1]
    ):
        raise BeirFormatError(
            f"{data_dir}: the corpus embedding cache is {data.corpus_embeddings.shape[1]}-"
            f"dimensional but the query cache is {data.query_embeddings.shape[1]}-dimensional"
        )
    return data
