/*
** rrf_topk(k, score, value) -> TEXT   aggregate
**
** The k rows of the group with the highest score, in one pass: a bounded heap,
** O(n log k) time and O(k) memory, so that
**   SELECT rrf_topk(200, vec_cosine(embedding, :q), rowid) FROM vectors
** finds the exact top 200 without sorting every row.
**
** Requirements (tests/test_topk.py cites them as T1..T8):
**   T1. The result is a JSON array of [value, score] pairs, best first: the rows
**       with the highest score; among equal scores the smaller value comes first
**       (and is kept when only some of the tied rows fit in k). It holds
**       min(k, rows with a score) pairs.
**   T2. A row whose score is NULL is skipped. A group in which no row has a score
**       returns NULL (like max()).
**   T3. k is an INTEGER from 1 to 1000000, and the same on every row of the group
**       (it is read on every row, NULL scores included).
**   T4. score is an INTEGER or a finite REAL; scores are compared as doubles
**       (an INTEGER beyond 2^53 is compared rounded). An INTEGER score is written
**       as an integer, a REAL one with 17 significant digits (it reads back as the
**       same double).
**   T5. value is an INTEGER (a rowid); it is checked on rows with a score.
**   T6. Errors name the function and the fault: k out of range or not an
**       INTEGER, k changing between rows, a score or value of the wrong type, an
**       infinite score, a result longer than SQLITE_LIMIT_LENGTH.
**   T7. Memory grows with the rows kept, never past k entries: a large k over a
**       few rows allocates for those rows only.
**   T8. Registered SQLITE_INNOCUOUS (not DETERMINISTIC, like every aggregate of
**       the extension); not a window function.
*/
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rrf_internal.h"
SQLITE_EXTENSION_INIT3

#define TOPK_MAX_K RRF_TOPK_MAX_K
#define better rrf_topk_better

typedef RrfTopkEntry TopkEntry;
typedef RrfTopk TopkCtx;

static void sift_down(TopkEntry *h, size_t n, size_t i) {
  TopkEntry e = h[i];
  for (;;) {
    size_t c = 2 * i + 1;
    if (c >= n) break;
    if (c + 1 < n && better(&h[c], &h[c + 1])) c++; /* the worse child */
    if (!better(&e, &h[c])) break;
    h[i] = h[c];
    i = c;
  }
  h[i] = e;
}

static void sift_up(TopkEntry *h, size_t i) {
  TopkEntry e = h[i];
  while (i > 0) {
    size_t parent = (i - 1) / 2;
    if (!better(&h[parent], &e)) break;
    h[i] = h[parent];
    i = parent;
  }
  h[i] = e;
}

/* One row into p's heap. SQLITE_OK, or an error code with the error set (T6). */
static int topk_add(sqlite3_context *ctx, TopkCtx *p, sqlite3_value **argv) {
  TopkEntry e;
  /* T3 */
  if (sqlite3_value_type(argv[0]) != SQLITE_INTEGER)
    return rrf_error(ctx, "rrf_topk: k must be an INTEGER from 1 to %d, got %s", TOPK_MAX_K,
                     rrf_type_name(argv[0]));
  sqlite3_int64 k = sqlite3_value_int64(argv[0]);
  if (k < 1 || k > TOPK_MAX_K)
    return rrf_error(ctx, "rrf_topk: k must be an INTEGER from 1 to %d, got %lld", TOPK_MAX_K, k);
  if (p->k == 0) {
    p->k = k;
  } else if (k != p->k) {
    return rrf_error(ctx, "rrf_topk: k must be the same on every row (%lld, then %lld)", p->k, k);
  }
  /* T2, T4 */
  switch (sqlite3_value_type(argv[1])) {
  case SQLITE_NULL:
    return SQLITE_OK;
  case SQLITE_INTEGER:
    e.iscore = sqlite3_value_int64(argv[1]);
    e.score = (double)e.iscore;
    e.isint = 1;
    break;
  case SQLITE_FLOAT:
    e.score = sqlite3_value_double(argv[1]);
    e.iscore = 0;
    e.isint = 0;
    if (!isfinite(e.score))
      return rrf_error(ctx, "rrf_topk: score must be finite, got %s",
                       e.score > 0 ? "Inf" : (e.score < 0 ? "-Inf" : "NaN"));
    break;
  default:
    return rrf_error(ctx, "rrf_topk: score must be a number, got %s", rrf_type_name(argv[1]));
  }
  /* T5 */
  if (sqlite3_value_type(argv[2]) != SQLITE_INTEGER)
    return rrf_error(ctx, "rrf_topk: value must be an INTEGER, got %s", rrf_type_name(argv[2]));
  e.value = sqlite3_value_int64(argv[2]);
  return rrf_topk_push(ctx, p, &e);
}

