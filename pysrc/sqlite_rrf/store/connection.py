"""The Store's connection: the open file, its busy timeout, read-only state, journal mode,
the TEMP triggers that guard and code vectors on this connection, and the database's
model and dimension as ``rrf_meta`` records them.

:class:`Connection` is the base of every part of :class:`~sqlite_rrf.store.Store`: it
declares what the open (``Store.__init__``) sets, and the reads every part uses
(:meth:`~Connection.meta`, :attr:`~Connection.dim`, :meth:`~Connection.count`).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Tuple, TypeVar

import apsw

from ..core.gate import TopicGate
from ..core.sqlite import REPLICA_OPENED_AS, foreign, meta as _meta
from ..core.stopwords import StopwordsRefresh
from ..core.validate import StoreError

if TYPE_CHECKING:
    from .binding import EmbedderLike

_Self = TypeVar("_Self", bound="Connection")


def now_ms() -> int:
    """Milliseconds since the Unix epoch (the store's time unit)."""
    return int(time.time() * 1000)


class Connection:
    """The open database and what every part of the Store reads through it."""

    #: The file's path as given (``':memory:'`` for an in-memory database).
    path: str
    #: The apsw connection (one Store is for one thread).
    conn: Any
    #: What embeds content and queries (None: explicit embeddings only).
    embedder: Optional[EmbedderLike]
    #: True when the file can only be read (read-only media or permissions): recall
    #: works (without touching), writes raise.
    readonly: bool
    #: Why the file was opened read-only (immutable on read-only media), or None.
    opened_as: Optional[str]
    #: What the open's schema check found and could not repair (a trigger dropped
    #: in a read-only database, the lock busy): named in every recall's warnings.
    schema_warnings: List[str]
    _busy_timeout_ms: int
    _gate: TopicGate
    _stopwords: StopwordsRefresh
    _bad_vectors: Dict[int, str]  # rowid -> why its embedding is unusable
    # _pending_faults' last answer: ((data_version, total_changes), faults, warnings)
    _pending_seen: Optional[Tuple[Tuple[int, int], Dict[int, str], List[str]]]

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

    @property
    def readonly_reason(self) -> str:
        """Why this Store cannot write, for a message (``f"{path} is read-only
        ({store.readonly_reason}): nothing was written"``)."""
        if self.opened_as == REPLICA_OPENED_AS:
            return (
                "a read replica that `sqlite-rrf restore --refresh` replaces whole; "
                "write to the primary"
            )
        return "read-only media or permissions"

    def _busy_message(self) -> str:
        return (
            f"{self.path}: another process held the write lock for the whole busy "
            f"timeout ({self._busy_timeout_ms / 1000:g} s), so nothing was written; "
            "try again when it has finished"
        )

    def _check_ours(self) -> None:
        """Refuse another application's SQLite file before anything is written to it (not
        even the WAL switch): :func:`sqlite_rrf.core.sqlite.foreign` says why. A WAL file this
        connection cannot read (its ``-shm`` cannot be made) is refused with the reason."""
        try:
            why = foreign(self.conn)
        except apsw.CantOpenError:
            from ..core.sqlite import on_read_only_media

            if on_read_only_media(self.path):
                why = (
                    "its -wal file has content but its -shm file is missing, and SQLite "
                    "cannot create that on read-only media (immutable=1 would not read "
                    "the -wal: recent writes would be missing)"
                )
            else:
                why = (
                    "SQLite cannot create its -shm file beside it (the directory is not "
                    "writable for this user), and the file system is writable, so it is "
                    "not opened as immutable (its owner may change it meanwhile)"
                )
            raise StoreError(
                f"{self.path}: this WAL database cannot be read here: {why}. Open it once "
                "where it can be written (its owner, a writable copy)"
            ) from None
        if why is not None:
            raise StoreError(
                f"{self.path} is not a sqlite-rrf database: {why}. sqlite-rrf "
                "opens only its own databases (or a new, empty file); nothing "
                "was written to it"
            ) from None

    def _check_schema_readable(self) -> None:
        """A read-only database cannot be migrated: it must be at this version already."""
        from ..core.migrations import available, current_version

        have, want = current_version(self.conn), max(m.version for m in available())
        if have < want:
            raise StoreError(
                f"{self.path} is read-only and at schema version {have}; this "
                f"sqlite-rrf needs {want}. Open it once where it can be written "
                "(it is migrated then), or copy it somewhere writable"
            )

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

    def __enter__(self: _Self) -> _Self:
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

    def count(self) -> int:
        """How many episodes are stored."""
        return self.conn.execute("SELECT count(*) FROM episodes").fetchall()[0][0]

    # ---- TEMP triggers: this connection's checks and codes ----

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
                "END; END"
            )

    def _code_vectors(self) -> None:
        """On this connection, give every new or changed vector its sign code at once
        (migration 0007's triggers, plain SQL for every client, leave it pending): a TEMP
        trigger, like :meth:`_guard_vectors`'s, so the codes written through a Store are
        never pending."""
        # migration 0009 turns the insert of a code row that exists into "make it
        # pending" (an UPDATE), so both events compute; a zero vector keeps a pending code
        for name, event in (
            ("rrf_episodes_code", "INSERT"),
            ("rrf_episodes_code_update", "UPDATE OF code"),
        ):
            self.conn.execute(
                f"CREATE TEMP TRIGGER IF NOT EXISTS {name} AFTER {event} ON main.episodes_codes "
                "WHEN NEW.code IS NULL BEGIN "
                "UPDATE main.episodes_codes SET code = (SELECT vec_signbits(v.embedding) "
                "FROM main.episodes_vectors AS v WHERE v.rowid = NEW.rowid) "
                "WHERE rowid = NEW.rowid "
                "AND EXISTS (SELECT 1 FROM main.episodes_vectors AS v WHERE v.rowid = NEW.rowid "
                "AND v.embedding != zeroblob(length(v.embedding))); "
                "END"
            )
