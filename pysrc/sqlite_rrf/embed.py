"""``sqlite_rrf.embed``: the name docs/python.md gives; the module is
:mod:`sqlite_rrf.embedding.embedder`."""

from .embedding.embedder import (
    FINGERPRINT_CACHE_SIZE as FINGERPRINT_CACHE_SIZE,
    Embedder as Embedder,
    EmbeddingError as EmbeddingError,
    PathLike as PathLike,
    default_model_path as default_model_path,
    fingerprint_cache_path as fingerprint_cache_path,
    progress_bar as progress_bar,
    stderr_isatty as stderr_isatty,
)
