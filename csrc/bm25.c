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
**              IDF * (k1 + 1) whatever the frequency and D);
**         U2 = the bm25 sum with each phrase's frequency summed over
**              xPhraseFirst/xPhraseNext (the same position lists xInst merges)
**              and D replaced by a lower bound of the row's length: the sum over
**              columns of (largest instance offset in the column + 1).
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
**       exact row shows xColumnSize(-1) below the length bound or negative (a
**       contentless table with columnsize=0 reports -1 per column) or an xInst
**       frequency that differs from the xPhraseFirst one.
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
*/
#include <math.h>
#include <string.h>

#include "rrf_internal.h"
SQLITE_EXTENSION_INIT3

#define BM25_FN "rrf_bm25"
#define BM25_MAX_SLOTS 8
#define BM25_MAX_WEIGHT 1e290
#define BM25_MARGIN (1.0 + 1e-9)

/* One (n, weights) combination used in the query: its heap of best scores. */
typedef struct Bm25Slot {
  struct Bm25Slot *next;
  sqlite3_int64 n;  /* 0: n was NULL */
  int prune;        /* pruning allowed for these arguments (B5) */
  double *w;        /* nCol weights (B7) */
  double *heap;     /* min-heap of exact scores (score = -bm25) */
  sqlite3_int64 size, cap;
  int haveLast;     /* value of the row last seen (B8) */
  sqlite3_int64 lastRowid;
  double lastValue;
} Bm25Slot;

/* Per-query data (the auxdata of rrf_bm25 for one FTS5 scan). */
typedef struct Bm25Query {
  int nPhrase, nCol;
  double avgdl;
  double *aIDF;       /* nPhrase */
  double *aFreq;      /* nPhrase: frequencies as bm25 computes them (xInst) */
  double *aBound;     /* nPhrase: frequencies from xPhraseFirst/xPhraseNext */
  int *aColEnd;       /* nCol: largest offset + 1 seen in each column */
  int pruneOk;        /* B5: the table and the API allow pruning */
  int nSlot;
  Bm25Slot *slots;
} Bm25Query;

static void slot_free(Bm25Slot *s) {
  sqlite3_free(s->w);
  sqlite3_free(s->heap);
  sqlite3_free(s);
}

