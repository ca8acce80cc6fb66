/*
** fts5_query(text [, mode [, stopwords [, tokenize]]]) -> TEXT: raw user text
** to a safe FTS5 MATCH expression, optionally without the words that occur in
** most documents, or the list of its terms.
**
** Requirements (docs/contract.md, "The extension"; docs/sql/fts5_query.md; tests
** cite them as Q1..Q16):
**   Q1. Each token is double-quoted and the tokens are joined by " OR " (mode
**       'or', the default) or " AND " (mode 'and'; case-insensitive). Mode
**       'terms' lists the terms instead (Q15).
**   Q2. A token is a run of ASCII letters and digits, of CJK characters (Q16)
**       and of the other non-ASCII characters that FTS5's unicode61 tokenizer
**       (the index's, under porter) takes as token characters: its categories
**       "L* N* Co" by its own Unicode tables, where a code point assigned since
**       (U+1F970) is one too, and the diacritics it folds away (U+0301).
**       Everything else separates tokens: ASCII punctuation and spaces, what
**       unicode61 separates (Unicode spaces, punctuation, symbols, other marks,
**       variation selectors, format characters) and invalid UTF-8. So a token
**       never cuts one of the index's terms in two ("a\u3005" is one term and
**       one token), and - / ' " : * ^ ( ) never reach FTS5's parser and no input
**       raises a syntax error.
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
**       paste would stall the query (100,000 terms take about a minute).
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
**       quote, a bare one at whitespace or a quote. NULL, absent, '' or only
**       whitespace -> 'unicode61', FTS5's default. A value that is not TEXT or
**       NULL is an error naming the function; whenever a tokenizer is made (Q10,
**       Q15) so are an unterminated quote, a NUL byte, more than
**       RRF_FTS5_MAX_SPEC_WORDS (64) words (a chain of 'porter porter ...' would
**       recurse once per word), a tokenizer that is not built in (Q14), and a
**       tokenizer whose xCreate fails (naming the spec).
**  Q10. Pruning, when Q8 gives at least one stopword: each distinct token (after
**       Q2, Q4, Q7) is run through that tokenizer (FTS5's v1 tokenizer API, flag
**       FTS5_TOKENIZE_QUERY, as FTS5 tokenizes a quoted phrase). A token that
**       yields exactly one term, that term in the stopword set, is dropped; a
**       token that yields 0 or >= 2 terms is kept. Both modes prune alike.
**  Q11. If every token would be dropped, none is: the expression is exactly the
**       one without stopwords, so a query made only of common words still
**       searches.
**  Q12. Order: Q2 tokens, Q4 repeats, Q7's cap, then Q10 pruning: the pruned
**       expression is the unpruned one without some of its tokens, in the same
**       order (so bm25() over the two differs only by the dropped phrases).
**  Q13. Resources: fts5_api is taken from the calling connection (SELECT
**       fts5(?1) with a bound "fts5_api_ptr" pointer), only when a tokenizer is
**       made; no FTS5 is an error. The stopword set (a hash set: O(n) to build,
**       O(1) to look up) and the tokenizer are kept with sqlite3_set_auxdata on
**       the stopwords argument, so a constant argument is parsed once per
**       statement; the tokenizer is remade when the tokenize argument changes.
**       Error messages quote at most RRF_SHOWN_MAX (32) bytes of a name or spec
**       (60 of SQLite's own message), control characters and invalid UTF-8
**       shown as '?', so that every message stays under 128 bytes (SQLite
**       replaces a message longer than the connection's SQLITE_LIMIT_LENGTH by a
**       generic one).
**  Q14. Only FTS5's built-in tokenizers: the first word of tokenize must be
**       unicode61, ascii, porter or trigram (compared ASCII-case-insensitively,
**       as FTS5 compares names), and porter's first argument, when it has one,
**       names the tokenizer porter wraps, again one of these (porter wrapping
**       porter is followed down the chain). Anything else is the error
**       "fts5_query: tokenizer '...' is not one of FTS5's built-in unicode61,
**       ascii, porter, trigram". This is what keeps the SQLITE_DETERMINISTIC and
**       SQLITE_INNOCUOUS flags true for every argument count: a built-in
**       tokenizer reads no table, writes nothing and gives the same terms for
**       the same text, and the nested SELECT fts5(?1) of Q13 reads no table
**       either; a tokenizer some application registered could do anything,
**       and an innocuous function may be called by any view or trigger of a
**       database file, whoever wrote it.
**  Q15. Mode 'terms': a JSON array with one element per distinct token (Q2, Q4,
**       Q7) that the tokenizer (Q9, Q10's flag) turns into exactly one term:
**       [phrase, term], phrase being the token quoted exactly as the 'or'
**       expression quotes it (a valid FTS5 MATCH expression on its own) and
**       term the tokenizer's term. With stopwords (Q8) only the tokens Q10
**       would drop are listed (Q11 does not apply); '[]' when there is none.
**       The array escapes '"', '\' and control characters as JSON does, so it
**       is valid JSON for valid UTF-8 terms (those of the built-in tokenizers).
**       A tokenizer is always made, so mode 'terms' needs FTS5.
**  Q16. CJK text (migration 0011, docs/languages.md): within a Q2 token, a run of
**       CJK characters (code points of the scripts written without spaces
**       between words: Thai, Lao, Myanmar, Hangul, Khmer, kana, bopomofo, the
**       CJK ideographs and their extensions; U+30FB, the katakana middle dot, is
**       punctuation, Q2) is apart from the characters around it, and gives one
**       token per character bigram, in order ("パスワード": "パス", "スワ",
**       "ワー", "ード"); a run of one character is that character. The rest of
**       the token (its non-CJK runs) gives one token each. These are the
**       tokens of Q4 (repeats), Q7 (the cap counts each bigram) and Q10 (each
**       bigram is looked up alone). So each token is still a substring of the
**       text, and the index, which holds the same bigrams (migration 0011's
**       segmentation), matches each of them.
**
** Here: the SQL function, the tokens (Q2, Q4, Q7, Q16) and the plan (Q10..Q12,
** Q15). The stopwords and the tokenizer (Q8..Q10, Q13, Q14) are in fts5stop.c,
** the hash sets (Q4, Q8) in strset.c, the tokenize argument's parser (Q9, Q14)
** in tokspec.c, the messages' forms in errors.c.
*/
#include <string.h>

