/*
** fts5_query's stopwords and tokenizer (fts5q.c Q8..Q10, Q13, Q14): the stopword
** set, the connection's fts5_api, the tokenizer made from the tokenize argument,
** and what it makes of one token. The words of the tokenize argument are parsed
** by tokspec.c.
*/
#include <string.h>

#include "rrf_internal.h"
SQLITE_EXTENSION_INIT3

void rrf_prune_free(void *p) {
  RrfPrune *pr = p;
  if (pr == NULL) return;
  if (pr->tok) pr->methods.xDelete(pr->tok);
  rrf_wordset_free(&pr->stop);
  sqlite3_free(pr->spec);
  sqlite3_free(pr);
}

/* Q8: the RrfPrune of the stopwords s[0..n), without a tokenizer; NULL when out of
** memory. s may be NULL (n 0): the empty set. */
static RrfPrune *prune_new(const unsigned char *s, int n) {
  RrfPrune *pr = sqlite3_malloc(sizeof *pr);
  if (pr == NULL) return NULL;
  memset(pr, 0, sizeof *pr);
  if (rrf_wordset_init(&pr->stop, s, n) != SQLITE_OK) {
    sqlite3_free(pr);
    return NULL;
  }
  return pr;
}

/* Q13: the connection's fts5_api, or NULL with the error set on ctx. */
static fts5_api *get_fts5_api(sqlite3_context *ctx, const char *fn) {
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
      rrf_error(ctx, "%s: stopwords need FTS5, which this SQLite lacks", fn);
    } else {
      char buf[64];
      const char *m = sqlite3_errmsg(db);
      rrf_error(ctx, "%s: cannot reach FTS5: %s", fn,
                rrf_shown((const unsigned char *)m, (int)strlen(m), buf, 60));
    }
  }
  sqlite3_finalize(st);
  return api;
}

/* Q9, Q14: make pr->tok from the tokenize spec s[0..n) (s NULL: the default).
** SQLITE_OK, or an error code with the error set on ctx (messages name fn). */
static int prune_tokenizer(sqlite3_context *ctx, const char *fn, RrfPrune *pr,
                           const unsigned char *s, int n) {
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
  RrfTokSpec spec;
  int rc = rrf_tokspec_parse(ctx, fn, s, n, &spec);
  if (rc != SQLITE_OK) goto done;
  if (pr->api == NULL) {
    pr->api = get_fts5_api(ctx, fn);
    if (pr->api == NULL) {
      rc = SQLITE_ERROR;
      goto done;
    }
  }
  void *user = NULL;
  memset(&pr->methods, 0, sizeof pr->methods);
  rc = pr->api->xFindTokenizer(pr->api, spec.argv[0], &user, &pr->methods);
  if (rc != SQLITE_OK || pr->methods.xCreate == NULL || pr->methods.xTokenize == NULL ||
      pr->methods.xDelete == NULL) {
    if (rc == SQLITE_NOMEM) goto nomem;
    rc = rrf_error(ctx, "%s: no FTS5 tokenizer named '%s'", fn,
                   rrf_shown((const unsigned char *)spec.argv[0], (int)strlen(spec.argv[0]),
                             shown_buf, RRF_SHOWN_MAX));
    goto done;
  }
  rc = pr->methods.xCreate(user, spec.argv + 1, spec.argc - 1, &pr->tok);
  if (rc != SQLITE_OK || pr->tok == NULL) {
    if (rc == SQLITE_NOMEM) goto nomem;
    if (pr->tok) pr->methods.xDelete(pr->tok);
    pr->tok = NULL;
    rc = rrf_error(ctx, "%s: cannot create the FTS5 tokenizer '%s' (%s)", fn,
                   n ? rrf_shown(s, n, shown_buf, RRF_SHOWN_MAX) : "unicode61",
                   sqlite3_errstr(rc == SQLITE_OK ? SQLITE_ERROR : rc));
    goto done;
  }
  pr->spec = sqlite3_malloc64((sqlite3_uint64)n + 1);
  if (pr->spec == NULL) {
    pr->methods.xDelete(pr->tok);
    pr->tok = NULL;
    goto nomem;
  }
  memcpy(pr->spec, s, (size_t)n);
  pr->nspec = n;
  goto done;
nomem:
  sqlite3_result_error_nomem(ctx);
  rc = SQLITE_NOMEM;
done:
  rrf_tokspec_free(&spec);
  return rc;
}

typedef struct StemCtx {
  const RrfPrune *pr;
  int nterm;  /* 0, 1 or 2 (two or more) */
  int stop;   /* the first term is a stopword */
  char *copy; /* a copy of the first term, when asked for (want_copy) */
  int ncopy, want_copy, nomem;
} StemCtx;

