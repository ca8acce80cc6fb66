"""Writing episodes: add, add_many, upsert, update, delete, delete_many, and get.

Every write is checked whole before anything is written (:meth:`Writes._prepare`: a bad
episode fails the batch), then written in one IMMEDIATE transaction (:meth:`Writes._write`)
that also merges the full-text index and packs the new sign codes; after the commit the
Store does the upkeep that is due
(:meth:`~sqlite_rrf.store.maintenance.Maintenance._upkeep_after_commit`).
"""

from __future__ import annotations

import json
from typing import Any, Dict, Iterable, List, Mapping, NamedTuple, Optional, Sequence, Set, Tuple

import apsw
import numpy as np

from ..core import dedupe as _dedupe
from ..core.results import Episode, Written
from ..core.sqlite import transaction
from ..core.validate import StoreError, Vector, blob, check_dim, episode_row
from . import facts as _facts
from .connection import now_ms
from .maintenance import Maintenance


class _Unset:
    """The default of :meth:`Store.update`'s fields: leave the field as it is."""

    def __repr__(self) -> str:
        return "UNSET"


#: Leave a field as it is (:meth:`Store.update`).
UNSET: Any = _Unset()


class Stored(Written):
    """What :meth:`Writes.add_many` returns: :class:`~sqlite_rrf.core.results.Written`, and
    ``superseded``: for each position whose text is that of a superseded episode of its
    scope (one another fact replaced), ``(that episode's id, the id of the fact that
    replaced it)``. With ``skip_superseded`` those episodes were not written (their place
    holds the superseded episode's id); else the superseded episode was refreshed (a
    duplicate) or the new one stored (an id of its own), and it stays superseded."""

    def __init__(
        self,
        ids: Sequence[str],
        duplicates: Sequence[int] = (),
        repeats: Sequence[int] = (),
        superseded: Optional[Dict[int, Tuple[str, str]]] = None,
    ) -> None:
        super().__init__(ids, duplicates, repeats)
        self.superseded: Dict[int, Tuple[str, str]] = dict(superseded or {})


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
        skip_superseded: bool = False,
    ) -> Batch:
        """Validate every episode and embed those without an embedding, before any
        write, so a bad episode fails the batch with nothing written. With ``dedupe``,
        the episodes that name no id are marked for :func:`sqlite_rrf.core.dedupe.write_rows`,
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
        for i, row in enumerate(rows):
            row["content_key"] = _dedupe.content_key(row["content"])
            if row.get("replaces") is not None and (len(rows) > 1 or labels):
                row["label"] = labels[i] if labels else f"episode {i}"
        _facts.check_replaces(self.conn, rows)
        if dedupe:
            known = _dedupe.mark(self.conn, [ep.get("id") is not None for ep in episodes], rows)
            for i in known:
                rows[i]["unembedded"] = True
            for row in rows:  # a text another fact replaced
                if row.get("replaces") is None:
                    twin = _facts.superseded_twin(self.conn, row)
                    if twin is not None:
                        row["superseded_twin"] = twin
                        if skip_superseded:
                            row["skip"] = True
                            row["id"] = twin[0]
            known |= {i for i, r in enumerate(rows) if r.get("skip")}
            missing = [i for i in missing if i not in known]
        if not replace:
            taken = self._existing_ids([r["id"] for r in rows if not r.get("skip")])
            for i, row in enumerate(rows):
                if row["id"] in taken and not row.get("skip"):
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
        "access_count, importance, kind, metadata, scope, content_key, superseded_by, "
        "confirmed_at) VALUES (:id, :content, :embedding, :created_at, :accessed_at, "
        ":access_count, :importance, :kind, :metadata, :scope, :content_key, "
        ":superseded_by, :confirmed_at)"
    )
    _UPSERT = _INSERT + (
        " ON CONFLICT(id) DO UPDATE SET content = excluded.content, "
        "embedding = excluded.embedding, importance = excluded.importance, "
        "kind = excluded.kind, metadata = excluded.metadata, "
        "scope = excluded.scope, content_key = excluded.content_key"
    )

    def _write(self, sql: str, batch: Batch) -> None:
        """Write ``batch`` with ``sql`` (:attr:`_INSERT` or :attr:`_UPSERT`) in one
        IMMEDIATE transaction, all or nothing, then do the upkeep that is due. Rows
        marked ``skip`` are not written; a row that ``replaces`` an episode marks it
        superseded (:func:`~sqlite_rrf.store.facts.supersede`)."""
        rows = [r for r in batch.rows if not r.get("skip")]
        if self.readonly:
            raise StoreError(
                f"{self.path} is read-only ({self.readonly_reason}): nothing was written"
            )
        try:
            with transaction(self.conn):
                if batch.dim is not None:  # the first vectors fix the dimension
                    self.conn.execute(
                        "INSERT OR IGNORE INTO rrf_meta VALUES ('embedding_dim', ?)", (batch.dim,)
                    )
                _facts.check_replaces(self.conn, rows)
                self._merging(True)
                if any(r.get("dedupe") for r in rows):  # add_many: no second copy of a text
                    first = self._first_noted(rows)
                    _dedupe.write_rows(self.conn, sql, rows, self._embed_row)
                    self._keep_first_noted(first)
                else:
                    self.conn.executemany(sql, rows)
                _facts.supersede(self.conn, rows)
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
        if rows:
            self._upkeep_after_commit(len(rows))

    def _first_noted(self, rows: Sequence[Dict[str, Any]]) -> Dict[int, List[int]]:
        """In the write transaction, before :func:`sqlite_rrf.core.dedupe.write_rows`: for
        each stored episode whose text a ``dedupe`` row repeats, by rowid, its
        ``created_at`` then the repeating rows' ``created_at``."""
        while _dedupe.fill_pending(self.conn):  # other clients' rows: their keys first
            pass
        first: Dict[int, List[int]] = {}
        for row in rows:
            if row.get("dedupe"):
                found = _dedupe.find(self.conn, row["content_key"], row["scope"], row["content"])
                if found is not None:
                    if found[0] not in first:
                        first[found[0]] = [
                            self.conn.execute(
                                "SELECT created_at FROM episodes WHERE rowid = ?", (found[0],)
                            ).fetchall()[0][0]
                        ]
                    first[found[0]].append(row["created_at"])
        return first

    def _keep_first_noted(self, first: Dict[int, List[int]]) -> None:
        """After the refresh of repeated texts: each episode keeps the time it was first
        noted (the earliest) as ``created_at``, and ``confirmed_at`` becomes the latest
        repeat's time when that is later."""
        for rowid, (was, *repeats) in first.items():
            noted, latest = min(was, *repeats), max(repeats)
            self.conn.execute(
                "UPDATE episodes SET created_at = :noted, confirmed_at = CASE WHEN "
                ":latest > :noted THEN max(coalesce(confirmed_at, 0), :latest) ELSE "
                "confirmed_at END WHERE rowid = :rowid",
                {"noted": noted, "latest": latest, "rowid": rowid},
            )

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
        replaces: Optional[str] = None,
    ) -> str:
        """Add one episode; returns its id (a new uuid4 hex when not given). Without
        ``embedding`` the store's embedder embeds ``content`` (if there is one). ``scope``
        is the memory it belongs to (a project, a user; ``''``: the shared memory).
        Without ``id``, a text the scope already has is not stored twice: that episode is
        refreshed and its id returned (:meth:`add_many`). ``replaces`` names the episode
        this one replaces: it is kept, marked superseded (``superseded_by``), and no
        recall returns it unless ``include_superseded``."""
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
                    replaces=replaces,
                )
            ]
        )[0]

    #: :meth:`add` under the name the tools use: ``remember(content, replaces=...)``.
    remember = add

    def likely_update(self, id: str) -> Optional[Tuple[str, float, str]]:
        """``(id, cosine, what)`` of the current episode of episode ``id``'s scope that it
        may update: the nearest by cosine, at least
        :data:`~sqlite_rrf.store.facts.LIKELY_UPDATE_COSINE`, whose text differs in a
        number, a day or a name (``what``); None when there is none."""
        return _facts.likely_update(self.conn, id)

    def superseded_by(self, id: str) -> Optional[str]:
        """The id of the fact that replaced episode ``id`` (None: it is current, or
        there is no such episode)."""
        rows = self.conn.execute(
            "SELECT superseded_by FROM episodes WHERE id = ?", (id,)
        ).fetchall()
        return rows[0][0] if rows else None

    def add_many(
        self,
        episodes: Iterable[Mapping[str, Any]],
        *,
        progress: Optional[bool] = None,
        replace: bool = False,
        labels: Optional[Sequence[str]] = None,
        dedupe: bool = True,
        skip_superseded: bool = False,
    ) -> Stored:
        """Add episodes (dicts with the keys of :meth:`add`) in one transaction: all
        are written or, on any error, none. Returns their ids (a :class:`Written`: a
        list of str that also says which episodes repeated a text).

        No second copy of a text: an episode that names no id, whose text its scope
        already has (the same after :func:`sqlite_rrf.core.dedupe.normalise`: Unicode NFKC,
        case folded, white space collapsed), in the database or earlier in the batch, is
        not stored again. The episode that has the text is refreshed instead
        (``created_at`` and ``accessed_at`` become the later of the two, ``importance``
        the higher, ``kind`` and ``metadata`` the new ones when given; its text, embedding
        and access count stay) and its id is returned in that place;
        ``result.duplicates`` lists those places. An episode that names its own id is
        stored as given (``result.repeats`` lists those that repeat a text). ``dedupe=False``
        stores every episode.

        An episode may name the one it ``replaces`` (see :meth:`add`). A text that is
        a superseded episode's is listed in ``result.superseded``; with
        ``skip_superseded`` (``sqlite-rrf import``) it is not written at all, so that an
        import never brings a replaced fact back.

        ``replace`` upserts episodes whose id exists (see :meth:`upsert`); ``labels``
        name the episodes in error messages (e.g. ``"line 12"``); ``progress`` shows
        a progress bar while embedding (default: for large batches)."""
        episodes = list(episodes)
        if dedupe and not self.readonly:
            self.fill_keys()  # other clients' rows: their keys, before looking for a twin
        batch = self._prepare(
            episodes,
            progress,
            labels,
            replace=replace,
            dedupe=dedupe,
            skip_superseded=skip_superseded,
        )
        self._write(self._UPSERT if replace else self._INSERT, batch)
        rows = batch.rows
        return Stored(
            [r["id"] for r in rows],
            [i for i, r in enumerate(rows) if r.get("duplicate")],
            [i for i, r in enumerate(rows) if r.get("repeat") and not r.get("skip")],
            {i: r["superseded_twin"] for i, r in enumerate(rows) if r.get("superseded_twin")},
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
        """Change some fields of the episode ``id``; the others keep their values (only the
        fields given are written, so another client's change to the others stays). Returns
        the episode as it now is.

        New ``content`` without an ``embedding`` is embedded by the store's embedder; with
        none, the episode's old embedding (which described the old text) is dropped until
        :meth:`embed_missing` fills it. ``kind=None`` / ``metadata=None`` clear those
        fields. Raises :class:`StoreError` when there is no such episode (also when another
        client deleted it meanwhile) or a value is bad; nothing is written then.

        The new text is embedded before the write; the write is one IMMEDIATE transaction
        that first checks the episode is still the one read (the same row), so an update
        never brings back an episode another client deleted meanwhile.
        """
        if not isinstance(id, str):
            raise StoreError(f"id: must be text, got {type(id).__name__}")
        old = self.get(id)
        if old is None:
            raise StoreError(f"id: no episode with id {id!r}")
        given = {
            k: v
            for k, v in (
                ("content", content),
                ("importance", importance),
                ("kind", kind),
                ("metadata", metadata),
                ("scope", scope),
            )
            if v is not UNSET
        }
        # the fields given, checked (episode_row names the field at fault); the others
        # are not written, so what another client stored in them stays as it is
        row = episode_row(
            dict(given, id=id, content=given.get("content", "-"), created_at=old.created_at),
            None,
            now_ms(),
        )
        emb: Optional[bytes] = None
        dim = self.dim
        if embedding is not UNSET and embedding is not None:
            emb, n = blob(embedding)
            dim = check_dim(n, dim)
        elif embedding is UNSET and "content" in given:
            if row["content"] == old.content and old.embedding is not None:
                emb = old.embedding.astype("<f4").tobytes()
            elif self.embedder is not None:  # before the transaction: no lock held
                emb, n = blob(self.embedder.embed(row["content"]), "embedder output")
                dim = check_dim(n, dim)
        sets: Dict[str, Any] = {}
        for k in ("importance", "kind", "metadata", "scope"):
            if k in given:
                sets[k] = row[k]
        if embedding is not UNSET:
            sets["embedding"] = emb
        if self.readonly:
            raise StoreError(
                f"{self.path} is read-only ({self.readonly_reason}): nothing was written"
            )
        try:
            with transaction(self.conn):
                now = self.conn.execute(
                    "SELECT rowid, content FROM episodes WHERE id = ?", (id,)
                ).fetchall()
                if not now:
                    raise StoreError(
                        f"id: no episode with id {id!r} (another client deleted it "
                        "meanwhile); nothing was written"
                    )
                if now[0][0] != old.rowid:
                    raise StoreError(
                        f"id: the episode {id!r} was deleted and written again by another "
                        "client while this update was prepared; nothing was written (read "
                        "it again, then update it)"
                    )
                if "content" in given and row["content"] != now[0][1]:
                    sets["content"] = row["content"]
                    sets["content_key"] = _dedupe.content_key(row["content"])
                    sets.setdefault("embedding", emb)
                if sets:
                    if dim is not None and sets.get("embedding") is not None:
                        self.conn.execute(
                            "INSERT OR IGNORE INTO rrf_meta VALUES ('embedding_dim', ?)", (dim,)
                        )
                    self._merging(True)
                    assigns = ", ".join(f"{k} = :{k}" for k in sets)
                    self.conn.execute(
                        f"UPDATE episodes SET {assigns} WHERE rowid = :rowid",
                        dict(sets, rowid=old.rowid),
                    )
                    self._merge_index()
                    self._pack(self.CODE_BLOCK, 2**31 // self.CODE_BLOCK)
                    self._merging(False)
        except (apsw.BusyError, apsw.LockedError):
            raise StoreError(self._busy_message()) from None
        if sets:
            self._upkeep_after_commit(1)
        got = self.get(id)
        if got is None:  # deleted by another client since the commit
            raise StoreError(f"id: no episode with id {id!r} (deleted after this update)")
        return got

    def delete(self, id: str) -> bool:
        """Delete the episode ``id``; True if it existed."""
        if self.readonly:
            raise StoreError(
                f"{self.path} is read-only ({self.readonly_reason}): nothing was deleted"
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
                f"{self.path} is read-only ({self.readonly_reason}): nothing was deleted"
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
