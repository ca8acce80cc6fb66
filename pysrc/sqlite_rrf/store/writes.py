"""Writing episodes: add, add_many, upsert, update, delete, delete_many, and get.

Every write is checked whole before anything is written (:meth:`Writes._prepare`: a bad
episode fails the batch), then written in one IMMEDIATE transaction (:meth:`Writes._write`)
that also merges the full-text index and packs the new sign codes; after the commit the
Store does the upkeep that is due
(:meth:`~sqlite_rrf.store.maintenance.Maintenance._upkeep_after_commit`).
"""

from __future__ import annotations

import json
from typing import Any, Dict, Iterable, List, Mapping, NamedTuple, Optional, Sequence, Set

import apsw
import numpy as np

from .. import dedupe as _dedupe
from .._sqlite import transaction
from ..checks import StoreError, Vector, blob, check_dim, episode_row
from ..results import Episode, Written
from .connection import now_ms
from .maintenance import Maintenance


class _Unset:
    """The default of :meth:`Store.update`'s fields: leave the field as it is."""

    def __repr__(self) -> str:
        return "UNSET"


#: Leave a field as it is (:meth:`Store.update`).
UNSET: Any = _Unset()


class Batch(NamedTuple):
    """Episodes checked and embedded by :meth:`Writes._prepare`, ready for
    :meth:`Writes._write`."""

    #: One row per episode: the bindings of :attr:`Writes._INSERT`.
    rows: List[Dict[str, Any]]
    #: The batch's embedding dimension: the database's, or the one its first vectors
    #: fix (written to ``rrf_meta`` with them); None when neither has one.
    dim: Optional[int]


