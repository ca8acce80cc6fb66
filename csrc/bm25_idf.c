/*
** rrf_bm25_idf(fts_table [, phrase]) -> REAL: the IDF FTS5's bm25() gives
** phrase `phrase` (default 0) of the current query.
**  B14. Computed as B2 does (xQueryPhrase, xRowCount), except that counting
**       stops as soon as the phrase is found in at least half of the rows: the
**       IDF is then 1e-6 whatever the rest. Kept per query, so calling it on
**       every row costs one count. phrase must be an integer from 0 to the
**       number of phrases - 1, else an error naming the function.
*/
#include "bm25_internal.h"
SQLITE_EXTENSION_INIT3

/* ---- rrf_bm25_idf (B14) ---- */

typedef struct IdfCount {
  sqlite3_int64 n, nRow;
} IdfCount;

static int idf_count_cb(const Fts5ExtensionApi *pApi, Fts5Context *pFts, void *pUserData) {
  IdfCount *c = (IdfCount *)pUserData;
  (void)pApi;
  (void)pFts;
  c->n++;
  return 2 * c->n >= c->nRow ? SQLITE_DONE : SQLITE_OK; /* B14: the IDF is 1e-6 from here */
}

void rrf_bm25_idf_fn(const Fts5ExtensionApi *pApi, Fts5Context *pFts, sqlite3_context *ctx,
                     int nVal, sqlite3_value **apVal) {
  int nPhrase = pApi->xPhraseCount(pFts), iPhrase = 0, rc;
  if (nVal > 1) {
    rrf_error(ctx, "rrf_bm25_idf: usage: rrf_bm25_idf(fts_table [, phrase])");
    return;
  }
  if (nVal == 1) {
    sqlite3_int64 v = -1;
    int t = sqlite3_value_numeric_type(apVal[0]);
    if (t == SQLITE_INTEGER) v = sqlite3_value_int64(apVal[0]);
    else if (t == SQLITE_FLOAT &&
             floor(sqlite3_value_double(apVal[0])) == sqlite3_value_double(apVal[0]) &&
             fabs(sqlite3_value_double(apVal[0])) < 1e9)
      v = (sqlite3_int64)sqlite3_value_double(apVal[0]);
    if (v < 0 || v >= nPhrase) {
      rrf_error(ctx, "rrf_bm25_idf: phrase must be an integer from 0 to %d", nPhrase - 1);
      return;
    }
    iPhrase = (int)v;
  }
  double *cache = (double *)pApi->xGetAuxdata(pFts, 0);
  if (cache == NULL) {
    cache = (double *)sqlite3_malloc64(sizeof(double) * (size_t)(nPhrase > 0 ? nPhrase : 1));
    if (cache == NULL) {
      sqlite3_result_error_nomem(ctx);
      return;
    }
    for (int i = 0; i < nPhrase; i++) cache[i] = NAN;
    rc = pApi->xSetAuxdata(pFts, cache, sqlite3_free);
    if (rc != SQLITE_OK) {
      sqlite3_result_error_code(ctx, rc);
      return;
    }
  }
  if (isnan(cache[iPhrase])) {
    IdfCount c = {0, 0};
    rc = pApi->xRowCount(pFts, &c.nRow);
    if (rc == SQLITE_OK) rc = pApi->xQueryPhrase(pFts, iPhrase, (void *)&c, idf_count_cb);
    if (rc != SQLITE_OK) {
      sqlite3_result_error_code(ctx, rc);
      return;
    }
    double idf = log((c.nRow - c.n + 0.5) / (c.n + 0.5)); /* B2's formula */
    if (idf <= 0.0) idf = 1e-6;
    cache[iPhrase] = idf;
  }
  sqlite3_result_double(ctx, cache[iPhrase]);
}
