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
  the ``min_relevance`` floor: :func:`sqlite_rrf.relevance.relevance_sql`) in every
  database that has the ``episodes`` and ``episodes_fts`` tables, and ``recall_knn``
  (the ``knn`` pool) where ``episodes_vec`` exists and sqlite-vec is loaded;
  ``asgi_wrapper`` tells it the request's pool and profile. The query text is
  embedded by ``rrf_embed`` when ``qvec`` is empty, so the page recalls as ``sqlite-rrf
  recall`` does; the description says whether the vector list is on. Read-only: a recall
  in Datasette never marks episodes accessed;
- ``extra_body_script`` makes ``profile`` and ``pool`` select boxes and folds the
  rarely used fields; ``render_cell`` shows a recall row's scores to 3 decimals, its
  times as ISO dates and its ``explain`` in words; ``extra_template_vars`` (the page)
  and ``asgi_wrapper`` (its JSON) say a bad field's fault in the command line's words.

The model is the one ``--model`` would be: the plugin configuration's ``model`` (and
``n_ctx``), else ``$SQLITE_RRF_MODEL``, else the default model; the database's own
model only when it is one of these (docs/datasette.md).

Datasette uses ``pysqlite3`` when it is importable and Python's ``sqlite3`` otherwise.
Many Pythons' ``sqlite3`` cannot load extensions (no ``enable_load_extension``); the
``datasette`` extra therefore installs ``pysqlite3-binary`` where it has wheels. When
the module Datasette uses cannot load extensions, ``datasette`` stops at startup with
a message saying what to install (docs/datasette.md).
"""

from __future__ import annotations

import html
import json
import logging
import os
import threading
from collections import OrderedDict
from contextvars import ContextVar
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Dict, List, Optional, Tuple

from datasette import hookimpl

from .loader import ExtensionLoadError, load, loadable_path
from .resources import recall_statement, replace_params, statement_params

log = logging.getLogger(__name__)

#: The plugin's name in Datasette's metadata (``{"plugins": {"sqlite-rrf": {"model": ...}}}``).
PLUGIN_NAME = "sqlite-rrf"

#: Parameters of the recall statement that are text; every other parameter is a
#: number (Datasette sends every form field as text, so numbers are converted).
TEXT_PARAMS = frozenset({"query", "profile", "pool", "qvec", "scope", "scope2", "kind",
                         "skip_vectors"})
#: Parameters that are a scope's name (``shared`` or ``''``: the shared scope; empty or
#: ``*``: every scope).
SCOPE_PARAMS = ("scope", "scope2")
#: Parameters that are times: ms since the epoch or an ISO date/time, as ``--since``.
TIME_PARAMS = ("since", "until")
#: The form's first fields, in this order; the statement's other parameters follow
#: in the order they appear in it, folded under "more options" on the page.
FORM_ORDER = ("query", "limit", "profile", "pool", "scope", "kind", "since", "until",
              "min_relevance", "qvec")
#: How many of :data:`FORM_ORDER` the page shows unfolded.
FORM_VISIBLE = 9

TITLE = "Recall (sqlite-rrf)"


def _description() -> str:
    """The canned query's description, with the statement's own defaults."""
    from .statements import POOLS, PROFILES, recall_defaults

    d = recall_defaults()
    others = ", ".join(p for p in PROFILES if p != d["profile"])
    pools = ", ".join(p for p in POOLS if p != d["pool"])
    return (
        "The episodes for a query, ranked by sqlite-rrf's recall statement of the chosen "
        "profile and pool, as `sqlite-rrf recall` ranks them. The default profile, "
        f"{d['profile']}, blends each episode's relevance scores (its cosine and its BM25 "
        "score, each relative to the query's best) with small nudges for recency, use and "
        "importance; Reciprocal Rank Fusion of the BM25, vector, recency and access lists "
        f"is the rrf and memory profiles' (others: {others}). Empty fields take the "
        f"statement's defaults: limit {d['result_limit']}, pool {d['pool']} (or {pools}), "
        "every scope ('shared' is the shared one). since and until take an ISO date "
        "(2026-11-01, 2026-11-01T09:30) or ms since the epoch. relevance (0 to 1, the same "
        "scale for every query) is each row's last column; min_relevance keeps the rows "
        "that reach it. Read-only: recalling here does not mark episodes accessed."
    )


KNN_DESCRIPTION = (
    "The recall statement with the 'knn' pool: sqlite-vec's nearest pool_size "
    "episodes over the whole table (episodes_vec) instead of the most recently "
    "accessed ones. It needs the query's vector: the query text embedded with the "
    "database's model, or qvec (a JSON array). Other fields as in recall."
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


def _number(name: str) -> str:
    """``:name`` as a number: empty is NULL, ``5``/``0.6``/``1e3`` are numbers, other
    text fails the query (``malformed JSON``) instead of silently reading as 0; the
    page says the fault in words (:func:`form_error`)."""
    return f"json_extract('[' || nullif(trim(:{name}), '') || ']', '$[0]')"


def _wrap(name: str) -> str:
    """The expression that stands for ``:name`` in the canned query: an empty form
    field is NULL (the statement's default); numbers are numbers (:func:`_number`);
    ``since``/``until`` take ISO dates (``rrf_form_time``); ``scope`` takes the shared
    scope's name (``rrf_form_scope``); an empty ``qvec`` is the query's embedding
    (``rrf_embed``); ``time_from``/``time_to``, when empty, are the window a time named
    in the query stands for (``rrf_time_window``), as ``Store.recall`` reads it."""
    from .checks import MAX_QUERY_CHARS

    if name == "query":  # as Store.recall searches it (checks.recall_query)
        return f"substr(nullif(:query, ''), 1, {MAX_QUERY_CHARS})"
    if name == "qvec":
        return "coalesce(nullif(:qvec, ''), rrf_embed(:query))"
    if name in SCOPE_PARAMS:
        return f"rrf_form_scope(:{name})"
    if name in TIME_PARAMS:
        return f"rrf_form_time(:{name}, '{name}')"
    if name in ("time_from", "time_to"):
        i = 0 if name == "time_from" else 1
        return (f"coalesce({_number(name)}, json_extract(rrf_time_window(:query, "
                f"{_number('now')}), '$[{i}]'))")
    if name in TEXT_PARAMS:
        return f"nullif(:{name}, '')"
    return _number(name)


def form_sql(sql: str) -> str:
    """``sql`` with every named parameter ``:x`` replaced by :func:`_wrap`'s
    expression, so that a form field left empty means "default" (NULL) and numbers
    typed as text are numbers. Comments and strings are kept as they are."""
    header = ("-- Generated by sqlite_rrf.datasette_plugin from the recall statement: each "
              "parameter :x\n-- reads nullif(:x, '') (empty field = default); numbers "
              "go through json_extract;\n-- an empty qvec is rrf_embed(:query), the query's "
              "embedding (docs/datasette.md).\n")
    return header + replace_params(sql, _wrap)


def form_params(sql: str, knn: bool = False) -> List[str]:
    """The form fields, most used first (:data:`FORM_ORDER`), then the rest: the
    statement's parameters, and ``profile`` and ``pool`` (``recall_knn``: ``profile``),
    which choose the statement."""
    names = statement_params(sql)
    chosen = ["profile"] if knn else ["profile", "pool"]
    first = [n for n in FORM_ORDER if n in names or n in chosen]
    return first + [n for n in names if n not in first]


@lru_cache(maxsize=None)
def canned_query(pool: Optional[str] = None, profile: Optional[str] = None) -> Dict[str, Any]:
    """The canned query definition for the recall statement of ``pool`` and ``profile``
    (None: the default's; ``pool='knn'``: the ``recall_knn`` page), as Datasette's
    ``queries`` metadata takes it: the statement :class:`~sqlite_rrf.store.Store` runs
    for them (:func:`sqlite_rrf.statements.recall_statement`), with its relevance."""
    from .relevance import relevance_sql
    from .statements import recall_defaults

    d = recall_defaults()
    knn = pool == "knn"
    sql = relevance_sql(recall_statement(pool or d["pool"], profile or d["profile"]))
    return {
        "sql": form_sql(sql),
        "title": TITLE if not knn else TITLE + " — knn pool",
        "description": _description() if not knn else KNN_DESCRIPTION,
        "params": form_params(sql, knn),
        "hide_sql": True,
    }


#: The ``profile`` and ``pool`` of the request being served (set by :func:`asgi_wrapper`
#: for a recall page): they choose the statement, which Datasette's ``canned_queries``
#: hook, called without the request, cannot see.
_CHOICE: "ContextVar[Tuple[Optional[str], Optional[str]]]" = ContextVar(
    "sqlite_rrf_recall_choice", default=(None, None))


def request_choice(query_string: bytes) -> Tuple[Optional[str], Optional[str]]:
    """The ``(pool, profile)`` a recall page's query string asks for (None: the default,
    also for a value that is not one: :func:`form_error` says so)."""
    from urllib.parse import parse_qs

    from .statements import POOLS, PROFILES

    fields = parse_qs(query_string.decode("utf-8", "replace"), keep_blank_values=True)
    pool = (fields.get("pool") or [""])[0].strip()
    profile = (fields.get("profile") or [""])[0].strip()
    return (pool if pool in POOLS else None, profile if profile in PROFILES else None)


def form_error(args: Any) -> Optional[str]:
    """The fault of the first bad field among a recall page's ``args`` (a mapping of
    field to text), in the command line's words, or None: a time that is neither ms
    nor an ISO date, a number that is not one, a scope that is quotes only, an unknown
    profile or pool."""
    from .app import UserError, ascii_float, parse_time
    from .statements import POOL_MODES, PROFILES

    params = canned_query()["params"]
    for name in params:
        value = (args.get(name) or "").strip()
        if not value:
            continue
        try:
            if name in TIME_PARAMS:
                parse_time(value, name)
            elif name in SCOPE_PARAMS:
                _form_scope(value, name)
            elif name == "profile" and value not in PROFILES:
                return f"profile: expected one of {', '.join(PROFILES)}, got {value!r}"
            elif name == "pool" and value not in POOL_MODES:
                return f"pool: expected one of {', '.join(POOL_MODES)}, got {value!r}"
            elif name not in TEXT_PARAMS:
                ascii_float(value)
        except UserError as e:
            return str(e)
        except ValueError:
            return f"{name}: expected a number such as 5 or 0.6, got {value!r}"
    return None


def _form_scope(value: Optional[str], name: str = "scope") -> Optional[str]:
    """``rrf_form_scope(value)``: the statement's ``:scope`` for the form's scope field:
    NULL (every scope) for an empty field and ``*``; ``''`` for ``shared``; else the
    name. Quotes only (``""``) is a :class:`~sqlite_rrf.app.UserError`."""
    from .app import recall_scopes

    if value is None or not str(value).strip():
        return None
    scopes = recall_scopes(str(value), None, name)
    return None if scopes is None else scopes[0]


# ---------------------------------------------------------------- the query's embedding


@dataclass
class ModelState:
    """The embedding model of one database file in this process: ``embedder`` (None:
    the vector list is off) and ``status``, the sentence the page shows."""

    embedder: Any = None
    status: str = ""
    loaded: bool = False
    lock: threading.Lock = field(default_factory=threading.Lock)
    cache: "OrderedDict[str, Optional[bytes]]" = field(default_factory=OrderedDict)


#: The models by (database file, model asked for, n_ctx).
_MODELS: Dict[Tuple[str, Optional[str], Optional[int]], ModelState] = {}
_MODELS_LOCK = threading.Lock()
#: How many query embeddings each model keeps (a page embeds its query once).
_CACHE_SIZE = 64


def database_model(path: str) -> Dict[str, Any]:
    """The database's model as ``rrf_meta`` records it (``embedding_model``,
    ``embedding_dim``, ``embedding_fingerprint``; empty for a database without
    embeddings), read with Datasette's own ``sqlite3`` module, read-only.

    Not through :class:`~sqlite_rrf.store.Store`: that loads the rrf extension into
    apsw's SQLite, and an extension loaded into two SQLite libraries of one process
    keeps the API table of the last one, so Datasette's connections would then call
    into apsw's library (a crash)."""
    from urllib.parse import quote

    from datasette.utils.sqlite import sqlite3

    conn = sqlite3.connect(f"file:{quote(os.path.abspath(path))}?mode=ro", uri=True)
    try:
        return dict(conn.execute(
            "SELECT key, value FROM rrf_meta WHERE key IN ('embedding_model', "
            "'embedding_dim', 'embedding_fingerprint')").fetchall())
    except sqlite3.DatabaseError:
        return {}
    finally:
        conn.close()


