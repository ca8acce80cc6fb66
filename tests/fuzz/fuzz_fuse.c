/*
** fuzz_fuse: rrf_fuse and rrf_explain as aggregates and as window functions
** (csrc/fuse.c; requirements F1..F8).
**
** The input decodes to a table t(id, grp, list, rank, weight, k) of up to 48
** rows, whose values come from tables of ordinary and hostile values (NULL,
** 0, -1, +/-2^63, +/-Inf, 1e308, DBL_MAX, subnormals, TEXT, BLOB, invalid UTF-8,
** embedded NULs...), and to one query: GROUP BY, a whole-table aggregate, or a
** window (ROWS, GROUPS or RANGE, offsets from the input, frames that are empty
** or shrink to nothing, EXCLUDE, FILTER, PARTITION BY, DESC), which makes SQLite
** call xStep / xInverse / xValue / xFinal in the corresponding sequences.
** Each query runs three times: both functions, rrf_fuse alone, rrf_explain alone.
**
** Checked: an error names the function that raised it; when every row the
** functions may see is valid, there is no error (unless a sum overflows a
** double) and rrf_fuse equals the sum predicted from the rows (F1, F2, F3, F5,
** F6) to 1e-9; rrf_explain is NULL exactly when rrf_fuse is (F5), is valid JSON,
** and its contributions add up to rrf_fuse (F7).
*/
#include "fuzz_common.h"

#include <float.h>

#define MAX_ROWS 48

typedef struct Val {
  int type;
  sqlite3_int64 i;
  double d;
  const char *s;
  int n;
} Val;

static Val v_null(void) { Val v = {SQLITE_NULL, 0, 0, NULL, 0}; return v; }
static Val v_int(sqlite3_int64 i) { Val v = {SQLITE_INTEGER, i, (double)i, NULL, 0}; return v; }
static Val v_real(double d) { Val v = {SQLITE_FLOAT, 0, d, NULL, 0}; return v; }
static Val v_text(const char *s, int n) { Val v = {SQLITE_TEXT, 0, 0, s, n < 0 ? (int)strlen(s) : n}; return v; }
static Val v_blob(const char *s, int n) { Val v = {SQLITE_BLOB, 0, 0, s, n}; return v; }

static char g_long[301];

static Val rank_val(uint8_t b) {
  if (b < 128) return v_int(1 + b % 16);
  switch (b % 16) {
  case 0: return v_null();
  case 1: return v_real(1.5);
  case 2: return v_int(0);
  case 3: return v_int(-1);
  case 4: return v_int(INT64_MAX);
  case 5: return v_int(INT64_MIN);
  case 6: return v_real(INFINITY);
  case 7: return v_real(-INFINITY);
  case 8: return v_real(1e308);
  case 9: return v_text("3", -1);
  case 10: return v_blob("\x01", 1);
  case 11: return v_real(0.5);
  case 12: return v_real(1.0);
  case 13: return v_real(4503599627370497.0);
  case 14: return v_real(1e-300);
  default: return v_int(9007199254740993LL);
  }
}

static Val weight_val(uint8_t b) {
  static const double common[] = {1.0, 0.5, 2.0, 0.0, 1.0, 3.0, 0.25, 1.0};
  if (b < 128) return (b & 8) ? v_int((sqlite3_int64)common[b % 8]) : v_real(common[b % 8]);
  switch (b % 16) {
  case 0: return v_null();
  case 1: return v_real(1e308);
  case 2: return v_real(DBL_MAX);
  case 3: return v_real(5e-324);
  case 4: return v_real(-1);
  case 5: return v_real(-0.0);
  case 6: return v_real(INFINITY);
  case 7: return v_text("w", -1);
  case 8: return v_blob("\x02\x03", 2);
  case 9: return v_int(INT64_MAX);
  case 10: return v_int(INT64_MIN);
  case 11: return v_real(1e300);
  case 12: return v_real(1e-300);
  case 13: return v_int(0);
  case 14: return v_real(1e16);
  default: return v_real(-INFINITY);
  }
}

