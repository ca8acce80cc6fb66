/*
** rrf_bm25(fts_table, n [, weight...]) -> REAL: an FTS5 auxiliary function that
** gives FTS5's own bm25() for the rows that can still be among the n best of the
** query, and skips the per-row document-length lookup (the costliest part of
** bm25) for the rows that provably cannot.
**
** Requirements (tests/test_bm25.py cites them as B1..B9):
**   B1. Registration: through the connection's fts5_api (SELECT fts5(?1) with
**       sqlite3_bind_pointer(..., "fts5_api_ptr", 0)), when sqlite3_rrf_init
**       runs. A connection without FTS5 loads the extension without rrf_bm25.
**   B2. Exact value: for every row that is not pruned (B3) the result is the
**       double FTS5's built-in bm25(fts_table [, weight...]) returns for that
**       row, bit for bit: fts5_aux.c's fts5Bm25Function/fts5Bm25GetData are
**       replicated (k1 = 1.2, b = 0.75; IDF = log((N - nHit + 0.5)/(nHit + 0.5)),
**       1e-6 where that is <= 0, nHit per phrase counted with xQueryPhrase; avgdl
**       = xColumnTotalSize(-1)/xRowCount; the frequency of a phrase is the sum of
**       the weights of the columns of its instances, read with xInst; D =
**       xColumnSize(-1); the same floating-point operations in the same order).
**   B3. Pruning: a row may instead get -U, where U is an upper bound of its bm25
**       score (score = -bm25), when at least n rows of this query (this FTS5
**       scan: one xFilter) already got their exact value and all of those
**       scores are strictly greater than U. Then -U is strictly worse (greater)
**       than those n values, and the row's true bm25 is >= -U, so it is not
**       among the n best by either function. A pruned row costs no xColumnSize
**       and no xInst. Bounds, cheapest first:
**         U1 = sum over the phrases present in the row of IDF * (k1 + 1)
**              (presence from xPhraseFirstColumn; each term of bm25 is below
**              IDF * (k1 + 1) whatever the frequency and D). The phrases are
**              checked by decreasing IDF, and after each check the sum with
**              every phrase not yet checked counted as present (>= U1) is
**              compared already: most rows hold only common words and are
**              pruned after one or two checks (MaxScore);
**         U2 = the bm25 sum with each phrase's frequency summed over
**              xPhraseFirst/xPhraseNext (the same position lists xInst merges)
**              and D = 0. The stored length (xColumnSize, the docsize table)
**              is kept apart from the positions, and another client, or an
**              index that drifted, can make it smaller than they say, so no
**              bound takes a length from the positions: each holds for any
**              stored length of 0 or more.
**       Both are multiplied by (1 + 1e-9), which covers every rounding
**       difference (the terms increase with the frequency and decrease with D,
**       and IEEE rounding is monotonic).
**   B4. Contract: for m <= n, ORDER BY rrf_bm25(T, n) [, rowid] LIMIT m gives the
**       same rows with the same values as ORDER BY bm25(T) [, rowid] LIMIT m,
**       whatever the order in which FTS5 visits the rows (rowid ASC or DESC).
**       Values beyond the n best (and WHERE filters on the value) may differ
**       from bm25: a pruned value is better than or equal to the row's bm25.
**   B5. No pruning, so the value is bm25 on every row, when n is NULL; when a
**       weight is negative, NaN, infinite or above 1e290 (a frequency could
**       overflow); when avgdl or an IDF is not finite and positive; when the
**       FTS5 API is older than version 2; and for the rest of the scan once an
**       exact row shows a negative xColumnSize(-1) (a contentless table with
**       columnsize=0 reports -1 per column) or an xInst frequency that differs
**       from the xPhraseFirst one. A row not scored exactly is not seen: a
**       negative length written by hand into the docsize table of an FTS5
**       table that has one is outside these bounds.
**   B6. n is a positive integer: an INTEGER >= 1, a REAL with an integral value
**       >= 1 (1e12 is accepted; values above 2^63 mean "never fills"), or TEXT
**       that SQLite reads as such a number. NULL means no pruning (B5).
**       Anything else (<= 0, fractional, NaN, Inf, non-numeric TEXT, BLOB) is
**       the error "rrf_bm25: n must be a positive integer or NULL, got ...".
**       A missing n is an error naming the function and its usage.
**   B7. Weights are read as bm25 reads them: the i-th weight applies to the
**       i-th column, a missing one is 1.0, extra ones are ignored, and each is
**       sqlite3_value_double() of the argument (NULL and non-numeric TEXT are 0).
**   B8. Memory: the n best scores are kept in a min-heap in the query's
**       auxdata (xSetAuxdata with a destructor), grown on demand, so a huge n
**       costs 8 bytes per exactly scored row, never n up front. Calls with
**       different (n, weights) in one query keep separate heaps (up to 8; more
**       are computed without pruning); a call repeated on the same row returns
**       the value already computed for it.
**   B9. Errors of the FTS5 API are returned as bm25 returns them
**       (sqlite3_result_error_code); no input crashes; no allocation failure
**       is ignored.
**
** The files, one concern each:
**   bm25.c           rrf_bm25's requirements (B1..B9), the query's state, n (B6),
**                    the registration (B1)
**   bm25_score.c     rrf_bm25 and rrf_bm25_or row by row: the heap of the best
**                    scores, the bounds, the exact sum (B2..B9, B12)
**   bm25_or.c        rrf_bm25_or's whole query: its words and a row's text (B10..B13)
**   bm25_top.c       rrf_bm25_or_top: the top in one call (B16)
**   bm25_top_pass.c  rrf_bm25_or_top's passes over the phrases' rows (B16)
**   bm25_idf.c       rrf_bm25_idf (B14)
**   bm25_internal.h  what they share
** (B15, a seeded scan no statement used, was removed.)
*/
#include "bm25_internal.h"
SQLITE_EXTENSION_INIT3

