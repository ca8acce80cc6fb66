/*
** rrf_fuse(rank [, weight [, k]]) -> REAL           aggregate and window function
** rrf_explain(list, rank [, weight [, k]]) -> TEXT  aggregate and window function
** rrf_sum(k, rank1, weight1 [, rank2, weight2 ...]) -> REAL   scalar
**
** Requirements (docs/contract.md, "The extension"; docs/sql/rrf_fuse.md,
** rrf_explain.md, rrf_sum.md; tests cite them as F1..F9):
**   F1. rrf_fuse returns the sum of weight / (k + rank) over the rows of the group.
**   F2. Ranks are 1-based; a NULL rank contributes nothing (absent from that list).
**   F3. Defaults: weight 1.0, k 60. A NULL weight or k means the default.
**   F4. rank < 1, weight < 0 or k < 0 is an error; so is a rank, weight or k that
**       is not a finite number (TEXT, BLOB, +/-Inf), and a sum of contributions
**       that overflows a double (never Inf, NaN or NULL). Messages name the function.
**   F5. A group in which no row contributed returns NULL (like sum()).
**   F6. As a window function, xInverse removes a row's contribution; the sum is
**       exact (a fixed-point accumulator that holds any sum of doubles, rounded
**       once when read), so sliding frames do not drift.
**   F7. rrf_explain returns a JSON object with one key per list, in order of first
**       appearance: {"bm25": {"rank": 3, "weight": 1.0, "contribution": 0.0159}}.
**       A list named twice in a group reports its best (lowest) rank, that row's
**       weight, and the sum of its contributions, so the contributions always add
**       up to rrf_fuse over the same rows. The JSON is valid UTF-8: bytes of the
**       list name that are not are replaced by \ufffd. A JSON longer than the
**       connection's SQLITE_LIMIT_LENGTH is an error naming the function.
**   F8. rrf_explain's list must be TEXT (a NULL list with a NULL rank is skipped).
**   F9. rrf_sum is rrf_fuse over the (rank, weight) pairs of one row, with one k:
**       the same checks (F4), the same NULL rules (F2, F3, F5) and the same exact
**       sum, so it returns the same double as rrf_fuse over rows holding those
**       pairs. It takes an odd number of arguments, at least 3 and at most 127.
**       It lets a statement score each candidate in one expression instead of
**       a GROUP BY over one row per list.
*/
#include <math.h>
#include <string.h>

#include "rrf_internal.h"
SQLITE_EXTENSION_INIT3

#define RRF_DEFAULT_WEIGHT 1.0
#define RRF_DEFAULT_K 60.0

/* ---- argument checks shared by both functions ---- */

static void arg_error(sqlite3_context *ctx, const char *fn, const char *what, const char *fault,
                      sqlite3_value *v) {
  if (fault && sqlite3_value_type(v) == SQLITE_INTEGER) {
    rrf_error(ctx, "%s: %s %s, got %lld", fn, what, fault, sqlite3_value_int64(v));
  } else if (fault) {
    rrf_error(ctx, "%s: %s %s, got %!.15g", fn, what, fault, sqlite3_value_double(v));
  } else {
    rrf_error(ctx, "%s: %s must be a number, got %s", fn, what, rrf_type_name(v));
  }
}

/* Read a numeric argument. Returns 0 (value in *out, or dflt for NULL) or 1
** after reporting an error (F4). */
static int num_arg(sqlite3_context *ctx, const char *fn, const char *what, sqlite3_value *v,
                   double dflt, double *out) {
  switch (sqlite3_value_type(v)) {
  case SQLITE_NULL:
    *out = dflt;
    return 0;
  case SQLITE_INTEGER:
  case SQLITE_FLOAT:
    *out = sqlite3_value_double(v);
    if (!isfinite(*out)) {
      arg_error(ctx, fn, what, "must be finite", v);
      return 1;
    }
    return 0;
  default:
    arg_error(ctx, fn, what, NULL, v);
    return 1;
  }
}

