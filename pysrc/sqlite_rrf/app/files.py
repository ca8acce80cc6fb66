"""Files a command writes: never over the database it reads (nor its ``-wal``/``-shm``),
never over a file it did not write itself unless ``--force``, and never half written.

* :func:`same_file`: two paths name one file (symbolic links resolved, hard links by
  device and inode).
* :func:`database_files`: a database's file and the ``-wal``/``-shm`` SQLite keeps beside it.
* :func:`check_output`: refuse an output path that is one of those files, or an existing
  file the command did not write (``ours`` recognises its own) unless ``force``.
* :func:`atomic_writer` / :func:`atomic_write_text`: write to a temporary file beside the
  target and rename it into place (a reader sees the old file or the new one, whole).
* :func:`starts_with`: a file begins with a marker (how a command recognises its own file).

Standard library only (the hook's client path imports the application layer).
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from typing import IO, Callable, Iterable, Iterator, List, Optional

from .errors import UserError

__all__ = [
    "SQLITE_SIDE_FILES",
    "atomic_write_text",
    "atomic_writer",
    "check_output",
    "database_files",
    "same_file",
    "starts_with",
]

#: The files SQLite keeps beside a database in WAL mode (and its rollback journal).
SQLITE_SIDE_FILES = ("-wal", "-shm", "-journal")


def _real(path: str) -> str:
    return os.path.realpath(os.path.abspath(os.fspath(path)))


def same_file(a: str, b: str) -> bool:
    """True when ``a`` and ``b`` name one file: the same path once symbolic links are
    resolved, or (both existing) the same device and inode, as hard links are."""
    if _real(a) == _real(b):
        return True
    try:
        sa, sb = os.stat(a), os.stat(b)
    except (OSError, ValueError):
        return False
    return (sa.st_dev, sa.st_ino) == (sb.st_dev, sb.st_ino)


def database_files(db: str) -> List[str]:
    """The database ``db`` and its ``-wal``, ``-shm`` and ``-journal``, both as named and
    beside the file its symbolic links lead to (SQLite keeps them beside the real file)."""
    out: List[str] = []
    for base in dict.fromkeys((os.path.abspath(db), _real(db))):
        out.append(base)
        out.extend(base + s for s in SQLITE_SIDE_FILES)
    return out


def starts_with(path: str, marker: bytes) -> bool:
    """True when the file ``path`` begins with ``marker`` (False when it cannot be read)."""
    try:
        with open(path, "rb") as f:
            return f.read(len(marker)) == marker
    except OSError:
        return False


def check_output(
    path: str,
    *,
    option: str,
    databases: Iterable[str] = (),
    force: bool = False,
    ours: Optional[Callable[[str], bool]] = None,
    what: str = "file",
) -> None:
    """Refuse, as a :class:`UserError` naming ``option``, to write ``path`` when:

    * it is one of ``databases`` or their ``-wal``/``-shm``/``-journal`` (symbolic and
      hard links resolved), whatever ``force`` says;
    * it is a directory, or exists and is not a regular file (a device, a socket, a FIFO);
    * it exists and ``ours(path)`` does not say this command wrote it, unless ``force``.
    """
    for db in databases:
        for f in database_files(db):
            if same_file(path, f):
                side = next((s for s in SQLITE_SIDE_FILES if f.endswith(s)), "")
                part = f"the database {db}" + (f"'s {side[1:]} file" if side else "")
                raise UserError(
                    f"{option}: {path} is {part}; a {what} is never written over it "
                    "(give another path)"
                )
    if not os.path.lexists(path):
        return
    if os.path.isdir(path):
        raise UserError(f"{option}: {path} is a directory; give the {what}'s file name")
    if not os.path.isfile(path):
        raise UserError(f"{option}: {path} exists and is not a regular file")
    if force or (ours is not None and ours(path)):
        return
    raise UserError(
        f"{option}: {path} exists and was not written by this command; move it away, "
        "give another path, or add --force to replace it"
    )


@contextlib.contextmanager
def atomic_writer(path: str, mode: str = "w", encoding: Optional[str] = "utf-8") -> Iterator[IO]:
    """A file object writing a temporary file beside ``path`` (beside the file a symbolic
    link leads to: the link stays); when the block ends without an error it is flushed
    to disk and renamed over ``path``, else removed and ``path`` is left as it was. An
    existing file's permission bits are kept; a new one gets the umask's."""
    target = _real(path)
    head, name = os.path.split(target)
    fd, tmp = tempfile.mkstemp(prefix=f".{name}.", suffix=".tmp", dir=head or ".")
    try:
        try:
            mode_bits = os.stat(target).st_mode & 0o7777
        except OSError:
            umask = os.umask(0)
            os.umask(umask)
            mode_bits = 0o666 & ~umask
        os.chmod(tmp, mode_bits)
        kw = {} if "b" in mode else {"encoding": encoding, "newline": ""}
        with os.fdopen(fd, mode, **kw) as f:  # type: ignore[call-overload]
            fd = -1
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, target)
        tmp = ""
    finally:
        if fd >= 0:
            os.close(fd)
        if tmp:
            with contextlib.suppress(OSError):
                os.remove(tmp)


def atomic_write_text(path: str, text: str) -> str:
    """Write ``text`` (UTF-8) to ``path`` through :func:`atomic_writer`; returns ``path``."""
    with atomic_writer(path) as f:
        f.write(text)
    return path
