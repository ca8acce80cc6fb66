"""The 'knn' pool's index: a sqlite-vec ``vec0`` table (cosine) over every embedding,
kept in sync with ``episodes`` by triggers (``sql/knn.sql``). Needs sqlite-vec
(``pip install 'sqlite-rrf[knn]'``) on every connection that writes episodes once the
index exists.
"""

from __future__ import annotations

from typing import Any, Dict, Optional

import apsw

from .sql_files import read_sql
from .sqlite import transaction
from .validate import StoreError


def has_knn(conn: apsw.Connection) -> bool:
    """True when the database has the vec0 index of the 'knn' pool."""
    return bool(conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'episodes_vec'").fetchall())


def load_sqlite_vec(conn: apsw.Connection) -> None:
    """Load sqlite-vec on ``conn``; a StoreError saying how to install it when it is
    missing."""
    try:
        import sqlite_vec
    except ImportError:
        raise StoreError(
            "this database has a 'knn' index (episodes_vec), which needs "
            "sqlite-vec: pip install 'sqlite-rrf[knn]'"
        ) from None
    conn.enable_load_extension(True)
    try:
        conn.load_extension(sqlite_vec.loadable_path())
    finally:
        conn.enable_load_extension(False)


def enable_knn(conn: apsw.Connection, dim: Optional[int]) -> None:
    """Create the index for ``dim``-dimensional embeddings (nothing when it exists)."""
    if has_knn(conn):
        return
    if dim is None:
        raise StoreError(
            "enable_knn: the database has no embedding dimension yet; add "
            "an episode with an embedding (or open with an embedder) first"
        )
    load_sqlite_vec(conn)
    with transaction(conn):
        conn.execute(read_sql("knn.sql").replace("{dim}", str(int(dim))))


def check_pool(conn: apsw.Connection, params: Dict[str, Any], qblob: Optional[bytes]) -> None:
    """Refuse a recall in the 'knn' pool that cannot run: no index, no query vector, or
    ``pool_size`` 0."""
    if params["pool"] != "knn":
        return
    if not has_knn(conn):
        raise StoreError(
            "pool 'knn' needs the vec0 index: call enable_knn() (CLI: sqlite-rrf knn DB) first"
        )
    if qblob is None:
        raise StoreError("pool 'knn' needs a query vector (an embedder or qvec=)")
    if params["pool_size"] == 0:
        raise StoreError("pool_size: must be at least 1 for the 'knn' pool")
