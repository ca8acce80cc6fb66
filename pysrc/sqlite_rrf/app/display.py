"""Values shown to people and agents: a time (:func:`iso_time`, :func:`human_age`,
:func:`when`, :func:`noted`: the one way every front-end says a time and an age), a
recall hit's ranks and score in words (:func:`ranks_in_words`, :func:`explain_in_words`)
and text that cannot forge structure in an agent's context (:func:`flatten`,
:func:`escape`, :func:`code`)."""

from __future__ import annotations

import re
import unicodedata

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Mapping, Optional

_AGE_UNITS = (
    ("year", 365 * 86400),
    ("month", 30 * 86400),
    ("day", 86400),
    ("hour", 3600),
    ("minute", 60),
)


def iso_time(ms: Optional[int]) -> Optional[str]:
    """``ms`` (ms since the epoch) as an ISO 8601 UTC time to the second,
    ``2026-11-24T09:30:00Z``; None for None."""
    if ms is None:
        return None
    import datetime as dt

    t = dt.datetime.fromtimestamp(ms // 1000, dt.timezone.utc)
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


#: What :func:`human_age` says of a time that is not an integer (another client's value).
UNKNOWN_AGE = "at an unknown time"


def human_age(ms: Any, now_ms: Optional[int] = None) -> Optional[str]:
    """How long ago ``ms`` (ms since the epoch) was at ``now_ms`` (default: now), in
    words: ``just now`` (under a minute), ``5 minutes ago``, ``1 hour ago``,
    ``3 days ago``, ``2 months ago`` (30 days), ``1 year ago`` (365 days), the largest
    whole unit; a time after ``now_ms`` is ``in 3 days``. None for None;
    :data:`UNKNOWN_AGE` for a value that is not an integer (another client wrote it). The
    command line, the hook, the MCP server and the HTTP server all say ages with it."""
    if ms is None:
        return None
    if isinstance(ms, bool) or not isinstance(ms, int):
        return UNKNOWN_AGE
    if now_ms is None:
        import time

        now_ms = int(time.time() * 1000)
    seconds = abs(now_ms - ms) // 1000
    for name, length in _AGE_UNITS:
        n = seconds // length
        if n >= 1:
            words = f"{n} {name}{'s' if n > 1 else ''}"
            return f"in {words}" if ms > now_ms else f"{words} ago"
    return "just now"


def when(ms: Any, now_ms: Optional[int] = None) -> str:
    """A time for people and agents: its ISO 8601 UTC time and how long ago,
    ``2026-11-23T14:02:00Z (3 days ago)`` (:func:`iso_time`, :func:`human_age`); ``-`` for
    None, :data:`UNKNOWN_AGE` for a value that is not an integer."""
    if ms is None:
        return "-"
    if isinstance(ms, bool) or not isinstance(ms, int):
        return UNKNOWN_AGE
    return f"{iso_time(ms)} ({human_age(ms, now_ms)})"


def noted(
    created_ms: Optional[int], confirmed_ms: Optional[int], now_ms: Optional[int] = None
) -> str:
    """When a fact was noted, for people and agents: ``2026-11-24T09:30:00Z (5 days ago)``;
    a fact stored again later (``confirmed_ms``, ``episodes.confirmed_at``) keeps its
    first date: ``2026-11-24T09:30:00Z (first noted 5 days ago, confirmed just now)``.
    ``-`` for no time (as :func:`when`)."""
    if not (isinstance(created_ms, int) and isinstance(confirmed_ms, int)) or (
        confirmed_ms <= created_ms
    ):
        return when(created_ms, now_ms)
    first, again = human_age(created_ms, now_ms), human_age(confirmed_ms, now_ms)
    return f"{iso_time(created_ms)} (first noted {first}, confirmed {again})"


#: What :func:`escape` rewrites: ``<``, ``>``, and an ``&`` that starts a character
#: reference (``&lt;``, ``&#60;``, ``&#x3c;``), so that the escaping can be undone.
_ESCAPES = {"<": "&lt;", ">": "&gt;", "&": "&amp;"}
_TO_ESCAPE = re.compile(r"[<>]|&(?=#[0-9]+;|#[xX][0-9a-fA-F]+;|[A-Za-z][A-Za-z0-9]*;)")


def ranks_in_words(
    bm25_rank: Any, vec_rank: Any, recency_rank: Any, access_rank: Any, similarity: Any
) -> str:
    """A hit's rank in each list, ``bm25 #1 · vector #3 (cos 0.452) · recency #12 ·
    access -`` (``-``: not in that list), as the CLI's ``--explain`` and Datasette show
    it."""

    def rank(label: str, r: Any, extra: str = "") -> str:
        return f"{label} #{r}{extra}" if r is not None else f"{label} -"

    cos = f" (cos {similarity:.3f})" if isinstance(similarity, float) else ""
    return " · ".join(
        [
            rank("bm25", bm25_rank),
            rank("vector", vec_rank, cos),
            rank("recency", recency_rank),
            rank("access", access_rank),
        ]
    )


def explain_in_words(explain: Mapping[str, Any], score: Any, digits: int = 5) -> str:
    """How a hit's score was made, from the statement's ``explain`` object: for
    ``hybrid`` the blend of the cosine and the BM25 score (each relative to the query's
    best, docs/profiles.md) and the recency/use/importance nudge; for the RRF profiles
    each list's contribution (weight/(k+rank)), the boost and a multiplier. Totals are
    shown to ``digits`` decimals, the parts to one fewer."""
    t, f = digits, max(digits - 1, 1)
    total = f" = {score:.{t}f}" if isinstance(score, (int, float)) else ""
    r = explain.get("relevance")
    if isinstance(r, dict):  # 'hybrid'
        a = r.get("alpha") or 0.0
        cos, b = r.get("cosine") or 0.0, r.get("bm25") or 0.0
        blend = a * cos + (1 - a) * b
        g = (explain.get("recency_access_importance") or {}).get("nudge", 0.0)
        return (
            f"blend {a:g}·cos/best {cos:.{f}f} + {1 - a:g}·bm25/best {b:.{f}f} = "
            f"{blend:.{t}f}; + (1 − {blend:.{t}f}) × nudge {g:.{f}f} "
            f"(recency/use/importance){total}"
        )
    parts, mult = [], ""
    for name, e in explain.items():
        if not isinstance(e, dict):
            parts.append(f"{name} {e:.{f}g}" if isinstance(e, float) else f"{name} {e}")
        elif "multiplier" in e:
            mult = f" × {e['multiplier']:.{t}f} ({name.replace('_', '/')})"
        elif "rank" in e:
            parts.append(f"{name} {e['contribution']:.{t}f} = {e['weight']:g}/(k+{e['rank']:g})")
        elif "boost" in e:
            parts.append(f"{name} {e['boost']:.{t}f} = boost")
    body = " + ".join(parts)
    return f"({body}){mult}{total}" if mult else f"{body}{total}"


def flatten(text: str) -> str:
    """``text`` on one line: every control character (Unicode category Cc: line breaks,
    tabs, escapes, NULs) and line or paragraph separator made a space, runs of white
    space made one space, the ends stripped."""
    text = "".join(" " if unicodedata.category(ch) == "Cc" else ch for ch in text)
    return " ".join(text.split())


def escape(text: str) -> str:
    """``text`` with no tag-like text: ``<`` → ``&lt;``, ``>`` → ``&gt;``, and ``&`` →
    ``&amp;`` where it starts a character reference. A Markdown viewer shows the
    original text; a model reads ``&lt;/context&gt;`` as text, not as a tag."""
    return _TO_ESCAPE.sub(lambda m: _ESCAPES[m.group(0)[0]], text)


def code(text: str) -> str:
    """``text`` (flattened and escaped) as a Markdown code span that no backtick in it can
    close: fenced by one backtick more than its longest run of backticks."""
    text = escape(flatten(text))
    longest = max((len(r) for r in re.findall(r"`+", text)), default=0)
    fence = "`" * (longest + 1)
    if not text or text[0] == "`" or text[-1] == "`":
        text = f" {text} "
    return f"{fence}{text}{fence}"
