"""Helpers on an apsw connection that the store's modules share: opening a file (read-only
media included), telling a sqlite-rrf database from another application's before anything
is written, a transaction that commits or rolls back as one, a bounded wait for the write
lock, and a value from ``rrf_meta``."""

from __future__ import annotations

import itertools
import os
import urllib.parse
from contextlib import contextmanager
from typing import Any, Iterator, List, Optional, Tuple

import apsw

#: The first migration's name (``sql/migrations/0001_episodes.sql``): a ``schema_migrations``
#: table whose version 1 has another name is another application's.
FIRST_MIGRATION = "episodes"


def _header(path: str) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read(100)
    except OSError:
        return b""


def is_wal_file(path: str) -> bool:
    """True when the SQLite file at ``path`` is in WAL mode (its header's read and write
    versions are 2)."""
    head = _header(path)
    return (
        len(head) == 100 and head.startswith(b"SQLite format 3\x00") and head[18:20] == b"\x02\x02"
    )


def on_read_only_media(path: str) -> bool:
    """True when the file system holding ``path`` is mounted read-only (``ST_RDONLY``):
    nothing, in any process, can write the file through this mount."""
    try:
        return bool(os.statvfs(path).f_flag & os.ST_RDONLY)
    except (OSError, AttributeError):
        return False


def _size(path: str) -> int:
    try:
        return os.path.getsize(path)
    except OSError:
        return 0


def _immutable(path: str) -> apsw.Connection:
    uri = "file:" + urllib.parse.quote(os.path.abspath(path)) + "?immutable=1"
    return apsw.Connection(uri, flags=apsw.SQLITE_OPEN_READONLY | apsw.SQLITE_OPEN_URI)


#: A file system with less free space than this (bytes) counts as full when SQLite cannot
#: create a WAL database's ``-shm`` file there.
FULL_BELOW = 1 << 20

#: The ``rrf_meta`` key a copy made by ``sqlite-rrf restore --refresh`` carries: the
#: replica URL it is restored from. Such a copy is replaced whole (a rename) and never
#: written in place, so it is opened as immutable: no lock, no journal-mode switch, no
#: ``-wal``/``-shm``, and a connection keeps reading the restore it opened.
REPLICA_KEY = "read_replica_of"
#: Why such a copy was opened as immutable (the Store's ``opened_as``).
REPLICA_OPENED_AS = (
    "it is a read replica kept by `sqlite-rrf restore --refresh`, so it was opened as "
    "immutable (read as it is, without locks; open it again to read the next refresh)"
)


def mark_replica(path: str, url: str) -> None:
    """Make the restored copy at ``path`` (no other connection has it open) a read
    replica of ``url``: DELETE journal mode (a reader needs no ``-wal``/``-shm``) and its
    :data:`REPLICA_KEY`."""
    conn = apsw.Connection(path)
    try:
        conn.execute("PRAGMA journal_mode = DELETE").fetchall()
        conn.execute(
            "INSERT OR REPLACE INTO rrf_meta(key, value) VALUES (?, ?)", (REPLICA_KEY, url)
        )
    finally:
        conn.close()


def replica_of(path: str) -> Optional[str]:
    """The replica URL a refreshed copy at ``path`` was restored from (its
    :data:`REPLICA_KEY`), or None when ``path`` is not such a copy (or not a database).
    Reads the main file as it is (``immutable``): never a ``-wal`` beside it."""
    if not os.path.isfile(path) or not _header(path).startswith(b"SQLite format 3\x00"):
        return None
    try:
        conn = _immutable(path)
    except apsw.Error:
        return None
    try:
        value = meta(conn, REPLICA_KEY)
    except apsw.Error:
        value = None
    finally:
        conn.close()
    return value if isinstance(value, str) else None


