"""The memory store: episodes in a SQLite file, recalled by one SQL statement.

>>> from sqlite_rrf.store import Store
>>> with Store("memory.db") as store:                      # doctest: +SKIP
...     store.add("We chose SQLite for the agent's memory.")
...     for hit in store.recall("which database did we pick?"):
...         print(hit.score, hit.content)

The Store opens and migrates the database, writes, reads and recalls episodes. The
concerns around it have modules of their own: input checking (:mod:`.checks`), the BM25
stopwords' refresh (:mod:`.stopwords`), the topic gate (:mod:`.gate`), the 'knn' pool's
index (:mod:`.knn`) and the returned values (:mod:`.results`); their public names are
importable from here too.
"""

from __future__ import annotations

import dataclasses
import json
import os
import time
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple, Union

import apsw
import numpy as np

from . import dedupe as _dedupe
from . import knn
from ._sqlite import foreign, open_connection, patience, transaction
from ._sqlite import meta as _meta
from .timeexpr import resolve as resolve_time
from .checks import (IMPORTANCE, LISTS, MAX_COUNT, MAX_QUERY_CHARS, StoreError, Vector, blob,
                     check_dim, episode_row, has_text, recall_params, recall_query)
from .diversify import candidates, diversify
from .doctor import open_check
from .gate import TOPIC_GATE_COSINE, TopicGate, gate_key, session_row
from .loader import load
from .migrations import migrate
from .relevance import above_floor, check_min_relevance, with_relevance
from .results import Episode, RecallHit, RecallResult, Written
from .statements import POOL_MODES, PROFILES, recall_defaults, recall_statement
from .stopwords import STOPWORDS_DRIFT, StopwordsRefresh, compute_stopwords, read_stopwords

__all__ = ["Store", "StoreError", "Episode", "RecallHit", "RecallResult", "Written", "UNSET",
           "Vector",
           "now_ms", "MAX_QUERY_CHARS", "MAX_COUNT", "TOPIC_GATE_COSINE", "LISTS",
           "IMPORTANCE", "POOL_MODES", "PROFILES"]


def _vector_fault(emb: Any, dim: Optional[int]) -> Optional[str]:
    """Why a stored embedding cannot be used by the vector list (None: it can): not a
    float32 blob, a size other than ``dim``, NaN or infinite values, or a zero vector
    (its cosine is undefined)."""
    if not isinstance(emb, bytes) or len(emb) % 4 or not emb:
        return "not a float32 blob"
    v = np.frombuffer(emb, "<f4")
    if dim is not None and v.size != dim:
        return f"{v.size} values, the database holds {dim}"
    if not np.isfinite(v).all():
        i = int(np.flatnonzero(~np.isfinite(v))[0])
        return f"{v[i]} at index {i}"
    if not v.any():
        return "a zero vector: its cosine is undefined"
    return None


class _Unset:
    """The default of :meth:`Store.update`'s fields: leave the field as it is."""

    def __repr__(self) -> str:
        return "UNSET"


#: Leave a field as it is (:meth:`Store.update`).
UNSET: Any = _Unset()


def now_ms() -> int:
    """Milliseconds since the Unix epoch (the store's time unit)."""
    return int(time.time() * 1000)


