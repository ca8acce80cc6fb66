/*
** fuzz_fts5q: fts5_query(text [, mode]) and FTS5 MATCH of what it returns
** (csrc/fts5q.c; requirements Q1..Q7).
**
** Input: byte 0 picks the type of `text` (TEXT of the raw bytes — invalid UTF-8
** and NULs included — INTEGER, REAL, BLOB, NULL), byte 1 the mode (none, 'or',
** 'and', 'AND', 'Or', NULL, raw text, INTEGER, BLOB), the rest is the text.
**
** Checked: NULL -> NULL; a BLOB text or a bad mode -> the exact error (Q6); else
** the result is '""' or '"tok"' joined by " OR " / " AND " (Q1, Q5) with tokens
** that are valid UTF-8, hold no ASCII punctuation or space (Q2), are distinct
** ASCII-case-insensitively (Q4), at most 1000 (Q7), and cover every ASCII word
** of the text when fewer than 1000; the result, in both modes, MATCHes four FTS5
** tables (unicode61, porter, ascii, trigram tokenizers) without an error, and
** the AND query never matches more rows than the OR query.
*/
#include "fuzz_common.h"

static sqlite3 *g_db;
static sqlite3_stmt *g_match[4], *g_inline, *g_call1, *g_call2;
static const char *const kTables[4] = {"docs", "docs_porter", "docs_ascii", "docs_tri"};

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  g_db = fz_open();
  fz_exec(g_db, "CREATE VIRTUAL TABLE docs USING fts5(body);"
                "CREATE VIRTUAL TABLE docs_porter USING fts5(body, tokenize='porter unicode61');"
                "CREATE VIRTUAL TABLE docs_ascii USING fts5(body, tokenize='ascii');"
                "CREATE VIRTUAL TABLE docs_tri USING fts5(body, tokenize='trigram');");
  static const char *const docs[] = {
      "hello world", "AND OR NOT NEAR", "na\xc3\xafve caf\xc3\xa9 \xc3\xbc", "\xe6\x97\xa5\xe6\x9c\xac",
      "user-id 42 e-mail a/b c:d x*", "running runs ran", "0 1 2 3 a b c A B C", "\xce\xb1\xce\xb2\xce\xb3",
  };
  for (int t = 0; t < 4; t++) {
    for (size_t i = 0; i < sizeof docs / sizeof docs[0]; i++) {
      char *sql = sqlite3_mprintf("INSERT INTO %s(body) VALUES (%Q)", kTables[t], docs[i]);
      fz_exec(g_db, sql);
      sqlite3_free(sql);
    }
    char *sql = sqlite3_mprintf("SELECT count(*) FROM %s WHERE %s MATCH ?1", kTables[t], kTables[t]);
    g_match[t] = fz_prepare(g_db, sql);
    sqlite3_free(sql);
  }
  g_inline = fz_prepare(g_db, "SELECT count(*) FROM docs WHERE docs MATCH fts5_query(?1, ?2)");
  /* Prepared once: a lowered SQLITE_LIMIT_LENGTH also bounds the SQL text. */
  g_call1 = fz_prepare(g_db, "SELECT fts5_query(?1)");
  g_call2 = fz_prepare(g_db, "SELECT fts5_query(?1, ?2)");
  return 0;
}

typedef struct Arg {
  int type; /* SQLITE_NULL, _INTEGER, _FLOAT, _TEXT, _BLOB; 0: absent */
  sqlite3_int64 i;
  double d;
  const void *p;
  int n;
} Arg;

static void bind(sqlite3_stmt *st, int k, const Arg *a) {
  switch (a->type) {
  case SQLITE_INTEGER: sqlite3_bind_int64(st, k, a->i); break;
  case SQLITE_FLOAT: sqlite3_bind_double(st, k, a->d); break;
  case SQLITE_TEXT: sqlite3_bind_text(st, k, a->n ? a->p : "", a->n, SQLITE_TRANSIENT); break;
  case SQLITE_BLOB: sqlite3_bind_blob(st, k, a->n ? a->p : "", a->n, SQLITE_TRANSIENT); break;
  default: sqlite3_bind_null(st, k); break;
  }
}

