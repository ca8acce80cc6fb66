/*
** vec_signbits(v) -> BLOB: the 1-bit sign code of a vector.
** rrf_hamming(a, b) -> INTEGER: the number of bits that differ between two codes.
**
** Requirements (tests/test_hamming.py cites them as H1..H8):
**   H1. vec_signbits takes what vec_cosine takes (vec.c V1: a float32 BLOB or a
**       JSON array of numbers) and returns a BLOB of ceil(dim / 8) bytes: bit i is
**       set iff v[i] > 0. Bits are LSB-first within a byte: element i is bit
**       (i % 8) (value 1 << (i % 8)) of byte i / 8, as numpy's
**       packbits(v > 0, bitorder='little') lays them out; the unused high bits of
**       the last byte are 0. -0.0 and +0.0 give 0.
**   H2. vec_signbits(NULL) is NULL. Errors name the function and the fault, as
**       vec_cosine's (V4): empty vector, blob length not a multiple of 4, NaN/Inf
**       element (with its index), malformed JSON, other types.
**   H3. rrf_hamming(a, b) is popcount(a XOR b) over two BLOBs of the same length,
**       any length >= 1 (not only vec_signbits codes).
**   H4. NULL in either argument -> NULL (checked first).
**   H5. Errors name the function and the fault: an argument that is not a BLOB
**       (with its type), an empty BLOB, lengths that differ (both sizes).
**   H6. The count is exact on every kernel path (kernels.h K5, K6): the path in
**       force is the SIMD path of vec_cosine (SQLITE_RRF_SIMD, rrf_debug()'s simd).
**   H7. Both functions read BLOBs in place at any alignment and do not allocate
**       (vec_signbits allocates its result only).
**   H8. Both are SQLITE_DETERMINISTIC and SQLITE_INNOCUOUS.
**
** rrf_hamming_topk(k, qcode, rowids, codes) -> TEXT   aggregate
**
** The k codes nearest to qcode by Hamming distance over blocks of packed codes
** (migration 0008's episodes_code_blocks): one row holds n codes, rowids being n
** little-endian int64 and codes their n codes of length(qcode) bytes each, laid
** end to end. So
**   SELECT rrf_hamming_topk(8000, vec_signbits(:q), rowids, codes) FROM episodes_code_blocks
** is rrf_topk(8000, -rrf_hamming(code, vec_signbits(:q)), rowid) over the codes the
** blocks hold, with SQLite stepping one row per block instead of one per code.
**   H9.  The result is rrf_topk's (topk.c T1, T7): a JSON array of [rowid, -distance]
**        pairs (INTEGER scores), best first: smaller distance first, among equal
**        distances the smaller rowid (and it is the one kept when only some of the
**        tied codes fit in k); min(k, codes) pairs.
**   H10. A row with NULL in qcode, rowids or codes is skipped (but see H16); a group
**        with no code gives NULL. A row with no codes (empty rowids and codes) adds nothing.
**   H11. k is an INTEGER from 1 to 1000000, the same on every row (T3).
**   H12. Errors name the function and the fault: k (as T3, T6), a qcode that is
**        not a BLOB (with its type), an empty qcode, qcode's length changing
**        between rows, a result longer than SQLITE_LIMIT_LENGTH. (Rows whose rowids
**        and codes do not fit are pending: H17.)
**   H13. Distances are exact on every kernel path (H6: the path in force); blobs
**        are read in place at any alignment.
**   H14. Registered SQLITE_INNOCUOUS, a plain aggregate (like rrf_topk, T8).
**   H15. rowids may be an INTEGER instead: one code, codes, at that rowid (a loose
**        code, so one aggregate reads blocks and loose codes alike).
**   H16. A row with an INTEGER rowids and a NULL codes is a pending code (not
**        computed yet, so possibly the nearest): it is always in the result, after
**        the k nearest, as [rowid, null], pending rowids in ascending order (not
**        counted in k). Another row with a NULL argument is skipped (H10).
**   H17. A row whose rowids and codes do not fit together (stored data another
**        client damaged) is pending, never an error: codes that is not a
**        BLOB, or not n * length(qcode) bytes for its n rowids, makes each of its
**        rowids pending (H16); a rowids BLOB whose length is not a multiple of 8
**        stands for its whole int64s (the bytes after the last are ignored), each
**        pending; a rowids that is TEXT or REAL names no rowid: the row is skipped.
**        So H12's errors are those of k and qcode only.
*/
#include <math.h>
#include <string.h>

#include "kernels.h"
#include "rrf_internal.h"
SQLITE_EXTENSION_INIT3

