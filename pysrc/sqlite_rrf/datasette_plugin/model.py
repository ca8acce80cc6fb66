"""The query's embedding in Datasette: the model ``sqlite-rrf recall`` would use on the
database (loaded once per process, on first use) and the SQL functions the canned query
calls (``rrf_embed``, ``rrf_form_time``, ``rrf_form_scope``, ``rrf_time_window``)."""

from __future__ import annotations

import json
import logging
import os
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Dict, Optional, Tuple

from .queries import PLUGIN_NAME, form_scope

if TYPE_CHECKING:
    from ..embedding.embedder import Embedder

log = logging.getLogger("sqlite_rrf.datasette_plugin")


@dataclass
class ModelState:
    """The embedding model of one database file in this process: ``embedder`` (None:
    the vector list is off) and ``status``, the sentence the page shows."""

    embedder: Optional[Embedder] = None
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
        return dict(
            conn.execute(
                "SELECT key, value FROM rrf_meta WHERE key IN ('embedding_model', "
                "'embedding_dim', 'embedding_fingerprint')"
            ).fetchall()
        )
    except sqlite3.DatabaseError:
        return {}
    finally:
        conn.close()


def _open_model(
    path: str, model: Optional[str], n_ctx: Optional[int]
) -> Tuple[Optional[Embedder], str]:
    """The Embedder ``sqlite-rrf recall --model MODEL`` would use on ``path``
    (:func:`sqlite_rrf.app.choose_embedder`, then the database's checks: the same
    dimension and fingerprint) and the page's sentence about it, or None and why the
    vector list is off."""
    from ..app import UserError, check_model_args, choose_embedder, error_message
    from ..embedding.models import (
        FINGERPRINT_MIN_COSINE,
        fingerprint_cosine,
        foreign_hint,
        foreign_model,
    )

    off = "the vector list is off: "
    try:
        check_model_args(model, n_ctx)
        meta = database_model(path)
    except Exception as e:
        return None, off + (error_message(e) or str(e))
    known = meta.get("embedding_model") or None
    dim = meta.get("embedding_dim")
    if dim is None and not model:
        return None, off + (
            f"this database has no embeddings yet (`sqlite-rrf embed "
            f"{os.path.basename(path)}` adds them)"
        )
    try:
        emb = choose_embedder(model, n_ctx, remembered=known, required=True)
    except UserError as e:
        return None, off + str(e)
    except Exception as e:
        return None, off + (error_message(e) or str(e))
    assert emb is not None  # required=True: a UserError rather than None
    why = None
    try:
        stored = meta.get("embedding_fingerprint")
        if dim is not None and int(dim) != emb.dim:
            why = (
                f"this database holds {dim}-dimensional embeddings (model {known!r}); "
                f"the model {emb.model_spec!r} gives {emb.dim}"
            )
        elif isinstance(stored, bytes):
            cos = fingerprint_cosine(stored, emb.fingerprint())
            if cos is None or cos < FINGERPRINT_MIN_COSINE:
                why = (
                    f"the model {emb.model_spec!r} is not the model this database's "
                    f"embeddings were made with ({known!r})"
                )
    except Exception as e:
        why = error_message(e) or str(e)
    if why is not None:
        emb.close()
        foreign = foreign_model(model, known)
        return None, off + why + (f"; {foreign_hint(foreign)}" if foreign else "")
    return emb, f"the vector list is on: the query is embedded with {emb.model_name}"


def model_state(path: str, model: Optional[str] = None, n_ctx: Optional[int] = None) -> ModelState:
    """The model of the database file ``path`` (loaded on the first call for it in this
    process; later calls, from any thread, share it). A vector list that is off is
    logged once."""
    from ..embedding.models import MODEL_ENV

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
    from ..core.validate import blob, has_text, recall_query

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


def database_config(
    datasette: Any, database: str
) -> Tuple[Optional[str], Optional[str], Optional[int]]:
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
    query names stands for ("last week", "in May": :mod:`sqlite_rrf.core.timeexpr`), as
    ``Store.recall`` reads it; NULL for none."""
    from ..core.timeexpr import resolve
    from ..core.validate import recall_query
    from ..store import now_ms

    if not isinstance(query, str):
        return None
    w = resolve(recall_query(query), now_ms() if now is None else int(now))
    return None if w is None else json.dumps([w.start, w.end])


def _form_time(value: Any, name: str) -> Optional[int]:
    """``rrf_form_time(value, name)``: the field ``name`` (``since``/``until``) as ms:
    NULL for empty, ms or an ISO date (:func:`sqlite_rrf.app.parse_time`); a bad value
    fails the query (the page says why: :func:`form_error`)."""
    from ..app import parse_time

    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if isinstance(value, (int, float)):
        return int(value)
    return parse_time(str(value), str(name))


def register_functions(
    conn: Any, path: Optional[str], model: Optional[str] = None, n_ctx: Optional[int] = None
) -> None:
    """Register ``rrf_embed``, ``rrf_form_time``, ``rrf_form_scope`` and
    ``rrf_time_window`` on the DB-API connection ``conn`` of the database file ``path``
    (None: an in-memory database, whose ``rrf_embed`` is NULL)."""

    def rrf_embed(text: Any) -> Optional[bytes]:
        if path is None or not isinstance(text, str):
            return None
        return embed_query(model_state(path, model, n_ctx), text)

    conn.create_function("rrf_embed", 1, rrf_embed, deterministic=True)
    conn.create_function("rrf_form_time", 2, _form_time, deterministic=True)
    conn.create_function("rrf_form_scope", 1, form_scope, deterministic=True)
    conn.create_function("rrf_time_window", 2, _time_window, deterministic=True)