def _open_model(path: str, model: Optional[str], n_ctx: Optional[int]) -> Tuple[Any, str]:
    """The Embedder ``sqlite-rrf recall --model MODEL`` would use on ``path``
    (:func:`sqlite_rrf.app.choose_embedder`, then the database's checks: the same
    dimension and fingerprint) and the page's sentence about it, or None and why the
    vector list is off."""
    from .app import UserError, check_model_args, choose_embedder, error_message
    from .models import (FINGERPRINT_MIN_COSINE, fingerprint_cosine, foreign_hint,
                         foreign_model)

    off = "the vector list is off: "
    try:
        check_model_args(model, n_ctx)
        meta = database_model(path)
    except Exception as e:  # noqa: BLE001 - any failure only turns the vector list off
        return None, off + (error_message(e) or str(e))
    known = meta.get("embedding_model") or None
    dim = meta.get("embedding_dim")
    if dim is None and not model:
        return None, off + (f"this database has no embeddings yet (`sqlite-rrf embed "
                            f"{os.path.basename(path)}` adds them)")
    try:
        emb = choose_embedder(model, n_ctx, remembered=known, required=True)
    except UserError as e:
        return None, off + str(e)
    except Exception as e:  # noqa: BLE001
        return None, off + (error_message(e) or str(e))
    why = None
    try:
        stored = meta.get("embedding_fingerprint")
        if dim is not None and int(dim) != emb.dim:
            why = (f"this database holds {dim}-dimensional embeddings (model {known!r}); "
                   f"the model {emb.model_spec!r} gives {emb.dim}")
        elif isinstance(stored, bytes):
            cos = fingerprint_cosine(stored, emb.fingerprint())
            if cos is None or cos < FINGERPRINT_MIN_COSINE:
                why = (f"the model {emb.model_spec!r} is not the model this database's "
                       f"embeddings were made with ({known!r})")
    except Exception as e:  # noqa: BLE001
        why = error_message(e) or str(e)
    if why is not None:
        emb.close()
        foreign = foreign_model(model, known)
        return None, off + why + (f"; {foreign_hint(foreign)}" if foreign else "")
    return emb, f"the vector list is on: the query is embedded with {emb.model_name}"


