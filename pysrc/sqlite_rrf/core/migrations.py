"""Schema migrations over apsw.

The files ``sql/migrations/NNNN_name.sql`` are applied in order. Each one runs in
its own ``BEGIN IMMEDIATE … COMMIT`` together with its row in
``schema_migrations(version, name, checksum, applied_at)``, so a process killed
mid-migration leaves the database at the previous version. Re-running is a no-op;
an applied file whose text changed is refused (checksum); a database migrated by a
newer sqlite-rrf is refused.

A migration may have a knn part, ``knn/NNNN_name.sql``: it runs right after the
migration, in the same transaction, when the database has the knn index
(``episodes_vec``, a sqlite-vec table), so the connection must have loaded
sqlite-vec (a Store does so before migrating).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import sys
import time
from dataclasses import dataclass
from typing import Any, Iterator, List, Optional

import apsw

from .sql_files import sql_dir

_NAME = re.compile(r"^(\d{4})_([a-z0-9_]+)\.sql$")
_KNN_TABLE = "episodes_vec"

_CREATE_TABLE = """
CREATE TABLE IF NOT EXISTS schema_migrations (
  version    INTEGER PRIMARY KEY,
  name       TEXT    NOT NULL,
  checksum   TEXT    NOT NULL,
  applied_at INTEGER NOT NULL
)
"""


class MigrationError(RuntimeError):
    """The database's schema cannot be brought to this code's version; the message
    says why and what to do."""


@dataclass(frozen=True)
class Migration:
    """One numbered migration file."""

    version: int
    name: str
    sql: str
    knn_sql: Optional[str] = None  # knn/NNNN_name.sql: run too when episodes_vec exists

    @property
    def checksum(self) -> str:
        """sha256 of the file's text (line endings normalised)."""
        return hashlib.sha256(self.sql.replace("\r\n", "\n").encode("utf-8")).hexdigest()


#: ``available()``'s last reading of each directory, keyed by the files' names, sizes and
#: modification times: an open reads the migrations' text once per process, not per call.
_READ: dict = {}


def _signature(directory: str) -> tuple:
    """What identifies a directory's migration files as read (names, sizes, mtimes)."""
    sig = []
    for sub in (directory, os.path.join(directory, "knn")):
        if not os.path.isdir(sub):
            continue
        for entry in sorted(os.scandir(sub), key=lambda e: e.name):
            if entry.is_file():
                st = entry.stat()
                sig.append((sub, entry.name, st.st_size, st.st_mtime_ns))
    return tuple(sig)


def available(directory: Optional[str] = None) -> List[Migration]:
    """The migrations shipped with the package (or found in ``directory``), in order.

    The files are read again only when one of them changed since the last call."""
    directory = directory or os.path.join(sql_dir(), "migrations")
    sig = _signature(directory)
    cached = _READ.get(directory)
    if cached is not None and cached[0] == sig:
        return list(cached[1])
    found = _read(directory)
    _READ[directory] = (sig, tuple(found))
    return found


def _read(directory: str) -> List[Migration]:
    """Read and check every migration file of ``directory``."""
    found = []
    for fname in sorted(os.listdir(directory)):
        m = _NAME.match(fname)
        if not m:
            continue
        with open(os.path.join(directory, fname), encoding="utf-8") as f:
            text = f.read()
        knn_sql = None
        if os.path.isfile(os.path.join(directory, "knn", fname)):
            with open(os.path.join(directory, "knn", fname), encoding="utf-8") as f:
                knn_sql = f.read()
        found.append(Migration(int(m.group(1)), m.group(2), text, knn_sql))
    versions = [m.version for m in found]
    if len(set(versions)) != len(versions):
        raise MigrationError(f"two migration files share a version number in {directory}")
    return found


def applied(conn: Any) -> dict:
    """``{version: (name, checksum)}`` recorded in the database (empty if none)."""
    exists = conn.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'schema_migrations'"
    ).fetchall()
    if not exists:
        return {}
    return {
        v: (n, c)
        for v, n, c in conn.execute(
            "SELECT version, name, checksum FROM schema_migrations ORDER BY version"
        )
    }


def current_version(conn: Any) -> int:
    """The highest applied migration version (0 for a new database)."""
    return max(applied(conn), default=0)


