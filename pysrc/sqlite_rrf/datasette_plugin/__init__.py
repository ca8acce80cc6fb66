"""Datasette plugin: the rrf extension and the query's embedding in every Datasette
connection, and the recall statement as a canned query.

Installed with the package (entry point ``datasette`` → ``sqlite_rrf``); with
``pip install 'sqlite-rrf[datasette]'`` it is active in ``datasette memory.db``:

- ``prepare_connection`` loads the rrf extension (``vec_cosine``, ``rrf_fuse``,
  ``rrf_explain``, ``fts5_query``, ``rrf_version``, ``rrf_debug``) into every
  connection, and sqlite-vec too when it is installed (for ``episodes_vec``, the
  ``knn`` pool's index), and registers the plugin's functions: ``rrf_embed(text)``
  (the text's embedding with the database's model, as ``sqlite-rrf recall`` chooses it:
  :func:`sqlite_rrf.app.choose_embedder`; loaded once per process, on first use; NULL
  when no model is available), ``rrf_form_time``, ``rrf_form_scope`` and
  ``rrf_time_window`` (the form's fields as the command line reads them);
- ``canned_queries`` offers ``recall`` (the recall statement of the form's pool and
  profile, as :class:`~sqlite_rrf.store.Store` runs it, each row with its relevance and
  the ``min_relevance`` floor the statement applies, ``sql/recall/top.sql``) in every
  database that has the ``episodes`` and ``episodes_fts`` tables, and ``recall_knn``
  (the ``knn`` pool) where ``episodes_vec`` exists and sqlite-vec is loaded;
  ``asgi_wrapper`` tells it the request's pool and profile. The query text is
  embedded by ``rrf_embed`` when ``qvec`` is empty, so the page recalls as ``sqlite-rrf
  recall`` does; the description says whether the vector list is on. Read-only: a recall
  in Datasette never marks episodes accessed;
- ``extra_body_script`` makes ``profile`` and ``pool`` select boxes and folds the
  rarely used fields; ``render_cell`` shows a recall row's scores to 3 decimals, its
  times as ISO dates and its ``explain`` in words, and on the ``episodes`` table's pages
  the times as ISO dates and an embedding as ``384-d vector``; ``extra_template_vars`` (the page)
  and ``asgi_wrapper`` (its JSON) say a bad field's fault in the command line's words.

The model is the one ``--model`` would be: the plugin configuration's ``model`` (and
``n_ctx``), else ``$SQLITE_RRF_MODEL``, else the default model; the database's own
model only when it is one of these (docs/datasette.md).

Datasette uses ``pysqlite3`` when it is importable and Python's ``sqlite3`` otherwise.
Many Pythons' ``sqlite3`` cannot load extensions (no ``enable_load_extension``); the
``datasette`` extra therefore installs ``pysqlite3-binary`` where it has wheels. When
the module Datasette uses cannot load extensions, ``datasette`` stops at startup with
a message saying what to install (docs/datasette.md).

The modules: :mod:`.queries` (the canned queries and the form's fields), :mod:`.model`
(the query's embedding and the SQL functions), :mod:`.page` (the page's cells and
script), :mod:`.loading` (the extensions in Datasette's connections); the hooks are here.
"""

from __future__ import annotations

import json
from typing import Any, Dict, Optional

from datasette import hookimpl

from .loading import DatasetteExtensionError, check_module, load_into
from .model import database_config, model_state, register_functions
from .page import (
    is_recall_page,
    is_recall_path,
    is_recall_row,
    json_form_error,
    page_error,
    page_script,
    render_recall_cell,
    render_table_cell,
)
from .queries import CHOICE, PLUGIN_NAME, TITLE, canned_query, form_error, request_choice

