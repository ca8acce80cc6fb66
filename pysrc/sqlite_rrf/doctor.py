"""Checking and repairing a memory database (``sqlite-rrf check DB [--repair]``, issue 19).

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
  cannot use (zero, NaN, infinite, wrong size: only a rewrite of the episode fixes those).
  :func:`repair` fixes every finding it can, in one transaction.
"""

from __future__ import annotations

import functools
import time
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

import apsw
import numpy as np

from .migrations import available, current_version, migrate

__all__ = ["Finding", "Report", "expected_objects", "build_expected", "render_expected",
           "migrations_digest", "SCHEMA_FILE", "schema_findings", "open_check",
           "check_data", "check", "repair", "check_path", "REPAIR_HINT"]

#: What to run to repair a database (named in every message that needs it).
REPAIR_HINT = "sqlite-rrf check DB --repair"

#: Tables a repair may create again when they are missing: derived from episodes.
_DERIVED_TABLES = ("episodes_vectors", "episodes_codes", "episodes_code_blocks",
                   "episodes_displaced")


@dataclass(frozen=True)
class Finding:
    """One thing found wrong: ``part`` is what it concerns (``integrity``, ``schema``,
    ``fts``, ``vectors``, ``codes``, ``blocks``, ``displaced``, ``knn``, ``embeddings``),
    ``message`` says what, ``repairable`` whether :func:`repair` fixes it."""

    part: str
    message: str
    repairable: bool = True
    name: Optional[str] = None  # the schema object concerned (part 'schema')