/* Parse (rank [, weight [, k]]) starting at argv[0]. Returns 1 when the row
** contributes, 0 when the rank is NULL (F2), -1 after an error (F4). */
static int fuse_args(sqlite3_context *ctx, const char *fn, int argc, sqlite3_value **argv,
                     double *rank, double *weight, double *k) {
  if (sqlite3_value_type(argv[0]) == SQLITE_NULL) return 0;
  if (num_arg(ctx, fn, "rank", argv[0], 0, rank)) return -1;
  if (*rank < 1) {
    arg_error(ctx, fn, "rank", "must be >= 1 (ranks are 1-based)", argv[0]);
    return -1;
  }
  *weight = RRF_DEFAULT_WEIGHT;
  *k = RRF_DEFAULT_K;
  if (argc > 1) {
    if (num_arg(ctx, fn, "weight", argv[1], RRF_DEFAULT_WEIGHT, weight)) return -1;
    if (*weight < 0) {
      arg_error(ctx, fn, "weight", "must be >= 0", argv[1]);
      return -1;
    }
  }
  if (argc > 2) {
    if (num_arg(ctx, fn, "k", argv[2], RRF_DEFAULT_K, k)) return -1;
    if (*k < 0) {
      arg_error(ctx, fn, "k", "must be >= 0", argv[2]);
      return -1;
    }
  }
  return 1;
}

/* ---- exact sums (F6) ---- */

/* A fixed-point number wide enough for any sum of doubles: limb i holds bits
** 32i .. 32i+31 above 2^-1074 (the smallest subnormal), so every finite double
** is an exact integer multiple of bit 0 and needs bits up to 2098; the two
** limbs above that are headroom. Limbs are signed and absorb 2^28 adds (each
** under 2^34) before their carries are propagated. 552 bytes per group; an add
** touches 3 limbs, a read (exact_value) 68.
**
** Why not a compensated double sum, as SQLite's own sum() (Kahan-Babuska-
** Neumaier, 3.43+): the terms are not few or small. rrf_fuse sums any number of
** rows and rrf_sum up to 63 pairs; a contribution weight / (k + rank) is any
** finite double >= 0 (weight is unbounded, k may be 0), from 5e-324 to DBL_MAX.
** KBN fails two requirements on such terms:
**   - F6, windows: its error is second order in the sum of |terms| that ever
**     passed through the accumulator, not in the frame's sum. A frame that
**     held 1e298-sized contributions and now holds 0.04 + 0.008 + 1.25e14
**     reads 0.0 (the rows of tests/test_regressions.py's test_rrf_fuse_window_
**     does_not_drift_after_a_huge_contribution_leaves; SQLite's sum() OVER the
**     same contributions also gives 0.0): removing a huge
**     term leaves a rounding error of ulp(1e298) ~ 1e282 in the compensation,
**     which swamps the small terms for good.
**   - F9 and the reference: KBN is not correctly rounded, and its result
**     depends on the order of the terms. Three rows weighted 1.0, 2^-53 and
**     2^-106 (rank 1, k 0) sum to 1 + 2^-53 + 2^-106, whose nearest double is
**     1.0000000000000002; KBN (and SQLite 3.54's sum()) gives 1.0, as the
**     compensation 2^-53 + 2^-106 rounds to the tie 2^-53. rrf_sum must return
**     bit for bit what rrf_fuse returns over the same pairs, in whatever order
**     the rows reach rrf_fuse, and the tests compare both with math.fsum.
** Here adding and removing the same values leaves exactly what was there, and
** the one rounding happens when the sum is read: every frame and every order
** gives the correctly rounded sum. */
#define EXACT_LIMBS 68
#define EXACT_MASK 0xFFFFFFFFu

typedef struct ExactSum {
  sqlite3_int64 limb[EXACT_LIMBS];
  sqlite3_int64 adds; /* since the last carry propagation */
} ExactSum;

static void exact_normalize(ExactSum *a) {
  sqlite3_int64 carry = 0;
  for (int i = 0; i < EXACT_LIMBS - 1; i++) {
    sqlite3_int64 v = a->limb[i] + carry;
    sqlite3_int64 low = (sqlite3_int64)((sqlite3_uint64)v & EXACT_MASK);
    a->limb[i] = low;
    carry = (v - low) / 4294967296LL; /* exact: v - low is a multiple of 2^32 */
  }
  a->limb[EXACT_LIMBS - 1] += carry;
  a->adds = 0;
}

/* a += sign * x, exactly, for a finite x. */
static void exact_add(ExactSum *a, double x, int sign) {
  int e;
  if (x == 0) return;
  if (x < 0) {
    x = -x;
    sign = -sign;
  }
  double f = frexp(x, &e); /* x = f * 2^e, 0.5 <= f < 1 */
  sqlite3_uint64 m = (sqlite3_uint64)ldexp(f, 53); /* exact: 53 bits */
  int pos = e - 53 + 1074; /* x = m * 2^(pos - 1074) */
  if (pos < 0) { /* subnormal: the low bits of m are zero */
    m >>= -pos;
    pos = 0;
  }
  int lo = pos / 32, sh = pos % 32;
  sqlite3_uint64 a0 = (m & EXACT_MASK) << sh, a1 = (m >> 32) << sh;
  a->limb[lo] += sign * (sqlite3_int64)(a0 & EXACT_MASK);
  a->limb[lo + 1] += sign * (sqlite3_int64)((a0 >> 32) + (a1 & EXACT_MASK));
  a->limb[lo + 2] += sign * (sqlite3_int64)(a1 >> 32);
  if (++a->adds >= (1 << 28)) exact_normalize(a); /* each add < 2^34 a limb */
}

