"""The recall statement of one pool and one profile, composed from the named SQL
fragments of ``sql/recall/``.

Each fragment file holds one or more common table expressions (CTEs) of the
statement: ``bm25.sql`` (the BM25 list), one file per vector pool (``pool_<name>.sql``,
defining ``pool_<name>``), ``candidates.sql`` (candidates, similarity, ranks), one file
per fusion profile (``profile_<name>.sql``, defining ``score_<name>`` and
``explain_<name>``, the returned rows with the profile's explanation), ``top.sql``
(the best ``:limit``) and ``select.sql`` (the final SELECT). The filters
(``:scope``, ``:scope2``, ``:kind``, ``:since``, ``:until``) are written once, in
``filter.sql`` (the predicate a row must pass) and ``no_filter.sql`` (whether every
filter is off); a fragment says ``{filter}`` or ``{no_filter}`` where it needs them,
and the composition puts them there.

The ``params`` CTE (every parameter with its default) is written from
:data:`DEFAULTS`, the one table of the recall defaults; :func:`recall_defaults` reads
that table. A statement is the ``params`` of its profile, the fragments of its pool
and profile, and three one-line CTEs that name the pool, the scores and the
explanation it uses (``pool``, ``scores``, ``explain``): :func:`recall_statement`.

Every host runs the statement of one pool and one profile: the Store (and through it
the CLI, the MCP server and the hook), the Datasette plugin, and ``sqlite-rrf sql
--pool P --profile F``, which prints it for the ``sqlite3`` shell and other clients.
The shipped ``sql/recall.sql`` is the statement of the default pool and profile, and
``sql/recall/params.sql`` its ``params`` CTE. The profiles are named and described in
:data:`sqlite_rrf.core.profiles.TABLE`; ``sql/recall/header.sql``, the comment every
statement starts with, lists them from there (:func:`profiles_comment`).
``python -m sqlite_rrf.core.statements --write`` rewrites the three files, and ``--check``
fails when one is stale (``make lint``; ``tests/test_statements.py`` and
``tests/test_profile_docs.py`` check them too).
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from functools import lru_cache
from typing import Any, Dict, List, Optional, Sequence, Tuple

from . import profiles
from .sql_files import read_sql, sql_dir, statement_params

#: The fusion profiles' names, in the order the documentation lists them (each is
#: described once, in :data:`sqlite_rrf.core.profiles.TABLE`).
PROFILES: Tuple[str, ...] = profiles.NAMES
#: The vector pools that need nothing but the rrf extension.
POOLS: Tuple[str, ...] = ("recent", "all", "quantized")
#: Every pool: 'knn' also needs sqlite-vec and its index (``sql/knn.sql``).
POOL_MODES: Tuple[str, ...] = (*POOLS, "knn")

#: The recall defaults, the one place they are written: (parameter, ``params``
#: column, default). The profile's and the pool's are the statement's own (a statement
#: is made for one of each); ``k`` is in :data:`K_DEFAULTS`.
DEFAULTS: Tuple[Tuple[str, str, Any], ...] = (
    ("profile", "profile", "hybrid"),
    ("w_bm25", "w_bm25", 1.0),
    ("w_vec", "w_vec", 1.0),
    ("w_recency", "w_recency", 0.6),
    ("w_access", "w_access", 0.4),
    ("bm25_limit", "bm25_limit", 50),
    ("pool_size", "pool_size", 200),
    ("pool", "pool", "quantized"),
    ("oversample", "oversample", 40),
    ("limit", "result_limit", 3),
    ("alpha", "alpha", 0.5),
    ("w_time", "w_time", 0.2),
    ("collapse", "collapse", 1),
    ("min_share", "min_share", 0.5),
    ("include_superseded", "include_superseded", 0),
)
#: The RRF constant ``k`` by profile (``None``: every profile not named).
K_DEFAULTS: Tuple[Tuple[Optional[str], float], ...] = (("decay", 30.0), (None, 60.0))

_HEADER = "recall/header.sql"
#: The line of ``header.sql`` that :func:`profiles_comment`'s lines follow (they run to
#: the next line indented less than ``_PROFILES_INDENT``).
_PROFILES_LEAD = "--   The profiles ("
_PROFILES_INDENT = "--" + " " * 17
_HEADER_WIDTH = 90
_PARAMS_NOTE = """\
-- 0. Parameters with their defaults (generated from sqlite_rrf.core.statements.DEFAULTS,
--    the one place the defaults are written: python -m sqlite_rrf.core.statements --write).
--    The profile and the pool are this statement's own; k's default depends on the
--    profile. time_from/time_to (ms, no default) is the window a time expression of
--    the query names (sqlite_rrf.core.timeexpr; NULL: none), w_time its weight in 'hybrid'.
"""


def _check(name: str, value: Optional[str], options: Sequence[str]) -> None:
    if value is not None and value not in options:
        raise ValueError(f"{name}: must be one of {tuple(options)}, got {value!r}")


def _default(column: str) -> Any:
    return next(d for _, c, d in DEFAULTS if c == column)


def _literal(value: Any) -> str:
    if isinstance(value, str):
        return "'" + value.replace("'", "''") + "'"
    return repr(value)


def _k(profile: str) -> float:
    return next(k for p, k in K_DEFAULTS if p in (profile, None))


def params_cte(pool: str, profile: str) -> str:
    """The ``params`` CTE of the statement for ``pool`` and ``profile``, written
    from :data:`DEFAULTS` and :data:`K_DEFAULTS`."""
    fixed = {"profile": profile, "pool": pool}
    rows: List[Tuple[str, str]] = []
    for param, column, value in DEFAULTS:
        if column in fixed:
            rows.append((_literal(fixed[column]), column))
        else:
            rows.append((f"coalesce(:{param}, {_literal(value)})", column))
        if column == "profile":
            rows.append((f"coalesce(:k, {_literal(_k(profile))})", "k"))
    rows += [
        (":time_from", "time_from"),
        (":time_to", "time_to"),
        (":min_similarity", "min_similarity"),
        (":min_relevance", "min_relevance"),
        ("coalesce(:now, CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER))", "now_ms"),
    ]
    width = max(len(e) for e, _ in rows[:-1]) + 1
    lines = [f"{e:<{width}} AS {c}" for e, c in rows]
    return _PARAMS_NOTE + "params AS (\n  SELECT " + ",\n         ".join(lines) + "\n)"


def _strip_comments(text: str) -> str:
    return "\n".join(
        line for line in text.splitlines() if not line.lstrip().startswith("--")
    ).strip()


def _splice(text: str) -> str:
    """``text`` with ``{filter}`` and ``{no_filter}`` replaced by the filter fragments
    (their lines after the first indented as the marker is)."""
    parts = {
        name: _strip_comments(read_sql(f"recall/{name}.sql")) for name in ("filter", "no_filter")
    }

    def put(m: "re.Match[str]") -> str:
        indent = " " * (m.start() - (text.rfind("\n", 0, m.start()) + 1))
        return parts[m.group(1)].replace("\n", "\n" + indent)

    return re.sub(r"\{(filter|no_filter)\}", put, text)


def _constants() -> Dict[str, str]:
    """The constants a fragment names as ``{name}``, each written once in Python: the
    fold's cosine and stopwords (:mod:`sqlite_rrf.core.fold`) and the relevance
    model's coefficients (:mod:`sqlite_rrf.core.relevance`)."""
    from .fold import COLLAPSE_COSINE, STOPWORDS
    from .relevance import BM25_CAP, BM25_ONLY, TERMS_PRIOR, WITH_VECTOR

    values = {
        "collapse_cosine": COLLAPSE_COSINE,
        "vec_c0": WITH_VECTOR[0],
        "vec_cc": WITH_VECTOR[1],
        "vec_cb": WITH_VECTOR[2],
        "bm25_c0": BM25_ONLY[0],
        "bm25_cb": BM25_ONLY[1],
        "terms_prior": TERMS_PRIOR,
        "bm25_cap": BM25_CAP,
    }
    out = {k: repr(float(v)) for k, v in values.items()}
    out["fold_stopwords"] = _literal(" ".join(sorted(STOPWORDS)))
    return out