#ifdef BM25_STATS
long rrf_bm25_stats[5];
void rrf_bm25_stats_print(void) {
  fprintf(stderr, "bm25: rows %ld, pruned U1 %ld, U2 %ld, kept part %ld, text read %ld\n",
          rrf_bm25_stats[0], rrf_bm25_stats[1], rrf_bm25_stats[2], rrf_bm25_stats[3],
          rrf_bm25_stats[4]);
  memset(rrf_bm25_stats, 0, sizeof rrf_bm25_stats);
}
#endif

static void slot_free(Bm25Slot *s) {
  sqlite3_free(s->w);
  sqlite3_free(s->heap);
  sqlite3_free(s);
}

static void query_free(void *p) {
  Bm25Query *q = (Bm25Query *)p;
  if (q == NULL) return;
  if (q->aList) {
    for (int i = 0; i < q->nPhrase; i++) sqlite3_free(q->aList[i].a);
    sqlite3_free(q->aList);
  }
  sqlite3_free(q->topJson);
  rrf_bm25_stats_print();
  rrf_bm25_or_free(q->or);
  while (q->slots) {
    Bm25Slot *s = q->slots;
    q->slots = s->next;
    slot_free(s);
  }
  sqlite3_free(q);
}

/* fts5CountCb of fts5_aux.c: count the rows a phrase matches. */
static int count_cb(const Fts5ExtensionApi *pApi, Fts5Context *pFts, void *pUserData) {
  (void)pApi;
  (void)pFts;
  (*(sqlite3_int64 *)pUserData)++;
  return SQLITE_OK;
}

/* rrf_bm25_or_top's pass 1 (B16): count the rows of a phrase, and keep their rowids. */
static int collect_cb(const Fts5ExtensionApi *pApi, Fts5Context *pFts, void *pUserData) {
  RowList *l = (RowList *)pUserData;
  if (l->n == l->cap) {
    sqlite3_int64 cap = l->cap ? 2 * l->cap : 256;
    sqlite3_int64 *a = (sqlite3_int64 *)sqlite3_realloc64(l->a, (sqlite3_uint64)cap * sizeof(*a));
    if (a == NULL) return SQLITE_NOMEM;
    l->a = a;
    l->cap = cap;
  }
  l->a[l->n++] = pApi->xRowid(pFts);
  return SQLITE_OK;
}