/* fts5_query(text [, mode]): 0 with *out (malloc'd, NULL for SQL NULL), or 1
** with the error message in err. */
static int call(const Arg *text, const Arg *mode, char **out, int *outn, char *err, size_t cap) {
  sqlite3_stmt *st = mode->type ? g_call2 : g_call1;
  bind(st, 1, text);
  if (mode->type) bind(st, 2, mode);
  int rc = sqlite3_step(st);
  if (getenv("FUZZ_VERBOSE"))
    fprintf(stderr, "fts5_query(%d bytes, mode type %d) under limit %d: rc %d %s\n", text->n,
            mode->type, sqlite3_limit(g_db, SQLITE_LIMIT_LENGTH, -1), rc,
            rc == SQLITE_ROW ? "" : sqlite3_errmsg(g_db));
  *out = NULL;
  *outn = 0;
  if (rc != SQLITE_ROW) {
    fz_expect_named_error(g_db, rc, "fts5_query", NULL);
    snprintf(err, cap, "%s", sqlite3_errmsg(g_db));
    sqlite3_reset(st);
    sqlite3_clear_bindings(st);
    return 1;
  }
  int t = sqlite3_column_type(st, 0);
  FZ_CHECK(t == SQLITE_NULL || t == SQLITE_TEXT, "fts5_query returned type %d", t);
  if (t == SQLITE_TEXT) {
    const unsigned char *s = sqlite3_column_text(st, 0);
    int n = sqlite3_column_bytes(st, 0);
    *out = malloc((size_t)n + 1);
    FZ_CHECK(*out && s, "malloc");
    memcpy(*out, s, (size_t)n);
    (*out)[n] = 0;
    *outn = n;
  }
  FZ_CHECK(sqlite3_step(st) == SQLITE_DONE, "second row");
  sqlite3_reset(st);
  sqlite3_clear_bindings(st);
  return 0;
}