class Writes(Maintenance):
    """Adding, changing, deleting and reading episodes."""

    def _existing_ids(self, ids: List[str]) -> Set[str]:
        """Which of ``ids`` are stored."""
        found: Set[str] = set()
        for i in range(0, len(ids), 500):
            chunk = ids[i : i + 500]
            found.update(
                r[0]
                for r in self.conn.execute(
                    f"SELECT id FROM episodes WHERE id IN ({','.join('?' * len(chunk))})", chunk
                )
            )
        return found

    def _prepare(
        self,
        episodes: Sequence[Mapping[str, Any]],
        progress: Optional[bool],
        labels: Optional[Sequence[str]] = None,
        replace: bool = True,
        dedupe: bool = False,
    ) -> Batch:
        """Validate every episode and embed those without an embedding, before any
        write, so a bad episode fails the batch with nothing written. With ``dedupe``,
        the episodes that name no id are marked for :func:`sqlite_rrf.dedupe.write_rows`,
        and those whose text is already stored are not embedded."""
        now = now_ms()
        dim = self.dim
        rows: List[Dict[str, Any]] = []
        missing: List[int] = []
        seen: Dict[str, int] = {}
        for i, ep in enumerate(episodes):
            label = labels[i] if labels else f"episode {i}"
            try:
                if not isinstance(ep, Mapping):
                    raise StoreError(f"must be an object, got {type(ep).__name__}")
                emb = None
                if ep.get("embedding") is None:
                    missing.append(i)
                else:
                    emb, n = blob(ep["embedding"])
                    dim = check_dim(n, dim)
                row = episode_row(ep, emb, now)
                if row["id"] in seen:
                    raise StoreError(f"id: {row['id']!r} appears twice in this batch")
                seen[row["id"]] = i
                rows.append(row)
            except StoreError as e:
                raise StoreError(
                    f"{label}: {e}" if len(episodes) > 1 or labels else str(e)
                ) from None
        for row in rows:
            row["content_key"] = _dedupe.content_key(row["content"])
        if dedupe:
            known = _dedupe.mark(self.conn, [ep.get("id") is not None for ep in episodes], rows)
            for i in known:
                rows[i]["unembedded"] = True
            missing = [i for i in missing if i not in known]
        if not replace:
            taken = self._existing_ids([r["id"] for r in rows])
            for i, row in enumerate(rows):
                if row["id"] in taken:
                    label = labels[i] if labels else f"episode {i}"
                    msg = (
                        f"id: an episode with id {row['id']!r} already exists (replace=True, "
                        "or --replace on the command line, replaces it)"
                    )
                    raise StoreError(f"{label}: {msg}" if len(rows) > 1 or labels else msg)
        if missing and self.embedder is not None:
            vecs = self.embedder.embed_many(
                [rows[i]["content"] for i in missing], progress=progress
            )
            for i, v in zip(missing, vecs):
                emb, n = blob(v, "embedder output")
                dim = check_dim(n, dim)
                rows[i]["embedding"] = emb
        return Batch(rows, dim)

    _INSERT = (
        "INSERT INTO episodes(id, content, embedding, created_at, accessed_at, "
        "access_count, importance, kind, metadata, scope, content_key) VALUES (:id, "
        ":content, :embedding, :created_at, :accessed_at, :access_count, :importance, "
        ":kind, :metadata, :scope, :content_key)"
    )
    _UPSERT = _INSERT + (
        " ON CONFLICT(id) DO UPDATE SET content = excluded.content, "
        "embedding = excluded.embedding, importance = excluded.importance, "
        "kind = excluded.kind, metadata = excluded.metadata, "
        "scope = excluded.scope, content_key = excluded.content_key"
    )

    def _write(self, sql: str, batch: Batch) -> None:
        """Write ``batch`` with ``sql`` (:attr:`_INSERT` or :attr:`_UPSERT`) in one
        IMMEDIATE transaction, all or nothing, then do the upkeep that is due."""
        rows = batch.rows
        if self.readonly:
            raise StoreError(
                f"{self.path} is read-only (read-only media or permissions): nothing was written"
            )
        try:
            with transaction(self.conn):
                if batch.dim is not None:  # the first vectors fix the dimension
                    self.conn.execute(
                        "INSERT OR IGNORE INTO rrf_meta VALUES ('embedding_dim', ?)", (batch.dim,)
                    )
                self._merging(True)
                if any(r.get("dedupe") for r in rows):  # add_many: no second copy of a text
                    _dedupe.write_rows(self.conn, sql, rows, self._embed_row)
                else:
                    self.conn.executemany(sql, rows)
                self._merge_index()
                self._pack(self.CODE_BLOCK, 2**31 // self.CODE_BLOCK)
                self._merging(False)
        except apsw.ConstraintError as e:
            if "episodes.id" in str(e):
                raise StoreError(
                    f"id: an episode with this id already exists ({e}); "
                    "replace=True (or upsert()) replaces it"
                ) from None
            raise
        except (apsw.BusyError, apsw.LockedError):
            raise StoreError(self._busy_message()) from None
        self._upkeep_after_commit(len(rows))

    def add(
        self,
        content: str,
        *,
        id: Optional[str] = None,
        embedding: Optional[Vector] = None,
        created_at: Optional[int] = None,
        accessed_at: Optional[int] = None,
        access_count: int = 0,
        importance: str = "normal",
        kind: Optional[str] = None,
        metadata: Any = None,
        scope: str = "",
    ) -> str:
        """Add one episode; returns its id (a new uuid4 hex when not given). Without
        ``embedding`` the store's embedder embeds ``content`` (if there is one). ``scope``
        is the memory it belongs to (a project, a user; ``''``: the shared memory).
        Without ``id``, a text the scope already has is not stored twice: that episode is
        refreshed and its id returned (:meth:`add_many`)."""
        return self.add_many(
            [
                dict(
                    id=id,
                    content=content,
                    embedding=embedding,
                    created_at=created_at,
                    accessed_at=accessed_at,
                    access_count=access_count,
                    importance=importance,
                    kind=kind,
                    metadata=metadata,
                    scope=scope,
                )
            ]
        )[0]

    def add_many(
        self,
        episodes: Iterable[Mapping[str, Any]],
        *,
        progress: Optional[bool] = None,
        replace: bool = False,
        labels: Optional[Sequence[str]] = None,
        dedupe: bool = True,
    ) -> Written:
        """Add episodes (dicts with the keys of :meth:`add`) in one transaction: all
        are written or, on any error, none. Returns their ids (a :class:`Written`: a
        list of str that also says which episodes repeated a text).

        No second copy of a text: an episode that names no id, whose text its scope
        already has (the same after :func:`sqlite_rrf.dedupe.normalise`: Unicode NFKC,
        case folded, white space collapsed), in the database or earlier in the batch, is
        not stored again. The episode that has the text is refreshed instead
        (``created_at`` and ``accessed_at`` become the later of the two, ``importance``
        the higher, ``kind`` and ``metadata`` the new ones when given; its text, embedding
        and access count stay) and its id is returned in that place;
        ``result.duplicates`` lists those places. An episode that names its own id is
        stored as given (``result.repeats`` lists those that repeat a text). ``dedupe=False``
        stores every episode.

        ``replace`` upserts episodes whose id exists (see :meth:`upsert`); ``labels``
        name the episodes in error messages (e.g. ``"line 12"``); ``progress`` shows
        a progress bar while embedding (default: for large batches)."""
        episodes = list(episodes)
        if dedupe and not self.readonly:
            self.fill_keys()  # other clients' rows: their keys, before looking for a twin
        batch = self._prepare(episodes, progress, labels, replace=replace, dedupe=dedupe)
        self._write(self._UPSERT if replace else self._INSERT, batch)
        rows = batch.rows
        return Written(
            [r["id"] for r in rows],
            [i for i, r in enumerate(rows) if r.get("duplicate")],
            [i for i, r in enumerate(rows) if r.get("repeat")],
        )

    def _embed_row(self, row: Dict[str, Any]) -> None:
        """Embed one row in the write transaction (a row that looked like a duplicate
        and was not embedded, whose twin was deleted before the write)."""
        if self.embedder is not None:
            emb, n = blob(self.embedder.embed(row["content"]), "embedder output")
            check_dim(n, self.dim)
            row["embedding"] = emb

    def upsert(
        self,
        content: str,
        *,
        id: str,
        embedding: Optional[Vector] = None,
        importance: str = "normal",
        kind: Optional[str] = None,
        metadata: Any = None,
        created_at: Optional[int] = None,
        scope: str = "",
    ) -> str:
        """Insert the episode ``id`` or replace its content, embedding, importance,
        kind, metadata and scope (its times and access count are kept)."""
        batch = self._prepare(
            [
                dict(
                    id=id,
                    content=content,
                    embedding=embedding,
                    importance=importance,
                    kind=kind,
                    metadata=metadata,
                    created_at=created_at,
                    scope=scope,
                )
            ],
            None,
        )
        self._write(self._UPSERT, batch)
        return id

    def update(
        self,
        id: str,
        *,
        content: Any = UNSET,
        importance: Any = UNSET,
        kind: Any = UNSET,
        metadata: Any = UNSET,
        scope: Any = UNSET,
        embedding: Any = UNSET,
    ) -> Episode:
        """Change some fields of the episode ``id``; the others keep their values. Returns
        the episode as it now is.

        New ``content`` without an ``embedding`` is embedded by the store's embedder; with
        none, the episode's old embedding (which described the old text) is dropped until
        :meth:`embed_missing` fills it. ``kind=None`` / ``metadata=None`` clear those
        fields. Raises :class:`StoreError` when there is no such episode or a value is
        bad; nothing is written then.
        """
        old = self.get(id) if isinstance(id, str) else None
        if old is None:
            raise StoreError(f"id: no episode with id {id!r}")
        new_content = old.content if content is UNSET else content
        if embedding is UNSET:
            embedding = old.embedding if new_content == old.content else None
        ep = dict(
            id=id,
            content=new_content,
            embedding=embedding,
            importance=old.importance if importance is UNSET else importance,
            kind=old.kind if kind is UNSET else kind,
            metadata=old.metadata if metadata is UNSET else metadata,
            scope=old.scope if scope is UNSET else scope,
            created_at=old.created_at,
        )
        self._write(self._UPSERT, self._prepare([ep], None))
        got = self.get(id)
        assert got is not None
        return got

    def delete(self, id: str) -> bool:
        """Delete the episode ``id``; True if it existed."""
        if self.readonly:
            raise StoreError(
                f"{self.path} is read-only (read-only media or permissions): nothing was deleted"
            )
        try:
            # BEGIN IMMEDIATE like every other write: a deferred transaction that reads
            # first cannot wait for the lock when it upgrades (SQLite answers busy at once)
            with transaction(self.conn):
                self._merging(True)
                self.conn.execute("DELETE FROM episodes WHERE id = ?", (id,))
                gone = self.conn.changes() > 0
                if gone:
                    self._merge_index()
                self._merging(False)
        except (apsw.BusyError, apsw.LockedError):
            raise StoreError(self._busy_message()) from None
        if gone:
            self._upkeep_after_commit(1)
        return gone

    def delete_many(self, ids: Iterable[str]) -> int:
        """Delete the episodes ``ids`` in one transaction, all or none: every id must
        exist (else a :class:`StoreError` names the first that does not, and nothing is
        deleted). Returns how many were deleted. Like :meth:`delete`, the indexes follow by
        triggers; the file keeps its size until it is vacuumed (``sqlite-rrf vacuum``)."""
        ids = list(dict.fromkeys(ids))
        for eid in ids:
            if not isinstance(eid, str):
                raise StoreError(f"id: must be text, got {type(eid).__name__}")
        if self.readonly:
            raise StoreError(
                f"{self.path} is read-only (read-only media or permissions): nothing was deleted"
            )
        try:
            with transaction(self.conn):
                found = self._existing_ids(ids)
                missing = [i for i in ids if i not in found]
                if missing:
                    raise StoreError(
                        f"id: no episode with id {missing[0]!r}"
                        + (f" (nor {len(missing) - 1} more)" if len(missing) > 1 else "")
                        + "; nothing was deleted"
                    )
                self._merging(True)
                for i in range(0, len(ids), 500):
                    chunk = ids[i : i + 500]
                    self.conn.execute(
                        f"DELETE FROM episodes WHERE id IN ({','.join('?' * len(chunk))})", chunk
                    )
                    self._merge_index()
                self._merging(False)
        except (apsw.BusyError, apsw.LockedError):
            raise StoreError(self._busy_message()) from None
        if ids:
            self._upkeep_after_commit(len(ids))
        return len(ids)

    def get(self, id: str) -> Optional[Episode]:
        """The episode ``id``, or None."""
        rows = self.conn.execute(
            "SELECT id, content, embedding, created_at, accessed_at, access_count, importance, "
            "kind, metadata, rowid, scope FROM episodes WHERE id = ?",
            (id,),
        ).fetchall()
        if not rows:
            return None
        (eid, content, emb, created, accessed, count, imp, kind, md, rowid, scope) = rows[0]
        vec = None
        if isinstance(emb, bytes) and emb and len(emb) % 4 == 0:
            vec = np.frombuffer(emb, "<f4").copy()
        try:
            meta = None if md is None else json.loads(md)
        except ValueError:
            meta = md  # not JSON (written by another client): the text as it is
        return Episode(eid, content, vec, created, accessed, count, imp, kind, meta, rowid, scope)
