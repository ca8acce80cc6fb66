/*
** What the files of the FTS5 auxiliary functions share (bm25.c lists them): the
** BM25 constants, the query's state, the whole query of rrf_bm25_or, and
** rrf_bm25_or_top's passes.
*/
#ifndef SQLITE_RRF_BM25_INTERNAL_H
#define SQLITE_RRF_BM25_INTERNAL_H

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "rrf_internal.h"

#define BM25_MAX_SLOTS 8
#define BM25_MAX_WEIGHT 1e290
#define BM25_MARGIN (1.0 + 1e-9)
#define BM25_DROP_IDF 1e-6 /* FTS5's IDF of a phrase in at least half of the rows */

static const double k1 = 1.2; /* constant "k1" from the BM25 formula */
static const double b = 0.75; /* constant "b" from the BM25 formula */

#define BM25_OR_FN "rrf_bm25_or"
#define BM25_TOP_FN "rrf_bm25_or_top"

/* The user data of each auxiliary function. */
typedef struct Bm25Fn {
  int kind; /* RRF_AUX_* */
  fts5_api *api;
} Bm25Fn;

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

/* rrf_bm25_or_top's pass 1 (B16): the rowids of a phrase's rows. */
typedef struct RowList RowList;
struct RowList {
  sqlite3_int64 *a;
  sqlite3_int64 n, cap;
};

/* Per-query data (the auxdata of rrf_bm25, rrf_bm25_or or rrf_bm25_or_top for one
** FTS5 scan). */
typedef struct Bm25Query {
  int nPhrase, nCol;
  double avgdl;
  double *aIDF;       /* nPhrase */
  double *aFreq;      /* nPhrase: frequencies as bm25 computes them (xInst) */
  double *aBound;     /* nPhrase: frequencies from xPhraseFirst/xPhraseNext */
  int *aOrder;        /* nPhrase: the phrases by decreasing IDF (B3: U1's order of checks) */
  double *aSuffix;    /* nPhrase + 1: aSuffix[k] = sum of IDF * (k1 + 1) over aOrder[k..] */
  int pruneOk;        /* B5: the table and the API allow pruning */
  int nSlot;
  Bm25Slot *slots;
  Bm25Or *or;         /* rrf_bm25_or: the whole query (B10) */
  struct RowList *aList; /* rrf_bm25_or_top: nPhrase lists of rowids (B16) */
  char *topJson;      /* rrf_bm25_or_top: its result (B16) */
} Bm25Query;

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

#define OR_TEXT_LENGTH (-1) /* rrf_bm25_or_full_score: the text has another number of tokens */
#define OR_TEXT_TERMS (-2)  /* rrf_bm25_or_full_score: the text has other counts of a kept term */

#ifdef BM25_STATS /* a profiling build: rows per path, printed when a query ends */
#include <stdio.h>
extern long rrf_bm25_stats[5];
#define BM25_STAT(i) (rrf_bm25_stats[i]++)
void rrf_bm25_stats_print(void);
#else
#define BM25_STAT(i) ((void)0)
#define rrf_bm25_stats_print() ((void)0)
#endif

/* ---- bm25.c ---- */

/* The query's state (made on the first call of the scan, kept as its auxdata);
** aList non-NULL: the rowids of each phrase too (rrf_bm25_or_top's pass 1). */
int rrf_bm25_query_get(const Fts5ExtensionApi *pApi, Fts5Context *pFts, Bm25Query **out,
                       RowList *aList);
/* B6: 0 with *n (0 for NULL), or 1 after reporting the error. */
int rrf_bm25_read_n(sqlite3_context *ctx, const char *fn, sqlite3_value *v, sqlite3_int64 *n);

/* ---- bm25_score.c ---- */

/* The bm25 sum of fts5Bm25Function for frequencies aFreq and length D. */
double rrf_bm25_sum(const Bm25Query *q, const double *aFreq, double D);
/* rrf_bm25 and rrf_bm25_or, row by row. */
void rrf_bm25_fn(const Fts5ExtensionApi *pApi, Fts5Context *pFts, sqlite3_context *ctx, int nVal,
                 sqlite3_value **apVal, const Bm25Fn *fn);

/* ---- bm25_or.c ---- */

void rrf_bm25_or_free(Bm25Or *o);
/* B10: q->or from the arguments (text, stopwords, tokenize: argv[0..nArg)), on the
** first call of the query; on later calls, check that they are the same.
** SQLITE_OK, or an error code with the error set on ctx. */
int rrf_bm25_or_get(const Fts5ExtensionApi *pApi, Fts5Context *pFts, sqlite3_context *ctx,
                    fts5_api *api, const char *fn, Bm25Query *q, sqlite3_value **argv, int nArg);
/* B11: the whole query's score of the current row, whose kept phrases have the
** frequencies q->aFreq and whose length is D: SQLITE_OK, an SQLite error code,
** or OR_TEXT_LENGTH / OR_TEXT_TERMS when the text is not what was indexed. */
int rrf_bm25_or_full_score(const Fts5ExtensionApi *pApi, Fts5Context *pFts, Bm25Query *q,
                           const double *w, int D, double *score);

/* ---- bm25_top.c, bm25_top_pass.c: rrf_bm25_or_top (B16) ---- */

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

void rrf_bm25_top_fn(const Fts5ExtensionApi *pApi, Fts5Context *pFts, sqlite3_context *ctx,
                     int nVal, sqlite3_value **apVal, const Bm25Fn *fn);
/* Every row of the scan with its U1, by increasing rowid, from pass 1's lists. */
int rrf_bm25_top_rows(Bm25Query *q, RowU **out, sqlite3_int64 *nOut, double **dense,
                      unsigned char **mask, double *u1, sqlite3_int64 *lo_out);
/* theta: the n-th best of the admitted rows' lower bounds. */
void rrf_bm25_top_theta(TopPass *t);
/* Passes 2 and 3 (t->mode), one row of a phrase's query (xQueryPhrase). */
int rrf_bm25_top_cb(const Fts5ExtensionApi *pApi, Fts5Context *pFts, void *pUserData);

/* ---- bm25_idf.c ---- */

void rrf_bm25_idf_fn(const Fts5ExtensionApi *pApi, Fts5Context *pFts, sqlite3_context *ctx,
                     int nVal, sqlite3_value **apVal);

#endif