def model_state(path: str, model: Optional[str] = None,
                n_ctx: Optional[int] = None) -> ModelState:
    """The model of the database file ``path`` (loaded on the first call for it in this
    process; later calls, from any thread, share it). A vector list that is off is
    logged once."""
    from .models import MODEL_ENV

    key = (path, model or os.environ.get(MODEL_ENV, "").strip() or None, n_ctx)
    with _MODELS_LOCK:
        if not _MODELS:
            import atexit

            atexit.register(close_models)
        state = _MODELS.setdefault(key, ModelState())
    with state.lock:
        if not state.loaded:
            state.embedder, state.status = _open_model(path, model, n_ctx)
            state.loaded = True
            if state.embedder is None:
                log.warning("sqlite-rrf: %s: %s", path, state.status)
    return state


def close_models() -> None:
    """Close every model this process loaded (at exit; a later call loads again)."""
    with _MODELS_LOCK:
        states = list(_MODELS.values())
        _MODELS.clear()
    for state in states:
        with state.lock:
            if state.embedder is not None:
                state.embedder.close()
            state.embedder, state.loaded = None, False


def embed_query(state: ModelState, text: Any) -> Optional[bytes]:
    """The float32 blob of ``text``'s embedding (as ``Store.recall`` binds it), or None
    for no text or no model."""
    from .checks import blob, has_text, recall_query

    if not isinstance(text, str) or state.embedder is None:
        return None
    text = recall_query(text)
    if not has_text(text):
        return None
    with state.lock:  # one model, Datasette's threads take turns
        if text in state.cache:
            state.cache.move_to_end(text)
            return state.cache[text]
        value, _ = blob(state.embedder.embed(text), "query embedding")
        state.cache[text] = value
        if len(state.cache) > _CACHE_SIZE:
            state.cache.popitem(last=False)
    return value


