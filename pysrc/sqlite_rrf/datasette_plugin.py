"""Datasette plugin: the rrf extension in every Datasette connection, and the recall
statement as a canned query.

Installed with the package (entry point ``datasette`` → ``sqlite_rrf``); with
``pip install 'sqlite-rrf[datasette]'`` it is active in ``datasette memory.db``:

- ``prepare_connection`` loads the rrf extension (``vec_cosine``, ``rrf_fuse``,
  ``rrf_explain``, ``fts5_query``, ``rrf_version``, ``rrf_debug``) into every
  connection, and sqlite-vec too when it is installed (for ``episodes_vec``, the
  ``knn`` pool's index);
- ``canned_queries`` offers ``recall`` (``sql/recall.sql``, each row with its relevance and
  the ``min_relevance`` floor: :func:`sqlite_rrf.relevance.relevance_sql`) in every database that has
  the ``episodes`` and ``episodes_fts`` tables, and ``recall_knn`` (the ``knn`` pool
  form) where ``episodes_vec`` exists and sqlite-vec is loaded. Read-only: a recall in
  Datasette never marks episodes accessed.

Datasette uses ``pysqlite3`` when it is importable and Python's ``sqlite3`` otherwise.
Many Pythons' ``sqlite3`` cannot load extensions (no ``enable_load_extension``); the
``datasette`` extra therefore installs ``pysqlite3-binary`` where it has wheels. When
the module Datasette uses cannot load extensions, ``datasette`` stops at startup with
a message saying what to install (docs/datasette.md).
"""

from __future__ import annotations

import logging
import re
from functools import lru_cache
from typing import Any, Dict, List, Optional, Tuple

from datasette import hookimpl

from .loader import ExtensionLoadError, load, loadable_path
from .resources import _SQL_TOKEN_RE as _TOKEN_RE
from .resources import read_sql, recall_statement, statement_params

log = logging.getLogger(__name__)

#: Parameters of the recall statement that are text; every other parameter is a
#: number (Datasette sends every form field as text, so numbers are converted).
TEXT_PARAMS = frozenset({"query", "profile", "pool", "qvec", "scope", "kind", "skip_vectors"})
#: The form's first fields, in this order; the statement's other parameters follow
#: in the order they appear in it.
FORM_ORDER = ("query", "limit", "min_relevance", "scope", "kind", "since", "until", "profile",
              "qvec", "pool")

TITLE = "Recall (sqlite-rrf)"
def _description() -> str:
    """The canned query's description, with the statement's own defaults."""
    from .statements import POOLS, PROFILES, recall_defaults

    d = recall_defaults()
    others = ", ".join(p for p in PROFILES if p != d["profile"])
    pools = ", ".join(p for p in POOLS if p != d["pool"])
    return (
        "Hybrid recall over the episodes table: BM25, vector similarity, recency and "
        "access fused by weighted Reciprocal Rank Fusion (sql/recall.sql). Empty fields "
        f"take the statement's defaults: limit {d['result_limit']}, profile {d['profile']} "
        f"(or {others}), pool {d['pool']} (or {pools}), k {d['k']:g}, weights "
        f"w_bm25 {d['w_bm25']:g}, w_vec {d['w_vec']:g}, w_recency {d['w_recency']:g}, "
        f"w_access {d['w_access']:g}. qvec is optional: the query embedding as a JSON "
        "array such as [0.1, -0.2, ...]; without it the vector list is empty. Each row's "
        "relevance (0 to 1, the same scale for every query: sqlite_rrf.relevance) is its "
        "last column; min_relevance keeps only the rows that reach it (empty: every row). "
        "Numbers are JSON numbers. Read-only: recalling here does not mark episodes "
        "accessed."
    )


KNN_DESCRIPTION = (
    "The recall statement with the 'knn' pool: sqlite-vec's nearest pool_size "
    "episodes over the whole table (episodes_vec) instead of the most recently "
    "accessed ones. qvec (a JSON array) is required. Other fields as in recall."
)

_INSTALL_HINT = (
    "Install a sqlite3 module that can: `pip install 'sqlite-rrf[datasette]'` brings "
    "pysqlite3-binary on Linux x86_64 (Datasette uses pysqlite3 by itself when it is "
    "importable); elsewhere build pysqlite3 (`pip install pysqlite3`, needs SQLite's "
    "headers) or run Datasette on a Python built with --enable-loadable-sqlite-extensions "
    "(e.g. python.org's Windows installer, Homebrew's Python). See docs/datasette.md."
)

