/*
** sqlite-rrf vector kernels: cosine similarity over float32 vectors.
**
** Pure C, no SQLite and no Python: the loadable extension (rrf.c) and the
** cffi binding (sqlite_rrf.core._kernels) both link this file.
**
** Requirements:
**   K1. Inputs are little-endian float32 arrays at any byte alignment; the
**       kernels never write to them and never allocate.
**   K2. Sums are accumulated in double precision, so the result matches a
**       float64 reference to ~1e-12 and float32 overflow cannot happen.
**   K3. The SIMD path is chosen at run time from the CPU (AVX2+FMA on x86-64,
**       NEON on AArch64); the scalar twin is always compiled and selectable.
**   K4. Every path adds the same products in the same order (16 lanes, one
**       reduction tree, then the last n % 8 elements one by one; kernels.c
**       spells it out), so all paths return the same double, bit for bit, for
**       every n: the result does not depend on the CPU or on SQLITE_RRF_SIMD,
**       which is what lets vec_cosine be SQLITE_DETERMINISTIC. (A 32-bit x87
**       build, whose doubles carry excess precision, has the scalar path only.)
**
** Hamming distance of bit codes (rrf_hamming, vec_signbits):
**   K5. rrf_hamming_bytes counts the bits that differ between two n-byte arrays,
**       read at any byte alignment (K1). Every path returns the exact count, so
**       all paths agree on every input.
**   K6. The Hamming path follows the SIMD path in force (K3, SQLITE_RRF_SIMD):
**       scalar (64-bit words, SWAR popcount), avx2-fma (AVX2 vpshufb nibble-table
**       popcount over 32-byte blocks, then SSSE3 over 16, then scalar; the path
**       needs AVX2 only, which every CPU of the avx2-fma path has), neon (vcnt
**       over 16-byte blocks, then scalar).
*/
#ifndef SQLITE_RRF_KERNELS_H
#define SQLITE_RRF_KERNELS_H

#include <stddef.h>

#define RRF_SIMD_AUTO (-1)
#define RRF_SIMD_SCALAR 0
#define RRF_SIMD_AVX2 1
#define RRF_SIMD_NEON 2

/* Sums over n elements: out[0] = a.b, out[1] = a.a, out[2] = b.b (K1, K2). */
typedef void (*rrf_dot3_fn)(const void *a, const void *b, size_t n, double out[3]);

/* 1 when this CPU and build can run the path, else 0. */
int rrf_simd_supported(int path);
/* The best path this CPU supports. */
int rrf_simd_best(void);
/* Make `path` the default (RRF_SIMD_AUTO = best). Returns the path now in
** force, or -1 (and changes nothing) when the path is unsupported. */
int rrf_simd_select(int path);
/* The path in force. */
int rrf_simd_current(void);
/* The paths compiled into this build, e.g. "scalar avx2-fma". */
const char *rrf_simd_built(void);
/* "scalar", "avx2-fma", "neon" or "unknown". */
const char *rrf_simd_name(int path);
/* Kernel for `path` (RRF_SIMD_AUTO = the path in force); NULL if unsupported. */
rrf_dot3_fn rrf_dot3_kernel(int path);

/* Bits that differ between two n-byte arrays (K5). */
typedef unsigned long long (*rrf_hamming_fn)(const void *a, const void *b, size_t n);

/* The Hamming kernel of `path` (RRF_SIMD_AUTO = the path in force); NULL if unsupported. */
rrf_hamming_fn rrf_hamming_kernel(int path);

/* Bits that differ between a and b (n bytes each) with the given path (K5, K6);
** ~0ULL when the path is unsupported. */
unsigned long long rrf_hamming_bytes(const void *a, const void *b, size_t n, int path);

/* Cosine similarity of two n-element vectors with the given path.
** Returns NaN for a zero-norm vector or a non-finite element. */
double rrf_cosine(const float *a, const float *b, size_t n, int path);

/* One query against `rows` consecutive dim-element vectors: out[i] is the
** cosine of q and row i (NaN where rrf_cosine would give NaN). */
void rrf_cosine_many(const float *q, const float *m, size_t rows, size_t dim, double *out,
                     int path);

/* Cosine from the three sums; NaN when a norm is zero or a sum non-finite. */
double rrf_cosine_from_sums(const double s[3]);

#endif
