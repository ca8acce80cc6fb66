/*
** fuzz_vec: the vector parser and kernels behind vec_cosine (csrc/vec.c,
** csrc/kernels.c; requirements V1..V7, K1..K3).
**
** The first input byte picks a mode; the rest is split into two arguments:
**   0  two raw BLOBs: the SQL result (or the exact error message) is predicted
**      from the bytes, and every SIMD kernel is compared with the scalar one;
**   1  two raw TEXTs (any bytes: invalid UTF-8, NULs): a value in [-1, 1], NULL
**      or an error naming vec_cosine;
**   2  one raw TEXT and one BLOB, either order: as 1;
**   3  JSON arrays printed from the float32 values (several number styles):
**      vec_cosine over the JSON must equal vec_cosine over the BLOBs, bit for bit
**      (9 significant digits round-trip a float32);
**   4  number tokens over the alphabet of JSON numbers: json_number must accept
**      exactly the JSON grammar and agree with strtod within one float32 ulp;
**      the tokens are also run through SQL as an array;
**   5  kernels only: SIMD vs scalar at every byte alignment, rrf_cosine_many vs
**      rrf_cosine.
** Each SQL call runs twice: with bound (constant) arguments over three rows, so
** the JSON auxdata cache of V6 is used, and over a materialized CTE (not constant).
*/
#include "fuzz_common.h"

/* Unity build: the parser's static functions are tested directly. The target is
** linked with the other csrc files (mk/fuzz.mk leaves this one out). */
#include "vec.c"

#include <float.h>

static sqlite3 *g_db;
static sqlite3_stmt *g_const, *g_cte;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  g_db = fz_open();
  g_const = fz_prepare(g_db, "SELECT vec_cosine(?1, ?2) FROM (VALUES (1), (2), (3))");
  g_cte = fz_prepare(g_db, "WITH t(a, b) AS MATERIALIZED (SELECT ?1, ?2) "
                           "SELECT vec_cosine(a, b) FROM t");
  return 0;
}

/* An argument as the harness binds it. */
typedef struct Arg {
  int type; /* SQLITE_BLOB or SQLITE_TEXT */
  const void *p;
  size_t n;
} Arg;

/* The outcome of one SQL call. */
typedef struct Outcome {
  int rc;         /* SQLITE_ROW (value), SQLITE_ERROR */
  int is_null;
  double v;
  char msg[512];
} Outcome;

static void bind_arg(sqlite3_stmt *st, int i, const Arg *a) {
  int rc;
  if (a->type == SQLITE_BLOB)
    rc = sqlite3_bind_blob(st, i, a->n ? a->p : "", (int)a->n, SQLITE_TRANSIENT);
  else
    rc = sqlite3_bind_text(st, i, a->n ? a->p : "", (int)a->n, SQLITE_TRANSIENT);
  FZ_CHECK(rc == SQLITE_OK, "bind: %d", rc);
}

/* Run one statement; all rows must agree. */
static Outcome run_stmt(sqlite3_stmt *st, const Arg *a, const Arg *b) {
  Outcome o;
  int rows = 0;
  memset(&o, 0, sizeof o);
  bind_arg(st, 1, a);
  bind_arg(st, 2, b);
  for (;;) {
    int rc = sqlite3_step(st);
    if (rc == SQLITE_DONE) break;
    if (rc != SQLITE_ROW) {
      fz_expect_named_error(g_db, rc, "vec_cosine", NULL);
      FZ_CHECK(rows == 0, "error after %d rows: %s", rows, sqlite3_errmsg(g_db));
      o.rc = SQLITE_ERROR;
      snprintf(o.msg, sizeof o.msg, "%s", sqlite3_errmsg(g_db));
      break;
    }
    int t = sqlite3_column_type(st, 0);
    FZ_CHECK(t == SQLITE_NULL || t == SQLITE_FLOAT, "vec_cosine returned type %d", t);
    double v = sqlite3_column_double(st, 0);
    if (t == SQLITE_FLOAT) {
      FZ_CHECK(v >= -1.0 && v <= 1.0, "V5: vec_cosine = %.17g outside [-1, 1]", v);
    }
    if (rows == 0) {
      o.rc = SQLITE_ROW;
      o.is_null = t == SQLITE_NULL;
      o.v = v;
    } else {
      FZ_CHECK(o.is_null == (t == SQLITE_NULL) && (o.is_null || memcmp(&o.v, &v, sizeof v) == 0),
               "V6: row %d differs from row 0 (%.17g vs %.17g)", rows, v, o.v);
    }
    rows++;
  }
  sqlite3_reset(st);
  sqlite3_clear_bindings(st);
  return o;
}

