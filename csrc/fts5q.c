/*
** fts5_query(text [, mode [, stopwords [, tokenize]]]) -> TEXT: raw user text
** to a safe FTS5 MATCH expression, optionally without the words that occur in
** most documents.
**
** Requirements (DESIGN.md, "The extension"; tests cite them as Q1..Q13):
**   Q1. Each token is double-quoted and the tokens are joined by " OR " (mode
**       'or', the default) or " AND " (mode 'and'; case-insensitive).
**   Q2. A token is a run of ASCII letters and digits or of non-ASCII letters;
**       everything else (ASCII punctuation and spaces, Unicode spaces and
**       punctuation, invalid UTF-8) separates tokens, so - / ' " : * ^ ( ) never
**       reach FTS5's parser and no input raises a syntax error.
**   Q3. FTS5 keywords in the text (AND, OR, NOT, NEAR) are quoted like any word,
**       so they are searched as words.
**   Q4. Tokens repeated in the text (compared ASCII-case-insensitively) appear
**       once, so a repeated word does not count twice in bm25().
**   Q5. Text with no token gives '""', a phrase that matches nothing.
**   Q6. NULL -> NULL, whatever the other arguments; INTEGER and REAL are read as
**       their text; a BLOB or an unknown mode is an error naming the function,
**       and so is a result longer than the connection's SQLITE_LIMIT_LENGTH
**       (SQLITE_TOOBIG).
**   Q7. At most RRF_FTS5_MAX_TOKENS (1000) distinct tokens are kept, the first
**       ones: FTS5 parses an OR of n phrases in O(n^2) time, so an unbounded
**       paste would stall the query (100,000 terms take about a minute). With
**       stopwords the cap counts the tokens Q10 keeps (Q12).
**   Q8. stopwords: NULL, absent, '' or only ASCII whitespace -> no pruning: the
**       output is exactly that of Q1..Q7, no tokenizer is made and FTS5 is not
**       needed (tokenize is then only type-checked, Q9). TEXT: terms separated
**       by ASCII whitespace (space, tab, LF, VT, FF, CR), written as the FTS5
**       table's tokenizer emits them (for 'porter unicode61' lower-case stems
**       such as "the", "of", "studi"), compared byte for byte. Any other type
**       (BLOB, INTEGER, REAL) is an error naming the function and the type.
**   Q9. tokenize: an FTS5 tokenizer spec as written in CREATE VIRTUAL TABLE ...
**       tokenize='...': words separated by ASCII whitespace, the first naming
**       the tokenizer and the rest its arguments; a word may be quoted with
**       single quotes, as FTS5 quotes them, or double quotes, the quote doubled
**       inside (unicode61 tokenchars '-_'); a quoted word ends at its closing
**       quote, a bare one at whitespace or a quote. NULL, absent, '' or
**       only whitespace -> 'unicode61', FTS5's default. A value that is not
**       TEXT or NULL is an error naming the function; under Q10 so are an
**       unterminated quote, a NUL byte, more than RRF_FTS5_MAX_SPEC_WORDS (64)
**       words (a chain of 'porter porter ...' would recurse once per word), an
**       unknown tokenizer, and a tokenizer whose xCreate fails (naming the spec).
**  Q10. Pruning, when Q8 gives at least one stopword: each distinct token (after
**       Q2, Q4) is run through that tokenizer (FTS5's v1 tokenizer API, flag
**       FTS5_TOKENIZE_QUERY, as FTS5 tokenizes a quoted phrase). A token that
**       yields exactly one term, that term in the stopword set, is dropped; a
**       token that yields 0 or >= 2 terms is kept. Both modes prune alike.
**  Q11. If every token would be dropped, none is: the expression is exactly the
**       one without stopwords, so a query made only of common words still
**       searches.
**  Q12. Order: Q2 tokens, Q4 repeats, Q10 pruning, then Q7's cap on the tokens
**       kept: the first 1000 kept tokens (under Q11, the first 1000 tokens).
**  Q13. Resources: fts5_api is taken from the calling connection (SELECT
**       fts5(?1) with a bound "fts5_api_ptr" pointer), only under Q10; no FTS5
**       is an error. The stopword set (a hash set: O(n) to build, O(1) to look
**       up) and the tokenizer are kept with sqlite3_set_auxdata on the stopwords
**       argument, so a constant argument is parsed once per statement; the
**       tokenizer is remade when the tokenize argument changes. Error messages
**       quote at most RRF_SHOWN_MAX (32) bytes of a name or spec (60 of
**       SQLite's own message), control characters and invalid UTF-8 shown as
**       '?', so that every message stays under 128 bytes (SQLite replaces a
**       message longer than the connection's SQLITE_LIMIT_LENGTH by a generic
**       one).
*/
#include <string.h>