#include "rrf_internal.h"
SQLITE_EXTENSION_INIT3

#define RRF_FTS5_MAX_TOKENS 1000

/* ---------------------------------------------------------------- the plan (Q2..Q12, Q15) */

/* Q4, Q7: add the token s[start, start + n) unless seen; returns the new count. */
static int add_token(const unsigned char *s, int start, int n, RrfSpan *toks, int ntok,
                     RrfSpanSet *seen) {
  if (rrf_spanset_find(seen, s, toks, s + start, n) >= 0) return ntok; /* Q4 */
  toks[ntok].start = start;
  toks[ntok].len = n;
  rrf_spanset_add(seen, s, toks, ntok);
  return ntok + 1;
}

/* Q2, Q4, Q7, Q16: the first RRF_FTS5_MAX_TOKENS distinct tokens of s[0..len), into
** toks (room for RRF_FTS5_MAX_TOKENS), `seen` (empty, nocase) holding them.
** Returns their number. */
static int split_tokens(const unsigned char *s, int len, RrfSpan *toks, RrfSpanSet *seen) {
  int ntok = 0;
  for (int i = 0; i < len && ntok < RRF_FTS5_MAX_TOKENS;) {
    unsigned cp;
    int n = rrf_utf8_decode(s, len, i, &cp);
    if (!rrf_is_token_char(cp)) {
      i += n;
      continue;
    }
    int cjk = rrf_is_cjk(cp);
    int start = i, prev = -1; /* prev: where the run's previous character starts */
    while (i < len && ntok < RRF_FTS5_MAX_TOKENS) {
      n = rrf_utf8_decode(s, len, i, &cp);
      if (!rrf_is_token_char(cp) || rrf_is_cjk(cp) != cjk) break;
      if (cjk && prev >= 0) /* Q16: the bigram ending here */
        ntok = add_token(s, prev, i + n - prev, toks, ntok, seen);
      prev = i;
      i += n;
    }
    if (ntok >= RRF_FTS5_MAX_TOKENS) break;
    /* a run that is not CJK, or a CJK run of one character: one token */
    if (!cjk || prev == start) ntok = add_token(s, start, i - start, toks, ntok, seen);
  }
  return ntok;
}

void rrf_fts5_plan_free(RrfPlan *plan) {
  if (plan == NULL) return;
  for (int t = 0; t < plan->ntok; t++) sqlite3_free(plan->tok[t].term);
  sqlite3_free(plan->tok);
  sqlite3_free(plan);
}

