"""The derived tables compared with ``episodes``: the full-text index, the vectors, their
sign codes and blocks, ``episodes_displaced``, the knn index, and the embeddings the
recall cannot use (:func:`check_data`); what is found is repaired by :func:`repair_data`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

import apsw
import numpy as np

from .findings import DERIVED_TABLES, Finding


def _dim(conn: apsw.Connection) -> Optional[int]:
    rows = conn.execute("SELECT value FROM rrf_meta WHERE key = 'embedding_dim'").fetchall()
    return int(rows[0][0]) if rows and rows[0][0] is not None else None


def _fault(emb: Any, dim: Optional[int]) -> Optional[str]:
    from ..core.validate import vector_fault

    return vector_fault(emb, dim)


def _sign_code(emb: bytes) -> bytes:
    return np.packbits(np.frombuffer(emb, "<f4") > 0, bitorder="little").tobytes()


def has_table(conn: apsw.Connection, name: str) -> bool:
    return bool(
        conn.execute(
            "SELECT 1 FROM main.sqlite_master WHERE type = 'table' AND name = ?", (name,)
        ).fetchall()
    )


@dataclass
class _Data:
    """What :func:`compare_data` found, by rowid, for :func:`repair_data`."""

    fts: bool = False
    fts_unchecked: bool = False
    vectors_missing: List[int] = field(default_factory=list)  # or stale
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
            out.append(
                Finding(
                    "fts",
                    "the full-text index does not hold exactly the text of "
                    "episodes (FTS5 integrity-check failed)",
                )
            )
        if self.fts_unchecked:
            out.append(
                Finding(
                    "fts",
                    "the full-text index was not checked: FTS5's check "
                    "needs a database that can be written",
                    repairable=False,
                )
            )
        if self.vectors_missing:
            out.append(
                Finding(
                    "vectors",
                    "episodes whose vector is missing from "
                    "episodes_vectors or stale there: rowids "
                    f"{some(self.vectors_missing)}",
                )
            )
        if self.vectors_extra:
            out.append(
                Finding(
                    "vectors",
                    "vectors of episodes_vectors with no episode or no "
                    f"embedding: rowids {some(self.vectors_extra)}",
                )
            )
        if self.codes_missing:
            out.append(
                Finding(
                    "codes",
                    f"vectors with no row in episodes_codes: rowids {some(self.codes_missing)}",
                )
            )
        if self.codes_extra:
            out.append(
                Finding(
                    "codes",
                    f"rows of episodes_codes with no vector: rowids {some(self.codes_extra)}",
                )
            )
        if self.codes_wrong:
            out.append(
                Finding(
                    "codes",
                    f"codes that are not their vector's sign code: rowids {some(self.codes_wrong)}",
                )
            )
        if self.blocks_bad:
            out.append(
                Finding(
                    "blocks",
                    "blocks of episodes_code_blocks that are not exactly "
                    f"the current codes of their rows: blocks {some(self.blocks_bad)}",
                )
            )
        if self.rows_dangling:
            out.append(
                Finding(
                    "blocks",
                    "rows of episodes_codes naming a block that does not "
                    f"exist: rowids {some(self.rows_dangling)}",
                )
            )
        if self.displaced:
            out.append(
                Finding(
                    "displaced",
                    "episodes_displaced holds rows that are not live copies (it is normally empty)",
                )
            )
        if self.knn:
            out.append(
                Finding(
                    "knn",
                    "the knn index (episodes_vec) differs from the "
                    f"embeddings at rowids {some(self.knn)}",
                )
            )
        for rowid, why in sorted(self.bad_vectors.items())[:50]:
            out.append(
                Finding(
                    "embeddings",
                    f"episode rowid {rowid} has an embedding the "
                    f"recall cannot use ({why}): rewrite it (or set it to NULL and "
                    "run `sqlite-rrf embed`)",
                    repairable=False,
                )
            )
        return out


#: The parts of the data :func:`compare_data` compares: the full-text index (and
#: episodes_displaced, which its triggers use), the vector tables (vectors, codes, blocks),
#: the knn index.
PARTS = frozenset({"fts", "vectors", "knn"})


def parts_of(names: List[Optional[str]]) -> frozenset:
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


def compare_data(conn: apsw.Connection, chunk: int = 4096, parts: frozenset = PARTS) -> _Data:
    d = _Data()
    if "fts" in parts:
        try:  # FTS5's check is an INSERT that writes nothing (it takes the write lock)
            conn.execute(
                "INSERT INTO episodes_fts(episodes_fts, rank) VALUES ('integrity-check', 1)"
            )
        except (apsw.CorruptError, apsw.SQLError):
            d.fts = True
        except apsw.ReadOnlyError:
            d.fts_unchecked = True
        d.displaced = bool(
            conn.execute(
                "SELECT 1 FROM episodes_displaced AS d LEFT JOIN episodes AS e USING (rowid) "
                "WHERE e.rowid IS NULL OR e.content IS NOT d.content OR d.gone != 0 LIMIT 1"
            ).fetchall()
        )
    if "knn" in parts and has_table(conn, "episodes_vec"):
        try:
            stored = dict(
                conn.execute("SELECT rowid, embedding FROM episodes WHERE embedding IS NOT NULL")
            )
            indexed = dict(conn.execute("SELECT rowid, embedding FROM episodes_vec"))
            d.knn = sorted(r for r in set(stored) | set(indexed) if stored.get(r) != indexed.get(r))
        except apsw.SQLError:
            pass  # sqlite-vec is not loaded: the knn index is not compared
    if "vectors" not in parts:
        return d
    dim = _dim(conn)
    for table in DERIVED_TABLES:
        if not has_table(conn, table):
            return d  # a table is missing: the schema's finding; nothing to compare with
    # vectors = embeddings, read in rowid order side by side
    d.vectors_missing = [
        r
        for (r,) in conn.execute(
            "SELECT e.rowid FROM episodes AS e "
            "LEFT JOIN episodes_vectors AS v ON v.rowid = e.rowid "
            "WHERE e.embedding IS NOT NULL AND v.embedding IS NOT e.embedding ORDER BY e.rowid"
        )
    ]
    d.vectors_extra = [
        r
        for (r,) in conn.execute(
            "SELECT v.rowid FROM episodes_vectors AS v "
            "LEFT JOIN episodes AS e ON e.rowid = v.rowid "
            "WHERE e.embedding IS NULL ORDER BY v.rowid"
        )
    ]
    d.codes_missing = [
        r
        for (r,) in conn.execute(
            "SELECT v.rowid FROM episodes_vectors AS v WHERE NOT EXISTS "
            "(SELECT 1 FROM episodes_codes AS c WHERE c.rowid = v.rowid) ORDER BY v.rowid"
        )
    ]
    d.codes_extra = [
        r
        for (r,) in conn.execute(
            "SELECT c.rowid FROM episodes_codes AS c WHERE NOT EXISTS "
            "(SELECT 1 FROM episodes_vectors AS v WHERE v.rowid = c.rowid) ORDER BY c.rowid"
        )
    ]
    # each code: pending, or its vector's sign code (and pending when the vector is unusable)
    after = -(2**63)
    while True:
        rows = conn.execute(
            "SELECT c.rowid, c.code, v.embedding FROM episodes_codes AS c "
            "JOIN episodes_vectors AS v ON v.rowid = c.rowid WHERE c.rowid > ? "
            "ORDER BY c.rowid LIMIT ?",
            (after, chunk),
        ).fetchall()
        if not rows:
            break
        for rowid, code, emb in rows:
            assert isinstance(rowid, int)  # episodes_codes' INTEGER PRIMARY KEY
            after = rowid
            fault = _fault(emb, dim)
            if fault is not None:
                d.bad_vectors[rowid] = fault
                if code is not None:
                    d.codes_wrong.append((rowid, None))
            elif code is not None and isinstance(emb, bytes) and code != _sign_code(emb):
                d.codes_wrong.append((rowid, _sign_code(emb)))
    # blocks = their rows' current codes
    members: Dict[int, Dict[int, Any]] = {}
    for r, code, block in conn.execute(
        "SELECT rowid, code, block FROM episodes_codes WHERE block IS NOT NULL"
    ):
        members.setdefault(block, {})[r] = code
    seen: set = set()
    blocks = set()
    for block, n, rowids, codes in conn.execute(
        "SELECT block, n, rowids, codes FROM episodes_code_blocks"
    ):
        blocks.add(block)
        mine = members.get(block, {})
        ok = (
            isinstance(rowids, bytes)
            and isinstance(codes, bytes)
            and len(rowids) % 8 == 0
            and isinstance(n, int)
            and n == len(rowids) // 8 > 0
            and len(codes) % n == 0
        )
        if ok:
            ids = np.frombuffer(rowids, "<i8").tolist()
            width = len(codes) // n
            got = {r: codes[i * width : (i + 1) * width] for i, r in enumerate(ids)}
            ok = (
                len(got) == n
                and got == mine
                and not seen & set(ids)
                and all(c is not None for c in mine.values())
            )
            seen |= set(ids)
        if not ok:
            d.blocks_bad.append(block)
    d.rows_dangling = sorted(
        r for block, rows in members.items() if block not in blocks for r in rows
    )
    return d


def repair_data(conn: apsw.Connection, d: _Data) -> List[str]:
    """In the caller's transaction: fix what :func:`compare_data` found (the triggers of
    migration 0009 let exactly these writes through)."""
    done = []
    if d.fts:
        conn.execute("INSERT INTO episodes_fts(episodes_fts) VALUES ('rebuild')")
        done.append("rebuilt the full-text index")
    if d.vectors_extra:
        conn.executemany(
            "DELETE FROM episodes_vectors WHERE rowid = ?", ((r,) for r in d.vectors_extra)
        )
        conn.executemany(
            "DELETE FROM episodes_codes WHERE rowid = ?", ((r,) for r in d.vectors_extra)
        )
        done.append(f"removed {len(d.vectors_extra)} vectors with no episode embedding")
    if d.vectors_missing:
        for r in d.vectors_missing:
            conn.execute(
                "UPDATE episodes_vectors SET embedding = (SELECT embedding FROM "
                "episodes WHERE rowid = ?) WHERE rowid = ?",
                (r, r),
            )
            conn.execute(
                "INSERT INTO episodes_vectors(rowid, embedding) SELECT rowid, embedding "
                "FROM episodes WHERE rowid = ? AND NOT EXISTS (SELECT 1 FROM "
                "episodes_vectors WHERE rowid = ?)",
                (r, r),
            )
            conn.execute(
                "INSERT INTO episodes_codes(rowid, code) SELECT ?, NULL WHERE NOT "
                "EXISTS (SELECT 1 FROM episodes_codes WHERE rowid = ?)",
                (r, r),
            )
            conn.execute("UPDATE episodes_codes SET code = NULL WHERE rowid = ?", (r,))
        done.append(
            f"wrote {len(d.vectors_missing)} missing or stale vectors (their codes pending)"
        )
    if d.codes_extra:
        conn.executemany(
            "DELETE FROM episodes_codes WHERE rowid = ?", ((r,) for r in d.codes_extra)
        )
        done.append(f"removed {len(d.codes_extra)} codes with no vector")
    if d.codes_missing:
        conn.executemany(
            "INSERT INTO episodes_codes(rowid, code) VALUES (?, NULL)",
            ((r,) for r in d.codes_missing),
        )
        done.append(f"added {len(d.codes_missing)} missing code rows (pending)")
    if d.codes_wrong:
        conn.executemany(
            "UPDATE episodes_codes SET code = ? WHERE rowid = ?",
            ((code, r) for r, code in d.codes_wrong),
        )
        done.append(f"rewrote {len(d.codes_wrong)} wrong codes")
    if d.blocks_bad:
        for b in d.blocks_bad:
            conn.execute("DELETE FROM episodes_code_blocks WHERE block = ?", (b,))
            conn.execute("UPDATE episodes_codes SET block = NULL WHERE block = ?", (b,))
        done.append(f"dissolved {len(d.blocks_bad)} blocks (their codes are loose)")
    if d.rows_dangling:
        conn.executemany(
            "UPDATE episodes_codes SET block = NULL WHERE rowid = ?",
            ((r,) for r in d.rows_dangling),
        )
        done.append(f"released {len(d.rows_dangling)} codes naming a missing block")
    if d.displaced:
        conn.execute("DELETE FROM episodes_displaced")
        done.append("emptied episodes_displaced")
    if d.knn:
        for r in d.knn:
            conn.execute("DELETE FROM episodes_vec WHERE rowid = ?", (r,))
            conn.execute(
                "INSERT INTO episodes_vec(rowid, embedding) SELECT rowid, embedding "
                "FROM episodes WHERE rowid = ? AND embedding IS NOT NULL",
                (r,),
            )
        done.append(f"resynced {len(d.knn)} rows of the knn index")
    return done


def check_data(conn: apsw.Connection) -> List[Finding]:
    """The derived tables' part of :func:`check`: the full-text index, ``episodes_vectors``,
    ``episodes_codes``, ``episodes_code_blocks``, ``episodes_displaced``, the knn index,
    and the embeddings the recall cannot use. Reads every row; writes nothing (FTS5's
    check takes the write lock, so a read-only connection skips it and says so)."""
    return compare_data(conn).findings()
