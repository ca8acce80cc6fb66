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
