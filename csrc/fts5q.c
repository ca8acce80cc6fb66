/*
** fts5_query(text [, mode [, stopwords [, tokenize]]]) -> TEXT: raw user text
** to a safe FTS5 MATCH expression, optionally without the words that occur in
** most documents, or the list of its terms.
**
** Requirements (docs/contract.md, "The extension"; docs/sql/fts5_query.md; tests
** cite them as Q1..Q16):
**   Q1. Each token is double-quoted and the tokens are joined by " OR " (mode
**       'or', the default) or " AND " (mode 'and'; case-insensitive). Mode
**       'terms' lists the terms instead (Q15).
**   Q2. A token is a run of ASCII letters and digits, of CJK characters (Q16)
**       and of the other non-ASCII characters that FTS5's unicode61 tokenizer
**       (the index's, under porter) takes as token characters: its categories
**       "L* N* Co" by its own Unicode tables, where a code point assigned since
**       (U+1F970) is one too, and the diacritics it folds away (U+0301).
**       Everything else separates tokens: ASCII punctuation and spaces, what
**       unicode61 separates (Unicode spaces, punctuation, symbols, other marks,
**       variation selectors, format characters) and invalid UTF-8. So a token
**       never cuts one of the index's terms in two ("a\u3005" is one term and
**       one token), and - / ' " : * ^ ( ) never reach FTS5's parser and no input
**       raises a syntax error.
**   Q3. FTS5 keywords in the text (AND, OR, NOT, NEAR) are quoted like any word,
**       so they are searched as words.
**   Q4. Tokens repeated in the text (compared ASCII-case-insensitively) appear
**       once, so a repeated word does not count twice in bm25().
**   Q5. Text with no token gives '""', a phrase that matches nothing.
**   Q6. NULL -> NULL, whatever the other arguments; INTEGER and REAL are read as
**       their text; a BLOB or an unknown mode is an error naming the function,
**       and so is a result longer than the connection's SQLITE_LIMIT_LENGTH
**       (SQLITE_TOOBIG).
**   Q7. At most RRF_FTS5_MAX_TOKENS (1000) distinct tokens are kept, the first
**       ones: FTS5 parses an OR of n phrases in O(n^2) time, so an unbounded
**       paste would stall the query (100,000 terms take about a minute).
**   Q8. stopwords: NULL, absent, '' or only ASCII whitespace -> no pruning: the
**       output is exactly that of Q1..Q7, no tokenizer is made and FTS5 is not
**       needed (tokenize is then only type-checked, Q9). TEXT: terms separated
**       by ASCII whitespace (space, tab, LF, VT, FF, CR), written as the FTS5
**       table's tokenizer emits them (for 'porter unicode61' lower-case stems
**       such as "the", "of", "studi"), compared byte for byte. Any other type
**       (BLOB, INTEGER, REAL) is an error naming the function and the type.
**   Q9. tokenize: an FTS5 tokenizer spec as written in CREATE VIRTUAL TABLE ...
**       tokenize='...': words separated by ASCII whitespace, the first naming
**       the tokenizer and the rest its arguments; a word may be quoted with
**       single quotes, as FTS5 quotes them, or double quotes, the quote doubled
**       inside (unicode61 tokenchars '-_'); a quoted word ends at its closing
**       quote, a bare one at whitespace or a quote. NULL, absent, '' or only
**       whitespace -> 'unicode61', FTS5's default. A value that is not TEXT or
**       NULL is an error naming the function; whenever a tokenizer is made (Q10,
**       Q15) so are an unterminated quote, a NUL byte, more than
**       RRF_FTS5_MAX_SPEC_WORDS (64) words (a chain of 'porter porter ...' would
**       recurse once per word), a tokenizer that is not built in (Q14), and a
**       tokenizer whose xCreate fails (naming the spec).
**  Q10. Pruning, when Q8 gives at least one stopword: each distinct token (after
**       Q2, Q4, Q7) is run through that tokenizer (FTS5's v1 tokenizer API, flag
**       FTS5_TOKENIZE_QUERY, as FTS5 tokenizes a quoted phrase). A token that
**       yields exactly one term, that term in the stopword set, is dropped; a
**       token that yields 0 or >= 2 terms is kept. Both modes prune alike.
**  Q11. If every token would be dropped, none is: the expression is exactly the
**       one without stopwords, so a query made only of common words still
**       searches.
**  Q12. Order: Q2 tokens, Q4 repeats, Q7's cap, then Q10 pruning: the pruned
**       expression is the unpruned one without some of its tokens, in the same
**       order (so bm25() over the two differs only by the dropped phrases).
**  Q13. Resources: fts5_api is taken from the calling connection (SELECT
**       fts5(?1) with a bound "fts5_api_ptr" pointer), only when a tokenizer is
**       made; no FTS5 is an error. The stopword set (a hash set: O(n) to build,
**       O(1) to look up) and the tokenizer are kept with sqlite3_set_auxdata on
**       the stopwords argument, so a constant argument is parsed once per
**       statement; the tokenizer is remade when the tokenize argument changes.
**       Error messages quote at most RRF_SHOWN_MAX (32) bytes of a name or spec
**       (60 of SQLite's own message), control characters and invalid UTF-8
**       shown as '?', so that every message stays under 128 bytes (SQLite
**       replaces a message longer than the connection's SQLITE_LIMIT_LENGTH by a
**       generic one).
**  Q14. Only FTS5's built-in tokenizers: the first word of tokenize must be
**       unicode61, ascii, porter or trigram (compared ASCII-case-insensitively,
**       as FTS5 compares names), and porter's first argument, when it has one,
**       names the tokenizer porter wraps, again one of these (porter wrapping
**       porter is followed down the chain). Anything else is the error
**       "fts5_query: tokenizer '...' is not one of FTS5's built-in unicode61,
**       ascii, porter, trigram". This is what keeps the SQLITE_DETERMINISTIC and
**       SQLITE_INNOCUOUS flags true for every argument count: a built-in
**       tokenizer reads no table, writes nothing and gives the same terms for
**       the same text, and the nested SELECT fts5(?1) of Q13 reads no table
**       either; a tokenizer some application registered could do anything,
**       and an innocuous function may be called by any view or trigger of a
**       database file, whoever wrote it.
**  Q15. Mode 'terms': a JSON array with one element per distinct token (Q2, Q4,
**       Q7) that the tokenizer (Q9, Q10's flag) turns into exactly one term:
**       [phrase, term], phrase being the token quoted exactly as the 'or'
**       expression quotes it (a valid FTS5 MATCH expression on its own) and
**       term the tokenizer's term. With stopwords (Q8) only the tokens Q10
**       would drop are listed (Q11 does not apply); '[]' when there is none.
**       The array escapes '"', '\' and control characters as JSON does, so it
**       is valid JSON for valid UTF-8 terms (those of the built-in tokenizers).
**       A tokenizer is always made, so mode 'terms' needs FTS5.
**  Q16. CJK text (migration 0011, docs/languages.md): within a Q2 token, a run of
**       CJK characters (code points of the scripts written without spaces
**       between words: Thai, Lao, Myanmar, Hangul, Khmer, kana, bopomofo, the
**       CJK ideographs and their extensions; U+30FB, the katakana middle dot, is
**       punctuation, Q2) is apart from the characters around it, and gives one
**       token per character bigram, in order ("パスワード": "パス", "スワ",
**       "ワー", "ード"); a run of one character is that character. The rest of
**       the token (its non-CJK runs) gives one token each. These are the
**       tokens of Q4 (repeats), Q7 (the cap counts each bigram) and Q10 (each
**       bigram is looked up alone). So each token is still a substring of the
**       text, and the index, which holds the same bigrams (migration 0011's
**       segmentation), matches each of them.
**
** Here: the SQL function, the tokens (Q2, Q4, Q7, Q16) and the plan (Q10..Q12,
** Q15). The stopwords and the tokenizer (Q8..Q10, Q13, Q14) are in fts5stop.c,
** the hash sets (Q4, Q8) in strset.c, the tokenize argument's parser (Q9, Q14)
** in tokspec.c, the messages' forms in errors.c.
*/
#include <string.h>

