"""Two helpers on an apsw connection that the store's modules share: a transaction
that commits or rolls back as one, and a value from ``rrf_meta``."""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Iterator

import apsw


@contextmanager
def transaction(conn: apsw.Connection, *, write: bool = True) -> Iterator[None]:
    """Run the ``with`` block in one transaction: committed when the block ends, rolled
    back when anything (even KeyboardInterrupt) escapes it or the commit fails.

    ``write`` (the default) begins with ``BEGIN IMMEDIATE``: the write lock is taken first,
    waiting out the busy timeout, so that a read-then-write cannot fail half way because
    another writer came first. ``write=False`` is a read transaction (one snapshot, no
    write lock). A failing ``BEGIN`` raises with nothing to roll back.
    """
    conn.execute("BEGIN IMMEDIATE" if write else "BEGIN")
    try:
        yield
        conn.execute("COMMIT")
    except BaseException:
        if not conn.getautocommit():
            conn.execute("ROLLBACK")
        raise


def meta(conn: apsw.Connection, key: str) -> Any:
    """The value of ``key`` in ``rrf_meta``, or None."""
    rows = conn.execute("SELECT value FROM rrf_meta WHERE key = ?", (key,)).fetchall()
    return rows[0][0] if rows else None
