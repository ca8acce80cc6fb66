/*
** rrf_fuse(rank [, weight [, k]]) -> REAL           aggregate and window function
** rrf_explain(list, rank [, weight [, k]]) -> TEXT  aggregate and window function
**
** Requirements (DESIGN.md, "The extension"; tests cite them as F1..F8):
**   F1. rrf_fuse returns the sum of weight / (k + rank) over the rows of the group.
**   F2. Ranks are 1-based; a NULL rank contributes nothing (absent from that list).
**   F3. Defaults: weight 1.0, k 60. A NULL weight or k means the default.
**   F4. rank < 1, weight < 0 or k < 0 is an error; so is a rank, weight or k that
**       is not a finite number (TEXT, BLOB, +/-Inf). Messages name the function.
**   F5. A group in which no row contributed returns NULL (like sum()).
**   F6. As a window function, xInverse removes a row's contribution; the sum is
**       compensated (Neumaier) so sliding frames do not drift.
**   F7. rrf_explain returns a JSON object with one key per list, in order of first
**       appearance: {"bm25": {"rank": 3, "weight": 1.0, "contribution": 0.0159}}.
**       A list named twice in a group reports its best (lowest) rank, that row's
**       weight, and the sum of its contributions, so the contributions always add
**       up to rrf_fuse over the same rows.
**   F8. rrf_explain's list must be TEXT (a NULL list with a NULL rank is skipped).
*/
#include <math.h>
#include <string.h>

#include "rrf_internal.h"
SQLITE_EXTENSION_INIT3

#define RRF_DEFAULT_WEIGHT 1.0
#define RRF_DEFAULT_K 60.0

/* ---- argument checks shared by both functions ---- */

static void arg_error(sqlite3_context *ctx, const char *fn, const char *what,
                      const char *fault, sqlite3_value *v) {
  char *msg;
  if (fault && sqlite3_value_type(v) == SQLITE_INTEGER) {
    msg = sqlite3_mprintf("%s: %s %s, got %lld", fn, what, fault, sqlite3_value_int64(v));
  } else if (fault) {
    msg = sqlite3_mprintf("%s: %s %s, got %!.15g", fn, what, fault, sqlite3_value_double(v));
  } else {
    msg = sqlite3_mprintf("%s: %s must be a number, got %s", fn, what, rrf_type_name(v));
  }
  sqlite3_result_error(ctx, msg ? msg : fn, -1);
  sqlite3_free(msg);
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

/* ---- rrf_fuse ---- */

typedef struct FuseCtx {
  double sum;         /* Neumaier running sum ... */
  double comp;        /* ... and its compensation (F6) */
  sqlite3_int64 n;    /* contributing rows in the frame (F5) */
} FuseCtx;

static void neumaier_add(FuseCtx *p, double x) {
  double t = p->sum + x;
  if (fabs(p->sum) >= fabs(x)) p->comp += (p->sum - t) + x;
  else p->comp += (x - t) + p->sum;
  p->sum = t;
}

void rrf_fuse_step(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
  double rank, weight, k;
  FuseCtx *p = sqlite3_aggregate_context(ctx, sizeof(*p));
  if (p == NULL) {
    sqlite3_result_error_nomem(ctx);
    return;
  }
  if (fuse_args(ctx, "rrf_fuse", argc, argv, &rank, &weight, &k) != 1) return;
  neumaier_add(p, weight / (k + rank)); /* F1 */
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
  if (p->n <= 0) { /* an empty frame starts again from an exact zero */
    p->n = 0;
    p->sum = p->comp = 0;
  } else {
    neumaier_add(p, -(weight / (k + rank))); /* F6 */
  }
}

static void fuse_result(sqlite3_context *ctx, FuseCtx *p) {
  if (p == NULL || p->n == 0) sqlite3_result_null(ctx); /* F5 */
  else sqlite3_result_double(ctx, p->sum + p->comp);
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
    char *msg = sqlite3_mprintf("rrf_explain: list must be TEXT, got %s",
                                rrf_type_name(argv[0]));
    sqlite3_result_error(ctx, msg ? msg : "rrf_explain: list must be TEXT", -1);
    sqlite3_free(msg);
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

/* Append s as a JSON string (quoted, escaped). */
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
    } else {
      sqlite3_str_appendchar(out, 1, (char)c);
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

static void explain_result(sqlite3_context *ctx, ExplainCtx *p) {
  if (p == NULL || p->head >= p->n) {
    sqlite3_result_null(ctx); /* F5 */
    return;
  }
  sqlite3_int64 m = p->n - p->head;
  /* F7: merge rows of the same list; `first` marks each list's first row. */
  char *done = sqlite3_malloc64((sqlite3_uint64)m);
  sqlite3_str *out = sqlite3_str_new(sqlite3_context_db_handle(ctx));
  if (done == NULL) {
    sqlite3_free(sqlite3_str_finish(out));
    sqlite3_result_error_nomem(ctx);
    return;
  }
  memset(done, 0, (size_t)m);
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
    if (!first_key) sqlite3_str_appendchar(out, 1, ',');
    first_key = 0;
    json_string(out, a->list, a->list_len);
    sqlite3_str_appendall(out, ":{\"rank\":");
    json_number(out, best_rank);
    sqlite3_str_appendf(out, ",\"weight\":%!.15g,\"contribution\":%!.15g}", best_weight,
                        contribution);
  }
  sqlite3_str_appendchar(out, 1, '}');
  sqlite3_free(done);
  if (sqlite3_str_errcode(out)) {
    sqlite3_free(sqlite3_str_finish(out));
    sqlite3_result_error_nomem(ctx);
    return;
  }
  int len = sqlite3_str_length(out);
  sqlite3_result_text(ctx, sqlite3_str_finish(out), len, sqlite3_free);
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