static int same_outcome(const Outcome *x, const Outcome *y) {
  if (x->rc != y->rc) return 0;
  if (x->rc == SQLITE_ERROR) return strcmp(x->msg, y->msg) == 0;
  if (x->is_null != y->is_null) return 0;
  return x->is_null || memcmp(&x->v, &y->v, sizeof x->v) == 0;
}

/* Both statements; they must agree. */
static Outcome run_sql(const Arg *a, const Arg *b) {
  Outcome x = run_stmt(g_const, a, b);
  Outcome y = run_stmt(g_cte, a, b);
  FZ_CHECK(same_outcome(&x, &y), "constant vs column arguments differ: rc %d/%d, '%s' / '%s'",
           x.rc, y.rc, x.msg, y.msg);
  return x;
}

/* ---- kernels (K1..K3) ---- */

static int all_finite(const uint8_t *p, size_t n) {
  for (size_t i = 0; i < n; i++) {
    float f;
    memcpy(&f, p + 4 * i, 4);
    if (!isfinite(f)) return 0;
  }
  return 1;
}

/* Two results of different summation orders. The sums are of exact products
** (float32 x float32 fits a double), so any order is within n * eps of the exact
** cosine: agreement to 1e-9 relative, or that bound where the cosine cancels. */
static void check_close(double ref, double c, size_t n, const char *what) {
  FZ_CHECK(isnan(ref) == isnan(c), "%s: NaN mismatch (scalar %.17g, simd %.17g)", what, ref, c);
  if (isnan(ref)) return;
  double tol = 1e-9 * fmax(fabs(ref), fabs(c)) + 4.0 * (double)(n + 1) * DBL_EPSILON;
  FZ_CHECK(fabs(ref - c) <= tol, "%s: scalar %.17g vs simd %.17g (n=%zu)", what, ref, c, n);
  FZ_CHECK(c >= -1.0 && c <= 1.0, "%s: %.17g outside [-1, 1]", what, c);
}

static void check_kernels(const uint8_t *a, const uint8_t *b, size_t n, unsigned shift) {
  static const int paths[] = {RRF_SIMD_AVX2, RRF_SIMD_NEON};
  unsigned sa = shift & 3, sb = (shift >> 2) & 3;
  uint8_t *ba = malloc(4 * n + 8), *bb = malloc(4 * n + 8);
  FZ_CHECK(ba && bb, "malloc");
  if (n) {
    memcpy(ba + sa, a, 4 * n);
    memcpy(bb + sb, b, 4 * n);
  }
  const float *pa = (const float *)(const void *)(ba + sa);
  const float *pb = (const float *)(const void *)(bb + sb);
  int finite = all_finite(ba + sa, n) && all_finite(bb + sb, n);
  double ref = rrf_cosine(pa, pb, n, RRF_SIMD_SCALAR);
  if (!finite) FZ_CHECK(isnan(ref), "non-finite input gave %.17g", ref);
  if (n == 0) FZ_CHECK(isnan(ref), "empty vectors gave %.17g", ref);
  for (size_t k = 0; k < sizeof paths / sizeof paths[0]; k++) {
    if (!rrf_simd_supported(paths[k])) {
      FZ_CHECK(rrf_dot3_kernel(paths[k]) == NULL, "unsupported path has a kernel");
      continue;
    }
    double c = rrf_cosine(pa, pb, n, paths[k]);
    check_close(ref, c, n, rrf_simd_name(paths[k]));
  }
  double c = rrf_cosine(pa, pb, n, RRF_SIMD_AUTO);
  check_close(ref, c, n, "auto");
  /* rrf_cosine_many: b as rows of the first `dim` values of a, same path: identical. */
  size_t dim = n ? 1 + (shift >> 4) % n : 0;
  if (dim) {
    size_t rows = n / dim;
    double *out = malloc((rows + 1) * sizeof(double));
    FZ_CHECK(out, "malloc");
    for (int path = RRF_SIMD_SCALAR; path <= RRF_SIMD_NEON; path++) {
      if (!rrf_simd_supported(path)) continue;
      rrf_cosine_many(pa, pb, rows, dim, out, path);
      for (size_t r = 0; r < rows; r++) {
        double one = rrf_cosine(pa, pb + r * dim, dim, path);
        FZ_CHECK(memcmp(&one, &out[r], sizeof one) == 0 || (isnan(one) && isnan(out[r])),
                 "rrf_cosine_many row %zu: %.17g vs %.17g", r, out[r], one);
      }
    }
    free(out);
  }
  free(ba);
  free(bb);
}

