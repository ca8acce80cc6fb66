"""Helpers on an apsw connection that the store's modules share: opening a file (read-only
media included), telling a sqlite-rrf database from another application's before anything
is written, a transaction that commits or rolls back as one, a bounded wait for the write
lock, and a value from ``rrf_meta``."""

from __future__ import annotations

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
    could miss or tear concurrent writes."""
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
