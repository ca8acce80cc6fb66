"""The memory store: episodes in a SQLite file, recalled by one SQL statement.

>>> from sqlite_rrf.store import Store
>>> with Store("memory.db") as store:                      # doctest: +SKIP
...     store.add("We chose SQLite for the agent's memory.")
...     for hit in store.recall("which database did we pick?"):
...         print(hit.score, hit.content)

The Store opens and migrates the database, writes, reads and recalls episodes. It is
composed of one class per concern, each in a module of this package, all on the same
connection:

* :mod:`.connection` — the open file: busy timeout, read-only state, WAL, the TEMP
  triggers, the database's model and dimension as recorded (:class:`Connection`);
* :mod:`.binding` — binding an embedder (:class:`EmbedderLike`) and embedding what has no
  vector (:class:`Binding`);
* :mod:`.codes` — the quantized pool's sign codes: computing and packing (:class:`Codes`);
* :mod:`.maintenance` — stopwords, the full-text index's merging, pending keys and
  codes, the 'knn' index (:class:`Maintenance`);
* :mod:`.writes` — add, upsert, update, delete, get (:class:`Writes`);
* :mod:`.recall` — recall and touch (:class:`Recall`);
* :mod:`.stats` — counts and facts (:class:`Stats`);
* :mod:`.records` — episodes as whole rows for a memory's management (list, get,
  export), the free space and ``VACUUM`` (:class:`Records`).

:class:`Store` itself is the open: the order in which a database is checked, migrated
and readied. The concerns around the store have modules of their own: input checking
(:mod:`sqlite_rrf.core.validate`), a recall's options (:class:`RecallOptions`,
:mod:`sqlite_rrf.core.options`), the BM25 stopwords' refresh (:mod:`sqlite_rrf.core.stopwords`),
the topic gate (:mod:`sqlite_rrf.core.gate`), the 'knn' pool's index (:mod:`sqlite_rrf.core.knn`)
and the returned values (:mod:`sqlite_rrf.core.results`); their public names are importable
from here too.
"""

from __future__ import annotations

import os
from typing import List, Optional, Union

from ..core import knn
from ..core.gate import TOPIC_GATE_COSINE, TopicGate
from ..core.loader import load
from ..core.migrations import migrate
from ..core.options import RecallOptions
from ..core.results import Episode, RecallHit, RecallResult, Written
from ..core.sqlite import open_connection
from ..core.statements import POOL_MODES, PROFILES
from ..core.stopwords import StopwordsRefresh
from ..core.validate import (
    IMPORTANCE,
    LISTS,
    MAX_COUNT,
    MAX_QUERY_CHARS,
    StoreError,
    Vector,
    vector_fault,
)
from ..doctor import open_check
from .binding import Binding, EmbedderLike
from .connection import now_ms
from .recall import Recall
from .records import RECORD_COLUMNS, EpisodeFilter, Records
from .stats import Stats
from .writes import UNSET, Writes

__all__ = [
    "IMPORTANCE",
    "LISTS",
    "MAX_COUNT",
    "MAX_QUERY_CHARS",
    "POOL_MODES",
    "PROFILES",
    "RECORD_COLUMNS",
    "TOPIC_GATE_COSINE",
    "UNSET",
    "EmbedderLike",
    "Episode",
    "EpisodeFilter",
    "RecallHit",
    "RecallOptions",
    "RecallResult",
    "Store",
    "StoreError",
    "Vector",
    "Written",
    "now_ms",
    "vector_fault",
]


class Store(Recall, Writes, Binding, Stats, Records):
    """An agent's memory in one SQLite file.

    Opening creates or migrates the database (WAL journal, ``busy_timeout``) and
    loads the rrf extension. ``embedder`` (an :class:`sqlite_rrf.embedding.embedder.Embedder`, or
    anything with ``dim``, ``embed(text)`` and ``embed_many(texts)``: :class:`EmbedderLike`)
    embeds content and queries; without one, episodes need explicit embeddings and
    recall uses the BM25, recency and access lists only (or ``qvec=``).

    The database records its embedding model and dimension (table ``rrf_meta``);
    a vector of another dimension is refused with an error and nothing is written.
    One Store is for one thread; open one per thread or process.

    ``mmap_size`` (bytes) lets SQLite read the file through memory-mapped I/O up to
    that size (``PRAGMA mmap_size``; SQLite may cap it): the vector scans of a large
    memory copy fewer pages. The price is SQLite's: an I/O error on a mapped page
    (a failing disk, a file truncated behind SQLite's back) is a signal, not an
    error SQLite can return. Off by default.
    """

    def __init__(
        self,
        path: Union[str, os.PathLike],
        *,
        embedder: Optional[EmbedderLike] = None,
        busy_timeout_ms: int = 10_000,
        readonly: bool = False,
        mmap_size: Optional[int] = None,
    ) -> None:
        self.path = os.fspath(path)
        self.embedder = embedder
        self._bad_vectors = {}
        self._pending_seen = None
        self.conn = None
        self.busy_timeout_ms = busy_timeout_ms
        # readonly: never writes, not even the WAL switch; the file must exist. On read-only
        # media a WAL file opens as immutable (_sqlite.open_connection says when).
        self.conn, self.opened_as = open_connection(self.path, readonly=readonly)
        self._gate = TopicGate(self.conn)
        self._stopwords = StopwordsRefresh(self.conn)
        try:
            self.conn.set_busy_timeout(self._busy_timeout_ms)
            self.readonly = bool(self.conn.readonly("main"))
            self._check_ours()  # reads only: before the WAL switch, the first write
            if self.path not in (":memory:", "") and not self.readonly:
                self._wal()
            self.conn.execute("PRAGMA foreign_keys = ON")
            if mmap_size is not None:
                if isinstance(mmap_size, bool) or not isinstance(mmap_size, int) or mmap_size < 0:
                    raise StoreError(
                        f"mmap_size: must be an integer >= 0 (bytes), got {mmap_size!r}"
                    )
                self.conn.execute(f"PRAGMA mmap_size = {mmap_size}")
            load(self.conn)
            if self.has_knn:  # before migrating: a migration may write to the vec0 index
                knn.load_sqlite_vec(self.conn)
            migrated: List[int] = []
            if self.readonly:
                self._check_schema_readable()
            else:
                migrated = migrate(self.conn)  # takes the write lock only when one is due
            self.schema_warnings = open_check(
                self.conn, readonly=self.readonly, busy_timeout_ms=self.busy_timeout_ms
            )
            self._guard_vectors()
            self._code_vectors()
            if not self.readonly and migrated:
                # this open wrote (a migration, no episodes): the writer's maintenance,
                # never waiting
                self._upkeep_after_commit(episodes_written=0)
            if embedder is not None:
                self._bind_model(embedder, remember=not self.readonly)
        except BaseException:
            self.conn.close()
            raise
