/*
** rrf_bm25_or_top's passes over the phrases' rows (bm25_top.c B16): pass 1's map
** of every row of the scan to its U1, and the callback of passes 2 and 3.
*/
#include "bm25_internal.h"
SQLITE_EXTENSION_INIT3

static double nth_largest(const double *v, sqlite3_int64 nv, sqlite3_int64 n, double *heap);

/* The index of rowid, or -1 (sparse: rows by increasing rowid; the calls come in
** that order too, else a binary search). */
static sqlite3_int64 top_find(TopPass *t, sqlite3_int64 rowid) {
  if (t->mask) {
    sqlite3_uint64 off = (sqlite3_uint64)rowid - (sqlite3_uint64)t->lo;
    return off < (sqlite3_uint64)t->nRow && t->mask[off] != 0 ? (sqlite3_int64)off : -1;
  }
  if (t->dense) {
    sqlite3_uint64 off = (sqlite3_uint64)rowid - (sqlite3_uint64)t->lo;
    return off < (sqlite3_uint64)t->nRow && t->dense[off] != 0.0 ? (sqlite3_int64)off : -1;
  }
  if (rowid < t->last) {
    sqlite3_int64 lo = 0, hi = t->nRow;
    while (lo < hi) {
      sqlite3_int64 mid = lo + (hi - lo) / 2;
      if (t->rows[mid].rowid < rowid) lo = mid + 1;
      else hi = mid;
    }
    t->ptr = lo;
  }
  t->last = rowid;
  sqlite3_int64 lo = t->ptr, n = t->nRow, step = 1, hi;
  const RowU *rows = t->rows;
  if (lo < n && rows[lo].rowid < rowid) { /* gallop, then a binary search */
    while (lo + step < n && rows[lo + step].rowid < rowid) {
      lo += step;
      step *= 2;
    }
    hi = lo + step < n ? lo + step : n;
    lo++;
    while (lo < hi) {
      sqlite3_int64 mid = lo + (hi - lo) / 2;
      if (rows[mid].rowid < rowid) lo = mid + 1;
      else hi = mid;
    }
  }
  t->ptr = lo;
  return lo < n && rows[lo].rowid == rowid ? lo : -1;
}

/* U1 of the row at index r. */
static double top_u(const TopPass *t, sqlite3_int64 r) {
  if (t->mask) return t->u1[t->mask[r]];
  return t->dense ? t->dense[r] : t->rows[r].u;
}

/* theta: the n-th best of the admitted rows' lower bounds. */
void rrf_bm25_top_theta(TopPass *t) {
  if (!t->prune || t->nc < t->n) return;
  for (sqlite3_int64 i = 0; i < t->nc; i++) t->tmp[i] = t->c[i].acc * (1.0 - 1e-9);
  double th = nth_largest(t->tmp, t->nc, t->n, t->tmp + t->cap);
  if (th > t->theta) t->theta = th;
  t->nextTheta = t->nc + (t->nc / 4 > t->n ? t->nc / 4 : t->n);
}