/* fts5Bm25GetData of fts5_aux.c, plus the buffers the bounds need (and, with aList,
** rrf_bm25_or_top's pass 1: B16). */
int rrf_bm25_query_get(const Fts5ExtensionApi *pApi, Fts5Context *pFts, Bm25Query **out,
                       RowList *aList) {
  int rc = SQLITE_OK;
  Bm25Query *q = (Bm25Query *)pApi->xGetAuxdata(pFts, 0);
  if (q == NULL) {
    int nPhrase = pApi->xPhraseCount(pFts);
    int nCol = pApi->xColumnCount(pFts);
    sqlite3_int64 nRow = 0, nToken = 0, nByte;
    int i;
    if (nPhrase < 0) nPhrase = 0;
    if (nCol < 0) nCol = 0;
    nByte = (sqlite3_int64)sizeof(Bm25Query) + ((sqlite3_int64)nPhrase * 4 + 1) * sizeof(double) +
            (sqlite3_int64)nPhrase * sizeof(int);
    q = (Bm25Query *)sqlite3_malloc64((sqlite3_uint64)nByte);
    if (q == NULL) return SQLITE_NOMEM;
    memset(q, 0, (size_t)nByte);
    q->nPhrase = nPhrase;
    q->nCol = nCol;
    q->aIDF = (double *)&q[1];
    q->aFreq = &q->aIDF[nPhrase];
    q->aBound = &q->aFreq[nPhrase];
    q->aSuffix = &q->aBound[nPhrase];
    q->aOrder = (int *)&q->aSuffix[nPhrase + 1];

    /* The average document length of the table. */
    rc = pApi->xRowCount(pFts, &nRow);
    if (rc == SQLITE_OK) rc = pApi->xColumnTotalSize(pFts, -1, &nToken);
    if (rc == SQLITE_OK) q->avgdl = (double)nToken / (double)nRow;

    /* An IDF for each phrase, exactly as bm25 computes it. */
    for (i = 0; rc == SQLITE_OK && i < nPhrase; i++) {
      sqlite3_int64 nHit = 0;
      if (aList) { /* B16: the rowids too */
        rc = pApi->xQueryPhrase(pFts, i, (void *)&aList[i], collect_cb);
        nHit = aList[i].n;
        if (rc == SQLITE_OK && nHit > 0 && nHit < aList[i].cap) { /* no doubling's slack */
          sqlite3_int64 *a = (sqlite3_int64 *)sqlite3_realloc64(
              aList[i].a, (sqlite3_uint64)nHit * sizeof(sqlite3_int64));
          if (a != NULL) {
            aList[i].a = a;
            aList[i].cap = nHit;
          }
        }
      } else {
        rc = pApi->xQueryPhrase(pFts, i, (void *)&nHit, count_cb);
      }
      if (rc == SQLITE_OK) {
        double idf = log((nRow - nHit + 0.5) / (nHit + 0.5));
        if (idf <= 0.0) idf = 1e-6;
        q->aIDF[i] = idf;
      }
    }

    if (rc == SQLITE_OK) {
      /* B3: U1's checks, the phrase that weighs most first (insertion sort: few phrases) */
      for (i = 0; i < nPhrase; i++) {
        int j = i;
        while (j > 0 && q->aIDF[q->aOrder[j - 1]] < q->aIDF[i]) {
          q->aOrder[j] = q->aOrder[j - 1];
          j--;
        }
        q->aOrder[j] = i;
      }
      q->aSuffix[nPhrase] = 0.0;
      for (i = nPhrase - 1; i >= 0; i--)
        q->aSuffix[i] = q->aSuffix[i + 1] + q->aIDF[q->aOrder[i]] * (k1 + 1.0);
      q->pruneOk = pApi->iVersion >= 2 && isfinite(q->avgdl) && q->avgdl > 0.0;
      for (i = 0; i < nPhrase; i++)
        if (!(isfinite(q->aIDF[i]) && q->aIDF[i] > 0.0)) q->pruneOk = 0;
      rc = pApi->xSetAuxdata(pFts, q, query_free); /* frees q itself on failure */
      if (rc != SQLITE_OK) q = NULL;
    } else {
      query_free(q);
      q = NULL;
    }
  }
  *out = q;
  return rc;
}

/* ---- n and the weights ---- */

#define N_ERROR_HEAD "%s: n must be a positive integer or NULL, got "

