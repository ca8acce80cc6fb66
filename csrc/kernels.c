/*
** sqlite-rrf vector kernels (see kernels.h for the requirements K1-K4).
*/
#include "kernels.h"

#include <float.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "sqlite-rrf reads float32 blobs as little-endian; big-endian hosts are not supported"
#endif

/* K4 needs double arithmetic in double precision: a 32-bit x87 build (excess
** precision, FLT_EVAL_METHOD 2) keeps only the scalar path. */
#if (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__)) && \
    defined(FLT_EVAL_METHOD) && FLT_EVAL_METHOD == 0
#define RRF_HAVE_AVX2 1
#include <immintrin.h>
#endif

#if defined(__aarch64__) && defined(__ARM_NEON)
#define RRF_HAVE_NEON 1
#include <arm_neon.h>
#endif

/* K1: read one float from any alignment. */
static inline float load_f32(const unsigned char *p) {
  float f;
  memcpy(&f, p, sizeof f);
  return f;
}

/* ---- the one summation order of every path (K4) ----
**
** Each of the three sums runs over 16 lanes, L[0..15], all starting at +0.0:
**   1. element i of the first m = n - n % 8 elements (whole blocks of 8) goes to
**      lane i % 16, in increasing i: L[i % 16] = L[i % 16] + x[i] * y[i];
**   2. the lanes are reduced as v[j] = (L[j] + L[j+4]) + (L[j+8] + L[j+12]) for
**      j = 0..3, then s = (v[0] + v[2]) + (v[1] + v[3]);
**   3. the last n % 8 elements are added to s one by one, in increasing i.
** x[i] * y[i] is the product of two floats widened to double, which is exact (24
** + 24 significant bits fit in 53, and the exponents stay far inside double's
** range), so a fused multiply-add and a multiply then add give the same double:
** the paths may use either, and compiler contraction changes nothing. */

#define RRF_LANES 16

/* Step 2 of K4 on one quantity's 16 lanes. */
static double reduce16(const double L[RRF_LANES]) {
  double v0 = (L[0] + L[4]) + (L[8] + L[12]);
  double v1 = (L[1] + L[5]) + (L[9] + L[13]);
  double v2 = (L[2] + L[6]) + (L[10] + L[14]);
  double v3 = (L[3] + L[7]) + (L[11] + L[15]);
  return (v0 + v2) + (v1 + v3);
}

/* Step 3 of K4: the elements [i, n) one by one. */
static void tail3(const unsigned char *a, const unsigned char *b, size_t i, size_t n,
                  double out[3]) {
  for (; i < n; i++) {
    double x = load_f32(a + 4 * i), y = load_f32(b + 4 * i);
    out[0] += x * y;
    out[1] += x * x;
    out[2] += y * y;
  }
}

/* ---- scalar twin: K4 in plain C, always compiled (K3) ---- */

/* The 3 x 16 lanes are named variables rather than arrays, so that the compiler
** keeps what it can of them in registers (an array of lanes is read and written
** back on every step). */
/* clang-format off */ /* the unrolled lanes, four to a line */
#define RRF_LANE_ZERO(J) double D##J = 0, A##J = 0, B##J = 0
#define RRF_LANE_ADD(J)                                                              \
  do {                                                                              \
    double x = load_f32(a + 4 * (i + J)), y = load_f32(b + 4 * (i + J));            \
    D##J += x * y;                                                                  \
    A##J += x * x;                                                                  \
    B##J += y * y;                                                                  \
  } while (0)