// vec_signbits(v): bit i of the result is set iff v[i] > 0 (H1).
void rrf_vec_signbits(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
  RrfVecArg a = {0};
  (void)argc;
  if (sqlite3_value_type(argv[0]) == SQLITE_NULL) { /* H2 */
    sqlite3_result_null(ctx);
    return;
  }
  if (rrf_vec_arg(ctx, "vec_signbits", argv[0], 0, &a)) goto finish; /* H2 */
  {
    const unsigned char *p = a.data;
    size_t nbytes = (a.n + 7) / 8;
    unsigned char *out = sqlite3_malloc64(nbytes);
    if (out == NULL) {
      sqlite3_result_error_nomem(ctx);
      goto finish;
    }
    memset(out, 0, nbytes);
    for (size_t i = 0; i < a.n; i++) {
      float f;
      memcpy(&f, p + 4 * i, sizeof f); /* H7: any alignment */
      if (!isfinite(f)) {
        sqlite3_free(out);
        rrf_error(ctx, "vec_signbits: argument 1 has %s at index %llu", isnan(f) ? "NaN" : "Inf",
                  (unsigned long long)i);
        goto finish;
      }
      if (f > 0.0f) out[i / 8] |= (unsigned char)(1u << (i % 8)); /* H1: LSB-first */
    }
    sqlite3_result_blob64(ctx, out, nbytes, sqlite3_free);
  }
finish:
  if (a.parsed) sqlite3_set_auxdata(ctx, 0, a.parsed, sqlite3_free);
}

/* argv[i] as a non-empty BLOB (H5). Returns 0, or 1 with the error set. */
static int code_arg(sqlite3_context *ctx, sqlite3_value *v, int i, const void **p, int *n) {
  if (sqlite3_value_type(v) != SQLITE_BLOB) {
    rrf_error(ctx, "rrf_hamming: argument %d must be a BLOB, got %s", i + 1, rrf_type_name(v));
    return 1;
  }
  *p = sqlite3_value_blob(v);
  *n = sqlite3_value_bytes(v);
  if (*n == 0) {
    rrf_error(ctx, "rrf_hamming: argument %d is an empty BLOB", i + 1);
    return 1;
  }
  if (*p == NULL) {
    sqlite3_result_error_nomem(ctx);
    return 1;
  }
  return 0;
}

// rrf_hamming(a, b): popcount(a XOR b) (H3).
void rrf_hamming_sql(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
  const void *a, *b;
  int na, nb;
  (void)argc;
  if (sqlite3_value_type(argv[0]) == SQLITE_NULL || sqlite3_value_type(argv[1]) == SQLITE_NULL) {
    sqlite3_result_null(ctx); /* H4 */
    return;
  }
  if (code_arg(ctx, argv[0], 0, &a, &na) || code_arg(ctx, argv[1], 1, &b, &nb)) return;
  if (na != nb) {
    rrf_error(ctx, "rrf_hamming: length mismatch: %d vs %d bytes", na, nb);
    return;
  }
  /* H6: the kernel chosen at load time */
  sqlite3_result_int64(ctx, (sqlite3_int64)rrf_hamming_kernel(RRF_SIMD_AUTO)(a, b, (size_t)na));
}

typedef struct HammingTopk {
  RrfTopk top;
  int qlen; /* length(qcode) on the first row with codes, 0 before */
} HammingTopk;

/* argv[i] as a BLOB (H12): 0, or 1 with the error set. */
static int htopk_blob(sqlite3_context *ctx, sqlite3_value *v, const char *name,
                      const unsigned char **p, int *n) {
  if (sqlite3_value_type(v) != SQLITE_BLOB) {
    rrf_error(ctx, "rrf_hamming_topk: %s must be a BLOB, got %s", name, rrf_type_name(v));
    return 1;
  }
  *p = sqlite3_value_blob(v);
  *n = sqlite3_value_bytes(v);
  if (*p == NULL && *n > 0) {
    sqlite3_result_error_nomem(ctx);
    return 1;
  }
  return 0;
}

/* The little-endian int64 at p (H13: any alignment, any host byte order). */
static inline sqlite3_int64 le_int64(const unsigned char *p) {
  sqlite3_uint64 u = 0;
  for (int i = 7; i >= 0; i--) u = (u << 8) | p[i];
  return (sqlite3_int64)u;
}

/* rowid as a pending code (H16, H17): kept beyond k. */
static int htopk_pending(sqlite3_context *ctx, RrfTopk *p, sqlite3_int64 rowid) {
  if (p->nextra == p->capextra) {
    size_t cap = p->capextra ? p->capextra * 2 : 16;
    sqlite3_int64 *x = sqlite3_realloc64(p->extra, cap * sizeof(sqlite3_int64));
    if (x == NULL) {
      sqlite3_result_error_nomem(ctx);
      return SQLITE_NOMEM;
    }
    p->extra = x;
    p->capextra = cap;
  }
  p->extra[p->nextra++] = rowid;
  return SQLITE_OK;
}

