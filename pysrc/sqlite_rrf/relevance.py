"""Absolute relevance: how likely a recalled episode is to be what the query is about,
on a scale that means the same for every query and every memory.

The fused ``score`` ranks the hits of one query; it says nothing across queries (the
default profile divides by the query's best hit, so the top hit of any query, even
"hi", looks like a perfect match). :func:`relevance` gives each hit a number in
``[0, 1]`` made of two pieces of evidence that do not depend on the other hits:

- the **cosine** of the hit's embedding with the query's (``RecallHit.similarity``);
- the **BM25 evidence** ``b = -bm25 / idf_mass``: the hit's FTS5 ``bm25()`` (which sums,
  over the query's terms found in the hit, the term's IDF times a term-frequency factor
  that is 1 for one occurrence in a text of average length) divided by the query's
  **IDF mass**, the sum of the IDFs of all of the query's terms (:func:`query_idf_mass`).
  A term that no episode holds counts with the IDF it would have if one did
  (``ln((N + 0.5) / 1.5)``, N the episodes): a query whose rare words the memory has never
  seen ("Shinjuku", "sourdough") cannot be well matched, whatever its best hit.
  ``b`` is about the share of the query's informative words that the hit holds.

They are combined by a logistic model, ``relevance = 1 / (1 + exp(-(c0 + c_cos * cosine +
c_bm25 * min(b, 2))))``, with coefficients :data:`WITH_VECTOR`; when the hit has no
cosine (no model, or an episode without an embedding) by :data:`BM25_ONLY`. The
coefficients were fitted on development data only; ``docs/python.md`` ("Relevance and the
floor") says on what and how, and ``tests/bench/bench_silence.py`` measures the floor.

:data:`DEFAULT_MIN_RELEVANCE` is the floor the prompt hook and the MCP ``recall`` use by
default: hits below it are not shown, so a prompt about nothing in the memory gets
nothing. :meth:`Store.recall <sqlite_rrf.store.Store.recall>` itself has no floor unless
given ``min_relevance``.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, replace
from typing import Any, List, Optional, Sequence, Tuple

#: The floor of the prompt hook and of MCP ``recall`` (``--min-relevance`` / the tool's
#: ``min_relevance`` change it): hits whose relevance is below it are not shown.
DEFAULT_MIN_RELEVANCE = 0.15

#: ``(c0, c_cos, c_bm25)`` of the logistic model for a hit with a cosine.
WITH_VECTOR: Tuple[float, float, float] = (-3.81, 6.51, 3.42)
#: ``(c0, c_bm25)`` of the logistic model for a hit without one (no model).
BM25_ONLY: Tuple[float, float] = (-2.48, 5.94)
#: ``b`` is capped here (repeated words in a short text can push bm25 past the IDF mass).
BM25_CAP = 2.0

#: The tokenizer of ``episodes_fts`` (migration 0001), which ``fts5_query``'s 'terms' mode
#: needs to name the query's terms as the index holds them.
_TOKENIZE = "porter unicode61"


@dataclass(frozen=True)
class QueryEvidence:
    """What a query's BM25 evidence is measured against: ``idf_mass``, the sum of its
    terms' IDFs (absent terms at :func:`absent_idf`), ``terms`` its distinct terms,
    ``absent`` how many of them no episode holds, ``rows`` the episodes counted (N)."""

    idf_mass: float
    terms: int
    absent: int
    rows: int


def absent_idf(rows: int) -> float:
    """The IDF a term would have if one of ``rows`` episodes held it (FTS5's formula,
    ``ln((N - n + 0.5) / (n + 0.5))`` with n = 1, at least FTS5's floor 1e-6)."""
    return max(math.log((rows - 1 + 0.5) / 1.5), 1e-6)


def _rows(conn: Any) -> int:
    """N, the episodes in the index: the count the BM25 stopwords were computed at when
    the store keeps one (it is refreshed as the memory grows; an IDF changes slowly with
    N), else a count."""
    got = conn.execute("SELECT value FROM rrf_meta WHERE key = 'bm25_stopwords_rows'"
                       ).fetchall()
    if got and isinstance(got[0][0], int) and got[0][0] > 0:
        return int(got[0][0])
    return int(conn.execute("SELECT count(*) FROM episodes").fetchall()[0][0])


def query_idf_mass(conn: Any, query: str) -> QueryEvidence:
    """The query's IDF mass in the memory of ``conn`` (a connection with the rrf extension
    and the episodes schema): the sum over its distinct terms (``fts5_query``'s 'terms'
    mode, the index's tokenizer) of the IDF FTS5's ``bm25()`` gives the term
    (``rrf_bm25_idf``), or :func:`absent_idf` for a term no episode holds. Words the BM25
    stopwords hint names count 1e-6 (``bm25()``'s floor for a word in half the rows)
    without being counted."""
    terms = json.loads(conn.execute("SELECT fts5_query(?, 'terms', NULL, ?)",
                                    (query, _TOKENIZE)).fetchall()[0][0] or "[]")
    if not terms:
        return QueryEvidence(0.0, 0, 0, 0)
    hint = conn.execute("SELECT value FROM rrf_meta WHERE key = 'bm25_stopwords'").fetchall()
    stop = set(hint[0][0].split()) if hint and isinstance(hint[0][0], str) else set()
    rows = _rows(conn)
    mass, absent, seen = 0.0, 0, set()
    for phrase, term in terms:
        if term in seen:
            continue
        seen.add(term)
        if term in stop:
            mass += 1e-6
            continue
        got = conn.execute("SELECT rrf_bm25_idf(episodes_fts) FROM episodes_fts "
                           "WHERE episodes_fts MATCH ? LIMIT 1", (phrase,)).fetchall()
        if got:
            mass += float(got[0][0])
        else:
            absent += 1
            mass += absent_idf(rows)
    return QueryEvidence(mass, len(seen), absent, rows)


def bm25_evidence(bm25_score: Optional[float], idf_mass: float) -> float:
    """``b``: the hit's ``bm25()`` (negative, lower is better; None: not a BM25 hit) as a
    share of the query's IDF mass, in ``[0, BM25_CAP]``."""
    if bm25_score is None or idf_mass <= 0 or not math.isfinite(bm25_score):
        return 0.0
    return min(max(-bm25_score / idf_mass, 0.0), BM25_CAP)


def _sigmoid(x: float) -> float:
    if x >= 0:
        return 1.0 / (1.0 + math.exp(-x))
    e = math.exp(x)
    return e / (1.0 + e)


def relevance(similarity: Optional[float], bm25_score: Optional[float],
              idf_mass: float) -> float:
    """The absolute relevance of one hit, in ``[0, 1]``: the logistic model of the module
    docstring over its cosine (``similarity``; None: no vector evidence, the BM25-only
    model) and its BM25 evidence (:func:`bm25_evidence`)."""
    b = bm25_evidence(bm25_score, idf_mass)
    if similarity is None or not math.isfinite(similarity):
        c0, cb = BM25_ONLY
        return _sigmoid(c0 + cb * b)
    c0, cc, cb = WITH_VECTOR
    return _sigmoid(c0 + cc * similarity + cb * b)


def check_min_relevance(value: Any, name: str = "min_relevance") -> Optional[float]:
    """``value`` as a floor (a number in ``[0, 1]``) or None; a clear error otherwise."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not (
            0 <= value <= 1):
        from .checks import StoreError

        raise StoreError(f"{name}: must be a number from 0 to 1, got {value!r}")
    return float(value)


def with_relevance(conn: Any, query: str, hits: Sequence[Any]) -> List[Any]:
    """``hits`` (:class:`~sqlite_rrf.results.RecallHit`) with their ``relevance`` set, in
    the same order; the query's IDF mass is read from ``conn`` once."""
    if not hits:
        return []
    mass = query_idf_mass(conn, query).idf_mass
    return [replace(h, relevance=relevance(h.similarity, h.bm25_score, mass)) for h in hits]


def above_floor(hits: Sequence[Any], min_relevance: Optional[float]
                ) -> Tuple[List[Any], Optional[str]]:
    """The hits whose relevance is at least ``min_relevance`` (all of them when it is
    None), in their order, and, when the floor dropped every hit, why the result is
    empty."""
    if min_relevance is None or not hits:
        return list(hits), None
    kept = [h for h in hits if h.relevance is not None and h.relevance >= min_relevance]
    if kept:
        return kept, None
    best = max((h.relevance for h in hits if h.relevance is not None), default=0.0)
    return [], (f"nothing relevant enough: {len(hits)} hit(s) below min_relevance "
                f"{min_relevance:g} (the best {best:.3f})")