#include "rrf_internal.h"
SQLITE_EXTENSION_INIT3

#define RRF_FTS5_MAX_TOKENS 1000

/* Decode one UTF-8 sequence at s[i]; returns its length (1 for an invalid
** byte, with *cp = 0xFFFD). Shared with fuse.c (rrf_internal.h). */
int rrf_utf8_decode(const unsigned char *s, int len, int i, unsigned *cp) {
  unsigned c = s[i];
  int need;
  unsigned v, min;
  if (c < 0x80) {
    *cp = c;
    return 1;
  } else if ((c & 0xE0) == 0xC0) {
    need = 1; v = c & 0x1F; min = 0x80;
  } else if ((c & 0xF0) == 0xE0) {
    need = 2; v = c & 0x0F; min = 0x800;
  } else if ((c & 0xF8) == 0xF0) {
    need = 3; v = c & 0x07; min = 0x10000;
  } else {
    *cp = 0xFFFD;
    return 1;
  }
  if (i + need >= len) { /* truncated sequence */
    *cp = 0xFFFD;
    return 1;
  }
  for (int j = 1; j <= need; j++) {
    if ((s[i + j] & 0xC0) != 0x80) {
      *cp = 0xFFFD;
      return 1;
    }
    v = (v << 6) | (s[i + j] & 0x3F);
  }
  if (v < min || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF)) {
    *cp = 0xFFFD;
    return 1;
  }
  *cp = v;
  return need + 1;
}

