"""sqlite-rrf: hybrid retrieval (BM25 + vector similarity + recency + usage) as one SQL
statement. The default profile, ``hybrid``, blends the lists' relevance scores; the
``rrf``, ``memory`` and ``decay`` profiles fuse their ranks by weighted Reciprocal Rank
Fusion.

The core is a SQLite loadable extension (:func:`loadable_path`, :func:`load`); the
memory store, embedder, CLI and evaluation are built on it.
"""

from ._version import __version__
from .core.loader import ExtensionLoadError, load, loadable_path

__all__ = ["ExtensionLoadError", "__version__", "load", "loadable_path"]