/* The tokens of s[0..len) (Q2, Q4, Q7) with, when pr has a tokenizer, how each
** tokenizes and whether Q10/Q11 drop it. terms: keep a copy of each single
** term. SQLITE_OK, or an error code with the error set on ctx. */
static int make_plan(sqlite3_context *ctx, const char *fn, const RrfPrune *pr,
                     const unsigned char *s, int len, int terms, RrfPlan **out) {
  RrfSpan *toks = sqlite3_malloc64(sizeof(RrfSpan) * RRF_FTS5_MAX_TOKENS);
  RrfSpanSet seen; /* Q4: the tokens so far */
  RrfPlan *plan = sqlite3_malloc(sizeof *plan);
  int rc = rrf_spanset_init(&seen, RRF_FTS5_MAX_TOKENS, 1);
  *out = NULL;
  if (toks == NULL || rc != SQLITE_OK || plan == NULL) goto nomem;
  memset(plan, 0, sizeof *plan);
  int ntok = split_tokens(s, len, toks, &seen);
  plan->tok = sqlite3_malloc64(sizeof(RrfPlanTok) * (ntok ? (size_t)ntok : 1));
  if (plan->tok == NULL) goto nomem;
  memset(plan->tok, 0, sizeof(RrfPlanTok) * (ntok ? (size_t)ntok : 1));
  plan->ntok = ntok;
  int nkept = 0;
  for (int t = 0; t < ntok; t++) {
    RrfPlanTok *pt = &plan->tok[t];
    pt->start = toks[t].start;
    pt->len = toks[t].len;
    pt->nterm = -1; /* not tokenized */
    if (pr != NULL && pr->tok != NULL) {
      int stop = 0;
      rc = rrf_token_terms(pr, s + pt->start, pt->len, &pt->nterm, &stop, terms ? &pt->term : NULL,
                           &pt->nbytes);
      if (rc == SQLITE_NOMEM) goto nomem;
      if (rc != SQLITE_OK) {
        char buf[64];
        rrf_error(ctx, "%s: the FTS5 tokenizer '%s' failed (%s)", fn,
                  pr->nspec
                      ? rrf_shown((const unsigned char *)pr->spec, pr->nspec, buf, RRF_SHOWN_MAX)
                      : "unicode61",
                  sqlite3_errstr(rc));
        goto done;
      }
      pt->stop = stop; /* Q10 */
      pt->drop = stop;
    }
    if (!pt->drop) nkept++;
  }
  if (nkept == 0) /* Q11 */
    for (int t = 0; t < ntok; t++) plan->tok[t].drop = 0;
  for (int t = 0; t < ntok; t++) plan->ndrop += plan->tok[t].drop;
  *out = plan;
  plan = NULL;
  goto done;
nomem:
  rc = SQLITE_NOMEM;
  sqlite3_result_error_nomem(ctx);
done:
  sqlite3_free(toks);
  rrf_spanset_free(&seen);
  rrf_fts5_plan_free(plan);
  return rc;
}

int rrf_fts5_plan(sqlite3_context *ctx, const char *fn, fts5_api *api, sqlite3_value *text,
                  sqlite3_value *stop, sqlite3_value *tokenize, RrfPlan **out) {
  *out = NULL;
  int ttype = sqlite3_value_type(text);
  if (ttype != SQLITE_TEXT && ttype != SQLITE_INTEGER && ttype != SQLITE_FLOAT) { /* Q6 */
    rrf_error(ctx, "%s: text must be TEXT, got %s", fn, rrf_type_name(text));
    return SQLITE_ERROR;
  }
  if (rrf_fts5_check_types(ctx, fn, stop, tokenize) != SQLITE_OK) return SQLITE_ERROR;
  RrfPrune *pr = rrf_prune_make(ctx, fn, api, NULL, stop, tokenize, 0);
  if (pr == NULL) return SQLITE_ERROR;
  const unsigned char *s = sqlite3_value_text(text);
  int len = sqlite3_value_bytes(text);
  int rc;
  if (s == NULL) {
    sqlite3_result_error_nomem(ctx);
    rc = SQLITE_NOMEM;
  } else {
    rc = make_plan(ctx, fn, pr, s, len, 1, out);
  }
  rrf_prune_free(pr);
  return rc;
}

/* Q15: append s[0..n) as a JSON string. */
static void json_string(sqlite3_str *out, const char *s, int n) {
  static const char hex[] = "0123456789abcdef";
  sqlite3_str_appendchar(out, 1, '"');
  for (int i = 0; i < n; i++) {
    unsigned char c = (unsigned char)s[i];
    if (c == '"' || c == '\\') {
      sqlite3_str_appendchar(out, 1, '\\');
      sqlite3_str_appendchar(out, 1, (char)c);
    } else if (c < 0x20) {
      char esc[6] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15]};
      sqlite3_str_append(out, esc, 6);
    } else {
      sqlite3_str_appendchar(out, 1, (char)c);
    }
  }
  sqlite3_str_appendchar(out, 1, '"');
}