#include "rrf_internal.h"
SQLITE_EXTENSION_INIT3

#define RRF_FTS5_MAX_TOKENS 1000

/* Decode one UTF-8 sequence at s[i]; returns its length (1 for an invalid
** byte, with *cp = 0xFFFD). Shared with fuse.c and errors.c (rrf_internal.h). */
int rrf_utf8_decode(const unsigned char *s, int len, int i, unsigned *cp) {
  unsigned c = s[i];
  int need;
  unsigned v, min;
  if (c < 0x80) {
    *cp = c;
    return 1;
  } else if ((c & 0xE0) == 0xC0) {
    need = 1;
    v = c & 0x1F;
    min = 0x80;
  } else if ((c & 0xF0) == 0xE0) {
    need = 2;
    v = c & 0x0F;
    min = 0x800;
  } else if ((c & 0xF8) == 0xF0) {
    need = 3;
    v = c & 0x07;
    min = 0x10000;
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

/* Q16: is this code point a CJK character (a script written without spaces
** between words)? The same ranges as the GLOB class of migration 0011. */
static int rrf_is_cjk(unsigned cp) {
  if (cp < 0x0E00) return 0;
  return (cp <= 0x0EFF) ||                   /* Thai, Lao */
         (cp >= 0x1000 && cp <= 0x109F) ||   /* Myanmar */
         (cp >= 0x1100 && cp <= 0x11FF) ||   /* Hangul Jamo */
         (cp >= 0x1780 && cp <= 0x17FF) ||   /* Khmer */
         (cp >= 0x3041 && cp <= 0x309F) ||   /* Hiragana */
         (cp >= 0x30A1 && cp <= 0x30FA) ||   /* Katakana, without the middle dot */
         (cp >= 0x30FC && cp <= 0x30FF) ||
         (cp >= 0x3100 && cp <= 0x31BF) ||   /* Bopomofo, Hangul compatibility Jamo, Kanbun */
         (cp >= 0x31F0 && cp <= 0x31FF) ||   /* Katakana phonetic extensions */
         (cp >= 0x3400 && cp <= 0x4DBF) ||   /* CJK extension A */
         (cp >= 0x4E00 && cp <= 0x9FFF) ||   /* CJK unified ideographs */
         (cp >= 0xA960 && cp <= 0xA97F) ||   /* Hangul Jamo extended A */
         (cp >= 0xAC00 && cp <= 0xD7FF) ||   /* Hangul syllables, Jamo extended B */
         (cp >= 0xF900 && cp <= 0xFAFF) ||   /* CJK compatibility ideographs */
         (cp >= 0xFF66 && cp <= 0xFFDC) ||   /* halfwidth Katakana and Hangul */
         (cp >= 0x20000 && cp <= 0x3FFFD);   /* CJK extensions B and after */
}

/* Q2: the code points from U+0080 up that FTS5's unicode61 tokenizer takes as
** separators, as [first, last] ranges in order: those outside its default
** categories "L* N* Co" by its own Unicode tables (Unicode 6.1: a code point
** assigned later is a token character there), the diacritics it folds away being
** token characters. The same in SQLite 3.40 and 3.54, and for every argument of
** unicode61 but tokenchars and separators; tests/test_cjk.py checks every code
** point against the running SQLite. Surrogates cannot be decoded (U+FFFD). */
static const unsigned kUnicode61Separators[][2] = {
    {0x80, 0xA9},       {0xAB, 0xB1},       {0xB4, 0xB4},       {0xB6, 0xB8},
    {0xBB, 0xBB},       {0xBF, 0xBF},       {0xD7, 0xD7},       {0xF7, 0xF7},
    {0x2C2, 0x2C5},     {0x2D2, 0x2DF},     {0x2E5, 0x2EB},     {0x2ED, 0x2ED},
    {0x2EF, 0x2FF},     {0x305, 0x305},     {0x30D, 0x30E},     {0x310, 0x310},
    {0x312, 0x31A},     {0x31C, 0x322},     {0x329, 0x32C},     {0x32F, 0x32F},
    {0x332, 0x36F},     {0x375, 0x375},     {0x37E, 0x37E},     {0x384, 0x385},
    {0x387, 0x387},     {0x3F6, 0x3F6},     {0x482, 0x489},     {0x55A, 0x55F},
    {0x589, 0x58A},     {0x58F, 0x58F},     {0x591, 0x5C7},     {0x5F3, 0x5F4},
    {0x600, 0x604},     {0x606, 0x61B},     {0x61E, 0x61F},     {0x64B, 0x65F},
    {0x66A, 0x66D},     {0x670, 0x670},     {0x6D4, 0x6D4},     {0x6D6, 0x6E4},
    {0x6E7, 0x6ED},     {0x6FD, 0x6FE},     {0x700, 0x70D},     {0x70F, 0x70F},
    {0x711, 0x711},     {0x730, 0x74A},     {0x7A6, 0x7B0},     {0x7EB, 0x7F3},
    {0x7F6, 0x7F9},     {0x816, 0x819},     {0x81B, 0x823},     {0x825, 0x827},
    {0x829, 0x82D},     {0x830, 0x83E},     {0x859, 0x85B},     {0x85E, 0x85E},
    {0x8E4, 0x8FE},     {0x900, 0x903},     {0x93A, 0x93C},     {0x93E, 0x94F},
    {0x951, 0x957},     {0x962, 0x965},     {0x970, 0x970},     {0x981, 0x983},
    {0x9BC, 0x9BC},     {0x9BE, 0x9C4},     {0x9C7, 0x9C8},     {0x9CB, 0x9CD},
    {0x9D7, 0x9D7},     {0x9E2, 0x9E3},     {0x9F2, 0x9F3},     {0x9FA, 0x9FB},
    {0xA01, 0xA03},     {0xA3C, 0xA3C},     {0xA3E, 0xA42},     {0xA47, 0xA48},
    {0xA4B, 0xA4D},     {0xA51, 0xA51},     {0xA70, 0xA71},     {0xA75, 0xA75},
    {0xA81, 0xA83},     {0xABC, 0xABC},     {0xABE, 0xAC5},     {0xAC7, 0xAC9},
    {0xACB, 0xACD},     {0xAE2, 0xAE3},     {0xAF0, 0xAF1},     {0xB01, 0xB03},
    {0xB3C, 0xB3C},     {0xB3E, 0xB44},     {0xB47, 0xB48},     {0xB4B, 0xB4D},
    {0xB56, 0xB57},     {0xB62, 0xB63},     {0xB70, 0xB70},     {0xB82, 0xB82},
    {0xBBE, 0xBC2},     {0xBC6, 0xBC8},     {0xBCA, 0xBCD},     {0xBD7, 0xBD7},
    {0xBF3, 0xBFA},     {0xC01, 0xC03},     {0xC3E, 0xC44},     {0xC46, 0xC48},
    {0xC4A, 0xC4D},     {0xC55, 0xC56},     {0xC62, 0xC63},     {0xC7F, 0xC7F},
    {0xC82, 0xC83},     {0xCBC, 0xCBC},     {0xCBE, 0xCC4},     {0xCC6, 0xCC8},
    {0xCCA, 0xCCD},     {0xCD5, 0xCD6},     {0xCE2, 0xCE3},     {0xD02, 0xD03},
    {0xD3E, 0xD44},     {0xD46, 0xD48},     {0xD4A, 0xD4D},     {0xD57, 0xD57},
    {0xD62, 0xD63},     {0xD79, 0xD79},     {0xD82, 0xD83},     {0xDCA, 0xDCA},
    {0xDCF, 0xDD4},     {0xDD6, 0xDD6},     {0xDD8, 0xDDF},     {0xDF2, 0xDF4},
    {0xE31, 0xE31},     {0xE34, 0xE3A},     {0xE3F, 0xE3F},     {0xE47, 0xE4F},
    {0xE5A, 0xE5B},     {0xEB1, 0xEB1},     {0xEB4, 0xEB9},     {0xEBB, 0xEBC},
    {0xEC8, 0xECD},     {0xF01, 0xF1F},     {0xF34, 0xF3F},     {0xF71, 0xF87},
    {0xF8D, 0xF97},     {0xF99, 0xFBC},     {0xFBE, 0xFCC},     {0xFCE, 0xFDA},
    {0x102B, 0x103E},   {0x104A, 0x104F},   {0x1056, 0x1059},   {0x105E, 0x1060},
    {0x1062, 0x1064},   {0x1067, 0x106D},   {0x1071, 0x1074},   {0x1082, 0x108D},
    {0x108F, 0x108F},   {0x109A, 0x109F},   {0x10FB, 0x10FB},   {0x135D, 0x1368},
    {0x1390, 0x1399},   {0x1400, 0x1400},   {0x166D, 0x166E},   {0x1680, 0x1680},
    {0x169B, 0x169C},   {0x16EB, 0x16ED},   {0x1712, 0x1714},   {0x1732, 0x1736},
    {0x1752, 0x1753},   {0x1772, 0x1773},   {0x17B4, 0x17D6},   {0x17D8, 0x17DB},
    {0x17DD, 0x17DD},   {0x1800, 0x180E},   {0x18A9, 0x18A9},   {0x1920, 0x192B},
    {0x1930, 0x193B},   {0x1940, 0x1940},   {0x1944, 0x1945},   {0x19B0, 0x19C0},
    {0x19C8, 0x19C9},   {0x19DE, 0x19FF},   {0x1A17, 0x1A1B},   {0x1A1E, 0x1A1F},
    {0x1A55, 0x1A5E},   {0x1A60, 0x1A7C},   {0x1A7F, 0x1A7F},   {0x1AA0, 0x1AA6},
    {0x1AA8, 0x1AAD},   {0x1B00, 0x1B04},   {0x1B34, 0x1B44},   {0x1B5A, 0x1B7C},
    {0x1B80, 0x1B82},   {0x1BA1, 0x1BAD},   {0x1BE6, 0x1BF3},   {0x1BFC, 0x1BFF},
    {0x1C24, 0x1C37},   {0x1C3B, 0x1C3F},   {0x1C7E, 0x1C7F},   {0x1CC0, 0x1CC7},
    {0x1CD0, 0x1CE8},   {0x1CED, 0x1CED},   {0x1CF2, 0x1CF4},   {0x1DC0, 0x1DE6},
    {0x1DFC, 0x1DFF},   {0x1FBD, 0x1FBD},   {0x1FBF, 0x1FC1},   {0x1FCD, 0x1FCF},
    {0x1FDD, 0x1FDF},   {0x1FED, 0x1FEF},   {0x1FFD, 0x1FFE},   {0x2000, 0x2064},
    {0x206A, 0x206F},   {0x207A, 0x207E},   {0x208A, 0x208E},   {0x20A0, 0x20B9},
    {0x20D0, 0x20F0},   {0x2100, 0x2101},   {0x2103, 0x2106},   {0x2108, 0x2109},
    {0x2114, 0x2114},   {0x2116, 0x2118},   {0x211E, 0x2123},   {0x2125, 0x2125},
    {0x2127, 0x2127},   {0x2129, 0x2129},   {0x212E, 0x212E},   {0x213A, 0x213B},
    {0x2140, 0x2144},   {0x214A, 0x214D},   {0x214F, 0x214F},   {0x2190, 0x23F3},
    {0x2400, 0x2426},   {0x2440, 0x244A},   {0x249C, 0x24E9},   {0x2500, 0x26FF},
    {0x2701, 0x2775},   {0x2794, 0x2B4C},   {0x2B50, 0x2B59},   {0x2CE5, 0x2CEA},
    {0x2CEF, 0x2CF1},   {0x2CF9, 0x2CFC},   {0x2CFE, 0x2CFF},   {0x2D70, 0x2D70},
    {0x2D7F, 0x2D7F},   {0x2DE0, 0x2E2E},   {0x2E30, 0x2E3B},   {0x2E80, 0x2E99},
    {0x2E9B, 0x2EF3},   {0x2F00, 0x2FD5},   {0x2FF0, 0x2FFB},   {0x3000, 0x3004},
    {0x3008, 0x3020},   {0x302A, 0x3030},   {0x3036, 0x3037},   {0x303D, 0x303F},
    {0x3099, 0x309C},   {0x30A0, 0x30A0},   {0x30FB, 0x30FB},   {0x3190, 0x3191},
    {0x3196, 0x319F},   {0x31C0, 0x31E3},   {0x3200, 0x321E},   {0x322A, 0x3247},
    {0x3250, 0x3250},   {0x3260, 0x327F},   {0x328A, 0x32B0},   {0x32C0, 0x32FE},
    {0x3300, 0x33FF},   {0x4DC0, 0x4DFF},   {0xA490, 0xA4C6},   {0xA4FE, 0xA4FF},
    {0xA60D, 0xA60F},   {0xA66F, 0xA67E},   {0xA69F, 0xA69F},   {0xA6F0, 0xA6F7},
    {0xA700, 0xA716},   {0xA720, 0xA721},   {0xA789, 0xA78A},   {0xA802, 0xA802},
    {0xA806, 0xA806},   {0xA80B, 0xA80B},   {0xA823, 0xA82B},   {0xA836, 0xA839},
    {0xA874, 0xA877},   {0xA880, 0xA881},   {0xA8B4, 0xA8C4},   {0xA8CE, 0xA8CF},
    {0xA8E0, 0xA8F1},   {0xA8F8, 0xA8FA},   {0xA926, 0xA92F},   {0xA947, 0xA953},
    {0xA95F, 0xA95F},   {0xA980, 0xA983},   {0xA9B3, 0xA9CD},   {0xA9DE, 0xA9DF},
    {0xAA29, 0xAA36},   {0xAA43, 0xAA43},   {0xAA4C, 0xAA4D},   {0xAA5C, 0xAA5F},
    {0xAA77, 0xAA79},   {0xAA7B, 0xAA7B},   {0xAAB0, 0xAAB0},   {0xAAB2, 0xAAB4},
    {0xAAB7, 0xAAB8},   {0xAABE, 0xAABF},   {0xAAC1, 0xAAC1},   {0xAADE, 0xAADF},
    {0xAAEB, 0xAAF1},   {0xAAF5, 0xAAF6},   {0xABE3, 0xABED},   {0xFB1E, 0xFB1E},
    {0xFB29, 0xFB29},   {0xFBB2, 0xFBC1},   {0xFD3E, 0xFD3F},   {0xFDFC, 0xFDFD},
    {0xFE00, 0xFE19},   {0xFE20, 0xFE26},   {0xFE30, 0xFE52},   {0xFE54, 0xFE66},
    {0xFE68, 0xFE6B},   {0xFEFF, 0xFEFF},   {0xFF01, 0xFF0F},   {0xFF1A, 0xFF20},
    {0xFF3B, 0xFF40},   {0xFF5B, 0xFF65},   {0xFFE0, 0xFFE6},   {0xFFE8, 0xFFEE},
    {0xFFF9, 0xFFFF},   {0x10100, 0x10102}, {0x10137, 0x1013F}, {0x10179, 0x10189},
    {0x10190, 0x1019B}, {0x101D0, 0x101FD}, {0x1039F, 0x1039F}, {0x103D0, 0x103D0},
    {0x10857, 0x10857}, {0x1091F, 0x1091F}, {0x1093F, 0x1093F}, {0x10A01, 0x10A03},
    {0x10A05, 0x10A06}, {0x10A0C, 0x10A0F}, {0x10A38, 0x10A3A}, {0x10A3F, 0x10A3F},
    {0x10A50, 0x10A58}, {0x10A7F, 0x10A7F}, {0x10B39, 0x10B3F}, {0x11000, 0x11002},
    {0x11038, 0x1104D}, {0x11080, 0x11082}, {0x110B0, 0x110C1}, {0x11100, 0x11102},
    {0x11127, 0x11134}, {0x11140, 0x11143}, {0x11180, 0x11182}, {0x111B3, 0x111C0},
    {0x111C5, 0x111C8}, {0x116AB, 0x116B7}, {0x12470, 0x12473}, {0x16F51, 0x16F7E},
    {0x16F8F, 0x16F92}, {0x1D000, 0x1D0F5}, {0x1D100, 0x1D126}, {0x1D129, 0x1D1DD},
    {0x1D200, 0x1D245}, {0x1D300, 0x1D356}, {0x1D6C1, 0x1D6C1}, {0x1D6DB, 0x1D6DB},
    {0x1D6FB, 0x1D6FB}, {0x1D715, 0x1D715}, {0x1D735, 0x1D735}, {0x1D74F, 0x1D74F},
    {0x1D76F, 0x1D76F}, {0x1D789, 0x1D789}, {0x1D7A9, 0x1D7A9}, {0x1D7C3, 0x1D7C3},
    {0x1EEF0, 0x1EEF1}, {0x1F000, 0x1F02B}, {0x1F030, 0x1F093}, {0x1F0A0, 0x1F0AE},
    {0x1F0B1, 0x1F0BE}, {0x1F0C1, 0x1F0CF}, {0x1F0D1, 0x1F0DF}, {0x1F110, 0x1F12E},
    {0x1F130, 0x1F16B}, {0x1F170, 0x1F19A}, {0x1F1E6, 0x1F202}, {0x1F210, 0x1F23A},
    {0x1F240, 0x1F248}, {0x1F250, 0x1F251}, {0x1F300, 0x1F320}, {0x1F330, 0x1F335},
    {0x1F337, 0x1F37C}, {0x1F380, 0x1F393}, {0x1F3A0, 0x1F3C4}, {0x1F3C6, 0x1F3CA},
    {0x1F3E0, 0x1F3F0}, {0x1F400, 0x1F43E}, {0x1F440, 0x1F440}, {0x1F442, 0x1F4F7},
    {0x1F4F9, 0x1F4FC}, {0x1F500, 0x1F53D}, {0x1F540, 0x1F543}, {0x1F550, 0x1F567},
    {0x1F5FB, 0x1F640}, {0x1F645, 0x1F64F}, {0x1F680, 0x1F6C5}, {0x1F700, 0x1F773},
    {0xE0001, 0xE0001}, {0xE0020, 0xE007F}, {0xE0100, 0xE01EF}};

/* Q2: is this code point part of a token? */
static int is_token_char(unsigned cp) {
  if (cp < 0x80) {
    return (cp >= '0' && cp <= '9') || (cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z');
  }
  if (cp == 0xFFFD) return 0; /* invalid UTF-8 (and U+FFFD, a separator) */
  if (rrf_is_cjk(cp)) return 1; /* Q16: any character of a CJK run */
  int lo = 0, hi = (int)(sizeof kUnicode61Separators / sizeof kUnicode61Separators[0]) - 1;
  while (lo <= hi) { /* binary search */
    int mid = (lo + hi) / 2;
    if (cp < kUnicode61Separators[mid][0]) hi = mid - 1;
    else if (cp > kUnicode61Separators[mid][1]) lo = mid + 1;
    else return 0;
  }
  return 1;
}

/* ---------------------------------------------------------------- the plan (Q2..Q12, Q15) */

/* Q4, Q7: add the token s[start, start + n) unless seen; returns the new count. */
static int add_token(const unsigned char *s, int start, int n, RrfSpan *toks, int ntok,
                     RrfSpanSet *seen) {
  if (rrf_spanset_find(seen, s, toks, s + start, n) >= 0) return ntok; /* Q4 */
  toks[ntok].start = start;
  toks[ntok].len = n;
  rrf_spanset_add(seen, s, toks, ntok);
  return ntok + 1;
}

/* Q2, Q4, Q7, Q16: the first RRF_FTS5_MAX_TOKENS distinct tokens of s[0..len), into
** toks (room for RRF_FTS5_MAX_TOKENS), `seen` (empty, nocase) holding them.
** Returns their number. */
static int split_tokens(const unsigned char *s, int len, RrfSpan *toks, RrfSpanSet *seen) {
  int ntok = 0;
  for (int i = 0; i < len && ntok < RRF_FTS5_MAX_TOKENS;) {
    unsigned cp;
    int n = rrf_utf8_decode(s, len, i, &cp);
    if (!is_token_char(cp)) {
      i += n;
      continue;
    }
    int cjk = rrf_is_cjk(cp);
    int start = i, prev = -1; /* prev: where the run's previous character starts */
    while (i < len && ntok < RRF_FTS5_MAX_TOKENS) {
      n = rrf_utf8_decode(s, len, i, &cp);
      if (!is_token_char(cp) || rrf_is_cjk(cp) != cjk) break;
      if (cjk && prev >= 0) /* Q16: the bigram ending here */
        ntok = add_token(s, prev, i + n - prev, toks, ntok, seen);
      prev = i;
      i += n;
    }
    if (ntok >= RRF_FTS5_MAX_TOKENS) break;
    /* a run that is not CJK, or a CJK run of one character: one token */
    if (!cjk || prev == start) ntok = add_token(s, start, i - start, toks, ntok, seen);
  }
  return ntok;
}

void rrf_fts5_plan_free(RrfPlan *plan) {
  if (plan == NULL) return;
  for (int t = 0; t < plan->ntok; t++) sqlite3_free(plan->tok[t].term);
  sqlite3_free(plan->tok);
  sqlite3_free(plan);
}

/* The tokens of s[0..len) (Q2, Q4, Q7) with, when pr has a tokenizer, how each
** tokenizes and whether Q10/Q11 drop it. terms: keep a copy of each single
** term. SQLITE_OK, or an error code with the error set on ctx. */
static int make_plan(sqlite3_context *ctx, const char *fn, const RrfPrune *pr,
                     const unsigned char *s, int len, int terms, RrfPlan **out) {
  RrfSpan *toks = sqlite3_malloc64(sizeof(RrfSpan) * RRF_FTS5_MAX_TOKENS);
  RrfSpanSet seen; /* Q4: the tokens so far */
  RrfPlan *plan = sqlite3_malloc(sizeof *plan);
  int rc = rrf_spanset_init(&seen, RRF_FTS5_MAX_TOKENS, 1);
  *out = NULL;
  if (toks == NULL || rc != SQLITE_OK || plan == NULL) goto nomem;
  memset(plan, 0, sizeof *plan);
  int ntok = split_tokens(s, len, toks, &seen);
  plan->tok = sqlite3_malloc64(sizeof(RrfPlanTok) * (ntok ? (size_t)ntok : 1));
  if (plan->tok == NULL) goto nomem;
  memset(plan->tok, 0, sizeof(RrfPlanTok) * (ntok ? (size_t)ntok : 1));
  plan->ntok = ntok;
  int nkept = 0;
  for (int t = 0; t < ntok; t++) {
    RrfPlanTok *pt = &plan->tok[t];
    pt->start = toks[t].start;
    pt->len = toks[t].len;
    pt->nterm = -1; /* not tokenized */
    if (pr != NULL && pr->tok != NULL) {
      int stop = 0;
      rc = rrf_token_terms(pr, s + pt->start, pt->len, &pt->nterm, &stop, terms ? &pt->term : NULL,
                           &pt->nbytes);
      if (rc == SQLITE_NOMEM) goto nomem;
      if (rc != SQLITE_OK) {
        char buf[64];
        rrf_error(ctx, "%s: the FTS5 tokenizer '%s' failed (%s)", fn,
                  pr->nspec
                      ? rrf_shown((const unsigned char *)pr->spec, pr->nspec, buf, RRF_SHOWN_MAX)
                      : "unicode61",
                  sqlite3_errstr(rc));
        goto done;
      }
      pt->stop = stop; /* Q10 */
      pt->drop = stop;
    }
    if (!pt->drop) nkept++;
  }
  if (nkept == 0) /* Q11 */
    for (int t = 0; t < ntok; t++) plan->tok[t].drop = 0;
  for (int t = 0; t < ntok; t++) plan->ndrop += plan->tok[t].drop;
  *out = plan;
  plan = NULL;
  goto done;
nomem:
  rc = SQLITE_NOMEM;
  sqlite3_result_error_nomem(ctx);
done:
  sqlite3_free(toks);
  rrf_spanset_free(&seen);
  rrf_fts5_plan_free(plan);
  return rc;
}

int rrf_fts5_plan(sqlite3_context *ctx, const char *fn, fts5_api *api, sqlite3_value *text,
                  sqlite3_value *stop, sqlite3_value *tokenize, RrfPlan **out) {
  *out = NULL;
  int ttype = sqlite3_value_type(text);
  if (ttype != SQLITE_TEXT && ttype != SQLITE_INTEGER && ttype != SQLITE_FLOAT) { /* Q6 */
    rrf_error(ctx, "%s: text must be TEXT, got %s", fn, rrf_type_name(text));
    return SQLITE_ERROR;
  }
  if (rrf_fts5_check_types(ctx, fn, stop, tokenize) != SQLITE_OK) return SQLITE_ERROR;
  RrfPrune *pr = rrf_prune_make(ctx, fn, api, NULL, stop, tokenize, 0);
  if (pr == NULL) return SQLITE_ERROR;
  const unsigned char *s = sqlite3_value_text(text);
  int len = sqlite3_value_bytes(text);
  int rc;
  if (s == NULL) {
    sqlite3_result_error_nomem(ctx);
    rc = SQLITE_NOMEM;
  } else {
    rc = make_plan(ctx, fn, pr, s, len, 1, out);
  }
  rrf_prune_free(pr);
  return rc;
}

/* Q15: append s[0..n) as a JSON string. */
static void json_string(sqlite3_str *out, const char *s, int n) {
  static const char hex[] = "0123456789abcdef";
  sqlite3_str_appendchar(out, 1, '"');
  for (int i = 0; i < n; i++) {
    unsigned char c = (unsigned char)s[i];
    if (c == '"' || c == '\\') {
      sqlite3_str_appendchar(out, 1, '\\');
      sqlite3_str_appendchar(out, 1, (char)c);
    } else if (c < 0x20) {
      char esc[6] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15]};
      sqlite3_str_append(out, esc, 6);
    } else {
      sqlite3_str_appendchar(out, 1, (char)c);
    }
  }
  sqlite3_str_appendchar(out, 1, '"');
}

void rrf_fts5_query(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
  const char *joiner = " OR ";
  int terms_mode = 0;
  sqlite3_str *out = NULL;
  RrfPrune *pr = NULL;
  RrfPlan *plan = NULL;
  int pr_fresh = 0; /* pr made by this call (else it is SQLite's auxdata) */
  int aux_arg = argc > 2 ? 2 : 1; /* where pr is kept */

  if (sqlite3_value_type(argv[0]) == SQLITE_NULL) { /* Q6 */
    sqlite3_result_null(ctx);
    return;
  }
  if (sqlite3_value_type(argv[0]) == SQLITE_BLOB) {
    rrf_error(ctx, "fts5_query: text must be TEXT, got BLOB");
    return;
  }
  if (argc > 1 && sqlite3_value_type(argv[1]) != SQLITE_NULL) { /* Q1 */
    /* The type before sqlite3_value_text(), which turns a BLOB or number into TEXT. */
    int is_text = sqlite3_value_type(argv[1]) == SQLITE_TEXT;
    const unsigned char *m = sqlite3_value_text(argv[1]);
    int mlen = sqlite3_value_bytes(argv[1]);
    if (is_text && m && mlen == 2 && rrf_ascii_ieq(m, (const unsigned char *)"or", 2)) {
      joiner = " OR ";
    } else if (is_text && m && mlen == 3 && rrf_ascii_ieq(m, (const unsigned char *)"and", 3)) {
      joiner = " AND ";
    } else if (is_text && m && mlen == 5 && rrf_ascii_ieq(m, (const unsigned char *)"terms", 5)) {
      terms_mode = 1;
    } else {
      rrf_error(ctx, "fts5_query: mode must be 'or', 'and' or 'terms'");
      return;
    }
  }
  if (rrf_fts5_check_types(ctx, "fts5_query", argc > 2 ? argv[2] : NULL, argc > 3 ? argv[3] : NULL))
    return; /* Q8, Q9 */
  if ((argc > 2 && sqlite3_value_type(argv[2]) == SQLITE_TEXT) || terms_mode) { /* Q8, Q13 */
    RrfPrune *cached = sqlite3_get_auxdata(ctx, aux_arg);
    pr = rrf_prune_make(ctx, "fts5_query", NULL, cached, argc > 2 ? argv[2] : NULL,
                        argc > 3 ? argv[3] : NULL, terms_mode);
    if (pr == NULL) return; /* error set; a cached pr stays SQLite's */
    pr_fresh = pr != cached;
  }

  const unsigned char *s = sqlite3_value_text(argv[0]);
  int len = sqlite3_value_bytes(argv[0]);
  if (s == NULL) goto nomem;
  if (make_plan(ctx, "fts5_query", pr, s, len, terms_mode, &plan) != SQLITE_OK) goto done;

  out = sqlite3_str_new(NULL); /* no db: rrf_result_str checks the limit (Q6) */
  if (terms_mode) { /* Q15 */
    int nout = 0;
    sqlite3_str_appendchar(out, 1, '[');
    for (int t = 0; t < plan->ntok; t++) {
      const RrfPlanTok *pt = &plan->tok[t];
      if (pt->nterm != 1 || (pr->stop.nwords > 0 && !pt->stop)) continue;
      if (nout++) sqlite3_str_appendchar(out, 1, ',');
      sqlite3_str_appendall(out, "[\"\\\"");
      sqlite3_str_append(out, (const char *)s + pt->start, pt->len); /* Q2: no '"' or '\' */
      sqlite3_str_appendall(out, "\\\"\",");
      json_string(out, pt->term, pt->nbytes);
      sqlite3_str_appendchar(out, 1, ']');
    }
    sqlite3_str_appendchar(out, 1, ']');
  } else if (plan->ntok == 0) { /* Q5 */
    sqlite3_str_appendall(out, "\"\"");
  } else {
    /* Q1, Q3: quote every token kept (no token contains '"', Q2). */
    for (int t = 0, nout = 0; t < plan->ntok; t++) {
      if (plan->tok[t].drop) continue;
      if (nout++) sqlite3_str_appendall(out, joiner);
      sqlite3_str_appendchar(out, 1, '"');
      sqlite3_str_append(out, (const char *)s + plan->tok[t].start, plan->tok[t].len);
      sqlite3_str_appendchar(out, 1, '"');
    }
  }
  rrf_result_str(ctx, out, "fts5_query"); /* Q6: past SQLITE_LIMIT_LENGTH, an error */
  out = NULL;
  goto done;

nomem:
  sqlite3_result_error_nomem(ctx);
done:
  rrf_fts5_plan_free(plan);
  if (out) sqlite3_free(sqlite3_str_finish(out));
  /* Kept for the next row while the argument stays the same (SQLite may free it
  ** at once); set last, since pr may be gone after this call. */
  if (pr_fresh) sqlite3_set_auxdata(ctx, aux_arg, pr, rrf_prune_free);
}