/* Q2: is this code point part of a token? */
static int is_token_char(unsigned cp) {
  if (cp < 0x80) {
    return (cp >= '0' && cp <= '9') || (cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z');
  }
  if (cp == 0xFFFD) return 0;                      /* invalid UTF-8 */
  if (cp < 0xC0) return cp == 0xAA || cp == 0xB5 || cp == 0xBA ||
                        (cp >= 0xB2 && cp <= 0xB3) || cp == 0xB9 ||
                        (cp >= 0xBC && cp <= 0xBE); /* Latin-1 letters and numbers */
  if (cp == 0xD7 || cp == 0xF7) return 0;          /* multiplication, division signs */
  if (cp >= 0x2000 && cp <= 0x206F) return 0;      /* general punctuation and spaces */
  if (cp >= 0x20A0 && cp <= 0x20CF) return 0;      /* currency symbols */
  if (cp >= 0x2190 && cp <= 0x2BFF) return 0;      /* arrows, math operators, shapes */
  if (cp >= 0x3000 && cp <= 0x303F) return 0;      /* CJK symbols and punctuation */
  if (cp >= 0xFE30 && cp <= 0xFE4F) return 0;      /* CJK compatibility forms */
  if (cp >= 0xFF00 && cp <= 0xFF0F) return 0;      /* fullwidth punctuation */
  if (cp >= 0xFF1A && cp <= 0xFF20) return 0;
  if (cp >= 0xFF3B && cp <= 0xFF40) return 0;
  if (cp >= 0xFF5B && cp <= 0xFF65) return 0;
  if (cp >= 0xFFF0) return 0;                      /* specials, non-characters */
  if (cp >= 0x1F000 && cp <= 0x1FAFF) return 0;    /* emoji and pictographs */
  if (cp >= 0xE0000) return 0;                     /* tags, variation selectors */
  return 1;
}

static int ascii_ieq(const unsigned char *a, const unsigned char *b, int n) {
  for (int i = 0; i < n; i++) {
    unsigned char x = a[i], y = b[i];
    if (x >= 'A' && x <= 'Z') x += 32;
    if (y >= 'A' && y <= 'Z') y += 32;
    if (x != y) return 0;
  }
  return 1;
}

typedef struct Tok {
  int start, len;
  int drop; /* Q10: the tokenizer made it a stopword */
} Tok;

/* FNV-1a over the ASCII-lowercased token (Q4). */
static unsigned tok_hash(const unsigned char *s, int n) {
  unsigned h = 2166136261u;
  for (int i = 0; i < n; i++) {
    unsigned char c = s[i];
    if (c >= 'A' && c <= 'Z') c += 32;
    h = (h ^ c) * 16777619u;
  }
  return h;
}

/* Open-addressing set of token indexes (+1; 0 is empty), so that removing
** repeats stays linear on megabyte inputs. */
static int tok_seen_or_add(const unsigned char *s, Tok *toks, int *slots, int nslots,
                           int ntok) {
  unsigned h = tok_hash(s + toks[ntok].start, toks[ntok].len) & (unsigned)(nslots - 1);
  for (;; h = (h + 1) & (unsigned)(nslots - 1)) {
    int t = slots[h] - 1;
    if (t < 0) {
      slots[h] = ntok + 1;
      return 0;
    }
    if (toks[t].len == toks[ntok].len &&
        ascii_ieq(s + toks[t].start, s + toks[ntok].start, toks[ntok].len))
      return 1;
  }
}

/* ---------------------------------------------------------------- stopwords (Q8..Q13) */

static int is_ascii_space(unsigned char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r';
}

/* FNV-1a over the exact bytes (Q8: stopwords are compared byte for byte). */
static unsigned byte_hash(const unsigned char *s, int n) {
  unsigned h = 2166136261u;
  for (int i = 0; i < n; i++) h = (h ^ s[i]) * 16777619u;
  return h;
}

/* What is kept between calls (sqlite3_set_auxdata on the stopwords argument):
** the stopword set and the tokenizer made for the last tokenize argument. */
typedef struct Prune {
  unsigned char *words; /* copy of the stopwords text */
  Tok *terms;           /* the distinct terms, as ranges of `words` */
  int nterms;
  int *slots; /* open addressing: index into terms + 1, 0 empty */
  unsigned mask;
  fts5_api *api;
  fts5_tokenizer methods;
  Fts5Tokenizer *tok; /* NULL: not made (yet, or its making failed) */
  char *spec;         /* the tokenize argument it was made from ('' for NULL) */
  int nspec;
} Prune;

static void prune_free(void *p) {
  Prune *pr = p;
  if (pr == NULL) return;
  if (pr->tok) pr->methods.xDelete(pr->tok);
  sqlite3_free(pr->words);
  sqlite3_free(pr->terms);
  sqlite3_free(pr->slots);
  sqlite3_free(pr->spec);
  sqlite3_free(pr);
}

static int stop_contains(const Prune *pr, const unsigned char *t, int n) {
  if (pr->nterms == 0) return 0;
  for (unsigned h = byte_hash(t, n) & pr->mask;; h = (h + 1) & pr->mask) {
    int k = pr->slots[h] - 1;
    if (k < 0) return 0;
    if (pr->terms[k].len == n && memcmp(pr->words + pr->terms[k].start, t, (size_t)n) == 0)
      return 1;
  }
}

/* Q8: the set of the whitespace-separated terms of s[0..n); NULL when out of memory. */
static Prune *prune_new(const unsigned char *s, int n) {
  Prune *pr = sqlite3_malloc(sizeof *pr);
  if (pr == NULL) return NULL;
  memset(pr, 0, sizeof *pr);
  int count = 0;
  for (int i = 0; i < n;) {
    while (i < n && is_ascii_space(s[i])) i++;
    if (i == n) break;
    count++;
    while (i < n && !is_ascii_space(s[i])) i++;
  }
  if (count == 0) return pr; /* no stopwords: nothing to prune */
  pr->words = sqlite3_malloc64((sqlite3_uint64)n);
  pr->terms = sqlite3_malloc64((sqlite3_uint64)count * sizeof(Tok));
  sqlite3_uint64 nslots = 16;
  while (nslots < 2 * (sqlite3_uint64)count) nslots *= 2; /* never over half full */
  pr->slots = nslots <= 0x40000000u ? sqlite3_malloc64(nslots * sizeof(int)) : NULL;
  if (pr->words == NULL || pr->terms == NULL || pr->slots == NULL) {
    prune_free(pr);
    return NULL;
  }
  memcpy(pr->words, s, (size_t)n);
  memset(pr->slots, 0, (size_t)nslots * sizeof(int));
  pr->mask = (unsigned)(nslots - 1);
  for (int i = 0; i < n;) {
    while (i < n && is_ascii_space(s[i])) i++;
    if (i == n) break;
    int start = i;
    while (i < n && !is_ascii_space(s[i])) i++;
    if (stop_contains(pr, s + start, i - start)) continue;
    unsigned h = byte_hash(s + start, i - start) & pr->mask;
    while (pr->slots[h]) h = (h + 1) & pr->mask;
    pr->terms[pr->nterms].start = start;
    pr->terms[pr->nterms].len = i - start;
    pr->slots[h] = ++pr->nterms;
  }
  return pr;
}

/* msg (from sqlite3_mprintf; NULL when out of memory) as the error; frees it. */
static void result_error(sqlite3_context *ctx, char *msg) {
  if (msg == NULL) {
    sqlite3_result_error_nomem(ctx);
    return;
  }
  sqlite3_result_error(ctx, msg, -1);
  sqlite3_free(msg);
}

#define RRF_SHOWN_MAX 32

/* At most max (<= 60) bytes of s for an error message: valid UTF-8, control
** characters and invalid bytes as '?', "..." when cut. `buf` holds at least 64
** bytes. */
static const char *shown_max(const unsigned char *s, int n, char *buf, int max) {
  int o = 0, i = 0;
  while (i < n) {
    unsigned cp;
    int k = rrf_utf8_decode(s, n, i, &cp);
    if (o + k > max) break;
    if (cp == 0xFFFD || cp < 0x20 || cp == 0x7F || (cp >= 0x80 && cp < 0xA0)) {
      buf[o++] = '?';
    } else {
      memcpy(buf + o, s + i, (size_t)k);
      o += k;
    }
    i += k;
  }
  if (i < n) {
    memcpy(buf + o, "...", 3);
    o += 3;
  }
  buf[o] = 0;
  return buf;
}

/* A name or spec from the arguments, in at most RRF_SHOWN_MAX bytes. */
static const char *shown(const unsigned char *s, int n, char *buf) {
  return shown_max(s, n, buf, RRF_SHOWN_MAX);
}

/* Q13: the connection's fts5_api, or NULL with the error set on ctx. */
static fts5_api *get_fts5_api(sqlite3_context *ctx) {
  sqlite3 *db = sqlite3_context_db_handle(ctx);
  sqlite3_stmt *st = NULL;
  fts5_api *api = NULL;
  int rc = sqlite3_prepare_v2(db, "SELECT fts5(?1)", -1, &st, NULL);
  int missing = rc != SQLITE_OK && strncmp(sqlite3_errmsg(db), "no such function", 16) == 0;
  if (rc == SQLITE_OK) {
    sqlite3_bind_pointer(st, 1, (void *)&api, "fts5_api_ptr", NULL);
    rc = sqlite3_step(st);
    missing = rc == SQLITE_ROW && api == NULL;
  }
  if (api != NULL && api->iVersion < 1) { /* no xFindTokenizer */
    api = NULL;
    missing = 1;
  }
  if (api == NULL) {
    if (rc == SQLITE_NOMEM) {
      sqlite3_result_error_nomem(ctx);
    } else if (missing) {
      sqlite3_result_error(ctx, "fts5_query: stopwords need FTS5, which this SQLite lacks", -1);
    } else {
      char buf[64];
      const char *m = sqlite3_errmsg(db);
      result_error(ctx, sqlite3_mprintf(
                            "fts5_query: cannot reach FTS5: %s",
                            shown_max((const unsigned char *)m, (int)strlen(m), buf, 60)));
    }
  }
  sqlite3_finalize(st);
  return api;
}

#define RRF_FTS5_MAX_SPEC_WORDS 64

/* Q9: make pr->tok from the tokenize spec s[0..n) (s NULL: the default).
** SQLITE_OK, or an error code with the error set on ctx. */
static int prune_tokenizer(sqlite3_context *ctx, Prune *pr, const unsigned char *s, int n) {
  if (s == NULL) { /* NULL tokenize: compared as '' (both mean the default) */
    s = (const unsigned char *)"";
    n = 0;
  }
  if (pr->tok && pr->nspec == n && memcmp(pr->spec, s, (size_t)n) == 0) return SQLITE_OK;
  if (pr->tok) pr->methods.xDelete(pr->tok);
  pr->tok = NULL;
  sqlite3_free(pr->spec);
  pr->spec = NULL;
  pr->nspec = 0;

  char shown_buf[64];
  char *msg = NULL;
  const char *azArg[RRF_FTS5_MAX_SPEC_WORDS];
  int nword = 0, rc = SQLITE_ERROR;
  /* The words, unquoted, each NUL-terminated: at most n + 1 bytes (a quoted
  ** word loses two quotes; a bare word is followed by a separator or the end). */
  char *buf = sqlite3_malloc64((sqlite3_uint64)n + 2);
  if (buf == NULL) goto nomem;
  if (memchr(s, 0, (size_t)n) != NULL) {
    msg = sqlite3_mprintf("fts5_query: tokenize must not hold a NUL byte");
    goto fail;
  }
  int o = 0;
  for (int i = 0; i < n;) {
    while (i < n && is_ascii_space(s[i])) i++;
    if (i == n) break;
    if (nword == RRF_FTS5_MAX_SPEC_WORDS) {
      msg = sqlite3_mprintf("fts5_query: tokenize has more than %d words: '%s'",
                            RRF_FTS5_MAX_SPEC_WORDS, shown(s, n, shown_buf));
      goto fail;
    }
    azArg[nword++] = buf + o;
    unsigned char q = s[i];
    if (q == '\'' || q == '"') {
      unsigned char close = q;
      int closed = 0;
      for (i++; i < n; i++) {
        if (s[i] == close) {
          if (i + 1 < n && s[i + 1] == close) {
            buf[o++] = (char)close;
            i++;
          } else {
            i++;
            closed = 1;
            break;
          }
        } else {
          buf[o++] = (char)s[i];
        }
      }
      if (!closed) {
        msg = sqlite3_mprintf("fts5_query: unterminated quote in tokenize '%s'",
                              shown(s, n, shown_buf));
        goto fail;
      }
    } else {
      while (i < n && !is_ascii_space(s[i]) && s[i] != '\'' && s[i] != '"')
        buf[o++] = (char)s[i++];
    }
    buf[o++] = 0;
  }
  if (nword == 0) { /* NULL, '' or only whitespace: FTS5's default */
    azArg[nword++] = "unicode61";
  }

  if (pr->api == NULL) {
    pr->api = get_fts5_api(ctx);
    if (pr->api == NULL) {
      sqlite3_free(buf);
      return SQLITE_ERROR;
    }
  }
  void *user = NULL;
  memset(&pr->methods, 0, sizeof pr->methods);
  rc = pr->api->xFindTokenizer(pr->api, azArg[0], &user, &pr->methods);
  if (rc != SQLITE_OK || pr->methods.xCreate == NULL || pr->methods.xTokenize == NULL ||
      pr->methods.xDelete == NULL) {
    if (rc == SQLITE_NOMEM) goto nomem;
    msg = sqlite3_mprintf("fts5_query: no FTS5 tokenizer named '%s'",
                          shown((const unsigned char *)azArg[0], (int)strlen(azArg[0]),
                                shown_buf));
    rc = SQLITE_ERROR;
    goto fail;
  }
  rc = pr->methods.xCreate(user, azArg + 1, nword - 1, &pr->tok);
  if (rc != SQLITE_OK || pr->tok == NULL) {
    if (rc == SQLITE_NOMEM) goto nomem;
    if (pr->tok) pr->methods.xDelete(pr->tok);
    pr->tok = NULL;
    msg = sqlite3_mprintf("fts5_query: cannot create the FTS5 tokenizer '%s' (%s)",
                          n ? shown(s, n, shown_buf) : "unicode61",
                          sqlite3_errstr(rc == SQLITE_OK ? SQLITE_ERROR : rc));
    rc = SQLITE_ERROR;
    goto fail;
  }
  sqlite3_free(buf);
  pr->spec = sqlite3_malloc64((sqlite3_uint64)n + 1);
  if (pr->spec == NULL) {
    pr->methods.xDelete(pr->tok);
    pr->tok = NULL;
    sqlite3_result_error_nomem(ctx);
    return SQLITE_NOMEM;
  }
  memcpy(pr->spec, s, (size_t)n);
  pr->nspec = n;
  return SQLITE_OK;

fail:
  sqlite3_free(buf);
  rc = msg ? SQLITE_ERROR : SQLITE_NOMEM;
  result_error(ctx, msg);
  return rc;
nomem:
  sqlite3_free(buf);
  sqlite3_result_error_nomem(ctx);
  return SQLITE_NOMEM;
}

typedef struct StemCtx {
  const Prune *pr;
  int nterm; /* 0, 1 or 2 (two or more) */
  int stop;  /* the first term is a stopword */
} StemCtx;

static int stem_cb(void *p, int tflags, const char *t, int n, int start, int end) {
  StemCtx *c = p;
  (void)tflags;
  (void)start;
  (void)end;
  if (c->nterm == 0)
    c->stop = t != NULL && n > 0 && stop_contains(c->pr, (const unsigned char *)t, n);
  if (c->nterm < 2) c->nterm++;
  return SQLITE_OK;
}

/* Q10: *drop = 1 if the token s[0..n) is to be dropped, 0 if kept; returns the
** tokenizer's result code. */
static int prune_drops(const Prune *pr, const unsigned char *s, int n, int *drop) {
  StemCtx c = {pr, 0, 0};
  int rc = pr->methods.xTokenize(pr->tok, &c, FTS5_TOKENIZE_QUERY, (const char *)s, n, stem_cb);
  *drop = rc == SQLITE_OK && c.nterm == 1 && c.stop;
  return rc;
}

void rrf_fts5_query(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
  const char *joiner = " OR ";
  Tok *toks = NULL;
  int *slots = NULL;
  int ntok = 0, nkept = 0, cap = 0, nslots = 0;
  sqlite3_str *out = NULL;
  Prune *pr = NULL;
  int pr_fresh = 0; /* pr made by this call (else it is SQLite's auxdata) */

  if (sqlite3_value_type(argv[0]) == SQLITE_NULL) { /* Q6 */
    sqlite3_result_null(ctx);
    return;
  }
  if (sqlite3_value_type(argv[0]) == SQLITE_BLOB) {
    sqlite3_result_error(ctx, "fts5_query: text must be TEXT, got BLOB", -1);
    return;
  }
  if (argc > 1 && sqlite3_value_type(argv[1]) != SQLITE_NULL) { /* Q1 */
    /* The type before sqlite3_value_text(), which turns a BLOB or number into TEXT. */
    int is_text = sqlite3_value_type(argv[1]) == SQLITE_TEXT;
    const unsigned char *m = sqlite3_value_text(argv[1]);
    int mlen = sqlite3_value_bytes(argv[1]);
    if (is_text && m && mlen == 2 && ascii_ieq(m, (const unsigned char *)"or", 2)) {
      joiner = " OR ";
    } else if (is_text && m && mlen == 3 && ascii_ieq(m, (const unsigned char *)"and", 3)) {
      joiner = " AND ";
    } else {
      sqlite3_result_error(ctx, "fts5_query: mode must be 'or' or 'and'", -1);
      return;
    }
  }
  if (argc > 2 && sqlite3_value_type(argv[2]) != SQLITE_NULL &&
      sqlite3_value_type(argv[2]) != SQLITE_TEXT) { /* Q8 */
    result_error(ctx, sqlite3_mprintf("fts5_query: stopwords must be TEXT or NULL, got %s",
                                      rrf_type_name(argv[2])));
    return;
  }
  if (argc > 3 && sqlite3_value_type(argv[3]) != SQLITE_NULL &&
      sqlite3_value_type(argv[3]) != SQLITE_TEXT) { /* Q9 */
    result_error(ctx, sqlite3_mprintf("fts5_query: tokenize must be TEXT or NULL, got %s",
                                      rrf_type_name(argv[3])));
    return;
  }
  if (argc > 2 && sqlite3_value_type(argv[2]) == SQLITE_TEXT) { /* Q8, Q13 */
    pr = sqlite3_get_auxdata(ctx, 2);
    if (pr == NULL) {
      const unsigned char *w = sqlite3_value_text(argv[2]);
      int wn = sqlite3_value_bytes(argv[2]);
      if (w == NULL) goto nomem;
      pr = prune_new(w, wn);
      if (pr == NULL) goto nomem;
      pr_fresh = 1;
    }
    if (pr->nterms > 0) {
      const unsigned char *spec = NULL;
      int nspec = 0;
      if (argc > 3 && sqlite3_value_type(argv[3]) == SQLITE_TEXT) {
        spec = sqlite3_value_text(argv[3]);
        nspec = sqlite3_value_bytes(argv[3]);
        if (spec == NULL) goto nomem;
      }
      if (prune_tokenizer(ctx, pr, spec, nspec) != SQLITE_OK) goto done; /* error set */
    }
  }
  int pruning = pr != NULL && pr->nterms > 0;

  const unsigned char *s = sqlite3_value_text(argv[0]);
  int len = sqlite3_value_bytes(argv[0]);
  if (s == NULL) goto nomem;

  /* Q2: split into tokens. */
  for (int i = 0; i < len && nkept < RRF_FTS5_MAX_TOKENS;) { /* Q7, Q12 */
    unsigned cp;
    int n = rrf_utf8_decode(s, len, i, &cp);
    if (!is_token_char(cp)) {
      i += n;
      continue;
    }
    int start = i;
    while (i < len) {
      n = rrf_utf8_decode(s, len, i, &cp);
      if (!is_token_char(cp)) break;
      i += n;
    }
    if (ntok == cap) {
      /* With pruning, tokens are counted up to the end of the text, not to Q7's cap. */
      if (cap >= 0x10000000) goto nomem; /* 268M tokens; nslots must fit an int */
      int ncap = cap ? cap * 2 : 16;
      Tok *nt = sqlite3_realloc64(toks, (sqlite3_uint64)ncap * sizeof(Tok));
      if (nt == NULL) goto nomem;
      toks = nt;
      cap = ncap;
      /* Rebuild the set at twice the capacity, so it is never over half full. */
      sqlite3_free(slots);
      nslots = ncap * 2;
      slots = sqlite3_malloc64((sqlite3_uint64)nslots * sizeof(int));
      if (slots == NULL) goto nomem;
      memset(slots, 0, (size_t)nslots * sizeof(int));
      for (int t = 0; t < ntok; t++) tok_seen_or_add(s, toks, slots, nslots, t);
    }
    toks[ntok].start = start;
    toks[ntok].len = i - start;
    toks[ntok].drop = 0;
    if (tok_seen_or_add(s, toks, slots, nslots, ntok)) continue; /* Q4 */
    if (pruning) { /* Q10 */
      int rc = prune_drops(pr, s + start, i - start, &toks[ntok].drop);
      if (rc == SQLITE_NOMEM) goto nomem;
      if (rc != SQLITE_OK) {
        char buf[64];
        result_error(ctx, sqlite3_mprintf(
                              "fts5_query: the FTS5 tokenizer '%s' failed (%s)",
                              pr->nspec ? shown((const unsigned char *)pr->spec, pr->nspec, buf)
                                        : "unicode61",
                              sqlite3_errstr(rc)));
        goto done;
      }
    }
    if (!toks[ntok].drop) nkept++;
    ntok++;
  }
  sqlite3_free(slots);
  slots = NULL;

  if (ntok == 0) { /* Q5 */
    sqlite3_result_text(ctx, "\"\"", 2, SQLITE_STATIC);
    goto done;
  }

  /* Q1, Q3: quote every token kept (no token contains '"', Q2); Q11: every
  ** token, up to the cap (Q12), when pruning would drop them all. */
  int all = nkept == 0;
  out = sqlite3_str_new(NULL); /* no db: rrf_result_str checks the limit (Q6) */
  for (int t = 0, nout = 0; t < ntok && nout < RRF_FTS5_MAX_TOKENS; t++) {
    if (toks[t].drop && !all) continue;
    if (nout++) sqlite3_str_appendall(out, joiner);
    sqlite3_str_appendchar(out, 1, '"');
    sqlite3_str_append(out, (const char *)s + toks[t].start, toks[t].len);
    sqlite3_str_appendchar(out, 1, '"');
  }
  rrf_result_str(ctx, out, "fts5_query"); /* Q6: past SQLITE_LIMIT_LENGTH, an error */
  out = NULL;
  goto done;

nomem:
  sqlite3_result_error_nomem(ctx);
done:
  sqlite3_free(toks);
  sqlite3_free(slots);
  if (out) sqlite3_free(sqlite3_str_finish(out));
  /* Kept for the next row while argument 2 stays the same (SQLite may free it
  ** at once); set last, since pr may be gone after this call. */
  if (pr_fresh) sqlite3_set_auxdata(ctx, 2, pr, prune_free);
}