static Val k_val(uint8_t b) {
  static const double common[] = {60, 0, 1, 10};
  if (b < 128) return (b & 4) ? v_int((sqlite3_int64)common[b % 4]) : v_real(common[b % 4]);
  switch (b % 16) {
  case 0: return v_null();
  case 1: return v_real(1e308);
  case 2: return v_real(-1);
  case 3: return v_real(INFINITY);
  case 4: return v_real(-0.0);
  case 5: return v_text("60", -1);
  case 6: return v_blob("", 0);
  case 7: return v_int(INT64_MAX);
  case 8: return v_real(0.5);
  case 9: return v_real(5e-324);
  case 10: return v_real(DBL_MAX);
  case 11: return v_int(-1);
  case 12: return v_real(-INFINITY);
  case 13: return v_int(INT64_MIN);
  case 14: return v_real(1e-300);
  default: return v_real(1e300);
  }
}

static Val list_val(uint8_t b) {
  static const char *const common[] = {"bm25", "vec", "recency", "a", "A", "bm25 "};
  if (b < 160) return v_text(common[b % 6], -1);
  switch (b % 16) {
  case 0: return v_null();
  case 1: return v_text("", 0);
  case 2: return v_text("a\"b\\c", -1);
  case 3: return v_text("\x01\x1f\x7f", -1);
  case 4: return v_text("\xc3\xbc", -1);
  case 5: return v_text("\xff\xfe", -1); /* invalid UTF-8 */
  case 6: return v_int(7);
  case 7: return v_blob("bm25", 4);
  case 8: return v_text("a\0b", 3); /* embedded NUL */
  case 9: return v_text(g_long, 300);
  case 10: return v_real(1.5);
  case 11: return v_text("\xf0\x9f\x98\x80", -1);
  case 12: return v_text("\\u0000", -1);
  case 13: return v_text("</script>", -1);
  case 14: return v_text("NULL", -1);
  default: return v_text("bm25", -1);
  }
}

typedef struct Row {
  sqlite3_int64 id;
  int grp;
  Val list, rank, weight, k;
} Row;

static sqlite3 *g_db;
static sqlite3_stmt *g_insert, *g_delete, *g_json;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  for (int i = 0; i < 300; i++) g_long[i] = (char)('a' + i % 26);
  g_db = fz_open();
  fz_exec(g_db, "CREATE TABLE t(id INTEGER PRIMARY KEY, grp, list, rank, weight, k)");
  g_insert = fz_prepare(g_db, "INSERT INTO t VALUES (?1, ?2, ?3, ?4, ?5, ?6)");
  g_delete = fz_prepare(g_db, "DELETE FROM t");
  g_json = fz_prepare(g_db, "SELECT json_valid(?1), "
                            "(SELECT total(json_extract(value, '$.contribution')) || ' ' || "
                            "min(json_extract(value, '$.rank')) || ' ' || "
                            "min(json_extract(value, '$.weight')) || ' ' || count(*) "
                            "FROM json_each(?1) WHERE json_valid(?1))");
  return 0;
}

static void bind_val(sqlite3_stmt *st, int i, const Val *v) {
  switch (v->type) {
  case SQLITE_NULL: sqlite3_bind_null(st, i); break;
  case SQLITE_INTEGER: sqlite3_bind_int64(st, i, v->i); break;
  case SQLITE_FLOAT: sqlite3_bind_double(st, i, v->d); break;
  case SQLITE_TEXT: sqlite3_bind_text(st, i, v->s, v->n, SQLITE_STATIC); break;
  default: sqlite3_bind_blob(st, i, v->s, v->n, SQLITE_STATIC); break;
  }
}

/* ---- what the functions should do with a row ---- */

static int num_ok(const Val *v, int nullable, double lo) {
  if (v->type == SQLITE_NULL) return nullable;
  if (v->type != SQLITE_INTEGER && v->type != SQLITE_FLOAT) return 0;
  return isfinite(v->d) && v->d >= lo;
}

/* 1: the row is valid for rrf_fuse with nargs numeric arguments. */
static int fuse_row_ok(const Row *r, int nargs) {
  if (r->rank.type == SQLITE_NULL) return 1;
  if (!num_ok(&r->rank, 0, 1)) return 0;
  if (nargs > 1 && !num_ok(&r->weight, 1, 0)) return 0;
  if (nargs > 2 && !num_ok(&r->k, 1, 0)) return 0;
  return 1;
}

static int explain_row_ok(const Row *r, int nargs) {
  return fuse_row_ok(r, nargs) && (r->rank.type == SQLITE_NULL || r->list.type == SQLITE_TEXT);
}