#define RRF_LANES_OF(X)                                                              \
  { X##0, X##1, X##2, X##3, X##4, X##5, X##6, X##7,                                 \
    X##8, X##9, X##10, X##11, X##12, X##13, X##14, X##15 }

static void dot3_scalar(const void *pa, const void *pb, size_t n, double out[3]) {
  const unsigned char *a = pa, *b = pb;
  RRF_LANE_ZERO(0); RRF_LANE_ZERO(1); RRF_LANE_ZERO(2); RRF_LANE_ZERO(3);
  RRF_LANE_ZERO(4); RRF_LANE_ZERO(5); RRF_LANE_ZERO(6); RRF_LANE_ZERO(7);
  RRF_LANE_ZERO(8); RRF_LANE_ZERO(9); RRF_LANE_ZERO(10); RRF_LANE_ZERO(11);
  RRF_LANE_ZERO(12); RRF_LANE_ZERO(13); RRF_LANE_ZERO(14); RRF_LANE_ZERO(15);
  size_t m = n - n % 8, i = 0;
  for (; i + 16 <= m; i += 16) { /* K4 step 1: lanes 0-15 */
    RRF_LANE_ADD(0); RRF_LANE_ADD(1); RRF_LANE_ADD(2); RRF_LANE_ADD(3);
    RRF_LANE_ADD(4); RRF_LANE_ADD(5); RRF_LANE_ADD(6); RRF_LANE_ADD(7);
    RRF_LANE_ADD(8); RRF_LANE_ADD(9); RRF_LANE_ADD(10); RRF_LANE_ADD(11);
    RRF_LANE_ADD(12); RRF_LANE_ADD(13); RRF_LANE_ADD(14); RRF_LANE_ADD(15);
  }
  if (i < m) { /* a last block of 8: lanes 0-7 */
    RRF_LANE_ADD(0); RRF_LANE_ADD(1); RRF_LANE_ADD(2); RRF_LANE_ADD(3);
    RRF_LANE_ADD(4); RRF_LANE_ADD(5); RRF_LANE_ADD(6); RRF_LANE_ADD(7);
  }
  const double d[RRF_LANES] = RRF_LANES_OF(D), na[RRF_LANES] = RRF_LANES_OF(A),
               nb[RRF_LANES] = RRF_LANES_OF(B);
  out[0] = reduce16(d); /* K4 step 2 */
  out[1] = reduce16(na);
  out[2] = reduce16(nb);
  tail3(a, b, m, n, out); /* K4 step 3 */
}
#undef RRF_LANE_ZERO
#undef RRF_LANE_ADD
#undef RRF_LANES_OF
/* clang-format on */

/* ---- AVX2 + FMA: K4 with the 16 lanes in four 4-double registers per sum ---- */

#ifdef RRF_HAVE_AVX2
/* Step 2 of K4: ((L0-3 + L4-7) + (L8-11 + L12-15)) lane by lane, then
** (v0 + v2) + (v1 + v3). */
__attribute__((target("avx2,fma"))) static inline double hsum16(__m256d q0, __m256d q1, __m256d q2,
                                                                __m256d q3) {
  __m256d v = _mm256_add_pd(_mm256_add_pd(q0, q1), _mm256_add_pd(q2, q3));
  __m128d lo = _mm256_castpd256_pd128(v), hi = _mm256_extractf128_pd(v, 1);
  lo = _mm_add_pd(lo, hi); /* (v0 + v2, v1 + v3) */
  return _mm_cvtsd_f64(lo) + _mm_cvtsd_f64(_mm_unpackhi_pd(lo, lo));
}

/* One 8-float step: widen both halves to double and accumulate (K2). */
#define RRF_AVX2_STEP(OFF, D0, D1, A0, A1, B0, B1)                                 \
  do {                                                                             \
    __m256 va = _mm256_loadu_ps((const float *)(const void *)(a + 4 * (i + OFF))); \
    __m256 vb = _mm256_loadu_ps((const float *)(const void *)(b + 4 * (i + OFF))); \
    __m256d xl = _mm256_cvtps_pd(_mm256_castps256_ps128(va));                      \
    __m256d xh = _mm256_cvtps_pd(_mm256_extractf128_ps(va, 1));                    \
    __m256d yl = _mm256_cvtps_pd(_mm256_castps256_ps128(vb));                      \
    __m256d yh = _mm256_cvtps_pd(_mm256_extractf128_ps(vb, 1));                    \
    D0 = _mm256_fmadd_pd(xl, yl, D0);                                              \
    D1 = _mm256_fmadd_pd(xh, yh, D1);                                              \
    A0 = _mm256_fmadd_pd(xl, xl, A0);                                              \
    A1 = _mm256_fmadd_pd(xh, xh, A1);                                              \
    B0 = _mm256_fmadd_pd(yl, yl, B0);                                              \
    B1 = _mm256_fmadd_pd(yh, yh, B1);                                              \
  } while (0)

/* 16 floats a pass: lanes 0-7 in (d0, d1), 8-15 in (d2, d3), so consecutive FMAs
** do not wait on each other; a last block of 8 goes to lanes 0-7 (K4 step 1). */
__attribute__((target("avx2,fma"))) static void dot3_avx2(const void *pa, const void *pb, size_t n,
                                                          double out[3]) {
  const unsigned char *a = pa, *b = pb;
  __m256d d0 = _mm256_setzero_pd(), d1 = d0, d2 = d0, d3 = d0;
  __m256d a0 = d0, a1 = d0, a2 = d0, a3 = d0;
  __m256d b0 = d0, b1 = d0, b2 = d0, b3 = d0;
  size_t m = n - n % 8, i = 0;
  for (; i + 16 <= m; i += 16) {
    RRF_AVX2_STEP(0, d0, d1, a0, a1, b0, b1);
    RRF_AVX2_STEP(8, d2, d3, a2, a3, b2, b3);
  }
  if (i < m) RRF_AVX2_STEP(0, d0, d1, a0, a1, b0, b1);
  out[0] = hsum16(d0, d1, d2, d3); /* K4 step 2 */
  out[1] = hsum16(a0, a1, a2, a3);
  out[2] = hsum16(b0, b1, b2, b3);
  tail3(a, b, m, n, out); /* K4 step 3 */
}
#endif

/* ---- NEON (AArch64): K4 with the 16 lanes in eight 2-double registers per sum ---- */

#ifdef RRF_HAVE_NEON
/* Step 2 of K4: q[k] holds lanes 2k and 2k+1. */
static inline double neon_hsum16(const float64x2_t q[8]) {
  float64x2_t lo = vaddq_f64(vaddq_f64(q[0], q[2]), vaddq_f64(q[4], q[6])); /* v0, v1 */
  float64x2_t hi = vaddq_f64(vaddq_f64(q[1], q[3]), vaddq_f64(q[5], q[7])); /* v2, v3 */
  return vaddvq_f64(vaddq_f64(lo, hi)); /* (v0 + v2) + (v1 + v3) */
}

/* Four floats: lanes k, k+1 (low half) and k+2, k+3 (high half) of each sum, k = 2q. */
#define RRF_NEON_STEP(OFF, Q)                                                    \
  do {                                                                           \
    float32x4_t va = vreinterpretq_f32_u8(vld1q_u8(a + 4 * (i + OFF)));          \
    float32x4_t vb = vreinterpretq_f32_u8(vld1q_u8(b + 4 * (i + OFF)));          \
    float64x2_t xl = vcvt_f64_f32(vget_low_f32(va)), xh = vcvt_high_f64_f32(va); \
    float64x2_t yl = vcvt_f64_f32(vget_low_f32(vb)), yh = vcvt_high_f64_f32(vb); \
    d[Q] = vfmaq_f64(d[Q], xl, yl);                                              \
    d[Q + 1] = vfmaq_f64(d[Q + 1], xh, yh);                                      \
    s[Q] = vfmaq_f64(s[Q], xl, xl);                                              \
    s[Q + 1] = vfmaq_f64(s[Q + 1], xh, xh);                                      \
    t[Q] = vfmaq_f64(t[Q], yl, yl);                                              \
    t[Q + 1] = vfmaq_f64(t[Q + 1], yh, yh);                                      \
  } while (0)

static void dot3_neon(const void *pa, const void *pb, size_t n, double out[3]) {
  const unsigned char *a = pa, *b = pb;
  float64x2_t d[8], s[8], t[8];
  for (int k = 0; k < 8; k++) d[k] = s[k] = t[k] = vdupq_n_f64(0);
  size_t m = n - n % 8, i = 0;
  for (; i + 16 <= m; i += 16) {
    RRF_NEON_STEP(0, 0);
    RRF_NEON_STEP(4, 2);
    RRF_NEON_STEP(8, 4);
    RRF_NEON_STEP(12, 6);
  }
  if (i < m) {
    RRF_NEON_STEP(0, 0);
    RRF_NEON_STEP(4, 2);
  }
  out[0] = neon_hsum16(d); /* K4 step 2 */
  out[1] = neon_hsum16(s);
  out[2] = neon_hsum16(t);
  tail3(a, b, m, n, out); /* K4 step 3 */
}
#endif

/* ---- Hamming distance (K5, K6) ---- */

/* Population count of a 64-bit word, portable (SWAR). */
static inline unsigned popcount64_swar(uint64_t x) {
  x = x - ((x >> 1) & 0x5555555555555555ULL);
  x = (x & 0x3333333333333333ULL) + ((x >> 2) & 0x3333333333333333ULL);
  x = (x + (x >> 4)) & 0x0f0f0f0f0f0f0f0fULL;
  return (unsigned)((x * 0x0101010101010101ULL) >> 56);
}

/* The scalar twin: 8-byte words read with memcpy (any alignment, K1), then the
** last n % 8 bytes in one zero-padded word. */
static unsigned long long hamming_from(const unsigned char *a, const unsigned char *b, size_t i,
                                       size_t n) {
  unsigned long long total = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t x, y;
    memcpy(&x, a + i, 8);
    memcpy(&y, b + i, 8);
    total += popcount64_swar(x ^ y);
  }
  if (i < n) {
    uint64_t x = 0, y = 0;
    memcpy(&x, a + i, n - i);
    memcpy(&y, b + i, n - i);
    total += popcount64_swar(x ^ y);
  }
  return total;
}

