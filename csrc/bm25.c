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
**
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
**         a length of at least the sum over columns of its last offset + 1; an
**         admitted row shorter than that switches the bounds off, as below),
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
** rrf_bm25_idf(fts_table [, phrase]) -> REAL: the IDF FTS5's bm25() gives
** phrase `phrase` (default 0) of the current query.
**  B14. Computed as B2 does (xQueryPhrase, xRowCount), except that counting
**       stops as soon as the phrase is found in at least half of the rows: the
**       IDF is then 1e-6 whatever the rest. Kept per query, so calling it on
**       every row costs one count. phrase must be an integer from 0 to the
**       number of phrases - 1, else an error naming the function.
*/
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "rrf_internal.h"
SQLITE_EXTENSION_INIT3

#define BM25_MAX_SLOTS 8
#define BM25_MAX_WEIGHT 1e290
#define BM25_MARGIN (1.0 + 1e-9)

static const double k1 = 1.2; /* constant "k1" from the BM25 formula */
static const double b = 0.75; /* constant "b" from the BM25 formula */

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

typedef struct Bm25Or Bm25Or;

/* Per-query data (the auxdata of rrf_bm25 or rrf_bm25_or for one FTS5 scan). */
/* rrf_bm25_or_top's pass 1 (B16): the rowids of a phrase's rows. */
typedef struct RowList RowList;
struct RowList {
  sqlite3_int64 *a;
  sqlite3_int64 n, cap;
};

typedef struct Bm25Query {
  int nPhrase, nCol;
  double avgdl;
  double *aIDF;       /* nPhrase */
  double *aFreq;      /* nPhrase: frequencies as bm25 computes them (xInst) */
  double *aBound;     /* nPhrase: frequencies from xPhraseFirst/xPhraseNext */
  int *aColEnd;       /* nCol: largest offset + 1 seen in each column */
  int *aOrder;        /* nPhrase: the phrases by decreasing IDF (B3: U1's order of checks) */
  double *aSuffix;    /* nPhrase + 1: aSuffix[k] = sum of IDF * (k1 + 1) over aOrder[k..] */
  int pruneOk;        /* B5: the table and the API allow pruning */
  int nSlot;
  Bm25Slot *slots;
  Bm25Or *or;         /* rrf_bm25_or: the whole query (B10) */
  struct RowList *aList; /* rrf_bm25_or_top: nPhrase lists of rowids (B16) */
  char *topJson;      /* rrf_bm25_or_top: its result (B16) */
} Bm25Query;

static void or_free(Bm25Or *o);

#ifdef BM25_STATS /* a profiling build: rows per path, printed when a query ends */
#include <stdio.h>
static long bm25_stats[5];
#define BM25_STAT(i) (bm25_stats[i]++)
static void stats_print(void) {
  fprintf(stderr, "bm25: rows %ld, pruned U1 %ld, U2 %ld, kept part %ld, text read %ld\n",
          bm25_stats[0], bm25_stats[1], bm25_stats[2], bm25_stats[3], bm25_stats[4]);
  memset(bm25_stats, 0, sizeof bm25_stats);
}
#else
#define BM25_STAT(i) ((void)0)
#define stats_print() ((void)0)
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
  stats_print();
  or_free(q->or);
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

