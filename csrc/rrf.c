/*
** sqlite-rrf: hybrid retrieval functions for SQLite.
**
** The entry point sqlite3_rrf_init registers (DESIGN.md, "The extension"):
**   vec_cosine(a, b)                         vec.c
**   vec_signbits(v), rrf_hamming(a, b)       quant.c
**   rrf_topk(k, score, value)                topk.c   aggregate
**   rrf_hamming_topk(k, qcode, rowids, codes)  quant.c aggregate
**   rrf_fuse(rank [, weight [, k]])          fuse.c   aggregate + window
**   rrf_explain(list, rank [, weight [, k]]) fuse.c   aggregate + window
**   fts5_query(text [, mode [, stopwords [, tokenize]]])  fts5q.c
**   rrf_bm25(fts_table, n [, weight...])     bm25.c   FTS5 auxiliary functions
**   rrf_bm25_or(fts_table, n, text [, stopwords [, tokenize [, weight...]]])
**   rrf_bm25_idf(fts_table [, phrase])
**   rrf_version(), rrf_debug()               here
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

static const struct {
  const char *name;
  int nargs;
  xfunc fn;
} kScalars[] = {
    {"vec_cosine", 2, rrf_vec_cosine}, {"vec_signbits", 1, rrf_vec_signbits},
    {"rrf_hamming", 2, rrf_hamming_sql}, {"fts5_query", 1, rrf_fts5_query},
    {"fts5_query", 2, rrf_fts5_query}, {"fts5_query", 3, rrf_fts5_query},
    {"fts5_query", 4, rrf_fts5_query}, {"rrf_version", 0, rrf_version},
    {"rrf_debug", 0, rrf_debug}, {"rrf_sum", -1, rrf_sum_func},
};

static const struct {
  const char *name;
  int nargs;
  xfunc step;
  xfinal final;
  xfinal value;
  xfunc inverse;
} kAggregates[] = {
    {"rrf_fuse", 1, rrf_fuse_step, rrf_fuse_final, rrf_fuse_value, rrf_fuse_inverse},
    {"rrf_fuse", 2, rrf_fuse_step, rrf_fuse_final, rrf_fuse_value, rrf_fuse_inverse},
    {"rrf_fuse", 3, rrf_fuse_step, rrf_fuse_final, rrf_fuse_value, rrf_fuse_inverse},
    {"rrf_explain", 2, rrf_explain_step, rrf_explain_final, rrf_explain_value,
     rrf_explain_inverse},
    {"rrf_explain", 3, rrf_explain_step, rrf_explain_final, rrf_explain_value,
     rrf_explain_inverse},
    {"rrf_explain", 4, rrf_explain_step, rrf_explain_final, rrf_explain_value,
     rrf_explain_inverse},
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
  for (size_t i = 0; i < sizeof(kScalars) / sizeof(kScalars[0]); i++) {
    rc = sqlite3_create_function_v2(db, kScalars[i].name, kScalars[i].nargs, SCALAR_FLAGS, 0,
                                    kScalars[i].fn, 0, 0, 0);
    if (rc != SQLITE_OK) {
      *pzErrMsg = sqlite3_mprintf("sqlite-rrf: cannot register %s: %s", kScalars[i].name,
                                  sqlite3_errmsg(db));
      return rc;
    }
  }
  for (size_t i = 0; i < sizeof(kAggregates) / sizeof(kAggregates[0]); i++) {
    rc = sqlite3_create_window_function(db, kAggregates[i].name, kAggregates[i].nargs,
                                        AGG_FLAGS, 0, kAggregates[i].step,
                                        kAggregates[i].final, kAggregates[i].value,
                                        kAggregates[i].inverse, 0);
    if (rc != SQLITE_OK) {
      *pzErrMsg = sqlite3_mprintf("sqlite-rrf: cannot register %s: %s", kAggregates[i].name,
                                  sqlite3_errmsg(db));
      return rc;
    }
  }
  /* plain aggregates (not window functions) */
  rc = sqlite3_create_function_v2(db, "rrf_topk", 3, AGG_FLAGS, 0, 0, rrf_topk_step,
                                  rrf_topk_final, 0);
  if (rc != SQLITE_OK) {
    *pzErrMsg = sqlite3_mprintf("sqlite-rrf: cannot register %s: %s", "rrf_topk",
                                sqlite3_errmsg(db));
    return rc;
  }
  rc = sqlite3_create_function_v2(db, "rrf_hamming_topk", 4, AGG_FLAGS, 0, 0,
                                  rrf_hamming_topk_step, rrf_hamming_topk_final, 0);
  if (rc != SQLITE_OK) {
    *pzErrMsg = sqlite3_mprintf("sqlite-rrf: cannot register %s: %s", "rrf_hamming_topk",
                                sqlite3_errmsg(db));
    return rc;
  }
  /* FTS5 auxiliary functions (bm25.c); a SQLite without FTS5 loads without them */
  return rrf_bm25_register(db, pzErrMsg);
}
