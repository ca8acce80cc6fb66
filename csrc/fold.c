/*
** rrf_fold: the near-duplicate fold of the recall statement (sql/recall/top.sql, 7a).
*/
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels.h"
#include "rrf_internal.h"
SQLITE_EXTENSION_INIT3

/* rrf_fold(collapse, min_cosine, stopwords, pos, rowid, id, score, created_at, key, content,
**          embedding, usable) -> TEXT: the near-duplicate fold of the recall statement (sql/recall/top.sql, 7a).
**   F1. An aggregate over the ranked rows, in any order: pos (1 = best) orders them.
**   F2. Row j duplicates an earlier row i (pos_i < pos_j) when their texts are the same
**       (key, a BLOB, equal when both are given; else the contents trimmed, ASCII case
**       folded, white space runs made one space, equal), or when both are usable,
**       their embeddings (float32 BLOBs of one size, finite) have a cosine of at least
**       min_cosine and their words are the same set (a word: a run of ASCII
**       letters, digits, '_' or non-ASCII bytes, ASCII case folded, not one of the
**       stopwords (separated by white space), of at least three bytes or with a
**       digit, cut to its first max(4, length - 2) bytes: "stored" is "store").
**       Nothing is a duplicate when collapse is 0.
**   F3. A row joins the group of the best earlier row it duplicates; a group's rows in
**       newest-first order (created_at descending, then pos).
**   F4. The result: one JSON array per group, groups by their best pos:
**       [best pos, newest rowid, best score, [the other ids, newest first]]; NULL
**       without rows. Deterministic: the same rows give the same text.
*/
typedef struct FoldRow {
  sqlite3_int64 pos, rowid, created;
  double score;
  char *id, *text, *key; /* sqlite3_malloc'd copies; text is folded (F2) */
  int nkey, ntext, usable, group;
  float *vec;
  size_t dim;
} FoldRow;

typedef struct Fold {
  FoldRow *rows;
  int n, cap, collapse, failed, has_stop;
  double min_cosine;
  RrfWordSet stop; /* the stopwords (argument 3) */
} Fold;

static char *fold_copy(const void *p, int n) {
  char *c = sqlite3_malloc(n + 1);
  if (c) {
    if (n) memcpy(c, p, (size_t)n);
    c[n] = 0;
  }
  return c;
}

/* F2: trimmed, ASCII lower case, white space runs one space. */
static char *fold_text(const unsigned char *s, int n, int *out) {
  char *t = sqlite3_malloc(n + 1);
  int o = 0, space = 0;
  if (t == NULL) return NULL;
  for (int i = 0; i < n; i++) {
    unsigned char c = s[i];
    if (rrf_is_ascii_space(c)) {
      space = o > 0;
      continue;
    }
    if (space) t[o++] = ' ';
    space = 0;
    t[o++] = (char)((c >= 'A' && c <= 'Z') ? c + 32 : c);
  }
  t[o] = 0;
  *out = o;
  return t;
}

