/*
** Declarations shared by the files of the loadable extension.
*/
#ifndef SQLITE_RRF_INTERNAL_H
#define SQLITE_RRF_INTERNAL_H

#include "sqlite3ext.h"

#ifndef SQLITE_RRF_VERSION
#define SQLITE_RRF_VERSION "0.0.0-dev"
#endif

void rrf_vec_cosine(sqlite3_context *ctx, int argc, sqlite3_value **argv);

/* A parsed JSON vector, owned; cached as auxdata when the argument is constant. */
typedef struct RrfJsonVec {
  size_t n;
  float v[1];
} RrfJsonVec;

/* One vector argument, viewed as n little-endian float32 values at `data`. */
typedef struct RrfVecArg {
  const void *data;
  size_t n;
  RrfJsonVec *parsed; /* non-NULL when parsed by this call: the caller hands it to
                      ** sqlite3_set_auxdata(ctx, i, parsed, sqlite3_free) */
} RrfVecArg;

/* Read argv[i] as a vector for function `fn` (vec.c V1, V4: a float32 BLOB read in
** place, or a JSON array, cached per statement when constant). Returns 0, or 1 with
** the error, naming fn and argument i + 1, set on ctx. The caller handles NULL. */
int rrf_vec_arg(sqlite3_context *ctx, const char *fn, sqlite3_value *v, int i, RrfVecArg *out);

void rrf_vec_signbits(sqlite3_context *ctx, int argc, sqlite3_value **argv);
void rrf_hamming_sql(sqlite3_context *ctx, int argc, sqlite3_value **argv);

void rrf_topk_step(sqlite3_context *ctx, int argc, sqlite3_value **argv);
void rrf_topk_final(sqlite3_context *ctx);
void rrf_hamming_topk_step(sqlite3_context *ctx, int argc, sqlite3_value **argv);
void rrf_hamming_topk_final(sqlite3_context *ctx);
void rrf_fold_step(sqlite3_context *ctx, int argc, sqlite3_value **argv);
void rrf_fold_final(sqlite3_context *ctx);

/* ---- topk.c: the bounded heap of rrf_topk, shared with rrf_hamming_topk (quant.c) ---- */

#define RRF_TOPK_MAX_K 1000000

typedef struct RrfTopkEntry {
  double score;
  sqlite3_int64 value;
  sqlite3_int64 iscore; /* the INTEGER score, when isint */
  int isint;
} RrfTopkEntry;

typedef struct RrfTopk {
  sqlite3_int64 k; /* 0 until the first row */
  size_t n, cap;
  RrfTopkEntry *heap; /* a min-heap by rrf_topk_better(): heap[0] is the worst kept row */
  int failed;         /* an error was reported: ignore the remaining rows */
  sqlite3_int64 *extra; /* values listed after the kept rows as [value, null]: */
  size_t nextra, capextra; /* rrf_hamming_topk's pending codes (quant.c H16) */
} RrfTopk;

/* x ranks before y: a higher score, or an equal score and a smaller value (topk.c T1). */
static inline int rrf_topk_better(const RrfTopkEntry *x, const RrfTopkEntry *y) {
  return x->score > y->score || (x->score == y->score && x->value < y->value);
}

/* Offer *e to the heap of p (p->k set, 1..RRF_TOPK_MAX_K): kept when fewer than k rows
** are kept or it ranks before the worst kept one. SQLITE_OK, or SQLITE_NOMEM with the
** error set. */
int rrf_topk_push(sqlite3_context *ctx, RrfTopk *p, const RrfTopkEntry *e);

/* The kept rows as rrf_topk's JSON result (T1, T4), then p->extra's values in
** ascending order as [value, null]; NULL when there are none, nothing when p failed
** (its error stands); SQLITE_LIMIT_LENGTH's error names fn. Frees the heap and extra. */
void rrf_topk_result(sqlite3_context *ctx, RrfTopk *p, const char *fn);

void rrf_fuse_step(sqlite3_context *ctx, int argc, sqlite3_value **argv);
void rrf_fuse_inverse(sqlite3_context *ctx, int argc, sqlite3_value **argv);
void rrf_fuse_value(sqlite3_context *ctx);
void rrf_fuse_final(sqlite3_context *ctx);
void rrf_sum_func(sqlite3_context *ctx, int argc, sqlite3_value **argv);

void rrf_explain_step(sqlite3_context *ctx, int argc, sqlite3_value **argv);
void rrf_explain_inverse(sqlite3_context *ctx, int argc, sqlite3_value **argv);
void rrf_explain_value(sqlite3_context *ctx);
void rrf_explain_final(sqlite3_context *ctx);

void rrf_fts5_query(sqlite3_context *ctx, int argc, sqlite3_value **argv);

