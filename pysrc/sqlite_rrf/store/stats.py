"""The Store's counts and facts (what ``sqlite-rrf stats`` prints)."""

from __future__ import annotations

from typing import Any, Dict

from ..migrations import current_version
from ..stopwords import read_stopwords
from .connection import Connection


class Stats(Connection):
    """Counts and facts about the database."""

    def stats(self) -> Dict[str, Any]:
        """Counts and facts about the database (what ``sqlite-rrf stats`` prints)."""
        (n, n_emb, oldest, newest, accesses) = self.conn.execute(
            "SELECT count(*), count(embedding), min(created_at), max(created_at), "
            "coalesce(sum(access_count), 0) FROM episodes"
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
