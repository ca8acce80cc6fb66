/*
** vec_cosine(a, b) -> REAL: cosine similarity of two vectors.
**
** Requirements (docs/contract.md, "The extension"; docs/sql/vec_cosine.md; tests
** cite them as V1..V7):
**   V1. Each argument is a float32 BLOB (little-endian, as sqlite-vec's vec_f32()
**       writes) or a JSON text array of numbers.
**   V2. NULL in either argument -> NULL.
**   V3. A zero-norm vector -> NULL (never NaN).
**   V4. Errors name the function and the fault: dimension mismatch (both sizes),
**       blob length not a multiple of 4, empty vector, NaN/Inf element (with its
**       index), malformed JSON (with the byte offset), other types.
**   V5. The result is in [-1, 1].
**   V6. No allocation for BLOB arguments (they are read in place at any
**       alignment); a JSON argument is parsed once per statement when it is
**       constant (cached with sqlite3_set_auxdata).
**   V7. The kernel is the one chosen at run time (kernels.h, K3).
*/
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kernels.h"
#include "rrf_internal.h"
SQLITE_EXTENSION_INIT3

static const double kPow10[] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,
                                1e8,  1e9,  1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
                                1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};

/* Parse one JSON number at s[*pos] (JSON grammar, locale-free). Returns 0 and
** sets *out, or 1 on a syntax error. */
static int json_number(const unsigned char *s, size_t len, size_t *pos, double *out) {
  size_t i = *pos;
  int neg = 0, digits = 0, exp_neg = 0;
  uint64_t mant = 0;
  long long dropped = 0; /* decimal exponent adjustment from digits beyond 19 */
  long long exp10 = 0;
  if (i < len && s[i] == '-') {
    neg = 1;
    i++;
  }
  if (i >= len) return 1;
  if (s[i] == '0') {
    i++;
    digits = 1;
  } else if (s[i] >= '1' && s[i] <= '9') {
    while (i < len && s[i] >= '0' && s[i] <= '9') {
      if (mant < 1000000000000000000ULL) mant = mant * 10 + (uint64_t)(s[i] - '0');
      else dropped++;
      i++;
      digits++;
    }
  } else {
    return 1;
  }
  if (i < len && s[i] == '.') {
    int frac = 0;
    i++;
    while (i < len && s[i] >= '0' && s[i] <= '9') {
      if (mant < 1000000000000000000ULL) {
        mant = mant * 10 + (uint64_t)(s[i] - '0');
        dropped--;
      }
      i++;
      frac++;
    }
    if (frac == 0) return 1;
  }
  if (i < len && (s[i] == 'e' || s[i] == 'E')) {
    int ed = 0;
    i++;
    if (i < len && (s[i] == '+' || s[i] == '-')) exp_neg = (s[i++] == '-');
    while (i < len && s[i] >= '0' && s[i] <= '9') {
      /* Past 1e12 the value is 0 or Inf whatever the digits (len < 2^31), but
      ** below it the exponent must be exact: it offsets `dropped`. */
      if (exp10 < 1000000000000LL) exp10 = exp10 * 10 + (s[i] - '0');
      i++;
      ed++;
    }
    if (ed == 0) return 1;
  }
  (void)digits;
  long long e = (exp_neg ? -exp10 : exp10) + dropped;
  double v = (double)mant;
  if (mant != 0) {
    /* Scale in steps of at most 1e22 (exact powers); |e| is bounded so the
    ** loops end, and anything past float32's range becomes 0 or Inf. */
    if (e > 400) e = 400;
    if (e < -400) e = -400;
    while (e > 22) {
      v *= 1e22;
      e -= 22;
    }
    while (e < -22) {
      v /= 1e22;
      e += 22;
    }
    v = e >= 0 ? v * kPow10[e] : v / kPow10[-e];
  }
  *out = neg ? -v : v;
  *pos = i;
  return 0;
}

