"""The recall statement, composed from the named SQL fragments of ``sql/recall/``.

Each fragment file holds one or more common table expressions (CTEs) of the
statement: ``params.sql`` (every parameter's default, written once), ``bm25.sql``
(the BM25 list), one file per vector pool (``pool_<name>.sql``, defining
``pool_<name>``), ``candidates.sql`` (candidates, similarity, ranks), one file per
fusion profile (``profile_<name>.sql``, defining ``score_<name>``), ``top.sql`` (the
best ``:limit``), ``explain.sql`` (their explanation) and ``select.sql`` (the final
SELECT). A statement is those fragments joined, plus two one-line CTEs that name the
pool and the scores it uses:

- :func:`recall_statement` with a pool and a profile gives the statement of that
  pool and profile only: what :class:`~sqlite_rrf.store.Store` runs (small, so it
  prepares fast, and nothing in it is there for another profile);
- without them it gives the statement that chooses by ``:pool`` and ``:profile``
  at run time, which is the shipped ``sql/recall.sql`` for the ``sqlite3`` shell and
  other clients (``tests/test_statements.py`` checks that the file is this
  composition; ``python -m sqlite_rrf.statements --write`` rewrites it).

The defaults are those of ``params.sql``; :func:`recall_defaults` reads them from
there, so Python never restates them.
"""

from __future__ import annotations

import argparse
import os
import re
from functools import lru_cache
from typing import Any, Dict, List, Optional, Sequence, Tuple

from .resources import read_sql, sql_dir

#: The fusion profiles, in the order the documentation lists them.
PROFILES: Tuple[str, ...] = ("hybrid", "memory", "rrf", "decay", "weighted", "convex")
#: The vector pools the shipped statement can choose at run time.
POOLS: Tuple[str, ...] = ("recent", "all", "quantized")
#: Every pool: 'knn' needs sqlite-vec and its index (``sql/knn.sql``), so only the
#: statements made for it have it.
POOL_MODES: Tuple[str, ...] = POOLS + ("knn",)

_HEADER = "recall/header.sql"


def _fragment(name: str) -> str:
    return read_sql(f"recall/{name}.sql").rstrip().rstrip(";").rstrip(",")


def _choose(cte: str, column: str, options: Sequence[str], source: str,
            select: str) -> str:
    """A CTE that takes its rows from ``{source}_{option}`` for the option that
    ``params.{column}`` names (params is the outer loop, so only that branch runs)."""
    branches = "\n  UNION ALL\n".join(
        f"  SELECT {select} FROM params AS x CROSS JOIN {source}_{o} AS s "
        f"WHERE x.{column} = '{o}'" for o in options)
    return f"{cte} AS (\n{branches}\n)"


def _check(name: str, value: Optional[str], options: Sequence[str]) -> None:
    if value is not None and value not in options:
        raise ValueError(f"{name}: must be one of {tuple(options)}, got {value!r}")


@lru_cache(maxsize=None)
def recall_statement(pool: Optional[str] = None, profile: Optional[str] = None) -> str:
    """The recall statement for ``pool`` and ``profile``; either one None means the
    statement chooses it at run time from ``:pool`` / ``:profile`` (``'knn'`` must be
    named: only a database with sqlite-vec's index can prepare it)."""
    _check("pool", pool, POOL_MODES)
    _check("profile", profile, PROFILES)
    pools = POOLS if pool is None else (pool,)
    profiles = PROFILES if profile is None else (profile,)
    ctes: List[str] = [_fragment("params"), _fragment("bm25")]
    ctes += [_fragment(f"pool_{p}") for p in pools]
    ctes.append(_choose("pool", "pool", pools, "pool", "s.rowid") if pool is None
                else f"pool AS (SELECT rowid FROM pool_{pool})")
    ctes.append(_fragment("candidates"))
    ctes += [_fragment(f"profile_{p}") for p in profiles]
    ctes.append(_choose("scores", "profile", profiles, "score", "s.*") if profile is None
                else f"scores AS (SELECT * FROM score_{profile})")
    ctes.append(_fragment("top"))
    ctes.append(_fragment("explain"))
    return (read_sql(_HEADER) + "WITH\n" + ",\n".join(ctes) + "\n"
            + read_sql("recall/select.sql"))


_DEFAULT_RE = re.compile(r"coalesce\(:(\w+),\s*('(?:[^']|'')*'|-?\d+(?:\.\d+)?)\)\s+AS\s+(\w+)")
_K_RE = re.compile(r"coalesce\(:k,\s*CASE :profile WHEN '(\w+)' THEN (-?[\d.]+) ELSE (-?[\d.]+) END\)")


def _literal(text: str) -> Any:
    if text.startswith("'"):
        return text[1:-1].replace("''", "'")
    return float(text) if "." in text else int(text)


@lru_cache(maxsize=None)
def _literal_defaults() -> Tuple[Tuple[str, Any], ...]:
    """The literal defaults of ``params.sql``, by column (read as text: no SQLite
    needed, so ``--help`` stays light; tests/test_statements.py checks them against
    SQLite running the CTE)."""
    text = read_sql("recall/params.sql")
    return tuple((col, _literal(lit)) for _, lit, col in _DEFAULT_RE.findall(text))


def recall_defaults(profile: Optional[str] = None) -> Dict[str, Any]:
    """The recall parameters' defaults, read from the statement's ``params`` CTE (the
    one place they are written), for ``profile`` (``k`` depends on it) or the default
    profile. Keys are the ``params`` columns (``limit`` is ``result_limit``); the
    current time and ``min_similarity`` (no default) are not included."""
    _check("profile", profile, PROFILES)
    d = dict(_literal_defaults())
    m = _K_RE.search(read_sql("recall/params.sql"))
    if m is None:  # pragma: no cover - the fragment and this reader changed apart
        raise RuntimeError("params.sql: k's default is not where it is expected")
    special, k_special, k_other = m.groups()
    d["k"] = float(k_special) if (profile or d["profile"]) == special else float(k_other)
    return d


def main(argv: Optional[Sequence[str]] = None) -> int:
    """``python -m sqlite_rrf.statements --write``: rewrite ``sql/recall.sql`` from the
    fragments (a checkout only); without ``--write``, print the statement."""
    ap = argparse.ArgumentParser(prog="python -m sqlite_rrf.statements")
    ap.add_argument("--pool", choices=POOL_MODES)
    ap.add_argument("--profile", choices=PROFILES)
    ap.add_argument("--write", action="store_true",
                    help="write the run-time-choosing statement to sql/recall.sql")
    args = ap.parse_args(argv)
    text = recall_statement(args.pool, args.profile)
    if args.write:
        with open(os.path.join(sql_dir(), "recall.sql"), "w", encoding="utf-8") as f:
            f.write(recall_statement())
    else:
        print(text, end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