class Store:
    """An agent's memory in one SQLite file.

    Opening creates or migrates the database (WAL journal, ``busy_timeout``) and
    loads the rrf extension. ``embedder`` (an :class:`sqlite_rrf.embed.Embedder`, or
    anything with ``dim``, ``model_name``, ``embed(text)`` and ``embed_many(texts)``)
    embeds content and queries; without one, episodes need explicit embeddings and
    recall uses the BM25, recency and access lists only (or ``qvec=``).

    The database records its embedding model and dimension (table ``rrf_meta``);
    a vector of another dimension is refused with an error and nothing is written.
    One Store is for one thread; open one per thread or process.

    ``mmap_size`` (bytes) lets SQLite read the file through memory-mapped I/O up to
    that size (``PRAGMA mmap_size``; SQLite may cap it): the vector scans of a large
    memory copy fewer pages. The price is SQLite's: an I/O error on a mapped page
    (a failing disk, a file truncated behind SQLite's back) is a signal, not an
    error SQLite can return. Off by default.
    """

    def __init__(self, path: Union[str, os.PathLike], *, embedder: Any = None,
                 busy_timeout_ms: int = 10_000, readonly: bool = False,
                 mmap_size: Optional[int] = None) -> None:
        self.path = os.fspath(path)
        self.embedder = embedder
        self._bad_vectors: Dict[int, str] = {}  # rowid -> why its embedding is unusable
        # _pending_faults' last answer: ((data_version, total_changes), faults, warnings)
        self._pending_seen: Optional[Tuple[Tuple[int, int], Dict[int, str], List[str]]] = None
        self._pending_dim: Optional[int] = None
        self.conn: Any = None
        self.busy_timeout_ms = busy_timeout_ms
        # readonly: never writes, not even the WAL switch; the file must exist. On read-only
        # media a WAL file opens as immutable (_sqlite.open_connection says when).
        self.conn, self.opened_as = open_connection(self.path, readonly=readonly)
        self._gate = TopicGate(self.conn)
        self._stopwords = StopwordsRefresh(self.conn)
        try:
            self.conn.set_busy_timeout(self._busy_timeout_ms)
            #: True when the file can only be read (read-only media or permissions): recall
            #: works (without touching), writes raise.
            self.readonly = bool(self.conn.readonly("main"))
            self._check_ours()  # reads only: before the WAL switch, the first write
            if self.path not in (":memory:", "") and not self.readonly:
                self._wal()
            self.conn.execute("PRAGMA foreign_keys = ON")
            if mmap_size is not None:
                if isinstance(mmap_size, bool) or not isinstance(mmap_size, int) or mmap_size < 0:
                    raise StoreError(f"mmap_size: must be an integer >= 0 (bytes), got "
                                     f"{mmap_size!r}")
                self.conn.execute(f"PRAGMA mmap_size = {mmap_size}")
            load(self.conn)
            if self.has_knn:  # before migrating: a migration may write to the vec0 index
                knn.load_sqlite_vec(self.conn)
            migrated: List[int] = []
            if self.readonly:
                self._check_schema_readable()
            else:
                migrated = migrate(self.conn)  # takes the write lock only when one is due
            #: What the open's schema check found and could not repair (a trigger dropped
            #: in a read-only database, the lock busy): named in every recall's warnings.
            self.schema_warnings: List[str] = open_check(
                self.conn, readonly=self.readonly, busy_timeout_ms=self.busy_timeout_ms)
            self._guard_vectors()
            self._code_vectors()
            if not self.readonly and migrated:
                # this open wrote (a migration): the writer's maintenance, never waiting
                self._maintain_after_write()
            if embedder is not None:
                self._bind_model(embedder, remember=not self.readonly)
        except BaseException:
            self.conn.close()
            raise

    def _guard_vectors(self) -> None:
        """On this connection (it has the extension), refuse an embedding with NaN or
        infinite values (vec_cosine's error names the index) or a zero norm, whoever writes
        it through this connection: TEMP triggers, which exist for this connection only. The
        schema itself checks what any client's write can be checked for without the
        extension (the dimension)."""
        for op in ("INSERT", "UPDATE OF embedding"):
            name = "rrf_episodes_vector_" + op.split()[0].lower()
            self.conn.execute(
                f"CREATE TEMP TRIGGER IF NOT EXISTS {name} BEFORE {op} ON main.episodes "
                "WHEN NEW.embedding IS NOT NULL BEGIN "
                "SELECT CASE WHEN vec_cosine(NEW.embedding, NEW.embedding) IS NULL THEN "
                "RAISE(ABORT, 'episodes.embedding: a zero vector (its cosine is undefined)') "
                "END; END")

    def _code_vectors(self) -> None:
        """On this connection, give every new or changed vector its sign code at once
        (migration 0007's triggers, plain SQL for every client, leave it pending): a TEMP
        trigger, like :meth:`_guard_vectors`'s, so the codes written through a Store are
        never pending."""
        # migration 0009 turns the insert of a code row that exists into "make it
        # pending" (an UPDATE), so both events compute; a zero vector keeps a pending code
        for name, event in (("rrf_episodes_code", "INSERT"),
                            ("rrf_episodes_code_update", "UPDATE OF code")):
            self.conn.execute(
                f"CREATE TEMP TRIGGER IF NOT EXISTS {name} AFTER {event} ON main.episodes_codes "
                "WHEN NEW.code IS NULL BEGIN "
                "UPDATE main.episodes_codes SET code = (SELECT vec_signbits(v.embedding) "
                "FROM main.episodes_vectors AS v WHERE v.rowid = NEW.rowid) WHERE rowid = NEW.rowid "
                "AND EXISTS (SELECT 1 FROM main.episodes_vectors AS v WHERE v.rowid = NEW.rowid "
                "AND v.embedding != zeroblob(length(v.embedding))); "
                "END")

    #: Pending sign codes computed per transaction by :meth:`fill_codes`.
    CODES_BATCH = 20_000

    def fill_codes(self) -> int:
        """Compute the sign codes that are pending (vectors written by a client without
        the extension, or by the migration that made the codes table) and return how many
        were written. A vector that cannot be used (NaN, infinite, zero, wrong size) keeps
        a pending code: the quantized pool scores pending rows exactly, and the recall
        leaves such vectors out and names them in its warnings. The pending rows are read
        first, without a lock; only a batch with codes to write takes the write lock (its
        own transaction), and a code is written only if its vector is still the one read."""
        if self.readonly:
            return 0
        written = 0
        after = -(2**63)
        dim = self.dim
        while True:
            rows = self.conn.execute(
                "SELECT c.rowid, v.embedding FROM episodes_codes AS c "
                "INDEXED BY idx_episodes_codes_pending "
                "JOIN episodes_vectors AS v ON v.rowid = c.rowid "
                "WHERE c.code IS NULL AND c.rowid > ? ORDER BY c.rowid LIMIT ?",
                (after, self.CODES_BATCH)).fetchall()
            if not rows:
                self.pack_codes()
                return written
            after = rows[-1][0]
            updates = []
            for rowid, emb in rows:
                if _vector_fault(emb, dim) is None:
                    v = np.frombuffer(emb, "<f4")
                    updates.append((np.packbits(v > 0, bitorder="little").tobytes(), rowid,
                                    rowid, emb))
            if not updates:
                continue  # nothing to write in this batch: no write lock
            # a vector rewritten meanwhile cannot get the code of its old value
            with transaction(self.conn):
                for update in updates:
                    self.conn.execute(
                        "UPDATE episodes_codes SET code = ? WHERE rowid = ? AND code IS NULL "
                        "AND (SELECT embedding FROM episodes_vectors WHERE rowid = ?) = ?",
                        update)
                    written += self.conn.changes()

    #: Codes per block of ``episodes_code_blocks`` (migration 0008): the loose codes are
    #: packed once there are this many of them.
    CODE_BLOCK = 256
    #: Blocks packed per transaction by :meth:`pack_codes`.
    PACK_BATCH = 200

    def pack_codes(self, block: Optional[int] = None) -> int:
        """Pack the loose sign codes (computed, in no block) into new blocks of ``block``
        codes (default :attr:`CODE_BLOCK`), in rowid order, while there are at least that
        many, and return how many codes were packed. The quantized pool then reads those
        codes one block at a time (``rrf_hamming_topk``); codes left over stay loose and are
        read row by row. The Store calls this after its writes and after
        :meth:`fill_codes`; each batch of blocks is its own transaction."""
        if self.readonly:
            return 0
        size = self.CODE_BLOCK if block is None else int(block)
        if not 1 <= size <= 100_000:
            raise ValueError(f"block: must be from 1 to 100000, got {size}")
        packed = 0
        while True:
            # fewer loose codes than a block (the usual case on open): no write lock
            loose = self.conn.execute(
                "SELECT count(*) FROM (SELECT 1 FROM episodes_codes "
                "INDEXED BY idx_episodes_codes_loose WHERE block IS NULL AND code IS NOT NULL "
                "LIMIT ?)", (size,)).fetchall()[0][0]
            if loose < size:
                return packed
            with transaction(self.conn):
                n = self._pack(size, self.PACK_BATCH)
            packed += n
            if n < size * self.PACK_BATCH:
                return packed

    def _pack(self, size: int, most: int) -> int:
        """In the caller's transaction: up to ``most`` blocks of ``size`` loose codes;
        the number of codes packed."""
        rows = self.conn.execute(
            "SELECT rowid, code FROM episodes_codes INDEXED BY idx_episodes_codes_loose "
            "WHERE block IS NULL AND code IS NOT NULL ORDER BY rowid LIMIT ?",
            (size * most,)).fetchall()
        full = len(rows) - len(rows) % size
        if full == 0:
            return 0
        # one code length per block (a database has one dimension; this keeps a block
        # well-formed whatever the table holds)
        packed = 0
        start = 0
        while start + size <= full:
            chunk = rows[start:start + size]
            length = len(chunk[0][1])
            same = [r for r in chunk if len(r[1]) == length]
            start += size
            if len(same) != size:
                continue
            rowids = np.fromiter((r for r, _ in chunk), dtype="<i8", count=size).tobytes()
            codes = b"".join(c for _, c in chunk)
            # migration 0009: an open block (n = 0, empty) is named by its rows, then
            # filled in one UPDATE; any other way of writing a block dissolves it
            cur = self.conn.execute(
                "INSERT INTO episodes_code_blocks(n, rowids, codes) VALUES (0, x'', x'') "
                "RETURNING block")
            number = cur.fetchall()[0][0]
            self.conn.executemany("UPDATE episodes_codes SET block = ? WHERE rowid = ?",
                                  ((number, r) for r, _ in chunk))
            self.conn.execute("UPDATE episodes_code_blocks SET n = ?, rowids = ?, codes = ? "
                              "WHERE block = ?", (size, rowids, codes, number))
            packed += size
        return packed

    @property
    def busy_timeout_ms(self) -> int:
        """How long a write waits for another process's write lock (ms) before it fails
        with a :class:`StoreError` and nothing written. Settable."""
        return self._busy_timeout_ms

    @busy_timeout_ms.setter
    def busy_timeout_ms(self, ms: int) -> None:
        if isinstance(ms, bool) or not isinstance(ms, int) or ms < 0:
            raise StoreError(f"busy_timeout_ms: must be an integer >= 0, got {ms!r}")
        self._busy_timeout_ms = ms
        if getattr(self, "conn", None) is not None:
            self.conn.set_busy_timeout(ms)

    def _busy_message(self) -> str:
        return (f"{self.path}: another process held the write lock for the whole busy "
                f"timeout ({self._busy_timeout_ms / 1000:g} s), so nothing was written; "
                "try again when it has finished")

    def _check_ours(self) -> None:
        """Refuse another application's SQLite file before anything is written to it (not
        even the WAL switch): :func:`sqlite_rrf._sqlite.foreign` says why. A WAL file this
        connection cannot read (its ``-shm`` cannot be made) is refused with the reason."""
        try:
            why = foreign(self.conn)
        except apsw.CantOpenError:
            from ._sqlite import on_read_only_media

            if on_read_only_media(self.path):
                why = ("its -wal file has content but its -shm file is missing, and SQLite "
                       "cannot create that on read-only media (immutable=1 would not read "
                       "the -wal: recent writes would be missing)")
            else:
                why = ("SQLite cannot create its -shm file beside it (the directory is not "
                       "writable for this user), and the file system is writable, so it is "
                       "not opened as immutable (its owner may change it meanwhile)")
            raise StoreError(
                f"{self.path}: this WAL database cannot be read here: {why}. Open it once "
                "where it can be written (its owner, a writable copy)") from None
        if why is not None:
            raise StoreError(f"{self.path} is not a sqlite-rrf database: {why}. sqlite-rrf "
                             "opens only its own databases (or a new, empty file); nothing "
                             "was written to it") from None

    def _check_schema_readable(self) -> None:
        """A read-only database cannot be migrated: it must be at this version already."""
        from .migrations import available, current_version

        have, want = current_version(self.conn), max(m.version for m in available())
        if have < want:
            raise StoreError(f"{self.path} is read-only and at schema version {have}; this "
                             f"sqlite-rrf needs {want}. Open it once where it can be written "
                             "(it is migrated then), or copy it somewhere writable")

    def _wal(self, tries: int = 200) -> None:
        """Switch to WAL. Changing the journal mode takes an exclusive lock that the
        busy handler does not wait for, so retry while other processes hold locks."""
        for attempt in range(tries):
            try:
                mode = self.conn.execute("PRAGMA journal_mode").fetchall()[0][0]
                if mode.lower() != "wal":
                    self.conn.execute("PRAGMA journal_mode = WAL")
                return
            except apsw.BusyError:
                if attempt == tries - 1:
                    raise
                time.sleep(0.05)

    # ---- lifecycle ----

    def close(self) -> None:
        """Close the database connection."""
        self.conn.close()

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # ---- the database's model and dimension ----

    def meta(self, key: str) -> Any:
        """A value from ``rrf_meta`` (``embedding_model``, ``embedding_dim``) or None."""
        return _meta(self.conn, key)

    @property
    def dim(self) -> Optional[int]:
        """The embedding dimension of this database (None until the first vector)."""
        d = self.meta("embedding_dim")
        return None if d is None else int(d)

    @property
    def model(self) -> Optional[str]:
        """The model this database's embeddings were made with, as it was named (a path or
        ``hf:ORG/REPO/FILE.gguf``), or None when it has none yet."""
        m = self.meta("embedding_model")
        return m if isinstance(m, str) and m else None

    def attach_embedder(self, embedder: Any, *, remember: bool = True) -> None:
        """Use ``embedder`` for this store's writes and recalls (see the class docstring).

        The database remembers the first model it is used with: its name, dimension and
        fingerprint (the embeddings of a few fixed texts). A model of another dimension, or
        one whose fingerprint differs (another model of the same size), is refused with a
        :class:`StoreError` and nothing changes, so two vector spaces never mix. With
        ``remember=False`` the model is checked but nothing is written (a read-only recall).
        """
        if embedder is not None:
            self._bind_model(embedder, remember)
        self.embedder = embedder

    def _bind_model(self, embedder: Any, remember: bool = True) -> None:
        """Record the model, dimension and fingerprint on first use; refuse a mismatch."""
        from .models import fingerprint

        dim = int(embedder.dim)
        name = getattr(embedder, "model_spec", None) or getattr(embedder, "model_name", None)
        if callable(getattr(embedder, "fingerprint", None)):
            fp = embedder.fingerprint()  # an Embedder: computed once per model file
        else:
            fp = fingerprint(embedder) if hasattr(embedder, "embed_many") else None
        if not self._model_upserts(name, dim, fp) or not remember:
            return  # nothing to record: no write lock taken
        with transaction(self.conn):
            for key, value in self._model_upserts(name, dim, fp):  # again, under the lock
                self.conn.execute("INSERT OR REPLACE INTO rrf_meta VALUES (?, ?)", (key, value))

    def _model_upserts(self, name: Optional[str], dim: int,
                       fp: Optional[bytes]) -> List[Tuple[str, Any]]:
        """The rrf_meta rows that binding this model would write; raises StoreError when
        the model is not the database's."""
        from .models import FINGERPRINT_MIN_COSINE, fingerprint_cosine

        have = self.dim
        known = self.model
        if have is not None and have != dim:
            raise StoreError(
                f"this database holds {have}-dimensional embeddings (model {known!r}); "
                f"the model {name!r} gives {dim}. Use the database's model, or a new "
                "database")
        stored = self.meta("embedding_fingerprint")
        if isinstance(stored, bytes) and fp is not None:
            cos = fingerprint_cosine(stored, fp)
            if cos is None or cos < FINGERPRINT_MIN_COSINE:
                raise StoreError(
                    f"the model {name!r} is not the model this database's embeddings were "
                    f"made with ({known!r}): the same fixed texts embed differently "
                    f"(cosine {'n/a' if cos is None else f'{cos:.3f}'}), so its vectors "
                    "would not be comparable. Use the database's model, or a new database")
        upserts: List[Tuple[str, Any]] = []
        if have is None:
            upserts.append(("embedding_dim", dim))
        if known is None and name:
            upserts.append(("embedding_model", name))
        if stored is None and fp is not None:
            upserts.append(("embedding_fingerprint", fp))
        return upserts

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

    # ---- writing ----

    def _existing_ids(self, ids: List[str]) -> set:
        found: set = set()
        for i in range(0, len(ids), 500):
            chunk = ids[i:i + 500]
            found.update(r[0] for r in self.conn.execute(
                f"SELECT id FROM episodes WHERE id IN ({','.join('?' * len(chunk))})", chunk))
        return found

    def _prepare(self, episodes: Sequence[Mapping[str, Any]], progress: Optional[bool],
                 labels: Optional[Sequence[str]] = None,
                 replace: bool = True, dedupe: bool = False) -> List[Dict[str, Any]]:
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
                raise StoreError(f"{label}: {e}" if len(episodes) > 1 or labels else str(e)
                                 ) from None
        for row in rows:
            row["content_key"] = _dedupe.content_key(row["content"])
        if dedupe:
            known = _dedupe.mark(self.conn, [ep.get("id") is not None for ep in episodes],
                                 rows)
            for i in known:
                rows[i]["unembedded"] = True
            missing = [i for i in missing if i not in known]
        if not replace:
            taken = self._existing_ids([r["id"] for r in rows])
            for i, row in enumerate(rows):
                if row["id"] in taken:
                    label = labels[i] if labels else f"episode {i}"
                    msg = (f"id: an episode with id {row['id']!r} already exists (replace=True, "
                           "or --replace on the command line, replaces it)")
                    raise StoreError(f"{label}: {msg}" if len(rows) > 1 or labels else msg)
        if missing and self.embedder is not None:
            vecs = self.embedder.embed_many([rows[i]["content"] for i in missing],
                                            progress=progress)
            for i, v in zip(missing, vecs):
                emb, n = blob(v, "embedder output")
                dim = check_dim(n, dim)
                rows[i]["embedding"] = emb
        self._pending_dim = dim
        return rows

    _INSERT = ("INSERT INTO episodes(id, content, embedding, created_at, accessed_at, "
               "access_count, importance, kind, metadata, scope, content_key) VALUES (:id, "
               ":content, :embedding, :created_at, :accessed_at, :access_count, :importance, "
               ":kind, :metadata, :scope, :content_key)")
    _UPSERT = _INSERT + (" ON CONFLICT(id) DO UPDATE SET content = excluded.content, "
                         "embedding = excluded.embedding, importance = excluded.importance, "
                         "kind = excluded.kind, metadata = excluded.metadata, "
                         "scope = excluded.scope, content_key = excluded.content_key")

    def _write(self, sql: str, rows: List[Dict[str, Any]]) -> None:
        if self.readonly:
            raise StoreError(f"{self.path} is read-only (read-only media or permissions): "
                             "nothing was written")
        try:
            with transaction(self.conn):
                if self._pending_dim is not None:  # the first vectors fix the dimension
                    self.conn.execute("INSERT OR IGNORE INTO rrf_meta VALUES "
                                      "('embedding_dim', ?)", (self._pending_dim,))
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
                raise StoreError(f"id: an episode with this id already exists ({e}); "
                                 "replace=True (or upsert()) replaces it") from None
            raise
        except (apsw.BusyError, apsw.LockedError):
            raise StoreError(self._busy_message()) from None
        self._wrote(len(rows))

    #: Work done on the FTS5 index's segments after each write (FTS5's 'merge' command,
    #: in pages): the index does no merging by itself (migration 0006).
    MERGE_PAGES = 500

    def _merge_index(self) -> None:
        """Merge some of the full-text index's segments, in the caller's transaction.
        Migration 0006 turns FTS5's automatic merging off (FTS5 before SQLite 3.44 can
        merge this index wrongly), so the Store, whose SQLite merges right, does it."""
        self.conn.execute("INSERT INTO episodes_fts(episodes_fts, rank) VALUES ('merge', ?)",
                          (self.MERGE_PAGES,))

    def _merging(self, on: bool) -> None:
        """Inside the Store's own write transaction, let FTS5 merge as it writes (FTS5
        writes a segment per statement of the index triggers; without merging, a large
        batch would run out of segment numbers), and turn it off again before the commit,
        so that other clients, which may run an older FTS5, never merge (migration 0006)."""
        self.conn.execute("INSERT INTO episodes_fts(episodes_fts, rank) VALUES ('automerge', ?)",
                          (4 if on else 0,))

    # ---- BM25 stopwords (sql/stopwords.sql; the module stopwords) ----

    #: The stopwords are recomputed when the episode count has moved by this share
    #: since they were last computed.
    STOPWORDS_DRIFT = STOPWORDS_DRIFT

    @property
    def stopwords(self) -> List[str]:
        """The terms the recall statement drops from queries: indexed terms (porter
        stems) found in at least half of the episodes, as last computed. Empty below
        :data:`sqlite_rrf.stopwords.MIN_ROWS` episodes."""
        return read_stopwords(self.conn)

    def refresh_stopwords(self, min_rows: Optional[int] = None) -> List[str]:
        """Recompute the BM25 stopwords now (``sql/stopwords.sql``; one statement,
        so it is atomic) and return them. The store does this by itself after writes
        that move the episode count by :attr:`STOPWORDS_DRIFT`; ``min_rows``
        (default :data:`sqlite_rrf.stopwords.MIN_ROWS`) is the count below which there
        are none."""
        compute_stopwords(self.conn, min_rows)
        self._stopwords.refreshed()
        return self.stopwords

    def _wrote(self, n: int) -> None:
        """Count ``n`` written or deleted episodes, then do the writer's maintenance
        (:meth:`_maintain_after_write`)."""
        self._maintain_after_write(n)

    #: How long the maintenance after a write waits for the write lock (ms): not at all.
    #: What it cannot do now is done after a later write, or by :meth:`maintain`.
    MAINTENANCE_PATIENCE_MS = 0

    def _maintain_after_write(self, n: int = 0) -> None:
        """The writer's maintenance, after its commit, never waiting for the lock: refresh
        the stopwords when the episode count has moved by :attr:`STOPWORDS_DRIFT` (or
        reached :data:`sqlite_rrf.stopwords.MIN_ROWS` without them) since they were
        computed, and compute and pack the sign codes other clients left pending
        (:meth:`fill_codes`, one indexed read when there are none). A reader's open never
        does this."""
        # The write has committed: nothing here may make it look as if it had not. Any
        # failure (the lock busy, an interrupt meant for the write, a full disk) leaves the
        # upkeep for a later write or maintain(); what it leaves is pending, scored exactly.
        with patience(self.conn, self.MAINTENANCE_PATIENCE_MS, self._busy_timeout_ms):
            try:
                self._stopwords.wrote(n, self.count, self.refresh_stopwords,
                                      self.STOPWORDS_DRIFT)
            except apsw.Error:
                pass
            try:
                self.fill_codes()
            except apsw.Error:
                pass

    def maintain(self) -> Dict[str, Any]:
        """Do the upkeep that opening a Store never does, waiting for the write lock up to
        the busy timeout: compute the sign codes other clients left pending and pack loose
        codes into blocks (:meth:`fill_codes`, :meth:`pack_codes`), recompute the BM25
        stopwords when they are out of date (:func:`sqlite_rrf.stopwords.stale`), and merge
        the full-text index's segments (FTS5's ``merge``, :attr:`MERGE_PAGES` pages per
        transaction) until there is nothing left to merge. The Store's writes do the same
        after they commit, when the lock is free; ``sqlite-rrf maintain DB`` runs this.
        Returns what was done: ``codes_filled``, ``codes_packed``, ``stopwords_refreshed``,
        ``fts_merges`` (transactions that merged something)."""
        from .stopwords import stale

        if self.readonly:
            raise StoreError(f"{self.path} is read-only (read-only media or permissions): "
                             "there is nothing maintain can do")
        packed_before = self._packed()
        filled = self.fill_codes()  # ends with pack_codes()
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
        return {"codes_filled": filled, "codes_packed": packed,
                "stopwords_refreshed": refreshed, "fts_merges": merges}

    def _packed(self) -> int:
        return self.conn.execute(
            "SELECT coalesce(sum(n), 0) FROM episodes_code_blocks").fetchall()[0][0]

    def add(self, content: str, *, id: Optional[str] = None, embedding: Optional[Vector] = None,
            created_at: Optional[int] = None, accessed_at: Optional[int] = None,
            access_count: int = 0, importance: str = "normal", kind: Optional[str] = None,
            metadata: Any = None, scope: str = "") -> str:
        """Add one episode; returns its id (a new uuid4 hex when not given). Without
        ``embedding`` the store's embedder embeds ``content`` (if there is one). ``scope``
        is the memory it belongs to (a project, a user; ``''``: the shared memory).
        Without ``id``, a text the scope already has is not stored twice: that episode is
        refreshed and its id returned (:meth:`add_many`)."""
        return self.add_many([dict(id=id, content=content, embedding=embedding,
                                   created_at=created_at, accessed_at=accessed_at,
                                   access_count=access_count, importance=importance,
                                   kind=kind, metadata=metadata, scope=scope)])[0]

    def add_many(self, episodes: Iterable[Mapping[str, Any]], *,
                 progress: Optional[bool] = None, replace: bool = False,
                 labels: Optional[Sequence[str]] = None, dedupe: bool = True) -> Written:
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
        rows = self._prepare(episodes, progress, labels, replace=replace, dedupe=dedupe)
        self._write(self._UPSERT if replace else self._INSERT, rows)
        return Written([r["id"] for r in rows],
                       [i for i, r in enumerate(rows) if r.get("duplicate")],
                       [i for i, r in enumerate(rows) if r.get("repeat")])

    def fill_keys(self) -> int:
        """Compute the pending ``content_key`` of episodes written by other clients (or
        whose content they changed), which :meth:`add_many` needs to find a text already
        stored, and return how many were computed. Each batch of
        :data:`sqlite_rrf.dedupe.KEYS_BATCH` is its own transaction; with none pending
        this is one indexed read and takes no write lock."""
        if self.readonly:
            return 0
        done = 0
        while self.conn.execute(
                "SELECT 1 FROM episodes INDEXED BY idx_episodes_content_key "
                "WHERE content_key IS NULL LIMIT 1").fetchall():
            with transaction(self.conn):
                n = _dedupe.fill_pending(self.conn)
            done += n
            if not n:
                break
        return done

    def _embed_row(self, row: Dict[str, Any]) -> None:
        """Embed one row in the write transaction (a row that looked like a duplicate
        and was not embedded, whose twin was deleted before the write)."""
        if self.embedder is not None:
            emb, n = blob(self.embedder.embed(row["content"]), "embedder output")
            check_dim(n, self.dim)
            row["embedding"] = emb

    def upsert(self, content: str, *, id: str, embedding: Optional[Vector] = None,
               importance: str = "normal", kind: Optional[str] = None,
               metadata: Any = None, created_at: Optional[int] = None,
               scope: str = "") -> str:
        """Insert the episode ``id`` or replace its content, embedding, importance,
        kind, metadata and scope (its times and access count are kept)."""
        rows = self._prepare([dict(id=id, content=content, embedding=embedding,
                                   importance=importance, kind=kind, metadata=metadata,
                                   created_at=created_at, scope=scope)], None)
        self._write(self._UPSERT, rows)
        return id

    def update(self, id: str, *, content: Any = UNSET, importance: Any = UNSET,
               kind: Any = UNSET, metadata: Any = UNSET, scope: Any = UNSET,
               embedding: Any = UNSET) -> Episode:
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
        ep = dict(id=id, content=new_content, embedding=embedding,
                  importance=old.importance if importance is UNSET else importance,
                  kind=old.kind if kind is UNSET else kind,
                  metadata=old.metadata if metadata is UNSET else metadata,
                  scope=old.scope if scope is UNSET else scope,
                  created_at=old.created_at)
        rows = self._prepare([ep], None)
        self._write(self._UPSERT, rows)
        got = self.get(id)
        assert got is not None
        return got

    def missing_embeddings(self) -> int:
        """How many episodes have no embedding (what :meth:`embed_missing` would fill)."""
        return self.conn.execute(
            "SELECT count(*) FROM episodes WHERE embedding IS NULL").fetchall()[0][0]

    def embed_missing(self, *, batch_size: int = 64, progress: Optional[bool] = None,
                      limit: Optional[int] = None) -> int:
        """Embed the episodes that have no embedding, oldest rowid first, with the store's
        embedder; returns how many were embedded.

        Each batch of ``batch_size`` episodes is written in its own transaction, all or
        nothing, so an interrupted run keeps every finished batch and the next run goes on
        from there. An episode rewritten by another client while its batch was embedding is
        left for the next run. ``progress`` shows a progress bar (default: on a terminal);
        ``limit`` stops after that many episodes.
        """
        if self.embedder is None:
            raise StoreError("embed_missing: this store has no embedder (attach_embedder)")
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise StoreError(f"batch_size: must be a positive integer, got {batch_size!r}")
        total = self.missing_embeddings()
        if limit is not None:
            total = min(total, limit)
        from .embed import _progress_bar, _stderr_isatty

        if progress is None:
            progress = total > 0 and _stderr_isatty()
        bar = _progress_bar(total, "embedding", unit="episode") if progress else None
        seen, embedded, after = 0, 0, 0
        try:
            while seen < total:
                rows = self.conn.execute(
                    "SELECT rowid, content FROM episodes WHERE embedding IS NULL AND rowid > ? "
                    "ORDER BY rowid LIMIT ?", (after, min(batch_size, total - seen))).fetchall()
                if not rows:
                    break
                after = rows[-1][0]
                vecs = self.embedder.embed_many([c for _, c in rows], progress=False)
                updates = []
                for (rowid, content), v in zip(rows, vecs):
                    emb, n = blob(v, "embedder output")
                    check_dim(n, self.dim)
                    updates.append((emb, rowid, content))
                with transaction(self.conn):
                    self.conn.execute(
                        "INSERT OR IGNORE INTO rrf_meta VALUES ('embedding_dim', ?)",
                        (len(updates[0][0]) // 4,))
                    written = 0
                    for update in updates:
                        self.conn.execute(
                            "UPDATE episodes SET embedding = ? WHERE rowid = ? AND content = ? "
                            "AND embedding IS NULL", update)
                        written += self.conn.changes()
                seen += len(rows)
                embedded += written
                if bar is not None:
                    bar.update(len(rows))
        finally:
            if bar is not None:
                bar.close()
        return embedded

    def delete(self, id: str) -> bool:
        """Delete the episode ``id``; True if it existed."""
        if self.readonly:
            raise StoreError(f"{self.path} is read-only (read-only media or permissions): "
                             "nothing was deleted")
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
            self._wrote(1)
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
            raise StoreError(f"{self.path} is read-only (read-only media or permissions): "
                             "nothing was deleted")
        try:
            with transaction(self.conn):
                found = self._existing_ids(ids)
                missing = [i for i in ids if i not in found]
                if missing:
                    raise StoreError(f"id: no episode with id {missing[0]!r}"
                                     + (f" (nor {len(missing) - 1} more)"
                                        if len(missing) > 1 else "")
                                     + "; nothing was deleted")
                self._merging(True)
                for i in range(0, len(ids), 500):
                    chunk = ids[i:i + 500]
                    self.conn.execute(f"DELETE FROM episodes WHERE id IN "
                                      f"({','.join('?' * len(chunk))})", chunk)
                    self._merge_index()
                self._merging(False)
        except (apsw.BusyError, apsw.LockedError):
            raise StoreError(self._busy_message()) from None
        if ids:
            self._wrote(len(ids))
        return len(ids)

    def get(self, id: str) -> Optional[Episode]:
        """The episode ``id``, or None."""
        rows = self.conn.execute(
            "SELECT id, content, embedding, created_at, accessed_at, access_count, importance, "
            "kind, metadata, rowid, scope FROM episodes WHERE id = ?", (id,)).fetchall()
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
        return Episode(eid, content, vec, created, accessed, count, imp, kind, meta, rowid,
                       scope)

    def count(self) -> int:
        """How many episodes are stored."""
        return self.conn.execute("SELECT count(*) FROM episodes").fetchall()[0][0]

    # ---- recall ----

    def recall(self, query: str, limit: Optional[int] = None, *,
               weights: Optional[Union[Sequence[float], Mapping[str, float]]] = None,
               k: Optional[float] = None, pool: Optional[str] = None,
               pool_size: Optional[int] = None, bm25_limit: Optional[int] = None,
               touch: bool = True, force: bool = False,
               qvec: Optional[Vector] = None, profile: Optional[str] = None,
               alpha: Optional[float] = None, min_similarity: Optional[float] = None,
               now: Optional[int] = None, session: Optional[str] = None,
               scope: Union[None, str, Sequence[str]] = None, kind: Optional[str] = None,
               since: Optional[int] = None, until: Optional[int] = None,
               oversample: Optional[int] = None, topic_gate: bool = False,
               collapse: bool = True,
               min_relevance: Optional[float] = None,
               time_expressions: bool = True,
               time_weight: Optional[float] = None) -> RecallResult:
        """The top ``limit`` episodes for ``query`` by the recall statement of the
        chosen pool and profile (:func:`sqlite_rrf.statements.recall_statement`): BM25,
        vector similarity, recency and access fused.

        Every option left as None takes the statement's own default
        (:func:`sqlite_rrf.statements.recall_defaults`, written once in
        ``sql/recall/params.sql``). ``weights`` is ``(bm25, vector, recency, access)`` or
        a dict with those keys (0 turns a list off); ``k`` is the RRF constant; ``pool``
        is one of :data:`POOL_MODES` (``'recent'``: the most recently accessed episodes;
        ``'all'``: the ``pool_size`` nearest of all episodes, exactly; ``'quantized'``:
        the same through 1-bit codes, ``oversample`` times as many candidates rescored
        exactly; ``'knn'``: sqlite-vec's); ``bm25_limit`` is the BM25 list's depth.
        ``profile`` chooses the fusion (:data:`PROFILES`; the default ``'hybrid'`` adds
        the cosine and the BM25 score, each relative to the query's best, with recency,
        use and importance as bounded nudges; ``'rrf'`` is DESIGN.md's four-list RRF);
        ``alpha`` weighs cosine against BM25 in ``'hybrid'`` and ``'convex'``; ``min_similarity``
        drops candidates with no BM25 hit whose similarity is below it; ``now`` (ms)
        fixes the clock for ages and for the query's time expressions: with
        ``time_expressions`` (the default) a time the query names ("yesterday", "last
        week", "in May", "two months ago": :mod:`sqlite_rrf.timeexpr`, resolved against
        ``now``) is a window, and in profile ``'hybrid'`` the episodes created in it gain
        ``time_weight`` of relevance (default in ``params.sql``; 0 turns it off); it is a
        signal, never a filter. ``qvec`` gives the query vector instead of the
        embedder's. ``scope``, ``kind``, ``since`` and ``until`` (ms, on ``created_at``;
        ``since`` inclusive, ``until`` exclusive) keep only the episodes that match, in
        both lists: the BM25 list is the best of the matching rows, the vector pool the
        best or most recent of them. ``scope`` is None (every scope), a str (that scope;
        ``''`` is the shared scope), or a list or tuple of two (any of them, in one
        ranking: ``("shop", "")`` is the project and the shared scope; the statement's
        ``:scope`` and ``:scope2``).

        The statement runs in a read transaction, which never blocks a writer. Then
        ``touch`` marks the returned episodes accessed (``accessed_at = now``,
        ``access_count + 1``) in a short write transaction of its own, waiting at most
        :attr:`TOUCH_PATIENCE` (50 ms) for another process's write lock; a touch that
        cannot be made (the lock busy, a read-only database, a full disk, an I/O error)
        never fails the recall: ``result.touched`` is False and ``result.touch_error`` says
        why. With ``touch=False`` nothing is written; :meth:`touch` makes the touch later.

        Then the hits are deduplicated and the newest fact put first
        (:func:`sqlite_rrf.diversify.diversify`, unless ``collapse=False``): near-duplicates
        fill one slot, the newest of them, whose ``duplicates`` says how many others it
        stands for; among hits about the same thing whose scores nearly tie, the newer
        ranks first (a correction before the fact it corrects). The freed slots are filled
        from further down the ranking.

        Each hit carries ``relevance``, in [0, 1] and absolute: the same number means the
        same for every query (:func:`sqlite_rrf.relevance.relevance`, from the hit's cosine
        and its BM25 score as a share of the query's IDF mass). ``min_relevance`` is a
        floor applied after the ranking: when no hit reaches it, the result is empty and
        ``result.reason`` says so; otherwise the hits are returned as ranked
        (:func:`sqlite_rrf.relevance.above_floor`). Its default here is None, no floor: a library caller
        gets the whole ranking with the relevance to judge it by; the prompt hook and the
        MCP ``recall`` use :data:`sqlite_rrf.relevance.DEFAULT_MIN_RELEVANCE`.

        The topic gate is off unless ``topic_gate=True``: then it skips the recall
        (``result.skipped``) when the query's embedding has cosine > 0.85 with the caller's
        previous query, unless ``force``. The previous query belongs to the caller: this
        Store instance, or, with ``session`` (any text, e.g. an agent's session id), that
        session, remembered in the database by touching recalls so that it holds across
        processes. Two agents sharing a memory never gate each other. The gate is off by
        default because a cosine that high does not mean the same question: a follow-up
        about another painting of the same artist can have 0.96.
        """
        query = recall_query(query)
        if session is not None:
            gate_key(session)  # checks it
        min_relevance = check_min_relevance(min_relevance)
        params = self._recall_params(limit, weights, k, pool, pool_size, bm25_limit, profile,
                                     alpha, min_similarity, now, scope=scope, kind=kind,
                                     since=since, until=until, oversample=oversample,
                                     time_weight=time_weight)
        if time_expressions:  # "last week", "in May": a window around now (timeexpr)
            window = resolve_time(query, now_ms() if now is None else now)
            if window is not None:
                params["time_from"], params["time_to"] = window.start, window.end
        qblob = None
        qarr = None
        if qvec is not None:
            qblob, n = blob(qvec, "qvec")
        elif self.embedder is not None and has_text(query):
            qblob, n = blob(self.embedder.embed(query), "query embedding")
        if qblob is not None:
            check_dim(n, self.dim, "qvec")
            qarr = np.frombuffer(qblob, "<f4").astype(np.float64)
            qarr /= np.linalg.norm(qarr)
            held = self._gate.holds(qarr, session, force) if topic_gate else None
            if held is not None:
                return RecallResult([], query, skipped=True, gate_cosine=held[0],
                                    params=params, reason=held[1])
        knn.check_pool(self.conn, params, qblob)
        bindings = dict(params, query=query, qvec=qblob)
        if collapse:  # more rows than asked: diversify fills the slots it frees
            bindings["limit"] = candidates(params["limit"])
        hits: List[RecallHit] = []
        warnings: List[str] = list(self.schema_warnings)
        # the unusable vectors keep pending codes: a seek finds them, on every recall
        pending_bad = self._pending_faults(warnings) if qblob is not None else {}
        for attempt in range(2):
            bad = {**self._bad_vectors, **pending_bad}
            bindings["skip_vectors"] = json.dumps(sorted(bad)) if bad else None
            try:
                hits = self._run_recall(params, bindings)
                break
            except apsw.SQLError as e:
                # a stored vector the statement cannot use (e.g. NaN written by a client
                # without the extension): find such rows, leave them out, say which
                if qblob is None or attempt or "vec_cosine:" not in str(e):
                    raise
                found = self._find_bad_vectors()
                if not found:
                    raise
                self._bad_vectors.update(found)
        for rowid, why in sorted({**self._bad_vectors, **pending_bad}.items()):
            warnings.append(f"episode rowid {rowid} has an embedding that cannot be used "
                            f"({why}): it is left out of the vector list; rewrite its embedding "
                            "(or set it to NULL and run `sqlite-rrf embed`)")
        if collapse:
            hits = diversify(self.conn, hits, params["limit"], query)
        with transaction(self.conn, write=False):
            hits = with_relevance(self.conn, query, hits)
        hits, floor_reason = above_floor(hits, min_relevance)
        if qarr is not None:
            self._gate.remember(qarr)
        touched, why = False, None
        args = None
        if hits or (session is not None and qarr is not None):
            args = ([h.rowid for h in hits], session, qarr)
            if touch:
                touched, why = self._touch(*args)
                args = None
        return RecallResult(hits, query, params=params, touched=touched, touch_error=why,
                            warnings=warnings, _touch_args=args, reason=floor_reason)

    def _run_recall(self, params: Dict[str, Any], bindings: Dict[str, Any]) -> List[RecallHit]:
        """The statement in one read transaction (one snapshot, no write lock)."""
        hits: List[RecallHit] = []
        with transaction(self.conn, write=False):
            defaults = recall_defaults()
            sql = recall_statement(params["pool"] or defaults["pool"],
                                   params["profile"] or defaults["profile"])
            for row in self.conn.execute(sql, bindings):
                hits.append(RecallHit(*row[:9], json.loads(row[9]) if row[9] else {}, *row[10:]))
        return hits

    #: Pending codes whose vectors a recall checks (:meth:`_pending_faults`).
    PENDING_CHECK = 10_000

    def _pending_faults(self, warnings: List[str]) -> Dict[int, str]:
        """``{rowid: fault}`` of the vectors with a pending code that the recall cannot use
        (zero, NaN, infinite, wrong size: :func:`_vector_fault`). A vector that cannot be
        used never gets a code (:meth:`fill_codes`, migration 0009), so these are all of
        them, found by a seek of the pending codes. Beyond :attr:`PENDING_CHECK` pending
        codes the rest are not read, and ``warnings`` says so."""
        # the answer holds until a commit: this connection's (total_changes) or another's
        # (data_version), so a recall after no write reads nothing here
        key = (self.conn.execute("PRAGMA data_version").fetchone()[0], self.conn.total_changes())
        seen = self._pending_seen
        if seen is not None and seen[0] == key:
            warnings.extend(seen[2])
            return dict(seen[1])
        before = len(warnings)
        rows = self.conn.execute(
            "SELECT c.rowid, v.embedding FROM episodes_codes AS c "
            "INDEXED BY idx_episodes_codes_pending JOIN episodes_vectors AS v ON v.rowid = c.rowid "
            "WHERE c.code IS NULL ORDER BY c.rowid LIMIT ?", (self.PENDING_CHECK + 1,)).fetchall()
        if len(rows) > self.PENDING_CHECK:
            rows = rows[:self.PENDING_CHECK]
            warnings.append(
                f"more than {self.PENDING_CHECK} sign codes are pending (vectors written by "
                "another client): only the first were checked for vectors the recall cannot "
                "use; open the database with a writable Store, or run `sqlite-rrf check DB "
                "--repair`, to compute them")
        dim = self.dim
        found: Dict[int, str] = {}
        for rowid, emb in rows:
            fault = _vector_fault(emb, dim)
            if fault is not None:
                found[rowid] = fault
        self._pending_seen = (key, dict(found), warnings[before:])
        return found

    def _find_bad_vectors(self, chunk: int = 4096) -> Dict[int, str]:
        """``{rowid: fault}`` of every stored embedding the recall cannot use: NaN or
        infinite values, zero norm, or a size other than the database's dimension. Runs
        only after a recall met one (it reads every embedding)."""
        bad: Dict[int, str] = {}
        dim = self.dim
        after = -(2**63)
        while True:
            rows = self.conn.execute(
                "SELECT rowid, embedding FROM episodes WHERE embedding IS NOT NULL AND rowid > ? "
                "ORDER BY rowid LIMIT ?", (after, chunk)).fetchall()
            if not rows:
                return bad
            after = rows[-1][0]
            for rowid, emb in rows:
                fault = _vector_fault(emb, dim)
                if fault is not None:
                    bad[rowid] = fault

    #: How long a touch waits for the write lock before it gives up (seconds): a touch is
    #: best effort, and a recall never waits longer than this for another process's write.
    TOUCH_PATIENCE = 0.05

    def touch(self, result: RecallResult) -> RecallResult:
        """Mark the hits of ``result``, a recall made with ``touch=False``, accessed (and
        remember its session's query for the topic gate), as ``recall(touch=True)`` would
        have; returns the result with ``touched`` and ``touch_error`` set. For a caller that
        shows the hits first and touches after (the hook prints before it touches). Best
        effort, like every touch: it waits at most :attr:`TOUCH_PATIENCE` for the write lock,
        and a failure is reported in the returned result, never raised."""
        args = result._touch_args
        if args is None or result.touched:
            return result
        touched, why = self._touch(*args)
        return dataclasses.replace(result, touched=touched, touch_error=why, _touch_args=None)

    def _touch(self, rowids: List[int], session: Optional[str],
               qarr: Optional[np.ndarray]) -> Tuple[bool, Optional[str]]:
        """Mark ``rowids`` accessed (and remember the session's query) in one short write
        transaction, waiting at most :attr:`TOUCH_PATIENCE` for the write lock. Returns
        (done, why not): any failure (the lock busy, a full disk, read-only media, an I/O
        error) leaves the recall as it is."""
        not_done = "so the recalled episodes were not touched"
        if self.readonly and self.opened_as:
            return False, f"the recalled episodes were not touched: {self.opened_as}"
        if self.readonly:
            return False, f"the database is read-only, {not_done}"
        now = now_ms()
        wait_ms = max(0, int(self.TOUCH_PATIENCE * 1000))
        try:
            with patience(self.conn, wait_ms, self._busy_timeout_ms):
                with transaction(self.conn):
                    self.conn.executemany(
                        "UPDATE episodes SET accessed_at = ?, access_count = access_count + 1 "
                        "WHERE rowid = ?", [(now, r) for r in rowids])
                    if session is not None and qarr is not None:
                        self.conn.execute("INSERT OR REPLACE INTO rrf_meta VALUES (?, ?)",
                                          session_row(session, qarr))
            return True, None
        except (apsw.BusyError, apsw.LockedError):
            return False, (f"another process held the write lock (waited {wait_ms} ms), "
                           f"{not_done}")
        except apsw.FullError:
            return False, f"the disk is full, {not_done}"
        except apsw.ReadOnlyError as e:
            return False, f"the database is read-only ({e}), {not_done}"
        except apsw.Error as e:
            return False, f"the touch could not be written ({e}), {not_done}"

    #: Validate recall options; returns the statement's bindings (None = default):
    #: :func:`sqlite_rrf.checks.recall_params` (the CLI checks its options with it).
    _recall_params = staticmethod(recall_params)

    # ---- stats ----

    def stats(self) -> Dict[str, Any]:
        """Counts and facts about the database (what ``sqlite-rrf stats`` prints)."""
        (n, n_emb, oldest, newest, accesses) = self.conn.execute(
            "SELECT count(*), count(embedding), min(created_at), max(created_at), "
            "coalesce(sum(access_count), 0) FROM episodes").fetchall()[0]
        by_imp = dict(self.conn.execute(
            "SELECT importance, count(*) FROM episodes GROUP BY importance").fetchall())
        from .migrations import current_version
        page_count = self.conn.execute("PRAGMA page_count").fetchall()[0][0]
        page_size = self.conn.execute("PRAGMA page_size").fetchall()[0][0]
        return {
            "path": self.path, "episodes": n, "with_embedding": n_emb,
            "embedding_model": self.meta("embedding_model"), "embedding_dim": self.dim,
            "oldest_created_at": oldest, "newest_created_at": newest,
            "total_accesses": accesses, "by_importance": by_imp,
            "schema_version": current_version(self.conn),
            "size_bytes": page_count * page_size,
            "bm25_stopwords": self.stopwords,
        }
