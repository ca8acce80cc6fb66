/*
** How the extension's functions report errors and name what they were given:
** every message is formed here, so that each says "<function>: <fault>" the
** same way and an allocation failure while forming one is SQLITE_NOMEM, never
** a NULL message or a crash.
*/
#include <stdarg.h>
#include <string.h>

#include "rrf_internal.h"
SQLITE_EXTENSION_INIT3

int rrf_error(sqlite3_context *ctx, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char *msg = sqlite3_vmprintf(fmt, ap);
  va_end(ap);
  if (msg == NULL) {
    sqlite3_result_error_nomem(ctx);
    return SQLITE_NOMEM;
  }
  sqlite3_result_error(ctx, msg, -1);
  sqlite3_free(msg);
  return SQLITE_ERROR;
}

const char *rrf_type_name(sqlite3_value *v) {
  switch (sqlite3_value_type(v)) {
  case SQLITE_NULL:
    return "NULL";
  case SQLITE_INTEGER:
    return "INTEGER";
  case SQLITE_FLOAT:
    return "REAL";
  case SQLITE_TEXT:
    return "TEXT";
  default:
    return "BLOB";
  }
}

const char *rrf_shown(const unsigned char *s, int n, char *buf, int max) {
  int o = 0, i = 0;
  while (i < n) {
    unsigned cp;
    int k = rrf_utf8_decode(s, n, i, &cp);
    if (o + k > max) break;
    if (cp == 0xFFFD || cp < 0x20 || cp == 0x7F || (cp >= 0x80 && cp < 0xA0)) {
      buf[o++] = '?';
    } else {
      memcpy(buf + o, s + i, (size_t)k);
      o += k;
    }
    i += k;
  }
  if (i < n) {
    memcpy(buf + o, "...", 3);
    o += 3;
  }
  buf[o] = 0;
  return buf;
}

void rrf_result_str(sqlite3_context *ctx, sqlite3_str *out, const char *fn) {
  int limit = sqlite3_limit(sqlite3_context_db_handle(ctx), SQLITE_LIMIT_LENGTH, -1);
  int err = sqlite3_str_errcode(out), len = sqlite3_str_length(out);
  char *s = sqlite3_str_finish(out);
  /* `out` is made without a db (a db's sqlite3_str stops near its limit, before
  ** or after it depending on the appends, and sqlite3_result_text past it fails
  ** with SQLite's generic message): the result's length is checked here. */
  if (err == SQLITE_TOOBIG || (err == SQLITE_OK && len > limit)) {
    sqlite3_free(s);
    if (rrf_error(ctx, "%s: the result is longer than SQLITE_LIMIT_LENGTH (%d bytes)", fn, limit) ==
        SQLITE_ERROR)
      sqlite3_result_error_code(ctx, SQLITE_TOOBIG); /* keeps the message */
  } else if (err != SQLITE_OK) {
    sqlite3_free(s);
    sqlite3_result_error_nomem(ctx);
  } else if (s == NULL) {
    sqlite3_result_text(ctx, "", 0, SQLITE_STATIC); /* an empty sqlite3_str */
  } else {
    sqlite3_result_text(ctx, s, len, sqlite3_free);
  }
}
