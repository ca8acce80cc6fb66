/*
** The tokenize argument of fts5_query and rrf_bm25_or (fts5q.c Q9, Q14): an
** FTS5 tokenizer spec as written in CREATE VIRTUAL TABLE ... tokenize='...',
** split into words and checked to name FTS5's built-in tokenizers only.
*/
#include <string.h>

#include "rrf_internal.h"
SQLITE_EXTENSION_INIT3

/* Q14: FTS5's built-in tokenizers. */
static int is_builtin_tokenizer(const char *name) {
  static const char *const kBuiltin[] = {"unicode61", "ascii", "porter", "trigram"};
  size_t n = strlen(name);
  for (size_t k = 0; k < sizeof kBuiltin / sizeof kBuiltin[0]; k++)
    if (n == strlen(kBuiltin[k]) &&
        rrf_ascii_ieq((const unsigned char *)name, (const unsigned char *)kBuiltin[k], (int)n))
      return 1;
  return 0;
}

void rrf_tokspec_free(RrfTokSpec *spec) {
  sqlite3_free(spec->buf);
  spec->buf = NULL;
  spec->argc = 0;
}

int rrf_tokspec_parse(sqlite3_context *ctx, const char *fn, const unsigned char *s, int n,
                      RrfTokSpec *spec) {
  char shown_buf[64];
  const char **azArg = spec->argv;
  int nword = 0;
  spec->argc = 0;
  /* The words, unquoted, each NUL-terminated: at most n + 1 bytes (a quoted
  ** word loses two quotes; a bare word is followed by a separator or the end). */
  char *buf = spec->buf = sqlite3_malloc64((sqlite3_uint64)n + 2);
  if (buf == NULL) {
    sqlite3_result_error_nomem(ctx);
    return SQLITE_NOMEM;
  }
  if (memchr(s, 0, (size_t)n) != NULL)
    return rrf_error(ctx, "%s: tokenize must not hold a NUL byte", fn);
  int o = 0;
  for (int i = 0; i < n;) {
    while (i < n && rrf_is_ascii_space(s[i])) i++;
    if (i == n) break;
    if (nword == RRF_FTS5_MAX_SPEC_WORDS)
      return rrf_error(ctx, "%s: tokenize has more than %d words: '%s'", fn,
                       RRF_FTS5_MAX_SPEC_WORDS, rrf_shown(s, n, shown_buf, RRF_SHOWN_MAX));
    azArg[nword++] = buf + o;
    unsigned char q = s[i];
    if (q == '\'' || q == '"') { /* the quote doubled inside */
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
      if (!closed)
        return rrf_error(ctx, "%s: unterminated quote in tokenize '%s'", fn,
                         rrf_shown(s, n, shown_buf, RRF_SHOWN_MAX));
    } else { /* a bare word ends at whitespace or a quote */
      while (i < n && !rrf_is_ascii_space(s[i]) && s[i] != '\'' && s[i] != '"')
        buf[o++] = (char)s[i++];
    }
    buf[o++] = 0;
  }
  if (nword == 0) { /* '' or only whitespace: FTS5's default */
    azArg[nword++] = "unicode61";
  }
  /* Q14: the tokenizer, and each tokenizer porter wraps, must be built in. */
  for (int w = 0;; w++) {
    if (!is_builtin_tokenizer(azArg[w]))
      return rrf_error(ctx,
                       "%s: tokenizer '%s' is not one of FTS5's built-in unicode61, "
                       "ascii, porter, trigram",
                       fn,
                       rrf_shown((const unsigned char *)azArg[w], (int)strlen(azArg[w]), shown_buf,
                                 RRF_SHOWN_MAX));
    if (w + 1 >= nword ||
        !rrf_ascii_ieq((const unsigned char *)azArg[w], (const unsigned char *)"porter", 7))
      break; /* not porter (strlen checked by is_builtin_tokenizer), or porter alone */
  }
  spec->argc = nword;
  return SQLITE_OK;
}