int rrf_bm25_top_cb(const Fts5ExtensionApi *pApi, Fts5Context *pFts, void *pUserData) {
  TopPass *t = (TopPass *)pUserData;
  Bm25Query *q = t->q;
  int nP = q->nPhrase, rc = SQLITE_OK;
  sqlite3_int64 r = top_find(t, pApi->xRowid(pFts));
  if (r < 0) return SQLITE_OK;
  if (t->mode == 2) {
    int a = t->adm[r], nInst = 0;
    double f = 0.0;
    if (a == -2) return SQLITE_OK;
    if (a == -1 && t->prune && top_u(t, r) * BM25_MARGIN + t->bDrop < t->theta) {
      t->adm[r] = -2; /* its first phrase, and its U1 is below theta: out for good */
      return SQLITE_OK;
    }
    /* this phrase's frequency (bm25's sum of weights) */
    rc = pApi->xInstCount(pFts, &nInst);
    for (int j = 0; rc == SQLITE_OK && j < nInst; j++) {
      int ip, ic, io;
      rc = pApi->xInst(pFts, j, &ip, &ic, &io);
      if (rc == SQLITE_OK && (ip != 0 || ic < 0 || ic >= q->nCol)) rc = SQLITE_CORRUPT;
      if (rc == SQLITE_OK) f += t->w[ic];
    }
    if (rc != SQLITE_OK) return rc;
    if (a == -1) { /* the row's first phrase: admitted if its bound reaches theta */
      double u = top_u(t, r);
      if (t->prune) {
        double up = q->aIDF[t->iPhrase] * (k1 + 1.0);
        /* U1 with this phrase's term for its frequency and a length of 0 (the term falls
        ** as the length grows; the stored length is not read, and may be below the
        ** row's positions); 1e-12 u covers the subtraction */
        double bound =
            (u - up) + 1e-12 * u + q->aIDF[t->iPhrase] * ((f * (k1 + 1.0)) / (f + k1 * (1 - b)));
        if (bound > u) bound = u;
        if (bound * BM25_MARGIN + t->bDrop < t->theta) {
          t->adm[r] = -2;
          return SQLITE_OK;
        }
      }
      if (t->nc == t->cap) {
        sqlite3_int64 cap = t->cap ? 2 * t->cap : 1024;
        TopCand *c = (TopCand *)sqlite3_realloc64(t->c, (sqlite3_uint64)cap * sizeof(TopCand));
        if (c) t->c = c;
        double *fv = (double *)sqlite3_realloc64(
            t->f, (sqlite3_uint64)cap * (sqlite3_uint64)(nP ? nP : 1) * sizeof(double));
        if (fv) t->f = fv;
        double *tmp = (double *)sqlite3_realloc64(t->tmp, (sqlite3_uint64)cap * 2 * sizeof(double));
        if (tmp) t->tmp = tmp;
        if (!c || !fv || !tmp) return SQLITE_NOMEM;
        t->cap = cap;
      }
      a = (int)t->nc++;
      t->adm[r] = a;
      memset(&t->c[a], 0, sizeof(TopCand));
      t->c[a].rowid = t->dense || t->mask ? t->lo + r : t->rows[r].rowid;
      memset(&t->f[(sqlite3_int64)a * nP], 0, sizeof(double) * (size_t)nP);
      rc = pApi->xColumnSize(pFts, -1, &t->c[a].D);
      if (rc != SQLITE_OK) return rc;
      /* B5: no length: no bound; every row is admitted */
      if (t->c[a].D < 0) t->prune = 0;
    }
    TopCand *c = &t->c[a];
    t->f[(sqlite3_int64)a * nP + t->iPhrase] = f;
    c->acc +=
        q->aIDF[t->iPhrase] * ((f * (k1 + 1.0)) / (f + k1 * (1 - b + b * (double)c->D / q->avgdl)));
    if (t->nc >= t->nextTheta) rrf_bm25_top_theta(t);
  } else if (t->mode == 3) {
    int a = t->adm[r];
    if (a < 0 || t->c[a].state != 3) return SQLITE_OK;
    TopCand *c = &t->c[a];
    double score = 0.0;
    memcpy(q->aFreq, &t->f[(sqlite3_int64)a * nP], sizeof(double) * (size_t)nP);
    rc = rrf_bm25_or_full_score(pApi, pFts, q, t->w, c->D, &score);
    if (rc == OR_TEXT_LENGTH || rc == OR_TEXT_TERMS) {
      t->textErr = rc;
      t->errRow = c->rowid;
      return SQLITE_ERROR;
    }
    c->full = score;
    c->state = 4;
    if (rc == SQLITE_OK && --t->remaining == 0) return SQLITE_DONE;
  }
  return rc;
}

static int cmp_i64(const void *a, const void *b) {
  sqlite3_int64 x = *(const sqlite3_int64 *)a, y = *(const sqlite3_int64 *)b;
  return x < y ? -1 : x > y;
}

static int cmp_rowu(const void *a, const void *b) {
  sqlite3_int64 x = ((const RowU *)a)->rowid, y = ((const RowU *)b)->rowid;
  return x < y ? -1 : x > y;
}

/* The n-th largest of v[0..nv) (n >= 1), or -INFINITY when nv < n. */
static double nth_largest(const double *v, sqlite3_int64 nv, sqlite3_int64 n, double *heap) {
  sqlite3_int64 size = 0;
  if (nv < n) return -INFINITY;
  for (sqlite3_int64 i = 0; i < nv; i++) {
    double x = v[i];
    if (size < n) {
      sqlite3_int64 j = size++;
      while (j > 0 && x < heap[(j - 1) / 2]) {
        heap[j] = heap[(j - 1) / 2];
        j = (j - 1) / 2;
      }
      heap[j] = x;
    } else if (x > heap[0]) {
      sqlite3_int64 j = 0;
      for (;;) {
        sqlite3_int64 l = 2 * j + 1, r = l + 1, m = j;
        double mv = x;
        if (l < size && heap[l] < mv) {
          m = l;
          mv = heap[l];
        }
        if (r < size && heap[r] < mv) m = r;
        if (m == j) break;
        heap[j] = heap[m];
        j = m;
      }
      heap[j] = x;
    }
  }
  return heap[0];
}