int rrf_topk_push(sqlite3_context *ctx, RrfTopk *p, const RrfTopkEntry *pe) {
  const TopkEntry e = *pe;
  if (p->n < (size_t)p->k) {
    if (p->n == p->cap) { /* T7: grow by doubling, up to k */
      size_t cap = p->cap ? p->cap * 2 : 16;
      if (cap > (size_t)p->k) cap = (size_t)p->k;
      TopkEntry *h = sqlite3_realloc64(p->heap, cap * sizeof(TopkEntry));
      if (h == NULL) {
        sqlite3_result_error_nomem(ctx);
        return SQLITE_NOMEM;
      }
      p->heap = h;
      p->cap = cap;
    }
    p->heap[p->n] = e;
    sift_up(p->heap, p->n++);
  } else if (better(&e, &p->heap[0])) { /* T1: replaces the worst kept row */
    p->heap[0] = e;
    sift_down(p->heap, p->n, 0);
  }
  return SQLITE_OK;
}

void rrf_topk_step(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
  TopkCtx *p = sqlite3_aggregate_context(ctx, sizeof(*p));
  (void)argc;
  if (p == NULL) {
    sqlite3_result_error_nomem(ctx);
    return;
  }
  if (p->failed) return;
  if (topk_add(ctx, p, argv) != SQLITE_OK) p->failed = 1; /* ignore the remaining rows */
}

/* T4: a finite double as JSON that reads back as the same double: C's "%.17g"
** (correctly rounded by the C libraries this builds with; SQLite's own printf is
** not, before 3.43, for large exponents), with the locale's decimal separator,
** whatever its bytes, written as '.', and ".0" added to a whole number so that
** the score stays a REAL. */
static void append_real(sqlite3_str *out, double v) {
  char buf[64], clean[64];
  size_t j = 0;
  int point = 0;
  snprintf(buf, sizeof buf, "%.17g", v);
  for (size_t i = 0; buf[i] && j < sizeof clean - 3; i++) {
    char c = buf[i];
    if ((c >= '0' && c <= '9') || c == '-' || c == '+') {
      clean[j++] = c;
    } else if (c == 'e' || c == 'E') {
      clean[j++] = 'e';
      point = 1;
    } else if (!point) { /* the first byte of the decimal separator */
      clean[j++] = '.';
      point = 1;
    }
  }
  if (!point) {
    clean[j++] = '.';
    clean[j++] = '0';
  }
  sqlite3_str_append(out, clean, (int)j);
}

static int cmp_entries(const void *x, const void *y) {
  const TopkEntry *a = x, *b = y;
  return better(a, b) ? -1 : (better(b, a) ? 1 : 0);
}

void rrf_topk_final(sqlite3_context *ctx) {
  rrf_topk_result(ctx, sqlite3_aggregate_context(ctx, 0), "rrf_topk");
}

static int cmp_int64(const void *x, const void *y) {
  sqlite3_int64 a = *(const sqlite3_int64 *)x, b = *(const sqlite3_int64 *)y;
  return a < b ? -1 : (a > b);
}

void rrf_topk_result(sqlite3_context *ctx, RrfTopk *p, const char *fn) {
  if (p == NULL || p->failed || (p->n == 0 && p->nextra == 0)) { /* T2 */
    if (p) {
      sqlite3_free(p->heap);
      sqlite3_free(p->extra);
      p->heap = NULL;
      p->extra = NULL;
    }
    if (p == NULL || !p->failed) sqlite3_result_null(ctx);
    return;
  }
  if (p->n) qsort(p->heap, p->n, sizeof(TopkEntry), cmp_entries); /* T1: best first */
  if (p->nextra) qsort(p->extra, p->nextra, sizeof(sqlite3_int64), cmp_int64);
  sqlite3_str *out = sqlite3_str_new(NULL);
  sqlite3_str_appendchar(out, 1, '[');
  for (size_t i = 0; i < p->n; i++) {
    const TopkEntry *e = &p->heap[i];
    if (e->isint) {
      sqlite3_str_appendf(out, "%s[%lld,%lld]", i ? "," : "", e->value, e->iscore);
    } else {
      sqlite3_str_appendf(out, "%s[%lld,", i ? "," : "", e->value);
      append_real(out, e->score); /* T4 */
      sqlite3_str_appendchar(out, 1, ']');
    }
  }
  for (size_t i = 0; i < p->nextra; i++)
    sqlite3_str_appendf(out, "%s[%lld,null]", (i || p->n) ? "," : "", p->extra[i]);
  sqlite3_str_appendchar(out, 1, ']');
  sqlite3_free(p->heap);
  sqlite3_free(p->extra);
  p->heap = NULL;
  p->extra = NULL;
  rrf_result_str(ctx, out, fn); /* T6: SQLITE_LIMIT_LENGTH */
}
