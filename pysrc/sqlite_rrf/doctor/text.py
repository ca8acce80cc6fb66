"""Episodes whose TEXT is not valid UTF-8 (:func:`invalid_text`): SQLite stores whatever
bytes a client gives as TEXT (``CAST(x'…e9' AS TEXT)`` in the sqlite3 shell), and every
read of the product shows such a value with U+FFFD for each invalid byte sequence
(:class:`sqlite_rrf.core.sqlite.TextSafeCursor`). The full check names each such episode; the
repair (:func:`repair_text`) rewrites the value as every read already shows it: each
invalid sequence becomes U+FFFD (Python's ``bytes.decode("utf-8", "replace")``). The
original bytes are not kept by the repair: ``sqlite-rrf export`` before it keeps them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, List

import apsw

from .findings import Finding

#: What a repair makes of an invalid byte sequence.
REPLACEMENT = "\ufffd"


@dataclass(frozen=True)
class BadText:
    """One episode with TEXT that is not valid UTF-8: its rowid, its id as every read
    shows it, and each such column's original bytes."""

    rowid: int
    shown_id: str
    columns: Dict[str, bytes]


def _text_columns(conn: apsw.Connection) -> List[str]:
    return [
        r[1]
        for r in conn.execute("PRAGMA main.table_info(episodes)")
        if str(r[2]).upper() in ("TEXT", "")
    ]


def _valid(b: bytes) -> bool:
    try:
        b.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def invalid_text(conn: apsw.Connection, chunk: int = 2048) -> List[BadText]:
    """Every episode with a TEXT value (``id``, ``content``, ``kind``, ``scope``,
    ``metadata``, …) that is not valid UTF-8, in rowid order. Reads every row once, the
    values as BLOBs (no decoding can fail)."""
    cols = _text_columns(conn)
    if not cols:
        return []
    quoted = ['"' + c.replace('"', '""') + '"' for c in cols]
    select = ", ".join(f"CASE WHEN typeof({q}) = 'text' THEN CAST({q} AS BLOB) END" for q in quoted)
    out: List[BadText] = []
    after: Any = -(2**63)
    while True:
        rows = conn.execute(
            f"SELECT rowid, {select} FROM main.episodes WHERE rowid > ? ORDER BY rowid LIMIT ?",
            (after, chunk),
        ).fetchall()
        if not rows:
            return out
        for row in rows:
            rowid = int(row[0])  # type: ignore[arg-type]
            after = rowid
            bad = {
                c: bytes(v) for c, v in zip(cols, row[1:]) if isinstance(v, bytes) and not _valid(v)
            }
            if bad:
                ids = conn.execute(
                    "SELECT CAST(id AS BLOB) FROM main.episodes WHERE rowid = ?", (rowid,)
                ).fetchall()
                raw: Any = ids[0][0] if ids else None
                shown = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else str(raw)
                out.append(BadText(rowid, shown, bad))


def text_findings(bad: List[BadText]) -> List[Finding]:
    """One finding per episode of ``bad``, naming it and its columns."""
    return [
        Finding(
            "text",
            f"episode rowid {b.rowid} (id {b.shown_id!r}) has text that is not valid "
            f"UTF-8 in {', '.join(sorted(b.columns))}: every read shows each invalid "
            f"byte sequence as {REPLACEMENT}; --repair writes it so (export first to keep "
            "the original bytes)",
        )
        for b in bad
    ]


def repair_text(conn: apsw.Connection, bad: List[BadText]) -> List[str]:
    """In the caller's transaction: rewrite each value of ``bad`` as it reads (each invalid
    sequence U+FFFD). An ``id`` that would then equal another episode's gets
    ``-rowid-N`` added; an episode that named the old id in ``superseded_by`` names the
    new one."""
    if not bad:
        return []
    for b in bad:
        for col, raw in sorted(b.columns.items()):
            fixed = raw.decode("utf-8", "replace")
            if col == "id":
                taken = conn.execute(
                    "SELECT 1 FROM main.episodes WHERE id = ? AND rowid != ?", (fixed, b.rowid)
                ).fetchall()
                if taken:
                    fixed = f"{fixed}-rowid-{b.rowid}"
                if "superseded_by" in _text_columns(conn):
                    conn.execute(
                        "UPDATE main.episodes SET superseded_by = ? "
                        "WHERE CAST(superseded_by AS BLOB) = ?",
                        (fixed, raw),
                    )
            q = '"' + col.replace('"', '""') + '"'
            conn.execute(f"UPDATE main.episodes SET {q} = ? WHERE rowid = ?", (fixed, b.rowid))
    return [
        f"rewrote the text of {len(bad)} episode{'s' if len(bad) != 1 else ''} that was not "
        f"valid UTF-8 (each invalid byte sequence is now {REPLACEMENT}): rowids "
        + ", ".join(str(b.rowid) for b in bad)
    ]
