/*
** rrf_bm25_or(fts_table, n, text [, stopwords [, tokenize [, weight...]]]) ->
** REAL: the same, for the OR query of text's words, on a scan of that query
** without its stopwords. The MATCH expression must be
** fts5_query(text, 'or', stopwords, tokenize); the value is bm25() of the whole
** query, fts5_query(text), as if FTS5 had run that one.
**  B10. The words: fts5q.c's plan (rrf_fts5_plan, Q2..Q14) gives the tokens of
**       fts5_query(text) in order and which of them the MATCH expression drops
**       (errors as fts5_query's, naming rrf_bm25_or). The MATCH expression must
**       have as many phrases as the plan keeps (else an error), and every
**       dropped token must give the table's own tokenizer (xTokenize) the term
**       it gave tokenize (else an error: the two tokenizers differ). text,
**       stopwords and tokenize must be the same on every row of a query.
**  B11. Exact value: for every row scored exactly the result is, bit for bit,
**       what bm25(fts_table [, weight...]) gives the row under MATCH
**       fts5_query(text): B2's sum over the phrases of the whole query in their
**       order, where a kept phrase has B2's IDF and frequency and a dropped one
**       the IDF 1e-6 and the frequency of its term in the row's text, read
**       with xColumnText and the table's tokenizer (the weight of the column
**       for each occurrence, as xInst counts it).
**       Contract: each stopword is in at least half of the rows, so that FTS5
**       gives it that IDF (rrf_bm25_idf checks it; the recall statement drops
**       only such words), and the index matches its text (FTS5's
**       integrity-check passes). A row whose text has another number of tokens
**       than the index's xColumnSize(-1), or another count of a kept phrase's
**       term than xInst, is an error naming the row: its text is not what was
**       indexed (a contentless table has no text: an error too).
**  B12. Pruning as B3, with every bound raised by D = (dropped phrases) *
**       1e-6 * (k1 + 1), the most the dropped phrases can add to a row's
**       score; and a row whose exact kept part plus D, times (1 + 1e-9), is
**       below the n-th best is pruned before its text is read. So the text of
**       a row is read only when the row can still be among the n best.
**  B13. Contract (B4 for the whole query): ORDER BY rrf_bm25_or(...) [, rowid]
**       LIMIT m, m <= n, gives the rows and values of ORDER BY bm25() [, rowid]
**       LIMIT m under MATCH fts5_query(text), provided that at least m rows of
**       the scan have a value below -D: rows holding only dropped words are
**       not in the scan, and their score is at most D. The recall statement
**       checks that and otherwise runs the whole query.
**
** Here: the whole query (B10) and a row's text read for the dropped words (B11);
** the per-row function is bm25_score.c's, rrf_bm25_or_top is bm25_top.c.
*/
#include "bm25_internal.h"
SQLITE_EXTENSION_INIT3

void rrf_bm25_or_free(Bm25Or *o) {
  if (o == NULL) return;
  sqlite3_free(o->args);
  sqlite3_free(o->aMap);
  sqlite3_free(o->termBuf);
  sqlite3_free(o->aTerm);
  rrf_spanset_free(&o->terms);
  sqlite3_free(o->aKeptTerm);
  sqlite3_free(o->aTermFreq);
  sqlite3_free(o);
}

/* The index of term t[0..n), or -1. */
static int or_find(const Bm25Or *o, const char *t, int n) {
  return rrf_spanset_find(&o->terms, (const unsigned char *)o->termBuf, o->aTerm,
                          (const unsigned char *)t, n);
}

/* The index of term t[0..n), added if new (it frees t, sqlite3_malloc'd); -1 when out
** of memory. */
static int or_add(Bm25Or *o, char *t, int n) {
  int k = or_find(o, t, n);
  if (k >= 0) {
    sqlite3_free(t);
    return k;
  }
  if (o->nTermBuf + n > o->capTermBuf) {
    int cap = 2 * (o->nTermBuf + n) + 64;
    char *buf = sqlite3_realloc64(o->termBuf, (sqlite3_uint64)cap);
    if (buf == NULL) {
      sqlite3_free(t);
      return -1;
    }
    o->termBuf = buf;
    o->capTermBuf = cap;
  }
  if (n > 0) memcpy(o->termBuf + o->nTermBuf, t, (size_t)n);
  o->aTerm[o->nTerm].start = o->nTermBuf;
  o->aTerm[o->nTerm].len = n;
  o->nTermBuf += n;
  rrf_spanset_add(&o->terms, (const unsigned char *)o->termBuf, o->aTerm, o->nTerm);
  if (n > 0) {
    unsigned char c0 = (unsigned char)t[0];
    o->first[c0 >> 3] |= (unsigned char)(1u << (c0 & 7));
  }
  sqlite3_free(t);
  return o->nTerm++;
}