/* B16: every row of the scan with its U1, by increasing rowid, from pass 1's lists. */
int rrf_bm25_top_rows(Bm25Query *q, RowU **out, sqlite3_int64 *nOut, double **dense,
                      unsigned char **mask, double *u1, sqlite3_int64 *lo_out) {
  sqlite3_int64 total = 0, lo = 0, hi = 0, n = 0;
  int first = 1;
  for (int p = 0; p < q->nPhrase; p++) {
    RowList *l = &q->aList[p];
    int sorted = 1;
    for (sqlite3_int64 i = 1; i < l->n; i++) sorted &= l->a[i - 1] < l->a[i];
    if (!sorted) qsort(l->a, (size_t)l->n, sizeof(sqlite3_int64), cmp_i64);
    if (l->n > 0) {
      if (first || l->a[0] < lo) lo = l->a[0];
      if (first || l->a[l->n - 1] > hi) hi = l->a[l->n - 1];
      first = 0;
    }
    total += l->n;
  }
  *out = NULL;
  *nOut = 0;
  *dense = NULL;
  *mask = NULL;
  if (total == 0) return SQLITE_OK;
  sqlite3_uint64 range = (sqlite3_uint64)hi - (sqlite3_uint64)lo + 1;
  if (range <= (sqlite3_uint64)(8 * total) + (1u << 20) && range <= (1u << 28)) {
    if (q->nPhrase <= 8) {
      /* dense rowids, up to 8 phrases: one byte per rowid, its phrases as bits (0:
      ** not in the scan); U1 is u1[bits], the bits' terms added in phrase order as
      ** below (the same double): 1 byte a rowid instead of 8 (1M rowids: 1 MB) */
      unsigned char *m = (unsigned char *)sqlite3_malloc64(range);
      if (m == NULL) return SQLITE_NOMEM;
      memset(m, 0, range);
      for (int p = 0; p < q->nPhrase; p++) {
        RowList *l = &q->aList[p];
        for (sqlite3_int64 i = 0; i < l->n; i++) m[l->a[i] - lo] |= (unsigned char)(1u << p);
      }
      for (unsigned b = 0; b < 256; b++) {
        double acc = 0.0;
        for (int p = 0; p < q->nPhrase; p++) {
          double u = q->aIDF[p] * (k1 + 1.0);
          if (!(u > 0.0)) u = 1e-300; /* present all the same */
          if (b & (1u << p)) acc += u;
        }
        u1[b] = acc;
      }
      *mask = m;
      *lo_out = lo;
      *nOut = (sqlite3_int64)range;
      return SQLITE_OK;
    }
    /* dense rowids: one slot per rowid, U1 in it (0: not in the scan) */
    double *acc = (double *)sqlite3_malloc64(range * sizeof(double));
    if (acc == NULL) return SQLITE_NOMEM;
    memset(acc, 0, range * sizeof(double));
    for (int p = 0; p < q->nPhrase; p++) {
      double u = q->aIDF[p] * (k1 + 1.0);
      RowList *l = &q->aList[p];
      if (!(u > 0.0)) u = 1e-300; /* present all the same */
      for (sqlite3_int64 i = 0; i < l->n; i++) acc[l->a[i] - lo] += u;
    }
    *dense = acc;
    *lo_out = lo;
    *nOut = (sqlite3_int64)range;
    return SQLITE_OK;
  }
  /* sparse rowids: sort every (rowid, term bound) and add up equal rowids */
  RowU *all = (RowU *)sqlite3_malloc64((sqlite3_uint64)total * sizeof(RowU));
  if (all == NULL) return SQLITE_NOMEM;
  for (int p = 0; p < q->nPhrase; p++) {
    double u = q->aIDF[p] * (k1 + 1.0);
    for (sqlite3_int64 i = 0; i < q->aList[p].n; i++) {
      all[n].rowid = q->aList[p].a[i];
      all[n++].u = u;
    }
  }
  qsort(all, (size_t)n, sizeof(RowU), cmp_rowu);
  sqlite3_int64 m = 0;
  for (sqlite3_int64 i = 0; i < n; i++) {
    if (m > 0 && all[m - 1].rowid == all[i].rowid) all[m - 1].u += all[i].u;
    else all[m++] = all[i];
  }
  *out = all;
  *nOut = m;
  return SQLITE_OK;
}
