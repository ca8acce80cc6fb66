/*
** rrf_bm25(fts_table, n [, weight...]) -> REAL: an FTS5 auxiliary function
** (skeleton; being implemented).
*/
#include "rrf_internal.h"
SQLITE_EXTENSION_INIT3

int rrf_bm25_register(sqlite3 *db, char **pzErrMsg) {
  (void)db;
  (void)pzErrMsg;
  return SQLITE_OK;
}