/* The table's tokenizer on one token: its single term, or none. */
typedef struct OneTerm {
  int n;      /* terms seen, up to 2 */
  char *term; /* the first, sqlite3_malloc'd */
  int nterm;
} OneTerm;

static int one_term_cb(void *p, int tflags, const char *t, int n, int start, int end) {
  OneTerm *c = (OneTerm *)p;
  (void)tflags;
  (void)start;
  (void)end;
  if (c->n == 0) {
    if (n < 0) n = 0;
    c->term = sqlite3_malloc64((sqlite3_uint64)n + 1);
    if (c->term == NULL) return SQLITE_NOMEM;
    if (n) memcpy(c->term, t, (size_t)n);
    c->term[n] = 0;
    c->nterm = n;
  }
  if (c->n < 2) c->n++;
  return SQLITE_OK;
}

/* B10: q->or from the arguments (text, stopwords, tokenize: argv[0..nArg)), on the
** first call of the query; on later calls, check that they are the same.
** SQLITE_OK, or an error code with the error set on ctx. */
int rrf_bm25_or_get(const Fts5ExtensionApi *pApi, Fts5Context *pFts, sqlite3_context *ctx,
                    fts5_api *api, const char *fn, Bm25Query *q, sqlite3_value **argv, int nArg) {
  const unsigned char *z[3] = {NULL, NULL, NULL};
  int nz[3] = {0, 0, 0}, tz[3] = {0, 0, 0}, total = 0, rc = SQLITE_OK;
  for (int i = 0; i < 3; i++) {
    if (i >= nArg) continue;
    tz[i] = sqlite3_value_type(argv[i]);
    /* text: INTEGER and REAL are read as their text, as fts5_query reads them (Q6) */
    if (tz[i] == SQLITE_TEXT || (i == 0 && (tz[i] == SQLITE_INTEGER || tz[i] == SQLITE_FLOAT))) {
      z[i] = sqlite3_value_text(argv[i]);
      nz[i] = sqlite3_value_bytes(argv[i]);
      if (z[i] == NULL) {
        sqlite3_result_error_nomem(ctx);
        return SQLITE_NOMEM;
      }
      total += nz[i];
    }
  }
  if (q->or) { /* B10: the same arguments as the first call */
    const char *a = q->or->args;
    for (int i = 0; i < 3; i++) {
      if (tz[i] != q->or->tArgs[i] || nz[i] != q->or->nArgs[i] ||
          (nz[i] && memcmp(a, z[i], (size_t)nz[i]) != 0))
        return rrf_error(ctx,
                         "%s: text, stopwords and tokenize must be the same on every row "
                         "of a query",
                         fn);
      a += nz[i];
    }
    return SQLITE_OK;
  }

  RrfPlan *plan = NULL;
  Bm25Or *o = NULL;
  if (z[0] == NULL)
    return rrf_error(ctx, "%s: text must be TEXT, got %s", fn, rrf_type_name(argv[0]));
  rc = rrf_fts5_plan(ctx, fn, api, argv[0], nArg > 1 ? argv[1] : NULL, nArg > 2 ? argv[2] : NULL,
                     &plan);
  if (rc != SQLITE_OK) return rc; /* error set (fts5q.c's messages, naming rrf_bm25_or) */
  int nkept = plan->ntok - plan->ndrop;
  if (nkept != q->nPhrase && !(plan->ntok == 0 && q->nPhrase == 1)) {
    rc = rrf_error(ctx,
                   "%s: the MATCH expression has %d phrases; "
                   "fts5_query(text, 'or', stopwords, tokenize) has %d",
                   fn, q->nPhrase, nkept);
    goto done;
  }
  o = sqlite3_malloc(sizeof *o);
  if (o == NULL) goto nomem;
  memset(o, 0, sizeof *o);
  int ntok = plan->ntok, cap = 2 * (ntok + 1);
  o->args = sqlite3_malloc64((sqlite3_uint64)total + 1);
  o->aMap = sqlite3_malloc64(sizeof(int) * (size_t)(ntok + 1));
  o->aTerm = sqlite3_malloc64(sizeof(RrfSpan) * (size_t)cap);
  o->aKeptTerm = sqlite3_malloc64(sizeof(int) * (size_t)(q->nPhrase + 1));
  o->aTermFreq = sqlite3_malloc64(sizeof(double) * (size_t)cap);
  if (!o->args || !o->aMap || !o->aTerm || !o->aKeptTerm || !o->aTermFreq ||
      rrf_spanset_init(&o->terms, cap, 0) != SQLITE_OK)
    goto nomem;
  for (int i = 0, off = 0; i < 3; i++) {
    o->tArgs[i] = tz[i];
    o->nArgs[i] = nz[i];
    if (nz[i]) memcpy(o->args + off, z[i], (size_t)nz[i]);
    off += nz[i];
  }
  for (int i = 0; i < q->nPhrase; i++) o->aKeptTerm[i] = -1;
  o->nFull = ntok;
  for (int t = 0, kept = 0; t < ntok; t++) {
    const RrfPlanTok *pt = &plan->tok[t];
    OneTerm one = {0, NULL, 0};
    int trc;
    if (pt->drop || pt->nterm == 1 || pt->nterm < 0) {
      /* the table's own tokenizer on the token (B10, B11) */
      trc = pApi->xTokenize(pFts, (const char *)z[0] + pt->start, pt->len, &one, one_term_cb);
      if (trc != SQLITE_OK) {
        sqlite3_free(one.term);
        rc = trc;
        sqlite3_result_error_code(ctx, rc);
        goto done;
      }
    }
    if (pt->drop) {
      if (one.n != 1 || one.nterm != pt->nbytes || memcmp(one.term, pt->term, (size_t)pt->nbytes)) {
        char word[25]; /* the token, cut to 24 bytes at a character boundary */
        const unsigned char *src = z[0] + pt->start;
        int nw = pt->len > 24 ? 24 : pt->len;
        while (nw > 0 && nw < pt->len && (src[nw] & 0xC0) == 0x80) nw--;
        memcpy(word, src, (size_t)nw);
        word[nw] = 0;
        sqlite3_free(one.term);
        rc = rrf_error(ctx,
                       "%s: tokenize is not the table's tokenizer: "
                       "the table makes another term of '%s'",
                       fn, word);
        goto done;
      }
      int k = or_add(o, one.term, one.nterm);
      if (k < 0) goto nomem;
      o->aMap[t] = -1 - k;
      o->nDrop++;
    } else {
      if (one.n == 1) {
        o->aKeptTerm[kept] = or_add(o, one.term, one.nterm);
        if (o->aKeptTerm[kept] < 0) goto nomem;
      } else {
        sqlite3_free(one.term);
      }
      o->aMap[t] = kept++;
    }
  }
  o->bDrop = (double)o->nDrop * BM25_DROP_IDF * (k1 + 1.0);
  q->or = o;
  o = NULL;
  goto done;
nomem:
  rc = SQLITE_NOMEM;
  sqlite3_result_error_nomem(ctx);
done:
  rrf_bm25_or_free(o);
  rrf_fts5_plan_free(plan);
  return rc;
}

