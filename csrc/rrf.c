/*
** sqlite-rrf: hybrid retrieval functions for SQLite (docs/contract.md, "The
** extension"; each function's page is docs/sql/<name>.md).
**
** The entry point sqlite3_rrf_init registers, from kFunctions below (one row per
** argument count; tests/test_loading.py checks this list against
** pragma_function_list):
** scalar functions (SQLITE_UTF8 | SQLITE_DETERMINISTIC | SQLITE_INNOCUOUS):
**   vec_cosine(a, b)                                       vec.c
**   vec_signbits(v)                                        quant.c
**   rrf_hamming(a, b)                                      quant.c
**   fts5_query(text [, mode [, stopwords [, tokenize]]])   fts5q.c, fts5stop.c
**   rrf_version()                                          here
**   rrf_debug()                                            here
**   rrf_sum(k, rank1, weight1 [, rank2, weight2 ...])      fuse.c
** window functions, also aggregates (SQLITE_UTF8 | SQLITE_INNOCUOUS):
**   rrf_fuse(rank [, weight [, k]])                        fuse.c
**   rrf_explain(list, rank [, weight [, k]])               fuse.c
** aggregates (SQLITE_UTF8 | SQLITE_INNOCUOUS):
**   rrf_topk(k, score, value)                              topk.c
**   rrf_hamming_topk(k, qcode, rowids, codes)              quant.c
**   rrf_fold(collapse, cos, stops, pos, rowid, id, score, at, key, text, vec, ok)
**                                                          fold.c (docs/sql/rrf_fold.md)
** FTS5 auxiliary functions, through the connection's fts5_api when it has FTS5
** (bm25.c, B1):
**   rrf_bm25(fts_table, n [, weight ...])                  bm25.c, bm25_score.c
**   rrf_bm25_or(fts_table, n, text [, stopwords [, tokenize [, weight ...]]])
**                                                          bm25_or.c
**   rrf_bm25_or_top(fts_table, n, text [, stopwords [, tokenize [, weight ...]]])
**                                                          bm25_top.c, bm25_top_pass.c
**   rrf_bm25_idf(fts_table [, phrase])                     bm25_idf.c
** Every function's errors are formed by rrf_error (errors.c).
**
** It is the only exported symbol; nothing here refers to Python, so the same
** file loads in the sqlite3 shell. SQLITE_RRF_SIMD=scalar|avx2|neon|auto in the
** environment at load time chooses the vector kernel (default: the best one).
*/
#include <stdlib.h>
#include <string.h>

#include "kernels.h"
#include "rrf_internal.h"
SQLITE_EXTENSION_INIT1

#ifndef SQLITE_INNOCUOUS
#define SQLITE_INNOCUOUS 0x000200000
#endif
#ifndef SQLITE_DETERMINISTIC
#define SQLITE_DETERMINISTIC 0x000000800
#endif

#define SCALAR_FLAGS (SQLITE_UTF8 | SQLITE_DETERMINISTIC | SQLITE_INNOCUOUS)
#define AGG_FLAGS (SQLITE_UTF8 | SQLITE_INNOCUOUS)

#if defined(__clang__)
#define RRF_COMPILER "clang " __clang_version__
#elif defined(__GNUC__)
#define RRF_COMPILER "gcc " __VERSION__
#elif defined(_MSC_VER)
#define RRF_COMPILER "msvc"
#else
#define RRF_COMPILER "unknown"
#endif

/* What SQLITE_RRF_SIMD asked for when it could not be honoured (for rrf_debug). */
static char g_simd_note[96];

// rrf_version(): the package version, e.g. '0.1.0'.
static void rrf_version(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
  (void)argc;
  (void)argv;
  sqlite3_result_text(ctx, SQLITE_RRF_VERSION, -1, SQLITE_STATIC);
}

// rrf_debug(): version, build and the SIMD path chosen at run time, one per line.
static void rrf_debug(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
  (void)argc;
  (void)argv;
  char *s = sqlite3_mprintf("version: %s\nsimd: %s\nsimd_best: %s\nkernels_built: %s\n"
                            "compiler: %s\nsqlite_headers: %s\nsqlite_runtime: %s%s",
                            SQLITE_RRF_VERSION, rrf_simd_name(rrf_simd_current()),
                            rrf_simd_name(rrf_simd_best()), rrf_simd_built(), RRF_COMPILER,
                            SQLITE_VERSION, sqlite3_libversion(), g_simd_note);
  if (s == NULL) {
    sqlite3_result_error_nomem(ctx);
    return;
  }
  sqlite3_result_text(ctx, s, -1, sqlite3_free);
}

/* SQLITE_RRF_SIMD: choose the kernel once per process, at first load. */
static void choose_simd(void) {
  static int done = 0;
  if (done) return;
  done = 1;
  const char *want = getenv("SQLITE_RRF_SIMD");
  int path = RRF_SIMD_AUTO;
  if (want == NULL || *want == 0 || strcmp(want, "auto") == 0) path = RRF_SIMD_AUTO;
  else if (strcmp(want, "scalar") == 0) path = RRF_SIMD_SCALAR;
  else if (strcmp(want, "avx2") == 0 || strcmp(want, "avx2-fma") == 0) path = RRF_SIMD_AVX2;
  else if (strcmp(want, "neon") == 0) path = RRF_SIMD_NEON;
  else path = -3;
  if (path == -3 || rrf_simd_select(path) < 0) {
    /* Echo at most 40 bytes of the value, printable ASCII only, so that
    ** rrf_debug() stays valid UTF-8 whatever the environment holds. */
    char shown[41];
    size_t i = 0;
    for (; want[i] && i < sizeof shown - 1; i++)
      shown[i] = (want[i] >= 0x20 && want[i] < 0x7f) ? want[i] : '?';
    shown[i] = 0;
    rrf_simd_select(RRF_SIMD_AUTO);
    sqlite3_snprintf((int)sizeof g_simd_note, g_simd_note,
                     "\nsimd_note: SQLITE_RRF_SIMD=%s is not available here", shown);
  }
}

