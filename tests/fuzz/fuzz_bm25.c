/*
** fuzz_bm25: rrf_bm25(t, n [, weight...]) against FTS5's bm25() (csrc/bm25.c;
** requirements B1..B9).
**
** The input decodes to an FTS5 table (detail=full, column or none; 1 to 3
** columns; up to 300 rows of words from a 12-word vocabulary, so that rows tie
** and terms are frequent), a MATCH expression built from words, prefixes,
** phrases, NEAR, column filters, AND / OR / NOT and parentheses (it may be
** invalid: FTS5's error is then expected from both functions), n (ordinary or
** hostile: 0, -1, 2.5, Inf, TEXT, BLOB, NULL, 2^63-1, 1e300), up to 4 weights
** (ordinary, zero, negative, huge, Inf, TEXT, NULL) and the scan direction.
**
** Checked, row by row in the order FTS5 visits them: rrf_bm25(t, NULL, w) is
** bm25(t, w) bit for bit (B2, B5); rrf_bm25(t, n, w) is bm25 or, for a pruned row,
** a value below bm25 and strictly worse than the n-th best bm25 value, never
** within the first n rows visited (B3); ORDER BY rrf_bm25(t, n, w), rowid LIMIT m
** gives bm25's rows and values for m = 1, n/2 and n (B4); a bad n is the error
** "rrf_bm25: n must be a positive integer or NULL, got ..." (B6).
*/
#include "fuzz_common.h"

#define MAX_ROWS 300
#define MAX_ROWS_KEPT 4096

static const char *const kWords[] = {"aa", "ab", "ba", "bb", "ca", "cb",
                                     "da", "db", "ea", "eb", "fa", "fb"};
#define NWORDS ((int)(sizeof kWords / sizeof kWords[0]))
static const char *const kCols[] = {"x", "y", "z"};

typedef struct Row {
  sqlite3_int64 rowid;
  int exact_null, mine_null, null_null;
  double exact, mine, nulln;
} Row;

static sqlite3 *g_db;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  g_db = fz_open();
  return 0;
}

static int same_double(double a, double b) { return memcmp(&a, &b, sizeof a) == 0; }

static void add_word(Buf *b, uint8_t v) { buf_printf(b, "%s", kWords[v % NWORDS]); }

/* One MATCH expression from the input (not necessarily valid). */
static void build_query(Fz *f, Buf *q, int ncol, int depth) {
  uint8_t op = fz_u8(f);
  if (depth > 4 || fz_empty(f)) op = 0;
  switch (op % 10) {
  case 0: case 1: case 2:
    add_word(q, fz_u8(f));
    break;
  case 3: /* prefix */
    buf_printf(q, "%c*", kWords[fz_u8(f) % NWORDS][0]);
    break;
  case 4: /* phrase */
    buf_printf(q, "\"");
    add_word(q, fz_u8(f));
    buf_printf(q, " ");
    add_word(q, fz_u8(f));
    buf_printf(q, "\"");
    break;
  case 5: /* NEAR */
    buf_printf(q, "NEAR(");
    add_word(q, fz_u8(f));
    buf_printf(q, " ");
    add_word(q, fz_u8(f));
    buf_printf(q, ", %d)", fz_u8(f) % 6);
    break;
  case 6: /* column filter */
    buf_printf(q, "%s : ", kCols[fz_u8(f) % ncol]);
    build_query(f, q, ncol, depth + 1);
    break;
  default: {
    static const char *const ops[] = {" OR ", " AND ", " NOT "};
    buf_printf(q, "(");
    build_query(f, q, ncol, depth + 1);
    buf_printf(q, "%s", ops[op % 3]);
    build_query(f, q, ncol, depth + 1);
    buf_printf(q, ")");
    break;
  }
  }
}

