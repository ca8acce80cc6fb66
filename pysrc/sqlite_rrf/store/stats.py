"""The Store's counts and facts (what ``sqlite-rrf stats`` prints), and the compact reads
the front-ends show besides a recall (the scopes of hits, the memories saved last)."""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence, Tuple

from ..core import knn
from ..core.migrations import current_version
from ..core.stopwords import read_stopwords
from .connection import Connection


class Stats(Connection):
    """Counts and facts about the database."""

    def stats(self) -> Dict[str, Any]:
        """Counts and facts about the database (what ``sqlite-rrf stats`` prints).
        ``superseded`` counts the episodes another fact replaced (kept, not recalled)."""
        (n, n_emb, oldest, newest, accesses, superseded) = self.conn.execute(
            "SELECT count(*), count(embedding), min(created_at), max(created_at), "
            "coalesce(sum(access_count), 0), count(superseded_by) FROM episodes"
        ).fetchall()[0]
        by_imp = dict(
            self.conn.execute(
                "SELECT importance, count(*) FROM episodes GROUP BY importance"
            ).fetchall()
        )
        page_count = self.conn.execute("PRAGMA page_count").fetchall()[0][0]
        page_size = self.conn.execute("PRAGMA page_size").fetchall()[0][0]
        return {
            "path": self.path,
            "episodes": n,
            "with_embedding": n_emb,
            "superseded": superseded,
            "embedding_model": self.meta("embedding_model"),
            "embedding_dim": self.dim,
            "oldest_created_at": oldest,
            "newest_created_at": newest,
            "total_accesses": accesses,
            "by_importance": by_imp,
            "schema_version": current_version(self.conn),
            "size_bytes": page_count * page_size,
            "bm25_stopwords": read_stopwords(self.conn),
        }

    def scope_counts(
        self, most: Optional[int] = None, by_name: bool = False
    ) -> List[Tuple[str, int]]:
        """``(stored scope, episodes)`` per scope, the largest first (then by name), or
        with ``by_name`` in the order of the stored names; at most ``most`` of them
        (None: all)."""
        order = "scope" if by_name else "n DESC, scope"
        return [
            (s, n)
            for s, n in self.conn.execute(
                "SELECT scope, count(*) AS n FROM episodes GROUP BY scope "
                f"ORDER BY {order} LIMIT ?",
                (-1 if most is None else most,),
            )
        ]

    def knn_vectors(self) -> int:
        """How many vectors the 'knn' pool's index holds (0: no index)."""
        if not knn.has_knn(self.conn):
            return 0
        return int(self.conn.execute("SELECT count(*) FROM episodes_vec").fetchall()[0][0])

    def hit_facts(
        self, rowids: Sequence[int]
    ) -> Dict[int, Tuple[str, Optional[int], Optional[str]]]:
        """The stored scope, ``confirmed_at`` and ``superseded_by`` of each of the
        episodes ``rowids``."""
        out: Dict[int, Tuple[str, Optional[int], Optional[str]]] = {}
        for i in range(0, len(rowids), 500):
            chunk = list(rowids[i : i + 500])
            marks = ",".join("?" * len(chunk))
            for rowid, scope, confirmed, by in self.conn.execute(
                "SELECT rowid, scope, confirmed_at, superseded_by FROM episodes "
                f"WHERE rowid IN ({marks})",
                chunk,
            ):
                out[rowid] = (scope, confirmed, by)
        return out

    def recent(self, scopes: Optional[Sequence[str]], most: int) -> List[Tuple[str, str, str, int]]:
        """``(id, content, scope, created_at)`` of the ``most`` current episodes saved
        last (newest first) in ``scopes`` (None: every scope); the ones another fact
        replaced are left out."""
        where, args = "superseded_by IS NULL", []
        if scopes is not None:
            where += f" AND scope IN ({', '.join('?' * len(scopes))})"
            args = list(scopes)
        return [
            (r[0], r[1], r[2], r[3])
            for r in self.conn.execute(
                f"SELECT id, content, scope, created_at FROM episodes WHERE {where} "
                "ORDER BY created_at DESC, rowid DESC LIMIT ?",
                [*args, most],
            )
        ]