def _fragment(name: str) -> str:
    text = _splice(read_sql(f"recall/{name}.sql").rstrip().rstrip(";").rstrip(","))
    consts = _constants()
    return re.sub(r"\{([a-z_0-9]+)\}", lambda m: consts.get(m.group(1), m.group(0)), text)


def _names(pool: Optional[str], profile: Optional[str]) -> Tuple[str, str]:
    _check("pool", pool, POOL_MODES)
    _check("profile", profile, PROFILES)
    return pool or _default("pool"), profile or _default("profile")


def profiles_comment() -> str:
    """The list of the profiles in ``sql/recall/header.sql``: each one's name and
    summary (:data:`sqlite_rrf.core.profiles.TABLE`), as ``--`` comment lines."""
    import textwrap

    width = max(len(p.name) for p in profiles.TABLE) + 3
    lines: List[str] = []
    for p in profiles.TABLE:
        head = f"{_PROFILES_INDENT}{p.name!r:<{width}}"
        lines += textwrap.wrap(
            p.summary,
            width=_HEADER_WIDTH,
            initial_indent=head,
            subsequent_indent="--" + " " * (len(head) - 2),
            break_long_words=False,
            break_on_hyphens=False,
        )
    return "\n".join(lines) + "\n"


def header_with_profiles(header: str) -> str:
    """``header`` (the text of ``sql/recall/header.sql``) with its list of the profiles
    written by :func:`profiles_comment`. ``ValueError`` when it has no place for it (no
    line, or more than one, starts with ``_PROFILES_LEAD``)."""
    lines = header.splitlines(keepends=True)
    leads = [i for i, line in enumerate(lines) if line.startswith(_PROFILES_LEAD)]
    if len(leads) != 1:
        raise ValueError(
            f"{_HEADER}: {len(leads)} lines start with {_PROFILES_LEAD!r}; "
            "the list of the profiles goes after exactly one"
        )
    start = end = leads[0] + 1
    while end < len(lines) and lines[end].startswith(_PROFILES_INDENT):
        end += 1
    return "".join(lines[:start]) + profiles_comment() + "".join(lines[end:])


