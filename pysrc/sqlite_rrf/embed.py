"""``sqlite_rrf.embed``: the name docs/python.md gives; the module is
:mod:`sqlite_rrf.embedding.embedder`."""

from .embedding.embedder import (  # noqa: F401
    FINGERPRINT_CACHE_SIZE,
    Embedder,
    EmbeddingError,
    PathLike,
    default_model_path,
    fingerprint_cache_path,
    progress_bar,
    stderr_isatty,
)