static int query_get(const Fts5ExtensionApi *pApi, Fts5Context *pFts, Bm25Query **out,
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
            ((sqlite3_int64)nCol + nPhrase) * sizeof(int);
    q = (Bm25Query *)sqlite3_malloc64((sqlite3_uint64)nByte);
    if (q == NULL) return SQLITE_NOMEM;
    memset(q, 0, (size_t)nByte);
    q->nPhrase = nPhrase;
    q->nCol = nCol;
    q->aIDF = (double *)&q[1];
    q->aFreq = &q->aIDF[nPhrase];
    q->aBound = &q->aFreq[nPhrase];
    q->aSuffix = &q->aBound[nPhrase];
    q->aColEnd = (int *)&q->aSuffix[nPhrase + 1];
    q->aOrder = &q->aColEnd[nCol];

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
    else
      rrf_error(ctx, N_ERROR_HEAD "TEXT of %d bytes", fn, len);
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
static int read_n(sqlite3_context *ctx, const char *fn, sqlite3_value *v, sqlite3_int64 *n) {
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
    if (l < s->size && s->heap[l] < v) { m = l; v = s->heap[l]; }
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
static double bm25_sum(const Bm25Query *q, const double *aFreq, double D) {
  double score = 0.0;
  int i;
  for (i = 0; i < q->nPhrase; i++) {
    score += q->aIDF[i] * ((aFreq[i] * (k1 + 1.0)) /
                           (aFreq[i] + k1 * (1 - b + b * D / q->avgdl)));
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


/* ---- rrf_bm25_or: the whole query (B10..B13) ---- */

#define BM25_OR_FN "rrf_bm25_or"
#define BM25_DROP_IDF 1e-6 /* FTS5's IDF of a phrase in at least half of the rows */

/* The whole query of rrf_bm25_or: its phrases, and the terms followed in the
** text of a row (the dropped phrases' terms, and the kept one-term phrases'
** terms for the check of B11). */
struct Bm25Or {
  char *args;         /* the text, stopwords and tokenize arguments it was made from */
  int nArgs[3], tArgs[3]; /* their lengths and types (B10: the same on every row) */
  int nFull;          /* phrases of the whole query */
  int *aMap;          /* nFull: >= 0 a phrase of the MATCH; < 0 term -1 - aMap[i] (dropped) */
  int nDrop;
  double bDrop;       /* B12: D */
  int nTerm;          /* distinct terms followed */
  char *termBuf;      /* the terms, one after the other */
  int nTermBuf, capTermBuf;
  RrfSpan *aTerm;     /* nTerm: each term's bytes in termBuf */
  RrfSpanSet terms;   /* the terms, compared byte for byte (strset.c) */
  int *aKeptTerm;     /* nPhrase: the term of a kept one-term phrase, or -1 */
  double *aTermFreq;  /* nTerm: per row, the weighted count in the row's text */
  unsigned char first[32]; /* bitmap of the terms' first bytes: most tokens skip the hash */
  int nTok;           /* per row: tokens of the text (as xColumnSize counts them) */
  int colSize;        /* per column, while tokenizing */
  double w;           /* the weight of the column being tokenized */
};

static void or_free(Bm25Or *o) {
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
static int or_get(const Fts5ExtensionApi *pApi, Fts5Context *pFts, sqlite3_context *ctx,
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
        return rrf_error(ctx, "%s: text, stopwords and tokenize must be the same on every row "
                              "of a query", fn);
      a += nz[i];
    }
    return SQLITE_OK;
  }

  RrfPlan *plan = NULL;
  Bm25Or *o = NULL;
  if (z[0] == NULL)
    return rrf_error(ctx, "%s: text must be TEXT, got %s", fn, rrf_type_name(argv[0]));
  rc = rrf_fts5_plan(ctx, fn, api, argv[0], nArg > 1 ? argv[1] : NULL,
                     nArg > 2 ? argv[2] : NULL, &plan);
  if (rc != SQLITE_OK) return rc; /* error set (fts5q.c's messages, naming rrf_bm25_or) */
  int nkept = plan->ntok - plan->ndrop;
  if (nkept != q->nPhrase && !(plan->ntok == 0 && q->nPhrase == 1)) {
    rc = rrf_error(ctx, "%s: the MATCH expression has %d phrases; "
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
        rc = rrf_error(ctx, "%s: tokenize is not the table's tokenizer: "
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
  or_free(o);
  rrf_fts5_plan_free(plan);
  return rc;
}

static int or_token_cb(void *p, int tflags, const char *t, int n, int start, int end) {
  Bm25Or *o = (Bm25Or *)p;
  (void)start;
  (void)end;
  /* xColumnSize counts a token unless it is colocated (fts5_storage.c) */
  if ((tflags & FTS5_TOKEN_COLOCATED) == 0 || o->colSize == 0) o->colSize++;
  if (n > 0 && t != NULL &&
      (o->first[(unsigned char)t[0] >> 3] >> ((unsigned char)t[0] & 7)) & 1) {
    int k = or_find(o, t, n);
    if (k >= 0) o->aTermFreq[k] += o->w;
  }
  return SQLITE_OK;
}

#define OR_TEXT_LENGTH (-1) /* or_full_score: the text has another number of tokens */
#define OR_TEXT_TERMS (-2)  /* or_full_score: the text has other counts of a kept term */

/* B11: the whole query's score of the current row, whose kept phrases have the
** frequencies q->aFreq and whose length is D: SQLITE_OK, an SQLite error code,
** or OR_TEXT_LENGTH / OR_TEXT_TERMS when the text is not what was indexed. */
static int or_full_score(const Fts5ExtensionApi *pApi, Fts5Context *pFts, Bm25Query *q,
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
    if (k >= 0 && memcmp(&o->aTermFreq[k], &q->aFreq[i], sizeof(double)) != 0)
      return OR_TEXT_TERMS;
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


/* ---- the auxiliary functions ---- */

#define KIND_BM25 0
#define KIND_OR 1
#define KIND_IDF 2
#define KIND_TOP 4

typedef struct Bm25Fn {
  int kind;
  fts5_api *api;
} Bm25Fn;

/* ---- rrf_bm25_or_top: the whole top in one call (B16) ---- */

#define BM25_TOP_FN "rrf_bm25_or_top"
/* A row admitted by pass 2 (B16): its frequencies are in TopPass.f. */
typedef struct TopCand {
  sqlite3_int64 rowid;
  double acc;   /* the terms read so far: a lower bound of the kept part */
  double k;     /* the kept phrases' exact sum (B2) */
  double full;  /* the whole query's score, once known */
  int D;        /* xColumnSize(-1) */
  int state;    /* 2 computed, 3 text wanted, 4 full known */
} TopCand;

typedef struct RowU {
  sqlite3_int64 rowid;
  double u;
} RowU;

typedef struct TopPass {
  Bm25Query *q;
  const double *w;
  /* every row of the scan with its U1, by index: rowid - lo in dense (U1 0: not in
  ** the scan) or in mask (up to 8 phrases: the row's phrases as bits, U1 u1[bits],
  ** 0: not in the scan), else the position in rows (by increasing rowid) */
  double *dense;
  unsigned char *mask;
  double u1[256];
  sqlite3_int64 lo;
  RowU *rows;
  sqlite3_int64 nRow; /* indexes */
  int *adm;         /* per row: -1 unseen, -2 rejected, else its TopCand */
  sqlite3_int64 ptr, last;
  TopCand *c;       /* the admitted rows */
  double *f;        /* their frequencies, nPhrase each */
  sqlite3_int64 nc, cap;
  int iPhrase, mode; /* mode 2: admit and read frequencies; 3: the text */
  int prune;
  double theta;     /* a lower bound of the n-th best score */
  double bDrop;
  sqlite3_int64 n, nextTheta;
  double *tmp;      /* scratch for the n-th best: 2 * cap */
  sqlite3_int64 remaining;
  int textErr;      /* OR_TEXT_LENGTH or OR_TEXT_TERMS on row errRow */
  sqlite3_int64 errRow;
} TopPass;

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
static void top_theta(TopPass *t) {
  if (!t->prune || t->nc < t->n) return;
  for (sqlite3_int64 i = 0; i < t->nc; i++) t->tmp[i] = t->c[i].acc * (1.0 - 1e-9);
  double th = nth_largest(t->tmp, t->nc, t->n, t->tmp + t->cap);
  if (th > t->theta) t->theta = th;
  t->nextTheta = t->nc + (t->nc / 4 > t->n ? t->nc / 4 : t->n);
}

static int top_cb(const Fts5ExtensionApi *pApi, Fts5Context *pFts, void *pUserData) {
  TopPass *t = (TopPass *)pUserData;
  Bm25Query *q = t->q;
  int nP = q->nPhrase, rc = SQLITE_OK;
  sqlite3_int64 r = top_find(t, pApi->xRowid(pFts));
  if (r < 0) return SQLITE_OK;
  if (t->mode == 2) {
    int a = t->adm[r], nInst = 0, dlo = 0;
    double f = 0.0;
    if (a == -2) return SQLITE_OK;
    if (a == -1 && t->prune &&
        top_u(t, r) * BM25_MARGIN + t->bDrop < t->theta) {
      t->adm[r] = -2; /* its first phrase, and its U1 is below theta: out for good */
      return SQLITE_OK;
    }
    /* this phrase's frequency (bm25's sum of weights), and the last offset seen in
    ** each column: a lower bound of the row's length (B3's U2) */
    rc = pApi->xInstCount(pFts, &nInst);
    if (a == -1 && q->nCol > 0) memset(q->aColEnd, 0, sizeof(int) * (size_t)q->nCol);
    for (int j = 0; rc == SQLITE_OK && j < nInst; j++) {
      int ip, ic, io;
      rc = pApi->xInst(pFts, j, &ip, &ic, &io);
      if (rc == SQLITE_OK && (ip != 0 || ic < 0 || ic >= q->nCol)) rc = SQLITE_CORRUPT;
      if (rc == SQLITE_OK) {
        f += t->w[ic];
        if (a == -1 && io + 1 > q->aColEnd[ic]) q->aColEnd[ic] = io + 1;
      }
    }
    if (rc != SQLITE_OK) return rc;
    if (a == -1) { /* the row's first phrase: admitted if its bound reaches theta */
      double u = top_u(t, r);
      if (t->prune) {
        double up = q->aIDF[t->iPhrase] * (k1 + 1.0);
        for (int col = 0; col < q->nCol; col++) dlo += q->aColEnd[col];
        /* U1 with this phrase's term for its frequency and a length of at least dlo
        ** (the term falls as the length grows); 1e-12 u covers the subtraction */
        double bound = (u - up) + 1e-12 * u +
                       q->aIDF[t->iPhrase] *
                           ((f * (k1 + 1.0)) / (f + k1 * (1 - b + b * (double)dlo / q->avgdl)));
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
        double *fv = (double *)sqlite3_realloc64(t->f, (sqlite3_uint64)cap * (sqlite3_uint64)(nP ? nP : 1) * sizeof(double));
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
      /* B5: no length, or one below the offsets: no bound; every row is admitted */
      if (t->c[a].D < 0 || t->c[a].D < dlo) t->prune = 0;
    }
    TopCand *c = &t->c[a];
    t->f[(sqlite3_int64)a * nP + t->iPhrase] = f;
    c->acc += q->aIDF[t->iPhrase] *
              ((f * (k1 + 1.0)) / (f + k1 * (1 - b + b * (double)c->D / q->avgdl)));
    if (t->nc >= t->nextTheta) top_theta(t);
  } else if (t->mode == 3) {
    int a = t->adm[r];
    if (a < 0 || t->c[a].state != 3) return SQLITE_OK;
    TopCand *c = &t->c[a];
    double score = 0.0;
    memcpy(q->aFreq, &t->f[(sqlite3_int64)a * nP], sizeof(double) * (size_t)nP);
    rc = or_full_score(pApi, pFts, q, t->w, c->D, &score);
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

/* The final order: the best score first (bm25 ascending), then the rowid. */
static int cmp_final(const void *a, const void *b) {
  const TopCand *x = *(const TopCand *const *)a, *y = *(const TopCand *const *)b;
  if (x->full > y->full) return -1;
  if (x->full < y->full) return 1;
  return x->rowid < y->rowid ? -1 : x->rowid > y->rowid;
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
        if (l < size && heap[l] < mv) { m = l; mv = heap[l]; }
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
static int top_rows(Bm25Query *q, RowU **out, sqlite3_int64 *nOut, double **dense,
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
  rc = top_rows(q, &t.rows, &t.nRow, &t.dense, &t.mask, t.u1, &t.lo);
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
      rc = pApi->xQueryPhrase(pFts, t.iPhrase, (void *)&t, top_cb);
      if (rc == SQLITE_OK) top_theta(&t);
    }
    if (rc != SQLITE_OK) goto done;
    if (t.prune || !prune || attempt == 1) break;
    /* a row without a length switched the bounds off: again, admitting every row */
  }
  /* the kept part, exactly (B2); theta from it */
  for (i = 0; i < t.nc; i++) {
    t.c[i].k = bm25_sum(q, &t.f[i * nP], (double)t.c[i].D);
    t.c[i].state = 2;
    t.c[i].acc = nDrop > 0 ? t.c[i].k : t.c[i].k / (1.0 - 1e-9); /* top_theta's margin */
  }
  if (t.prune) {
    t.theta = -INFINITY;
    top_theta(&t);
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
      rc = pApi->xQueryPhrase(pFts, a < nOrd ? order[a] : a, (void *)&t, top_cb);
    }
    if (t.textErr) {
      rc = t.textErr == OR_TEXT_LENGTH
               ? rrf_error(ctx, "%s: the text of row %lld has %d tokens, its FTS5 index entry "
                                "another number: rebuild the index",
                           BM25_TOP_FN, (long long)t.errRow, q->or->nTok)
               : rrf_error(ctx, "%s: the text of row %lld does not hold the terms its FTS5 index "
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
    else if (isinf(v)) sqlite3_str_appendf(str, "[%lld,%s]", (long long)fin[i]->rowid,
                                           v > 0 ? "9e999" : "-9e999");
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

static void top_fn(const Fts5ExtensionApi *pApi, Fts5Context *pFts, sqlite3_context *ctx,
                   int nVal, sqlite3_value **apVal, const Bm25Fn *fn) {
  Bm25Query *q = (Bm25Query *)pApi->xGetAuxdata(pFts, 0);
  sqlite3_int64 n = 0;
  double wStack[16], *w = wStack;
  int rc = SQLITE_OK, prune;
  if (nVal < 2) {
    rrf_error(ctx, "%s: missing arguments; usage: %s(fts_table, n, text [, stopwords "
                   "[, tokenize [, weight ...]]])",
              BM25_TOP_FN, BM25_TOP_FN);
    return;
  }
  if (read_n(ctx, BM25_TOP_FN, apVal[0], &n)) return;
  if (n == 0) n = INT64_MAX; /* NULL: every row */
  if (q == NULL) {
    int nPhrase = pApi->xPhraseCount(pFts);
    RowList *aList = (RowList *)sqlite3_malloc64(sizeof(RowList) * (size_t)(nPhrase > 0 ? nPhrase : 1));
    if (aList == NULL) {
      sqlite3_result_error_nomem(ctx);
      return;
    }
    memset(aList, 0, sizeof(RowList) * (size_t)(nPhrase > 0 ? nPhrase : 1));
    rc = query_get(pApi, pFts, &q, aList);
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
  rc = or_get(pApi, pFts, ctx, fn->api, BM25_TOP_FN, q, apVal + 1, nVal - 1 < 3 ? nVal - 1 : 3);
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

static void bm25_fn(const Fts5ExtensionApi *pApi, Fts5Context *pFts, sqlite3_context *ctx,
                    int nVal, sqlite3_value **apVal, const Bm25Fn *fn) {
  Bm25Query *q = NULL;
  Bm25Slot *s = NULL;
  sqlite3_int64 n = 0, rowid, dlo = -1;
  double wStack[16], *w = wStack, score = 0.0;
  int rc, i, D = 0, nW, wFirst;
  int isOr = fn->kind == KIND_OR;
  const char *name = isOr ? BM25_OR_FN : "rrf_bm25";

  if (nVal < (isOr ? 2 : 1)) {
    if (isOr)
      rrf_error(ctx, "%s: missing arguments; usage: %s(fts_table, n, text [, stopwords "
                     "[, tokenize [, weight ...]]])",
                name, name);
    else
      rrf_error(ctx, "rrf_bm25: missing argument n; usage: rrf_bm25(fts_table, n [, weight ...])");
    return;
  }
  if (read_n(ctx, name, apVal[0], &n)) return;

  rc = query_get(pApi, pFts, &q, NULL);
  if (rc != SQLITE_OK) {
    sqlite3_result_error_code(ctx, rc);
    return;
  }
  if (isOr && q->or == NULL) { /* B10: made on the first call, checked on exact rows */
    rc = or_get(pApi, pFts, ctx, fn->api, name, q, apVal + 1, nVal - 1 < 3 ? nVal - 1 : 3);
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
    rc = bound_positions(pApi, pFts, q, w, &u, &dlo);
    if (rc != SQLITE_OK) goto done;
    if (s->size >= s->n && u + bDrop < s->heap[0]) {
      score = u + bDrop;
      BM25_STAT(2);
      goto pruned;
    }
  }

  if (isOr) { /* B10: the arguments of the first call */
    rc = or_get(pApi, pFts, ctx, fn->api, name, q, apVal + 1, nVal - 1 < 3 ? nVal - 1 : 3);
    if (rc != SQLITE_OK) {
      rc = SQLITE_OK; /* error set */
      goto done;
    }
  }
  rc = exact_score(pApi, pFts, q, w, &score, &D);
  if (rc != SQLITE_OK) goto done;
  if (s && dlo >= 0) {
    /* B5: the bounds must hold on the rows scored exactly */
    if (D < 0 || (sqlite3_int64)D < dlo) q->pruneOk = 0;
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
    rc = or_full_score(pApi, pFts, q, w, D, &score); /* B11 */
    if (rc == OR_TEXT_LENGTH || rc == OR_TEXT_TERMS) {
      if (rc == OR_TEXT_LENGTH)
        rrf_error(ctx, "%s: the text of row %lld has %d tokens, its FTS5 index entry %d: "
                       "rebuild the index",
                  name, (long long)rowid, q->or->nTok, D);
      else
        rrf_error(ctx, "%s: the text of row %lld does not hold the terms its FTS5 index entry "
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

static void idf_fn(const Fts5ExtensionApi *pApi, Fts5Context *pFts, sqlite3_context *ctx,
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
    else if (t == SQLITE_FLOAT && floor(sqlite3_value_double(apVal[0])) == sqlite3_value_double(apVal[0]) &&
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

static void aux_fn(const Fts5ExtensionApi *pApi, Fts5Context *pFts, sqlite3_context *ctx,
                   int nVal, sqlite3_value **apVal) {
  const Bm25Fn *fn = (const Bm25Fn *)pApi->xUserData(pFts);
  if (fn->kind == KIND_IDF) idf_fn(pApi, pFts, ctx, nVal, apVal);
  else if (fn->kind == KIND_TOP) top_fn(pApi, pFts, ctx, nVal, apVal, fn);
  else bm25_fn(pApi, pFts, ctx, nVal, apVal, fn);
}

int rrf_bm25_register(sqlite3 *db, char **pzErrMsg) {
  static const struct {
    const char *name;
    int kind;
  } kFns[] = {{"rrf_bm25", KIND_BM25}, {BM25_OR_FN, KIND_OR}, {"rrf_bm25_idf", KIND_IDF},
                 {BM25_TOP_FN, KIND_TOP}};
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
  for (size_t i = 0; i < sizeof kFns / sizeof kFns[0]; i++) {
    Bm25Fn *fn = (Bm25Fn *)sqlite3_malloc(sizeof *fn);
    if (fn == NULL) return SQLITE_NOMEM;
    fn->kind = kFns[i].kind;
    fn->api = api;
    rc = api->xCreateFunction(api, kFns[i].name, fn, aux_fn, sqlite3_free);
    if (rc != SQLITE_OK) {
      sqlite3_free(fn); /* FTS5 keeps it, and calls sqlite3_free, only on success */
      *pzErrMsg = sqlite3_mprintf("sqlite-rrf: cannot register %s: %s", kFns[i].name,
                                  sqlite3_errstr(rc));
      return rc;
    }
  }
  return SQLITE_OK;
}
