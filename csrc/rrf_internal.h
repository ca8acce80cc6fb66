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

void rrf_fuse_step(sqlite3_context *ctx, int argc, sqlite3_value **argv);
void rrf_fuse_inverse(sqlite3_context *ctx, int argc, sqlite3_value **argv);
void rrf_fuse_value(sqlite3_context *ctx);
void rrf_fuse_final(sqlite3_context *ctx);

void rrf_explain_step(sqlite3_context *ctx, int argc, sqlite3_value **argv);
void rrf_explain_inverse(sqlite3_context *ctx, int argc, sqlite3_value **argv);
void rrf_explain_value(sqlite3_context *ctx);
void rrf_explain_final(sqlite3_context *ctx);

void rrf_fts5_query(sqlite3_context *ctx, int argc, sqlite3_value **argv);

/* "NULL", "INTEGER", "REAL", "TEXT" or "BLOB". */
const char *rrf_type_name(sqlite3_value *v);

#endif
