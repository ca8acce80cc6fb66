/*
** Hash sets of byte ranges (rrf_internal.h): fts5_query's set of the tokens
** seen so far (Q4, ASCII-case-insensitive) and its stopword set (Q8, byte for
** byte), so that removing repeats and looking up stopwords stay linear on
** megabyte inputs.
*/
#include <string.h>

#include "rrf_internal.h"
SQLITE_EXTENSION_INIT3

/* FNV-1a over the bytes, ASCII-lowercased when nocase. */
static unsigned span_hash(const unsigned char *s, int n, int nocase) {
  unsigned h = 2166136261u;
  for (int i = 0; i < n; i++) {
    unsigned char c = s[i];
    if (nocase && c >= 'A' && c <= 'Z') c += 32;
    h = (h ^ c) * 16777619u;
  }
  return h;
}

int rrf_spanset_init(RrfSpanSet *set, sqlite3_int64 nmax, int nocase) {
  sqlite3_uint64 nslots = 16;
  while (nslots < 2 * (sqlite3_uint64)nmax) nslots *= 2; /* never over half full */
  set->nocase = nocase;
  set->mask = (unsigned)(nslots - 1);
  set->slots = nslots <= 0x40000000u ? sqlite3_malloc64(nslots * sizeof(int)) : NULL;
  if (set->slots == NULL) return SQLITE_NOMEM;
  memset(set->slots, 0, (size_t)nslots * sizeof(int));
  return SQLITE_OK;
}

void rrf_spanset_free(RrfSpanSet *set) {
  sqlite3_free(set->slots);
  set->slots = NULL;
}

int rrf_spanset_find(const RrfSpanSet *set, const unsigned char *base, const RrfSpan *spans,
                     const unsigned char *t, int n) {
  for (unsigned h = span_hash(t, n, set->nocase) & set->mask;; h = (h + 1) & set->mask) {
    int k = set->slots[h] - 1;
    if (k < 0) return -1;
    if (spans[k].len == n && (set->nocase ? rrf_ascii_ieq(base + spans[k].start, t, n)
                                          : memcmp(base + spans[k].start, t, (size_t)n) == 0))
      return k;
  }
}

void rrf_spanset_add(RrfSpanSet *set, const unsigned char *base, const RrfSpan *spans, int i) {
  unsigned h = span_hash(base + spans[i].start, spans[i].len, set->nocase) & set->mask;
  while (set->slots[h]) h = (h + 1) & set->mask;
  set->slots[h] = i + 1;
}

int rrf_wordset_init(RrfWordSet *ws, const unsigned char *s, int n) {
  memset(ws, 0, sizeof *ws);
  int count = 0;
  for (int i = 0; i < n;) {
    while (i < n && rrf_is_ascii_space(s[i])) i++;
    if (i == n) break;
    count++;
    while (i < n && !rrf_is_ascii_space(s[i])) i++;
  }
  if (count == 0) return SQLITE_OK; /* the empty set */
  ws->text = sqlite3_malloc64((sqlite3_uint64)n);
  ws->words = sqlite3_malloc64((sqlite3_uint64)count * sizeof(RrfSpan));
  if (ws->text == NULL || ws->words == NULL || rrf_spanset_init(&ws->set, count, 0) != SQLITE_OK) {
    rrf_wordset_free(ws);
    return SQLITE_NOMEM;
  }
  memcpy(ws->text, s, (size_t)n);
  for (int i = 0; i < n;) {
    while (i < n && rrf_is_ascii_space(s[i])) i++;
    if (i == n) break;
    int start = i;
    while (i < n && !rrf_is_ascii_space(s[i])) i++;
    if (rrf_spanset_find(&ws->set, ws->text, ws->words, s + start, i - start) >= 0) continue;
    ws->words[ws->nwords].start = start;
    ws->words[ws->nwords].len = i - start;
    rrf_spanset_add(&ws->set, ws->text, ws->words, ws->nwords++);
  }
  return SQLITE_OK;
}

void rrf_wordset_free(RrfWordSet *ws) {
  sqlite3_free(ws->text);
  sqlite3_free(ws->words);
  rrf_spanset_free(&ws->set);
  memset(ws, 0, sizeof *ws);
}

int rrf_wordset_contains(const RrfWordSet *ws, const unsigned char *t, int n) {
  return ws->nwords > 0 && rrf_spanset_find(&ws->set, ws->text, ws->words, t, n) >= 0;
}
