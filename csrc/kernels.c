/*
** sqlite-rrf vector kernels (see kernels.h for the requirements K1-K3).
*/
#include "kernels.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "sqlite-rrf reads float32 blobs as little-endian; big-endian hosts are not supported"
#endif

#if (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__))
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

/* ---- scalar twin: four partial sums per quantity, always compiled (K3) ---- */

static void dot3_scalar(const void *pa, const void *pb, size_t n, double out[3]) {
  const unsigned char *a = pa, *b = pb;
  double d[4] = {0, 0, 0, 0}, na[4] = {0, 0, 0, 0}, nb[4] = {0, 0, 0, 0};
  size_t i = 0;
  for (; i + 4 <= n; i += 4) {
    for (int j = 0; j < 4; j++) {
      double x = load_f32(a + 4 * (i + j)), y = load_f32(b + 4 * (i + j));
      d[j] += x * y;
      na[j] += x * x;
      nb[j] += y * y;
    }
  }
  for (; i < n; i++) {
    double x = load_f32(a + 4 * i), y = load_f32(b + 4 * i);
    d[0] += x * y;
    na[0] += x * x;
    nb[0] += y * y;
  }
  out[0] = (d[0] + d[1]) + (d[2] + d[3]);
  out[1] = (na[0] + na[1]) + (na[2] + na[3]);
  out[2] = (nb[0] + nb[1]) + (nb[2] + nb[3]);
}

/* ---- AVX2 + FMA: 8 floats a step, widened to two 4-double lanes ---- */

#ifdef RRF_HAVE_AVX2
__attribute__((target("avx2,fma"))) static inline double hsum256(__m256d v) {
  __m128d lo = _mm256_castpd256_pd128(v), hi = _mm256_extractf128_pd(v, 1);
  lo = _mm_add_pd(lo, hi);
  return _mm_cvtsd_f64(lo) + _mm_cvtsd_f64(_mm_unpackhi_pd(lo, lo));
}

/* One 8-float step: widen both halves to double and accumulate (K2). */
#define RRF_AVX2_STEP(OFF, D0, D1, A0, A1, B0, B1)                                   \
  do {                                                                              \
    __m256 va = _mm256_loadu_ps((const float *)(const void *)(a + 4 * (i + OFF)));  \
    __m256 vb = _mm256_loadu_ps((const float *)(const void *)(b + 4 * (i + OFF)));  \
    __m256d xl = _mm256_cvtps_pd(_mm256_castps256_ps128(va));                       \
    __m256d xh = _mm256_cvtps_pd(_mm256_extractf128_ps(va, 1));                     \
    __m256d yl = _mm256_cvtps_pd(_mm256_castps256_ps128(vb));                       \
    __m256d yh = _mm256_cvtps_pd(_mm256_extractf128_ps(vb, 1));                     \
    D0 = _mm256_fmadd_pd(xl, yl, D0);                                               \
    D1 = _mm256_fmadd_pd(xh, yh, D1);                                               \
    A0 = _mm256_fmadd_pd(xl, xl, A0);                                               \
    A1 = _mm256_fmadd_pd(xh, xh, A1);                                               \
    B0 = _mm256_fmadd_pd(yl, yl, B0);                                               \
    B1 = _mm256_fmadd_pd(yh, yh, B1);                                               \
  } while (0)

/* 16 floats a pass into two independent sets of accumulators, so consecutive
** FMAs do not wait on each other. */
__attribute__((target("avx2,fma"))) static void dot3_avx2(const void *pa, const void *pb,
                                                          size_t n, double out[3]) {
  const unsigned char *a = pa, *b = pb;
  __m256d d0 = _mm256_setzero_pd(), d1 = d0, d2 = d0, d3 = d0;
  __m256d a0 = d0, a1 = d0, a2 = d0, a3 = d0;
  __m256d b0 = d0, b1 = d0, b2 = d0, b3 = d0;
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    RRF_AVX2_STEP(0, d0, d1, a0, a1, b0, b1);
    RRF_AVX2_STEP(8, d2, d3, a2, a3, b2, b3);
  }
  for (; i + 8 <= n; i += 8) RRF_AVX2_STEP(0, d0, d1, a0, a1, b0, b1);
  double d = hsum256(_mm256_add_pd(_mm256_add_pd(d0, d1), _mm256_add_pd(d2, d3)));
  double na = hsum256(_mm256_add_pd(_mm256_add_pd(a0, a1), _mm256_add_pd(a2, a3)));
  double nb = hsum256(_mm256_add_pd(_mm256_add_pd(b0, b1), _mm256_add_pd(b2, b3)));
  for (; i < n; i++) {
    double x = load_f32(a + 4 * i), y = load_f32(b + 4 * i);
    d += x * y;
    na += x * x;
    nb += y * y;
  }
  out[0] = d;
  out[1] = na;
  out[2] = nb;
}
#endif

/* ---- NEON (AArch64): 4 floats a step, widened to two 2-double lanes ---- */

#ifdef RRF_HAVE_NEON
static void dot3_neon(const void *pa, const void *pb, size_t n, double out[3]) {
  const unsigned char *a = pa, *b = pb;
  float64x2_t d0 = vdupq_n_f64(0), d1 = vdupq_n_f64(0);
  float64x2_t a0 = vdupq_n_f64(0), a1 = vdupq_n_f64(0);
  float64x2_t b0 = vdupq_n_f64(0), b1 = vdupq_n_f64(0);
  size_t i = 0;
  for (; i + 4 <= n; i += 4) {
    float32x4_t va = vreinterpretq_f32_u8(vld1q_u8(a + 4 * i));
    float32x4_t vb = vreinterpretq_f32_u8(vld1q_u8(b + 4 * i));
    float64x2_t xl = vcvt_f64_f32(vget_low_f32(va)), xh = vcvt_high_f64_f32(va);
    float64x2_t yl = vcvt_f64_f32(vget_low_f32(vb)), yh = vcvt_high_f64_f32(vb);
    d0 = vfmaq_f64(d0, xl, yl);
    d1 = vfmaq_f64(d1, xh, yh);
    a0 = vfmaq_f64(a0, xl, xl);
    a1 = vfmaq_f64(a1, xh, xh);
    b0 = vfmaq_f64(b0, yl, yl);
    b1 = vfmaq_f64(b1, yh, yh);
  }
  double d = vaddvq_f64(vaddq_f64(d0, d1));
  double na = vaddvq_f64(vaddq_f64(a0, a1));
  double nb = vaddvq_f64(vaddq_f64(b0, b1));
  for (; i < n; i++) {
    double x = load_f32(a + 4 * i), y = load_f32(b + 4 * i);
    d += x * y;
    na += x * x;
    nb += y * y;
  }
  out[0] = d;
  out[1] = na;
  out[2] = nb;
}
#endif

/* ---- run-time selection (K3) ---- */

static int g_path = -2; /* -2: not chosen yet; races are benign (same value) */
static rrf_dot3_fn g_kernel = NULL; /* the kernel of g_path, once chosen */

static rrf_dot3_fn kernel_of(int path) {
  switch (path) {
#ifdef RRF_HAVE_AVX2
  case RRF_SIMD_AVX2: return dot3_avx2;
#endif
#ifdef RRF_HAVE_NEON
  case RRF_SIMD_NEON: return dot3_neon;
#endif
  default: return dot3_scalar;
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
  case RRF_SIMD_SCALAR: return "scalar";
  case RRF_SIMD_AVX2: return "avx2-fma";
  case RRF_SIMD_NEON: return "neon";
  default: return "unknown";
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