def _config(datasette: Any, database: str) -> Tuple[Optional[str], Optional[str], Optional[int]]:
    """The database's file and the configured model and context size (the plugin's
    ``model`` and ``n_ctx``; None: ``$SQLITE_RRF_MODEL`` or the default)."""
    try:
        path = datasette.get_database(database).path
    except KeyError:
        path = None
    cfg = datasette.plugin_config(PLUGIN_NAME, database=database) or {}
    model = cfg.get("model") or None
    n_ctx = cfg.get("n_ctx")
    return path, model, int(n_ctx) if n_ctx else None


def _time_window(query: Any, now: Any) -> Optional[str]:
    """``rrf_time_window(query, now)``: the window (``[start, end]`` ms, JSON) a time the
    query names stands for ("last week", "in May": :mod:`sqlite_rrf.timeexpr`), as
    ``Store.recall`` reads it; NULL for none."""
    from .checks import recall_query
    from .store import now_ms
    from .timeexpr import resolve

    if not isinstance(query, str):
        return None
    w = resolve(recall_query(query), now_ms() if now is None else int(now))
    return None if w is None else json.dumps([w.start, w.end])


def _form_time(value: Any, name: str) -> Optional[int]:
    """``rrf_form_time(value, name)``: the field ``name`` (``since``/``until``) as ms:
    NULL for empty, ms or an ISO date (:func:`sqlite_rrf.app.parse_time`); a bad value
    fails the query (the page says why: :func:`form_error`)."""
    from .app import parse_time

    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if isinstance(value, (int, float)):
        return int(value)
    return parse_time(str(value), str(name))


