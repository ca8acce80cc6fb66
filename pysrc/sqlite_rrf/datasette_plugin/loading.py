"""The rrf extension (and sqlite-vec, when installed) loaded into Datasette's
connections, and the check at startup that Datasette's sqlite3 module can load it."""

from __future__ import annotations

import logging
from functools import lru_cache
from typing import Any, List, Optional, Tuple

from ..core.loader import ExtensionLoadError, load, loadable_path

log = logging.getLogger("sqlite_rrf.datasette_plugin")

_INSTALL_HINT = (
    "Install a sqlite3 module that can: `pip install 'sqlite-rrf[datasette]'` brings "
    "pysqlite3-binary on Linux x86_64 (Datasette uses pysqlite3 by itself when it is "
    "importable); elsewhere build pysqlite3 (`pip install pysqlite3`, needs SQLite's "
    "headers) or run Datasette on a Python built with --enable-loadable-sqlite-extensions "
    "(e.g. python.org's Windows installer, Homebrew's Python). See docs/datasette.md."
)


class DatasetteExtensionError(ExtensionLoadError):
    """The sqlite3 module that Datasette uses cannot load the rrf extension."""


@lru_cache(maxsize=None)
def _sqlite_vec_path() -> Optional[str]:
    try:
        import sqlite_vec
    except ImportError:
        return None
    return sqlite_vec.loadable_path()


_warned_vec: List[str] = []


def load_into(conn: Any) -> Tuple[bool, bool]:
    """Load the rrf extension, and sqlite-vec when it is installed, into a DB-API
    connection (``sqlite3``/``pysqlite3``). Returns ``(rrf_loaded, vec_loaded)``.

    Raises :class:`DatasetteExtensionError` with the remedy when the connection's
    module cannot load extensions."""
    if not hasattr(conn, "enable_load_extension"):
        module = type(conn).__module__.split(".")[0]
        raise DatasetteExtensionError(
            f"sqlite-rrf's Datasette plugin cannot load its SQLite extension: the "
            f"{module!r} module that Datasette uses was built without extension loading "
            f"(its Connection has no enable_load_extension). {_INSTALL_HINT}"
        )
    try:
        load(conn)
    except ExtensionLoadError as e:
        raise DatasetteExtensionError(
            f"sqlite-rrf's Datasette plugin could not load {loadable_path()}: {e}. {_INSTALL_HINT}"
        ) from e
    vec = _sqlite_vec_path()
    if vec is None:
        return True, False
    conn.enable_load_extension(True)
    try:
        conn.load_extension(vec)
        return True, True
    except Exception as e:  # optional: the knn pool just stays unavailable
        if not _warned_vec:
            _warned_vec.append(vec)
            log.warning(
                "sqlite-rrf: sqlite-vec is installed but did not load (%s); "
                "the 'knn' pool is unavailable in Datasette",
                e,
            )
        return True, False
    finally:
        conn.enable_load_extension(False)


def check_module(module: Any = None) -> None:
    """Fail with a clear message when the ``sqlite3`` module Datasette uses (or
    ``module``) cannot load the rrf extension."""
    if module is None:
        from datasette.utils import sqlite as ds_sqlite

        module = ds_sqlite.sqlite3
    conn = module.connect(":memory:")
    try:
        load_into(conn)
        conn.execute("SELECT rrf_version()").fetchone()
    finally:
        conn.close()
