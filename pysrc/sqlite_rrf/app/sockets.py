"""Where the hook's socket goes when the default beside the database cannot be used.

Without ``$XDG_RUNTIME_DIR`` the socket of ``sqlite-rrf serve DB`` is ``DB.sock`` beside
the database. In a directory others can write (a shared sticky directory such as
``/tmp``) another user can leave a file there first: a socket of theirs (connecting to it
fails with "permission denied", and it cannot be removed), or any other file. Then the
server listens, and the hook asks, in a private directory instead
(:func:`private_socket_path`: ``$TMPDIR/sqlite-rrf-UID/NAME-CRC.sock``, mode 0700).
Both compute the same path with :func:`beside_or_private`.

Standard library only (the hook's client path imports it).
"""

from __future__ import annotations

import os
import re
import tempfile
import zlib
from typing import Optional

#: The private directory's name (in the temporary directory): this and the user's id.
PRIVATE_PREFIX = "sqlite-rrf-"


def private_socket_dir() -> str:
    """The user's private directory for hook sockets: ``$TMPDIR/sqlite-rrf-UID``."""
    return os.path.join(tempfile.gettempdir(), f"{PRIVATE_PREFIX}{os.getuid()}")


def socket_name(real_db: str) -> str:
    """``NAME-CRC.sock`` for the database at the real path ``real_db`` (NAME: its file
    name, CRC: a checksum of the path, so two databases of one name differ)."""
    crc = zlib.crc32(real_db.encode("utf-8", "surrogateescape"))
    name = re.sub(r"[^A-Za-z0-9._-]", "_", os.path.basename(real_db))[:40]
    return f"{name}-{crc:08x}.sock"


def private_socket_path(real_db: str) -> str:
    """The hook socket of ``real_db`` in :func:`private_socket_dir`."""
    return os.path.join(private_socket_dir(), socket_name(real_db))


def foreign_owner(path: str) -> Optional[int]:
    """The user id owning the file at ``path`` when it exists and belongs to another
    user, else None."""
    try:
        uid = os.lstat(path).st_uid
    except (OSError, ValueError):
        return None
    return uid if uid != os.getuid() else None


def beside_or_private(path: str, real_db: str) -> str:
    """``path`` (the socket beside the database), or :func:`private_socket_path` when a
    file of another user is already there."""
    return path if foreign_owner(path) is None else private_socket_path(real_db)


def is_private_dir(d: str) -> bool:
    """True when ``d`` is :func:`private_socket_dir` (by name)."""
    return os.path.abspath(d) == os.path.abspath(private_socket_dir())
