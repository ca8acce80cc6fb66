"""``sqlite_rrf.kernels``: the name docs/python.md gives; the module is
:mod:`sqlite_rrf.core.kernels`."""

from .core.kernels import (  # noqa: F401
    cosine,
    cosine_many,
    simd_current,
    simd_paths,
    simd_select,
)
