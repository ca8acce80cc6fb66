"""The application layer every way in shares: the command line (:mod:`sqlite_rrf.cli`),
the prompt hook (:mod:`sqlite_rrf.hook`), MCP (:mod:`sqlite_rrf.mcp_server`) and the
warm server (:mod:`sqlite_rrf.server`).

- :func:`open_store`: open a memory database with the chosen model (``--model``,
  ``$SQLITE_RRF_MODEL``, the default; the database's own model only when it is one of
  these), and :func:`choose_embedder`.
- :class:`UserError` and :func:`error_message`: the product's one-line messages for every
  error a user can meet (bad input; a database, extension or model it cannot use),
  SQLite's errors said in words (no library class names); :func:`fault_message` for a
  fault of ours.
- :func:`parse_time`, :func:`ascii_float`, :func:`int_arg`, :func:`float_arg`: the
  options' values.
- Scopes: :data:`ALL_SCOPES`, :data:`SHARED_SCOPE`, :func:`derive_scope`,
  :func:`recall_scopes` (what a recall covers: by default the project's scope and the
  shared one), :func:`recall_scope`, :func:`write_scope`, :func:`stored_scope`,
  :func:`scope_name`.
- Text that cannot forge structure in an agent's context: :func:`flatten`,
  :func:`escape`, :func:`code`.
- :func:`iso_time`, :func:`human_age`: a time for people (ISO 8601 UTC, ``3 days ago``).
- :func:`note`: a note on stderr, once per process; a note about a database's standing
  condition once a day per database (:func:`notes_path` remembers what was said).
- :func:`socket_path`: where ``sqlite-rrf serve`` listens for the hook.

This module imports only the standard library at module level (the hook's client path
imports it); the store and the model load when :func:`open_store` runs.
"""

from __future__ import annotations

import os
import re
import sys
import unicodedata

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Optional, Tuple

#: The scope value (hook, MCP, server) that recalls every scope.
ALL_SCOPES = "*"

#: The public name of the shared scope: the memories (the user's preferences, facts true
#: everywhere) that every project's recall includes by default. It is stored as ``''``;
#: every way in takes ``shared`` or ``''`` for it, and output shows it as ``shared``.
SHARED_SCOPE = "shared"

_NOTES_SAID: set = set()


class UserError(Exception):
    """A failure said to the user in one line (the command line's exit status 1, the
    hook's line on stderr, an MCP tool error): bad input, or a database, extension or
    model that cannot be used. The message names the option or file and the fault."""


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
        key = hashlib.sha256(f"{real}\0{text}".encode("utf-8", "surrogateescape")
                             ).hexdigest()[:32]
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


# ---- errors in words ----

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
_PRODUCT_ERRORS = (("sqlite_rrf.checks", "StoreError"),
                   ("sqlite_rrf.migrations", "MigrationError"),
                   ("sqlite_rrf.loader", "ExtensionLoadError"),
                   ("sqlite_rrf.embed", "EmbeddingError"),
                   ("sqlite_rrf.models", "ModelNotFoundError"))


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
    return (f"unexpected {type(e).__name__}: {e} (set SQLITE_RRF_DEBUG=1 for the "
            "traceback, and please report it)")


# ---- values of options ----

_INT = re.compile(r"-?[0-9]+")
_FLOAT = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")


def parse_time(text: Optional[str], option: str) -> Optional[int]:
    """A time option's value in ms since the epoch: milliseconds since the epoch, or an
    ISO 8601 date/time (UTC when it names no zone); None for None. A bad value is a
    :class:`UserError` naming ``option``."""
    if text is None:
        return None
    text = text.strip()
    if _INT.fullmatch(text):  # ASCII digits only: '²'.isdigit() is true
        v = int(text)
        if abs(v) > 2**62:
            raise UserError(f"{option}: {text} is out of range")
        return v
    import datetime as dt

    try:
        t = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise UserError(f"{option}: expected milliseconds since the epoch or an ISO date such "
                        f"as 2026-11-24 or 2026-11-24T09:30, got {text!r}") from None
    if t.tzinfo is None:
        t = t.replace(tzinfo=dt.timezone.utc)
    return int(t.timestamp() * 1000)


