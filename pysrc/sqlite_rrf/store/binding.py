"""The database's model: binding an embedder to a Store (the database records its model,
dimension and fingerprint, and refuses another), and embedding the episodes that have
no vector yet.

:class:`EmbedderLike` is what a Store asks of an embedder;
:class:`sqlite_rrf.embedding.embedder.Embedder` is one.
"""

from __future__ import annotations

from typing import Any, Iterable, List, Optional, Protocol, Sequence, Tuple

from ..core.sqlite import transaction
from ..core.validate import StoreError, Vector, blob, check_dim
from .connection import Connection


class EmbedderLike(Protocol):
    """What a :class:`~sqlite_rrf.store.Store` calls on its ``embedder``:
    :class:`sqlite_rrf.embedding.embedder.Embedder`, or anything with these. Optional, read when
    present: ``model_spec`` or ``model_name`` (the name the database records) and
    ``fingerprint()`` (the embeddings of :data:`sqlite_rrf.embedding.models.FINGERPRINT_TEXTS`;
    without it the Store computes them with ``embed_many``)."""

    @property
    def dim(self) -> int:
        """The embedding dimension."""

    def embed(self, text: str) -> Vector:
        """One text's vector (float32 values, ``dim`` of them)."""

    def embed_many(
        self, texts: Sequence[str], *, progress: Optional[bool] = None
    ) -> Iterable[Vector]:
        """The texts' vectors, in order; ``progress`` asks for a progress bar."""


class Binding(Connection):
    """The embedder and the model the database records."""

    def attach_embedder(self, embedder: Optional[EmbedderLike], *, remember: bool = True) -> None:
        """Use ``embedder`` for this store's writes and recalls (see the class docstring).

        The database remembers the first model it is used with: its name, dimension and
        fingerprint (the embeddings of a few fixed texts). A model of another dimension, or
        one whose fingerprint differs (another model of the same size), is refused with a
        :class:`StoreError` and nothing changes, so two vector spaces never mix. With
        ``remember=False`` the model is checked but nothing is written (a read-only recall).
        """
        if embedder is not None:
            self._bind_model(embedder, remember)
        self.embedder = embedder

    def _bind_model(self, embedder: EmbedderLike, remember: bool = True) -> None:
        """Record the model, dimension and fingerprint on first use; refuse a mismatch."""
        from ..embedding.models import fingerprint

        dim = int(embedder.dim)
        name = getattr(embedder, "model_spec", None) or getattr(embedder, "model_name", None)
        own_fingerprint = getattr(embedder, "fingerprint", None)
        if callable(own_fingerprint):
            fp = own_fingerprint()  # an Embedder: computed once per model file
        else:
            fp = fingerprint(embedder) if hasattr(embedder, "embed_many") else None
        if not self._model_upserts(name, dim, fp) or not remember:
            return  # nothing to record: no write lock taken
        with transaction(self.conn):
            for key, value in self._model_upserts(name, dim, fp):  # again, under the lock
                self.conn.execute("INSERT OR REPLACE INTO rrf_meta VALUES (?, ?)", (key, value))

    def _model_upserts(
        self, name: Optional[str], dim: int, fp: Optional[bytes]
    ) -> List[Tuple[str, Any]]:
        """The rrf_meta rows that binding this model would write; raises StoreError when
        the model is not the database's."""
        from ..embedding.models import FINGERPRINT_MIN_COSINE, fingerprint_cosine

        have = self.dim
        known = self.model
        if have is not None and have != dim:
            raise StoreError(
                f"this database holds {have}-dimensional embeddings (model {known!r}); "
                f"the model {name!r} gives {dim}. Use the database's model, or a new "
                "database"
            )
        stored = self.meta("embedding_fingerprint")
        if isinstance(stored, bytes) and fp is not None:
            cos = fingerprint_cosine(stored, fp)
            if cos is None or cos < FINGERPRINT_MIN_COSINE:
                raise StoreError(
                    f"the model {name!r} is not the model this database's embeddings were "
                    f"made with ({known!r}): the same fixed texts embed differently "
                    f"(cosine {'n/a' if cos is None else f'{cos:.3f}'}), so its vectors "
                    "would not be comparable. Use the database's model, or a new database"
                )
        upserts: List[Tuple[str, Any]] = []
        if have is None:
            upserts.append(("embedding_dim", dim))
        if known is None and name:
            upserts.append(("embedding_model", name))
        if stored is None and fp is not None:
            upserts.append(("embedding_fingerprint", fp))
        return upserts

    def missing_embeddings(self) -> int:
        """How many episodes have no embedding (what :meth:`embed_missing` would fill)."""
        return self.conn.execute(
            "SELECT count(*) FROM episodes WHERE embedding IS NULL"
        ).fetchall()[0][0]

    def embed_missing(
        self, *, batch_size: int = 64, progress: Optional[bool] = None, limit: Optional[int] = None
    ) -> int:
        """Embed the episodes that have no embedding, oldest rowid first, with the store's
        embedder; returns how many were embedded.

        Each batch of ``batch_size`` episodes is written in its own transaction, all or
        nothing, so an interrupted run keeps every finished batch and the next run goes on
        from there. An episode rewritten by another client while its batch was embedding is
        left for the next run. ``progress`` shows a progress bar (default: on a terminal);
        ``limit`` stops after that many episodes.
        """
        if self.embedder is None:
            raise StoreError("embed_missing: this store has no embedder (attach_embedder)")
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise StoreError(f"batch_size: must be a positive integer, got {batch_size!r}")
        total = self.missing_embeddings()
        if limit is not None:
            total = min(total, limit)
        from ..embedding.embedder import progress_bar, stderr_isatty

        if progress is None:
            progress = total > 0 and stderr_isatty()
        bar = progress_bar(total, "embedding", unit="episode") if progress else None
        seen, embedded, after = 0, 0, 0
        try:
            while seen < total:
                rows = self.conn.execute(
                    "SELECT rowid, content FROM episodes WHERE embedding IS NULL AND rowid > ? "
                    "ORDER BY rowid LIMIT ?",
                    (after, min(batch_size, total - seen)),
                ).fetchall()
                if not rows:
                    break
                after = rows[-1][0]
                vecs = self.embedder.embed_many([c for _, c in rows], progress=False)
                updates = []
                for (rowid, content), v in zip(rows, vecs):
                    emb, n = blob(v, "embedder output")
                    check_dim(n, self.dim)
                    updates.append((emb, rowid, content))
                with transaction(self.conn):
                    self.conn.execute(
                        "INSERT OR IGNORE INTO rrf_meta VALUES ('embedding_dim', ?)",
                        (len(updates[0][0]) // 4,),
                    )
                    written = 0
                    for update in updates:
                        self.conn.execute(
                            "UPDATE episodes SET embedding = ? WHERE rowid = ? AND content = ? "
                            "AND embedding IS NULL",
                            update,
                        )
                        written += self.conn.changes()
                seen += len(rows)
                embedded += written
                if bar is not None:
                    bar.update(len(rows))
        finally:
            if bar is not None:
                bar.close()
        return embedded