def _check(done: dict, migrations: List[Migration]) -> None:
    known = {m.version: m for m in migrations}
    newest = max(known, default=0)
    for version, (name, checksum) in sorted(done.items()):
        if version > newest:
            raise MigrationError(
                f"the database is at schema version {max(done)}, newer than this sqlite-rrf "
                f"knows ({newest}): upgrade sqlite-rrf (pip install -U sqlite-rrf) to open it"
            )
        m = known.get(version)
        if m is None:
            raise MigrationError(
                f"the database records migration {version} ({name}), "
                "which this sqlite-rrf does not have"
            )
        if m.checksum != checksum:
            raise MigrationError(
                f"migration {version:04d}_{m.name}.sql was changed after it was applied to this "
                f"database (checksum {checksum[:12]}… recorded, {m.checksum[:12]}… now). Applied "
                "migrations must not be edited: restore the file and add a new migration instead"
            )


def _has_knn(conn: Any) -> bool:
    return bool(
        conn.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (_KNN_TABLE,)
        ).fetchall()
    )


def _apply_knn_part(conn: Any, m: Migration) -> None:
    """Run ``m``'s knn part. It may read every vector of the vec0 table right after the
    migration rewrote episodes; sqlite-vec reads a vector out of a BLOB of ~1024, and
    with SQLite's default 2 MB page cache, full of the rewrite's dirty pages, those reads
    thrash (50,000 384-d vectors: 12.7 s, against 0.8 s with 64 MiB). So the part runs
    with a 64 MiB cache; the connection's own size is restored afterwards."""
    size = conn.execute("PRAGMA cache_size").fetchall()[0][0]
    conn.execute("PRAGMA cache_size = -65536")
    try:
        conn.execute(m.knn_sql)
    except apsw.SQLError as e:
        if "no such module" not in str(e):
            raise
        raise MigrationError(
            f"migration {m.version:04d}_{m.name} must update this database's knn index "
            f"({_KNN_TABLE}) and needs sqlite-vec for it ({e}): load sqlite-vec into the "
            "connection first (a Store does so by itself; pip install 'sqlite-rrf[knn]')"
        ) from None
    finally:
        conn.execute(f"PRAGMA cache_size = {int(size)}")


#: A migration still running after this many seconds says so on a terminal's stderr,
#: and again every as many seconds (migration 0011 rebuilds the full-text index: ~15 s
#: at 100,000 episodes).
PROGRESS_EVERY_S = 5.0


@contextlib.contextmanager
def _progress(conn: Any, m: Migration) -> Iterator[None]:
    """While ``m`` runs, when stderr is a terminal, print how long it has been running
    every :data:`PROGRESS_EVERY_S` seconds (SQLite's progress handler, which the migration's
    statements call back every 100,000 steps)."""
    if not (hasattr(sys.stderr, "isatty") and sys.stderr.isatty()):
        yield
        return
    t0 = time.monotonic()
    last = [t0]

    def tick() -> bool:
        now = time.monotonic()
        if now - last[0] >= PROGRESS_EVERY_S:
            last[0] = now
            print(
                f"sqlite-rrf: migration {m.version:04d}_{m.name}: {now - t0:.0f} s so far",
                file=sys.stderr,
                flush=True,
            )
        return False  # never interrupt

    conn.set_progress_handler(tick, 100_000)
    try:
        yield
    finally:
        conn.set_progress_handler(None)
        if last[0] != t0:
            print(
                f"sqlite-rrf: migration {m.version:04d}_{m.name}: done in "
                f"{time.monotonic() - t0:.0f} s",
                file=sys.stderr,
                flush=True,
            )


def migrate(conn: Any, migrations: Optional[List[Migration]] = None) -> List[int]:
    """Apply the pending migrations to ``conn`` (an :class:`apsw.Connection`); returns
    the versions applied (empty when the database was up to date)."""
    migrations = available() if migrations is None else migrations
    done = applied(conn)
    _check(done, migrations)
    done_now = []
    for m in migrations:
        if m.version in done:
            continue  # applied: no write lock is taken when nothing is pending
        conn.execute("BEGIN IMMEDIATE")
        try:
            conn.execute(_CREATE_TABLE)
            done = applied(conn)  # re-read under the write lock: another process may have won
            _check(done, migrations)
            if m.version in done:
                conn.execute("COMMIT")
                continue
            with _progress(conn, m):
                conn.execute(m.sql)
            if m.knn_sql is not None and _has_knn(conn):
                _apply_knn_part(conn, m)
            conn.execute(
                "INSERT INTO schema_migrations(version, name, checksum, applied_at) "
                "VALUES (?, ?, ?, ?)",
                (m.version, m.name, m.checksum, int(time.time() * 1000)),
            )
            conn.execute("COMMIT")
        except BaseException:
            if not conn.getautocommit():
                conn.execute("ROLLBACK")
            raise
        done_now.append(m.version)
    return done_now
