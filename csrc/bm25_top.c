/*
** rrf_bm25_or_top(fts_table, n, text [, stopwords [, tokenize [, weight...]]])
** -> TEXT: the top n of rrf_bm25_or's scan in one call, as a JSON array of
** [rowid, value] pairs, best first (ORDER BY value, rowid); the same on every
** row of the scan, so `... LIMIT 1` stops the scan after its first row.
**  B16. Arguments, errors and values as rrf_bm25_or's (B6, B7, B10, B11; n NULL:
**       every row). The rows and values are those of ORDER BY bm25() [, rowid]
**       LIMIT n of the whole query over the rows of the scan (B13's proviso
**       for the rows the scan leaves out). Values are printed with 17
**       significant digits (%!.17g), which SQLite's JSON reads back exactly.
**       Computed term at a time (MaxScore), with xQueryPhrase only:
**       pass 1: each phrase's rows (the count B2 makes anyway), kept: every
**         row's U1 (B3), from a map by rowid (dense rowids: a byte of the
**         row's phrases as bits up to 8 phrases, U1 from a table of 256, else
**         a double) or a sort; the lists are freed once U1 is made;
**       pass 2: the phrases by increasing number of rows; a row is admitted at
**         its first phrase unless its bound * (1 + 1e-9) + D (B12) is below theta
**         (the bound: U1, then U1 with that phrase's term for its frequency and
**         a length of 0, B3's U2 for one phrase),
**         a lower bound of the n-th best score (the n-th best of the admitted
**         rows' partial sums, times 1 - 1e-9; it only rises, so a row left out
**         stays out); an admitted row gets xColumnSize(-1) and, from each of its
**         phrases' own query, xInst's frequency (bm25's sum of weights: the
**         same instances in the same order for an OR of phrases, B10's
**         contract). Its kept part is B2's sum in phrase order, bit for bit.
**         A row whose length is negative switches the bounds off: pass 2 runs
**         again admitting every row (so do bad weights and B5's other cases);
**       pass 3 (words dropped): the rows whose kept part * (1 + 1e-9) + D
**         reaches theta (now from the exact kept parts) get B11's whole-query
**         score from their text, read in the rarest phrase's query first;
**         the others cannot be among the n best.
**       Contract: the rows are the MATCH's: a statement that keeps only some
**       of them (a filter) must use rrf_bm25_or's per-row scan.
**
** Here: the function and its passes in order; the passes' row callback and
** pass 1's map of the rows are in bm25_top_pass.c.
*/
#include "bm25_internal.h"
SQLITE_EXTENSION_INIT3

/* The final order: the best score first (bm25 ascending), then the rowid. */
static int cmp_final(const void *a, const void *b) {
  const TopCand *x = *(const TopCand *const *)a, *y = *(const TopCand *const *)b;
  if (x->full > y->full) return -1;
  if (x->full < y->full) return 1;
  return x->rowid < y->rowid ? -1 : x->rowid > y->rowid;
}

