"""The Store's upkeep: the BM25 stopwords, the full-text index's merging, the pending
content keys and sign codes, and the 'knn' pool's index.

After each of its commits a writing Store does the upkeep that is due without waiting
for the lock (:meth:`Maintenance._upkeep_after_commit`); :meth:`Maintenance.maintain`
(``sqlite-rrf maintain``) does all of it, waiting up to the busy timeout.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional

import apsw

from ..core import dedupe as _dedupe, knn
from ..core.sqlite import patience, transaction
from ..core.stopwords import STOPWORDS_DRIFT, compute_stopwords, read_stopwords, stale
from ..core.validate import StoreError
from .codes import Codes


class Maintenance(Codes):
    """The indexes' and hints' upkeep."""

    # ---- BM25 stopwords (sql/stopwords.sql; the module stopwords) ----

    #: The stopwords are recomputed when the episode count has moved by this share
    #: since they were last computed.
    STOPWORDS_DRIFT = STOPWORDS_DRIFT

    @property
    def stopwords(self) -> List[str]:
        """The terms the recall statement drops from queries: indexed terms (porter
        stems) found in at least half of the episodes, as last computed. Empty below
        :data:`sqlite_rrf.core.stopwords.MIN_ROWS` episodes."""
        return read_stopwords(self.conn)

    def refresh_stopwords(self, min_rows: Optional[int] = None) -> List[str]:
        """Recompute the BM25 stopwords now (``sql/stopwords.sql``; one statement,
        so it is atomic) and return them. The store does this by itself after writes
        that move the episode count by :attr:`STOPWORDS_DRIFT`; ``min_rows``
        (default :data:`sqlite_rrf.core.stopwords.MIN_ROWS`) is the count below which there
        are none."""
        compute_stopwords(self.conn, min_rows)
        self._stopwords.refreshed()
        return self.stopwords

    def _maybe_refresh_stopwords(self, episodes_written: int) -> None:
        """Count ``episodes_written`` (written or deleted by this connection) and, when
        the count is due for a check, refresh the stopwords if the episode count has moved
        by :attr:`STOPWORDS_DRIFT` (or reached :data:`sqlite_rrf.core.stopwords.MIN_ROWS`
        without them) since they were computed
        (:class:`sqlite_rrf.core.stopwords.StopwordsRefresh`). The first call always checks."""
        self._stopwords.wrote(
            episodes_written, self.count, self.refresh_stopwords, self.STOPWORDS_DRIFT
        )

    #: How long the maintenance after a write waits for the write lock (ms): not at all.
    #: What it cannot do now is done after a later write, or by :meth:`maintain`.
    MAINTENANCE_PATIENCE_MS = 0

    def _upkeep_after_commit(self, episodes_written: int) -> None:
        """The writer's maintenance, after a commit of this connection that wrote or
        deleted ``episodes_written`` episodes (0 for a migration's), never waiting for the
        lock: :meth:`_maybe_refresh_stopwords`, then compute and pack the sign codes other
        clients left pending (:meth:`fill_codes`, one indexed read when there are none). A
        reader's open never does this."""
        # The write has committed: nothing here may make it look as if it had not. Any
        # failure (the lock busy, an interrupt meant for the write, a full disk) leaves the
        # upkeep for a later write or maintain(); what it leaves is pending, scored exactly.
        with patience(self.conn, self.MAINTENANCE_PATIENCE_MS, self._busy_timeout_ms):
            try:
                self._maybe_refresh_stopwords(episodes_written)
            except apsw.Error:
                pass
            try:
                self.fill_codes()
            except apsw.Error:
                pass

    def maintain(self) -> Dict[str, Any]:
        """Do the upkeep that opening a Store never does, waiting for the write lock up to
        the busy timeout: compute the sign codes other clients left pending and pack loose
        codes into blocks (:meth:`compute_codes`, :meth:`pack_codes`), recompute the BM25
        stopwords when they are out of date (:func:`sqlite_rrf.core.stopwords.stale`), and merge
        the full-text index's segments (FTS5's ``merge``, :attr:`MERGE_PAGES` pages per
        transaction) until there is nothing left to merge. The Store's writes do the same
        after they commit, when the lock is free; ``sqlite-rrf maintain DB`` runs this.
        Returns what was done: ``codes_filled``, ``codes_packed``, ``stopwords_refreshed``,
        ``fts_merges`` (transactions that merged something)."""
        if self.readonly:
            raise StoreError(
                f"{self.path} is read-only (read-only media or permissions): "
                "there is nothing maintain can do"
            )
        packed_before = self._packed()
        filled = self.compute_codes()
        self.pack_codes()
        packed = self._packed() - packed_before
        refreshed = stale(self.count(), self.meta("bm25_stopwords_rows"), self.STOPWORDS_DRIFT)
        if refreshed:
            self.refresh_stopwords()
        merges = 0
        while True:
            with transaction(self.conn):
                before = self.conn.total_changes()
                self._merge_index()
                # FTS5: two or more changes mean the merge did some work
                worked = self.conn.total_changes() - before >= 2
            if not worked:
                break
            merges += 1
        return {
            "codes_filled": filled,
            "codes_packed": packed,
            "stopwords_refreshed": refreshed,
            "fts_merges": merges,
        }

    #: Work done on the FTS5 index's segments after each write (FTS5's 'merge' command,
    #: in pages): the index does no merging by itself (migration 0006).
    MERGE_PAGES = 500

    def _merge_index(self) -> None:
        """Merge some of the full-text index's segments, in the caller's transaction.
        Migration 0006 turns FTS5's automatic merging off (FTS5 before SQLite 3.44 can
        merge this index wrongly), so the Store, whose SQLite merges right, does it."""
        self.conn.execute(
            "INSERT INTO episodes_fts(episodes_fts, rank) VALUES ('merge', ?)", (self.MERGE_PAGES,)
        )

    def optimize_index(self) -> None:
        """Merge the full-text index into one b-tree (FTS5's 'optimize'): after a bulk
        load, faster queries with the same bm25 scores."""
        with transaction(self.conn):
            self.conn.execute("INSERT INTO episodes_fts(episodes_fts) VALUES ('optimize')")

    def _merging(self, on: bool) -> None:
        """Inside the Store's own write transaction, let FTS5 merge as it writes (FTS5
        writes a segment per statement of the index triggers; without merging, a large
        batch would run out of segment numbers), and turn it off again before the commit,
        so that other clients, which may run an older FTS5, never merge (migration 0006)."""
        self.conn.execute(
            "INSERT INTO episodes_fts(episodes_fts, rank) VALUES ('automerge', ?)",
            (4 if on else 0,),
        )

    def fill_keys(self) -> int:
        """Compute the pending ``content_key`` of episodes written by other clients (or
        whose content they changed), which :meth:`add_many` needs to find a text already
        stored, and return how many were computed. Each batch of
        :data:`sqlite_rrf.core.dedupe.KEYS_BATCH` is its own transaction; with none pending
        this is one indexed read and takes no write lock."""
        if self.readonly:
            return 0
        done = 0
        while self.conn.execute(
            "SELECT 1 FROM episodes INDEXED BY idx_episodes_content_key "
            "WHERE content_key IS NULL LIMIT 1"
        ).fetchall():
            with transaction(self.conn):
                n = _dedupe.fill_pending(self.conn)
            done += n
            if not n:
                break
        return done

    # ---- the 'knn' pool (sqlite-vec; the module knn) ----

    @property
    def has_knn(self) -> bool:
        """True when the database has the vec0 index of the 'knn' pool."""
        return knn.has_knn(self.conn)

    def enable_knn(self) -> None:
        """Create the 'knn' pool's index: a sqlite-vec ``vec0`` table (cosine) over
        every embedding, kept in sync with ``episodes`` by triggers (``sql/knn.sql``).
        Needs sqlite-vec (``pip install 'sqlite-rrf[knn]'``) and a known dimension.
        Afterwards every connection that writes episodes must load sqlite-vec; a
        :class:`Store` does so by itself."""
        if self.has_knn:
            return
        knn.enable_knn(self.conn, self.dim)