def _replica_connection(path: str) -> Optional[apsw.Connection]:
    """An immutable connection to ``path`` when it is a refreshed copy in rollback mode
    (how ``restore --refresh`` leaves it), else None. Only a file whose header says
    rollback mode is looked at: the product's databases are in WAL mode."""
    head = _header(path)
    if len(head) < 100 or not head.startswith(b"SQLite format 3\x00") or head[18:20] != b"\x01\x01":
        return None
    try:
        conn = _immutable(path)
    except apsw.Error:
        return None
    try:
        if isinstance(meta(conn, REPLICA_KEY), str):
            return conn
    except apsw.Error:
        pass
    conn.close()
    return None


#: The SQL function (registered on every connection :func:`open_connection` makes) that
#: decodes a BLOB as UTF-8 with each invalid sequence replaced by U+FFFD.
REPLACE_FUNCTION = "rrf_py_utf8_replace"


def decode_replacing(data: Any) -> Any:
    """``data`` (bytes) decoded as UTF-8, each invalid sequence made U+FFFD (Python's
    ``errors="replace"``); anything else is returned as it is."""
    if isinstance(data, (bytes, bytearray, memoryview)):
        return bytes(data).decode("utf-8", "replace")
    return data


_COPIES = itertools.count(1)


class TextSafeCursor(apsw.Cursor):
    """The cursor of every connection :func:`open_connection` makes: a row whose TEXT is
    not valid UTF-8 (another client can store any bytes as TEXT) is read with each invalid
    sequence replaced by U+FFFD instead of failing the whole read.

    Reading costs nothing more until such a row comes: then the statement is run again
    once into a TEMP table, which is read back with each TEXT value read as a BLOB and
    decoded by :data:`REPLACE_FUNCTION`, the rows already returned skipped. Statements that
    are not a query (``PRAGMA``, ``… RETURNING``) cannot be run so and still fail."""

    _sql_text: Optional[str] = None
    _bindings: Any = None
    _fallback: Optional[Iterator[Any]] = None
    _returned = 0
    _multi = False  # more than one statement: rows are counted per statement
    _counted_sql: Optional[str] = None

    def execute(self, statements: str, bindings: Any = None, **kw: Any) -> Any:
        self._sql_text, self._bindings = statements, bindings
        self._fallback, self._returned, self._counted_sql = None, 0, None
        self._multi = isinstance(statements, str) and ";" in statements.strip().rstrip(";")
        super().execute(statements, bindings, **kw)
        return self

    def __next__(self) -> Any:
        if self._fallback is not None:
            return next(self._fallback)
        try:
            row = super().__next__()
        except UnicodeDecodeError:
            self._fallback = self._replaced_rows()
            return next(self._fallback)
        if self._multi:
            sql = self.sql
            if sql != self._counted_sql:
                self._counted_sql, self._returned = sql, 0
        self._returned += 1
        return row

    def __iter__(self) -> "TextSafeCursor":
        return self

    def fetchall(self) -> List[Any]:
        return list(self)

    def fetchone(self) -> Any:
        return next(self, None)

    def _replaced_rows(self) -> Iterator[Any]:
        """The rest of the current statement's rows, run again with its TEXT results
        decoded by :func:`decode_replacing`; then the next statements' rows, if any."""
        current = self.sql or ""
        sql = current.strip().rstrip(";").strip()
        whole = (self._sql_text or "").strip().rstrip(";").strip()
        bindings = self._bindings if whole == sql else None
        if bindings is None and self.bindings_count:
            sql = (self.expanded_sql or sql).strip().rstrip(";").strip()
        skip = self._returned if not self._multi or self._counted_sql == current else 0
        conn = self.connection
        if not self._multi:
            super().close(force=True)  # its read ends here; the copy below reads anew
        # the statement's rows copied into a TEMP table (a CTE around it could nest too
        # deep), in their order, then read back with TEXT made valid
        table = f"temp.rrf_text_safe_{next(_COPIES)}"
        conn.cursor().execute(f"CREATE TEMP TABLE {table[5:]} AS {sql}", bindings)
        try:
            cols = [r[1] for r in conn.execute(f"PRAGMA temp.table_info({table[5:]})")]
            wrapped = (
                "SELECT "
                + ", ".join(
                    f"CASE WHEN typeof(\"{c}\") = 'text' THEN "
                    f'{REPLACE_FUNCTION}(CAST("{c}" AS BLOB)) ELSE "{c}" END'
                    for c in (c.replace('"', '""') for c in cols)
                )
                + f" FROM {table} WHERE rowid > ? ORDER BY rowid"
            )
            rows = conn.cursor().execute(wrapped, (skip,)).fetchall()
        finally:
            try:
                conn.execute(f"DROP TABLE IF EXISTS {table}")
            except apsw.LockedError:  # another statement of the connection is active
                conn.execute(f"DELETE FROM {table}")
        yield from rows
        if not self._multi:
            return
        while True:  # the rest of this statement was read above: go on with the next ones
            try:
                row = super().__next__()
            except UnicodeDecodeError:
                continue
            except StopIteration:
                return
            if self.sql != current:
                self._counted_sql, self._returned, self._fallback = self.sql, 1, None
                yield row
                yield from self  # rows of the statements after it, read as usual
                return