void rrf_fold_step(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
  Fold *f = sqlite3_aggregate_context(ctx, sizeof(Fold));
  (void)argc;
  if (f == NULL || f->failed) return;
  if (f->n == f->cap) {
    int cap = f->cap ? 2 * f->cap : 32;
    FoldRow *r = sqlite3_realloc64(f->rows, (sqlite3_uint64)cap * sizeof(FoldRow));
    if (r == NULL) goto nomem;
    f->rows = r;
    f->cap = cap;
  }
  FoldRow *r = &f->rows[f->n];
  memset(r, 0, sizeof *r);
  f->collapse = sqlite3_value_int(argv[0]) != 0;
  f->min_cosine = sqlite3_value_double(argv[1]);
  if (!f->has_stop) {
    const unsigned char *w = sqlite3_value_text(argv[2]);
    if (rrf_wordset_init(&f->stop, w ? w : (const unsigned char *)"",
                         sqlite3_value_bytes(argv[2])) != SQLITE_OK)
      goto nomem;
    f->has_stop = 1;
  }
  argv += 3; /* the row's own arguments */
  r->pos = sqlite3_value_int64(argv[0]);
  r->rowid = sqlite3_value_int64(argv[1]);
  r->score = sqlite3_value_double(argv[3]);
  r->created = sqlite3_value_int64(argv[4]);
  r->id = fold_copy(sqlite3_value_text(argv[2]), sqlite3_value_bytes(argv[2]));
  if (r->id == NULL) goto nomem;
  f->n++; /* from here on the row is freed with the others */
  if (sqlite3_value_type(argv[5]) == SQLITE_BLOB) {
    r->nkey = sqlite3_value_bytes(argv[5]);
    if ((r->key = fold_copy(sqlite3_value_blob(argv[5]), r->nkey)) == NULL) goto nomem;
  }
  const unsigned char *text = sqlite3_value_text(argv[6]);
  r->text =
      fold_text(text ? text : (const unsigned char *)"", sqlite3_value_bytes(argv[6]), &r->ntext);
  if (r->text == NULL) goto nomem;
  int bytes = sqlite3_value_bytes(argv[7]);
  if (sqlite3_value_int(argv[8]) && sqlite3_value_type(argv[7]) == SQLITE_BLOB && bytes > 0 &&
      bytes % 4 == 0) {
    r->dim = (size_t)bytes / 4;
    if ((r->vec = sqlite3_malloc(bytes)) == NULL) goto nomem;
    memcpy(r->vec, sqlite3_value_blob(argv[7]), (size_t)bytes);
    r->usable = 1;
    for (size_t i = 0; i < r->dim; i++) r->usable &= isfinite(r->vec[i]) != 0;
  }
  return;
nomem:
  f->failed = 1;
  sqlite3_result_error_nomem(ctx);
}

/* F2: a byte of a word (the text is case folded). */
static int is_word_byte(unsigned char c) {
  return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c >= 0x80;
}

/* F2: a word's stem: its first max(4, length - 2) bytes. */
typedef struct FoldWord {
  const char *p;
  int len;
} FoldWord;

static int word_cmp(const void *x, const void *y) {
  const FoldWord *a = x, *b = y;
  int c = memcmp(a->p, b->p, (size_t)(a->len < b->len ? a->len : b->len));
  return c ? c : a->len - b->len;
}

/* F2: the distinct stems of the words of t (n bytes) that say something, sorted: not
** stopwords, of three bytes or with a digit. Their count, or -1 when out of memory. */
static int fold_words(const char *t, int n, const RrfWordSet *stop, FoldWord **out) {
  FoldWord *w = sqlite3_malloc64(((sqlite3_uint64)n / 2 + 1) * sizeof(FoldWord));
  int k = 0, m = 0;
  *out = w;
  if (w == NULL) return -1;
  for (int i = 0; i < n;) {
    if (!is_word_byte((unsigned char)t[i])) {
      i++;
      continue;
    }
    int s = i, digit = 0;
    for (; i < n && is_word_byte((unsigned char)t[i]); i++) digit |= t[i] >= '0' && t[i] <= '9';
    int len = i - s;
    if ((len < 3 && !digit) || rrf_wordset_contains(stop, (const unsigned char *)t + s, len))
      continue;
    w[k].p = t + s;
    w[k++].len = len < 4 ? len : (len - 2 < 4 ? 4 : len - 2);
  }
  qsort(w, (size_t)k, sizeof *w, word_cmp);
  for (int i = 0; i < k; i++)
    if (m == 0 || word_cmp(&w[i], &w[m - 1]) != 0) w[m++] = w[i];
  return m;
}

/* Whether the words of a and b are the same set (F2); -1 when out of memory. */
static int fold_same_words(const FoldRow *a, const FoldRow *b, const RrfWordSet *stop) {
  FoldWord *wa = NULL, *wb = NULL;
  int na = fold_words(a->text, a->ntext, stop, &wa);
  int nb = na < 0 ? -1 : fold_words(b->text, b->ntext, stop, &wb);
  int same = na < 0 || nb < 0 ? -1 : na == nb;
  for (int i = 0; same == 1 && i < na; i++) same = word_cmp(&wa[i], &wb[i]) == 0;
  sqlite3_free(wa);
  sqlite3_free(wb);
  return same;
}

