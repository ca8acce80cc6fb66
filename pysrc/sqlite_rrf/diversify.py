"""After the ranking: no duplicates, the latest fact first.

The recall statement ranks each episode on its own; it cannot see that two hits say the
same thing. :meth:`sqlite_rrf.store.Store.recall` asks it for :func:`candidates` rows
and passes them through :func:`diversify`, which

1. **collapses near-duplicates**: hits that are the same text (:func:`sqlite_rrf.dedupe.
   normalise`), or whose embeddings have cosine >= :data:`COLLAPSE_COSINE` and which
   have the same content words (:func:`content_words`: a changed number or name is
   not a duplicate, it may be an update), fill one slot, the best-ranked one's, with
   the newest of them (``created_at``; a tie keeps the better-ranked). That hit's
   ``duplicates`` says how many others it stands for and ``duplicate_ids`` names them.
   The freed slots are filled from further down.
2. **puts the newest fact first**: a newer hit *supersedes* a better-ranked older one
   when they are about the same thing (their embeddings' cosine >= :data:`TOPIC_COSINE`),
   their scores nearly tie (the lower at least ``1 - NEAR_TIE`` of the higher), and the
   newer hit has every word of the query that the older one has (:func:`query_terms`,
   matched as in :func:`has_term`): a fact about another painting of the same painter
   does not supersede the one the query names. Hits joined by that relation
   (transitively) keep the slots they hold and fill them newest first. So a correction
   ranks before the fact it corrects, however close to 1 both are, and nothing else
   moves.
3. cuts the list to ``limit``.

Hits without a stored embedding (no model) are compared by their words instead: the
share of the shorter hit's distinct words (case folded) that the other hit has is the
cosine's stand-in for step 2 (same threshold); step 1 then collapses equal texts only.

After this step the hits are not always in score order: a hit's ``score`` stays the
statement's score of that episode.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Dict, List, Sequence

import apsw
import numpy as np

from .dedupe import normalise
from .results import RecallHit

__all__ = [
    "COLLAPSE_COSINE",
    "NEAR_TIE",
    "STOPWORDS",
    "TOPIC_COSINE",
    "candidates",
    "content_words",
    "diversify",
    "has_term",
    "query_terms",
]

#: Two hits are near-duplicates (one slot) when their embeddings' cosine is at least
#: this, or their texts are the same (:func:`sqlite_rrf.dedupe.normalise`).
COLLAPSE_COSINE = 0.95
#: Two hits are about the same thing when their embeddings' cosine is at least this.
TOPIC_COSINE = 0.55
#: Two hits' scores nearly tie when the lower is at least ``1 - NEAR_TIE`` of the higher.
NEAR_TIE = 0.35

_WORD = re.compile(r"\w+")

#: Words of a query that say nothing about its subject (English function words).
STOPWORDS = frozenset(
    """