static double contribution(const Row *r, int nargs) {
  double w = 1.0, k = 60.0;
  if (nargs > 1 && r->weight.type != SQLITE_NULL) w = r->weight.d;
  if (nargs > 2 && r->k.type != SQLITE_NULL) k = r->k.d;
  return w / (k + r->rank.d);
}

/* ---- the query ---- */

enum { B_UNB_PREC, B_PREC, B_CURRENT, B_FOLL, B_UNB_FOLL };
enum { U_ROWS, U_GROUPS, U_RANGE, U_TIES };
enum { K_GROUP, K_ALL, K_WINDOW };

typedef struct Query {
  int kind, unit, start, end, x, y, partition, desc, exclude, filter, nargs, order;
} Query;

static const char *const kExclude[] = {"", " EXCLUDE NO OTHERS", " EXCLUDE CURRENT ROW",
                                       " EXCLUDE GROUP", " EXCLUDE TIES"};

static void bound_sql(Buf *b, int type, int off) {
  switch (type) {
  case B_UNB_PREC: buf_printf(b, "UNBOUNDED PRECEDING"); break;
  case B_PREC: buf_printf(b, "%d PRECEDING", off); break;
  case B_CURRENT: buf_printf(b, "CURRENT ROW"); break;
  case B_FOLL: buf_printf(b, "%d FOLLOWING", off); break;
  default: buf_printf(b, "UNBOUNDED FOLLOWING"); break;
  }
}

/* which: 1 rrf_fuse, 2 rrf_explain, 3 both. */
static void query_sql(Buf *b, const Query *q, int which) {
  static const char *const fargs[] = {"rank", "rank, weight", "rank, weight, k"};
  const char *filter = q->filter ? " FILTER (WHERE id % 3 <> 0)" : "";
  const char *over = q->kind == K_WINDOW ? " OVER w" : "";
  buf_printf(b, "SELECT %s", q->kind == K_WINDOW ? "id" : q->kind == K_GROUP ? "grp" : "-1");
  if (which & 1) buf_printf(b, ", rrf_fuse(%s)%s%s", fargs[q->nargs - 1], filter, over);
  else buf_printf(b, ", NULL");
  if (which & 2) buf_printf(b, ", rrf_explain(list, %s)%s%s", fargs[q->nargs - 1], filter, over);
  else buf_printf(b, ", NULL");
  buf_printf(b, " FROM t");
  if (q->kind == K_GROUP) buf_printf(b, " GROUP BY grp");
  if (q->kind != K_WINDOW) return;
  buf_printf(b, " WINDOW w AS (%s", q->partition ? "PARTITION BY grp " : "");
  if (q->order == 0) { /* default frame over ORDER BY id */
    buf_printf(b, "ORDER BY id%s)", q->desc ? " DESC" : "");
    return;
  }
  if (q->order == 2) { /* no ORDER BY: every row is a peer, the frame is the partition */
    buf_printf(b, ")");
    return;
  }
  static const char *const units[] = {"ROWS", "GROUPS", "RANGE", "GROUPS"};
  buf_printf(b, "ORDER BY %s%s %s BETWEEN ", q->unit == U_TIES ? "grp" : "id",
             q->desc ? " DESC" : "", units[q->unit]);
  bound_sql(b, q->start, q->x);
  buf_printf(b, " AND ");
  bound_sql(b, q->end, q->y);
  buf_printf(b, "%s)", kExclude[q->exclude]);
}