/* ---- mode 0: raw BLOBs, with the result predicted ---- */

static void expect_msg(const Outcome *o, const char *want) {
  FZ_CHECK(o->rc == SQLITE_ERROR && strcmp(o->msg, want) == 0,
           "expected error '%s', got rc %d '%s' (%.17g)", want, o->rc, o->msg, o->v);
}

static int blob_error(const Arg *x, int argi, char *want, size_t cap) {
  if (x->n == 0) {
    snprintf(want, cap, "vec_cosine: argument %d is an empty vector", argi);
    return 1;
  }
  if (x->n % 4) {
    snprintf(want, cap, "vec_cosine: argument %d is a blob of %zu bytes, not a multiple of 4 "
             "(float32)", argi, x->n);
    return 1;
  }
  return 0;
}

static void mode_blobs(const Arg *a, const Arg *b, unsigned shift) {
  char want[256];
  Outcome o = run_sql(a, b);
  if (blob_error(a, 1, want, sizeof want) || blob_error(b, 2, want, sizeof want)) {
    expect_msg(&o, want);
    return;
  }
  size_t na = a->n / 4, nb = b->n / 4;
  if (na != nb) {
    snprintf(want, sizeof want, "vec_cosine: dimension mismatch: %zu vs %zu", na, nb);
    expect_msg(&o, want);
    check_kernels(a->p, b->p, na < nb ? na : nb, shift);
    return;
  }
  check_kernels(a->p, b->p, na, shift);
  const Arg *args[2] = {a, b};
  for (int k = 0; k < 2; k++) {
    for (size_t i = 0; i < na; i++) {
      float f;
      memcpy(&f, (const uint8_t *)args[k]->p + 4 * i, 4);
      if (!isfinite(f)) {
        snprintf(want, sizeof want, "vec_cosine: argument %d has %s at index %zu", k + 1,
                 isnan(f) ? "NaN" : "Inf", i);
        expect_msg(&o, want);
        return;
      }
    }
  }
  double s[3];
  rrf_dot3_kernel(RRF_SIMD_AUTO)(a->p, b->p, na, s);
  FZ_CHECK(o.rc == SQLITE_ROW, "finite vectors gave an error: %s", o.msg);
  if (s[1] == 0.0 || s[2] == 0.0) {
    FZ_CHECK(o.is_null, "V3: zero-norm vector gave %.17g, not NULL", o.v);
  } else {
    double c = rrf_cosine(a->p, b->p, na, RRF_SIMD_AUTO);
    FZ_CHECK(!o.is_null && o.v == c, "vec_cosine %.17g (null %d) vs kernel %.17g", o.v,
             o.is_null, c);
  }
}

/* ---- mode 3: JSON printed from float32 values ---- */