/* B16: rrf_bm25_or_top's result (sqlite3_malloc'd JSON) into *json; SQLITE_OK, an
** error code (error set on ctx when it is SQLITE_ERROR from here). */
static int top_compute(const Fts5ExtensionApi *pApi, Fts5Context *pFts, sqlite3_context *ctx,
                       Bm25Query *q, const double *w, sqlite3_int64 n, int prune, char **json) {
  sqlite3_int64 i;
  TopCand **fin = NULL;
  int rc, nP = q->nPhrase;
  int nDrop = q->or->nDrop;
  TopPass t;
  int order[256];
  *json = NULL;
  memset(&t, 0, sizeof t);
  t.q = q;
  t.w = w;
  t.n = n;
  t.bDrop = nDrop > 0 ? q->or->bDrop * BM25_MARGIN : 0.0;
  rc = rrf_bm25_top_rows(q, &t.rows, &t.nRow, &t.dense, &t.mask, t.u1, &t.lo);
  if (rc != SQLITE_OK) return rc;
  /* the rowids are in t now; only the lists' lengths are read from here (the order
  ** below; the result is computed once per query), so the heap holds one copy */
  for (int p = 0; p < nP; p++) {
    sqlite3_free(q->aList[p].a);
    q->aList[p].a = NULL;
    q->aList[p].cap = 0;
  }
  /* the phrases by increasing number of rows: the rarest weigh most (MaxScore) */
  int nOrd = nP < 256 ? nP : 256;
  for (int a = 0; a < nOrd; a++) {
    int j = a;
    while (j > 0 && q->aList[order[j - 1]].n > q->aList[a].n) {
      order[j] = order[j - 1];
      j--;
    }
    order[j] = a;
  }
  t.adm = (int *)sqlite3_malloc64((sqlite3_uint64)(t.nRow ? t.nRow : 1) * sizeof(int));
  if (t.adm == NULL) goto nomem;
  for (int attempt = 0; attempt < 2; attempt++) {
    /* pass 2: each row at its first phrase is admitted (its length read) or not for good */
    for (i = 0; i < t.nRow; i++) t.adm[i] = -1;
    t.nc = 0;
    t.prune = attempt == 0 ? prune : 0;
    t.theta = -INFINITY;
    t.nextTheta = n;
    t.mode = 2;
    for (int a = 0; rc == SQLITE_OK && a < nP; a++) {
      t.iPhrase = a < nOrd ? order[a] : a;
      t.ptr = 0;
      t.last = INT64_MIN;
      rc = pApi->xQueryPhrase(pFts, t.iPhrase, (void *)&t, rrf_bm25_top_cb);
      if (rc == SQLITE_OK) rrf_bm25_top_theta(&t);
    }
    if (rc != SQLITE_OK) goto done;
    if (t.prune || !prune || attempt == 1) break;
    /* a row without a length switched the bounds off: again, admitting every row */
  }
  /* the kept part, exactly (B2); theta from it */
  for (i = 0; i < t.nc; i++) {
    t.c[i].k = rrf_bm25_sum(q, &t.f[i * nP], (double)t.c[i].D);
    t.c[i].state = 2;
    t.c[i].acc = nDrop > 0 ? t.c[i].k : t.c[i].k / (1.0 - 1e-9); /* rrf_bm25_top_theta's margin */
  }
  if (t.prune) {
    t.theta = -INFINITY;
    rrf_bm25_top_theta(&t);
  } else {
    t.theta = -INFINITY;
  }
  /* the whole query's score: the kept part, or with the dropped words read from the text */
  sqlite3_int64 nFin = 0;
  for (i = 0; i < t.nc; i++) {
    TopCand *c = &t.c[i];
    if (c->k * BM25_MARGIN + t.bDrop < t.theta) continue; /* cannot be among the n best */
    if (nDrop > 0) {
      c->state = 3;
      t.remaining++;
    } else {
      c->full = c->k;
      c->state = 4;
    }
    nFin++;
  }
#ifdef BM25_STATS
  fprintf(stderr, "top: rows %lld, admitted %lld, text %lld\n", (long long)t.nRow, (long long)t.nc,
          (long long)t.remaining);
#endif
  if (t.remaining > 0) {
    t.mode = 3;
    for (int a = 0; rc == SQLITE_OK && t.remaining > 0 && a < nP; a++) {
      t.ptr = 0;
      t.last = INT64_MIN;
      rc = pApi->xQueryPhrase(pFts, a < nOrd ? order[a] : a, (void *)&t, rrf_bm25_top_cb);
    }
    if (t.textErr) {
      rc = t.textErr == OR_TEXT_LENGTH
               ? rrf_error(ctx,
                           "%s: the text of row %lld has %d tokens, its FTS5 index entry "
                           "another number: rebuild the index",
                           BM25_TOP_FN, (long long)t.errRow, q->or->nTok)
               : rrf_error(ctx,
                           "%s: the text of row %lld does not hold the terms its FTS5 index "
                           "entry holds: rebuild the index",
                           BM25_TOP_FN, (long long)t.errRow);
      goto done;
    }
    if (rc != SQLITE_OK) goto done;
    if (t.remaining > 0) {
      rc = SQLITE_CORRUPT;
      goto done;
    }
  }
  fin = (TopCand **)sqlite3_malloc64((sqlite3_uint64)(nFin ? nFin : 1) * sizeof(TopCand *));
  if (fin == NULL) goto nomem;
  nFin = 0;
  for (i = 0; i < t.nc; i++)
    if (t.c[i].state == 4) fin[nFin++] = &t.c[i];
  qsort(fin, (size_t)nFin, sizeof(TopCand *), cmp_final);
  sqlite3_str *str = sqlite3_str_new(NULL);
  sqlite3_str_appendchar(str, 1, '[');
  for (i = 0; i < nFin && i < n; i++) {
    double v = -1.0 * fin[i]->full;
    if (i) sqlite3_str_appendchar(str, 1, ',');
    if (isnan(v)) sqlite3_str_appendf(str, "[%lld,null]", (long long)fin[i]->rowid);
    else if (isinf(v))
      sqlite3_str_appendf(str, "[%lld,%s]", (long long)fin[i]->rowid, v > 0 ? "9e999" : "-9e999");
    else sqlite3_str_appendf(str, "[%lld,%!.17g]", (long long)fin[i]->rowid, v);
  }
  sqlite3_str_appendchar(str, 1, ']');
  rc = sqlite3_str_errcode(str);
  *json = sqlite3_str_finish(str);
  if (rc != SQLITE_OK) {
    sqlite3_free(*json);
    *json = NULL;
  }
  goto done;
nomem:
  rc = SQLITE_NOMEM;
done:
  sqlite3_free(t.rows);
  sqlite3_free(t.dense);
  sqlite3_free(t.mask);
  sqlite3_free(t.adm);
  sqlite3_free(t.c);
  sqlite3_free(t.f);
  sqlite3_free(t.tmp);
  sqlite3_free(fin);
  return rc;
}