static unsigned long long hamming_scalar(const void *a, const void *b, size_t n) {
  return hamming_from(a, b, 0, n);
}

#ifdef RRF_HAVE_AVX2
/* AVX2: the popcount of each byte from a 16-entry table of nibble counts (vpshufb),
** summed per 8 bytes with vpsadbw; then one 16-byte SSSE3 block; then scalar. */
__attribute__((target("avx2"))) static unsigned long long hamming_avx2(const void *pa,
                                                                       const void *pb, size_t n) {
  const unsigned char *a = pa, *b = pb;
  const __m256i lut = _mm256_setr_epi8(0, 1, 1, 2, 1, 2, 2, 3, 1, 2, 2, 3, 2, 3, 3, 4, 0, 1, 1, 2,
                                       1, 2, 2, 3, 1, 2, 2, 3, 2, 3, 3, 4);
  const __m256i low = _mm256_set1_epi8(0x0f), zero = _mm256_setzero_si256();
  __m256i acc = zero;
  size_t i = 0;
  for (; i + 32 <= n; i += 32) {
    __m256i x = _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)(const void *)(a + i)),
                                 _mm256_loadu_si256((const __m256i *)(const void *)(b + i)));
    __m256i c =
        _mm256_add_epi8(_mm256_shuffle_epi8(lut, _mm256_and_si256(x, low)),
                        _mm256_shuffle_epi8(lut, _mm256_and_si256(_mm256_srli_epi16(x, 4), low)));
    acc = _mm256_add_epi64(acc, _mm256_sad_epu8(c, zero));
  }
  __m128i acc2 = _mm_add_epi64(_mm256_castsi256_si128(acc), _mm256_extracti128_si256(acc, 1));
  if (i + 16 <= n) {
    const __m128i lut2 = _mm256_castsi256_si128(lut), low2 = _mm256_castsi256_si128(low);
    __m128i x = _mm_xor_si128(_mm_loadu_si128((const __m128i *)(const void *)(a + i)),
                              _mm_loadu_si128((const __m128i *)(const void *)(b + i)));
    __m128i c = _mm_add_epi8(_mm_shuffle_epi8(lut2, _mm_and_si128(x, low2)),
                             _mm_shuffle_epi8(lut2, _mm_and_si128(_mm_srli_epi16(x, 4), low2)));
    acc2 = _mm_add_epi64(acc2, _mm_sad_epu8(c, _mm_setzero_si128()));
    i += 16;
  }
  unsigned long long total = (unsigned long long)_mm_cvtsi128_si64(acc2) +
                             (unsigned long long)_mm_cvtsi128_si64(_mm_unpackhi_epi64(acc2, acc2));
  return total + hamming_from(a, b, i, n);
}
#endif

