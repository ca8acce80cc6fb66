"""``sqlite_rrf.kernels``: the name docs/python.md gives; the module is
:mod:`sqlite_rrf.core.kernels`."""

from .core.kernels import (
    cosine as cosine,
    cosine_many as cosine_many,
    simd_current as simd_current,
    simd_paths as simd_paths,
    simd_select as simd_select,
)
