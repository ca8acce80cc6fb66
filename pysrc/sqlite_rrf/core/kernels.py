"""The extension's cosine kernels, called from Python on numpy arrays.

The same C code as ``vec_cosine`` in SQL (csrc/kernels.c), through cffi: sums in
double precision, SIMD path chosen at run time (AVX2+FMA, NEON) with a scalar twin.
"""

from __future__ import annotations

from typing import List, Optional

import numpy as np

from ._kernels import ffi, lib

_PATHS = {"scalar": 0, "avx2-fma": 1, "neon": 2}


def simd_paths() -> List[str]:
    """The kernel paths this CPU can run, e.g. ``['scalar', 'avx2-fma']``."""
    return [name for name, code in _PATHS.items() if lib.rrf_simd_supported(code)]


def simd_current() -> str:
    """The path used when none is named (the best one unless :func:`simd_select` changed it)."""
    return ffi.string(lib.rrf_simd_name(lib.rrf_simd_current())).decode()


def simd_select(path: str = "auto") -> str:
    """Make ``path`` (``'auto'``, ``'scalar'``, ``'avx2-fma'``, ``'neon'``) the default for
    this process's Python kernels; returns the path now in force."""
    code = -1 if path == "auto" else _path_code(path)
    if lib.rrf_simd_select(code) < 0:
        raise ValueError(f"SIMD path {path!r} is not supported on this CPU; have {simd_paths()}")
    return simd_current()


def _path_code(simd: Optional[str]) -> int:
    if simd is None:
        return -1
    try:
        code = _PATHS[simd]
    except KeyError:
        raise ValueError(f"unknown SIMD path {simd!r}; expected one of {list(_PATHS)}") from None
    if not lib.rrf_simd_supported(code):
        raise ValueError(f"SIMD path {simd!r} is not supported on this CPU; have {simd_paths()}")
    return code


def _as_f32(x: "np.typing.ArrayLike", ndim: int, name: str) -> np.ndarray:
    a = np.ascontiguousarray(x, dtype=np.float32)
    if a.ndim != ndim:
        raise ValueError(f"{name} must be {ndim}-dimensional, got shape {a.shape}")
    if a.shape[-1] == 0:
        raise ValueError(f"{name} is an empty vector")
    return a


def cosine(
    a: "np.typing.ArrayLike", b: "np.typing.ArrayLike", *, simd: Optional[str] = None
) -> float:
    """Cosine similarity of two 1-d vectors (converted to float32).

    Returns ``nan`` when either vector has zero norm or a non-finite element (SQL's
    ``vec_cosine`` returns NULL or an error there). ``simd`` picks a kernel path.
    """
    va, vb = _as_f32(a, 1, "a"), _as_f32(b, 1, "b")
    if va.shape != vb.shape:
        raise ValueError(f"dimension mismatch: {va.shape[0]} vs {vb.shape[0]}")
    pa = ffi.cast("const float *", ffi.from_buffer(va))
    pb = ffi.cast("const float *", ffi.from_buffer(vb))
    return float(lib.rrf_cosine(pa, pb, va.shape[0], _path_code(simd)))


def cosine_many(
    query: "np.typing.ArrayLike", matrix: "np.typing.ArrayLike", *, simd: Optional[str] = None
) -> np.ndarray:
    """Cosine of one 1-d ``query`` against every row of a 2-d ``matrix``: a float64
    array of ``len(matrix)`` values (``nan`` where :func:`cosine` gives ``nan``)."""
    q, m = _as_f32(query, 1, "query"), _as_f32(matrix, 2, "matrix")
    if m.shape[1] != q.shape[0]:
        raise ValueError(f"dimension mismatch: {q.shape[0]} vs {m.shape[1]}")
    out = np.empty(m.shape[0], dtype=np.float64)
    lib.rrf_cosine_many(
        ffi.cast("const float *", ffi.from_buffer(q)),
        ffi.cast("const float *", ffi.from_buffer(m)),
        m.shape[0],
        m.shape[1],
        ffi.cast("double *", ffi.from_buffer(out)),
        _path_code(simd),
    )
    return out
