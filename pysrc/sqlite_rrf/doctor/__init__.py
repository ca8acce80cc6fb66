"""Checking and repairing a memory database (``sqlite-rrf check DB [--repair]``).

A memory is written by more than the Store; the schema's triggers keep the derived
tables right under every write (docs/schema.md), but a client can still drop a trigger,
edit the schema, or write the derived tables while a trigger was missing. Two levels:

* :func:`open_check` — what opening a Store does: compare ``sqlite_master`` with the
  objects the migrations make (names and SQL of the triggers, indexes and views; the
  tables by name). Reads one small table, whatever the size of the memory. In a writable
  Store what is missing or changed is recreated in one transaction, followed by
  :func:`repair` of the derived tables (the rows written while a trigger was missing);
  in a read-only one it says what is wrong and how to repair it.
* :func:`check` / :func:`repair` — the full check: SQLite's ``integrity_check``, the
  schema objects, FTS5's ``integrity-check`` against ``episodes``, ``episodes_vectors``
  = the embeddings, ``episodes_codes`` = one row per vector holding its sign code or
  pending, every block of ``episodes_code_blocks`` = the current codes of the rows that
  name it, ``episodes_displaced`` holding no stale rows, the knn index (when there is one
  and sqlite-vec is installed) = the embeddings; and the embeddings the vector list
  cannot use (zero, NaN, infinite, wrong size: only a rewrite of the episode fixes those);
  and every episode whose TEXT is not valid UTF-8 (:mod:`.text`: the repair writes each
  invalid byte sequence as U+FFFD, as every read shows it).
  :func:`repair` fixes every finding it can, in one transaction.

The modules: :mod:`.schema` (the schema objects and :func:`open_check`), :mod:`.data` (the
derived tables), :mod:`.text` (text that is not valid UTF-8), :mod:`.findings` (what is
found); the full check is here.
"""

from __future__ import annotations

import time
from typing import List, Optional

import apsw

from ..core.migrations import available, current_version, migrate
from .data import check_data, compare_data, has_table, repair_data
from .findings import REPAIR_HINT, Finding, Report
from .schema import (
    SCHEMA_FILE,
    build_expected,
    expected_objects,
    migrations_digest,
    open_check,
    render_expected,
    repair_schema,
    schema_findings,
)
from .text import invalid_text, repair_text, text_findings

__all__ = [
    "REPAIR_HINT",
    "SCHEMA_FILE",
    "Finding",
    "Report",
    "build_expected",
    "check",
    "check_data",
    "check_path",
    "expected_objects",
    "migrations_digest",
    "open_check",
    "render_expected",
    "repair",
    "schema_findings",
]


# ---------------------------------------------------------------- the full check


def check(conn: apsw.Connection) -> Report:
    """The full check of ``conn``'s database (reads everything; see the module's
    docstring). Needs no extension; the knn index is compared when sqlite-vec is loaded."""
    t = time.perf_counter()
    report = Report()
    problems = [r[0] for r in conn.execute("PRAGMA main.integrity_check")]
    if problems != ["ok"]:
        report.findings.append(
            Finding(
                "integrity",
                "SQLite's integrity_check: " + "; ".join(map(str, problems[:5])),
                repairable=False,
            )
        )
    have, want = current_version(conn), max(m.version for m in available())
    if have < want:
        report.findings.append(
            Finding(
                "schema",
                f"the database is at schema version {have}, this sqlite-rrf's is {want}: "
                "open it with a writable Store (or `sqlite-rrf init DB`) to migrate it",
            )
        )
    report.findings += schema_findings(conn)
    report.findings += check_data(conn)
    if has_table(conn, "episodes"):
        report.findings += text_findings(invalid_text(conn))
    report.seconds = time.perf_counter() - t
    return report


def repair(conn: apsw.Connection, *, busy_timeout_ms: int = 10_000) -> Report:
    """Fix what :func:`check` finds that can be fixed (schema objects first, then the
    derived tables), in one transaction, and return the report of a check run afterwards
    (its ``repaired`` lists what was done). Migrates first when the database is behind."""
    t = time.perf_counter()
    conn.set_busy_timeout(int(busy_timeout_ms))
    migrate(conn)
    conn.execute("BEGIN IMMEDIATE")
    try:
        done = repair_schema(conn)
        if has_table(conn, "episodes"):
            done += repair_text(conn, invalid_text(conn))
        done += repair_data(conn, compare_data(conn))
        conn.execute("COMMIT")
    except BaseException:
        if not conn.getautocommit():
            conn.execute("ROLLBACK")
        raise
    report = check(conn)
    report.repaired = done
    report.seconds = time.perf_counter() - t
    return report


def check_path(path: str, *, repair_it: bool = False) -> Report:
    """:func:`check` (or :func:`repair`, with ``repair_it``) of the database file at
    ``path``, on a connection of its own (sqlite-vec loaded when the knn index exists and
    it is installed; the rrf extension is not needed). Another application's SQLite file,
    or a repair of a file that can only be read, is refused with a
    :class:`~sqlite_rrf.core.validate.StoreError` and nothing is written."""
    from ..core.sqlite import foreign, replica_of
    from ..core.validate import StoreError

    if repair_it and replica_of(path) is not None:
        raise StoreError(
            f"{path} is a read replica that `sqlite-rrf restore --refresh` replaces whole: "
            "repair the primary (the next refresh brings the repair)"
        )
    conn = apsw.Connection(path)
    try:
        conn.set_busy_timeout(10_000)
        why = foreign(conn)  # reads only: another application's file is never written
        if why is not None:
            raise StoreError(
                f"{path} is not a sqlite-rrf database: {why}; check leaves it as it is"
            )
        if repair_it and conn.readonly("main"):
            raise StoreError(
                f"{path} can only be read (read-only media or permissions): "
                "--repair cannot write it; run the check without --repair, or "
                "repair a writable copy"
            )
        if has_table(conn, "episodes_vec"):
            try:
                from ..core import knn

                knn.load_sqlite_vec(conn)
            except Exception:  # not installed: the knn index is not compared
                pass
        return repair(conn) if repair_it else check(conn)
    finally:
        conn.close()


def main(argv: Optional[List[str]] = None) -> int:
    """``python -m sqlite_rrf.doctor --write``: rewrite ``sql/schema_objects.sql`` from the
    migrations (a checkout only); without ``--write``, print it."""
    import argparse
    import os

    from ..core.sql_files import sql_dir

    ap = argparse.ArgumentParser(prog="python -m sqlite_rrf.doctor")
    ap.add_argument("--write", action="store_true", help=f"write sql/{SCHEMA_FILE}")
    args = ap.parse_args(argv)
    text = render_expected()
    if args.write:
        with open(os.path.join(sql_dir(), SCHEMA_FILE), "w", encoding="utf-8") as f:
            f.write(text)
    else:
        print(text, end="")
    return 0