static int htopk_add(sqlite3_context *ctx, HammingTopk *h, sqlite3_value **argv) {
  RrfTopk *p = &h->top;
  /* H11 */
  if (sqlite3_value_type(argv[0]) != SQLITE_INTEGER)
    return rrf_error(ctx, "rrf_hamming_topk: k must be an INTEGER from 1 to %d, got %s",
                     RRF_TOPK_MAX_K, rrf_type_name(argv[0]));
  sqlite3_int64 k = sqlite3_value_int64(argv[0]);
  if (k < 1 || k > RRF_TOPK_MAX_K)
    return rrf_error(ctx, "rrf_hamming_topk: k must be an INTEGER from 1 to %d, got %lld",
                     RRF_TOPK_MAX_K, k);
  if (p->k == 0) {
    p->k = k;
  } else if (k != p->k) {
    return rrf_error(ctx, "rrf_hamming_topk: k must be the same on every row (%lld, then %lld)",
                     p->k, k);
  }
  /* H16 */
  if (sqlite3_value_type(argv[3]) == SQLITE_NULL && sqlite3_value_type(argv[2]) == SQLITE_INTEGER &&
      sqlite3_value_type(argv[1]) != SQLITE_NULL)
    return htopk_pending(ctx, p, sqlite3_value_int64(argv[2]));
  /* H10 */
  for (int i = 1; i < 4; i++)
    if (sqlite3_value_type(argv[i]) == SQLITE_NULL) return SQLITE_OK;
  const unsigned char *q, *rowids = NULL, *codes = NULL;
  int nq, nr = 8, nc = 0;
  sqlite3_int64 one = 0; /* H15: rowids an INTEGER, one loose code */
  if (htopk_blob(ctx, argv[1], "qcode", &q, &nq)) return SQLITE_ERROR;
  /* H12 */
  if (nq == 0) return rrf_error(ctx, "rrf_hamming_topk: qcode is an empty BLOB");
  if (h->qlen == 0) {
    h->qlen = nq;
  } else if (nq != h->qlen) {
    return rrf_error(
        ctx, "rrf_hamming_topk: qcode must be the same length on every row (%d, then %d bytes)",
        h->qlen, nq);
  }
  if (sqlite3_value_type(argv[2]) == SQLITE_INTEGER) {
    one = sqlite3_value_int64(argv[2]);
  } else if (sqlite3_value_type(argv[2]) == SQLITE_BLOB) {
    rowids = sqlite3_value_blob(argv[2]);
    nr = sqlite3_value_bytes(argv[2]);
    if (rowids == NULL && nr > 0) {
      sqlite3_result_error_nomem(ctx);
      return SQLITE_NOMEM;
    }
  } else {
    return SQLITE_OK; /* H17: TEXT or REAL rowids name no rowid */
  }
  sqlite3_int64 n = nr / 8; /* H17: whole int64s only */
  int fits = nr % 8 == 0 && sqlite3_value_type(argv[3]) == SQLITE_BLOB;
  if (fits) {
    codes = sqlite3_value_blob(argv[3]);
    nc = sqlite3_value_bytes(argv[3]);
    if (codes == NULL && nc > 0) {
      sqlite3_result_error_nomem(ctx);
      return SQLITE_NOMEM;
    }
    fits = (sqlite3_int64)nc == n * nq;
  }
  if (!fits) { /* H17: every rowid of the row is pending */
    for (sqlite3_int64 i = 0; i < n; i++) {
      int rc = htopk_pending(ctx, p, rowids ? le_int64(rowids + 8 * i) : one);
      if (rc != SQLITE_OK) return rc;
    }
    return SQLITE_OK;
  }
  rrf_hamming_fn dist = rrf_hamming_kernel(RRF_SIMD_AUTO); /* H13 */
  for (sqlite3_int64 i = 0; i < n; i++) {
    RrfTopkEntry e;
    e.value = rowids ? le_int64(rowids + 8 * i) : one;
    e.iscore = -(sqlite3_int64)dist(q, codes + i * nq, (size_t)nq);
    e.score = (double)e.iscore;
    e.isint = 1;
    /* H9: a code that does not beat the worst kept one is not offered */
    if (p->n == (size_t)p->k && !rrf_topk_better(&e, &p->heap[0])) continue;
    int rc = rrf_topk_push(ctx, p, &e);
    if (rc != SQLITE_OK) return rc;
  }
  return SQLITE_OK;
}

void rrf_hamming_topk_step(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
  HammingTopk *h = sqlite3_aggregate_context(ctx, sizeof(*h));
  (void)argc;
  if (h == NULL) {
    sqlite3_result_error_nomem(ctx);
    return;
  }
  if (h->top.failed) return;
  if (htopk_add(ctx, h, argv) != SQLITE_OK) h->top.failed = 1; /* ignore the remaining rows */
}

void rrf_hamming_topk_final(sqlite3_context *ctx) {
  HammingTopk *h = sqlite3_aggregate_context(ctx, 0);
  rrf_topk_result(ctx, h ? &h->top : NULL, "rrf_hamming_topk"); /* H9, H10 */
}
