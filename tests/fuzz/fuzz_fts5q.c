/*
** fuzz_fts5q: fts5_query(text [, mode [, stopwords [, tokenize]]]) and FTS5 MATCH
** of what it returns (csrc/fts5q.c; requirements Q1..Q14; mode 'terms', Q15, is
** tested in tests/test_fts5_query.py).
**
** Input: byte 0 picks the type of `text` (TEXT of the raw bytes — invalid UTF-8
** and NULs included — INTEGER, REAL, BLOB, NULL), byte 1 the mode (none, 'or',
** 'and', 'AND', 'Or', NULL, raw text, INTEGER, BLOB), the rest is the text.
** If the rest holds a 0x1F byte, the text ends there and what follows is
**   S stopwords [0x1F tokenize]
** where the selector byte S picks the stopwords/tokenize arguments (see
** `Extra`): NULL or whitespace stopwords (the output must equal the 2-argument
** one, whatever the tokenize text), raw stopwords with a built-in spec (the
** output must equal a re-implementation of Q10..Q12 on the harness's own FTS5
** tokenizer instances), raw stopwords and a raw tokenize spec (grammar, MATCH,
** errors name the function), non-TEXT stopwords or tokenize (exact errors).
** Without a 0x1F byte the call has two arguments, as before.
**
** Checked: NULL -> NULL; a BLOB text or a bad mode -> the exact error (Q6); else
** the result is '""' or '"tok"' joined by " OR " / " AND " (Q1, Q5) with tokens
** that are valid UTF-8, hold no ASCII punctuation or space (Q2), are distinct
** ASCII-case-insensitively (Q4), at most 1000 (Q7), and cover every ASCII word
** of the text when fewer than 1000; the result, in both modes, MATCHes four FTS5
** tables (unicode61, porter, ascii, trigram tokenizers) without an error, and
** the AND query never matches more rows than the OR query. With stopwords the
** two modes keep the same tokens, a subsequence of the unpruned ones.
*/
#include "fuzz_common.h"

static sqlite3 *g_db;
static sqlite3_stmt *g_match[4], *g_inline, *g_call[5];
static const char *const kTables[4] = {"docs", "docs_porter", "docs_ascii", "docs_tri"};

/* Tokenize specs with the words FTS5's own parser would give, for the oracle. */
#define NSPECS 8
static const char *const kSpecs[NSPECS] = {
    "unicode61", "porter unicode61", "trigram", "ascii", "unicode61 remove_diacritics 2",
    "unicode61 separators 'x'", "'porter' \"ascii\"", "trigram case_sensitive 1"};
static const char *kSpecArgs[NSPECS][4] = {
    {"unicode61"}, {"porter", "unicode61"}, {"trigram"}, {"ascii"},
    {"unicode61", "remove_diacritics", "2"}, {"unicode61", "separators", "x"},
    {"porter", "ascii"}, {"trigram", "case_sensitive", "1"}};
static fts5_tokenizer g_tk[NSPECS];
static Fts5Tokenizer *g_tok[NSPECS];

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
  g_call[1] = fz_prepare(g_db, "SELECT fts5_query(?1)");
  g_call[2] = fz_prepare(g_db, "SELECT fts5_query(?1, ?2)");
  g_call[3] = fz_prepare(g_db, "SELECT fts5_query(?1, ?2, ?3)");
  g_call[4] = fz_prepare(g_db, "SELECT fts5_query(?1, ?2, ?3, ?4)");

  /* The harness's own tokenizers (the oracle of Q10). */
  fts5_api *api = NULL;
  sqlite3_stmt *st = fz_prepare(g_db, "SELECT fts5(?1)");
  sqlite3_bind_pointer(st, 1, (void *)&api, "fts5_api_ptr", NULL);
  sqlite3_step(st);
  sqlite3_finalize(st);
  FZ_CHECK(api != NULL, "no FTS5");
  for (int k = 0; k < NSPECS; k++) {
    void *user = NULL;
    int nargs = 0;
    while (nargs < 4 && kSpecArgs[k][nargs]) nargs++;
    FZ_CHECK(api->xFindTokenizer(api, kSpecArgs[k][0], &user, &g_tk[k]) == SQLITE_OK, "find %s",
             kSpecs[k]);
    FZ_CHECK(g_tk[k].xCreate(user, kSpecArgs[k] + 1, nargs - 1, &g_tok[k]) == SQLITE_OK,
             "create %s", kSpecs[k]);
  }
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