void rrf_fts5_query(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
  const char *joiner = " OR ";
  int terms_mode = 0;
  sqlite3_str *out = NULL;
  RrfPrune *pr = NULL;
  RrfPlan *plan = NULL;
  int pr_fresh = 0; /* pr made by this call (else it is SQLite's auxdata) */
  int aux_arg = argc > 2 ? 2 : 1; /* where pr is kept */

  if (sqlite3_value_type(argv[0]) == SQLITE_NULL) { /* Q6 */
    sqlite3_result_null(ctx);
    return;
  }
  if (sqlite3_value_type(argv[0]) == SQLITE_BLOB) {
    rrf_error(ctx, "fts5_query: text must be TEXT, got BLOB");
    return;
  }
  if (argc > 1 && sqlite3_value_type(argv[1]) != SQLITE_NULL) { /* Q1 */
    /* The type before sqlite3_value_text(), which turns a BLOB or number into TEXT. */
    int is_text = sqlite3_value_type(argv[1]) == SQLITE_TEXT;
    const unsigned char *m = sqlite3_value_text(argv[1]);
    int mlen = sqlite3_value_bytes(argv[1]);
    if (is_text && m && mlen == 2 && rrf_ascii_ieq(m, (const unsigned char *)"or", 2)) {
      joiner = " OR ";
    } else if (is_text && m && mlen == 3 && rrf_ascii_ieq(m, (const unsigned char *)"and", 3)) {
      joiner = " AND ";
    } else if (is_text && m && mlen == 5 && rrf_ascii_ieq(m, (const unsigned char *)"terms", 5)) {
      terms_mode = 1;
    } else {
      rrf_error(ctx, "fts5_query: mode must be 'or', 'and' or 'terms'");
      return;
    }
  }
  if (rrf_fts5_check_types(ctx, "fts5_query", argc > 2 ? argv[2] : NULL, argc > 3 ? argv[3] : NULL))
    return; /* Q8, Q9 */
  if ((argc > 2 && sqlite3_value_type(argv[2]) == SQLITE_TEXT) || terms_mode) { /* Q8, Q13 */
    RrfPrune *cached = sqlite3_get_auxdata(ctx, aux_arg);
    pr = rrf_prune_make(ctx, "fts5_query", NULL, cached, argc > 2 ? argv[2] : NULL,
                        argc > 3 ? argv[3] : NULL, terms_mode);
    if (pr == NULL) return; /* error set; a cached pr stays SQLite's */
    pr_fresh = pr != cached;
  }

  const unsigned char *s = sqlite3_value_text(argv[0]);
  int len = sqlite3_value_bytes(argv[0]);
  if (s == NULL) goto nomem;
  if (make_plan(ctx, "fts5_query", pr, s, len, terms_mode, &plan) != SQLITE_OK) goto done;

  out = sqlite3_str_new(NULL); /* no db: rrf_result_str checks the limit (Q6) */
  if (terms_mode) { /* Q15 */
    int nout = 0;
    sqlite3_str_appendchar(out, 1, '[');
    for (int t = 0; t < plan->ntok; t++) {
      const RrfPlanTok *pt = &plan->tok[t];
      if (pt->nterm != 1 || (pr->stop.nwords > 0 && !pt->stop)) continue;
      if (nout++) sqlite3_str_appendchar(out, 1, ',');
      sqlite3_str_appendall(out, "[\"\\\"");
      sqlite3_str_append(out, (const char *)s + pt->start, pt->len); /* Q2: no '"' or '\' */
      sqlite3_str_appendall(out, "\\\"\",");
      json_string(out, pt->term, pt->nbytes);
      sqlite3_str_appendchar(out, 1, ']');
    }
    sqlite3_str_appendchar(out, 1, ']');
  } else if (plan->ntok == 0) { /* Q5 */
    sqlite3_str_appendall(out, "\"\"");
  } else {
    /* Q1, Q3: quote every token kept (no token contains '"', Q2). */
    for (int t = 0, nout = 0; t < plan->ntok; t++) {
      if (plan->tok[t].drop) continue;
      if (nout++) sqlite3_str_appendall(out, joiner);
      sqlite3_str_appendchar(out, 1, '"');
      sqlite3_str_append(out, (const char *)s + plan->tok[t].start, plan->tok[t].len);
      sqlite3_str_appendchar(out, 1, '"');
    }
  }
  rrf_result_str(ctx, out, "fts5_query"); /* Q6: past SQLITE_LIMIT_LENGTH, an error */
  out = NULL;
  goto done;

nomem:
  sqlite3_result_error_nomem(ctx);
done:
  rrf_fts5_plan_free(plan);
  if (out) sqlite3_free(sqlite3_str_finish(out));
  /* Kept for the next row while the argument stays the same (SQLite may free it
  ** at once); set last, since pr may be gone after this call. */
  if (pr_fresh) sqlite3_set_auxdata(ctx, aux_arg, pr, rrf_prune_free);
}
