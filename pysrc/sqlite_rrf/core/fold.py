"""The fold of near-duplicates, which the recall statement makes (``sql/recall/top.sql``,
7a and 7b): the thresholds it is written with, defined here once.

The statement ranks each episode on its own, then, with ``:collapse`` (the default),
folds the hits that say the same thing into one slot:

- two hits are the **same text** when their ``content_key`` (the digest of
  :func:`sqlite_rrf.core.dedupe.normalise`'s normal form) is equal;
- two hits are **near-duplicates** when both have a usable embedding (the recall has a
  query vector), their embeddings' cosine is at least :data:`COLLAPSE_COSINE`, and their
  words are the same set: a changed number or name is not a duplicate, it may be an
  update. A word here is a run of letters, digits or ``_`` (ASCII case folded), not one of
  :data:`STOPWORDS`, of three characters or with a digit, cut to its first
  ``max(4, length - 2)`` characters (``stored`` and ``store`` are one word).

A hit that duplicates a better-ranked one joins that one's group; each group fills one
slot, its best-ranked member's, with the newest member (``created_at``; a tie keeps the
better-ranked), whose ``duplicates`` says how many others it stands for and
``duplicate_ids`` names them (newest first). The freed slots are filled from further
down: the statement ranks ``2 * limit + 10`` rows before the fold. The slot's final
``score`` is its best member's, so the hits come out in score order.

There is no "newest first" reorder of hits that are merely about the same thing: it
cost recall on conversational memory (docs/evaluation.md); a correction that should
hide the fact it corrects is stored with ``replaces``.
"""

from __future__ import annotations

__all__ = ["COLLAPSE_COSINE", "STOPWORDS"]

#: Two hits with usable embeddings are near-duplicates (one slot) when their cosine is
#: at least this and their terms are the same.
COLLAPSE_COSINE = 0.95

#: Words that say nothing about a text's subject (English function words): not counted
#: when the fold compares two texts' words.
STOPWORDS = frozenset(
    """
a about above after again all also am an and any are as at be been before being below
between both but by can could did do does doing down during each few for from further
had has have having he her here hers him his how i if in into is it its itself just me
more most my no nor not now of off on once only or other our ours out over own same she
should so some such than that the their theirs them then there these they this those
through to too under until up very was we were what when where which while who whom why
will with would you your yours rather instead
""".split()
)
