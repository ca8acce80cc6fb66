"""Find and load the ``rrf`` SQLite extension into a connection."""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False  # typing is not imported at run time: `sqlite-rrf hook` starts fast
if TYPE_CHECKING:
    from typing import Any

#: The package directory (``sqlite_rrf/``): the built extension and, installed, ``sql/``.
_HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

if sys.platform == "win32":
    _SUFFIX = ".dll"
elif sys.platform == "darwin":
    _SUFFIX = ".dylib"
else:
    _SUFFIX = ".so"

#: Environment variable that points :func:`loadable_path` at another build of the
#: extension (for example the ASan build of ``make asan``), given without suffix.
PATH_ENV = "SQLITE_RRF_LOADABLE"


class ExtensionLoadError(RuntimeError):
    """The extension could not be loaded into a connection; the message says why
    and what to do about it."""


def loadable_path() -> str:
    """Path of the loadable extension **without** its suffix (``.so``, ``.dylib``,
    ``.dll``), as SQLite's ``load_extension()`` and the shell's ``.load`` take it.

    SQLite finds the entry point ``sqlite3_rrf_init`` from the file name ``rrf``.
    ``SQLITE_RRF_LOADABLE`` in the environment overrides the path.
    """
    override = os.environ.get(PATH_ENV)
    if override:
        return override
    return os.path.join(_HERE, "rrf")


def _check_built(path: str) -> None:
    if not os.path.exists(path + _SUFFIX) and not os.path.exists(path):
        raise ExtensionLoadError(
            f"the sqlite-rrf extension is not built: {path + _SUFFIX} does not exist. "
            "Reinstall the package (pip install sqlite-rrf, or `make build` in a checkout)."
        )


def load(conn: Any) -> None:
    """Load the extension into ``conn``: an :class:`apsw.Connection` or a
    :class:`sqlite3.Connection`.

    Raises :class:`ExtensionLoadError` with a remedy when the Python ``sqlite3``
    module was built without extension loading (as pyenv's builds and some
    distributions' are): use apsw instead (``pip install apsw``).
    """
    path = loadable_path()
    _check_built(path)
    module = type(conn).__module__.split(".")[0]
    if module == "apsw":
        conn.enable_load_extension(True)
        try:
            conn.load_extension(path)
        except Exception as e:  # apsw.ExtensionLoadingError and friends
            raise ExtensionLoadError(f"apsw could not load {path}: {e}") from e
        finally:
            conn.enable_load_extension(False)
        return
    if not hasattr(conn, "enable_load_extension"):
        raise ExtensionLoadError(
            "this Python's sqlite3 module cannot load extensions (it was built without "
            "--enable-loadable-sqlite-extensions, so sqlite3.Connection has no "
            "enable_load_extension). Use apsw, which always can: `pip install apsw`, then "
            "`conn = apsw.Connection(path); sqlite_rrf.load(conn)`. The sqlite3 shell works "
            "too: `.load " + path + "`."
        )
    conn.enable_load_extension(True)
    try:
        conn.load_extension(path)
    except Exception as e:
        raise ExtensionLoadError(f"sqlite3 could not load {path}: {e}") from e
    finally:
        conn.enable_load_extension(False)