__all__ = [
    "PLUGIN_NAME",
    "TITLE",
    "DatasetteExtensionError",
    "asgi_wrapper",
    "canned_queries",
    "canned_query",
    "check_module",
    "extra_body_script",
    "extra_template_vars",
    "form_error",
    "prepare_connection",
    "render_cell",
    "startup",
]


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
def prepare_connection(conn: Any, database: Any = None, datasette: Any = None) -> None:
    """Load the extension into ``conn`` and register the plugin's functions (each of
    Datasette's threads has its own connection; they share one model)."""
    load_into(conn)
    path = model = n_ctx = None
    if datasette is not None and database is not None:
        path, model, n_ctx = database_config(datasette, database)
    register_functions(conn, path, model, n_ctx)


def _has_vec(conn: Any) -> bool:
    try:
        conn.execute("SELECT vec_version()").fetchone()
        return True
    except Exception:
        return False


@hookimpl
def canned_queries(datasette: Any, database: str) -> Any:
    async def inner() -> Dict[str, Any]:
        import asyncio

        db = datasette.get_database(database)
        tables = set(await db.table_names())
        if not {"episodes", "episodes_fts"} <= tables:
            return {}
        path, model, n_ctx = database_config(datasette, database)
        status = "the vector list is off: an in-memory database has no model"
        if path is not None:
            loop = asyncio.get_running_loop()
            state = await loop.run_in_executor(None, model_state, path, model, n_ctx)
            status = state.status
        note = status[0].upper() + status[1:] + "."
        # copies: Datasette adds keys to the definitions it is given
        pool, profile = CHOICE.get()
        queries = {"recall": dict(canned_query(pool, profile))}
        if "episodes_vec" in tables and await db.execute_fn(_has_vec):
            queries["recall_knn"] = dict(canned_query("knn", profile))
        for q in queries.values():
            q["description"] = f"{note} {q['description']}"
        return queries

    return inner


@hookimpl
def extra_body_script(request: Any) -> Optional[str]:
    """The recall page's select boxes, folded fields and column widths."""
    if request is None or not is_recall_page(request):
        return None
    return page_script()


@hookimpl
def extra_template_vars(request: Any) -> Optional[Dict[str, Any]]:
    """On a recall page with a bad field, the error the page shows is the field's fault
    in the command line's words (SQLite alone would say "malformed JSON" or "user-defined
    function raised exception")."""
    if request is None or not is_recall_page(request):
        return None
    error = page_error(request.args)
    return {"error": error} if error else None


@hookimpl
def asgi_wrapper(datasette: Any) -> Any:
    """A recall page's request: its ``profile`` and ``pool`` choose the statement the
    ``recall`` canned query runs (:data:`CHOICE`); its JSON with a bad field is a 400
    whose error says the field's fault in the command line's words (as the HTML page
    does through :func:`extra_template_vars`), not SQLite's."""

    def wrap(app: Any) -> Any:
        async def inner(scope: Dict[str, Any], receive: Any, send: Any) -> None:
            path = scope.get("path") or ""
            if scope.get("type") != "http" or not is_recall_path(path):
                await app(scope, receive, send)
                return
            qs = scope.get("query_string") or b""
            error = json_form_error(path, qs)
            if error is None:
                token = CHOICE.set(request_choice(qs))
                try:
                    await app(scope, receive, send)
                finally:
                    CHOICE.reset(token)
                return
            body = json.dumps(
                {"ok": False, "error": error, "status": 400, "title": "Invalid parameter"}
            ).encode("utf-8")
            await send(
                {
                    "type": "http.response.start",
                    "status": 400,
                    "headers": [
                        (b"content-type", b"application/json; charset=utf-8"),
                        (b"content-length", str(len(body)).encode()),
                    ],
                }
            )
            await send({"type": "http.response.body", "body": body})

        return inner

    return wrap


@hookimpl
def render_cell(row: Any, value: Any, column: str, table: Any) -> Optional[str]:
    """A recall row's cell: scores to 3 decimals, times as ISO dates, ``explain`` in
    words (the JSON folded under it); a memory table's cell (``episodes``): times as
    ISO dates, an embedding as ``384-d vector``."""
    if table is not None:
        out = render_table_cell(value, column, str(table))
    elif is_recall_row(row):
        out = render_recall_cell(row, value, column)
    else:
        return None
    if out is None:
        return None
    from markupsafe import Markup

    return Markup(out)
