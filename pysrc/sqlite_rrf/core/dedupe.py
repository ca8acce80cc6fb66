"""What "the same text" means, for the write path's deduplication and the recall's
collapse of duplicates.

Two texts are the same when their normal forms are equal (:func:`normalise`): Unicode
NFKC, case folded, every run of white space made one space, the ends stripped. So
``"The user uses  fish shell."`` and ``"the user uses fish shell.\\n"`` are the same;
``"The user uses fish shell"`` (no full stop) is not. An episode's normal form is kept
as a 16-byte digest in ``episodes.content_key`` (migration 0010, :func:`content_key`),
indexed with its scope, so finding the episode that already says a text is one seek.
"""

from __future__ import annotations

import hashlib
import unicodedata
from typing import Any, Callable, Dict, Optional, Sequence, Set, Tuple

__all__ = ["content_key", "fill_pending", "find", "mark", "normalise", "write_rows"]


def normalise(text: str) -> str:
    """``text``'s normal form: NFKC, case folded (then NFKC again, as case folding can
    undo it), white space collapsed to single spaces, the ends stripped."""
    t = unicodedata.normalize("NFKC", text).casefold()
    t = unicodedata.normalize("NFKC", t)
    return " ".join(t.split())


def content_key(text: str) -> bytes:
    """The digest stored in ``episodes.content_key``: the first 16 bytes of the SHA-256
    of :func:`normalise`'s UTF-8 (any undecodable character made U+FFFD)."""
    data = normalise(text).encode("utf-8", "replace")
    return hashlib.sha256(data).digest()[:16]


# ---- the write path (sqlite_rrf.store.Store.add_many) ----

#: Pending keys computed per transaction by :func:`fill_pending`.
KEYS_BATCH = 20_000

_REFRESH = (
    "UPDATE episodes SET created_at = max(created_at, :created_at), "
    "accessed_at = max(accessed_at, :accessed_at), "
    "importance = CASE WHEN 'high' IN (importance, :importance) THEN 'high' "
    "WHEN 'normal' IN (importance, :importance) THEN 'normal' ELSE 'low' END, "
    "kind = coalesce(:kind, kind), metadata = coalesce(:metadata, metadata) "
    "WHERE rowid = :rowid"
)


def fill_pending(conn: Any, most: int = KEYS_BATCH) -> int:
    """In the caller's write transaction: compute up to ``most`` pending keys (rows
    written by a client that does not know the key, or whose content such a client
    changed); returns how many were computed."""
    rows = conn.execute(
        "SELECT rowid, content FROM episodes INDEXED BY idx_episodes_content_key "
        "WHERE content_key IS NULL LIMIT ?",
        (most,),
    ).fetchall()
    conn.executemany(
        "UPDATE episodes SET content_key = ? WHERE rowid = ?",
        [(content_key(c if isinstance(c, str) else str(c)), r) for r, c in rows],
    )
    return len(rows)


def find(
    conn: Any, key: bytes, scope: str, text: str, other_than: Optional[str] = None
) -> Optional[Tuple[int, str]]:
    """``(rowid, id)`` of the first-written episode of ``scope`` (other than the episode
    ``other_than``) whose content is the same as ``text`` (the key found, the normal
    forms compared), or None. Pending keys are not seen: :func:`fill_pending` first."""
    norm = None
    for rowid, eid, content in conn.execute(
        "SELECT rowid, id, content FROM episodes INDEXED BY idx_episodes_content_key "
        "WHERE content_key = ? AND scope = ? ORDER BY rowid",
        (key, scope),
    ):
        if eid == other_than:
            continue
        if norm is None:
            norm = normalise(text)
        if isinstance(content, str) and normalise(content) == norm:
            return rowid, eid
    return None


def mark(conn: Any, given_ids: Sequence[bool], rows: Sequence[Dict[str, Any]]) -> Set[int]:
    """Before the write: give every row its ``content_key``; mark the rows that name no
    id (``given_ids[i]`` False) ``dedupe`` (:func:`write_rows` then refreshes the
    episode that already says their text), and return the positions of those whose text
    is already stored in their scope or said by an earlier row of the batch (they need
    no embedding). A row that names an id is written all the same; it is marked
    ``repeat`` when its text is already there. A read: :func:`write_rows` looks again
    under the write lock."""
    dup: Set[int] = set()
    firsts: Set[Tuple[bytes, str, str]] = set()
    for i, row in enumerate(rows):
        row["content_key"] = content_key(row["content"])
        this = (row["content_key"], row["scope"], normalise(row["content"]))
        said = (
            this in firsts
            or find(
                conn,
                row["content_key"],
                row["scope"],
                row["content"],
                row["id"] if given_ids[i] else None,
            )
            is not None
        )
        firsts.add(this)
        if given_ids[i]:
            row["repeat"] = said  # stored all the same: it names an id of its own
        else:
            row["dedupe"] = True
            if said:
                dup.add(i)
    return dup


def write_rows(
    conn: Any,
    sql: str,
    rows: Sequence[Dict[str, Any]],
    embed: Optional[Callable[[Dict[str, Any]], None]] = None,
) -> None:
    """In the caller's write transaction: write ``rows`` with ``sql`` (the Store's
    INSERT or upsert), except that a row marked ``dedupe`` whose text its scope already
    has (an episode, or an earlier row) refreshes that episode instead (``created_at``
    and ``accessed_at`` the later of the two, ``importance`` the higher, ``kind`` and
    ``metadata`` the row's when it has them) and takes its id; such rows get
    ``duplicate = True``. A row left without an embedding because it looked like a
    duplicate, whose twin has gone meanwhile, is embedded by ``embed`` first."""
    while fill_pending(conn):
        pass
    for row in rows:
        if row.get("dedupe"):
            found = find(conn, row["content_key"], row["scope"], row["content"])
            if found is not None:
                conn.execute(_REFRESH, dict(row, rowid=found[0]))
                row["id"] = found[1]
                row["duplicate"] = True
                continue
            if row.get("embedding") is None and row.get("unembedded") and embed is not None:
                embed(row)
        conn.execute(sql, row)
