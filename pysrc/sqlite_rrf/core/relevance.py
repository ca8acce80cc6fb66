"""Absolute relevance: how likely a recalled episode is to be what the query is about,
on a scale that means the same for every query and every memory.

The fused ``score`` ranks the hits of one query; it says nothing across queries (the
default profile divides by the query's best hit, so the top hit of any query, even
"hi", looks like a perfect match). :func:`relevance` gives each hit a number in
``[0, 1]`` made of two pieces of evidence that do not depend on the other hits:

- the **cosine** of the hit's embedding with the query's (``RecallHit.similarity``);
- the **BM25 evidence** ``b = -bm25 / idf_mass * n / (n + TERMS_PRIOR)``: the hit's FTS5
  ``bm25()`` (which sums, over the query's terms found in the hit, the term's IDF times a
  term-frequency factor that is 1 for one occurrence in a text of average length) divided
  by the query's **IDF mass**, the sum of the IDFs of all of its n distinct terms
  (:func:`query_idf_mass`). A term that no episode holds counts with the IDF it would have
  if one did (``ln((N - 0.5) / 1.5)``, N the episodes): a query whose rare words the memory
  has never seen ("Shinjuku", "sourdough") cannot be well matched, whatever its best hit.
  So ``-bm25 / idf_mass`` is about the share of the query's informative words that the hit
  holds, on no scale of the memory's own (a memory of four episodes, whose every IDF FTS5
  floors at 1e-6, has the same shares). ``n / (n + TERMS_PRIOR)`` (a third for one word,
  half for two) keeps a short prompt ("hi", which the stemmer finds in every "his") from
  being a full match.

They are combined by a logistic model, ``relevance = 1 / (1 + exp(-(c0 + c_cos * cosine +
c_bm25 * min(b, 2))))``, with coefficients :data:`WITH_VECTOR`; when the hit has no
cosine (no model, or an episode without an embedding) by :data:`BM25_ONLY`. The
coefficients were fitted on development data only; ``docs/python.md`` ("Relevance and the
floor") says on what and how, and ``tests/bench/bench_silence.py`` measures the floor.

The recall statement computes the same number for each hit it returns
(``sql/recall/top.sql``, 7c, written from these constants), and applies the policy there
(7d): with ``:min_relevance``, a hit is shown only when its relevance reaches that floor
and is at least ``:min_share`` of the best hit's. This module's :func:`relevance` is the
reference the statement is tested against. :data:`DEFAULT_MIN_RELEVANCE` is the floor
the prompt hook and the MCP ``recall`` use by default. :meth:`Store.recall
<sqlite_rrf.store.Store.recall>` itself has no policy unless given ``min_relevance``.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any, Optional, Tuple

#: The floor of the prompt hook and of MCP ``recall`` (``--min-relevance`` / the tool's
#: ``min_relevance`` change it): a recall none of whose hits reaches it shows nothing.
DEFAULT_MIN_RELEVANCE = 0.17

#: ``(c0, c_cos, c_bm25)`` of the logistic model for a hit with a cosine.
WITH_VECTOR: Tuple[float, float, float] = (-3.79, 6.35, 4.07)
#: ``(c0, c_bm25)`` of the logistic model for a hit without one (no model).
BM25_ONLY: Tuple[float, float] = (-2.55, 7.08)
#: A query of n terms has its BM25 share weighed by n / (n + TERMS_PRIOR).
TERMS_PRIOR = 2.0
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
    got = conn.execute("SELECT value FROM rrf_meta WHERE key = 'bm25_stopwords_rows'").fetchall()
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
    terms = json.loads(
        conn.execute("SELECT fts5_query(?, 'terms', NULL, ?)", (query, _TOKENIZE)).fetchall()[0][0]
        or "[]"
    )
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
        got = conn.execute(
            "SELECT rrf_bm25_idf(episodes_fts) FROM episodes_fts "
            "WHERE episodes_fts MATCH ? LIMIT 1",
            (phrase,),
        ).fetchall()
        if got:
            mass += float(got[0][0])
        else:
            absent += 1
            mass += absent_idf(rows)
    return QueryEvidence(mass, len(seen), absent, rows)


def bm25_evidence(bm25_score: Optional[float], idf_mass: float, terms: int) -> float:
    """``b``: the hit's ``bm25()`` (negative, lower is better; None: not a BM25 hit) as a
    share of the query's IDF mass, weighed by ``terms / (terms + TERMS_PRIOR)``, in
    ``[0, BM25_CAP]``."""
    if bm25_score is None or idf_mass <= 0 or terms <= 0 or not math.isfinite(bm25_score):
        return 0.0
    share = -bm25_score / idf_mass * terms / (terms + TERMS_PRIOR)
    return min(max(share, 0.0), BM25_CAP)


def _sigmoid(x: float) -> float:
    if x >= 0:
        return 1.0 / (1.0 + math.exp(-x))
    e = math.exp(x)
    return e / (1.0 + e)


def relevance(
    similarity: Optional[float], bm25_score: Optional[float], idf_mass: float, terms: int
) -> float:
    """The absolute relevance of one hit, in ``[0, 1]``: the logistic model of the module
    docstring over its cosine (``similarity``; None: no vector evidence, the BM25-only
    model) and its BM25 evidence (:func:`bm25_evidence`; ``idf_mass`` and ``terms`` are
    the query's, :func:`query_idf_mass`)."""
    b = bm25_evidence(bm25_score, idf_mass, terms)
    if similarity is None or not math.isfinite(similarity):
        c0, cb = BM25_ONLY
        return _sigmoid(c0 + cb * b)
    c0, cc, cb = WITH_VECTOR
    return _sigmoid(c0 + cc * similarity + cb * b)


def check_min_relevance(value: Any, name: str = "min_relevance") -> Optional[float]:
    """``value`` as a floor (a number in ``[0, 1]``) or None; a clear error otherwise."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not (0 <= value <= 1):
        from .validate import StoreError

        raise StoreError(f"{name}: must be a number from 0 to 1, got {value!r}")
    return float(value)