/* One token of the OR query fts5_query(text, 'or', stopwords, tokenize) builds. */
typedef struct RrfPlanTok {
  int start, len; /* the token: bytes [start, start + len) of the text */
  int nterm;      /* what the tokenizer made of it: 0, 1 or 2 (two or more) terms */
  char *term;     /* its term when nterm is 1 (NUL-terminated, nbytes long), else NULL */
  int nbytes;
  int stop;       /* Q10: its term is a stopword */
  int drop;       /* Q10, Q11: left out of the expression */
} RrfPlanTok;

typedef struct RrfPlan {
  int ntok, ndrop;
  RrfPlanTok *tok;
} RrfPlan;

/* The tokens of fts5_query(text, 'or', stopwords, tokenize) in order, each with
** its term and whether it is dropped (fts5q.c Q2..Q12, Q14). `api` may be NULL
** (then it is taken from the connection). SQLITE_OK and *out (free it with
** rrf_fts5_plan_free), or an error code with the error, naming `fn`, set on ctx.
** stopwords and tokenize may be NULL pointers for absent arguments. */
int rrf_fts5_plan(sqlite3_context *ctx, const char *fn, fts5_api *api, sqlite3_value *text,
                  sqlite3_value *stopwords, sqlite3_value *tokenize, RrfPlan **out);
void rrf_fts5_plan_free(RrfPlan *plan);

/* The FTS5 auxiliary functions (bm25.c), by kind. */
#define RRF_AUX_BM25 1 /* rrf_bm25 */
#define RRF_AUX_OR 2   /* rrf_bm25_or */
#define RRF_AUX_IDF 3  /* rrf_bm25_idf */
#define RRF_AUX_TOP 4  /* rrf_bm25_or_top */

/* The connection's fts5_api (version 2 or newer), or NULL when it has no FTS5
** (bm25.c B1). */
fts5_api *rrf_bm25_fts5_api(sqlite3 *db);
/* Register the FTS5 auxiliary function `name` of kind RRF_AUX_* through api (bm25.c).
** An SQLite result code. */
int rrf_bm25_create(fts5_api *api, const char *name, int kind);

/* Decode the UTF-8 sequence at s[i] (of len bytes) into *cp; returns its length,
** or 1 with *cp = 0xFFFD for an invalid, overlong or truncated one (unichar.c). */
int rrf_utf8_decode(const unsigned char *s, int len, int i, unsigned *cp);
/* unichar.c: Q16, a CJK character; Q2, a character of a token (fts5_query). */
int rrf_is_cjk(unsigned cp);
int rrf_is_token_char(unsigned cp);

/* ---- errors.c: every error message is formed by rrf_error ---- */

/* The printf-style message (sqlite3_vmprintf: %q, %!.15g, %lld...) as ctx's
** error. Returns SQLITE_ERROR, or SQLITE_NOMEM (sqlite3_result_error_nomem) when
** the message could not be made. No format attribute: SQLite's conversions are
** not the C library's. */
int rrf_error(sqlite3_context *ctx, const char *fmt, ...);

/* At most max (<= 60) bytes of s[0..n) for an error message: valid UTF-8,
** control characters and invalid bytes as '?', "..." when cut. buf holds at
** least 64 bytes; returns buf. */
const char *rrf_shown(const unsigned char *s, int n, char *buf, int max);

/* Finish `out` and make it fn's TEXT result; past the connection's
** SQLITE_LIMIT_LENGTH, SQLITE_TOOBIG with a message naming fn. */
void rrf_result_str(sqlite3_context *ctx, sqlite3_str *out, const char *fn);

/* "NULL", "INTEGER", "REAL", "TEXT" or "BLOB". */
const char *rrf_type_name(sqlite3_value *v);

/* ---- strset.c: hash sets of byte ranges ---- */

static inline int rrf_is_ascii_space(unsigned char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r';
}

/* n bytes of a and b equal, ASCII letters compared case-insensitively. */
static inline int rrf_ascii_ieq(const unsigned char *a, const unsigned char *b, int n) {
  for (int i = 0; i < n; i++) {
    unsigned char x = a[i], y = b[i];
    if (x >= 'A' && x <= 'Z') x += 32;
    if (y >= 'A' && y <= 'Z') y += 32;
    if (x != y) return 0;
  }
  return 1;
}

/* Bytes [start, start + len) of some buffer. */
typedef struct RrfSpan {
  int start, len;
} RrfSpan;