static int or_token_cb(void *p, int tflags, const char *t, int n, int start, int end) {
  Bm25Or *o = (Bm25Or *)p;
  (void)start;
  (void)end;
  /* xColumnSize counts a token unless it is colocated (fts5_storage.c) */
  if ((tflags & FTS5_TOKEN_COLOCATED) == 0 || o->colSize == 0) o->colSize++;
  if (n > 0 && t != NULL && (o->first[(unsigned char)t[0] >> 3] >> ((unsigned char)t[0] & 7)) & 1) {
    int k = or_find(o, t, n);
    if (k >= 0) o->aTermFreq[k] += o->w;
  }
  return SQLITE_OK;
}

/* B11: the whole query's score of the current row, whose kept phrases have the
** frequencies q->aFreq and whose length is D: SQLITE_OK, an SQLite error code,
** or OR_TEXT_LENGTH / OR_TEXT_TERMS when the text is not what was indexed. */
int rrf_bm25_or_full_score(const Fts5ExtensionApi *pApi, Fts5Context *pFts, Bm25Query *q,
                           const double *w, int D, double *score) {
  Bm25Or *o = q->or;
  int rc = SQLITE_OK, i;
  for (i = 0; i < o->nTerm; i++) o->aTermFreq[i] = 0.0;
  o->nTok = 0;
  for (i = 0; rc == SQLITE_OK && i < q->nCol; i++) {
    const char *z = NULL;
    int n = 0;
    rc = pApi->xColumnText(pFts, i, &z, &n);
    if (rc != SQLITE_OK) break;
    o->colSize = 0;
    o->w = w[i];
    if (z != NULL && n > 0) rc = pApi->xTokenize(pFts, z, n, (void *)o, or_token_cb);
    o->nTok += o->colSize;
  }
  if (rc != SQLITE_OK) return rc;
  if (o->nTok != D) return OR_TEXT_LENGTH;
  for (i = 0; i < q->nPhrase; i++) {
    int k = o->aKeptTerm[i];
    if (k >= 0 && memcmp(&o->aTermFreq[k], &q->aFreq[i], sizeof(double)) != 0) return OR_TEXT_TERMS;
  }
  /* B2's sum, over the whole query's phrases in its order */
  double sum = 0.0;
  for (i = 0; i < o->nFull; i++) {
    int m = o->aMap[i];
    double idf = m >= 0 ? q->aIDF[m] : BM25_DROP_IDF;
    double f = m >= 0 ? q->aFreq[m] : o->aTermFreq[-1 - m];
    sum += idf * ((f * (k1 + 1.0)) / (f + k1 * (1 - b + b * (double)D / q->avgdl)));
  }
  *score = sum;
  return SQLITE_OK;
}
