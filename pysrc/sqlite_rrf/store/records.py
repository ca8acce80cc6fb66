"""The Store's reads and upkeep for a memory's management: episodes as whole rows (a page and
its count, one episode, the ids a filter matches, an export in one snapshot), the free space
and ``VACUUM``. ``sqlite-rrf list/get/forget/export/vacuum`` (:mod:`sqlite_rrf.app.manage`) work
through these; no front-end runs SQL of its own.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, Iterator, List, Optional, Tuple

import apsw

from ..core.columns import RECORD_COLUMNS as RECORD_COLUMNS  # Store re-exports it
from ..core.sqlite import patience, transaction
from ..core.validate import StoreError
from ..doctor.text import invalid_text
from .connection import Connection

_SELECT = ", ".join(RECORD_COLUMNS)


@dataclass(frozen=True)
class EpisodeFilter:
    """Which episodes a management read covers: ``scope`` as stored (``''``: the shared
    one; None: every scope), ``kind`` (exactly), ``since`` (ms, inclusive) and ``until``
    (ms, exclusive) on ``created_at``; None is no bound."""

    scope: Optional[str] = None
    kind: Optional[str] = None
    since: Optional[int] = None
    until: Optional[int] = None

    def _where(self) -> Tuple[str, Dict[str, Any]]:
        sql = (
            "(:scope IS NULL OR scope = :scope) AND (:kind IS NULL OR kind = :kind) "
            "AND (:since IS NULL OR created_at >= :since) "
            "AND (:until IS NULL OR created_at < :until)"
        )
        return sql, {
            "scope": self.scope,
            "kind": self.kind,
            "since": self.since,
            "until": self.until,
        }


class Records(Connection):
    """Episodes as whole rows, the free space, and ``VACUUM``."""

    def episode_rows(
        self,
        where: EpisodeFilter = EpisodeFilter(),
        *,
        limit: Optional[int] = None,
        include_superseded: bool = True,
    ) -> Tuple[List[Tuple[Any, ...]], int]:
        """The rows (:data:`RECORD_COLUMNS`) of the episodes ``where`` covers, newest first
        (by ``created_at``, then rowid), at most ``limit`` (None or 0: all), and how many
        it covers in all, read in one snapshot. ``include_superseded=False`` leaves out
        the episodes another fact replaced."""
        sql, params = where._where()
        if not include_superseded:
            sql += " AND superseded_by IS NULL"
        with transaction(self.conn, write=False):  # the page and its count: one snapshot
            total = self.conn.execute(
                f"SELECT count(*) FROM episodes WHERE {sql}", params
            ).fetchall()[0][0]
            rows = self.conn.execute(
                f"SELECT {_SELECT} FROM episodes WHERE {sql} "
                "ORDER BY created_at DESC, rowid DESC LIMIT :limit",
                dict(params, limit=-1 if not limit else limit),
            ).fetchall()
        return [tuple(r) for r in rows], total

    def episode_row(self, id: str) -> Optional[Tuple[Any, ...]]:
        """The row (:data:`RECORD_COLUMNS`) of the episode ``id``, or None."""
        rows = self.conn.execute(f"SELECT {_SELECT} FROM episodes WHERE id = ?", (id,)).fetchall()
        return tuple(rows[0]) if rows else None

    def replaced(self, id: str) -> List[str]:
        """The ids of the episodes that the episode ``id`` replaced (their
        ``superseded_by`` is ``id``), in the order they were stored."""
        return [
            r[0]
            for r in self.conn.execute(
                "SELECT id FROM episodes WHERE superseded_by = ? ORDER BY rowid", (id,)
            )
        ]

    def matching_ids(self, where: EpisodeFilter = EpisodeFilter()) -> List[str]:
        """The ids of the episodes ``where`` covers, newest first (replaced ones too)."""
        sql, params = where._where()
        return [
            r[0]
            for r in self.conn.execute(
                f"SELECT id FROM episodes WHERE {sql} ORDER BY created_at DESC, rowid DESC",
                params,
            )
        ]

    def export_rows(
        self, where: EpisodeFilter = EpisodeFilter()
    ) -> Iterator[Tuple[Tuple[Any, ...], Dict[str, bytes]]]:
        """The rows (:data:`RECORD_COLUMNS`) of the episodes ``where`` covers, oldest row
        first, read in one snapshot (held until the iteration ends), each with its TEXT
        columns that are not valid UTF-8: column → the original bytes (every read shows
        them with U+FFFD per invalid sequence; most rows: none)."""
        sql, params = where._where()
        with transaction(self.conn, write=False):
            bad = {b.rowid: b.columns for b in invalid_text(self.conn)}
            for row in self.conn.execute(
                f"SELECT {_SELECT}, rowid FROM episodes WHERE {sql} ORDER BY rowid", params
            ):
                yield tuple(row[:-1]), bad.get(row[-1], {})

    def add_meta(self, key: str, value: Any) -> None:
        """Add ``key`` to ``rrf_meta`` with ``value`` (a mark of the application's own, such
        as the demo's). A key already there is a :class:`StoreError` and nothing changes: the
        store's own keys are never written over."""
        try:
            with transaction(self.conn):
                self.conn.execute("INSERT INTO rrf_meta VALUES (?, ?)", (key, value))
        except apsw.ConstraintError:
            raise StoreError(f"rrf_meta already has the key {key!r}; nothing was changed") from None

    def free_bytes(self) -> int:
        """The bytes of the file's free pages: what :meth:`vacuum` gives back at least."""
        free = self.conn.execute("PRAGMA freelist_count").fetchall()[0][0]
        return int(free * self.conn.execute("PRAGMA page_size").fetchall()[0][0])

    def vacuum(self, checkpoint_patience_ms: int = 1000) -> bool:
        """Rebuild the full-text index from the episodes (FTS5's ``rebuild``: it drops the
        deleted episodes' markers), rebuild the file (``VACUUM``) and write it back from
        the ``-wal`` (``wal_checkpoint(TRUNCATE)``), waiting at most
        ``checkpoint_patience_ms`` for other processes' readers. Returns whether the
        ``-wal`` was emptied (False: a reader kept it; the rebuilt file waits there until
        a later checkpoint). Another process holding the write lock past the busy
        timeout is a :class:`StoreError`, with nothing changed."""
        try:
            with transaction(self.conn):
                self.conn.execute("INSERT INTO episodes_fts(episodes_fts) VALUES ('rebuild')")
            self.conn.execute("VACUUM")
            with patience(self.conn, checkpoint_patience_ms, self.busy_timeout_ms):
                busy = self.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()[0][0]
        except (apsw.BusyError, apsw.LockedError):
            raise StoreError(
                f"{self.path}: another process held the write lock past the busy timeout; "
                "the episodes are as they were; run it again later"
            ) from None
        return not busy