static void n_error(sqlite3_context *ctx, const char *fn, sqlite3_value *v) {
  switch (sqlite3_value_type(v)) {
  case SQLITE_INTEGER:
    rrf_error(ctx, N_ERROR_HEAD "%lld", fn, sqlite3_value_int64(v));
    break;
  case SQLITE_FLOAT:
    rrf_error(ctx, N_ERROR_HEAD "%!.15g", fn, sqlite3_value_double(v));
    break;
  case SQLITE_TEXT: {
    const char *s = (const char *)sqlite3_value_text(v);
    int len = sqlite3_value_bytes(v);
    if (s != NULL && len <= 40 && memchr(s, 0, (size_t)len) == NULL)
      rrf_error(ctx, N_ERROR_HEAD "TEXT '%q'", fn, s);
    else rrf_error(ctx, N_ERROR_HEAD "TEXT of %d bytes", fn, len);
    break;
  }
  default:
    rrf_error(ctx, N_ERROR_HEAD "%s", fn, rrf_type_name(v));
    break;
  }
}

/* From a REAL: 1 and *n for an integral value >= 1, else 0. */
static int n_from_double(double d, sqlite3_int64 *n) {
  if (!(d >= 1.0) || !isfinite(d) || floor(d) != d) return 0;
  *n = d >= 9223372036854775807.0 ? (sqlite3_int64)9223372036854775807LL : (sqlite3_int64)d;
  return 1;
}

/* B6: 0 with *n (0 for NULL), or 1 after reporting the error. */
int rrf_bm25_read_n(sqlite3_context *ctx, const char *fn, sqlite3_value *v, sqlite3_int64 *n) {
  switch (sqlite3_value_type(v)) {
  case SQLITE_NULL:
    *n = 0;
    return 0;
  case SQLITE_INTEGER:
    *n = sqlite3_value_int64(v);
    if (*n >= 1) return 0;
    break;
  case SQLITE_FLOAT:
    if (n_from_double(sqlite3_value_double(v), n)) return 0;
    break;
  case SQLITE_TEXT: {
    /* Read TEXT as SQLite's numeric affinity would, on a private copy so
    ** that the argument keeps its type. */
    sqlite3_value *c = sqlite3_value_dup(v);
    int t, ok = 0;
    if (c == NULL) {
      sqlite3_result_error_nomem(ctx);
      return 1;
    }
    t = sqlite3_value_numeric_type(c);
    if (t == SQLITE_INTEGER) {
      *n = sqlite3_value_int64(c);
      ok = *n >= 1;
    } else if (t == SQLITE_FLOAT) {
      ok = n_from_double(sqlite3_value_double(c), n);
    }
    sqlite3_value_free(c);
    if (ok) return 0;
    break;
  }
  default:
    break;
  }
  n_error(ctx, fn, v);
  return 1;
}

static void aux_fn(const Fts5ExtensionApi *pApi, Fts5Context *pFts, sqlite3_context *ctx, int nVal,
                   sqlite3_value **apVal) {
  const Bm25Fn *fn = (const Bm25Fn *)pApi->xUserData(pFts);
  if (fn->kind == RRF_AUX_IDF) rrf_bm25_idf_fn(pApi, pFts, ctx, nVal, apVal);
  else if (fn->kind == RRF_AUX_TOP) rrf_bm25_top_fn(pApi, pFts, ctx, nVal, apVal, fn);
  else rrf_bm25_fn(pApi, pFts, ctx, nVal, apVal, fn);
}

/* B1: no fts5() function means no FTS5 in this connection. */
fts5_api *rrf_bm25_fts5_api(sqlite3 *db) {
  fts5_api *api = NULL;
  sqlite3_stmt *st = NULL;
  if (sqlite3_prepare_v2(db, "SELECT fts5(?1)", -1, &st, NULL) != SQLITE_OK) {
    sqlite3_finalize(st);
    return NULL;
  }
  sqlite3_bind_pointer(st, 1, (void *)&api, "fts5_api_ptr", NULL);
  sqlite3_step(st);
  if (sqlite3_finalize(st) != SQLITE_OK || api == NULL || api->iVersion < 2) return NULL;
  return api;
}

int rrf_bm25_create(fts5_api *api, const char *name, int kind) {
  Bm25Fn *fn = (Bm25Fn *)sqlite3_malloc(sizeof *fn);
  int rc;
  if (fn == NULL) return SQLITE_NOMEM;
  fn->kind = kind;
  fn->api = api;
  rc = api->xCreateFunction(api, name, fn, aux_fn, sqlite3_free);
  if (rc != SQLITE_OK)
    sqlite3_free(fn); /* FTS5 keeps it, and calls sqlite3_free, only on success */
  return rc;
}
