"""Notes on stderr: once per process, and a note about a database's standing condition
once a day per database (:func:`notes_path` remembers what was said)."""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Optional

_NOTES_SAID: set = set()

#: What :func:`note` appends to a note said once a day per database.
ONCE_A_DAY = " (said once a day for this database)"
#: How many notes :func:`notes_path` remembers at most (a day's; older days are dropped).
NOTES_KEPT = 2000


def note(text: str, db: Optional[str] = None) -> None:
    """Say ``text`` on stderr (``sqlite-rrf: text``), once per process.

    With ``db``, ``text`` is a standing condition of that database (the vector list is
    off, it has no embeddings yet, it is read-only): it is said once a day per database,
    not once per process, since the hook runs a process per prompt and an MCP host one
    per session. What was said is remembered in :func:`notes_path`, keyed by the
    database's real path, the text and the local date; when that file cannot be read or
    written the note is said (best effort: a note never fails a command)."""
    key = text if db is None else f"{db}\0{text}"
    if key in _NOTES_SAID:
        return
    _NOTES_SAID.add(key)
    if db is not None:
        said = _said_today(db, text)
        if said:
            return
        if said is not None:  # remembered: it will not be said again today
            text += ONCE_A_DAY
    try:
        print(f"sqlite-rrf: {text}", file=sys.stderr, flush=True)
    except (OSError, ValueError):
        pass


def notes_path() -> Optional[str]:
    """The file that remembers the notes said today (:func:`note`):
    ``$XDG_CACHE_HOME/sqlite-rrf/notes.json``, ``~/.cache/sqlite-rrf/notes.json`` when
    XDG_CACHE_HOME is not set (or not an absolute path); None without a home directory."""
    base = os.environ.get("XDG_CACHE_HOME", "")
    if not os.path.isabs(base):
        home = os.path.expanduser("~")
        if not os.path.isabs(home):
            return None
        base = os.path.join(home, ".cache")
    return os.path.join(base, "sqlite-rrf", "notes.json")


def _said_today(db: str, text: str) -> Optional[bool]:
    """Whether the note ``text`` about ``db`` was said today by any process: True; False
    when it was not, and is now remembered as said; None when that cannot be known or
    remembered (no cache directory, a database that is not a file, a read-only disk)."""
    import hashlib
    import json
    import time

    path = notes_path()
    if path is None or db in ("", ":memory:") or db.startswith("file:"):
        return None
    tmp = None
    try:
        real = os.path.realpath(db)
        key = hashlib.sha256(f"{real}\0{text}".encode("utf-8", "surrogateescape")).hexdigest()[:32]
        today = time.strftime("%Y-%m-%d")
        said: dict = {}
        try:
            with open(path, encoding="utf-8") as f:
                loaded = json.load(f)
            if isinstance(loaded, dict):
                said = {k: v for k, v in loaded.items() if v == today}
        except (OSError, ValueError):
            pass
        if key in said:
            return True
        said[key] = today
        if len(said) > NOTES_KEPT:
            said = dict(list(said.items())[-NOTES_KEPT:])
        os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
        tmp = f"{path}.{os.getpid()}.tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(said, f)
        os.replace(tmp, path)
        return False
    except (OSError, ValueError, UnicodeError):
        if tmp is not None:
            try:
                os.unlink(tmp)
            except OSError:
                pass
        return None