/* The sum, correctly rounded (Inf when it overflows a double). */
static double exact_value(ExactSum *a) {
  exact_normalize(a);
  int h = EXACT_LIMBS - 1;
  while (h >= 0 && a->limb[h] == 0) h--;
  if (h < 0) return 0.0;
  if (a->limb[h] < 0) { /* cannot happen (rows leave as they entered); stay finite */
    double v = 0;
    for (int i = 0; i <= h; i++) v += ldexp((double)a->limb[i], 32 * i - 1074);
    return v;
  }
  if (h == EXACT_LIMBS - 1 && a->limb[h] > (sqlite3_int64)EXACT_MASK) return INFINITY;
  /* The top 64 bits of limbs h .. h-3, with a sticky bit for everything below,
  ** so the conversion to double rounds once, to nearest. */
  sqlite3_uint64 l[4];
  for (int j = 0; j < 4; j++) l[j] = h - j >= 0 ? (sqlite3_uint64)a->limb[h - j] : 0;
  int bl = 0;
  while (bl < 32 && (l[0] >> bl) != 0) bl++;
  int s = 32 - bl; /* shift that puts the top bit at bit 63 */
  sqlite3_uint64 hi = (l[0] << 32) | l[1], lo = (l[2] << 32) | l[3];
  sqlite3_uint64 top = s ? (hi << s) | (lo >> (64 - s)) : hi;
  int sticky = (s ? (lo << s) : lo) != 0;
  for (int i = h - 4; i >= 0 && !sticky; i--) sticky = a->limb[i] != 0;
  return ldexp((double)(top | (sqlite3_uint64)sticky), 32 * (h - 3) + 64 - s - 1074);
}

static void overflow_error(sqlite3_context *ctx, const char *fn) {
  rrf_error(ctx, "%s: the sum of contributions overflows a double (weights too large)", fn);
}

/* ---- rrf_fuse ---- */

typedef struct FuseCtx {
  ExactSum sum;    /* exact sum of the frame's contributions (F6) */
  sqlite3_int64 n; /* contributing rows in the frame (F5) */
} FuseCtx;

void rrf_fuse_step(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
  double rank, weight, k;
  FuseCtx *p = sqlite3_aggregate_context(ctx, sizeof(*p));
  if (p == NULL) {
    sqlite3_result_error_nomem(ctx);
    return;
  }
  if (fuse_args(ctx, "rrf_fuse", argc, argv, &rank, &weight, &k) != 1) return;
  exact_add(&p->sum, weight / (k + rank), 1); /* F1; finite: weight finite, k + rank >= 1 */
  p->n++;
}

void rrf_fuse_inverse(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
  double rank, weight, k;
  FuseCtx *p = sqlite3_aggregate_context(ctx, sizeof(*p));
  if (p == NULL) {
    sqlite3_result_error_nomem(ctx);
    return;
  }
  if (fuse_args(ctx, "rrf_fuse", argc, argv, &rank, &weight, &k) != 1) return;
  p->n--;
  if (p->n <= 0) { /* an empty frame starts again from zero */
    memset(p, 0, sizeof(*p));
  } else {
    exact_add(&p->sum, weight / (k + rank), -1); /* F6 */
  }
}

static void fuse_result(sqlite3_context *ctx, FuseCtx *p) {
  if (p == NULL || p->n == 0) {
    sqlite3_result_null(ctx); /* F5 */
    return;
  }
  double v = exact_value(&p->sum);
  if (!isfinite(v)) overflow_error(ctx, "rrf_fuse"); /* F4 */
  else sqlite3_result_double(ctx, v);
}

void rrf_fuse_value(sqlite3_context *ctx) {
  fuse_result(ctx, sqlite3_aggregate_context(ctx, 0));
}

void rrf_fuse_final(sqlite3_context *ctx) {
  fuse_result(ctx, sqlite3_aggregate_context(ctx, 0));
}

/* ---- rrf_explain ---- */

typedef struct ExplainRow {
  char *list; /* owned, NUL-terminated */
  int list_len;
  double rank, weight, k;
} ExplainRow;

