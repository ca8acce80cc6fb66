"""The product's one-line messages: :class:`UserError` for what a user can meet, SQLite's
errors said in words with no library class name (:func:`error_message`), and
:func:`fault_message` for a fault of ours."""

from __future__ import annotations

import re
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Optional


class UserError(Exception):
    """A failure said to the user in one line (the command line's exit status 1, the
    hook's line on stderr, an MCP tool error): bad input, or a database, extension or
    model that cannot be used. The message names the option or file and the fault."""


#: SQLite's primary result codes that a user meets (``SQLITE_BUSY`` is 5, ...; an apsw
#: exception carries its code as ``result``): what to add to SQLite's own words
#: (``database is locked``) so that the line says what to do.
_SQLITE_HINTS = {
    5: "another connection held the lock longer than this one waits; nothing of "
    "this write was kept; try again",  # SQLITE_BUSY
    6: "another statement of this connection holds a lock; try again",  # SQLITE_LOCKED
    8: "the file, its directory or its medium is read-only",  # SQLITE_READONLY
    13: "the disk is full; nothing of this write was kept",  # SQLITE_FULL
    14: "the file or its directory does not exist or cannot be read",  # SQLITE_CANTOPEN
    10: "the disk or file system failed",  # SQLITE_IOERR
    11: "`sqlite-rrf check DB` says what is damaged",  # SQLITE_CORRUPT
    3: "the file or its directory is not accessible",  # SQLITE_PERM
    18: "a text or value is larger than SQLite's limit",  # SQLITE_TOOBIG
}
_CLASS_PREFIX = re.compile(r"^[A-Za-z]+Error: ")
#: A library's exception class named in a message (``BusyError: database is locked``,
#: ``apsw.NotADBError: file is not a database``, ``pydantic_core.ValidationError:``):
#: the class name is dropped, the words kept.
_CLASS_NAMED = re.compile(r"\b(?:[a-z_][a-z0-9_]*\.)*[A-Z][A-Za-z]*(?:Error|Exception): ")


def without_class_names(text: str) -> str:
    """``text`` with no exception class named in it (``(BusyError: database is locked)``
    becomes ``(database is locked)``): for messages that quote a library's error."""
    return _CLASS_NAMED.sub("", text)


#: The product's own exception classes whose message is already the user's line, by the
#: module that defines them: an error of a class exists only once its module is loaded,
#: so none is imported to recognise it.
_PRODUCT_ERRORS = (
    ("sqlite_rrf.core.validate", "StoreError"),
    ("sqlite_rrf.core.migrations", "MigrationError"),
    ("sqlite_rrf.core.loader", "ExtensionLoadError"),
    ("sqlite_rrf.embedding.embedder", "EmbeddingError"),
    ("sqlite_rrf.embedding.models", "ModelNotFoundError"),
)


def sqlite_words(e: BaseException) -> str:
    """SQLite's error ``e`` (an apsw exception) in words: SQLite's message and, for the
    errors a user meets, what it means, naming no library class."""
    text = without_class_names(_CLASS_PREFIX.sub("", str(e))).strip() or "SQLite error"
    code = getattr(e, "result", None)
    hint = _SQLITE_HINTS.get(code & 0xFF) if isinstance(code, int) else None
    return f"{text} ({hint})" if hint else text


def error_message(e: BaseException) -> Optional[str]:
    """The one line for an error a user can meet (a :class:`UserError`, the store's,
    the migrations', the extension loader's or the model's error, SQLite's, the
    operating system's), or None for a fault of ours (a bug: say
    :func:`fault_message`)."""
    if isinstance(e, UserError):
        return without_class_names(str(e))
    for module, name in _PRODUCT_ERRORS:
        cls = getattr(sys.modules.get(module), name, None)
        if cls is not None and isinstance(e, cls):
            return without_class_names(str(e))
    if type(e).__module__ == "apsw":
        return sqlite_words(e)
    if isinstance(e, OSError):
        what = e.strerror or str(e)
        return f"{e.filename}: {what}" if e.filename else what
    return None


def fault_message(e: BaseException) -> str:
    """The one line for a fault of ours: what it was, and how to report it."""
    return (
        f"unexpected {type(e).__name__}: {e} (set SQLITE_RRF_DEBUG=1 for the "
        "traceback, and please report it)"
    )