/* The stopwords and tokenize arguments (type 0: absent). */
typedef struct Extra {
  Arg stop, tok;
} Extra;

/* fts5_query(text [, mode [, stopwords [, tokenize]]]): 0 with *out (malloc'd,
** NULL for SQL NULL), or 1 with the error message in err. */
static int call(const Arg *text, const Arg *mode, const Extra *ex, char **out, int *outn,
                char *err, size_t cap) {
  static const Arg kNull = {SQLITE_NULL, 0, 0, NULL, 0};
  int nargs = ex && ex->tok.type ? 4 : ex && ex->stop.type ? 3 : mode->type ? 2 : 1;
  sqlite3_stmt *st = g_call[nargs];
  bind(st, 1, text);
  if (nargs >= 2) bind(st, 2, mode->type ? mode : &kNull);
  if (nargs >= 3) bind(st, 3, ex->stop.type ? &ex->stop : &kNull);
  if (nargs >= 4) bind(st, 4, &ex->tok);
  int rc = sqlite3_step(st);
  if (getenv("FUZZ_VERBOSE"))
    fprintf(stderr, "fts5_query(%d bytes, mode type %d, %d args) under limit %d: rc %d %s\n",
            text->n, mode->type, nargs, sqlite3_limit(g_db, SQLITE_LIMIT_LENGTH, -1), rc,
            rc == SQLITE_ROW ? "" : sqlite3_errmsg(g_db));
  *out = NULL;
  *outn = 0;
  if (rc != SQLITE_ROW) {
    const char *msg = sqlite3_errmsg(g_db);
    if (strncmp(msg, "fts5_query: ", 12) == 0) /* may quote a spec holding "unknown error" */
      FZ_CHECK(rc == SQLITE_ERROR || rc == SQLITE_TOOBIG, "step returned %d (%s)", rc, msg);
    else
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

static int is_space(unsigned char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r';
}

/* Q8: is t[0..n) one of the whitespace-separated terms of the stopwords? */
static int in_stopwords(const Arg *stop, const char *t, int n) {
  const unsigned char *s = stop->p;
  for (int i = 0; i < stop->n;) {
    while (i < stop->n && is_space(s[i])) i++;
    int st = i;
    while (i < stop->n && !is_space(s[i])) i++;
    if (i > st && i - st == n && memcmp(s + st, t, (size_t)n) == 0) return 1;
  }
  return 0;
}

static int has_stopword(const Arg *stop) {
  for (int i = 0; i < stop->n; i++)
    if (!is_space(((const unsigned char *)stop->p)[i])) return 1;
  return 0;
}

typedef struct Oracle {
  const Arg *stop;
  int nterm, first_stop;
} Oracle;

static int oracle_cb(void *p, int tflags, const char *t, int n, int s, int e) {
  Oracle *o = p;
  (void)tflags;
  (void)s;
  (void)e;
  if (o->nterm++ == 0) o->first_stop = in_stopwords(o->stop, t, n);
  return SQLITE_OK;
}

/* Q10: the token is dropped under spec k. */
static int oracle_drops(int k, const Arg *stop, const Tok *t) {
  Oracle o = {stop, 0, 0};
  int rc = g_tk[k].xTokenize(g_tok[k], &o, FTS5_TOKENIZE_QUERY, t->p, t->n, oracle_cb);
  FZ_CHECK(rc == SQLITE_OK, "oracle tokenizer %s failed: %d", kSpecs[k], rc);
  return o.nterm == 1 && o.first_stop;
}

/* Q10..Q12: the pruned tokens (toks, nt) against the unpruned ones (all, na <= 1000):
** the cap comes first (Q12), so they are the unpruned ones less the dropped ones. */
static void check_pruning(int k, const Arg *stop, const Tok *all, int na, const Tok *toks,
                          int nt, const char *e) {
  int nkept = 0, j = 0;
  for (int i = 0; i < na; i++) nkept += !oracle_drops(k, stop, &all[i]);
  for (int i = 0; i < na; i++) {
    if (nkept > 0 && oracle_drops(k, stop, &all[i])) continue; /* Q11: none dropped */
    FZ_CHECK(j < nt && toks[j].n == all[i].n && memcmp(toks[j].p, all[i].p, (size_t)all[i].n) == 0,
             "Q10 (%s): token %d '%.*s' of the unpruned query is not the next kept one in %s",
             kSpecs[k], i, all[i].n, all[i].p, e);
    j++;
  }
  FZ_CHECK(j == nt, "Q10 (%s): %d tokens kept, expected %d: %s", kSpecs[k], nt, j, e);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  Fz f = {data, size};
  if (size < 2) return 0;
  uint8_t tk = fz_u8(&f), mk = fz_u8(&f);
  size_t n;
  const uint8_t *rest = fz_take(&f, f.n, &n);
  Arg text = {SQLITE_TEXT, 0, 0, rest, (int)n}, mode = {0, 0, 0, NULL, 0};

  /* text 0x1F S stopwords [0x1F tokenize]: the stopwords and tokenize arguments. */
  Extra ex = {{0, 0, 0, NULL, 0}, {0, 0, 0, NULL, 0}};
  Extra *exargs = NULL; /* NULL: two arguments, as before */
  int spec = -1;          /* the oracle's spec, or -1 */
  int stop_err = 0;       /* 1: stopwords of a wrong type; 2: tokenize of a wrong type */
  int same_as_plain = 0;  /* Q8: the output is the two-argument one */
  const char *kTypes[3] = {"BLOB", "INTEGER", "REAL"};
  int bad_type = 0;
  const uint8_t *sep = n ? memchr(rest, 0x1F, n) : NULL;
  if (sep != NULL && sep + 1 < rest + n) {
    size_t tn = (size_t)(sep - rest);
    uint8_t sel = sep[1];
    const uint8_t *sw = sep + 2, *end = rest + n;
    const uint8_t *sep2 = memchr(sw, 0x1F, (size_t)(end - sw));
    Arg stop = {SQLITE_TEXT, 0, 0, sw, (int)((sep2 ? sep2 : end) - sw)};
    Arg tokz = {0, 0, 0, NULL, 0};
    if (sep2) tokz = (Arg){SQLITE_TEXT, 0, 0, sep2 + 1, (int)(end - sep2 - 1)};
    text.n = (int)tn;
    n = tn;
    exargs = &ex;
    bad_type = (sel >> 3) % 3;
    switch (sel % 8) {
    case 0: /* NULL stopwords, three arguments */
      ex.stop.type = SQLITE_NULL;
      same_as_plain = 1;
      break;
    case 1: { /* whitespace stopwords: the tokenize text is never looked at */
      static const char *const kBlank[4] = {"", " ", "\t\n\v\f\r ", "   "};
      ex.stop = (Arg){SQLITE_TEXT, 0, 0, kBlank[(sel >> 3) % 4], (int)strlen(kBlank[(sel >> 3) % 4])};
      ex.tok = tokz.type ? tokz : (Arg){SQLITE_NULL, 0, 0, NULL, 0};
      same_as_plain = 1;
      break;
    }
    case 2: /* the default tokenizer, three arguments */
      ex.stop = stop;
      spec = 0;
      break;
    case 3: /* a built-in spec */
      ex.stop = stop;
      spec = (sel >> 3) % NSPECS;
      ex.tok = (Arg){SQLITE_TEXT, 0, 0, kSpecs[spec], (int)strlen(kSpecs[spec])};
      break;
    case 4: /* a raw spec */
      ex.stop = stop;
      ex.tok = tokz.type ? tokz : (Arg){SQLITE_TEXT, 0, 0, "", 0};
      break;
    case 5: /* stopwords of a wrong type */
      ex.stop = stop;
      ex.stop.type = bad_type == 0 ? SQLITE_BLOB : bad_type == 1 ? SQLITE_INTEGER : SQLITE_FLOAT;
      ex.stop.i = 7;
      ex.stop.d = 0.25;
      if (tokz.type) ex.tok = tokz;
      stop_err = 1;
      break;
    case 6: /* tokenize of a wrong type */
      ex.stop = stop;
      ex.tok = tokz.type ? tokz : (Arg){SQLITE_TEXT, 0, 0, "porter", 6};
      ex.tok.type = bad_type == 0 ? SQLITE_BLOB : bad_type == 1 ? SQLITE_INTEGER : SQLITE_FLOAT;
      ex.tok.i = 3;
      ex.tok.d = 1.5;
      stop_err = 2;
      break;
    default: /* NULL tokenize: the default tokenizer */
      ex.stop = stop;
      ex.tok = (Arg){SQLITE_NULL, 0, 0, NULL, 0};
      spec = 0;
      break;
    }
    if (!stop_err && ex.stop.type == SQLITE_TEXT && !has_stopword(&ex.stop)) {
      same_as_plain = 1; /* Q8: no stopword at all */
      spec = -1;
    }
  }
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
    if (mn == 5 && lower(rest[0]) == 't' && lower(rest[1]) == 'e' && lower(rest[2]) == 'r' &&
        lower(rest[3]) == 'm' && lower(rest[4]) == 's')
      return 0; /* mode 'terms' (Q15) gives JSON: tested in tests/test_fts5_query.py */
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
  /* Never below an argument's length either: binding it would fail (SQLITE_TOOBIG)
  ** and leave the parameter NULL. */
  if (limit && exargs && limit < ex.stop.n) limit = ex.stop.n;
  if (limit && exargs && limit < ex.tok.n) limit = ex.tok.n;
  int old_limit = sqlite3_limit(g_db, SQLITE_LIMIT_LENGTH, -1);
  if (limit) sqlite3_limit(g_db, SQLITE_LIMIT_LENGTH, limit);
  char *out = NULL, err[512];
  int outn = 0;
  int rc = call(&text, &mode, exargs, &out, &outn, err, sizeof err);
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
    FZ_CHECK(rc == 1 && strcmp(err, "fts5_query: mode must be 'or', 'and' or 'terms'") == 0,
             "Q6: bad mode gave %s", rc ? err : out);
    free(out);
    return 0;
  }
  if (stop_err) { /* Q8, Q9 */
    char want[128];
    snprintf(want, sizeof want, "fts5_query: %s must be TEXT or NULL, got %s",
             stop_err == 1 ? "stopwords" : "tokenize", kTypes[bad_type]);
    FZ_CHECK(rc == 1 && strcmp(err, want) == 0, "Q8/Q9: wanted '%s', got %s", want,
             rc ? err : out);
    free(out);
    return 0;
  }
  if (rc && exargs && !same_as_plain && spec < 0) { /* a raw spec may be refused (Q9) */
    FZ_CHECK(strncmp(err, "fts5_query: ", 12) == 0, "Q9: %s", err);
    free(out);
    return 0;
  }
  FZ_CHECK(rc == 0 && out != NULL, "fts5_query failed: %s", rc ? err : "NULL");

  Tok *toks = malloc(sizeof(Tok) * 1001);
  FZ_CHECK(toks, "malloc");
  int nt = check_expr(out, outn, is_and ? " AND " : " OR ", toks);
  int pruning = exargs && !same_as_plain;
  if (text.type == SQLITE_TEXT && nt < 1000 && !pruning) check_coverage(rest, (int)n, toks, nt);
  if (exargs) { /* Q8: against the two-argument call, without a lowered limit */
    char *plain = NULL;
    int plainn = 0;
    FZ_CHECK(call(&text, &mode, NULL, &plain, &plainn, err, sizeof err) == 0 && plain,
             "the two-argument call failed: %s", err);
    if (same_as_plain) {
      FZ_CHECK(plainn == outn && memcmp(plain, out, (size_t)outn) == 0,
               "Q8: without stopwords %s, with %s", plain, out);
    } else {
      Tok *all = malloc(sizeof(Tok) * 1001);
      FZ_CHECK(all, "malloc");
      int na = check_expr(plain, plainn, is_and ? " AND " : " OR ", all);
      if (spec >= 0) check_pruning(spec, &ex.stop, all, na, toks, nt, out);
      /* Q11: nothing at all is left out only when everything would be */
      FZ_CHECK(nt > 0 || na == 0, "Q11: no token left of %d: %s", na, out);
      free(all);
    }
    free(plain);
  }

  /* The same tokens in the other mode; both MATCH every table (Q2, Q3). */
  Arg other = {SQLITE_TEXT, 0, 0, is_and ? "or" : "and", is_and ? 2 : 3};
  char *out2 = NULL;
  int out2n = 0;
  if (limit) sqlite3_limit(g_db, SQLITE_LIMIT_LENGTH, limit);
  rc = call(&text, &other, exargs, &out2, &out2n, err, sizeof err);
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