typedef struct ExplainCtx {
  ExplainRow *rows; /* rows[head .. n) are in the frame, oldest first */
  sqlite3_int64 head, n, cap;
} ExplainCtx;

/* Parse (list, rank [, weight [, k]]). Returns 1 when the row contributes, 0
** when the rank is NULL, -1 after an error. */
static int explain_args(sqlite3_context *ctx, int argc, sqlite3_value **argv, ExplainRow *r) {
  int c = fuse_args(ctx, "rrf_explain", argc - 1, argv + 1, &r->rank, &r->weight, &r->k);
  if (c != 1) return c;
  if (sqlite3_value_type(argv[0]) != SQLITE_TEXT) { /* F8 */
    rrf_error(ctx, "rrf_explain: list must be TEXT, got %s", rrf_type_name(argv[0]));
    return -1;
  }
  return 1;
}

void rrf_explain_step(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
  ExplainRow r;
  ExplainCtx *p = sqlite3_aggregate_context(ctx, sizeof(*p));
  if (p == NULL) {
    sqlite3_result_error_nomem(ctx);
    return;
  }
  if (explain_args(ctx, argc, argv, &r) != 1) return;
  if (p->head > 0 && p->head == p->n) p->head = p->n = 0; /* empty: reuse the array */
  if (p->n == p->cap) {
    if (p->head > 0) { /* compact before growing */
      memmove(p->rows, p->rows + p->head, (size_t)(p->n - p->head) * sizeof(ExplainRow));
      p->n -= p->head;
      p->head = 0;
    }
    if (p->n == p->cap) {
      sqlite3_int64 cap = p->cap ? p->cap * 2 : 8;
      ExplainRow *rows = sqlite3_realloc64(p->rows, (sqlite3_uint64)cap * sizeof(ExplainRow));
      if (rows == NULL) {
        sqlite3_result_error_nomem(ctx);
        return;
      }
      p->rows = rows;
      p->cap = cap;
    }
  }
  const unsigned char *s = sqlite3_value_text(argv[0]);
  int len = sqlite3_value_bytes(argv[0]);
  r.list = sqlite3_malloc(len + 1);
  if (s == NULL || r.list == NULL) {
    sqlite3_free(r.list);
    sqlite3_result_error_nomem(ctx);
    return;
  }
  memcpy(r.list, s, (size_t)len);
  r.list[len] = 0;
  r.list_len = len;
  p->rows[p->n++] = r;
}

void rrf_explain_inverse(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
  ExplainRow r;
  ExplainCtx *p = sqlite3_aggregate_context(ctx, sizeof(*p));
  if (p == NULL) {
    sqlite3_result_error_nomem(ctx);
    return;
  }
  if (explain_args(ctx, argc, argv, &r) != 1 || p->head >= p->n) return;
  /* Rows leave a SQLite window frame in the order they entered: the oldest. */
  sqlite3_free(p->rows[p->head].list);
  p->head++;
}

/* Append s as a JSON string (quoted, escaped). Invalid UTF-8 becomes \ufffd, so
** the result is valid UTF-8 whatever bytes the TEXT list name holds (F7). */
static void json_string(sqlite3_str *out, const char *s, int len) {
  static const char hex[] = "0123456789abcdef";
  sqlite3_str_appendchar(out, 1, '"');
  for (int i = 0; i < len; i++) {
    unsigned char c = (unsigned char)s[i];
    if (c == '"' || c == '\\') {
      sqlite3_str_appendchar(out, 1, '\\');
      sqlite3_str_appendchar(out, 1, (char)c);
    } else if (c < 0x20) {
      char esc[7] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15], 0};
      sqlite3_str_appendall(out, esc);
    } else if (c < 0x80) {
      sqlite3_str_appendchar(out, 1, (char)c);
    } else {
      unsigned cp;
      int n = rrf_utf8_decode((const unsigned char *)s, len, i, &cp);
      if (n == 1) sqlite3_str_appendall(out, "\\ufffd");
      else sqlite3_str_append(out, s + i, n);
      i += n - 1;
    }
  }
  sqlite3_str_appendchar(out, 1, '"');
}

static void json_number(sqlite3_str *out, double v) {
  if (v == floor(v) && fabs(v) < 9007199254740992.0) {
    sqlite3_str_appendf(out, "%lld", (long long)v);
  } else {
    sqlite3_str_appendf(out, "%!.15g", v);
  }
}

/* A finite double for JSON: 15 significant digits, or 17 where 15 would round
** past DBL_MAX (a JSON reader would get Inf). */
static void json_real(sqlite3_str *out, double v) {
  sqlite3_str_appendf(out, fabs(v) >= 1.797693134862315e308 ? "%!.17g" : "%!.15g", v);
}