def _prepare(conn: apsw.Connection) -> apsw.Connection:
    """Give ``conn`` :class:`TextSafeCursor` and :data:`REPLACE_FUNCTION`."""
    fn: Any = decode_replacing
    conn.create_scalar_function(REPLACE_FUNCTION, fn, 1, deterministic=True)
    conn.cursor_factory = TextSafeCursor
    return conn


def open_connection(path: str, *, readonly: bool = False) -> Tuple[apsw.Connection, Optional[str]]:
    """Connect to ``path``; returns the connection and, when it was opened as immutable, why.

    A WAL database needs its ``-shm`` file beside it, which SQLite cannot create on
    read-only media or on a full disk, so a plain open fails there. It is then opened with
    ``immutable=1`` (SQLite reads the main file as it is, without locks or ``-shm``) when
    that is safe:

    * on a file system mounted read-only, when the file has no ``-wal`` content (the last
      writer closed it cleanly): nothing can change the file through that mount;
    * on a full file system, when it has neither ``-wal`` content nor a ``-shm`` file with
      content: no connection has it open (each would have made the ``-shm``), and none can
      open it to write while the disk stays full.

    It is not used when the ``-wal`` file has content (immutable would not read it: recent
    writes would be missing; SQLite opens such a file read-only by itself when its ``-shm``
    exists too), nor when the file is read-only only by permissions (its owner may write it
    meanwhile). A read-only bind mount of a directory that is written through another
    mount is read-only media to this test, yet its file can change: there immutable reads
    could miss or tear concurrent writes.

    Every row reads whole: TEXT that is not valid UTF-8 is read with U+FFFD for each
    invalid sequence (:class:`TextSafeCursor`).

    A copy that ``sqlite-rrf restore --refresh`` keeps (:data:`REPLICA_KEY`) is opened as
    immutable too: it is replaced by a rename and never written in place, and a plain
    open would look for a ``-wal`` beside it (one left by another file would be read into
    it) and the Store would switch it to WAL."""
    conn, why = _open_connection(path, readonly=readonly)
    return _prepare(conn), why


