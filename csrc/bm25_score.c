/*
** rrf_bm25 and rrf_bm25_or, row by row (bm25.c B2..B9, bm25_or.c B11, B12):
** the heap of the n best exact scores (B8), the bounds U1 and U2 (B3) and the
** exact sum (B2).
*/
#include "bm25_internal.h"
SQLITE_EXTENSION_INIT3

/* ---- the heap of the best exact scores (B8) ---- */

static void heap_raise(Bm25Slot *s, sqlite3_int64 i, double score);

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
    heap_raise(s, 0, score);
  }
  return SQLITE_OK;
}

/* heap[i] := score, which is not below it: sift down. */
static void heap_raise(Bm25Slot *s, sqlite3_int64 i, double score) {
  for (;;) { /* sift down */
    sqlite3_int64 l = 2 * i + 1, r = l + 1, m = i;
    double v = score;
    if (l < s->size && s->heap[l] < v) {
      m = l;
      v = s->heap[l];
    }
    if (r < s->size && s->heap[r] < v) m = r;
    if (m == i) break;
    s->heap[i] = s->heap[m];
    i = m;
  }
  s->heap[i] = score;
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

/* The bm25 sum of fts5Bm25Function for frequencies aFreq and length D. */
double rrf_bm25_sum(const Bm25Query *q, const double *aFreq, double D) {
  double score = 0.0;
  int i;
  for (i = 0; i < q->nPhrase; i++) {
    score += q->aIDF[i] * ((aFreq[i] * (k1 + 1.0)) / (aFreq[i] + k1 * (1 - b + b * D / q->avgdl)));
  }
  return score;
}

/* U1 of B3, checked phrase by phrase (MaxScore): the phrases that weigh most
** first, and after each check the bound with every phrase not yet checked
** counted as present. 1 with *u (the bound plus bDrop, below thr) as soon as
** that falls below thr: most rows hold only common words and are pruned after
** one or two checks. 0 when the row cannot be pruned so (or on an error: *rc). */
static int bound_presence(const Fts5ExtensionApi *pApi, Fts5Context *pFts, const Bm25Query *q,
                          double thr, double bDrop, double *u, int *rc) {
  double present = 0.0;
  int k;
  for (k = 0; k < q->nPhrase; k++) {
    Fts5PhraseIter it;
    int i = q->aOrder[k], col = -1;
    double bound;
    *rc = pApi->xPhraseFirstColumn(pFts, i, &it, &col);
    if (*rc != SQLITE_OK) return 0;
    if (col >= 0) present += q->aIDF[i] * (k1 + 1.0);
    bound = (present + q->aSuffix[k + 1]) * BM25_MARGIN + bDrop;
    if (bound < thr) {
      *u = bound;
      return 1;
    }
  }
  return 0;
}

/* U2 of B3: the frequencies into q->aBound, the bound into *u. */
static int bound_positions(const Fts5ExtensionApi *pApi, Fts5Context *pFts, Bm25Query *q,
                           const double *w, double *u) {
  int i, rc = SQLITE_OK;
  for (i = 0; i < q->nPhrase; i++) {
    Fts5PhraseIter it;
    int col = -1, off = -1;
    double f = 0.0;
    rc = pApi->xPhraseFirst(pFts, i, &it, &col, &off);
    if (rc != SQLITE_OK) return rc;
    for (; col >= 0; pApi->xPhraseNext(pFts, &it, &col, &off)) {
      if (col >= q->nCol) continue; /* corrupt: xInst reports it */
      f += w[col];
    }
    q->aBound[i] = f;
  }
  /* a length of 0: the row's stored length is not read, and may be below its positions */
  *u = rrf_bm25_sum(q, q->aBound, 0.0) * BM25_MARGIN;
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
    *score = rrf_bm25_sum(q, q->aFreq, (double)nTok);
  }
  return rc;
}

