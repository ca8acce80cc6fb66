"""The files ``sqlite-rrf setup`` edits: read, merged, written atomically, and remembered
so that ``setup --undo`` can put back the very bytes that were there before
(:mod:`.hosts` says what goes in them)."""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Tuple

from .errors import UserError


def state_dir() -> str:
    """Where setup remembers what it wrote: ``$XDG_STATE_HOME/sqlite-rrf/setup``
    (``~/.local/state/sqlite-rrf/setup``)."""
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local/state")
    return os.path.join(base, "sqlite-rrf", "setup")


@dataclass
class Change:
    """One file: its bytes before (None: no such file) and after (None: removed)."""

    path: str
    before: Optional[bytes]
    after: Optional[bytes]
    what: str

    @property
    def changed(self) -> bool:
        return self.before != self.after


def read_bytes(path: str) -> Optional[bytes]:
    try:
        with open(path, "rb") as f:
            return f.read()
    except FileNotFoundError:
        return None
    except OSError as e:
        raise UserError(f"{path}: cannot read it ({e.strerror})") from None


def load_json(path: str, raw: Optional[bytes]) -> Dict[str, Any]:
    """The JSON object in ``raw`` (the file at ``path``); ``{}`` for no file or an empty one."""
    if raw is None or not raw.strip():
        return {}
    try:
        data = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise UserError(f"{path}: not UTF-8 text; fix or move it, then run setup again") from None
    except json.JSONDecodeError as e:
        raise UserError(
            f"{path}: not valid JSON ({e.msg} at line {e.lineno} column {e.colno}); "
            "fix it, then run setup again (nothing was written)"
        ) from None
    if not isinstance(data, dict):
        raise UserError(f"{path}: expected a JSON object at the top, got {type(data).__name__}")
    return data


def dump_json(data: Dict[str, Any]) -> bytes:
    return (json.dumps(data, indent=2, ensure_ascii=False) + "\n").encode("utf-8")


def json_container(parent: Dict[str, Any], key: str, path: str, default: Any) -> Any:
    value = parent.setdefault(key, default)
    if not isinstance(value, type(default)):
        kind = "an object" if isinstance(default, dict) else "a list"
        raise UserError(f"{path}: {key!r} must be {kind}; fix it, then run setup again")
    return value


def record_path(path: str) -> str:
    key = hashlib.sha256(os.path.abspath(path).encode("utf-8", "surrogateescape")).hexdigest()
    return os.path.join(state_dir(), key[:32] + ".json")


def read_record(path: str) -> Optional[Dict[str, Any]]:
    raw = read_bytes(record_path(path))
    if raw is None:
        return None
    try:
        rec = json.loads(raw)
    except ValueError:
        return None
    return rec if isinstance(rec, dict) and rec.get("path") == os.path.abspath(path) else None


def write_atomic(path: str, data: bytes) -> None:
    """``data`` into ``path``: a temporary file beside it, flushed, then renamed over it (a
    reader sees the old file or the new one, never half of one); the file keeps its mode.
    A symbolic link (settings kept in a dotfiles repository) stays one: its target is
    written."""
    path = os.path.realpath(path)
    d = os.path.dirname(path) or "."
    try:
        mode: Optional[int] = os.stat(path).st_mode & 0o7777
    except FileNotFoundError:
        mode = None
    tmp = os.path.join(d, f".{os.path.basename(path)}.sqlite-rrf-{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600 if mode is None else mode)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        if mode is None:
            os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def _umask() -> int:
    old = os.umask(0)
    os.umask(old)
    return old


def _missing_dirs(path: str) -> List[str]:
    made = []
    d = os.path.dirname(os.path.abspath(path))
    while not os.path.isdir(d):
        made.append(d)
        d = os.path.dirname(d)
    return made


def apply(changes: List[Change], undo: bool) -> None:
    """Write the changed files (atomically) and remember, for each file a setup writes, its
    bytes before, so that its undo can put them back."""
    for c in changes:
        if not c.changed:
            continue
        rec_path = record_path(c.path)
        if undo:
            rec = read_record(c.path)
            if c.after is None:
                os.unlink(c.path)
                for d in (rec or {}).get("made_dirs", []):
                    try:
                        os.rmdir(d)  # only when empty
                    except OSError:
                        break
            else:
                write_atomic(c.path, c.after)
            if rec is not None:
                os.unlink(rec_path)
            continue
        rec = read_record(c.path)
        made = _missing_dirs(c.path)
        if made:
            os.makedirs(os.path.dirname(os.path.abspath(c.path)), exist_ok=True)
        assert c.after is not None
        write_atomic(c.path, c.after)
        if rec is None:
            rec = {
                "path": os.path.abspath(c.path),
                "before": None if c.before is None else c.before.decode("utf-8", "surrogateescape"),
                "made_dirs": made,
            }
        rec["written"] = hashlib.sha256(c.after).hexdigest()
        os.makedirs(state_dir(), exist_ok=True)
        write_atomic(rec_path, json.dumps(rec).encode("utf-8"))


def restorable(path: str, current: Optional[bytes]) -> Tuple[bool, Optional[bytes]]:
    """(True, the bytes before setup) when the file is as setup left it, else (False, None)."""
    rec = read_record(path)
    if rec is None or current is None:
        return False, None
    if hashlib.sha256(current).hexdigest() != rec.get("written"):
        return False, None
    before = rec.get("before")
    return True, None if before is None else before.encode("utf-8", "surrogateescape")


def diff(c: Change) -> str:
    """The change to one file as a unified diff (what ``--dry-run`` prints)."""
    import difflib

    def lines(b: Optional[bytes]) -> List[str]:
        return [] if b is None else b.decode("utf-8", "replace").splitlines(keepends=True)

    out = difflib.unified_diff(
        lines(c.before),
        lines(c.after),
        fromfile=c.path if c.before is not None else "/dev/null",
        tofile=c.path if c.after is not None else "/dev/null",
    )
    text = "".join(x if x.endswith("\n") else x + "\n\\ No newline at end of file\n" for x in out)
    return text