static void explain_result(sqlite3_context *ctx, ExplainCtx *p) {
  if (p == NULL || p->head >= p->n) {
    sqlite3_result_null(ctx); /* F5 */
    return;
  }
  sqlite3_int64 m = p->n - p->head;
  /* F7: merge rows of the same list; `first` marks each list's first row. */
  char *done = sqlite3_malloc64((sqlite3_uint64)m);
  sqlite3_str *out = sqlite3_str_new(NULL); /* no db: rrf_result_str checks the limit (F7) */
  if (done == NULL) {
    sqlite3_free(sqlite3_str_finish(out));
    sqlite3_result_error_nomem(ctx);
    return;
  }
  memset(done, 0, (size_t)m);
  /* F4: the total, exact as rrf_fuse's, must not overflow. */
  ExactSum total;
  memset(&total, 0, sizeof total);
  for (sqlite3_int64 i = 0; i < m; i++) {
    const ExplainRow *a = &p->rows[p->head + i];
    exact_add(&total, a->weight / (a->k + a->rank), 1);
  }
  if (!isfinite(exact_value(&total))) {
    sqlite3_free(done);
    sqlite3_free(sqlite3_str_finish(out));
    overflow_error(ctx, "rrf_explain");
    return;
  }
  sqlite3_str_appendchar(out, 1, '{');
  int first_key = 1;
  for (sqlite3_int64 i = 0; i < m; i++) {
    if (done[i]) continue;
    const ExplainRow *a = &p->rows[p->head + i];
    double best_rank = a->rank, best_weight = a->weight;
    double contribution = a->weight / (a->k + a->rank);
    for (sqlite3_int64 j = i + 1; j < m; j++) {
      const ExplainRow *b = &p->rows[p->head + j];
      if (done[j] || b->list_len != a->list_len || memcmp(a->list, b->list, (size_t)a->list_len))
        continue;
      done[j] = 1;
      contribution += b->weight / (b->k + b->rank);
      if (b->rank < best_rank) {
        best_rank = b->rank;
        best_weight = b->weight;
      }
    }
    if (!isfinite(contribution)) { /* F4 (a rounding away from the total's) */
      sqlite3_free(done);
      sqlite3_free(sqlite3_str_finish(out));
      overflow_error(ctx, "rrf_explain");
      return;
    }
    if (!first_key) sqlite3_str_appendchar(out, 1, ',');
    first_key = 0;
    json_string(out, a->list, a->list_len);
    sqlite3_str_appendall(out, ":{\"rank\":");
    json_number(out, best_rank);
    sqlite3_str_appendall(out, ",\"weight\":");
    json_real(out, best_weight);
    sqlite3_str_appendall(out, ",\"contribution\":");
    json_real(out, contribution);
    sqlite3_str_appendchar(out, 1, '}');
  }
  sqlite3_str_appendchar(out, 1, '}');
  sqlite3_free(done);
  rrf_result_str(ctx, out, "rrf_explain"); /* F7: past SQLITE_LIMIT_LENGTH, an error */
}

void rrf_explain_value(sqlite3_context *ctx) {
  explain_result(ctx, sqlite3_aggregate_context(ctx, 0));
}

void rrf_explain_final(sqlite3_context *ctx) {
  ExplainCtx *p = sqlite3_aggregate_context(ctx, 0);
  explain_result(ctx, p);
  if (p) {
    for (sqlite3_int64 i = p->head; i < p->n; i++) sqlite3_free(p->rows[i].list);
    sqlite3_free(p->rows);
  }
}

/* ---- rrf_sum (F9) ---- */

void rrf_sum_func(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
  ExactSum sum;
  int n = 0;
  if (argc < 3 || argc % 2 == 0) {
    rrf_error(ctx, "rrf_sum: usage: rrf_sum(k, rank1, weight1 [, rank2, weight2 ...])");
    return;
  }
  memset(&sum, 0, sizeof(sum));
  for (int i = 1; i < argc; i += 2) {
    double rank, weight, k;
    sqlite3_value *args[3] = {argv[i], argv[i + 1], argv[0]};
    int c = fuse_args(ctx, "rrf_sum", 3, args, &rank, &weight, &k);
    if (c < 0) return;
    if (c == 0) continue;
    exact_add(&sum, weight / (k + rank), 1);
    n++;
  }
  if (n == 0) {
    sqlite3_result_null(ctx);
    return;
  }
  double v = exact_value(&sum);
  if (!isfinite(v)) overflow_error(ctx, "rrf_sum");
  else sqlite3_result_double(ctx, v);
}