static void query_free(void *p) {
  Bm25Query *q = (Bm25Query *)p;
  if (q == NULL) return;
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

/* fts5Bm25GetData of fts5_aux.c, plus the buffers the bounds need. */
static int query_get(const Fts5ExtensionApi *pApi, Fts5Context *pFts, Bm25Query **out) {
  int rc = SQLITE_OK;
  Bm25Query *q = (Bm25Query *)pApi->xGetAuxdata(pFts, 0);
  if (q == NULL) {
    int nPhrase = pApi->xPhraseCount(pFts);
    int nCol = pApi->xColumnCount(pFts);
    sqlite3_int64 nRow = 0, nToken = 0, nByte;
    int i;
    if (nPhrase < 0) nPhrase = 0;
    if (nCol < 0) nCol = 0;
    nByte = (sqlite3_int64)sizeof(Bm25Query) + (sqlite3_int64)nPhrase * 3 * sizeof(double) +
            (sqlite3_int64)nCol * sizeof(int);
    q = (Bm25Query *)sqlite3_malloc64((sqlite3_uint64)nByte);
    if (q == NULL) return SQLITE_NOMEM;
    memset(q, 0, (size_t)nByte);
    q->nPhrase = nPhrase;
    q->nCol = nCol;
    q->aIDF = (double *)&q[1];
    q->aFreq = &q->aIDF[nPhrase];
    q->aBound = &q->aFreq[nPhrase];
    q->aColEnd = (int *)&q->aBound[nPhrase];

    /* The average document length of the table. */
    rc = pApi->xRowCount(pFts, &nRow);
    if (rc == SQLITE_OK) rc = pApi->xColumnTotalSize(pFts, -1, &nToken);
    if (rc == SQLITE_OK) q->avgdl = (double)nToken / (double)nRow;

    /* An IDF for each phrase, exactly as bm25 computes it. */
    for (i = 0; rc == SQLITE_OK && i < nPhrase; i++) {
      sqlite3_int64 nHit = 0;
      rc = pApi->xQueryPhrase(pFts, i, (void *)&nHit, count_cb);
      if (rc == SQLITE_OK) {
        double idf = log((nRow - nHit + 0.5) / (nHit + 0.5));
        if (idf <= 0.0) idf = 1e-6;
        q->aIDF[i] = idf;
      }
    }

    if (rc == SQLITE_OK) {
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

static void n_error(sqlite3_context *ctx, sqlite3_value *v) {
  char *msg;
  const char *head = "rrf_bm25: n must be a positive integer or NULL, got";
  switch (sqlite3_value_type(v)) {
  case SQLITE_INTEGER:
    msg = sqlite3_mprintf("%s %lld", head, sqlite3_value_int64(v));
    break;
  case SQLITE_FLOAT:
    msg = sqlite3_mprintf("%s %!.15g", head, sqlite3_value_double(v));
    break;
  case SQLITE_TEXT: {
    const char *s = (const char *)sqlite3_value_text(v);
    int len = sqlite3_value_bytes(v);
    if (s != NULL && len <= 40 && memchr(s, 0, (size_t)len) == NULL)
      msg = sqlite3_mprintf("%s TEXT '%q'", head, s);
    else
      msg = sqlite3_mprintf("%s TEXT of %d bytes", head, len);
    break;
  }
  default:
    msg = sqlite3_mprintf("%s %s", head, rrf_type_name(v));
    break;
  }
  sqlite3_result_error(ctx, msg ? msg : head, -1);
  sqlite3_free(msg);
}

/* From a REAL: 1 and *n for an integral value >= 1, else 0. */
static int n_from_double(double d, sqlite3_int64 *n) {
  if (!(d >= 1.0) || !isfinite(d) || floor(d) != d) return 0;
  *n = d >= 9223372036854775807.0 ? (sqlite3_int64)9223372036854775807LL : (sqlite3_int64)d;
  return 1;
}

/* B6: 0 with *n (0 for NULL), or 1 after reporting the error. */
static int read_n(sqlite3_context *ctx, sqlite3_value *v, sqlite3_int64 *n) {
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
  n_error(ctx, v);
  return 1;
}

/* ---- the heap of the best exact scores (B8) ---- */

static int heap_push(Bm25Slot *s, double score) {
  sqlite3_int64 i;
  if (s->size < s->n) {
    if (s->size == s->cap) {
      sqlite3_int64 cap = s->cap ? s->cap * 2 : 16;
      double *h;
      if (cap > s->n) cap = s->n;
      h = (double *)sqlite3_realloc64(s->heap, (sqlite3_uint64)cap * sizeof(double));
      if (h == NULL) return SQLITE_NOMEM;
      s->heap = h;
      s->cap = cap;
    }
    i = s->size++;
    while (i > 0) { /* sift up */
      sqlite3_int64 parent = (i - 1) / 2;
      if (!(score < s->heap[parent])) break;
      s->heap[i] = s->heap[parent];
      i = parent;
    }
    s->heap[i] = score;
  } else if (score > s->heap[0]) {
    i = 0;
    for (;;) { /* sift down */
      sqlite3_int64 l = 2 * i + 1, r = l + 1, m = i;
      double v = score;
      if (l < s->size && s->heap[l] < v) { m = l; v = s->heap[l]; }
      if (r < s->size && s->heap[r] < v) m = r;
      if (m == i) break;
      s->heap[i] = s->heap[m];
      i = m;
    }
    s->heap[i] = score;
  }
  return SQLITE_OK;
}

/* The slot for these arguments: found, made, or NULL when too many exist
** (*rc stays SQLITE_OK then: the call is computed without pruning). */
static Bm25Slot *slot_get(Bm25Query *q, sqlite3_int64 n, const double *w, int *rc) {
  Bm25Slot *s;
  int i;
  size_t wBytes = (size_t)q->nCol * sizeof(double);
  for (s = q->slots; s; s = s->next)
    if (s->n == n && (wBytes == 0 || memcmp(s->w, w, wBytes) == 0)) return s;
  if (q->nSlot >= BM25_MAX_SLOTS) return NULL;
  s = (Bm25Slot *)sqlite3_malloc64(sizeof(Bm25Slot));
  if (s == NULL) {
    *rc = SQLITE_NOMEM;
    return NULL;
  }
  memset(s, 0, sizeof(*s));
  s->w = (double *)sqlite3_malloc64(wBytes ? wBytes : 1);
  if (s->w == NULL) {
    sqlite3_free(s);
    *rc = SQLITE_NOMEM;
    return NULL;
  }
  if (wBytes) memcpy(s->w, w, wBytes);
  s->n = n;
  s->prune = n > 0;
  for (i = 0; i < q->nCol; i++)
    if (!(w[i] >= 0.0 && w[i] <= BM25_MAX_WEIGHT)) s->prune = 0; /* NaN fails too */
  s->next = q->slots;
  q->slots = s;
  q->nSlot++;
  return s;
}

/* ---- the scores ---- */

static const double k1 = 1.2; /* constant "k1" from the BM25 formula */
static const double b = 0.75; /* constant "b" from the BM25 formula */

/* The bm25 sum of fts5Bm25Function for frequencies aFreq and length D. */
static double bm25_sum(const Bm25Query *q, const double *aFreq, double D) {
  double score = 0.0;
  int i;
  for (i = 0; i < q->nPhrase; i++) {
    score += q->aIDF[i] * ((aFreq[i] * (k1 + 1.0)) /
                           (aFreq[i] + k1 * (1 - b + b * D / q->avgdl)));
  }
  return score;
}

/* U1 of B3: 1 and *u when computed. */
static int bound_presence(const Fts5ExtensionApi *pApi, Fts5Context *pFts, const Bm25Query *q,
                          double *u, int *rc) {
  double sum = 0.0;
  int i;
  for (i = 0; i < q->nPhrase; i++) {
    Fts5PhraseIter it;
    int col = -1;
    *rc = pApi->xPhraseFirstColumn(pFts, i, &it, &col);
    if (*rc != SQLITE_OK) return 0;
    if (col >= 0) sum += q->aIDF[i] * (k1 + 1.0);
  }
  *u = sum * BM25_MARGIN;
  return 1;
}

/* U2 of B3: the frequencies into q->aBound, the length bound into *dlo. */
static int bound_positions(const Fts5ExtensionApi *pApi, Fts5Context *pFts, Bm25Query *q,
                           const double *w, double *u, sqlite3_int64 *dlo) {
  int i, rc = SQLITE_OK;
  sqlite3_int64 len = 0;
  if (q->nCol > 0) memset(q->aColEnd, 0, (size_t)q->nCol * sizeof(int));
  for (i = 0; i < q->nPhrase; i++) {
    Fts5PhraseIter it;
    int col = -1, off = -1;
    double f = 0.0;
    rc = pApi->xPhraseFirst(pFts, i, &it, &col, &off);
    if (rc != SQLITE_OK) return rc;
    for (; col >= 0; pApi->xPhraseNext(pFts, &it, &col, &off)) {
      if (col >= q->nCol) continue; /* corrupt: xInst reports it */
      f += w[col];
      if (off >= 0 && off + 1 > q->aColEnd[col]) q->aColEnd[col] = off + 1;
    }
    q->aBound[i] = f;
  }
  for (i = 0; i < q->nCol; i++) len += q->aColEnd[i];
  *dlo = len;
  *u = bm25_sum(q, q->aBound, (double)len) * BM25_MARGIN;
  return SQLITE_OK;
}

/* fts5Bm25Function: the exact score into *score, D into *D. */
static int exact_score(const Fts5ExtensionApi *pApi, Fts5Context *pFts, Bm25Query *q,
                       const double *w, double *score, int *D) {
  int rc, nInst = 0, i, nTok = 0;
  memset(q->aFreq, 0, sizeof(double) * (size_t)q->nPhrase);
  rc = pApi->xInstCount(pFts, &nInst);
  for (i = 0; rc == SQLITE_OK && i < nInst; i++) {
    int ip, ic, io;
    rc = pApi->xInst(pFts, i, &ip, &ic, &io);
    if (rc == SQLITE_OK) {
      if (ip < 0 || ip >= q->nPhrase || ic < 0 || ic >= q->nCol) return SQLITE_CORRUPT;
      q->aFreq[ip] += w[ic];
    }
  }
  if (rc == SQLITE_OK) rc = pApi->xColumnSize(pFts, -1, &nTok);
  if (rc == SQLITE_OK) {
    *D = nTok;
    *score = bm25_sum(q, q->aFreq, (double)nTok);
  }
  return rc;
}

static void rrf_bm25_fn(const Fts5ExtensionApi *pApi, Fts5Context *pFts, sqlite3_context *ctx,
                        int nVal, sqlite3_value **apVal) {
  Bm25Query *q = NULL;
  Bm25Slot *s = NULL;
  sqlite3_int64 n = 0, rowid, dlo = -1;
  double wStack[16], *w = wStack, score = 0.0;
  int rc, i, D = 0, nW;

  if (nVal < 1) {
    sqlite3_result_error(
        ctx, "rrf_bm25: missing argument n; usage: rrf_bm25(fts_table, n [, weight ...])", -1);
    return;
  }
  if (read_n(ctx, apVal[0], &n)) return;

  rc = query_get(pApi, pFts, &q);
  if (rc != SQLITE_OK) {
    sqlite3_result_error_code(ctx, rc);
    return;
  }

  /* B7: the weights, as bm25 reads them. */
  if (q->nCol > (int)(sizeof wStack / sizeof wStack[0])) {
    w = (double *)sqlite3_malloc64((sqlite3_uint64)q->nCol * sizeof(double));
    if (w == NULL) {
      sqlite3_result_error_nomem(ctx);
      return;
    }
  }
  nW = nVal - 1;
  for (i = 0; i < q->nCol; i++) w[i] = (nW > i) ? sqlite3_value_double(apVal[1 + i]) : 1.0;

  if (n > 0 && q->pruneOk) {
    s = slot_get(q, n, w, &rc);
    if (rc != SQLITE_OK) goto done;
  }
  rowid = pApi->xRowid(pFts);
  if (s && s->haveLast && s->lastRowid == rowid) { /* B8: same row again */
    sqlite3_result_double(ctx, s->lastValue);
    goto done;
  }

  if (s && s->prune && q->pruneOk) {
    double u;
    if (s->size >= s->n) {
      /* B3: the cheap bounds, while the heap holds n scores */
      if (bound_presence(pApi, pFts, q, &u, &rc) && u < s->heap[0]) {
        score = u;
        goto pruned;
      }
      if (rc != SQLITE_OK) goto done;
    }
    rc = bound_positions(pApi, pFts, q, w, &u, &dlo);
    if (rc != SQLITE_OK) goto done;
    if (s->size >= s->n && u < s->heap[0]) {
      score = u;
      goto pruned;
    }
  }

  rc = exact_score(pApi, pFts, q, w, &score, &D);
  if (rc != SQLITE_OK) goto done;
  if (s) {
    if (dlo >= 0) {
      /* B5: the bounds must hold on the rows scored exactly */
      if (D < 0 || (sqlite3_int64)D < dlo) q->pruneOk = 0;
      for (i = 0; i < q->nPhrase; i++)
        if (memcmp(&q->aFreq[i], &q->aBound[i], sizeof(double)) != 0) q->pruneOk = 0;
    }
    if (s->prune && isfinite(score)) {
      rc = heap_push(s, score);
      if (rc != SQLITE_OK) goto done;
    }
  }

pruned:
  sqlite3_result_double(ctx, -1.0 * score);
  if (s) {
    s->haveLast = 1;
    s->lastRowid = rowid;
    s->lastValue = -1.0 * score;
  }

done:
  if (rc != SQLITE_OK) sqlite3_result_error_code(ctx, rc);
  if (w != wStack) sqlite3_free(w);
}

int rrf_bm25_register(sqlite3 *db, char **pzErrMsg) {
  fts5_api *api = NULL;
  sqlite3_stmt *st = NULL;
  int rc;
  /* B1: no fts5() function means no FTS5 in this connection. */
  if (sqlite3_prepare_v2(db, "SELECT fts5(?1)", -1, &st, NULL) != SQLITE_OK) {
    sqlite3_finalize(st);
    return SQLITE_OK;
  }
  sqlite3_bind_pointer(st, 1, (void *)&api, "fts5_api_ptr", NULL);
  sqlite3_step(st);
  rc = sqlite3_finalize(st);
  if (rc != SQLITE_OK || api == NULL || api->iVersion < 2) return SQLITE_OK;
  rc = api->xCreateFunction(api, BM25_FN, NULL, rrf_bm25_fn, NULL);
  if (rc != SQLITE_OK) {
    *pzErrMsg = sqlite3_mprintf("sqlite-rrf: cannot register %s: %s", BM25_FN,
                                sqlite3_errstr(rc));
    return rc;
  }
  return SQLITE_OK;
}
