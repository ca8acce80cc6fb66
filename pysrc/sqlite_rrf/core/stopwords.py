"""The BM25 stopwords (``sql/stopwords.sql``) and when the store recomputes them.

The recall statement drops from a query's scan the indexed terms found in at least half
of the episodes (the hint in ``rrf_meta``). The hint is recomputed by one statement
(:func:`compute_stopwords`); :class:`StopwordsRefresh` decides when: after writes that moved the
episode count by :data:`STOPWORDS_DRIFT` since the last computation, or when the count
reached :data:`MIN_ROWS` without one.
"""

from __future__ import annotations

import re
from typing import Any, Callable, List, Optional

import apsw

from .sql_files import read_sql
from .sqlite import meta, transaction

#: The stopwords are recomputed when the episode count has moved by this share
#: since they were last computed.
STOPWORDS_DRIFT = 0.10
#: Below this many episodes there are no stopwords: ``sql/stopwords.sql``'s default
#: ``:min_rows``, read from there (the one place it is written).


def _min_rows() -> int:
    found = re.search(r"coalesce\(:min_rows, (\d+)\)", read_sql("stopwords.sql"))
    if found is None:
        raise RuntimeError("stopwords.sql: no default for :min_rows (coalesce(:min_rows, N))")
    return int(found.group(1))


MIN_ROWS = _min_rows()


def read_stopwords(conn: apsw.Connection) -> List[str]:
    """The stopwords as last computed (empty when never computed, or below
    :data:`MIN_ROWS` episodes)."""
    return str(meta(conn, "bm25_stopwords") or "").split()


def compute_stopwords(conn: apsw.Connection, min_rows: Optional[int] = None) -> None:
    """Recompute the stopwords (one statement, so it is atomic). IMMEDIATE: take the
    write lock first (the busy timeout applies), so that a writer in another process
    cannot make the read-then-write statement fail."""
    with transaction(conn):
        conn.execute(read_sql("stopwords.sql"), {"min_rows": min_rows})


def stale(count: int, computed_at: Any, drift: float = STOPWORDS_DRIFT) -> bool:
    """True when stopwords computed at ``computed_at`` episodes (None: never) are out of
    date for ``count`` episodes."""
    if computed_at is None:
        return count >= MIN_ROWS
    return isinstance(computed_at, int) and abs(count - computed_at) >= drift * max(
        computed_at, MIN_ROWS
    )


class StopwordsRefresh:
    """Counts a connection's written or deleted episodes and refreshes the stopwords
    when they are :func:`stale`. Counting the episodes costs a scan of the index, so it
    is done only once this process alone could have moved the count enough."""

    def __init__(self, conn: apsw.Connection) -> None:
        self.conn = conn
        self.writes = 0  # episodes written since the stopwords were checked
        self.check_due = 0  # check at the first write

    def refreshed(self) -> None:
        """The stopwords were just recomputed: count from zero again."""
        self.writes = 0

    def wrote(
        self,
        n: int,
        count: Callable[[], int],
        refresh: Callable[[], Any],
        drift: float = STOPWORDS_DRIFT,
    ) -> None:
        """Count ``n`` written or deleted episodes; when enough have been, compare the
        episode count (``count()``) with the one the stopwords were computed at, and
        refresh them (``refresh()``, which calls :meth:`refreshed`) if :func:`stale`."""
        self.writes += n
        if self.writes < self.check_due:
            return
        try:
            episodes = count()
            if stale(episodes, meta(self.conn, "bm25_stopwords_rows"), drift):
                refresh()
        except apsw.Error:
            # The caller's write has committed; the stopwords only make search faster
            # (e.g. another process held the lock past the busy timeout): retry at the
            # next write rather than fail this one.
            return
        self.writes = 0
        # the next check when this process alone could have moved the count enough
        self.check_due = max(16, int(drift * max(episodes, MIN_ROWS)))