void rrf_bm25_fn(const Fts5ExtensionApi *pApi, Fts5Context *pFts, sqlite3_context *ctx, int nVal,
                 sqlite3_value **apVal, const Bm25Fn *fn) {
  Bm25Query *q = NULL;
  Bm25Slot *s = NULL;
  sqlite3_int64 n = 0, rowid;
  double wStack[16], *w = wStack, score = 0.0;
  int rc, i, D = 0, nW, wFirst, bounded = 0;
  int isOr = fn->kind == RRF_AUX_OR;
  const char *name = isOr ? BM25_OR_FN : "rrf_bm25";

  if (nVal < (isOr ? 2 : 1)) {
    if (isOr)
      rrf_error(ctx,
                "%s: missing arguments; usage: %s(fts_table, n, text [, stopwords "
                "[, tokenize [, weight ...]]])",
                name, name);
    else
      rrf_error(ctx, "rrf_bm25: missing argument n; usage: rrf_bm25(fts_table, n [, weight ...])");
    return;
  }
  if (rrf_bm25_read_n(ctx, name, apVal[0], &n)) return;

  rc = rrf_bm25_query_get(pApi, pFts, &q, NULL);
  if (rc != SQLITE_OK) {
    sqlite3_result_error_code(ctx, rc);
    return;
  }
  if (isOr && q->or == NULL) { /* B10: made on the first call, checked on exact rows */
    rc = rrf_bm25_or_get(pApi, pFts, ctx, fn->api, name, q, apVal + 1, nVal - 1 < 3 ? nVal - 1 : 3);
    if (rc != SQLITE_OK) return; /* error set */
  }

  /* B7: the weights, as bm25 reads them (after tokenize for rrf_bm25_or). */
  if (q->nCol > (int)(sizeof wStack / sizeof wStack[0])) {
    w = (double *)sqlite3_malloc64((sqlite3_uint64)q->nCol * sizeof(double));
    if (w == NULL) {
      sqlite3_result_error_nomem(ctx);
      return;
    }
  }
  wFirst = isOr ? 4 : 1;
  nW = nVal - wFirst;
  for (i = 0; i < q->nCol; i++) w[i] = (nW > i) ? sqlite3_value_double(apVal[wFirst + i]) : 1.0;

  if (n > 0 && q->pruneOk) {
    s = slot_get(q, n, w, &rc);
    if (rc != SQLITE_OK) goto done;
  }
  BM25_STAT(0);
  rowid = pApi->xRowid(pFts);
  if (s && s->haveLast && s->lastRowid == rowid) { /* B8: same row again */
    sqlite3_result_double(ctx, s->lastValue);
    goto done;
  }

  double bDrop = (isOr && q->or->nDrop > 0) ? q->or->bDrop * BM25_MARGIN : 0.0; /* B12 */
  if (s && s->prune && q->pruneOk) {
    double u;
    if (s->size >= s->n) {
      /* B3: the cheap bounds, while the heap holds n scores */
      if (bound_presence(pApi, pFts, q, s->heap[0], bDrop, &u, &rc)) {
        score = u;
        BM25_STAT(1);
        goto pruned;
      }
      if (rc != SQLITE_OK) goto done;
    }
    rc = bound_positions(pApi, pFts, q, w, &u);
    if (rc != SQLITE_OK) goto done;
    bounded = 1;
    if (s->size >= s->n && u + bDrop < s->heap[0]) {
      score = u + bDrop;
      BM25_STAT(2);
      goto pruned;
    }
  }

  if (isOr) { /* B10: the arguments of the first call */
    rc = rrf_bm25_or_get(pApi, pFts, ctx, fn->api, name, q, apVal + 1, nVal - 1 < 3 ? nVal - 1 : 3);
    if (rc != SQLITE_OK) {
      rc = SQLITE_OK; /* error set */
      goto done;
    }
  }
  rc = exact_score(pApi, pFts, q, w, &score, &D);
  if (rc != SQLITE_OK) goto done;
  if (s && bounded) {
    /* B5: the bounds must hold on the rows scored exactly */
    if (D < 0) q->pruneOk = 0;
    for (i = 0; i < q->nPhrase; i++)
      if (memcmp(&q->aFreq[i], &q->aBound[i], sizeof(double)) != 0) q->pruneOk = 0;
  }
  if (isOr && q->or->nDrop > 0) {
    if (s && s->prune && q->pruneOk && s->size >= s->n) {
      double u = (score + bDrop) * BM25_MARGIN; /* B12: before the text is read */
      if (u < s->heap[0]) {
        score = u;
        BM25_STAT(3);
        goto pruned;
      }
    }
    BM25_STAT(4);
    rc = rrf_bm25_or_full_score(pApi, pFts, q, w, D, &score); /* B11 */
    if (rc == OR_TEXT_LENGTH || rc == OR_TEXT_TERMS) {
      if (rc == OR_TEXT_LENGTH)
        rrf_error(ctx,
                  "%s: the text of row %lld has %d tokens, its FTS5 index entry %d: "
                  "rebuild the index",
                  name, (long long)rowid, q->or->nTok, D);
      else
        rrf_error(ctx,
                  "%s: the text of row %lld does not hold the terms its FTS5 index entry "
                  "holds: rebuild the index",
                  name, (long long)rowid);
      rc = SQLITE_OK; /* the error is set */
      goto done;
    }
    if (rc != SQLITE_OK) goto done;
  }
  if (s && s->prune && isfinite(score)) {
    rc = heap_push(s, score);
    if (rc != SQLITE_OK) goto done;
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