/* n as SQL, with whether it is valid and its value (0 for NULL). */
static const char *n_sql(uint8_t v, int *valid, sqlite3_int64 *n) {
  static char buf[32];
  *valid = 1;
  if (v < 200) {
    *n = 1 + v % 40;
    snprintf(buf, sizeof buf, "%lld", (long long)*n);
    return buf;
  }
  switch (v % 12) {
  case 0: *n = 0; return "NULL";
  case 1: *valid = 0; return "0";
  case 2: *valid = 0; return "-1";
  case 3: *valid = 0; return "2.5";
  case 4: *valid = 0; return "1e999";
  case 5: *valid = 0; return "'abc'";
  case 6: *valid = 0; return "x'01'";
  case 7: *n = 9223372036854775807LL; return "9223372036854775807";
  case 8: *n = 9223372036854775807LL; return "1e300";
  case 9: *n = 3; return "'3'";
  case 10: *n = 7; return "7.0";
  default: *valid = 0; return "-9223372036854775808";
  }
}

static const char *weight_sql(uint8_t v) {
  static const char *const w[] = {"1", "2.0", "0.5", "0", "10", "0.125", "-1", "1e300",
                                  "1e999", "'2'", "NULL", "'x'", "-0.0", "1e-300", "3", "1"};
  return w[v % 16];
}

static int read_rows(sqlite3_stmt *st, Row *rows, int *count, int *rc_out) {
  int k = 0, rc;
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
    if (k < MAX_ROWS_KEPT) {
      Row *r = &rows[k];
      r->rowid = sqlite3_column_int64(st, 0);
      r->exact_null = sqlite3_column_type(st, 1) == SQLITE_NULL;
      r->exact = sqlite3_column_double(st, 1);
      r->null_null = sqlite3_column_type(st, 2) == SQLITE_NULL;
      r->nulln = sqlite3_column_double(st, 2);
      r->mine_null = sqlite3_column_type(st, 3) == SQLITE_NULL;
      r->mine = sqlite3_column_double(st, 3);
      k++;
    }
  }
  *count = k;
  *rc_out = rc;
  return rc == SQLITE_DONE;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y ? 1 : 0;
}