def _compose(pool: str, profile: str, header: str) -> str:
    ctes: List[str] = [
        params_cte(pool, profile),
        _fragment("superseded"),
        _fragment("bm25"),
        _fragment(f"pool_{pool}"),
        f"pool AS (SELECT rowid FROM pool_{pool})",
        _fragment("candidates"),
        _fragment(f"profile_{profile}"),
        f"scores AS (SELECT * FROM score_{profile})",
        _fragment("top"),
        f"explain AS (SELECT * FROM explain_{profile})",
    ]
    this = f"-- This statement: pool '{pool}', profile '{profile}'.\n"
    return header + this + "WITH\n" + ",\n".join(ctes) + "\n" + read_sql("recall/select.sql")


@lru_cache(maxsize=None)
def recall_statement(pool: Optional[str] = None, profile: Optional[str] = None) -> str:
    """The recall statement for ``pool`` and ``profile`` (None: the default one's,
    :func:`recall_defaults`). ``'knn'`` prepares only where sqlite-vec and its index
    are (``sql/knn.sql``). ``ValueError`` for a pool or profile that is not one."""
    return _compose(*_names(pool, profile), read_sql(_HEADER))


@lru_cache(maxsize=None)
def recall_parameters(pool: Optional[str] = None, profile: Optional[str] = None) -> Tuple[str, ...]:
    """The names of the parameters of :func:`recall_statement`'s statement for ``pool``
    and ``profile``. A driver that binds by name from a dict (apsw does) must bind every
    one: ``dict.fromkeys(recall_parameters())`` gives them all as None, which means the
    statement's default."""
    return tuple(statement_params(recall_statement(pool, profile)))


def recall_defaults(profile: Optional[str] = None) -> Dict[str, Any]:
    """The recall parameters' defaults (:data:`DEFAULTS`), for ``profile`` (``k``
    depends on it) or the default profile. Keys are the ``params`` columns (``limit``
    is ``result_limit``); ``profile`` and ``pool`` are the defaults; the current time
    and ``min_similarity`` (no default) are not included."""
    _check("profile", profile, PROFILES)
    d = {column: value for _, column, value in DEFAULTS}
    d["k"] = _k(profile or d["profile"])
    return d


def generated_files() -> Dict[str, str]:
    """What ``--write`` writes: {path under ``sql/``: text} of ``recall/header.sql``
    (its list of the profiles, :func:`header_with_profiles`), ``recall/params.sql``
    and ``recall.sql`` (the statement of the default pool and profile, with that
    header)."""
    pool, profile = _names(None, None)
    header = header_with_profiles(read_sql(_HEADER))
    return {
        _HEADER: header,
        "recall/params.sql": params_cte(pool, profile) + "\n",
        "recall.sql": _compose(pool, profile, header),
    }


def stale_files() -> List[str]:
    """The files of :func:`generated_files` whose text is not what ``--write`` writes
    now (paths under ``sql/``)."""
    return [name for name, text in generated_files().items() if read_sql(name) != text]


def _write() -> None:
    """Rewrite ``sql/recall/header.sql``'s list of the profiles, ``sql/recall/params.sql``
    and ``sql/recall.sql`` (a checkout only)."""
    for name, text in generated_files().items():
        with open(os.path.join(sql_dir(), *name.split("/")), "w", encoding="utf-8") as f:
            f.write(text)


def main(argv: Optional[Sequence[str]] = None) -> int:
    """``python -m sqlite_rrf.core.statements --write``: rewrite ``sql/recall/header.sql``'s
    list of the profiles, ``sql/recall/params.sql`` and ``sql/recall.sql`` (a checkout
    only); ``--check``: exit 1, naming them, when one of them is stale; without either,
    print the statement of ``--pool`` and ``--profile``."""
    ap = argparse.ArgumentParser(prog="python -m sqlite_rrf.core.statements")
    ap.add_argument("--pool", choices=POOL_MODES)
    ap.add_argument("--profile", choices=PROFILES)
    what = ap.add_mutually_exclusive_group()
    what.add_argument(
        "--write",
        action="store_true",
        help="write sql/recall/header.sql's list of the profiles, sql/recall/params.sql "
        "and sql/recall.sql (the statement of the default pool and profile)",
    )
    what.add_argument(
        "--check",
        action="store_true",
        help="exit 1 when a file --write writes is not what it would write now",
    )
    args = ap.parse_args(argv)
    if args.check:
        stale = stale_files()
        for name in stale:
            print(
                f"sql/{name} is stale: run python -m sqlite_rrf.core.statements --write",
                file=sys.stderr,
            )
        return 1 if stale else 0
    if args.write:
        _write()
    else:
        print(recall_statement(args.pool, args.profile), end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