/* An open-addressing hash set of spans of one buffer, compared byte for byte or
** ASCII-case-insensitively (FNV-1a, linear probing; never more than half full,
** so a probe ends): O(1) to look up or add, whatever the input's size. It holds
** indexes into the caller's array of spans, which it does not own. */
typedef struct RrfSpanSet {
  int *slots;     /* index into the spans + 1; 0 is empty */
  unsigned mask;  /* number of slots - 1 (a power of two) */
  int nocase;     /* compare ASCII-case-insensitively */
} RrfSpanSet;

/* Room for nmax spans. SQLITE_OK, or SQLITE_NOMEM (set->slots NULL). */
int rrf_spanset_init(RrfSpanSet *set, sqlite3_int64 nmax, int nocase);
void rrf_spanset_free(RrfSpanSet *set);
/* The index of the span of the set equal to t[0..n) (spans index `base`), or -1. */
int rrf_spanset_find(const RrfSpanSet *set, const unsigned char *base, const RrfSpan *spans,
                     const unsigned char *t, int n);
/* Add spans[i] (not in the set; fewer than nmax added). */
void rrf_spanset_add(RrfSpanSet *set, const unsigned char *base, const RrfSpan *spans, int i);

/* The distinct words of a text separated by ASCII whitespace (space, tab, LF,
** VT, FF, CR), compared byte for byte: fts5_query's stopwords (fts5q.c Q8). */
typedef struct RrfWordSet {
  unsigned char *text; /* owned copy of the text */
  RrfSpan *words;      /* the distinct words, as spans of `text` */
  int nwords;
  RrfSpanSet set;
} RrfWordSet;

/* The words of s[0..n) (s may be NULL when n is 0: the empty set). SQLITE_OK, or
** SQLITE_NOMEM with *ws empty. */
int rrf_wordset_init(RrfWordSet *ws, const unsigned char *s, int n);
void rrf_wordset_free(RrfWordSet *ws);
int rrf_wordset_contains(const RrfWordSet *ws, const unsigned char *t, int n);

/* ---- fts5stop.c: fts5_query's stopwords and tokenizer (fts5q.c Q8..Q10, Q13, Q14) ---- */

/* What is kept between calls (sqlite3_set_auxdata on the stopwords argument):
** the stopword set and the tokenizer made for the last tokenize argument. */
typedef struct RrfPrune {
  RrfWordSet stop; /* the stopwords (Q8) */
  fts5_api *api;
  fts5_tokenizer methods;
  Fts5Tokenizer *tok; /* NULL: not made (yet, or its making failed) */
  char *spec;         /* the tokenize argument it was made from ('' for NULL) */
  int nspec;
} RrfPrune;

/* Q6, Q8, Q9: the type checks of the stopwords and tokenize arguments (either may be
** NULL for absent). SQLITE_OK, or the error set. */
int rrf_fts5_check_types(sqlite3_context *ctx, const char *fn, sqlite3_value *stop,
                         sqlite3_value *tokenize);
/* The RrfPrune of (stop, tokenize): pr, or made when pr is NULL (api: the connection's
** fts5_api, or NULL to look it up), with its tokenizer when need_tok or when there
** are stopwords (Q8, Q9, Q14). NULL with the error set on failure. */
RrfPrune *rrf_prune_make(sqlite3_context *ctx, const char *fn, fts5_api *api, RrfPrune *pr,
                         sqlite3_value *stop, sqlite3_value *tokenize, int need_tok);
void rrf_prune_free(void *p);
/* Q10: how the token s[0..n) tokenizes (see fts5stop.c). */
int rrf_token_terms(const RrfPrune *pr, const unsigned char *s, int n, int *nterm, int *stop,
                    char **copy, int *ncopy);

/* ---- tokspec.c: an FTS5 tokenizer spec (fts5q.c Q9, Q14) ---- */

#define RRF_FTS5_MAX_SPEC_WORDS 64

/* A tokenize argument split into words, as CREATE VIRTUAL TABLE ... tokenize=
** splits it: argv[0] names the tokenizer, the rest are its arguments. */
typedef struct RrfTokSpec {
  char *buf; /* the words, unquoted, each NUL-terminated */
  const char *argv[RRF_FTS5_MAX_SPEC_WORDS];
  int argc;
} RrfTokSpec;

/* Parse s[0..n) (n 0: FTS5's default, unicode61) and check that it names
** built-in tokenizers only (Q14). SQLITE_OK, or an error code with the error,
** naming fn, set on ctx; free *spec with rrf_tokspec_free either way. */
int rrf_tokspec_parse(sqlite3_context *ctx, const char *fn, const unsigned char *s, int n,
                      RrfTokSpec *spec);
void rrf_tokspec_free(RrfTokSpec *spec);

/* Error messages quote at most this many bytes of a name or spec (fts5q.c Q13). */
#define RRF_SHOWN_MAX 32

#endif