#ifdef RRF_HAVE_NEON
/* NEON: vcnt per byte over 16-byte blocks, summed across the vector; then scalar. */
static unsigned long long hamming_neon(const void *pa, const void *pb, size_t n) {
  const unsigned char *a = pa, *b = pb;
  unsigned long long total = 0;
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    uint8x16_t x = veorq_u8(vld1q_u8(a + i), vld1q_u8(b + i));
    total += vaddlvq_u8(vcntq_u8(x));
  }
  return total + hamming_from(a, b, i, n);
}
#endif

static rrf_hamming_fn hamming_of(int path) {
  switch (path) {
#ifdef RRF_HAVE_AVX2
  case RRF_SIMD_AVX2:
    return hamming_avx2;
#endif
#ifdef RRF_HAVE_NEON
  case RRF_SIMD_NEON:
    return hamming_neon;
#endif
  default:
    return hamming_scalar;
  }
}

/* ---- run-time selection (K3, K6) ---- */

static int g_path = -2; /* -2: not chosen yet; races are benign (same value) */
static rrf_dot3_fn g_kernel = NULL; /* the kernel of g_path, once chosen */
static rrf_hamming_fn g_hamming = NULL; /* the Hamming kernel of g_path (K6) */

static rrf_dot3_fn kernel_of(int path) {
  switch (path) {
#ifdef RRF_HAVE_AVX2
  case RRF_SIMD_AVX2:
    return dot3_avx2;
#endif
#ifdef RRF_HAVE_NEON
  case RRF_SIMD_NEON:
    return dot3_neon;
#endif
  default:
    return dot3_scalar;
  }
}