/* The rows (indexes into rows[]) in output row `key`'s frame, in frame order.
** Returns -1 when the harness does not predict this query shape. */
static int frame_rows(const Query *q, const Row *rows, int nrows, sqlite3_int64 key, int *out) {
  int m = 0;
  if (q->kind == K_ALL) {
    for (int i = 0; i < nrows; i++) out[m++] = i;
    return m;
  }
  if (q->kind == K_GROUP) {
    for (int i = 0; i < nrows; i++)
      if (rows[i].grp == key) out[m++] = i;
    return m;
  }
  if (q->order == 1 && q->unit == U_TIES) return -1;
  /* The partition of row `key`, sorted by id (rows[] is in id order). */
  int part[MAX_ROWS], np = 0, me = -1;
  const Row *cur = NULL;
  for (int i = 0; i < nrows; i++)
    if (rows[i].id == key) cur = &rows[i];
  if (cur == NULL) fz_fail("output row id %lld not in the table", (long long)key);
  for (int i = 0; i < nrows; i++) {
    int j = q->desc ? nrows - 1 - i : i;
    if (q->partition && rows[j].grp != cur->grp) continue;
    if (&rows[j] == cur) me = np;
    part[np++] = j;
  }
  if (q->order == 2) {
    for (int i = 0; i < np; i++) out[m++] = part[i];
    return m;
  }
  long lo, hi; /* offsets from the current row, in the ORDER BY direction */
  int start = q->start, end = q->end, x = q->x, y = q->y, exclude = q->exclude;
  if (q->order == 0) { /* RANGE BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW */
    start = B_UNB_PREC;
    end = B_CURRENT;
    exclude = 0;
  }
  lo = start == B_UNB_PREC ? -1000000 : start == B_PREC ? -x : start == B_CURRENT ? 0 : x;
  hi = end == B_UNB_FOLL ? 1000000 : end == B_PREC ? -y : end == B_CURRENT ? 0 : y;
  int unit = q->order == 0 ? U_ROWS : q->unit; /* ids are unique: GROUPS = ROWS */
  for (int i = 0; i < np; i++) {
    int in;
    if (unit == U_RANGE) {
      sqlite3_int64 d = rows[part[i]].id - cur->id;
      if (q->desc) d = -d;
      in = (start == B_UNB_PREC || d >= lo) && (end == B_UNB_FOLL || d <= hi);
    } else {
      in = i - me >= lo && i - me <= hi;
    }
    /* EXCLUDE CURRENT ROW and EXCLUDE GROUP drop the row itself (no ties). */
    if (in && (exclude == 2 || exclude == 3) && i == me) in = 0;
    if (in) out[m++] = part[i];
  }
  return m;
}

/* ---- running a query ---- */

typedef struct Out {
  sqlite3_int64 key;
  int f_null, e_null;
  double f;
  char *e;
} Out;

static char g_errmsg[3][512];
static int g_errcode[3];

static int run_query(const char *sql, Out *outs, int *nout, int which) {
  sqlite3_stmt *st = fz_prepare(g_db, sql);
  int rc;
  *nout = 0;
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
    FZ_CHECK(*nout < MAX_ROWS + 1, "too many output rows");
    Out *o = &outs[(*nout)++];
    o->key = sqlite3_column_int64(st, 0);
    o->f_null = sqlite3_column_type(st, 1) == SQLITE_NULL;
    o->f = sqlite3_column_double(st, 1);
    if (!o->f_null) FZ_CHECK(sqlite3_column_type(st, 1) == SQLITE_FLOAT, "rrf_fuse type");
    o->e_null = sqlite3_column_type(st, 2) == SQLITE_NULL;
    o->e = NULL;
    if (!o->e_null) {
      FZ_CHECK(sqlite3_column_type(st, 2) == SQLITE_TEXT, "rrf_explain type");
      const unsigned char *t = sqlite3_column_text(st, 2);
      int n = sqlite3_column_bytes(st, 2);
      o->e = malloc((size_t)n + 1);
      FZ_CHECK(o->e && t, "malloc");
      memcpy(o->e, t, (size_t)n);
      o->e[n] = 0;
    }
  }
  if (rc != SQLITE_DONE) {
    fz_expect_named_error(g_db, rc, which & 1 ? "rrf_fuse" : "rrf_explain",
                          which & 2 ? "rrf_explain" : NULL);
    snprintf(g_errmsg[which - 1], sizeof g_errmsg[0], "%s", sqlite3_errmsg(g_db));
    g_errcode[which - 1] = rc;
  }
  sqlite3_finalize(st);
  return rc == SQLITE_DONE ? 0 : 1;
}

static void free_outs(Out *outs, int n) {
  for (int i = 0; i < n; i++) free(outs[i].e);
}