def ascii_float(text: str) -> float:
    """A number written in ASCII (``0.5``, ``-1``, ``2e-3``); ValueError otherwise (Python's
    float() also takes other scripts' digits, ``_`` separators, ``nan`` and ``inf``)."""
    if not _FLOAT.fullmatch(text.strip()):
        raise ValueError(f"not a number: {text!r}")
    return float(text)


def int_arg(text: str) -> int:
    """argparse ``type=`` of an integer option: ASCII digits, an optional minus sign.
    argparse's error names the option (``argument --limit: expected an integer ...``)."""
    if not _INT.fullmatch(text.strip()):
        import argparse

        raise argparse.ArgumentTypeError(f"expected an integer (digits 0-9), got {text!r}")
    return int(text)


def float_arg(text: str) -> float:
    """argparse ``type=`` of a number option: ASCII digits, a point, an exponent."""
    try:
        return ascii_float(text)
    except ValueError:
        import argparse

        raise argparse.ArgumentTypeError(f"expected a number such as 0.5 or 60, got "
                                         f"{text!r}") from None


# ---- times for people ----

#: :func:`human_age`'s units, largest first: (name, length in seconds).
_AGE_UNITS = (("year", 365 * 86400), ("month", 30 * 86400), ("day", 86400),
              ("hour", 3600), ("minute", 60))


