/*
** fts5_query(text [, mode]) -> TEXT: raw user text to a safe FTS5 MATCH expression.
**
** Requirements (DESIGN.md, "The extension"; tests cite them as Q1..Q6):
**   Q1. Each token is double-quoted and the tokens are joined by " OR " (mode
**       'or', the default) or " AND " (mode 'and'; case-insensitive).
**   Q2. A token is a run of ASCII letters and digits or of non-ASCII letters;
**       everything else (ASCII punctuation and spaces, Unicode spaces and
**       punctuation, invalid UTF-8) separates tokens, so - / ' " : * ^ ( ) never
**       reach FTS5's parser and no input raises a syntax error.
**   Q3. FTS5 keywords in the text (AND, OR, NOT, NEAR) are quoted like any word,
**       so they are searched as words.
**   Q4. Tokens repeated in the text (compared ASCII-case-insensitively) appear
**       once, so a repeated word does not count twice in bm25().
**   Q5. Text with no token gives '""', a phrase that matches nothing.
**   Q6. NULL -> NULL; INTEGER and REAL are read as their text; a BLOB or an
**       unknown mode is an error naming the function, and so is a result longer
**       than the connection's SQLITE_LIMIT_LENGTH (SQLITE_TOOBIG).
**   Q7. At most RRF_FTS5_MAX_TOKENS (1000) distinct tokens are kept, the first
**       ones: FTS5 parses an OR of n phrases in O(n^2) time, so an unbounded
**       paste would stall the query (100,000 terms take about a minute).
*/
#include <string.h>

#include "rrf_internal.h"
SQLITE_EXTENSION_INIT3

#define RRF_FTS5_MAX_TOKENS 1000

/* Decode one UTF-8 sequence at s[i]; returns its length (1 for an invalid
** byte, with *cp = 0xFFFD). Shared with fuse.c (rrf_internal.h). */
int rrf_utf8_decode(const unsigned char *s, int len, int i, unsigned *cp) {
  unsigned c = s[i];
  int need;
  unsigned v, min;
  if (c < 0x80) {
    *cp = c;
    return 1;
  } else if ((c & 0xE0) == 0xC0) {
    need = 1; v = c & 0x1F; min = 0x80;
  } else if ((c & 0xF0) == 0xE0) {
    need = 2; v = c & 0x0F; min = 0x800;
  } else if ((c & 0xF8) == 0xF0) {
    need = 3; v = c & 0x07; min = 0x10000;
  } else {
    *cp = 0xFFFD;
    return 1;
  }
  if (i + need >= len) { /* truncated sequence */
    *cp = 0xFFFD;
    return 1;
  }
  for (int j = 1; j <= need; j++) {
    if ((s[i + j] & 0xC0) != 0x80) {
      *cp = 0xFFFD;
      return 1;
    }
    v = (v << 6) | (s[i + j] & 0x3F);
  }
  if (v < min || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF)) {
    *cp = 0xFFFD;
    return 1;
  }
  *cp = v;
  return need + 1;
}