/* F7: valid JSON whose contributions add up to f (when fuse ran), ranks >= 1,
** weights >= 0. */
static void check_explain_json(const char *e, int have_f, double f) {
  FZ_CHECK(valid_utf8((const unsigned char *)e, (int)strlen(e)), "F7: not UTF-8: %s", e);
  sqlite3_bind_text(g_json, 1, e, -1, SQLITE_STATIC);
  FZ_CHECK(sqlite3_step(g_json) == SQLITE_ROW, "json check: %s", sqlite3_errmsg(g_db));
  int valid = sqlite3_column_int(g_json, 0);
  FZ_CHECK(valid, "F7: rrf_explain returned invalid JSON: %s", e);
  const char *stats = (const char *)sqlite3_column_text(g_json, 1);
  double total = 0, min_rank = 0, min_weight = 0;
  long count = 0;
  FZ_CHECK(stats && sscanf(stats, "%lf %lf %lf %ld", &total, &min_rank, &min_weight, &count) == 4,
           "json stats '%s' for %s", stats ? stats : "(null)", e);
  FZ_CHECK(count >= 1 && min_rank >= 1 && min_weight >= 0, "F7: bad entry in %s", e);
  if (have_f) {
    double tol = 1e-9 * fabs(f) + 1e-300;
    /* The JSON prints 15 significant digits. */
    tol += 1e-14 * fabs(total) * (double)count;
    FZ_CHECK(fabs(total - f) <= tol, "F7: contributions add up to %.17g, rrf_fuse %.17g: %s",
             total, f, e);
  }
  sqlite3_reset(g_json);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  Fz fz = {data, size};
  Row rows[MAX_ROWS];
  int nrows = 0;
  Query q;
  if (size < 6) return 0;
  uint8_t b0 = fz_u8(&fz), b1 = fz_u8(&fz), b2 = fz_u8(&fz), b3 = fz_u8(&fz);
  uint8_t b4 = fz_u8(&fz);
  /* Sometimes a small SQLITE_LIMIT_LENGTH: rrf_explain's JSON may exceed it. */
  int limit = b4 < 32 ? 1000 + 100 * b4 : 0; /* above any row's record */
  q.kind = b0 % 8 < 2 ? K_GROUP : b0 % 8 < 3 ? K_ALL : K_WINDOW;
  q.unit = (b0 >> 3) % 4;
  q.order = (b0 >> 5) % 8 == 0 ? 0 : (b0 >> 5) % 8 == 1 ? 2 : 1;
  q.start = b1 % 4;            /* UNB_PREC, PREC, CURRENT, FOLL */
  q.end = 1 + b2 % 4;          /* PREC, CURRENT, FOLL, UNB_FOLL */
  if (q.end < q.start) q.end = q.start == B_FOLL ? B_FOLL : B_CURRENT;
  q.x = (b1 >> 2) % 6;
  q.y = (b2 >> 2) % 6;
  q.partition = b3 & 1;
  q.desc = (b3 >> 1) & 1;
  q.exclude = (b3 >> 2) % 5;
  q.filter = (b3 >> 5) & 1;
  q.nargs = 1 + (b3 >> 6) % 3;

  sqlite3_int64 id = 0;
  while (fz.n >= 5 && nrows < MAX_ROWS) {
    Row *r = &rows[nrows++];
    uint8_t g = fz_u8(&fz);
    id += 1 + g % 3;
    r->id = id;
    r->grp = (g >> 2) % 3;
    r->list = list_val(fz_u8(&fz));
    r->rank = rank_val(fz_u8(&fz));
    r->weight = weight_val(fz_u8(&fz));
    r->k = k_val(fz_u8(&fz));
    sqlite3_bind_int64(g_insert, 1, r->id);
    sqlite3_bind_int(g_insert, 2, r->grp);
    bind_val(g_insert, 3, &r->list);
    bind_val(g_insert, 4, &r->rank);
    bind_val(g_insert, 5, &r->weight);
    bind_val(g_insert, 6, &r->k);
    FZ_CHECK(sqlite3_step(g_insert) == SQLITE_DONE, "insert: %s", sqlite3_errmsg(g_db));
    sqlite3_reset(g_insert);
  }

  /* Which rows may be stepped, and are they valid for each function? */
  int fuse_ok = 1, explain_ok = 1;
  for (int i = 0; i < nrows; i++) {
    if (q.filter && rows[i].id % 3 == 0) continue;
    fuse_ok &= fuse_row_ok(&rows[i], q.nargs);
    explain_ok &= explain_row_ok(&rows[i], q.nargs);
  }

  Out outs[3][MAX_ROWS + 1];
  int nout[3], err[3];
  int old_limit = sqlite3_limit(g_db, SQLITE_LIMIT_LENGTH, -1);
  if (limit) sqlite3_limit(g_db, SQLITE_LIMIT_LENGTH, limit);
  for (int which = 1; which <= 3; which++) {
    Buf sql = {0};
    query_sql(&sql, &q, which);
    if (getenv("FUZZ_VERBOSE")) fprintf(stderr, "%s\n", sql.s);
    err[which - 1] = run_query(sql.s, outs[which - 1], &nout[which - 1], which);
    buf_free(&sql);
  }

  sqlite3_limit(g_db, SQLITE_LIMIT_LENGTH, old_limit);

  /* Predictions, per output row of the fuse-only query. */
  int frame[MAX_ROWS];
  for (int which = 1; which <= 3; which++) {
    int w = which - 1;
    int ok = (which & 1 ? fuse_ok : 1) && (which & 2 ? explain_ok : 1);
    int overflow = 0;
    if (err[w] && !ok) continue; /* an invalid row: an error is expected */
    for (int o = 0; o < nout[w]; o++) {
      Out *out = &outs[w][o];
      /* F5 between the two functions of the same frame. */
      if (which == 3) {
        FZ_CHECK(out->f_null == out->e_null, "F5: rrf_fuse %s but rrf_explain %s",
                 out->f_null ? "NULL" : "not NULL", out->e_null ? "NULL" : "not NULL");
      }
      if ((which & 2) && !out->e_null) check_explain_json(out->e, which == 3, out->f);
      if ((which & 1) && !out->f_null) {
        FZ_CHECK(isfinite(out->f) && out->f >= 0, "rrf_fuse returned %.17g", out->f);
      }
      if (!ok) continue;
      int m = frame_rows(&q, rows, nrows, out->key, frame);
      if (m < 0) continue;
      long double sum = 0;
      int contributors = 0;
      for (int i = 0; i < m; i++) {
        const Row *r = &rows[frame[i]];
        if (r->rank.type == SQLITE_NULL || (q.filter && r->id % 3 == 0)) continue;
        sum += contribution(r, q.nargs);
        contributors++;
      }
      if (sum > (long double)DBL_MAX * (1 - 1e-9L)) overflow = 1;
      if (which & 1) {
        FZ_CHECK(out->f_null == (contributors == 0), "F5: key %lld: %d contributors, rrf_fuse %s",
                 (long long)out->key, contributors, out->f_null ? "NULL" : "not NULL");
        if (!out->f_null) {
          double expect = (double)sum;
          if (getenv("FUZZ_VERBOSE"))
            fprintf(stderr, "  key %lld: rrf_fuse %.17g, expected %.17g\n", (long long)out->key,
                    out->f, expect);
          FZ_CHECK(fabs(out->f - expect) <= 1e-9 * fabs(expect) + 1e-300,
                   "F1/F6: key %lld: rrf_fuse %.17g, expected %.17g", (long long)out->key,
                   out->f, expect);
        }
      }
      if (which == 2) {
        FZ_CHECK(out->e_null == (contributors == 0), "F5: key %lld: %d contributors, rrf_explain %s",
                 (long long)out->key, contributors, out->e_null ? "NULL" : "not NULL");
      }
    }
    if (ok && err[w]) {
      /* Only an overflowing sum may fail a query over valid rows. Contributions
      ** are >= 0, so no frame sums to more than all the rows together. */
      long double all = 0;
      for (int j = 0; j < nrows; j++) {
        if (rows[j].rank.type != SQLITE_NULL && !(q.filter && rows[j].id % 3 == 0))
          all += contribution(&rows[j], q.nargs);
      }
      overflow |= all > (long double)DBL_MAX * (1 - 1e-9L);
      int toobig = limit && (which & 2) && g_errcode[w] == SQLITE_TOOBIG &&
                   strncmp(g_errmsg[w], "rrf_explain: the result is longer than", 38) == 0;
      FZ_CHECK(toobig || (overflow && strstr(g_errmsg[w], "overflow")),
               "valid rows (overflow %d), yet an error: %s", overflow, g_errmsg[w]);
    }
  }
  for (int w = 0; w < 3; w++) free_outs(outs[w], nout[w]);
  FZ_CHECK(sqlite3_step(g_delete) == SQLITE_DONE, "delete");
  sqlite3_reset(g_delete);
  return 0;
}