def register_functions(conn: Any, path: Optional[str], model: Optional[str] = None,
                       n_ctx: Optional[int] = None) -> None:
    """Register ``rrf_embed``, ``rrf_form_time``, ``rrf_form_scope`` and
    ``rrf_time_window`` on the DB-API connection ``conn`` of the database file ``path``
    (None: an in-memory database, whose ``rrf_embed`` is NULL)."""
    def rrf_embed(text: Any) -> Optional[bytes]:
        if path is None or not isinstance(text, str):
            return None
        return embed_query(model_state(path, model, n_ctx), text)

    conn.create_function("rrf_embed", 1, rrf_embed, deterministic=True)
    conn.create_function("rrf_form_time", 2, _form_time, deterministic=True)
    conn.create_function("rrf_form_scope", 1, _form_scope, deterministic=True)
    conn.create_function("rrf_time_window", 2, _time_window, deterministic=True)


# ---------------------------------------------------------------- reading a recall row

#: The columns that make a row a recall row (the canned queries' and ``sql/recall.sql``'s).
RECALL_COLUMNS = frozenset({"id", "content", "score", "bm25_rank", "vec_rank",
                            "recency_rank", "access_rank", "similarity", "explain"})
#: Columns shown to 3 decimals; times shown as ISO dates.
ROUNDED = frozenset({"score", "similarity", "relevance", "bm25_score"})
TIMES = frozenset({"created_at", "accessed_at"})


def explain_text(row: Any) -> str:
    """A recall row's ``explain`` in words, as ``sqlite-rrf recall --explain`` says it:
    each list's rank (the vector's with its cosine), then how the score was made."""
    def get(name: str) -> Any:
        try:
            return row[name]
        except (KeyError, IndexError):
            return None

    def rank(label: str, r: Any, extra: str = "") -> str:
        return f"{label} #{r}{extra}" if r is not None else f"{label} -"

    sim = get("similarity")
    ranks = " · ".join([rank("bm25", get("bm25_rank")),
                        rank("vector", get("vec_rank"),
                             f" (cos {sim:.3f})" if isinstance(sim, float) else ""),
                        rank("recency", get("recency_rank")),
                        rank("access", get("access_rank"))])
    try:
        ex = json.loads(get("explain") or "{}")
    except (TypeError, ValueError):
        return ranks
    if not isinstance(ex, dict):
        return ranks
    score = get("score")
    total = f" = {score:.3f}" if isinstance(score, (int, float)) else ""
    if "relevance" in ex and isinstance(ex["relevance"], dict):  # 'hybrid'
        r = ex["relevance"]
        a = r.get("alpha") or 0.0
        cos, b = r.get("cosine") or 0.0, r.get("bm25") or 0.0
        g = (ex.get("recency_access_importance") or {}).get("nudge", 0.0)
        how = (f"blend {a:g}·cos/best {cos:.3f} + {1 - a:g}·bm25/best {b:.3f} = "
               f"{a * cos + (1 - a) * b:.3f}; nudge {g:.3f} (recency/use/importance){total}")
    else:
        parts, mult = [], ""
        for name, e in ex.items():
            if not isinstance(e, dict):
                parts.append(f"{name} {e:.3f}" if isinstance(e, float) else f"{name} {e}")
            elif "multiplier" in e:
                mult = f" × {e['multiplier']:.3f} ({name.replace('_', '/')})"
            elif "rank" in e:
                parts.append(f"{name} {e['contribution']:.4f} = {e['weight']:g}/(k+{e['rank']:g})")
            elif "boost" in e:
                parts.append(f"{name} {e['boost']:.3f} = boost")
        body = " + ".join(parts)
        how = f"({body}){mult}{total}" if mult else f"{body}{total}"
    return f"{ranks}\n{how}"