class DatasetteExtensionError(ExtensionLoadError):
    """The sqlite3 module that Datasette uses cannot load the rrf extension."""


# ---------------------------------------------------------------- the canned queries


def _wrap(name: str) -> str:
    """The expression that stands for ``:name`` in the canned query: an empty form
    field is NULL (the statement's default). Numbers are parsed as JSON numbers, so
    ``5`` and ``0.6`` become numbers and text that is not a number fails the query
    (``malformed JSON``) instead of silently reading as 0."""
    if name in TEXT_PARAMS:
        return f"nullif(:{name}, '')"
    return f"json_extract('[' || nullif(trim(:{name}), '') || ']', '$[0]')"


def form_sql(sql: str) -> str:
    """``sql`` with every named parameter ``:x`` replaced by :func:`_wrap`'s
    expression, so that a form field left empty means "default" (NULL) and numbers
    typed as text are numbers. Comments and strings are kept as they are."""
    def sub(m: "re.Match[str]") -> str:
        return m.group(1) if m.group(1) else _wrap(m.group(2))
    header = ("-- Generated by sqlite_rrf.datasette_plugin from sql/recall.sql: each "
              "parameter :x\n-- reads nullif(:x, '') (empty field = default); numbers "
              "go through json_extract.\n")
    return header + _TOKEN_RE.sub(sub, sql)


def form_params(sql: str) -> List[str]:
    """The form fields, most used first (:data:`FORM_ORDER`), then the rest."""
    names = statement_params(sql)
    first = [n for n in FORM_ORDER if n in names]
    return first + [n for n in names if n not in first]


@lru_cache(maxsize=None)
def canned_query(pool: Optional[str] = None) -> Dict[str, Any]:
    """The canned query definition for the recall statement (``pool='knn'``: its
    knn form), as Datasette's ``queries`` metadata takes it."""
    from .relevance import relevance_sql

    sql = relevance_sql(recall_statement("knn") if pool == "knn" else recall_statement())
    return {
        "sql": form_sql(sql),
        "title": TITLE if pool != "knn" else TITLE + " — knn pool",
        "description": _description() if pool != "knn" else KNN_DESCRIPTION,
        "params": form_params(sql),
        "hide_sql": True,
    }


# ---------------------------------------------------------------- loading


@lru_cache(maxsize=None)
def _sqlite_vec_path() -> Optional[str]:
    try:
        import sqlite_vec  # type: ignore[import-not-found]
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
            f"(its Connection has no enable_load_extension). {_INSTALL_HINT}")
    try:
        load(conn)
    except ExtensionLoadError as e:
        raise DatasetteExtensionError(
            f"sqlite-rrf's Datasette plugin could not load {loadable_path()}: {e}. "
            f"{_INSTALL_HINT}") from e
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
            log.warning("sqlite-rrf: sqlite-vec is installed but did not load (%s); "
                        "the 'knn' pool is unavailable in Datasette", e)
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


# ---------------------------------------------------------------- hooks


@hookimpl
def startup(datasette: Any) -> None:
    """Stop Datasette with a readable error when extensions cannot be loaded, before
    it serves pages that would all fail."""
    try:
        check_module()
    except DatasetteExtensionError as e:
        import click
        raise click.ClickException(str(e)) from e


@hookimpl
def prepare_connection(conn: Any) -> None:
    load_into(conn)


def _has_vec(conn: Any) -> bool:
    try:
        conn.execute("SELECT vec_version()").fetchone()
        return True
    except Exception:
        return False


@hookimpl
def canned_queries(datasette: Any, database: str) -> Any:
    async def inner() -> Dict[str, Any]:
        db = datasette.get_database(database)
        tables = set(await db.table_names())
        if not {"episodes", "episodes_fts"} <= tables:
            return {}
        # copies: Datasette adds keys to the definitions it is given
        queries = {"recall": dict(canned_query())}
        if "episodes_vec" in tables and await db.execute_fn(_has_vec):
            queries["recall_knn"] = dict(canned_query("knn"))
        return queries
    return inner