/* Whether row b duplicates row a (F2); -1 when out of memory. */
static int fold_dup(const FoldRow *a, const FoldRow *b, const Fold *f) {
  double min_cosine = f->min_cosine;
  if (a->key && b->key) {
    if (a->nkey == b->nkey && memcmp(a->key, b->key, (size_t)a->nkey) == 0) return 1;
  } else if (a->ntext == b->ntext && memcmp(a->text, b->text, (size_t)a->ntext) == 0) {
    return 1;
  }
  if (!a->usable || !b->usable || a->dim != b->dim) return 0;
  double s[3];
  rrf_dot3_kernel(RRF_SIMD_AUTO)(a->vec, b->vec, a->dim, s);
  if (!(s[1] > 0.0 && s[2] > 0.0) || rrf_cosine_from_sums(s) < min_cosine) return 0;
  return fold_same_words(a, b, &f->stop);
}

static int fold_by_pos(const void *x, const void *y) {
  const FoldRow *a = x, *b = y;
  return (a->pos > b->pos) - (a->pos < b->pos);
}

/* F3: group, then newest first, then pos. */
static int fold_by_member(const void *x, const void *y) {
  const FoldRow *a = *(const FoldRow *const *)x, *b = *(const FoldRow *const *)y;
  if (a->group != b->group) return a->group - b->group;
  if (a->created != b->created) return a->created > b->created ? -1 : 1;
  return (a->pos > b->pos) - (a->pos < b->pos);
}

static void json_string(sqlite3_str *out, const char *s) {
  sqlite3_str_appendchar(out, 1, '"');
  for (; *s; s++) {
    unsigned char c = (unsigned char)*s;
    if (c == '"' || c == '\\') sqlite3_str_appendf(out, "\\%c", c);
    else if (c < 0x20) sqlite3_str_appendf(out, "\\u%04x", c);
    else sqlite3_str_appendchar(out, 1, (char)c);
  }
  sqlite3_str_appendchar(out, 1, '"');
}

void rrf_fold_final(sqlite3_context *ctx) {
  Fold *f = sqlite3_aggregate_context(ctx, 0);
  FoldRow **order = NULL;
  if (f == NULL || f->n == 0 || f->failed) goto done; /* F4: NULL; or the error stands */
  qsort(f->rows, (size_t)f->n, sizeof(FoldRow), fold_by_pos);
  for (int j = 0; j < f->n; j++) {
    f->rows[j].group = j;
    for (int i = 0; f->collapse && i < j; i++) {
      int d = fold_dup(&f->rows[i], &f->rows[j], f);
      if (d < 0) goto nomem;
      if (d) {
        f->rows[j].group = f->rows[i].group;
        break;
      }
    }
  }
  if ((order = sqlite3_malloc64((sqlite3_uint64)f->n * sizeof *order)) == NULL) goto nomem;
  for (int i = 0; i < f->n; i++) order[i] = &f->rows[i];
  qsort(order, (size_t)f->n, sizeof *order, fold_by_member);
  sqlite3_str *out = sqlite3_str_new(NULL);
  sqlite3_str_appendchar(out, 1, '[');
  for (int i = 0, k = 0; i < f->n; i++, k++) {
    const FoldRow *r = order[i], *head = &f->rows[r->group];
    if (i == 0 || order[i - 1]->group != r->group) { /* the group's newest row */
      sqlite3_str_appendf(out, "%s[%lld,%lld,%!.17g,[", i ? "," : "", head->pos, r->rowid,
                          head->score);
      k = 0;
    } else {
      if (k > 1) sqlite3_str_appendchar(out, 1, ',');
      json_string(out, r->id);
    }
    if (i == f->n - 1 || order[i + 1]->group != r->group) sqlite3_str_appendall(out, "]]");
  }
  sqlite3_str_appendchar(out, 1, ']');
  rrf_result_str(ctx, out, "rrf_fold");
  goto done;
nomem:
  sqlite3_result_error_nomem(ctx);
done:
  sqlite3_free(order);
  for (int i = 0; f && i < f->n; i++) {
    sqlite3_free(f->rows[i].id);
    sqlite3_free(f->rows[i].text);
    sqlite3_free(f->rows[i].key);
    sqlite3_free(f->rows[i].vec);
  }
  if (f) sqlite3_free(f->rows);
  if (f && f->has_stop) rrf_wordset_free(&f->stop);
}
