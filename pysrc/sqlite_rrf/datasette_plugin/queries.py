"""The ``recall`` and ``recall_knn`` canned queries: the recall statement of the form's
pool and profile with every parameter read as a form field (empty: the default), and the
form's fields checked in the command line's words."""

from __future__ import annotations

from contextvars import ContextVar
from functools import lru_cache
from typing import Any, Dict, List, Optional, Tuple

from ..core.sql_files import replace_params, statement_params
from ..core.statements import recall_statement

#: The plugin's name in Datasette's metadata (``{"plugins": {"sqlite-rrf": {"model": ...}}}``).
PLUGIN_NAME = "sqlite-rrf"

#: Parameters of the recall statement that are text; every other parameter is a
#: number (Datasette sends every form field as text, so numbers are converted).
TEXT_PARAMS = frozenset(
    {"query", "profile", "pool", "qvec", "scope", "scope2", "kind", "skip_vectors"}
)
#: Parameters that are a scope's name (``shared`` or ``''``: the shared scope; empty or
#: ``*``: every scope).
SCOPE_PARAMS = ("scope", "scope2")
#: Parameters that are times: ms since the epoch or an ISO date/time, as ``--since``.
TIME_PARAMS = ("since", "until")
#: The form's first fields, in this order; the statement's other parameters follow
#: in the order they appear in it, folded under "more options" on the page.
FORM_ORDER = (
    "query",
    "limit",
    "profile",
    "pool",
    "scope",
    "kind",
    "since",
    "until",
    "min_relevance",
    "qvec",
)
#: How many of :data:`FORM_ORDER` the page shows unfolded.
FORM_VISIBLE = 9

TITLE = "Recall (sqlite-rrf)"


def _description() -> str:
    """The canned query's description, with the statement's own defaults."""
    from ..core.statements import POOLS, PROFILES, recall_defaults

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
        "scale for every query) is a column; min_relevance shows only the rows that reach it "
        "and min_share of the best row's relevance. Read-only: recalling here does not "
        "mark episodes accessed."
    )


KNN_DESCRIPTION = (
    "The recall statement with the 'knn' pool: sqlite-vec's nearest pool_size "
    "episodes over the whole table (episodes_vec) instead of the most recently "
    "accessed ones. It needs the query's vector: the query text embedded with the "
    "database's model, or qvec (a JSON array). Other fields as in recall."
)


def _number(name: str) -> str:
    """``:name`` as a number: empty is NULL, ``5``/``0.6``/``1e3`` are numbers, other
    text fails the query (``malformed JSON``) instead of silently reading as 0; the
    page says the fault in words (:func:`form_error`)."""
    return f"json_extract('[' || nullif(trim(:{name}), '') || ']', '$[0]')"


def form_param(name: str) -> str:
    """The expression that stands for ``:name`` in the canned query: an empty form
    field is NULL (the statement's default); numbers are numbers (:func:`_number`);
    ``since``/``until`` take ISO dates (``rrf_form_time``); ``scope`` takes the shared
    scope's name (``rrf_form_scope``); an empty ``qvec`` is the query's embedding
    (``rrf_embed``); ``time_from``/``time_to``, when empty, are the window a time named
    in the query stands for (``rrf_time_window``), as ``Store.recall`` reads it."""
    from ..core.validate import MAX_QUERY_CHARS

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
        return (
            f"coalesce({_number(name)}, json_extract(rrf_time_window(:query, "
            f"{_number('now')}), '$[{i}]'))"
        )
    if name in TEXT_PARAMS:
        return f"nullif(:{name}, '')"
    return _number(name)


def form_sql(sql: str) -> str:
    """``sql`` with every named parameter ``:x`` replaced by :func:`form_param`'s
    expression, so that a form field left empty means "default" (NULL) and numbers
    typed as text are numbers. Comments and strings are kept as they are."""
    header = (
        "-- Generated by sqlite_rrf.datasette_plugin from the recall statement: each "
        "parameter :x\n-- reads nullif(:x, '') (empty field = default); numbers "
        "go through json_extract;\n-- an empty qvec is rrf_embed(:query), the query's "
        "embedding (docs/datasette.md).\n"
    )
    return header + replace_params(sql, form_param)


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
    for them (:func:`sqlite_rrf.core.statements.recall_statement`) (relevance and the
    policy included)."""
    from ..core.statements import recall_defaults

    d = recall_defaults()
    knn = pool == "knn"
    sql = recall_statement(pool or d["pool"], profile or d["profile"])
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
CHOICE: "ContextVar[Tuple[Optional[str], Optional[str]]]" = ContextVar(
    "sqlite_rrf_recall_choice", default=(None, None)
)


def request_choice(query_string: bytes) -> Tuple[Optional[str], Optional[str]]:
    """The ``(pool, profile)`` a recall page's query string asks for (None: the default,
    also for a value that is not one: :func:`form_error` says so)."""
    from urllib.parse import parse_qs

    from ..core.statements import POOLS, PROFILES

    fields = parse_qs(query_string.decode("utf-8", "replace"), keep_blank_values=True)
    pool = (fields.get("pool") or [""])[0].strip()
    profile = (fields.get("profile") or [""])[0].strip()
    return (pool if pool in POOLS else None, profile if profile in PROFILES else None)


def form_error(args: Any) -> Optional[str]:
    """The fault of the first bad field among a recall page's ``args`` (a mapping of
    field to text), in the command line's words, or None: a time that is neither ms
    nor an ISO date, a number that is not one, a scope that is quotes only, an unknown
    profile or pool."""
    from ..app import UserError, ascii_float, parse_time
    from ..core.statements import POOL_MODES, PROFILES

    params = canned_query()["params"]
    for name in params:
        value = (args.get(name) or "").strip()
        if not value:
            continue
        try:
            if name in TIME_PARAMS:
                parse_time(value, name)
            elif name in SCOPE_PARAMS:
                form_scope(value, name)
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


def form_scope(value: Optional[str], name: str = "scope") -> Optional[str]:
    """``rrf_form_scope(value)``: the statement's ``:scope`` for the form's scope field:
    NULL (every scope) for an empty field and ``*``; ``''`` for ``shared``; else the
    name. Quotes only (``""``) is a :class:`~sqlite_rrf.app.UserError`."""
    from ..app import recall_scopes

    if value is None or not str(value).strip():
        return None
    scopes = recall_scopes(str(value), None, name)
    return None if scopes is None else scopes[0]