typedef void (*xfunc)(sqlite3_context *, int, sqlite3_value **);
typedef void (*xfinal)(sqlite3_context *);

/* One registration: a scalar function (fn), an aggregate (step, final) or a window
** function (step, final, value, inverse). */
typedef struct RrfFunction {
  const char *name;
  int nargs;
  int flags;
  xfunc fn, step;
  xfinal final, value;
  xfunc inverse;
  int aux; /* RRF_AUX_*: an FTS5 auxiliary function (bm25.c) */
} RrfFunction;

#define SCALAR(name, nargs, fn) {name, nargs, SCALAR_FLAGS, fn, 0, 0, 0, 0, 0}
#define AGGREGATE(name, nargs, f) {name, nargs, AGG_FLAGS, 0, f##_step, f##_final, 0, 0, 0}
#define WINDOW(name, nargs, f) \
  {name, nargs, AGG_FLAGS, 0, f##_step, f##_final, f##_value, f##_inverse, 0}
#define FTS5_AUX(name, kind) {name, -1, 0, 0, 0, 0, 0, 0, kind}

/* What sqlite3_rrf_init registers (the list of the header comment). */
static const RrfFunction kFunctions[] = {
    /* scalar functions */
    SCALAR("vec_cosine", 2, rrf_vec_cosine),
    SCALAR("vec_signbits", 1, rrf_vec_signbits),
    SCALAR("rrf_hamming", 2, rrf_hamming_sql),
    SCALAR("fts5_query", 1, rrf_fts5_query),
    SCALAR("fts5_query", 2, rrf_fts5_query),
    SCALAR("fts5_query", 3, rrf_fts5_query),
    SCALAR("fts5_query", 4, rrf_fts5_query),
    SCALAR("rrf_version", 0, rrf_version),
    SCALAR("rrf_debug", 0, rrf_debug),
    SCALAR("rrf_sum", -1, rrf_sum_func),
    /* window functions, also aggregates */
    WINDOW("rrf_fuse", 1, rrf_fuse),
    WINDOW("rrf_fuse", 2, rrf_fuse),
    WINDOW("rrf_fuse", 3, rrf_fuse),
    WINDOW("rrf_explain", 2, rrf_explain),
    WINDOW("rrf_explain", 3, rrf_explain),
    WINDOW("rrf_explain", 4, rrf_explain),
    /* aggregates */
    AGGREGATE("rrf_topk", 3, rrf_topk),
    AGGREGATE("rrf_hamming_topk", 4, rrf_hamming_topk),
    AGGREGATE("rrf_fold", 12, rrf_fold),
    /* FTS5 auxiliary functions, when the connection has FTS5 */
    FTS5_AUX("rrf_bm25", RRF_AUX_BM25),
    FTS5_AUX("rrf_bm25_or", RRF_AUX_OR),
    FTS5_AUX("rrf_bm25_idf", RRF_AUX_IDF),
    FTS5_AUX("rrf_bm25_or_top", RRF_AUX_TOP),
};

#ifdef _WIN32
__declspec(dllexport)
#else
__attribute__((visibility("default")))
#endif
int sqlite3_rrf_init(sqlite3 *db, char **pzErrMsg, const sqlite3_api_routines *pApi) {
  int rc = SQLITE_OK;
  SQLITE_EXTENSION_INIT2(pApi);
  if (sqlite3_libversion_number() < 3025000) {
    *pzErrMsg = sqlite3_mprintf("sqlite-rrf needs SQLite 3.25.0 or newer (window "
                                "functions); this is %s",
                                sqlite3_libversion());
    return SQLITE_ERROR;
  }
  choose_simd();
  fts5_api *fts5 = rrf_bm25_fts5_api(db); /* NULL: no FTS5, no auxiliary functions */
  for (size_t i = 0; i < sizeof(kFunctions) / sizeof(kFunctions[0]); i++) {
    const RrfFunction *f = &kFunctions[i];
    if (f->aux) {
      if (fts5 == NULL) continue;
      rc = rrf_bm25_create(fts5, f->name, f->aux);
    } else if (f->value) {
      rc = sqlite3_create_window_function(db, f->name, f->nargs, f->flags, 0, f->step, f->final,
                                          f->value, f->inverse, 0);
    } else {
      rc = sqlite3_create_function_v2(db, f->name, f->nargs, f->flags, 0, f->fn, f->step, f->final,
                                      0);
    }
    if (rc != SQLITE_OK) {
      *pzErrMsg = sqlite3_mprintf("sqlite-rrf: cannot register %s: %s", f->name,
                                  f->aux ? sqlite3_errstr(rc) : sqlite3_errmsg(db));
      return rc;
    }
  }
  return SQLITE_OK;
}