static int ascii_alnum(unsigned char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

static int lower(int c) { return c >= 'A' && c <= 'Z' ? c + 32 : c; }

typedef struct Tok {
  const char *p;
  int n;
} Tok;

/* Q1, Q2, Q4, Q5, Q7: parse and check the expression; returns the token count. */
static int check_expr(const char *e, int n, const char *joiner, Tok *toks) {
  int jn = (int)strlen(joiner), nt = 0, i = 0;
  if (n == 2 && memcmp(e, "\"\"", 2) == 0) return 0; /* Q5 */
  for (;;) {
    FZ_CHECK(i < n && e[i] == '"', "expected '\"' at %d of %s", i, e);
    int start = ++i;
    while (i < n && e[i] != '"') i++;
    FZ_CHECK(i < n, "unterminated token in %s", e);
    Tok t = {e + start, i - start};
    i++;
    FZ_CHECK(t.n > 0, "empty token in %s", e);
    FZ_CHECK(valid_utf8((const unsigned char *)t.p, t.n), "invalid UTF-8 in a token: %s", e);
    for (int k = 0; k < t.n; k++) {
      unsigned char c = (unsigned char)t.p[k];
      FZ_CHECK(c >= 0x80 || ascii_alnum(c), "Q2: ASCII 0x%02x in a token: %s", c, e);
    }
    for (int k = 0; k < nt; k++) {
      int same = toks[k].n == t.n;
      for (int m = 0; same && m < t.n; m++) same = lower(toks[k].p[m]) == lower(t.p[m]);
      FZ_CHECK(!same, "Q4: token '%.*s' repeated in %s", t.n, t.p, e);
    }
    FZ_CHECK(nt < 1000, "Q7: more than 1000 tokens");
    toks[nt++] = t;
    if (i == n) break;
    FZ_CHECK(n - i > jn && memcmp(e + i, joiner, (size_t)jn) == 0, "Q1: expected '%s' at %d of %s",
             joiner, i, e);
    i += jn;
  }
  return nt;
}

/* Every maximal run of ASCII letters and digits of the text lies inside a token
** (tokens extend runs with non-ASCII letters), when nothing was cut by Q7. */
static void check_coverage(const unsigned char *s, int n, const Tok *toks, int nt) {
  for (int i = 0; i < n;) {
    if (!ascii_alnum(s[i])) { i++; continue; }
    int st = i;
    while (i < n && ascii_alnum(s[i])) i++;
    int len = i - st, found = 0;
    for (int k = 0; k < nt && !found; k++) {
      for (int off = 0; off + len <= toks[k].n && !found; off++) {
        int same = 1;
        for (int m = 0; same && m < len; m++) same = lower(toks[k].p[off + m]) == lower(s[st + m]);
        found = same;
      }
    }
    FZ_CHECK(found, "Q2: the word '%.*s' of the text is in no token", len, s + st);
  }
}

static int match_count(int t, const char *e, int n) {
  sqlite3_stmt *st = g_match[t];
  sqlite3_bind_text(st, 1, e, n, SQLITE_STATIC);
  int rc = sqlite3_step(st);
  FZ_CHECK(rc == SQLITE_ROW, "Q2: %s MATCH %s: %s", kTables[t], e, sqlite3_errmsg(g_db));
  int c = sqlite3_column_int(st, 0);
  sqlite3_reset(st);
  return c;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  Fz f = {data, size};
  if (size < 2) return 0;
  uint8_t tk = fz_u8(&f), mk = fz_u8(&f);
  size_t n;
  const uint8_t *rest = fz_take(&f, f.n, &n);
  Arg text = {SQLITE_TEXT, 0, 0, rest, (int)n}, mode = {0, 0, 0, NULL, 0};
  static const char *const kModes[] = {"or", "and", "AND", "Or"};
  int mode_ok = 1, is_and = 0;
  switch (tk % 12) {
  case 0: text.type = SQLITE_NULL; break;
  case 1: text.type = SQLITE_BLOB; break;
  case 2: {
    sqlite3_int64 i = 0;
    memcpy(&i, rest, n < 8 ? n : 8);
    text.type = SQLITE_INTEGER;
    text.i = i;
    break;
  }
  case 3: {
    double d = 0;
    memcpy(&d, rest, n < 8 ? n : 8);
    text.type = SQLITE_FLOAT;
    text.d = isfinite(d) ? d : 1.5;
    break;
  }
  default: break;
  }
  /* A raw mode takes the first (mk >> 4) bytes of the text. */
  switch (mk % 10) {
  case 0: break;
  case 1: case 2: case 3: case 4:
    mode.type = SQLITE_TEXT;
    mode.p = kModes[mk % 10 - 1];
    mode.n = (int)strlen(mode.p);
    is_and = (mk % 10 == 2 || mk % 10 == 3);
    break;
  case 5: mode.type = SQLITE_NULL; break;
  case 6: {
    int mn = (mk >> 4) < (int)n ? (mk >> 4) : (int)n;
    mode.type = SQLITE_TEXT;
    mode.p = rest;
    mode.n = mn;
    if (mn == 2 && lower(rest[0]) == 'o' && lower(rest[1]) == 'r') break;
    if (mn == 3 && lower(rest[0]) == 'a' && lower(rest[1]) == 'n' && lower(rest[2]) == 'd') {
      is_and = 1;
      break;
    }
    mode_ok = 0;
    break;
  }
  case 7: mode.type = SQLITE_INTEGER; mode.i = 1; mode_ok = 0; break;
  case 8: mode.type = SQLITE_BLOB; mode.p = "or"; mode.n = 2; mode_ok = 0; break;
  default: mode.type = SQLITE_FLOAT; mode.d = 0.5; mode_ok = 0; break;
  }

  /* Sometimes a SQLITE_LIMIT_LENGTH just above the text: the expression may
  ** exceed it (Q6: an error naming the function). Never below 128: SQLite drops
  ** an error message longer than the limit (the error then has no text). */
  int limit = (tk & 0x80) && text.type == SQLITE_TEXT ? (int)n + 8 * (mk & 0x0f) + 32 : 0;
  if (limit && limit < 128) limit = 128;
  int old_limit = sqlite3_limit(g_db, SQLITE_LIMIT_LENGTH, -1);
  if (limit) sqlite3_limit(g_db, SQLITE_LIMIT_LENGTH, limit);
  char *out = NULL, err[512];
  int outn = 0;
  int rc = call(&text, &mode, &out, &outn, err, sizeof err);
  sqlite3_limit(g_db, SQLITE_LIMIT_LENGTH, old_limit);
  if (rc && limit && strstr(err, "fts5_query: the result is longer than SQLITE_LIMIT_LENGTH"))
    return 0;
  if (text.type == SQLITE_NULL) {
    FZ_CHECK(rc == 0 && out == NULL, "Q6: NULL text gave %s", rc ? err : out);
    return 0;
  }
  if (text.type == SQLITE_BLOB) {
    FZ_CHECK(rc == 1 && strcmp(err, "fts5_query: text must be TEXT, got BLOB") == 0,
             "Q6: BLOB text gave %s", rc ? err : out);
    free(out);
    return 0;
  }
  if (!mode_ok) {
    FZ_CHECK(rc == 1 && strcmp(err, "fts5_query: mode must be 'or' or 'and'") == 0,
             "Q6: bad mode gave %s", rc ? err : out);
    free(out);
    return 0;
  }
  FZ_CHECK(rc == 0 && out != NULL, "fts5_query failed: %s", rc ? err : "NULL");

  Tok *toks = malloc(sizeof(Tok) * 1001);
  FZ_CHECK(toks, "malloc");
  int nt = check_expr(out, outn, is_and ? " AND " : " OR ", toks);
  if (text.type == SQLITE_TEXT && nt < 1000) check_coverage(rest, (int)n, toks, nt);

  /* The same tokens in the other mode; both MATCH every table (Q2, Q3). */
  Arg other = {SQLITE_TEXT, 0, 0, is_and ? "or" : "and", is_and ? 2 : 3};
  char *out2 = NULL;
  int out2n = 0;
  if (limit) sqlite3_limit(g_db, SQLITE_LIMIT_LENGTH, limit);
  rc = call(&text, &other, &out2, &out2n, err, sizeof err);
  sqlite3_limit(g_db, SQLITE_LIMIT_LENGTH, old_limit);
  if (rc && limit && strstr(err, "fts5_query: the result is longer than SQLITE_LIMIT_LENGTH")) {
    free(toks);
    free(out);
    return 0;
  }
  FZ_CHECK(rc == 0 && out2, "other mode: %s", err);
  Tok *toks2 = malloc(sizeof(Tok) * 1001);
  FZ_CHECK(toks2, "malloc");
  int nt2 = check_expr(out2, out2n, is_and ? " OR " : " AND ", toks2);
  FZ_CHECK(nt2 == nt, "Q1: %d tokens in one mode, %d in the other", nt, nt2);
  for (int t = 0; t < 4; t++) {
    int c1 = match_count(t, out, outn), c2 = match_count(t, out2, out2n);
    int c_and = is_and ? c1 : c2, c_or = is_and ? c2 : c1;
    FZ_CHECK(c_and <= c_or, "%s: AND matches %d rows, OR %d", kTables[t], c_and, c_or);
  }
  /* In one statement, as the recall query uses it. */
  bind(g_inline, 1, &text);
  bind(g_inline, 2, &mode);
  FZ_CHECK(sqlite3_step(g_inline) == SQLITE_ROW, "MATCH fts5_query(): %s", sqlite3_errmsg(g_db));
  sqlite3_reset(g_inline);
  free(toks);
  free(toks2);
  free(out);
  free(out2);
  return 0;
}