def _open_connection(path: str, *, readonly: bool) -> Tuple[apsw.Connection, Optional[str]]:
    if path not in (":memory:", "") and os.path.isfile(path):
        replica = _replica_connection(path)
        if replica is not None:
            return replica, REPLICA_OPENED_AS
    if path in (":memory:", "") or not os.path.isfile(path) or not is_wal_file(path):
        flags = (
            apsw.SQLITE_OPEN_READONLY
            if readonly
            else (apsw.SQLITE_OPEN_READWRITE | apsw.SQLITE_OPEN_CREATE)
        )
        return apsw.Connection(path, flags=flags), None
    if on_read_only_media(path) and _size(path + "-wal") == 0:
        return _immutable(path), (
            "the file is on read-only media, so it was opened as "
            "immutable (read as it is, without locks)"
        )
    flags = (
        apsw.SQLITE_OPEN_READONLY
        if readonly
        else (apsw.SQLITE_OPEN_READWRITE | apsw.SQLITE_OPEN_CREATE)
    )
    conn = apsw.Connection(path, flags=flags)
    try:
        conn.execute("SELECT count(*) FROM sqlite_master").fetchall()  # makes the -shm
    except (apsw.IOError, apsw.FullError):
        try:
            st = os.statvfs(path)
            full = st.f_bavail * st.f_frsize < FULL_BELOW
        except OSError:
            full = False
        if not (full and _size(path + "-wal") == 0 and _size(path + "-shm") == 0):
            raise
        conn.close()
        return _immutable(path), (
            "the disk is full and SQLite could not create the "
            "database's -shm file, so it was opened as immutable (read "
            "as it is, without locks)"
        )
    except apsw.Error:
        pass  # said by the caller's first statement (Store._check_ours)
    return conn, None


def foreign(conn: apsw.Connection) -> Optional[str]:
    """Why the database open on ``conn`` is another application's, or None when it is a
    sqlite-rrf database (or has no tables yet). It only reads ``sqlite_master`` and
    ``schema_migrations``, so it is asked before anything is written (the WAL switch
    included)."""
    tables: List[str] = [
        n
        for (n,) in conn.execute(
            "SELECT name FROM sqlite_master WHERE type IN ('table', 'view') "
            "AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\' ORDER BY name"
        )
    ]
    if not tables:
        return None
    if "schema_migrations" not in tables:
        shown = ", ".join(tables[:5]) + (", …" if len(tables) > 5 else "")
        return (
            f"it has tables ({shown}) but not sqlite-rrf's schema_migrations, so it "
            "belongs to another application"
        )
    cols = {r[1] for r in conn.execute("PRAGMA main.table_info(schema_migrations)")}
    if not {"version", "name", "checksum", "applied_at"} <= cols:
        return (
            "its schema_migrations table is another application's (columns "
            f"{', '.join(sorted(cols))})"
        )
    first = conn.execute("SELECT name FROM schema_migrations WHERE version = 1").fetchall()
    if first and first[0][0] != FIRST_MIGRATION:
        return (
            f"its schema_migrations table records migration 1 as {first[0][0]!r}, not "
            f"sqlite-rrf's {FIRST_MIGRATION!r}"
        )
    return None


@contextmanager
def patience(conn: apsw.Connection, ms: int, restore: int) -> Iterator[None]:
    """Wait at most ``ms`` milliseconds for a lock inside the ``with`` block (the busy
    timeout), then ``restore`` it."""
    conn.set_busy_timeout(int(ms))
    try:
        yield
    finally:
        conn.set_busy_timeout(int(restore))


@contextmanager
def transaction(conn: apsw.Connection, *, write: bool = True) -> Iterator[None]:
    """Run the ``with`` block in one transaction: committed when the block ends, rolled
    back when anything (even KeyboardInterrupt) escapes it or the commit fails.

    ``write`` (the default) begins with ``BEGIN IMMEDIATE``: the write lock is taken first,
    waiting out the busy timeout, so that a read-then-write cannot fail half way because
    another writer came first. ``write=False`` is a read transaction (one snapshot, no
    write lock). A failing ``BEGIN`` raises with nothing to roll back.
    """
    conn.execute("BEGIN IMMEDIATE" if write else "BEGIN")
    try:
        yield
        conn.execute("COMMIT")
    except BaseException:
        if not conn.getautocommit():
            conn.execute("ROLLBACK")
        raise


def meta(conn: apsw.Connection, key: str) -> Any:
    """The value of ``key`` in ``rrf_meta``, or None."""
    rows = conn.execute("SELECT value FROM rrf_meta WHERE key = ?", (key,)).fetchall()
    return rows[0][0] if rows else None
