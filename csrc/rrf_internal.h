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

/* Registers the FTS5 auxiliary function rrf_bm25 when the connection has FTS5
** (bm25.c); SQLITE_OK without doing anything when it has not. */
int rrf_bm25_register(sqlite3 *db, char **pzErrMsg);

/* Decode the UTF-8 sequence at s[i] (of len bytes) into *cp; returns its length,
** or 1 with *cp = 0xFFFD for an invalid, overlong or truncated one (fts5q.c). */
int rrf_utf8_decode(const unsigned char *s, int len, int i, unsigned *cp);

/* Finish `out` and make it fn's TEXT result; past the connection's
** SQLITE_LIMIT_LENGTH, SQLITE_TOOBIG with a message naming fn (rrf.c). */
void rrf_result_str(sqlite3_context *ctx, sqlite3_str *out, const char *fn);

/* "NULL", "INTEGER", "REAL", "TEXT" or "BLOB". */
const char *rrf_type_name(sqlite3_value *v);

#endif