static void json_from_floats(Buf *j, const uint8_t *p, size_t n, unsigned style, float *vals) {
  static const char *const ws[] = {"", " ", "\n", "\t ", "\r\n  "};
  buf_add(j, ws[style % 5], strlen(ws[style % 5]));
  buf_add(j, "[", 1);
  for (size_t i = 0; i < n; i++) {
    float f;
    memcpy(&f, p + 4 * i, 4);
    if (!isfinite(f)) f = (float)(i % 7) - 3.0f; /* JSON has no NaN/Inf */
    vals[i] = f;
    if (i) buf_add(j, ws[(style >> 3) % 5], strlen(ws[(style >> 3) % 5]));
    if (i) buf_add(j, ",", 1);
    if (i) buf_add(j, ws[(style >> 6) % 5], strlen(ws[(style >> 6) % 5]));
    switch ((style + i) % 4) {
    case 0: buf_printf(j, "%.9g", (double)f); break;
    case 1: buf_printf(j, "%.8e", (double)f); break;
    case 2: buf_printf(j, "%.8E", (double)f); break;
    default:
      if (f == floorf(f) && fabsf(f) < 16777216.0f) buf_printf(j, "%.0f", (double)f);
      else buf_printf(j, "%.17g", (double)f);
    }
  }
  buf_add(j, "]", 1);
  buf_add(j, ws[(style >> 1) % 5], strlen(ws[(style >> 1) % 5]));
}

static void mode_json_floats(const Arg *a, const Arg *b, unsigned style) {
  size_t na = a->n / 4, nb = b->n / 4;
  float *va = malloc(4 * na + 4), *vb = malloc(4 * nb + 4);
  Buf ja = {0}, jb = {0};
  FZ_CHECK(va && vb, "malloc");
  json_from_floats(&ja, a->p, na, style, va);
  json_from_floats(&jb, b->p, nb, style >> 2, vb);
  Arg ta = {SQLITE_TEXT, ja.s, ja.n}, tb = {SQLITE_TEXT, jb.s, jb.n};
  Arg ba = {SQLITE_BLOB, va, 4 * na}, bb = {SQLITE_BLOB, vb, 4 * nb};
  Outcome oj = run_sql(&ta, &tb);
  Outcome ob = run_sql(&ba, &bb);
  if (na == 0 || nb == 0) {
    FZ_CHECK(oj.rc == SQLITE_ERROR && strstr(oj.msg, "is an empty vector"),
             "'[]' gave rc %d '%s'", oj.rc, oj.msg);
  } else {
    FZ_CHECK(same_outcome(&oj, &ob), "JSON vs BLOB: rc %d/%d, %.17g vs %.17g, '%s' / '%s'\n%s\n%s",
             oj.rc, ob.rc, oj.v, ob.v, oj.msg, ob.msg, ja.s, jb.s);
  }
  /* Mixed: JSON against the BLOB of the same values. */
  Outcome om = run_sql(&ta, &bb);
  if (na && nb) {
    FZ_CHECK(same_outcome(&om, &ob), "JSON vs BLOB (mixed): '%s' / '%s'", om.msg, ob.msg);
  }
  buf_free(&ja);
  buf_free(&jb);
  free(va);
  free(vb);
}

/* ---- mode 4: number tokens against strtod ---- */

/* -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)? over the whole token. */
static int is_json_number(const char *s, size_t n) {
  size_t i = 0;
  if (i < n && s[i] == '-') i++;
  if (i >= n) return 0;
  if (s[i] == '0') i++;
  else if (s[i] >= '1' && s[i] <= '9') {
    while (i < n && s[i] >= '0' && s[i] <= '9') i++;
  } else return 0;
  if (i < n && s[i] == '.') {
    size_t d = ++i;
    while (i < n && s[i] >= '0' && s[i] <= '9') i++;
    if (i == d) return 0;
  }
  if (i < n && (s[i] == 'e' || s[i] == 'E')) {
    i++;
    if (i < n && (s[i] == '+' || s[i] == '-')) i++;
    size_t d = i;
    while (i < n && s[i] >= '0' && s[i] <= '9') i++;
    if (i == d) return 0;
  }
  return i == n;
}

static void check_token(const char *t, size_t n) {
  size_t pos = 0;
  double d = 0;
  int bad = json_number((const unsigned char *)t, n, &pos, &d);
  int valid = is_json_number(t, n);
  FZ_CHECK(valid == (!bad && pos == n), "json_number on '%.*s': rc %d pos %zu, grammar says %d",
           (int)n, t, bad, pos, valid);
  if (!valid) return;
  char *z = malloc(n + 1);
  FZ_CHECK(z, "malloc");
  memcpy(z, t, n);
  z[n] = 0;
  double r = strtod(z, NULL);
  free(z);
  float fd = (float)d, fr = (float)r;
  int ok = fd == fr || (isnan(fd) && isnan(fr)) || fd == nextafterf(fr, INFINITY) ||
           fd == nextafterf(fr, -INFINITY);
  FZ_CHECK(ok, "json_number('%.*s') = %.17g (float %.9g), strtod = %.17g (float %.9g)", (int)n,
           t, d, (double)fd, r, (double)fr);
  FZ_CHECK(signbit(d) == signbit(r) || (d == 0 && r == 0 && fd == fr),
           "json_number('%.*s') sign %.17g vs %.17g", (int)n, t, d, r);
}