/* The rows and values of an ORDER BY ... LIMIT m statement, compared. */
static void check_top(const char *table, const char *visit, const char *wsql, const char *nsql,
                      int m, const char *query) {
  char *a = sqlite3_mprintf(
      "WITH r AS MATERIALIZED (SELECT rowid AS id, bm25(%s%s) AS s FROM %s WHERE %s MATCH ?1%s) "
      "SELECT id, s FROM r ORDER BY s, id LIMIT %d", table, wsql, table, table, visit, m);
  char *b = sqlite3_mprintf(
      "WITH r AS MATERIALIZED (SELECT rowid AS id, rrf_bm25(%s, %s%s) AS s FROM %s WHERE %s "
      "MATCH ?1%s) SELECT id, s FROM r ORDER BY s, id LIMIT %d",
      table, nsql, wsql, table, table, visit, m);
  sqlite3_stmt *sa = fz_prepare(g_db, a), *sb = fz_prepare(g_db, b);
  sqlite3_bind_text(sa, 1, query, -1, SQLITE_STATIC);
  sqlite3_bind_text(sb, 1, query, -1, SQLITE_STATIC);
  for (int i = 0;; i++) {
    int ra = sqlite3_step(sa), rb = sqlite3_step(sb);
    FZ_CHECK(ra == rb, "top %d: step %d vs %d at %d (%s)", m, ra, rb, i, sqlite3_errmsg(g_db));
    if (ra != SQLITE_ROW) break;
    FZ_CHECK(sqlite3_column_int64(sa, 0) == sqlite3_column_int64(sb, 0), "top %d: row %d differs",
             m, i);
    FZ_CHECK(sqlite3_column_type(sa, 1) == sqlite3_column_type(sb, 1) &&
                 same_double(sqlite3_column_double(sa, 1), sqlite3_column_double(sb, 1)),
             "top %d: value %d differs: %.17g vs %.17g", m, i, sqlite3_column_double(sa, 1),
             sqlite3_column_double(sb, 1));
  }
  sqlite3_finalize(sa);
  sqlite3_finalize(sb);
  sqlite3_free(a);
  sqlite3_free(b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  Fz f = {data, size};
  if (size < 6) return 0;
  uint8_t shape = fz_u8(&f), nbyte = fz_u8(&f), wbyte = fz_u8(&f);
  int detail = shape % 3, ncol = 1 + (shape / 3) % 3, desc = (shape / 9) % 2;
  int nweights = wbyte % 5;
  static const char *const kDetail[] = {"full", "column", "none"};

  Buf sql = {0};
  fz_exec(g_db, "DROP TABLE IF EXISTS t");
  buf_printf(&sql, "CREATE VIRTUAL TABLE t USING fts5(");
  for (int c = 0; c < ncol; c++) buf_printf(&sql, "%s, ", kCols[c]);
  buf_printf(&sql, "detail=%s)", kDetail[detail]);
  fz_exec(g_db, sql.s);
  buf_free(&sql);

  /* The query: bytes up to the first 0xFF. */
  Buf q = {0};
  {
    const uint8_t *end = memchr(f.p, 0xFF, f.n);
    size_t qn = end ? (size_t)(end - f.p) : f.n / 4, got;
    Fz qf = {fz_take(&f, qn, &got), got};
    if (end) fz_u8(&f);
    build_query(&qf, &q, ncol, 0);
  }

  /* The rows: each byte is a word (low nibble) and, in its high nibble, where
  ** the next word goes (same column, next column, next row) and how often the
  ** rows repeat. */
  sqlite3_stmt *ins;
  {
    Buf s = {0};
    buf_printf(&s, "INSERT INTO t VALUES (");
    for (int c = 0; c < ncol; c++) buf_printf(&s, c ? ", ?" : "?");
    buf_printf(&s, ")");
    ins = fz_prepare(g_db, s.s);
    buf_free(&s);
  }
  Buf cols[3] = {{0}, {0}, {0}};
  int col = 0, rows = 0;
  fz_exec(g_db, "BEGIN");
  while (!fz_empty(&f) && rows < MAX_ROWS) {
    uint8_t v = fz_u8(&f);
    buf_printf(&cols[col], "%s%s", cols[col].n ? " " : "", kWords[(v & 15) % NWORDS]);
    int act = v >> 4;
    if (act >= 12 || fz_empty(&f)) {
      int repeat = act == 15 ? 20 : 1;
      for (int r = 0; r < repeat && rows < MAX_ROWS; r++, rows++) {
        for (int c = 0; c < ncol; c++)
          sqlite3_bind_text(ins, c + 1, cols[c].s ? cols[c].s : "", -1, SQLITE_STATIC);
        if (sqlite3_step(ins) != SQLITE_DONE) fz_fail("insert: %s", sqlite3_errmsg(g_db));
        sqlite3_reset(ins);
      }
      for (int c = 0; c < ncol; c++) buf_free(&cols[c]);
      col = 0;
    } else if (act >= 9) {
      col = (col + 1) % ncol;
    }
  }
  fz_exec(g_db, "COMMIT");
  sqlite3_finalize(ins);
  for (int c = 0; c < ncol; c++) buf_free(&cols[c]);

  /* n and the weights */
  int valid;
  sqlite3_int64 n;
  const char *nsql = n_sql(nbyte, &valid, &n);
  Buf w = {0};
  buf_add(&w, "", 0);
  for (int i = 0; i < nweights; i++) buf_printf(&w, ", %s", weight_sql((uint8_t)(wbyte * 7 + i * 13 + shape)));
  const char *visit = desc ? " ORDER BY rowid DESC" : "";

  char *stmt = sqlite3_mprintf("SELECT rowid, bm25(t%s), rrf_bm25(t, NULL%s), rrf_bm25(t, %s%s) "
                               "FROM t WHERE t MATCH ?1%s",
                               w.s, w.s, nsql, w.s, visit);
  if (getenv("FUZZ_VERBOSE")) fprintf(stderr, "query: %s\nsql: %s\nrows: %d\n", q.s, stmt, rows);
  sqlite3_stmt *st = fz_prepare(g_db, stmt);
  sqlite3_bind_text(st, 1, q.s, -1, SQLITE_STATIC);
  static Row rowbuf[MAX_ROWS_KEPT];
  int count = 0, rc;
  int ok = read_rows(st, rowbuf, &count, &rc);
  if (!ok) {
    const char *msg = sqlite3_errmsg(g_db);
    if (strstr(msg, "rrf_bm25: n must be a positive integer or NULL, got") == msg) {
      FZ_CHECK(!valid && count == 0, "n %s refused: %s", nsql, msg);
    } else {
      /* an FTS5 syntax error: bm25 alone must fail the same way */
      FZ_CHECK(strstr(msg, "rrf_bm25") == NULL, "unexpected rrf_bm25 error: %s", msg);
      char *ref = sqlite3_mprintf("SELECT bm25(t%s) FROM t WHERE t MATCH ?1", w.s);
      sqlite3_stmt *rs = fz_prepare(g_db, ref);
      sqlite3_bind_text(rs, 1, q.s, -1, SQLITE_STATIC);
      int r2;
      while ((r2 = sqlite3_step(rs)) == SQLITE_ROW) {
      }
      FZ_CHECK(r2 != SQLITE_DONE, "rrf_bm25 failed (%s) where bm25 did not", msg);
      sqlite3_finalize(rs);
      sqlite3_free(ref);
    }
  } else {
    FZ_CHECK(valid || count == 0, "bad n %s accepted", nsql);
    double *sorted = malloc(sizeof(double) * (size_t)(count ? count : 1));
    int ns = 0;
    for (int i = 0; i < count; i++)
      if (!rowbuf[i].exact_null) sorted[ns++] = rowbuf[i].exact;
    qsort(sorted, (size_t)ns, sizeof(double), cmp_double);
    for (int i = 0; i < count; i++) {
      Row *r = &rowbuf[i];
      FZ_CHECK(r->null_null == r->exact_null && (r->exact_null || same_double(r->nulln, r->exact)),
               "row %lld: rrf_bm25(t, NULL) %.17g != bm25 %.17g", (long long)r->rowid, r->nulln,
               r->exact);
      if (r->mine_null == r->exact_null && (r->exact_null || same_double(r->mine, r->exact)))
        continue;
      /* pruned (B3) */
      FZ_CHECK(n > 0 && i >= n, "row %lld (visit %d) pruned within the first n=%lld",
               (long long)r->rowid, i, (long long)n);
      FZ_CHECK(!r->mine_null && !r->exact_null && r->mine < r->exact,
               "row %lld: pruned value %.17g not below bm25 %.17g", (long long)r->rowid, r->mine,
               r->exact);
      FZ_CHECK(ns >= n && r->mine > sorted[n - 1] && r->exact > sorted[n - 1],
               "row %lld: pruned value %.17g (bm25 %.17g) not worse than the n-th best %.17g",
               (long long)r->rowid, r->mine, r->exact, ns >= n ? sorted[n - 1] : 0.0);
    }
    if (getenv("FUZZ_VERBOSE")) {
      int pruned = 0;
      for (int i = 0; i < count; i++)
        pruned += rowbuf[i].mine_null != rowbuf[i].exact_null ||
                  !same_double(rowbuf[i].mine, rowbuf[i].exact);
      fprintf(stderr, "matched: %d pruned: %d\n", count, pruned);
    }
    free(sorted);
    if (n > 0 && count > 0) {
      sqlite3_int64 cap = n < 1000 ? n : 1000;
      check_top("t", visit, w.s, nsql, 1, q.s);
      check_top("t", visit, w.s, nsql, (int)(cap / 2 ? cap / 2 : 1), q.s);
      check_top("t", visit, w.s, nsql, (int)cap, q.s);
    }
  }
  sqlite3_finalize(st);
  sqlite3_free(stmt);
  buf_free(&w);
  buf_free(&q);
  return 0;
}