int rrf_simd_supported(int path) {
  switch (path) {
  case RRF_SIMD_SCALAR:
    return 1;
#ifdef RRF_HAVE_AVX2
  case RRF_SIMD_AVX2:
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#endif
#ifdef RRF_HAVE_NEON
  case RRF_SIMD_NEON:
    return 1; /* NEON is part of the AArch64 base ISA */
#endif
  default:
    return 0;
  }
}

int rrf_simd_best(void) {
  if (rrf_simd_supported(RRF_SIMD_AVX2)) return RRF_SIMD_AVX2;
  if (rrf_simd_supported(RRF_SIMD_NEON)) return RRF_SIMD_NEON;
  return RRF_SIMD_SCALAR;
}

int rrf_simd_select(int path) {
  if (path == RRF_SIMD_AUTO) path = rrf_simd_best();
  if (!rrf_simd_supported(path)) return -1;
  g_kernel = kernel_of(path);
  g_hamming = hamming_of(path);
  g_path = path;
  return path;
}

int rrf_simd_current(void) {
  if (g_path == -2) rrf_simd_select(RRF_SIMD_AUTO);
  return g_path;
}

const char *rrf_simd_built(void) {
#if defined(RRF_HAVE_AVX2)
  return "scalar avx2-fma";
#elif defined(RRF_HAVE_NEON)
  return "scalar neon";
#else
  return "scalar";
#endif
}

const char *rrf_simd_name(int path) {
  switch (path) {
  case RRF_SIMD_SCALAR:
    return "scalar";
  case RRF_SIMD_AVX2:
    return "avx2-fma";
  case RRF_SIMD_NEON:
    return "neon";
  default:
    return "unknown";
  }
}

rrf_dot3_fn rrf_dot3_kernel(int path) {
  if (path == RRF_SIMD_AUTO) {
    if (g_kernel == NULL) rrf_simd_select(RRF_SIMD_AUTO);
    return g_kernel; /* chosen once: no CPU check per call */
  }
  return rrf_simd_supported(path) ? kernel_of(path) : NULL;
}

double rrf_cosine_from_sums(const double s[3]) {
  if (!isfinite(s[0]) || !isfinite(s[1]) || !isfinite(s[2])) return NAN;
  if (s[1] == 0.0 || s[2] == 0.0) return NAN;
  double c = s[0] / sqrt(s[1] * s[2]); /* no overflow: each sum < n * 1.2e77 (K2) */
  if (c > 1.0) c = 1.0;
  if (c < -1.0) c = -1.0;
  return c;
}

double rrf_cosine(const float *a, const float *b, size_t n, int path) {
  rrf_dot3_fn f = rrf_dot3_kernel(path);
  double s[3];
  if (f == NULL) return NAN;
  f(a, b, n, s);
  return rrf_cosine_from_sums(s);
}

void rrf_cosine_many(const float *q, const float *m, size_t rows, size_t dim, double *out,
                     int path) {
  rrf_dot3_fn f = rrf_dot3_kernel(path);
  for (size_t r = 0; r < rows; r++) {
    double s[3];
    if (f == NULL) {
      out[r] = NAN;
      continue;
    }
    f(q, m + r * dim, dim, s);
    out[r] = rrf_cosine_from_sums(s);
  }
}

rrf_hamming_fn rrf_hamming_kernel(int path) {
  if (path == RRF_SIMD_AUTO) {
    if (g_hamming == NULL) rrf_simd_select(RRF_SIMD_AUTO);
    return g_hamming;
  }
  return rrf_simd_supported(path) ? hamming_of(path) : NULL;
}

unsigned long long rrf_hamming_bytes(const void *a, const void *b, size_t n, int path) {
  rrf_hamming_fn f = rrf_hamming_kernel(path);
  return f == NULL ? ~0ULL : f(a, b, n);
}
