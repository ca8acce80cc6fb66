"""The fusion profiles, each described once: :data:`TABLE`.

A profile is how the recall statement fuses the candidate lists; its SQL is
``sql/recall/profile_<name>.sql`` and its default ``k`` is in
:data:`sqlite_rrf.core.statements.K_DEFAULTS`. Everything else said about a profile is
written from this table:

- :data:`sqlite_rrf.core.statements.PROFILES` (the names, in this order);
- the command line's ``--profile`` help (``sqlite_rrf.cli.PROFILE_SUMMARIES``);
- the list of profiles in ``sql/recall/header.sql``, the comment every recall
  statement starts with (``python -m sqlite_rrf.core.statements --write`` rewrites it:
  :func:`sqlite_rrf.core.statements.profiles_comment`);
- the table of docs/profiles.md (``tools/profile_docs.py``, run by cog).

``make profile-docs`` rewrites the last two, and ``make lint`` fails when they are stale.
"""

from __future__ import annotations

from typing import NamedTuple, Optional, Tuple


class Profile(NamedTuple):
    """One fusion profile."""

    #: The name: ``--profile NAME``, ``Store.recall(profile=NAME)``, ``profile_<name>.sql``.
    name: str
    #: What it does, in a line of plain words (no formula, no file name: the command
    #: line's help says it, and the wheel ships no docs).
    summary: str
    #: Its score, as a formula (Markdown: docs/profiles.md's table).
    score: str
    #: Where it comes from (Markdown: docs/profiles.md's table).
    source: str
    #: What the RRF constant ``k`` is used for: ``""`` the whole score, a phrase for a
    #: part of it, None nothing.
    k_use: Optional[str] = ""


#: The fusion profiles, in the order the documentation lists them.
TABLE: Tuple[Profile, ...] = (
    Profile(
        "hybrid",
        "the cosine and the BM25 score, each relative to this query's best, half and half; "
        "recency, use and importance only close part of the gap to the top",
        "rel + (1 − rel)·g, rel = α·cos/cos_best + (1−α)·bm25/bm25_best",
        "this project (see below); Bruch, Gai & Ingber, TOIS 2023",
        k_use="for t only",
    ),
    Profile(
        "memory",
        "RRF of BM25 and vector, with recency and use only breaking near-ties",
        "RRF over BM25 and vector × (1 + m·t) + importance boost",
        "this project (see below)",
    ),
    Profile(
        "rrf",
        "weighted RRF of all four lists (BM25, vector, recency, access)",
        "RRF over all four lists + importance boost",
        "DESIGN.md; Cormack, Clarke & Büttcher, SIGIR 2009",
    ),
    Profile(
        "decay",
        "four-list RRF boosted for recent episodes, times the episodes' lifecycle multipliers",
        "four-list RRF × (1 + 0.3·e^(−age_days/30)) × lifecycle + importance boost",
        "the decay-ranked memory systems sqlite-rrf replaces",
    ),
    Profile(
        "weighted",
        "a blend of relevance (cosine and normalised BM25), an age decay and use",
        "0.5·relevance + 0.3·e^(−ln2·age_days/30) + 0.2·(access_count+1)/(max_count+1)",
        "the min-max score blend RRF replaces",
        k_use=None,
    ),
    Profile(
        "convex",
        "alpha times the normalised cosine plus (1 - alpha) times the normalised BM25 score",
        "α·cos_norm + (1−α)·bm25_norm",
        'Bruch, Gai & Ingber, "An Analysis of Fusion Functions for Hybrid Retrieval", TOIS 2023',
        k_use=None,
    ),
)

#: The profiles' names, in :data:`TABLE`'s order.
NAMES: Tuple[str, ...] = tuple(p.name for p in TABLE)