void rrf_bm25_top_fn(const Fts5ExtensionApi *pApi, Fts5Context *pFts, sqlite3_context *ctx,
                     int nVal, sqlite3_value **apVal, const Bm25Fn *fn) {
  Bm25Query *q = (Bm25Query *)pApi->xGetAuxdata(pFts, 0);
  sqlite3_int64 n = 0;
  double wStack[16], *w = wStack;
  int rc = SQLITE_OK, prune;
  if (nVal < 2) {
    rrf_error(ctx,
              "%s: missing arguments; usage: %s(fts_table, n, text [, stopwords "
              "[, tokenize [, weight ...]]])",
              BM25_TOP_FN, BM25_TOP_FN);
    return;
  }
  if (rrf_bm25_read_n(ctx, BM25_TOP_FN, apVal[0], &n)) return;
  if (n == 0) n = INT64_MAX; /* NULL: every row */
  if (q == NULL) {
    int nPhrase = pApi->xPhraseCount(pFts);
    RowList *aList =
        (RowList *)sqlite3_malloc64(sizeof(RowList) * (size_t)(nPhrase > 0 ? nPhrase : 1));
    if (aList == NULL) {
      sqlite3_result_error_nomem(ctx);
      return;
    }
    memset(aList, 0, sizeof(RowList) * (size_t)(nPhrase > 0 ? nPhrase : 1));
    rc = rrf_bm25_query_get(pApi, pFts, &q, aList);
    if (q) q->aList = aList;
    else {
      for (int i = 0; i < nPhrase; i++) sqlite3_free(aList[i].a);
      sqlite3_free(aList);
    }
    if (rc != SQLITE_OK) {
      sqlite3_result_error_code(ctx, rc);
      return;
    }
  }
  /* B10: the plan on the first call, the same arguments on the others */
  rc = rrf_bm25_or_get(pApi, pFts, ctx, fn->api, BM25_TOP_FN, q, apVal + 1,
                       nVal - 1 < 3 ? nVal - 1 : 3);
  if (rc != SQLITE_OK) return; /* error set */
  if (q->topJson == NULL) {
    if (q->aList == NULL) { /* the query's data was made without the lists */
      rrf_error(ctx, "%s: cannot share its FTS5 query", BM25_TOP_FN);
      return;
    }
    if (q->nCol > (int)(sizeof wStack / sizeof wStack[0])) {
      w = (double *)sqlite3_malloc64((sqlite3_uint64)q->nCol * sizeof(double));
      if (w == NULL) {
        sqlite3_result_error_nomem(ctx);
        return;
      }
    }
    int nW = nVal - 4;
    prune = q->pruneOk;
    for (int i = 0; i < q->nCol; i++) {
      w[i] = (nW > i) ? sqlite3_value_double(apVal[4 + i]) : 1.0;
      if (!(w[i] >= 0.0 && w[i] <= BM25_MAX_WEIGHT)) prune = 0;
    }
    rc = top_compute(pApi, pFts, ctx, q, w, n, prune, &q->topJson);
    if (w != wStack) sqlite3_free(w);
    if (rc != SQLITE_OK) {
      if (rc != SQLITE_ERROR) sqlite3_result_error_code(ctx, rc);
      return;
    }
  }
  sqlite3_result_text(ctx, q->topJson, -1, SQLITE_TRANSIENT);
}
