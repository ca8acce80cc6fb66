/*
** Shared helpers of the libFuzzer targets (tests/fuzz/README.md).
**
** The extension's sources are compiled into each target with -DSQLITE_CORE, so
** sqlite3ext.h maps every sqlite3_* call to the real SQLite API (the static
** libsqlite3 the target links) and SQLITE_EXTENSION_INIT1/2/3 are no-ops;
** sqlite3_rrf_init is then called with the connection, as SQLite's loader would.
**
** A failed invariant calls fz_fail(), which prints the reason and abort()s, so
** libFuzzer records the input as a crash.
*/
#ifndef RRF_FUZZ_COMMON_H
#define RRF_FUZZ_COMMON_H

#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sqlite3.h>

int sqlite3_rrf_init(sqlite3 *db, char **pzErrMsg, const sqlite3_api_routines *pApi);

__attribute__((noreturn, format(printf, 1, 2))) static inline void fz_fail(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "\n*** fuzz invariant failed: ");
  vfprintf(stderr, fmt, ap);
  fprintf(stderr, "\n");
  va_end(ap);
  abort();
}

#define FZ_CHECK(cond, ...)                                                                \
  do {                                                                                     \
    if (!(cond)) fz_fail(__VA_ARGS__);                                                     \
  } while (0)

/* A fresh in-memory connection with the extension registered. */
static inline sqlite3 *fz_open(void) {
  sqlite3 *db = NULL;
  char *err = NULL;
  if (sqlite3_open(":memory:", &db) != SQLITE_OK) fz_fail("sqlite3_open failed");
  if (sqlite3_rrf_init(db, &err, NULL) != SQLITE_OK) fz_fail("sqlite3_rrf_init: %s", err);
  return db;
}

static inline void fz_exec(sqlite3 *db, const char *sql) {
  char *err = NULL;
  if (sqlite3_exec(db, sql, NULL, NULL, &err) != SQLITE_OK) fz_fail("%s: %s", sql, err);
}

static inline sqlite3_stmt *fz_prepare(sqlite3 *db, const char *sql) {
  sqlite3_stmt *st = NULL;
  if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK)
    fz_fail("prepare %s: %s", sql, sqlite3_errmsg(db));
  return st;
}

/* After a failed step: the message must name one of the functions (a SQL error
** from the extension), never SQLite's generic fallbacks. */
static inline void fz_expect_named_error(sqlite3 *db, int rc, const char *fn1, const char *fn2) {
  const char *msg = sqlite3_errmsg(db);
  /* SQLITE_TOOBIG: a result longer than a lowered SQLITE_LIMIT_LENGTH. */
  FZ_CHECK(rc == SQLITE_ERROR || rc == SQLITE_TOOBIG, "step returned %d (%s), expected an error",
           rc, msg);
  FZ_CHECK(strstr(msg, fn1) != NULL || (fn2 && strstr(msg, fn2) != NULL),
           "error message does not name %s: %s", fn1, msg);
  FZ_CHECK(strstr(msg, "unknown error") == NULL, "generic error message: %s", msg);
}

/* Strict UTF-8 (no overlongs, surrogates or code points past U+10FFFF). */
static inline int valid_utf8(const unsigned char *s, int n) {
  for (int i = 0; i < n;) {
    unsigned c = s[i], need, v, min;
    if (c < 0x80) {
      i++;
      continue;
    }
    if ((c & 0xE0) == 0xC0) { need = 1; v = c & 0x1F; min = 0x80; }
    else if ((c & 0xF0) == 0xE0) { need = 2; v = c & 0x0F; min = 0x800; }
    else if ((c & 0xF8) == 0xF0) { need = 3; v = c & 0x07; min = 0x10000; }
    else return 0;
    if (i + (int)need >= n) return 0;
    for (unsigned j = 1; j <= need; j++) {
      if ((s[i + j] & 0xC0) != 0x80) return 0;
      v = (v << 6) | (s[i + j] & 0x3F);
    }
    if (v < min || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF)) return 0;
    i += (int)need + 1;
  }
  return 1;
}

/* ---- reading the fuzz input ---- */

typedef struct Fz {
  const uint8_t *p;
  size_t n;
} Fz;

static inline int fz_empty(const Fz *f) { return f->n == 0; }

static inline uint8_t fz_u8(Fz *f) {
  if (f->n == 0) return 0;
  f->n--;
  return *f->p++;
}

static inline uint32_t fz_u32(Fz *f) {
  uint32_t v = 0;
  for (int i = 0; i < 4; i++) v = (v << 8) | fz_u8(f);
  return v;
}

/* Take up to `len` bytes. */
static inline const uint8_t *fz_take(Fz *f, size_t len, size_t *got) {
  const uint8_t *p = f->p;
  if (len > f->n) len = f->n;
  f->p += len;
  f->n -= len;
  *got = len;
  return p;
}

/* A growable byte buffer for building SQL text and JSON. */
typedef struct Buf {
  char *s;
  size_t n, cap;
} Buf;

static inline void buf_add(Buf *b, const void *p, size_t len) {
  if (b->n + len + 1 > b->cap) {
    size_t cap = b->cap ? b->cap * 2 : 256;
    while (cap < b->n + len + 1) cap *= 2;
    char *s = realloc(b->s, cap);
    if (s == NULL) fz_fail("out of memory in the harness");
    b->s = s;
    b->cap = cap;
  }
  memcpy(b->s + b->n, p, len);
  b->n += len;
  b->s[b->n] = 0;
}

__attribute__((format(printf, 2, 3))) static inline void buf_printf(Buf *b, const char *fmt, ...) {
  char tmp[512];
  va_list ap;
  va_start(ap, fmt);
  int k = vsnprintf(tmp, sizeof tmp, fmt, ap);
  va_end(ap);
  if (k < 0) fz_fail("vsnprintf");
  if ((size_t)k >= sizeof tmp) k = sizeof tmp - 1;
  buf_add(b, tmp, (size_t)k);
}

static inline void buf_free(Buf *b) {
  free(b->s);
  b->s = NULL;
  b->n = b->cap = 0;
}

#endif
