"""cffi builder for ``sqlite_rrf.core._kernels``: the cosine kernels of csrc/kernels.c
made callable from Python on numpy arrays (used by :mod:`sqlite_rrf.core.kernels`), and
the Hamming kernels (``rrf_hamming_bytes``, used by tests/test_hamming.py)."""

import os

from cffi import FFI

HERE = os.path.dirname(os.path.abspath(__file__))
CSRC = os.path.normpath(os.path.join(HERE, "..", "..", "..", "csrc"))

ffibuilder = FFI()
ffibuilder.cdef(
    """
    int rrf_simd_supported(int path);
    int rrf_simd_best(void);
    int rrf_simd_select(int path);
    int rrf_simd_current(void);
    const char *rrf_simd_name(int path);
    double rrf_cosine(const float *a, const float *b, size_t n, int path);
    void rrf_cosine_many(const float *q, const float *m, size_t rows, size_t dim,
                         double *out, int path);
    unsigned long long rrf_hamming_bytes(const void *a, const void *b, size_t n, int path);
    """
)
ffibuilder.set_source(
    "sqlite_rrf.core._kernels",
    '#include "kernels.h"',
    sources=[os.path.relpath(os.path.join(CSRC, "kernels.c"))],
    include_dirs=[os.path.relpath(CSRC)],
    extra_compile_args=[] if os.name == "nt" else ["-O2", "-std=c11"],
    libraries=[] if os.name == "nt" else ["m"],
)

if __name__ == "__main__":
    ffibuilder.compile(verbose=True)