static size_t skip_ws(const unsigned char *s, size_t len, size_t i) {
  while (i < len && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r')) i++;
  return i;
}

/* Parse a JSON array of numbers into a new RrfJsonVec. Returns NULL and sets
** *err (the message, naming fn and argument argi, sqlite3_mprintf'd) on failure,
** *nomem on allocation failure. No context: tests/fuzz/fuzz_vec.c calls it. */
static RrfJsonVec *json_vec_parse(const char *fn, const unsigned char *s, size_t len, int argi,
                                  char **err, int *nomem) {
  size_t i = skip_ws(s, len, 0), cap = 0, n = 0, at;
  const char *expected;
  RrfJsonVec *jv = NULL;
  if (i >= len || s[i] != '[') {
    at = i;
    expected = "expected '['";
    goto malformed;
  }
  /* Upper bound of the element count: commas + 1. */
  for (size_t j = i; j < len; j++)
    if (s[j] == ',') cap++;
  cap++;
  jv = sqlite3_malloc64(sizeof(RrfJsonVec) + cap * sizeof(float));
  if (jv == NULL) {
    *nomem = 1;
    return NULL;
  }
  i = skip_ws(s, len, i + 1);
  if (i < len && s[i] == ']') {
    i = skip_ws(s, len, i + 1);
    if (i == len) {
      *err = sqlite3_mprintf("%s: argument %d is an empty vector", fn, argi);
      sqlite3_free(jv);
      return NULL;
    }
    at = i;
    expected = "unexpected text after ']'";
    goto malformed;
  }
  for (;;) {
    double d;
    at = i;
    if (json_number(s, len, &i, &d)) {
      expected = "expected a number";
      goto malformed;
    }
    float f = (float)d;
    if (!isfinite(f)) {
      *err = sqlite3_mprintf("%s: argument %d has an element out of float32 range at index %llu",
                             fn, argi, (unsigned long long)n);
      sqlite3_free(jv);
      return NULL;
    }
    jv->v[n++] = f;
    i = skip_ws(s, len, i);
    if (i < len && s[i] == ',') {
      i = skip_ws(s, len, i + 1);
      continue;
    }
    at = i;
    if (i < len && s[i] == ']') {
      i = skip_ws(s, len, i + 1);
      if (i == len) break;
      at = i;
      expected = "unexpected text after ']'";
    } else {
      expected = "expected ',' or ']'";
    }
    goto malformed;
  }
  jv->n = n;
  return jv;
malformed:
  *err = sqlite3_mprintf("%s: argument %d is malformed JSON at offset %llu: %s", fn, argi,
                         (unsigned long long)at, expected);
  sqlite3_free(jv);
  return NULL;
}

/* Fill *out from argv[i] (V1, V4). Returns 0, or 1 with the error reported. */
int rrf_vec_arg(sqlite3_context *ctx, const char *fn, sqlite3_value *v, int i, RrfVecArg *out) {
  int argi = i + 1;
  RrfJsonVec *cached = sqlite3_get_auxdata(ctx, i);
  out->parsed = NULL;
  if (cached) {
    out->data = cached->v;
    out->n = cached->n;
    return 0;
  }
  switch (sqlite3_value_type(v)) {
  case SQLITE_BLOB: {
    const void *p = sqlite3_value_blob(v);
    int bytes = sqlite3_value_bytes(v);
    if (bytes == 0) {
      rrf_error(ctx, "%s: argument %d is an empty vector", fn, argi);
      return 1;
    }
    if (p == NULL) {
      sqlite3_result_error_nomem(ctx);
      return 1;
    }
    if (bytes % 4 != 0) {
      rrf_error(ctx, "%s: argument %d is a blob of %d bytes, not a multiple of 4 (float32)", fn,
                argi, bytes);
      return 1;
    }
    out->data = p;
    out->n = (size_t)bytes / 4;
    return 0;
  }
  case SQLITE_TEXT: {
    const unsigned char *s = sqlite3_value_text(v);
    int bytes = sqlite3_value_bytes(v);
    char *err = NULL;
    int nomem = 0;
    if (s == NULL) {
      sqlite3_result_error_nomem(ctx);
      return 1;
    }
    RrfJsonVec *jv = json_vec_parse(fn, s, (size_t)bytes, argi, &err, &nomem);
    if (jv == NULL) {
      if (nomem || err == NULL) sqlite3_result_error_nomem(ctx);
      else rrf_error(ctx, "%s", err);
      sqlite3_free(err);
      return 1;
    }
    out->data = jv->v;
    out->n = jv->n;
    out->parsed = jv;
    return 0;
  }
  default: {
    rrf_error(ctx, "%s: argument %d must be a float32 BLOB or a JSON array, got %s", fn, argi,
              rrf_type_name(v));
    return 1;
  }
  }
}

/* Report the first NaN/Inf element of a, then b (V4). */
static void report_nonfinite(sqlite3_context *ctx, const RrfVecArg *a, const RrfVecArg *b) {
  const RrfVecArg *args[2] = {a, b};
  for (int k = 0; k < 2; k++) {
    const unsigned char *p = args[k]->data;
    for (size_t i = 0; i < args[k]->n; i++) {
      float f;
      memcpy(&f, p + 4 * i, sizeof f);
      if (!isfinite(f)) {
        rrf_error(ctx, "vec_cosine: argument %d has %s at index %llu", k + 1,
                  isnan(f) ? "NaN" : "Inf", (unsigned long long)i);
        return;
      }
    }
  }
  rrf_error(ctx, "vec_cosine: non-finite sum");
}

void rrf_vec_cosine(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
  RrfVecArg a = {0}, b = {0};
  (void)argc;
  /* V2 */
  if (sqlite3_value_type(argv[0]) == SQLITE_NULL || sqlite3_value_type(argv[1]) == SQLITE_NULL) {
    sqlite3_result_null(ctx);
    return;
  }
  if (rrf_vec_arg(ctx, "vec_cosine", argv[0], 0, &a)) goto finish;
  if (rrf_vec_arg(ctx, "vec_cosine", argv[1], 1, &b)) goto finish;
  if (a.n != b.n) {
    rrf_error(ctx, "vec_cosine: dimension mismatch: %llu vs %llu", (unsigned long long)a.n,
              (unsigned long long)b.n);
    goto finish;
  }
  {
    double s[3];
    rrf_dot3_kernel(RRF_SIMD_AUTO)(a.data, b.data, a.n, s); /* V7 */
    if (!isfinite(s[0]) || !isfinite(s[1]) || !isfinite(s[2])) {
      report_nonfinite(ctx, &a, &b); /* V4: any NaN/Inf element makes a sum non-finite */
    } else if (s[1] == 0.0 || s[2] == 0.0) {
      sqlite3_result_null(ctx); /* V3 */
    } else {
      sqlite3_result_double(ctx, rrf_cosine_from_sums(s)); /* V5: clamped */
    }
  }
finish:
  /* V6: hand parsed JSON to SQLite; it keeps it while the argument is constant. */
  if (a.parsed) sqlite3_set_auxdata(ctx, 0, a.parsed, sqlite3_free);
  if (b.parsed) sqlite3_set_auxdata(ctx, 1, b.parsed, sqlite3_free);
}