static int stem_cb(void *p, int tflags, const char *t, int n, int start, int end) {
  StemCtx *c = p;
  (void)tflags;
  (void)start;
  (void)end;
  if (c->nterm == 0) {
    if (t == NULL || n < 0) { /* not a term a built-in tokenizer makes; kept, never matched */
      t = "";
      n = 0;
    }
    c->stop = n > 0 && rrf_wordset_contains(&c->pr->stop, (const unsigned char *)t, n);
    if (c->want_copy) {
      c->copy = sqlite3_malloc64((sqlite3_uint64)n + 1);
      if (c->copy == NULL) {
        c->nomem = 1;
        return SQLITE_NOMEM;
      }
      memcpy(c->copy, t, (size_t)n);
      c->copy[n] = 0;
      c->ncopy = n;
    }
  }
  if (c->nterm < 2) c->nterm++;
  return SQLITE_OK;
}

/* Q10: how the token s[0..n) tokenizes: *nterm 0, 1 or 2 (two or more), *stop
** whether it is one term and that a stopword, and with `copy` non-NULL a copy of
** that term (sqlite3_malloc'd, NUL-terminated; NULL unless *nterm is 1). Returns
** the tokenizer's result code. */
int rrf_token_terms(const RrfPrune *pr, const unsigned char *s, int n, int *nterm, int *stop,
                    char **copy, int *ncopy) {
  StemCtx c;
  memset(&c, 0, sizeof c);
  c.pr = pr;
  c.want_copy = copy != NULL;
  int rc = pr->methods.xTokenize(pr->tok, &c, FTS5_TOKENIZE_QUERY, (const char *)s, n, stem_cb);
  if (c.nomem) rc = SQLITE_NOMEM;
  *nterm = rc == SQLITE_OK ? c.nterm : 0;
  *stop = rc == SQLITE_OK && c.nterm == 1 && c.stop;
  if (copy) {
    if (rc == SQLITE_OK && c.nterm == 1) {
      *copy = c.copy;
      *ncopy = c.ncopy;
    } else {
      sqlite3_free(c.copy);
      *copy = NULL;
      *ncopy = 0;
    }
  } else {
    sqlite3_free(c.copy);
  }
  return rc;
}

/* Q6, Q8, Q9: the type checks of the stopwords and tokenize arguments (argv[0],
** argv[1]; either may be NULL for absent). SQLITE_OK, or the error set. */
int rrf_fts5_check_types(sqlite3_context *ctx, const char *fn, sqlite3_value *stop,
                         sqlite3_value *tokenize) {
  if (stop && sqlite3_value_type(stop) != SQLITE_NULL && sqlite3_value_type(stop) != SQLITE_TEXT) {
    rrf_error(ctx, "%s: stopwords must be TEXT or NULL, got %s", fn, rrf_type_name(stop));
    return SQLITE_ERROR;
  }
  if (tokenize && sqlite3_value_type(tokenize) != SQLITE_NULL &&
      sqlite3_value_type(tokenize) != SQLITE_TEXT) {
    rrf_error(ctx, "%s: tokenize must be TEXT or NULL, got %s", fn, rrf_type_name(tokenize));
    return SQLITE_ERROR;
  }
  return SQLITE_OK;
}

/* The RrfPrune of (stop, tokenize): made, with its tokenizer when `need_tok` or when
** there are stopwords (Q8, Q9, Q14). NULL with the error set on failure. */
RrfPrune *rrf_prune_make(sqlite3_context *ctx, const char *fn, fts5_api *api, RrfPrune *pr,
                         sqlite3_value *stop, sqlite3_value *tokenize, int need_tok) {
  int fresh = 0;
  if (pr == NULL) {
    const unsigned char *w = NULL;
    int wn = 0;
    if (stop && sqlite3_value_type(stop) == SQLITE_TEXT) {
      w = sqlite3_value_text(stop);
      wn = sqlite3_value_bytes(stop);
      if (w == NULL) {
        sqlite3_result_error_nomem(ctx);
        return NULL;
      }
    }
    pr = prune_new(w, wn);
    if (pr == NULL) {
      sqlite3_result_error_nomem(ctx);
      return NULL;
    }
    if (api) pr->api = api;
    fresh = 1;
  }
  if (pr->stop.nwords > 0 || need_tok) {
    const unsigned char *spec = NULL;
    int nspec = 0;
    if (tokenize && sqlite3_value_type(tokenize) == SQLITE_TEXT) {
      spec = sqlite3_value_text(tokenize);
      nspec = sqlite3_value_bytes(tokenize);
      if (spec == NULL) {
        if (fresh) rrf_prune_free(pr);
        sqlite3_result_error_nomem(ctx);
        return NULL;
      }
    }
    if (prune_tokenizer(ctx, fn, pr, spec, nspec) != SQLITE_OK) {
      if (fresh) rrf_prune_free(pr);
      return NULL;
    }
  }
  return pr;
}