/* Q2: is this code point part of a token? */
static int is_token_char(unsigned cp) {
  if (cp < 0x80) {
    return (cp >= '0' && cp <= '9') || (cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z');
  }
  if (cp == 0xFFFD) return 0;                      /* invalid UTF-8 */
  if (cp < 0xC0) return cp == 0xAA || cp == 0xB5 || cp == 0xBA ||
                        (cp >= 0xB2 && cp <= 0xB3) || cp == 0xB9 ||
                        (cp >= 0xBC && cp <= 0xBE); /* Latin-1 letters and numbers */
  if (cp == 0xD7 || cp == 0xF7) return 0;          /* multiplication, division signs */
  if (cp >= 0x2000 && cp <= 0x206F) return 0;      /* general punctuation and spaces */
  if (cp >= 0x20A0 && cp <= 0x20CF) return 0;      /* currency symbols */
  if (cp >= 0x2190 && cp <= 0x2BFF) return 0;      /* arrows, math operators, shapes */
  if (cp >= 0x3000 && cp <= 0x303F) return 0;      /* CJK symbols and punctuation */
  if (cp >= 0xFE30 && cp <= 0xFE4F) return 0;      /* CJK compatibility forms */
  if (cp >= 0xFF00 && cp <= 0xFF0F) return 0;      /* fullwidth punctuation */
  if (cp >= 0xFF1A && cp <= 0xFF20) return 0;
  if (cp >= 0xFF3B && cp <= 0xFF40) return 0;
  if (cp >= 0xFF5B && cp <= 0xFF65) return 0;
  if (cp >= 0xFFF0) return 0;                      /* specials, non-characters */
  if (cp >= 0x1F000 && cp <= 0x1FAFF) return 0;    /* emoji and pictographs */
  if (cp >= 0xE0000) return 0;                     /* tags, variation selectors */
  return 1;
}

static int ascii_ieq(const unsigned char *a, const unsigned char *b, int n) {
  for (int i = 0; i < n; i++) {
    unsigned char x = a[i], y = b[i];
    if (x >= 'A' && x <= 'Z') x += 32;
    if (y >= 'A' && y <= 'Z') y += 32;
    if (x != y) return 0;
  }
  return 1;
}

typedef struct Tok {
  int start, len;
} Tok;

/* FNV-1a over the ASCII-lowercased token (Q4). */
static unsigned tok_hash(const unsigned char *s, int n) {
  unsigned h = 2166136261u;
  for (int i = 0; i < n; i++) {
    unsigned char c = s[i];
    if (c >= 'A' && c <= 'Z') c += 32;
    h = (h ^ c) * 16777619u;
  }
  return h;
}

/* Open-addressing set of token indexes (+1; 0 is empty), so that removing
** repeats stays linear on megabyte inputs. */
static int tok_seen_or_add(const unsigned char *s, Tok *toks, int *slots, int nslots,
                           int ntok) {
  unsigned h = tok_hash(s + toks[ntok].start, toks[ntok].len) & (unsigned)(nslots - 1);
  for (;; h = (h + 1) & (unsigned)(nslots - 1)) {
    int t = slots[h] - 1;
    if (t < 0) {
      slots[h] = ntok + 1;
      return 0;
    }
    if (toks[t].len == toks[ntok].len &&
        ascii_ieq(s + toks[t].start, s + toks[ntok].start, toks[ntok].len))
      return 1;
  }
}

void rrf_fts5_query(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
  const char *joiner = " OR ";
  Tok *toks = NULL;
  int *slots = NULL;
  int ntok = 0, cap = 0, nslots = 0;
  sqlite3_str *out = NULL;

  if (sqlite3_value_type(argv[0]) == SQLITE_NULL) { /* Q6 */
    sqlite3_result_null(ctx);
    return;
  }
  if (sqlite3_value_type(argv[0]) == SQLITE_BLOB) {
    sqlite3_result_error(ctx, "fts5_query: text must be TEXT, got BLOB", -1);
    return;
  }
  if (argc > 1 && sqlite3_value_type(argv[1]) != SQLITE_NULL) { /* Q1 */
    /* The type before sqlite3_value_text(), which turns a BLOB or number into TEXT. */
    int is_text = sqlite3_value_type(argv[1]) == SQLITE_TEXT;
    const unsigned char *m = sqlite3_value_text(argv[1]);
    int mlen = sqlite3_value_bytes(argv[1]);
    if (is_text && m && mlen == 2 && ascii_ieq(m, (const unsigned char *)"or", 2)) {
      joiner = " OR ";
    } else if (is_text && m && mlen == 3 && ascii_ieq(m, (const unsigned char *)"and", 3)) {
      joiner = " AND ";
    } else {
      sqlite3_result_error(ctx, "fts5_query: mode must be 'or' or 'and'", -1);
      return;
    }
  }

  const unsigned char *s = sqlite3_value_text(argv[0]);
  int len = sqlite3_value_bytes(argv[0]);
  if (s == NULL) {
    sqlite3_result_error_nomem(ctx);
    return;
  }

  /* Q2: split into tokens. */
  for (int i = 0; i < len && ntok < RRF_FTS5_MAX_TOKENS;) { /* Q7 */
    unsigned cp;
    int n = rrf_utf8_decode(s, len, i, &cp);
    if (!is_token_char(cp)) {
      i += n;
      continue;
    }
    int start = i;
    while (i < len) {
      n = rrf_utf8_decode(s, len, i, &cp);
      if (!is_token_char(cp)) break;
      i += n;
    }
    if (ntok == cap) {
      int ncap = cap ? cap * 2 : 16;
      Tok *nt = sqlite3_realloc64(toks, (sqlite3_uint64)ncap * sizeof(Tok));
      if (nt == NULL) goto nomem;
      toks = nt;
      cap = ncap;
      /* Rebuild the set at twice the capacity, so it is never over half full. */
      sqlite3_free(slots);
      nslots = ncap * 2;
      slots = sqlite3_malloc64((sqlite3_uint64)nslots * sizeof(int));
      if (slots == NULL) goto nomem;
      memset(slots, 0, (size_t)nslots * sizeof(int));
      for (int t = 0; t < ntok; t++) tok_seen_or_add(s, toks, slots, nslots, t);
    }
    toks[ntok].start = start;
    toks[ntok].len = i - start;
    if (tok_seen_or_add(s, toks, slots, nslots, ntok)) continue; /* Q4 */
    ntok++;
  }
  sqlite3_free(slots);
  slots = NULL;

  if (ntok == 0) { /* Q5 */
    sqlite3_free(toks);
    sqlite3_result_text(ctx, "\"\"", 2, SQLITE_STATIC);
    return;
  }

  /* Q1, Q3: quote every token (no token contains '"', Q2). */
  out = sqlite3_str_new(NULL); /* no db: rrf_result_str checks the limit (Q6) */
  for (int t = 0; t < ntok; t++) {
    if (t) sqlite3_str_appendall(out, joiner);
    sqlite3_str_appendchar(out, 1, '"');
    sqlite3_str_append(out, (const char *)s + toks[t].start, toks[t].len);
    sqlite3_str_appendchar(out, 1, '"');
  }
  sqlite3_free(toks);
  rrf_result_str(ctx, out, "fts5_query"); /* Q6: past SQLITE_LIMIT_LENGTH, an error */
  return;

nomem:
  sqlite3_free(toks);
  sqlite3_free(slots);
  if (out) sqlite3_free(sqlite3_str_finish(out));
  sqlite3_result_error_nomem(ctx);
}