@dataclass
class Report:
    """What :func:`check` found (and, after :func:`repair`, what was repaired and what
    the check finds afterwards)."""

    findings: List[Finding] = field(default_factory=list)
    repaired: List[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        """True when nothing was found."""
        return not self.findings

    def as_dict(self) -> Dict[str, Any]:
        """The report as JSON-ready data."""
        return {"ok": self.ok, "seconds": round(self.seconds, 3),
                "findings": [{"part": f.part, "message": f.message,
                              "repairable": f.repairable} for f in self.findings],
                "repaired": list(self.repaired)}


# ---------------------------------------------------------------- the schema objects

#: The expected objects, generated from the migrations (``python -m sqlite_rrf.doctor
#: --write``), so that opening a Store need not migrate an in-memory database to know them.
SCHEMA_FILE = "schema_objects.sql"

_Objects = Dict[str, Tuple[str, str, Optional[str]]]


def migrations_digest(migrations: Optional[List[Any]] = None) -> str:
    """sha256 over the versions and checksums of ``migrations`` (default: the shipped
    ones): what :data:`SCHEMA_FILE` records it was generated from."""
    import hashlib

    ms = available() if migrations is None else migrations
    return hashlib.sha256("\n".join(f"{m.version}:{m.checksum}" for m in ms).encode()
                          ).hexdigest()


def build_expected(directory: Optional[str] = None) -> _Objects:
    """``{name: (type, table, sql)}`` of every object the migrations (of ``directory``,
    default the shipped ones) make, by migrating an in-memory database."""
    conn = apsw.Connection(":memory:")
    try:
        migrate(conn, available(directory))
        return {name: (kind, tbl, sql) for kind, name, tbl, sql in conn.execute(
            "SELECT type, name, tbl_name, sql FROM sqlite_master "
            "WHERE name NOT LIKE 'sqlite\\_%' ESCAPE '\\'")}
    finally:
        conn.close()


def render_expected(directory: Optional[str] = None) -> str:
    """The text of :data:`SCHEMA_FILE` for the migrations of ``directory``."""
    def q(v: Optional[str]) -> str:
        return "NULL" if v is None else "'" + v.replace("'", "''") + "'"

    rows = ",\n".join(f"({q(k)}, {q(n)}, {q(t)}, {q(sql)})"
                      for n, (k, t, sql) in sorted(build_expected(directory).items()))
    return ("-- The objects the migrations make, as sqlite_master holds them in a database at\n"
            "-- the latest schema version. Generated by `python -m sqlite_rrf.doctor --write`\n"
            "-- (do not edit; tests/test_doctor.py checks it is current). Opening a Store\n"
            "-- compares a database's sqlite_master with these rows (sqlite_rrf.doctor);\n"
            "-- when the migrations differ from the digest below it builds them instead.\n"
            f"-- migrations: {migrations_digest(available(directory))}\n"
            f"INSERT INTO expected(type, name, tbl_name, sql) VALUES\n{rows};\n")


def _shipped(digest: str) -> Optional[_Objects]:
    """The objects of :data:`SCHEMA_FILE`, or None when it is missing or was generated
    from other migrations."""
    from .resources import read_sql

    try:
        text = read_sql(SCHEMA_FILE)
    except OSError:
        return None
    if f"-- migrations: {digest}\n" not in text:
        return None
    conn = apsw.Connection(":memory:")
    try:
        conn.execute("CREATE TABLE expected(type, name, tbl_name, sql)")
        conn.execute(text)
        return {n: (k, t, sql) for k, n, t, sql in conn.execute("SELECT * FROM expected")}
    finally:
        conn.close()


@functools.lru_cache(maxsize=4)
def _expected(digest: str) -> _Objects:
    shipped = _shipped(digest)
    return shipped if shipped is not None else build_expected()


def expected_objects() -> _Objects:
    """``{name: (type, table, sql)}`` of every object the shipped migrations make: read
    from :data:`SCHEMA_FILE` (once per process), or built by migrating an in-memory
    database when that file was generated from other migrations."""
    return _expected(migrations_digest())


@functools.lru_cache(maxsize=1)
def _knn_triggers() -> Dict[str, Tuple[str, str, Optional[str]]]:
    """The triggers of ``sql/knn.sql`` (the same text as migration 0004's knn part), which a
    database with the knn index (``episodes_vec``) must hold too."""
    from .resources import read_sql

    found: Dict[str, Tuple[str, str, Optional[str]]] = {}
    statement = ""
    for line in read_sql("knn.sql").splitlines(keepends=True):
        statement += line
        if apsw.complete(statement):
            lines = statement.strip().splitlines()
            while lines and lines[0].lstrip().startswith("--"):  # the comment before it
                lines.pop(0)
            text = "\n".join(lines).strip().rstrip(";")
            words = text.split()
            if words[:2] == ["CREATE", "TRIGGER"]:
                found[words[2]] = ("trigger", words[words.index("ON") + 1], text)
            statement = ""
    return found


def _expected_for(conn: apsw.Connection, migrations: Optional[List[Any]] = None) -> _Objects:
    expected = dict(_expected(migrations_digest(migrations)))
    if conn.execute("SELECT 1 FROM main.sqlite_master WHERE name = 'episodes_vec'").fetchall():
        expected.update(_knn_triggers())
    return expected


def _norm(sql: Optional[str]) -> str:
    return " ".join((sql or "").split())


def schema_findings(conn: apsw.Connection) -> List[Finding]:
    """The objects of the migrations (and, with the knn index, the triggers of
    ``sql/knn.sql``) that ``conn``'s database lacks or holds with other SQL (a dropped
    trigger, a ``writable_schema`` edit). Reads ``sqlite_master`` only.
    Objects of its own a database may add are not looked at. A database not yet at this
    code's schema version is not compared (migrating comes first)."""
    ms = available()
    if current_version(conn) < max(m.version for m in ms):
        return []
    have = {name: (kind, sql) for kind, name, sql in conn.execute(
        "SELECT type, name, sql FROM main.sqlite_master")}
    found = []
    for name, (kind, tbl, sql) in sorted(_expected_for(conn, ms).items()):
        got = have.get(name)
        if got is None:
            fixable = kind != "table" or name in _DERIVED_TABLES
            found.append(Finding("schema", f"the {kind} {name} (on {tbl}) is missing", fixable,
                                 name))
        elif got[0] != kind:
            found.append(Finding("schema", f"{name} is a {got[0]}, not a {kind}", False, name))
        elif kind != "table" and _norm(got[1]) != _norm(sql):
            found.append(Finding("schema", f"the {kind} {name} (on {tbl}) is not sqlite-rrf's "
                                 "(its SQL was changed)", True, name))
    return found


def _repair_schema(conn: apsw.Connection) -> List[str]:
    """In the caller's transaction: create again the missing or changed objects that can
    be (tables first: the derived ones only)."""
    expected = _expected_for(conn)
    have = {name: (kind, sql) for kind, name, sql in conn.execute(
        "SELECT type, name, sql FROM main.sqlite_master")}
    done = []
    order = {"table": 0, "index": 1, "view": 1, "trigger": 2}
    for name, (kind, tbl, sql) in sorted(expected.items(), key=lambda kv: (order.get(kv[1][0], 3),
                                                                          kv[0])):
        got = have.get(name)
        if got is not None and (got[0] != kind or kind == "table"
                                or _norm(got[1]) == _norm(sql)):
            continue
        if kind == "table" and name not in _DERIVED_TABLES:
            continue
        if got is not None:
            conn.execute(f'DROP {kind.upper()} IF EXISTS main."{name}"')
        conn.execute(sql)
        done.append(f"{'recreated' if got is not None else 'created'} the {kind} {name}")
    return done


def open_check(conn: apsw.Connection, *, readonly: bool, patience_ms: int = 200,
               busy_timeout_ms: int = 10_000) -> List[str]:
    """What opening a Store checks: :func:`schema_findings`. Returns warnings (empty when
    the schema is whole). In a writable database the missing or changed objects are
    recreated and the data they maintain repaired (as :func:`repair` does, but only the
    parts those objects keep: a dropped vector trigger does not rebuild the full-text
    index), in one transaction that
    waits at most ``patience_ms`` for the write lock; when the lock stays busy, or the
    database is read-only, the warnings say what is wrong and how to repair it."""
    found = schema_findings(conn)
    if not found:
        return []
    what = "; ".join(f.message for f in found)
    if readonly:
        return [f"the database's schema is damaged ({what}): episodes written meanwhile may "
                f"be missing from the recall; run `{REPAIR_HINT}` where it can be written"]
    if any(not f.repairable for f in found):
        return [f"the database's schema is damaged ({what}) in a way a repair cannot undo: "
                "restore it from a backup, or copy its episodes into a new database"]
    conn.set_busy_timeout(int(patience_ms))
    try:
        conn.execute("BEGIN IMMEDIATE")
    except (apsw.BusyError, apsw.LockedError):
        return [f"the database's schema is damaged ({what}) and another process holds the "
                f"write lock, so it was not repaired now: run `{REPAIR_HINT}`"]
    finally:
        conn.set_busy_timeout(int(busy_timeout_ms))
    try:
        _repair_schema(conn)
        _repair_data(conn, _check_data(conn, parts=_parts_of([f.name for f in found])))
        conn.execute("COMMIT")
    except apsw.Error as e:  # e.g. a full disk: the open goes on, and says so
        if not conn.getautocommit():
            conn.execute("ROLLBACK")
        return [f"the database's schema is damaged ({what}) and repairing it failed "
                f"({e}); nothing was changed: run `{REPAIR_HINT}`"]
    except BaseException:
        if not conn.getautocommit():
            conn.execute("ROLLBACK")
        raise
    return []


# ---------------------------------------------------------------- the data

def _dim(conn: apsw.Connection) -> Optional[int]:
    rows = conn.execute("SELECT value FROM rrf_meta WHERE key = 'embedding_dim'").fetchall()
    return int(rows[0][0]) if rows and rows[0][0] is not None else None


def _fault(emb: Any, dim: Optional[int]) -> Optional[str]:
    from .checks import vector_fault

    return vector_fault(emb, dim)


def _sign_code(emb: bytes) -> bytes:
    return np.packbits(np.frombuffer(emb, "<f4") > 0, bitorder="little").tobytes()


def _has_table(conn: apsw.Connection, name: str) -> bool:
    return bool(conn.execute("SELECT 1 FROM main.sqlite_master WHERE type = 'table' "
                             "AND name = ?", (name,)).fetchall())


@dataclass
class _Data:
    """What :func:`_check_data` found, by rowid, for :func:`_repair_data`."""

    fts: bool = False
    fts_unchecked: bool = False
    vectors_missing: List[int] = field(default_factory=list)   # or stale
    vectors_extra: List[int] = field(default_factory=list)
    codes_missing: List[int] = field(default_factory=list)
    codes_extra: List[int] = field(default_factory=list)
    codes_wrong: List[Tuple[int, Optional[bytes]]] = field(default_factory=list)
    blocks_bad: List[int] = field(default_factory=list)
    rows_dangling: List[int] = field(default_factory=list)
    displaced: bool = False
    knn: List[int] = field(default_factory=list)
    bad_vectors: Dict[int, str] = field(default_factory=dict)

    def findings(self) -> List[Finding]:
        out = []

        def some(xs: List[Any]) -> str:
            shown = ", ".join(str(x if not isinstance(x, tuple) else x[0]) for x in xs[:10])
            return shown + (f", … ({len(xs)} in all)" if len(xs) > 10 else "")

        if self.fts:
            out.append(Finding("fts", "the full-text index does not hold exactly the text of "
                               "episodes (FTS5 integrity-check failed)"))
        if self.fts_unchecked:
            out.append(Finding("fts", "the full-text index was not checked: FTS5's check "
                               "needs a database that can be written", repairable=False))
        if self.vectors_missing:
            out.append(Finding("vectors", "episodes whose vector is missing from "
                               f"episodes_vectors or stale there: rowids {some(self.vectors_missing)}"))
        if self.vectors_extra:
            out.append(Finding("vectors", "vectors of episodes_vectors with no episode or no "
                               f"embedding: rowids {some(self.vectors_extra)}"))
        if self.codes_missing:
            out.append(Finding("codes", "vectors with no row in episodes_codes: rowids "
                               f"{some(self.codes_missing)}"))
        if self.codes_extra:
            out.append(Finding("codes", "rows of episodes_codes with no vector: rowids "
                               f"{some(self.codes_extra)}"))
        if self.codes_wrong:
            out.append(Finding("codes", "codes that are not their vector's sign code: rowids "
                               f"{some(self.codes_wrong)}"))
        if self.blocks_bad:
            out.append(Finding("blocks", "blocks of episodes_code_blocks that are not exactly "
                               f"the current codes of their rows: blocks {some(self.blocks_bad)}"))
        if self.rows_dangling:
            out.append(Finding("blocks", "rows of episodes_codes naming a block that does not "
                               f"exist: rowids {some(self.rows_dangling)}"))
        if self.displaced:
            out.append(Finding("displaced", "episodes_displaced holds rows that are not live "
                               "copies (it is normally empty)"))
        if self.knn:
            out.append(Finding("knn", "the knn index (episodes_vec) differs from the "
                               f"embeddings at rowids {some(self.knn)}"))
        for rowid, why in sorted(self.bad_vectors.items())[:50]:
            out.append(Finding("embeddings", f"episode rowid {rowid} has an embedding the "
                               f"recall cannot use ({why}): rewrite it (or set it to NULL and "
                               "run `sqlite-rrf embed`)", repairable=False))
        return out


#: The parts of the data :func:`_check_data` compares: the full-text index (and
#: episodes_displaced, which its triggers use), the vector tables (vectors, codes, blocks),
#: the knn index.
PARTS = frozenset({"fts", "vectors", "knn"})


def _parts_of(names: List[Optional[str]]) -> frozenset:
    """The parts of the data that the schema objects ``names`` maintain: what must be
    compared after they were missing or changed (an index is rebuilt whole when it is
    created again; an object not known here means every part)."""
    parts = set()
    for name in names:
        if name is None:
            return PARTS
        if name.startswith(("episodes_vectors", "episodes_codes", "episodes_code_blocks")):
            parts.add("vectors")
        elif name.startswith(("episodes_fts", "episodes_displace")):
            parts.add("fts")
        elif name.startswith("episodes_vec_"):
            parts.add("knn")
        elif name.startswith("episodes_embedding_dim"):
            parts.add("vectors")  # a vector of another size: named, not repaired
        elif not name.startswith("idx_"):
            return PARTS
    return frozenset(parts)


def _check_data(conn: apsw.Connection, chunk: int = 4096, parts: frozenset = PARTS) -> _Data:
    d = _Data()
    if "fts" in parts:
        try:  # FTS5's check is an INSERT that writes nothing (it takes the write lock)
            conn.execute("INSERT INTO episodes_fts(episodes_fts, rank) "
                         "VALUES ('integrity-check', 1)")
        except (apsw.CorruptError, apsw.SQLError):
            d.fts = True
        except apsw.ReadOnlyError:
            d.fts_unchecked = True
        d.displaced = bool(conn.execute(
            "SELECT 1 FROM episodes_displaced AS d LEFT JOIN episodes AS e USING (rowid) "
            "WHERE e.rowid IS NULL OR e.content IS NOT d.content OR d.gone != 0 LIMIT 1"
        ).fetchall())
    if "knn" in parts and _has_table(conn, "episodes_vec"):
        try:
            emb = dict(conn.execute(
                "SELECT rowid, embedding FROM episodes WHERE embedding IS NOT NULL"))
            vec = dict(conn.execute("SELECT rowid, embedding FROM episodes_vec"))
            d.knn = sorted(r for r in set(emb) | set(vec) if emb.get(r) != vec.get(r))
        except apsw.SQLError:
            pass  # sqlite-vec is not loaded: the knn index is not compared
    if "vectors" not in parts:
        return d
    dim = _dim(conn)
    for table in _DERIVED_TABLES:
        if not _has_table(conn, table):
            return d  # a table is missing: the schema's finding; nothing to compare with
    # vectors = embeddings, read in rowid order side by side
    d.vectors_missing = [r for (r,) in conn.execute(
        "SELECT e.rowid FROM episodes AS e LEFT JOIN episodes_vectors AS v ON v.rowid = e.rowid "
        "WHERE e.embedding IS NOT NULL AND v.embedding IS NOT e.embedding ORDER BY e.rowid")]
    d.vectors_extra = [r for (r,) in conn.execute(
        "SELECT v.rowid FROM episodes_vectors AS v LEFT JOIN episodes AS e ON e.rowid = v.rowid "
        "WHERE e.embedding IS NULL ORDER BY v.rowid")]
    d.codes_missing = [r for (r,) in conn.execute(
        "SELECT v.rowid FROM episodes_vectors AS v WHERE NOT EXISTS "
        "(SELECT 1 FROM episodes_codes AS c WHERE c.rowid = v.rowid) ORDER BY v.rowid")]
    d.codes_extra = [r for (r,) in conn.execute(
        "SELECT c.rowid FROM episodes_codes AS c WHERE NOT EXISTS "
        "(SELECT 1 FROM episodes_vectors AS v WHERE v.rowid = c.rowid) ORDER BY c.rowid")]
    # each code: pending, or its vector's sign code (and pending when the vector is unusable)
    after = -(2**63)
    while True:
        rows = conn.execute(
            "SELECT c.rowid, c.code, v.embedding FROM episodes_codes AS c "
            "JOIN episodes_vectors AS v ON v.rowid = c.rowid WHERE c.rowid > ? "
            "ORDER BY c.rowid LIMIT ?", (after, chunk)).fetchall()
        if not rows:
            break
        after = rows[-1][0]
        for rowid, code, emb in rows:
            fault = _fault(emb, dim)
            if fault is not None:
                d.bad_vectors[rowid] = fault
                if code is not None:
                    d.codes_wrong.append((rowid, None))
            elif code is not None and code != _sign_code(emb):
                d.codes_wrong.append((rowid, _sign_code(emb)))
    # blocks = their rows' current codes
    members: Dict[int, Dict[int, Any]] = {}
    for r, code, block in conn.execute(
            "SELECT rowid, code, block FROM episodes_codes WHERE block IS NOT NULL"):
        members.setdefault(block, {})[r] = code
    seen: set = set()
    blocks = set()
    for block, n, rowids, codes in conn.execute(
            "SELECT block, n, rowids, codes FROM episodes_code_blocks"):
        blocks.add(block)
        mine = members.get(block, {})
        ok = (isinstance(rowids, bytes) and isinstance(codes, bytes) and len(rowids) % 8 == 0
              and isinstance(n, int) and n == len(rowids) // 8 > 0 and len(codes) % n == 0)
        if ok:
            ids = np.frombuffer(rowids, "<i8").tolist()
            width = len(codes) // n
            got = {r: codes[i * width:(i + 1) * width] for i, r in enumerate(ids)}
            ok = (len(got) == n and got == mine and not seen & set(ids)
                  and all(c is not None for c in mine.values()))
            seen |= set(ids)
        if not ok:
            d.blocks_bad.append(block)
    d.rows_dangling = sorted(r for block, rows in members.items() if block not in blocks
                             for r in rows)
    return d


def _repair_data(conn: apsw.Connection, d: _Data) -> List[str]:
    """In the caller's transaction: fix what :func:`_check_data` found (the triggers of
    migration 0009 let exactly these writes through)."""
    done = []
    if d.fts:
        conn.execute("INSERT INTO episodes_fts(episodes_fts) VALUES ('rebuild')")
        done.append("rebuilt the full-text index")
    if d.vectors_extra:
        conn.executemany("DELETE FROM episodes_vectors WHERE rowid = ?",
                         ((r,) for r in d.vectors_extra))
        conn.executemany("DELETE FROM episodes_codes WHERE rowid = ?",
                         ((r,) for r in d.vectors_extra))
        done.append(f"removed {len(d.vectors_extra)} vectors with no episode embedding")
    if d.vectors_missing:
        for r in d.vectors_missing:
            conn.execute("UPDATE episodes_vectors SET embedding = (SELECT embedding FROM "
                         "episodes WHERE rowid = ?) WHERE rowid = ?", (r, r))
            conn.execute("INSERT INTO episodes_vectors(rowid, embedding) SELECT rowid, embedding "
                         "FROM episodes WHERE rowid = ? AND NOT EXISTS (SELECT 1 FROM "
                         "episodes_vectors WHERE rowid = ?)", (r, r))
            conn.execute("INSERT INTO episodes_codes(rowid, code) SELECT ?, NULL WHERE NOT "
                         "EXISTS (SELECT 1 FROM episodes_codes WHERE rowid = ?)", (r, r))
            conn.execute("UPDATE episodes_codes SET code = NULL WHERE rowid = ?", (r,))
        done.append(f"wrote {len(d.vectors_missing)} missing or stale vectors (their codes "
                    "pending)")
    if d.codes_extra:
        conn.executemany("DELETE FROM episodes_codes WHERE rowid = ?",
                         ((r,) for r in d.codes_extra))
        done.append(f"removed {len(d.codes_extra)} codes with no vector")
    if d.codes_missing:
        conn.executemany("INSERT INTO episodes_codes(rowid, code) VALUES (?, NULL)",
                         ((r,) for r in d.codes_missing))
        done.append(f"added {len(d.codes_missing)} missing code rows (pending)")
    if d.codes_wrong:
        conn.executemany("UPDATE episodes_codes SET code = ? WHERE rowid = ?",
                         ((code, r) for r, code in d.codes_wrong))
        done.append(f"rewrote {len(d.codes_wrong)} wrong codes")
    if d.blocks_bad:
        for b in d.blocks_bad:
            conn.execute("DELETE FROM episodes_code_blocks WHERE block = ?", (b,))
            conn.execute("UPDATE episodes_codes SET block = NULL WHERE block = ?", (b,))
        done.append(f"dissolved {len(d.blocks_bad)} blocks (their codes are loose)")
    if d.rows_dangling:
        conn.executemany("UPDATE episodes_codes SET block = NULL WHERE rowid = ?",
                         ((r,) for r in d.rows_dangling))
        done.append(f"released {len(d.rows_dangling)} codes naming a missing block")
    if d.displaced:
        conn.execute("DELETE FROM episodes_displaced")
        done.append("emptied episodes_displaced")
    if d.knn:
        for r in d.knn:
            conn.execute("DELETE FROM episodes_vec WHERE rowid = ?", (r,))
            conn.execute("INSERT INTO episodes_vec(rowid, embedding) SELECT rowid, embedding "
                         "FROM episodes WHERE rowid = ? AND embedding IS NOT NULL", (r,))
        done.append(f"resynced {len(d.knn)} rows of the knn index")
    return done


def check_data(conn: apsw.Connection) -> List[Finding]:
    """The derived tables' part of :func:`check`: the full-text index, ``episodes_vectors``,
    ``episodes_codes``, ``episodes_code_blocks``, ``episodes_displaced``, the knn index,
    and the embeddings the recall cannot use. Reads every row; writes nothing (FTS5's
    check takes the write lock, so a read-only connection skips it and says so)."""
    return _check_data(conn).findings()


# ---------------------------------------------------------------- the full check

def check(conn: apsw.Connection) -> Report:
    """The full check of ``conn``'s database (reads everything; see the module's
    docstring). Needs no extension; the knn index is compared when sqlite-vec is loaded."""
    t = time.perf_counter()
    report = Report()
    problems = [r[0] for r in conn.execute("PRAGMA main.integrity_check")]
    if problems != ["ok"]:
        report.findings.append(Finding(
            "integrity", "SQLite's integrity_check: " + "; ".join(map(str, problems[:5])),
            repairable=False))
    have, want = current_version(conn), max(m.version for m in available())
    if have < want:
        report.findings.append(Finding(
            "schema", f"the database is at schema version {have}, this sqlite-rrf's is {want}: "
            "open it with a writable Store (or `sqlite-rrf init DB`) to migrate it"))
    report.findings += schema_findings(conn)
    report.findings += check_data(conn)
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
        done = _repair_schema(conn)
        done += _repair_data(conn, _check_data(conn))
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
    :class:`~sqlite_rrf.checks.StoreError` and nothing is written."""
    from ._sqlite import foreign
    from .checks import StoreError

    conn = apsw.Connection(path)
    try:
        conn.set_busy_timeout(10_000)
        why = foreign(conn)  # reads only: another application's file is never written
        if why is not None:
            raise StoreError(f"{path} is not a sqlite-rrf database: {why}; check leaves it "
                             "as it is")
        if repair_it and conn.readonly("main"):
            raise StoreError(f"{path} can only be read (read-only media or permissions): "
                             "--repair cannot write it; run the check without --repair, or "
                             "repair a writable copy")
        if _has_table(conn, "episodes_vec"):
            try:
                from . import knn

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

    from .resources import sql_dir

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


if __name__ == "__main__":
    raise SystemExit(main())