static void mode_tokens(const uint8_t *p, size_t n) {
  static const char alpha[] = "0123456789.eE+-00011223";
  Buf arr = {0};
  char *tok = malloc(n + 1);
  size_t tn = 0;
  int count = 0;
  FZ_CHECK(tok, "malloc");
  buf_add(&arr, "[", 1);
  for (size_t i = 0; i <= n; i++) {
    if (i == n || p[i] >= 240) { /* token boundary */
      if (tn) {
        check_token(tok, tn);
        if (count++) buf_add(&arr, ",", 1);
        buf_add(&arr, tok, tn);
      }
      tn = 0;
      continue;
    }
    tok[tn++] = alpha[p[i] % (sizeof alpha - 1)];
  }
  buf_add(&arr, "]", 1);
  free(tok);
  /* The whole array through the parser and SQL: against itself. */
  char *err = NULL;
  int nomem = 0;
  RrfJsonVec *jv = json_vec_parse("vec_cosine", (const unsigned char *)arr.s, arr.n, 1, &err, &nomem);
  FZ_CHECK(!nomem, "nomem");
  FZ_CHECK((jv == NULL) == (err != NULL), "json_vec_parse: result and error disagree");
  Arg ta = {SQLITE_TEXT, arr.s, arr.n};
  Outcome o = run_sql(&ta, &ta);
  if (jv) {
    FZ_CHECK(jv->n == (size_t)count, "parsed %zu of %d numbers", jv->n, count);
    for (size_t i = 0; i < jv->n; i++) FZ_CHECK(isfinite(jv->v[i]), "non-finite element kept");
    FZ_CHECK(o.rc == SQLITE_ROW, "parsed array gave an error in SQL: %s", o.msg);
    sqlite3_free(jv);
  } else {
    FZ_CHECK(o.rc == SQLITE_ERROR && strcmp(o.msg, err) == 0, "SQL '%s' vs parser '%s'", o.msg,
             err);
    FZ_CHECK(strncmp(err, "vec_cosine: argument 1 ", 23) == 0, "message: %s", err);
    sqlite3_free(err);
  }
  buf_free(&arr);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  Fz f = {data, size};
  if (size < 2) return 0;
  unsigned mode = fz_u8(&f) % 6;
  unsigned style = fz_u8(&f);
  size_t rest = f.n, na, nb;
  size_t split = (style & 1) ? rest / 2 : (size_t)fz_u8(&f) * (f.n + 1) / 256;
  if (split > f.n) split = f.n;
  const uint8_t *pa = fz_take(&f, split, &na);
  const uint8_t *pb = fz_take(&f, f.n, &nb);
  (void)rest;
  switch (mode) {
  case 0: {
    Arg a = {SQLITE_BLOB, pa, na}, b = {SQLITE_BLOB, pb, nb};
    mode_blobs(&a, &b, style);
    break;
  }
  case 1: {
    Arg a = {SQLITE_TEXT, pa, na}, b = {SQLITE_TEXT, pb, nb};
    run_sql(&a, &b);
    break;
  }
  case 2: {
    Arg a = {SQLITE_TEXT, pa, na}, b = {SQLITE_BLOB, pb, nb};
    if (style & 2) run_sql(&a, &b);
    else run_sql(&b, &a);
    break;
  }
  case 3: {
    Arg a = {SQLITE_BLOB, pa, na}, b = {SQLITE_BLOB, pb, nb};
    mode_json_floats(&a, &b, style);
    break;
  }
  case 4:
    mode_tokens(data + 2, size - 2);
    break;
  default: {
    size_t n = (na < nb ? na : nb) / 4;
    check_kernels(pa, pb, n, style);
    break;
  }
  }
  return 0;
}