def render_recall_cell(row: Any, value: Any, column: str) -> Optional[str]:
    """The HTML of a recall row's cell (rounded scores, ISO times, ``explain`` in words),
    or None to leave it to Datasette."""
    from .app import iso_time

    if value is None:
        return None
    if column in ROUNDED and isinstance(value, float):
        return f'<span title="{value!r}">{value:.3f}</span>'
    if column in TIMES and isinstance(value, int):
        return f'<span title="{value} ms">{html.escape(iso_time(value) or "")}</span>'
    if column == "explain":
        lines = explain_text(row).split("\n")
        return ('<div class="rrf-explain">' + "<br>".join(html.escape(x) for x in lines)
                + f'</div><details><summary>JSON</summary><code>{html.escape(str(value))}'
                "</code></details>")
    return None


def _is_recall_row(row: Any) -> bool:
    try:
        return RECALL_COLUMNS <= set(row.keys())
    except (AttributeError, TypeError):
        return False


# ---------------------------------------------------------------- the page


def _is_recall_page(request: Any) -> bool:
    return _recall_path(getattr(request, "path", "") or "")


def page_script() -> str:
    """The recall page's script: ``profile`` and ``pool`` become select boxes (the
    current value kept), the fields after the first :data:`FORM_VISIBLE` fold under
    "more options", and a style gives the content column room."""
    from .statements import POOLS, PROFILES, recall_defaults

    d = recall_defaults()
    choices = {"profile": [["", f"default ({d['profile']})"]] + [[p, p] for p in PROFILES],
               "pool": [["", f"default ({d['pool']})"]] + [[p, p] for p in POOLS]}
    visible = list(FORM_ORDER[:FORM_VISIBLE])
    css = (".rows-and-columns td.col-content{min-width:20em;max-width:30em;"
           "white-space:normal}"
           ".rows-and-columns td.col-explain{min-width:25em;font-size:0.85em}"
           ".rows-and-columns td.col-explain code{white-space:pre-wrap;"
           "word-break:break-all}"
           "form.sql details.rrf-more{margin:0.5em 0}"
           "form.sql label{display:inline-block;min-width:9em}"
           ".rows-and-columns td.col-id{white-space:nowrap}")
    return f"""
(function () {{
  var form = document.querySelector('form.sql');
  if (!form) return;
  var style = document.createElement('style');
  style.textContent = {json.dumps(css)};
  document.head.appendChild(style);
  var choices = {json.dumps(choices)};
  Object.keys(choices).forEach(function (name) {{
    var input = form.querySelector('input[name="' + name + '"]');
    if (!input) return;
    var select = document.createElement('select');
    select.name = name;
    select.id = input.id;
    choices[name].forEach(function (c) {{
      var o = document.createElement('option');
      o.value = c[0];
      o.textContent = c[1];
      if (c[0] === input.value) o.selected = true;
      select.appendChild(o);
    }});
    input.parentNode.replaceChild(select, input);
  }});
  var visible = {json.dumps(visible)};
  var more = document.createElement('details');
  more.className = 'rrf-more';
  var summary = document.createElement('summary');
  summary.textContent = 'more options (weights, pool size, k, alpha, qvec, now, ...)';
  more.appendChild(summary);
  var last = null, moved = 0;
  form.querySelectorAll('input[type="text"], select').forEach(function (el) {{
    var p = el.closest('p');
    if (!p || p.parentNode !== form) return;
    if (visible.indexOf(el.name) >= 0) {{ last = p; return; }}
    if (el.value) more.open = true;
    more.appendChild(p);
    moved++;
  }});
  if (moved && last) last.parentNode.insertBefore(more, last.nextSibling);
}})();
"""


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
def prepare_connection(conn: Any, database: Any = None, datasette: Any = None) -> None:
    """Load the extension into ``conn`` and register the plugin's functions (each of
    Datasette's threads has its own connection; they share one model)."""
    load_into(conn)
    path = model = n_ctx = None
    if datasette is not None and database is not None:
        path, model, n_ctx = _config(datasette, database)
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
        path, model, n_ctx = _config(datasette, database)
        status = "the vector list is off: an in-memory database has no model"
        if path is not None:
            loop = asyncio.get_running_loop()
            state = await loop.run_in_executor(None, model_state, path, model, n_ctx)
            status = state.status
        note = status[0].upper() + status[1:] + "."
        # copies: Datasette adds keys to the definitions it is given
        pool, profile = _CHOICE.get()
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
    if request is None or not _is_recall_page(request):
        return None
    return page_script()