a about above after again all also am an and any are as at be been before being below
between both but by can could did do does doing down during each few for from further
had has have having he her here hers him his how i if in into is it its itself just me
more most my no nor not now of off on once only or other our ours out over own same she
should so some such than that the their theirs them then there these they this those
through to too under until up very was we were what when where which while who whom why
will with would you your yours rather instead also
""".split()
)


def query_terms(query: str) -> List[str]:
    """The words of ``query`` that say what it is about: case folded, at least three
    characters, not in :data:`STOPWORDS`."""
    return sorted(
        {w for w in _WORD.findall(query.casefold()) if len(w) >= 3 and w not in STOPWORDS}
    )


def _stem(word: str) -> str:
    """A crude stem: the first ``max(4, len - 2)`` characters."""
    return word[: max(4, len(word) - 2)]


def content_words(text: str) -> frozenset:
    """What a text says, as a set: its words (case folded) that are not
    :data:`STOPWORDS` and have three characters or a digit, each cut to its first
    ``max(4, len - 2)`` characters (``stored`` and ``store`` are one word)."""
    return frozenset(
        _stem(w)
        for w in _WORD.findall(text.casefold())
        if w not in STOPWORDS and (len(w) >= 3 or any(c.isdigit() for c in w))
    )


def has_term(text: str, term: str) -> bool:
    """Whether ``text`` (case folded) has ``term``: its first ``max(4, len - 2)``
    characters anywhere in it, a crude stemming (``colors`` finds ``color``, ``keep``
    finds ``keeping``, ``password`` finds ``1Password``)."""
    return _stem(term) in text


def candidates(limit: int) -> int:
    """How many rows the statement is asked for so that ``limit`` remain after
    :func:`diversify`: twice ``limit`` and 10 more (at most 2**31 - 1)."""
    return min(2 * limit + 10, 2**31 - 1)


def _vectors(conn: apsw.Connection, rowids: Sequence[int]) -> Dict[int, np.ndarray]:
    """The unit-norm stored embeddings of ``rowids`` (those that have a usable one)."""
    out: Dict[int, np.ndarray] = {}
    for i in range(0, len(rowids), 500):
        chunk = list(rowids[i : i + 500])
        rows = conn.execute(
            f"SELECT rowid, embedding FROM episodes_vectors WHERE rowid IN "
            f"({','.join('?' * len(chunk))})",
            chunk,
        ).fetchall()
        for rowid, emb in rows:
            if not isinstance(rowid, int) or not isinstance(emb, bytes) or not emb or len(emb) % 4:
                continue
            v = np.frombuffer(emb, "<f4").astype(np.float64)
            n = float(np.linalg.norm(v))
            if np.isfinite(v).all() and n > 0:
                out[rowid] = v / n
    return out


def _likeness(hits: Sequence[RecallHit], vecs: Dict[int, np.ndarray]) -> np.ndarray:
    """The hits' pairwise likeness: the cosine of their embeddings, or, for a pair
    without two embeddings of one size, the share of the smaller word set (case folded)
    that the other has."""
    n = len(hits)
    dims = {v.shape[0] for v in vecs.values()}
    dim = dims.pop() if len(dims) == 1 else None
    has = np.array([dim is not None and h.rowid in vecs for h in hits])
    like = np.full((n, n), np.nan)
    if has.any():
        idx = np.flatnonzero(has)
        m = np.stack([vecs[hits[k].rowid] for k in idx.tolist()])
        like[np.ix_(idx, idx)] = m @ m.T
    if not has.all():
        words = [set(_WORD.findall(h.content.casefold())) for h in hits]
        for i in range(n):
            for j in range(n):
                if has[i] and has[j]:
                    continue
                a, b = words[i], words[j]
                like[i, j] = len(a & b) / min(len(a), len(b)) if a and b else 0.0
    return like


def _newest(hits: Sequence[RecallHit], members: Sequence[int]) -> List[int]:
    """``members`` (positions) newest first; a tie keeps the better rank first."""
    return sorted(members, key=lambda k: (-hits[k].created_at, k))


#: At most this many of the statement's rows are compared (the rest follow unchanged).
WINDOW = 1000


def diversify(
    conn: apsw.Connection, hits: Sequence[RecallHit], limit: int, query: str = ""
) -> List[RecallHit]:
    """``hits`` (the statement's ranking for ``query``, best first) with near-duplicates
    collapsed and the newest of each group of superseding hits first, cut to ``limit``
    (see the module's docstring)."""
    rest = list(hits[WINDOW:])
    hits = list(hits[:WINDOW])
    if not hits:
        return rest[:limit]
    n = len(hits)
    vecs = _vectors(conn, [h.rowid for h in hits])
    like = _likeness(hits, vecs)
    has = np.array([h.rowid in vecs for h in hits])
    norm = [normalise(h.content) for h in hits]
    words = [content_words(h.content) for h in hits]

    # 1. near-duplicates: a hit joins the group of the best-ranked earlier hit it
    #    duplicates (the same text, or both embedded, cosine >= COLLAPSE_COSINE and the
    #    same content words)
    same_text: Dict[str, int] = {}
    group_of = list(range(n))
    for i in range(n):
        first = same_text.setdefault(norm[i], i)
        dup = [first] if first != i else []
        if has[i]:
            near = [
                int(j)
                for j in np.flatnonzero(has[:i] & (like[i, :i] >= COLLAPSE_COSINE))
                if words[int(j)] == words[i]
            ]
            if near:
                dup.append(near[0])
        if dup:
            group_of[i] = group_of[min(dup)]
    groups: Dict[int, List[int]] = {}
    for i in range(n):
        groups.setdefault(group_of[i], []).append(i)
    kept: List[int] = []
    merged: Dict[int, List[int]] = {}
    for head in sorted(groups):
        order = _newest(hits, groups[head])
        kept.append(order[0])
        merged[order[0]] = order[1:]

    # 2. same thing, near tie: join the kept hits (transitively), then fill each
    #    group's slots newest first
    parent = list(range(len(kept)))

    def find(a: int) -> int:
        while parent[a] != a:
            parent[a] = parent[parent[a]]
            a = parent[a]
        return a

    scores = np.array([hits[k].score for k in kept], dtype=np.float64)
    topic = like[np.ix_(kept, kept)] >= TOPIC_COSINE
    hi = np.maximum.outer(scores, scores)
    lo = np.minimum.outer(scores, scores)
    tie = np.where(hi > 0, lo >= (1 - NEAR_TIE) * hi, hi == lo)
    terms = query_terms(query)
    said = [frozenset(t for t in terms if has_term(hits[k].content.casefold(), t)) for k in kept]
    for a, b in zip(*np.nonzero(np.triu(topic & tie, 1))):
        older, newer = (a, b) if hits[kept[a]].created_at <= hits[kept[b]].created_at else (b, a)
        if said[older] <= said[newer]:
            parent[find(int(b))] = find(int(a))
    slots: Dict[int, List[int]] = {}
    for a in range(len(kept)):
        slots.setdefault(find(a), []).append(a)
    order = list(kept)
    for members in slots.values():
        if len(members) > 1:
            for slot, k in zip(members, _newest(hits, [kept[a] for a in members])):
                order[slot] = k

    out: List[RecallHit] = []
    for k in order[:limit]:
        h = hits[k]
        if merged[k]:
            h = dataclasses.replace(
                h, duplicates=len(merged[k]), duplicate_ids=tuple(hits[o].id for o in merged[k])
            )
        out.append(h)
    return (out + rest)[:limit]