def iso_time(ms: Optional[int]) -> Optional[str]:
    """``ms`` (ms since the epoch) as an ISO 8601 UTC time to the second,
    ``2026-11-24T09:30:00Z``; None for None."""
    if ms is None:
        return None
    import datetime as dt

    t = dt.datetime.fromtimestamp(ms // 1000, dt.timezone.utc)
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


def human_age(ms: Optional[int], now_ms: Optional[int] = None) -> Optional[str]:
    """How long ago ``ms`` (ms since the epoch) was at ``now_ms`` (default: now), in
    words: ``just now`` (under a minute), ``5 minutes ago``, ``1 hour ago``,
    ``3 days ago``, ``2 months ago`` (30 days), ``1 year ago`` (365 days), the largest
    whole unit; a time after ``now_ms`` is ``in 3 days``. None for None."""
    if ms is None:
        return None
    if now_ms is None:
        import time

        now_ms = int(time.time() * 1000)
    seconds = abs(now_ms - ms) // 1000
    for name, length in _AGE_UNITS:
        n = seconds // length
        if n >= 1:
            words = f"{n} {name}{'s' if n > 1 else ''}"
            return f"in {words}" if ms > now_ms else f"{words} ago"
    return "just now"


# ---- scopes ----

def derive_scope(cwd: Optional[str] = None) -> str:
    """The scope of a working directory: the name of the top directory of the git work
    tree that holds ``cwd`` (the nearest directory, going up, with a ``.git`` entry: a
    directory, or the file of a worktree or submodule), else the name of ``cwd`` itself;
    ``''`` for the root directory. ``cwd`` defaults to the process's. Its control
    characters (a line break in a directory's name) are made spaces."""
    path = os.path.abspath(cwd if cwd else os.getcwd())
    d = path
    while True:
        if os.path.lexists(os.path.join(d, ".git")):
            return flatten(os.path.basename(d))
        parent = os.path.dirname(d)
        if parent == d:
            return flatten(os.path.basename(path))
        d = parent


def recall_scope(scope: Optional[str]) -> Optional[str]:
    """The store's ``scope=`` for a recall of ``scope``: None (every scope) for
    :data:`ALL_SCOPES` and None, else ``scope``."""
    return None if scope is None or scope == ALL_SCOPES else scope


def write_scope(scope: str, option: str = "scope") -> str:
    """``scope`` as the scope an episode is written to; :data:`ALL_SCOPES` is refused
    (a :class:`UserError` naming ``option``): an episode belongs to one scope."""
    if scope == ALL_SCOPES:
        raise UserError(f"{option}: {ALL_SCOPES!r} means every scope in a recall; an "
                        f"episode belongs to one scope ({SHARED_SCOPE!r} is the shared "
                        "memory)")
    return scope


#: Scope names that are quoting, not a name (``'""'`` from a client that cannot pass an
#: empty string): refused, so that no scope named ``""`` is made by accident.
_QUOTES_ONLY = re.compile(r"""\s*(?:""|'')\s*""")


def _scope_text(scope: Any, option: str) -> str:
    """``scope`` checked to be a scope's name (a str, not quoting only)."""
    if not isinstance(scope, str):
        raise UserError(f"{option}: expected a scope's name (text), got "
                        f"{type(scope).__name__} {scope!r}")
    if _QUOTES_ONLY.fullmatch(scope):
        raise UserError(f"{option}: {scope!r} is quotes, not a scope's name; the shared "
                        f"scope is named {SHARED_SCOPE!r} (or pass an empty string)")
    return scope


def scope_name(stored: str) -> str:
    """The name shown for the stored scope ``stored``: :data:`SHARED_SCOPE` for ``''``,
    else ``stored`` itself."""
    return SHARED_SCOPE if stored == "" else stored


def stored_scope(name: str, option: str = "scope") -> str:
    """The stored scope an episode is written to for the scope ``name`` a user gave:
    ``''`` for :data:`SHARED_SCOPE` and ``''``, else ``name``. Refused (a
    :class:`UserError` naming ``option``): :data:`ALL_SCOPES` (an episode belongs to one
    scope, :func:`write_scope`), a value that is not text, and quotes only (``'""'``)."""
    name = write_scope(_scope_text(name, option), option)
    return "" if name == SHARED_SCOPE else name


def recall_scopes(scope: Optional[str], project: Optional[str],
                  option: str = "scope") -> Optional[Tuple[str, ...]]:
    """The stored scopes a recall covers, for the ``scope`` a user gave and the
    ``project``'s scope (:func:`derive_scope` of the working directory, or a server's
    ``--scope``):

    - ``scope`` None (not given): the project's scope and the shared one,
      ``(project, '')``; ``('',)`` when ``project`` is None or names the shared scope;
      None when ``project`` is :data:`ALL_SCOPES` (a server started for every scope);
    - :data:`ALL_SCOPES`: None (every scope);
    - :data:`SHARED_SCOPE` or ``''``: ``('',)``, the shared scope only;
    - any other name: ``(scope,)``, that scope only (an explicit scope narrows the
      recall).

    The result is what :meth:`sqlite_rrf.store.Store.recall` takes as ``scope=``. A
    ``scope`` that is not text, or quotes only (``'""'``), is a :class:`UserError`
    naming ``option``."""
    if scope is None:
        if project is None:
            return ("",)
        if project == ALL_SCOPES:
            return None
        proj = "" if project == SHARED_SCOPE else _scope_text(project, "project scope")
        return ("",) if proj == "" else (proj, "")
    scope = _scope_text(scope, option)
    if scope == ALL_SCOPES:
        return None
    return ("",) if scope in (SHARED_SCOPE, "") else (scope,)


# ---- the warm server's socket ----

#: Where a server's hook socket goes when ``--socket`` is not given: this directory under
#: ``$XDG_RUNTIME_DIR`` (mode 0700), else beside the database.
RUNTIME_SUBDIR = "sqlite-rrf"


def socket_path(db: str) -> str:
    """The hook socket of ``sqlite-rrf serve db`` (the server and the hook compute the
    same path): ``$XDG_RUNTIME_DIR/sqlite-rrf/NAME-CRC.sock`` when the user has a runtime
    directory (NAME: the database's file name, CRC: a checksum of its real path, so two
    databases of one name differ), else ``DB.sock`` beside the database."""
    real = os.path.realpath(db)
    run = os.environ.get("XDG_RUNTIME_DIR", "")
    if run and os.path.isabs(run) and os.path.isdir(run):
        import zlib

        crc = zlib.crc32(real.encode("utf-8", "surrogateescape"))
        name = re.sub(r"[^A-Za-z0-9._-]", "_", os.path.basename(real))[:40]
        return os.path.join(run, RUNTIME_SUBDIR, f"{name}-{crc:08x}.sock")
    return real + ".sock"


# ---- text that forges no structure ----

#: What :func:`escape` rewrites: ``<``, ``>``, and an ``&`` that starts a character
#: reference (``&lt;``, ``&#60;``, ``&#x3c;``), so that the escaping can be undone.
_ESCAPES = {"<": "&lt;", ">": "&gt;", "&": "&amp;"}
_TO_ESCAPE = re.compile(r"[<>]|&(?=#[0-9]+;|#[xX][0-9a-fA-F]+;|[A-Za-z][A-Za-z0-9]*;)")


def flatten(text: str) -> str:
    """``text`` on one line: every control character (Unicode category Cc: line breaks,
    tabs, escapes, NULs) and line or paragraph separator made a space, runs of white
    space made one space, the ends stripped."""
    text = "".join(" " if unicodedata.category(ch) == "Cc" else ch for ch in text)
    return " ".join(text.split())


def escape(text: str) -> str:
    """``text`` with no tag-like text: ``<`` → ``&lt;``, ``>`` → ``&gt;``, and ``&`` →
    ``&amp;`` where it starts a character reference. A Markdown viewer shows the
    original text; a model reads ``&lt;/context&gt;`` as text, not as a tag."""
    return _TO_ESCAPE.sub(lambda m: _ESCAPES[m.group(0)[0]], text)


def code(text: str) -> str:
    """``text`` (flattened and escaped) as a Markdown code span that no backtick in it can
    close: fenced by one backtick more than its longest run of backticks."""
    text = escape(flatten(text))
    longest = max((len(r) for r in re.findall(r"`+", text)), default=0)
    fence = "`" * (longest + 1)
    if not text or text[0] == "`" or text[-1] == "`":
        text = f" {text} "
    return f"{fence}{text}{fence}"


# ---- opening a store with the chosen model ----

def check_model_args(model: Optional[str], n_ctx: Optional[int]) -> None:
    """Refuse a malformed ``--model`` or ``--n-ctx`` before anything is opened."""
    from .models import parse_spec

    if model is not None:
        try:
            parse_spec(model)
        except ValueError as e:
            raise UserError(f"--model: {e}") from None
    if n_ctx is not None and not 8 <= n_ctx <= 1 << 20:
        raise UserError(f"--n-ctx: must be from 8 to {1 << 20} tokens, got {n_ctx}")


def _model_named(model: Optional[str]) -> bool:
    """Whether a model was asked for by name (``--model`` or ``$SQLITE_RRF_MODEL``)."""
    from .models import MODEL_ENV

    return bool(model) or bool(os.environ.get(MODEL_ENV, "").strip())


def choose_embedder(model: Optional[str] = None, n_ctx: Optional[int] = None,
                    remembered: Optional[str] = None, required: bool = False,
                    db: Optional[str] = None) -> Any:
    """The Embedder of the chosen model (``model``, ``$SQLITE_RRF_MODEL``, the default), or
    None when no model is available and none was asked for by name.

    A model named by ``model`` or ``$SQLITE_RRF_MODEL`` that cannot be loaded is a
    :class:`UserError` (so is any failure when ``required``); the default model that
    cannot be had turns the vector list off, and that is said on stderr (:func:`note`: once
    a day per database when ``db`` names the database it is for). The
    database's own model (``remembered``) is never loaded because the database names it;
    for a database made with another model (:func:`sqlite_rrf.models.foreign_model`) the
    default is used only from the Hugging Face cache, and what to pass is said.
    """
    from .embed import Embedder, EmbeddingError
    from .models import (DEFAULT_N_CTX, ModelNotFoundError, foreign_hint, foreign_model,
                         model_candidates, resolve_model)

    foreign = foreign_model(model, remembered)
    first_error: Optional[Exception] = None
    for spec in model_candidates(model, remembered):
        try:
            if foreign:  # the default, not downloaded for a database of another model
                resolve_model(spec, download=False)
            return Embedder(spec, n_ctx=n_ctx or DEFAULT_N_CTX)
        except ValueError as e:  # a malformed hf: name, a bad --n-ctx
            raise UserError(str(e)) from None
        except (ModelNotFoundError, EmbeddingError) as e:
            first_error = first_error or e
            if isinstance(e, EmbeddingError) and "llama-cpp-python" in str(e):
                break  # no other model can load either
    why = foreign_hint(foreign) if foreign else str(first_error)
    if _model_named(model) or required:
        raise UserError(why) from None
    note(f"the vector list is off: {why}", db)
    return None


#: :func:`open_store`'s uses: what the store is opened for.
USES = (None, "write", "recall", "serve")


def open_store(db: str, use: Optional[str] = None, *, model: Optional[str] = None,
               n_ctx: Optional[int] = None, must_exist: bool = True) -> Any:
    """Open the memory database ``db`` as a :class:`~sqlite_rrf.store.Store`.

    ``use``: None opens it without a model; ``'write'`` and ``'recall'`` attach the
    chosen model (:func:`choose_embedder`), and a recall of a database that has no
    embeddings loads none; ``'serve'`` (the MCP server, ``sqlite-rrf serve``) is
    ``'write'``, or ``'recall'`` when the file is read-only (said once on stderr).
    ``must_exist``: a file that does not exist is a :class:`UserError` (else it is
    created). A write to a read-only file is a :class:`UserError`."""
    if use not in USES:
        raise ValueError(f"use: expected one of {USES}, got {use!r}")
    if use == "serve":
        try:
            return open_store(db, "write", model=model, n_ctx=n_ctx, must_exist=must_exist)
        except UserError as e:
            if "read-only" not in str(e) or not os.path.exists(db):
                raise
        note(f"{db} is read-only: recall works (without touching); remember, update "
             "and forget will fail", db)
        return open_store(db, "recall", model=model, n_ctx=n_ctx)

    from .store import Store, StoreError

    if must_exist and not os.path.exists(db):
        raise UserError(f"{db}: no such database (create it with `sqlite-rrf init {db}`)")
    check_model_args(model, n_ctx)
    store = Store(db)
    try:
        if use == "write" and store.readonly:
            raise UserError(f"{db}: the database is read-only (read-only media or "
                            "permissions): nothing can be added")
        if use is not None:
            if use == "recall" and store.dim is None and not model:
                if store.count():
                    note("the vector list is off: this database has no embeddings yet "
                         f"(`sqlite-rrf embed {db}` adds them)", db)
                return store
            emb = choose_embedder(model, n_ctx, remembered=store.model, db=db)
            if emb is not None:
                try:
                    store.attach_embedder(emb, remember=use == "write")
                except StoreError as e:
                    emb.close()
                    if _model_named(model):
                        raise UserError(str(e)) from None
                    from .models import foreign_hint, foreign_model

                    foreign = foreign_model(None, store.model)
                    note(f"the vector list is off: {e}"
                         + (f"; {foreign_hint(foreign)}" if foreign else ""), db)
            elif use == "write" and store.dim is not None:
                note(f"new episodes are stored without embeddings; `sqlite-rrf embed {db}` "
                     "adds them once a model is available", db)
    except BaseException:
        store.close()
        raise
    return store


def close_store(store: Any) -> None:
    """Close ``store`` and its model."""
    emb = getattr(store, "embedder", None)
    try:
        if emb is not None and hasattr(emb, "close"):
            emb.close()
    finally:
        store.close()