@hookimpl
def extra_template_vars(request: Any) -> Optional[Dict[str, Any]]:
    """On a recall page with a bad field, the error the page shows is the field's fault
    in the command line's words (SQLite alone would say "malformed JSON" or "user-defined
    function raised exception")."""
    if request is None or not _is_recall_page(request):
        return None
    error = form_error(request.args)
    return {"error": error} if error else None


def _recall_path(path: str) -> bool:
    """Whether ``path`` is a recall page's, in any format (``/db/recall``,
    ``/db/recall.json``, ``/db/recall_knn.csv``)."""
    last = path.rsplit("/", 1)[-1].split(".", 1)[0]
    return last in ("recall", "recall_knn")


def json_form_error(path: str, query_string: bytes) -> Optional[str]:
    """The fault of a bad field in a request for a recall page's JSON (``path`` ending
    in ``/recall.json`` or ``/recall_knn.json``), or None (not such a request, or no
    bad field): :func:`form_error` of its query string."""
    if not path.endswith(("/recall.json", "/recall_knn.json")):
        return None
    from urllib.parse import parse_qs

    fields = parse_qs(query_string.decode("utf-8", "replace"), keep_blank_values=True)
    return form_error({k: v[0] for k, v in fields.items()})


@hookimpl
def asgi_wrapper(datasette: Any) -> Any:
    """A recall page's request: its ``profile`` and ``pool`` choose the statement the
    ``recall`` canned query runs (:data:`_CHOICE`); its JSON with a bad field is a 400
    whose error says the field's fault in the command line's words (as the HTML page
    does through :func:`extra_template_vars`), not SQLite's."""
    def wrap(app: Any) -> Any:
        async def inner(scope: Dict[str, Any], receive: Any, send: Any) -> None:
            path = scope.get("path") or ""
            if scope.get("type") != "http" or not _recall_path(path):
                await app(scope, receive, send)
                return
            qs = scope.get("query_string") or b""
            error = json_form_error(path, qs)
            if error is None:
                token = _CHOICE.set(request_choice(qs))
                try:
                    await app(scope, receive, send)
                finally:
                    _CHOICE.reset(token)
                return
            body = json.dumps({"ok": False, "error": error, "status": 400,
                               "title": "Invalid parameter"}).encode("utf-8")
            await send({"type": "http.response.start", "status": 400,
                        "headers": [(b"content-type", b"application/json; charset=utf-8"),
                                    (b"content-length", str(len(body)).encode())]})
            await send({"type": "http.response.body", "body": body})
        return inner
    return wrap


@hookimpl
def render_cell(row: Any, value: Any, column: str, table: Any) -> Optional[str]:
    """A recall row's cell: scores to 3 decimals, times as ISO dates, ``explain`` in
    words (the JSON folded under it)."""
    if table is not None or not _is_recall_row(row):
        return None
    out = render_recall_cell(row, value, column)
    if out is None:
        return None
    from markupsafe import Markup

    return Markup(out)
