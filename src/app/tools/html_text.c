/*
 * html_text.c — readable text out of an untrusted HTML page (see html_text.h).
 *
 * One loop over the bytes: text runs, character references and tags. Raw-text
 * elements (script, style, title, ...) are skipped to their end tag at once.
 * Known container elements go on a small stack (unknown and inline ones never
 * do), with the implicit closes that keep it shallow on sloppy pages (a <p>, <li>,
 * <td> or <tr> ends the one before it); an end tag pops to its element only when
 * one is open (a count per tag answers that at once), so every element is pushed
 * and popped once: linear time. Visibility is three counters: skipped elements
 * open, <main> elements open, and sectioning elements open (for the header and
 * footer rule).
 */
#include "app/tools/html_text.h"

#include <pthread.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "lib/arena.h"
#include "lib/common.h"
#include "lib/utf8.h"

/* ------------------------------------------------------------------ tags */

enum {
    F_BLOCK1 = 1 << 0,   /* a line break before and after */
    F_BLOCK2 = 1 << 1,   /* a blank line before and after */
    F_SKIP = 1 << 2,     /* content dropped (always) */
    F_SOFTSKIP = 1 << 3, /* content dropped (not in the lenient pass) */
    F_BANNER = 1 << 4,   /* header/footer: dropped outside sectioning elements */
    F_SECT = 1 << 5,     /* article, section, main */
    F_RAW = 1 << 6,      /* raw text: content skipped to the end tag */
    F_CLOSEP = 1 << 7,   /* opening it closes an open <p> */
    F_VOID = 1 << 8,     /* no content, never pushed */
};

enum {
    T_NONE = 0,
    T_A,
    T_ADDRESS,
    T_ARTICLE,
    T_ASIDE,
    T_AUDIO,
    T_BASE,
    T_BLOCKQUOTE,
    T_BODY,
    T_BR,
    T_BUTTON,
    T_CANVAS,
    T_CAPTION,
    T_CENTER,
    T_DD,
    T_DETAILS,
    T_DIALOG,
    T_DIV,
    T_DL,
    T_DT,
    T_FIELDSET,
    T_FIGCAPTION,
    T_FIGURE,
    T_FOOTER,
    T_FORM,
    T_H1,
    T_H2,
    T_H3,
    T_H4,
    T_H5,
    T_H6,
    T_HEAD,
    T_HEADER,
    T_HGROUP,
    T_HR,
    T_HTML,
    T_IFRAME,
    T_LEGEND,
    T_LI,
    T_LISTING,
    T_MAIN,
    T_MATH,
    T_MENU,
    T_META,
    T_NAV,
    T_NOEMBED,
    T_NOFRAMES,
    T_NOSCRIPT,
    T_OBJECT,
    T_OL,
    T_OPTION,
    T_P,
    T_PLAINTEXT,
    T_PRE,
    T_SCRIPT,
    T_SECTION,
    T_SELECT,
    T_STYLE,
    T_SUMMARY,
    T_SVG,
    T_TABLE,
    T_TBODY,
    T_TD,
    T_TEMPLATE,
    T_TEXTAREA,
    T_TFOOT,
    T_TH,
    T_THEAD,
    T_TITLE,
    T_TR,
    T_UL,
    T_VIDEO,
    T_XMP,
    T_COUNT
};

struct tagdef {
    const char *name;
    int tag;
    unsigned flags;
};

/* sorted by name (bsearch) */
static const struct tagdef tagdefs[] = {
    {"a", T_A, 0},
    {"address", T_ADDRESS, F_BLOCK2 | F_CLOSEP},
    {"article", T_ARTICLE, F_BLOCK2 | F_CLOSEP | F_SECT},
    {"aside", T_ASIDE, F_BLOCK2 | F_CLOSEP | F_SOFTSKIP},
    {"audio", T_AUDIO, F_SKIP},
    {"base", T_BASE, F_VOID},
    {"blockquote", T_BLOCKQUOTE, F_BLOCK2 | F_CLOSEP},
    {"body", T_BODY, F_BLOCK2},
    {"br", T_BR, F_VOID},
    {"button", T_BUTTON, F_SOFTSKIP},
    {"canvas", T_CANVAS, F_SKIP},
    {"caption", T_CAPTION, F_BLOCK1},
    {"center", T_CENTER, F_BLOCK1 | F_CLOSEP},
    {"dd", T_DD, F_BLOCK1 | F_CLOSEP},
    {"details", T_DETAILS, F_BLOCK2 | F_CLOSEP},
    {"dialog", T_DIALOG, F_BLOCK2 | F_CLOSEP},
    {"div", T_DIV, F_BLOCK1 | F_CLOSEP},
    {"dl", T_DL, F_BLOCK2 | F_CLOSEP},
    {"dt", T_DT, F_BLOCK1 | F_CLOSEP},
    {"fieldset", T_FIELDSET, F_BLOCK2 | F_CLOSEP},
    {"figcaption", T_FIGCAPTION, F_BLOCK1 | F_CLOSEP},
    {"figure", T_FIGURE, F_BLOCK2 | F_CLOSEP},
    {"footer", T_FOOTER, F_BLOCK2 | F_CLOSEP | F_BANNER},
    {"form", T_FORM, F_BLOCK2 | F_CLOSEP | F_SOFTSKIP},
    {"h1", T_H1, F_BLOCK2 | F_CLOSEP},
    {"h2", T_H2, F_BLOCK2 | F_CLOSEP},
    {"h3", T_H3, F_BLOCK2 | F_CLOSEP},
    {"h4", T_H4, F_BLOCK2 | F_CLOSEP},
    {"h5", T_H5, F_BLOCK2 | F_CLOSEP},
    {"h6", T_H6, F_BLOCK2 | F_CLOSEP},
    {"head", T_HEAD, 0},
    {"header", T_HEADER, F_BLOCK2 | F_CLOSEP | F_BANNER},
    {"hgroup", T_HGROUP, F_BLOCK2 | F_CLOSEP},
    {"hr", T_HR, F_VOID | F_CLOSEP},
    {"html", T_HTML, 0},
    {"iframe", T_IFRAME, F_RAW},
    {"legend", T_LEGEND, F_BLOCK1},
    {"li", T_LI, F_BLOCK1 | F_CLOSEP},
    {"listing", T_LISTING, F_BLOCK2 | F_CLOSEP},
    {"main", T_MAIN, F_BLOCK2 | F_CLOSEP | F_SECT},
    {"math", T_MATH, F_SKIP},
    {"menu", T_MENU, F_BLOCK2 | F_CLOSEP},
    {"meta", T_META, F_VOID},
    {"nav", T_NAV, F_BLOCK2 | F_CLOSEP | F_SOFTSKIP},
    {"noembed", T_NOEMBED, F_RAW},
    {"noframes", T_NOFRAMES, F_RAW},
    {"noscript", T_NOSCRIPT, F_RAW},
    {"object", T_OBJECT, F_SKIP},
    {"ol", T_OL, F_BLOCK2 | F_CLOSEP},
    {"option", T_OPTION, F_BLOCK1},
    {"p", T_P, F_BLOCK2 | F_CLOSEP},
    {"plaintext", T_PLAINTEXT, F_RAW},
    {"pre", T_PRE, F_BLOCK2 | F_CLOSEP},
    {"script", T_SCRIPT, F_RAW},
    {"section", T_SECTION, F_BLOCK2 | F_CLOSEP | F_SECT},
    {"select", T_SELECT, F_SKIP},
    {"style", T_STYLE, F_RAW},
    {"summary", T_SUMMARY, F_BLOCK1 | F_CLOSEP},
    {"svg", T_SVG, F_SKIP},
    {"table", T_TABLE, F_BLOCK2 | F_CLOSEP},
    {"tbody", T_TBODY, 0},
    {"td", T_TD, 0},
    {"template", T_TEMPLATE, F_SKIP},
    {"textarea", T_TEXTAREA, F_RAW},
    {"tfoot", T_TFOOT, 0},
    {"th", T_TH, 0},
    {"thead", T_THEAD, 0},
    {"title", T_TITLE, F_RAW},
    {"tr", T_TR, F_BLOCK1},
    {"ul", T_UL, F_BLOCK2 | F_CLOSEP},
    {"video", T_VIDEO, F_SKIP},
    {"xmp", T_XMP, F_RAW},
};

static int tagdef_cmp(const void *k, const void *e)
{
    return strcmp(k, ((const struct tagdef *)e)->name);
}

static const struct tagdef *tag_find(const char *name)
{
    return bsearch(name, tagdefs, TK_ARRAY_LEN(tagdefs), sizeof tagdefs[0], tagdef_cmp);
}

static unsigned tag_flags[T_COUNT];

static int is_heading(int t)
{
    return t >= T_H1 && t <= T_H6;
}

/* ------------------------------------------------------------- entities */

struct entdef {
    const char *name;
    uint32_t cp;
};

/* Latin-1 160..255, in order: all are "legacy" (recognised without ';'). */
static const char *const latin1_names[96] = {
    "nbsp",   "iexcl",  "cent",   "pound",  "curren", "yen",    "brvbar", "sect",   "uml",
    "copy",   "ordf",   "laquo",  "not",    "shy",    "reg",    "macr",   "deg",    "plusmn",
    "sup2",   "sup3",   "acute",  "micro",  "para",   "middot", "cedil",  "sup1",   "ordm",
    "raquo",  "frac14", "frac12", "frac34", "iquest", "Agrave", "Aacute", "Acirc",  "Atilde",
    "Auml",   "Aring",  "AElig",  "Ccedil", "Egrave", "Eacute", "Ecirc",  "Euml",   "Igrave",
    "Iacute", "Icirc",  "Iuml",   "ETH",    "Ntilde", "Ograve", "Oacute", "Ocirc",  "Otilde",
    "Ouml",   "times",  "Oslash", "Ugrave", "Uacute", "Ucirc",  "Uuml",   "Yacute", "THORN",
    "szlig",  "agrave", "aacute", "acirc",  "atilde", "auml",   "aring",  "aelig",  "ccedil",
    "egrave", "eacute", "ecirc",  "euml",   "igrave", "iacute", "icirc",  "iuml",   "eth",
    "ntilde", "ograve", "oacute", "ocirc",  "otilde", "ouml",   "divide", "oslash", "ugrave",
    "uacute", "ucirc",  "uuml",   "yacute", "thorn",  "yuml"};

static const char *const greek_upper[25] = {
    "Alpha", "Beta",   "Gamma",   "Delta", "Epsilon", "Zeta",    "Eta",  "Theta", "Iota",
    "Kappa", "Lambda", "Mu",      "Nu",    "Xi",      "Omicron", "Pi",   "Rho",   NULL,
    "Sigma", "Tau",    "Upsilon", "Phi",   "Chi",     "Psi",     "Omega"};
static const char *const greek_lower[25] = {
    "alpha", "beta",   "gamma",   "delta", "epsilon", "zeta",    "eta",  "theta", "iota",
    "kappa", "lambda", "mu",      "nu",    "xi",      "omicron", "pi",   "rho",   "sigmaf",
    "sigma", "tau",    "upsilon", "phi",   "chi",     "psi",     "omega"};

static const struct entdef other_ents[] = {
    {"amp", '&'},     {"lt", '<'},      {"gt", '>'},      {"quot", '"'},    {"apos", '\''},
    {"OElig", 338},   {"oelig", 339},   {"Scaron", 352},  {"scaron", 353},  {"Yuml", 376},
    {"fnof", 402},    {"circ", 710},    {"tilde", 732},   {"ensp", 8194},   {"emsp", 8195},
    {"thinsp", 8201}, {"zwnj", 8204},   {"zwj", 8205},    {"lrm", 8206},    {"rlm", 8207},
    {"ndash", 8211},  {"mdash", 8212},  {"lsquo", 8216},  {"rsquo", 8217},  {"sbquo", 8218},
    {"ldquo", 8220},  {"rdquo", 8221},  {"bdquo", 8222},  {"dagger", 8224}, {"Dagger", 8225},
    {"bull", 8226},   {"hellip", 8230}, {"permil", 8240}, {"prime", 8242},  {"Prime", 8243},
    {"lsaquo", 8249}, {"rsaquo", 8250}, {"oline", 8254},  {"frasl", 8260},  {"euro", 8364},
    {"trade", 8482},  {"larr", 8592},   {"uarr", 8593},   {"rarr", 8594},   {"darr", 8595},
    {"harr", 8596},   {"lArr", 8656},   {"uArr", 8657},   {"rArr", 8658},   {"dArr", 8659},
    {"hArr", 8660},   {"forall", 8704}, {"part", 8706},   {"exist", 8707},  {"empty", 8709},
    {"nabla", 8711},  {"isin", 8712},   {"notin", 8713},  {"ni", 8715},     {"prod", 8719},
    {"sum", 8721},    {"minus", 8722},  {"lowast", 8727}, {"radic", 8730},  {"prop", 8733},
    {"infin", 8734},  {"ang", 8736},    {"and", 8743},    {"or", 8744},     {"cap", 8745},
    {"cup", 8746},    {"int", 8747},    {"there4", 8756}, {"sim", 8764},    {"cong", 8773},
    {"asymp", 8776},  {"ne", 8800},     {"equiv", 8801},  {"le", 8804},     {"ge", 8805},
    {"sub", 8834},    {"sup", 8835},    {"nsub", 8836},   {"sube", 8838},   {"supe", 8839},
    {"oplus", 8853},  {"otimes", 8855}, {"perp", 8869},   {"sdot", 8901},   {"lceil", 8968},
    {"rceil", 8969},  {"lfloor", 8970}, {"rfloor", 8971}, {"loz", 9674},    {"spades", 9824},
    {"clubs", 9827},  {"hearts", 9829}, {"diams", 9830},  {"hyphen", 8208}, {"dash", 8208},
    {"nbhy", 8209},   {"check", 10003}, {"star", 9734},   {"starf", 9733},  {"Tab", 9},
    {"NewLine", 10},  {"colon", ':'},   {"sol", '/'},     {"num", '#'},     {"excl", '!'},
    {"quest", '?'},   {"lpar", '('},    {"rpar", ')'},    {"lsqb", '['},    {"rsqb", ']'},
    {"lbrack", '['},  {"rbrack", ']'},  {"lcub", '{'},    {"rcub", '}'},    {"lbrace", '{'},
    {"rbrace", '}'},  {"comma", ','},   {"period", '.'},  {"semi", ';'},    {"equals", '='},
    {"plus", '+'},    {"percnt", '%'},  {"dollar", '$'},  {"commat", '@'},  {"ast", '*'},
    {"bsol", '\\'},   {"verbar", '|'},  {"vert", '|'},    {"lowbar", '_'},  {"grave", '`'},
    {"Hat", '^'},     {"AMP", '&'},     {"LT", '<'},      {"GT", '>'},      {"QUOT", '"'},
    {"COPY", 169},    {"REG", 174},     {"TRADE", 8482},  {"half", 189},
};

struct ent {
    char name[12];
    uint32_t cp;
    int legacy; /* recognised without the ';' */
};

static struct ent ents[96 + 50 + TK_ARRAY_LEN(other_ents)];
static size_t nents;
static pthread_once_t once = PTHREAD_ONCE_INIT;

static int ent_cmp(const void *a, const void *b)
{
    return strcmp(((const struct ent *)a)->name, ((const struct ent *)b)->name);
}

static void add_ent(const char *name, uint32_t cp, int legacy)
{
    TK_ASSERT(nents < TK_ARRAY_LEN(ents) && strlen(name) < sizeof ents[0].name);
    snprintf(ents[nents].name, sizeof ents[nents].name, "%s", name);
    ents[nents].cp = cp;
    ents[nents].legacy = legacy;
    nents++;
}

static void init_tables(void)
{
    for (size_t i = 0; i < 96; i++)
        add_ent(latin1_names[i], 160 + (uint32_t)i, 1);
    for (size_t i = 0; i < 25; i++) {
        if (greek_upper[i])
            add_ent(greek_upper[i], 913 + (uint32_t)i, 0);
        add_ent(greek_lower[i], 945 + (uint32_t)i, 0);
    }
    for (size_t i = 0; i < TK_ARRAY_LEN(other_ents); i++) {
        const char *n = other_ents[i].name;
        int legacy = !strcmp(n, "amp") || !strcmp(n, "lt") || !strcmp(n, "gt") ||
                     !strcmp(n, "quot") || !strcmp(n, "AMP") || !strcmp(n, "LT") ||
                     !strcmp(n, "GT") || !strcmp(n, "QUOT") || !strcmp(n, "COPY") ||
                     !strcmp(n, "REG");
        add_ent(n, other_ents[i].cp, legacy);
    }
    qsort(ents, nents, sizeof ents[0], ent_cmp);
    for (size_t i = 0; i < TK_ARRAY_LEN(tagdefs); i++) {
        if (i > 0) /* the table must stay sorted for bsearch */
            TK_ASSERT(strcmp(tagdefs[i - 1].name, tagdefs[i].name) < 0);
        tag_flags[tagdefs[i].tag] = tagdefs[i].flags;
    }
}

static const struct ent *ent_find(const char *name, size_t len)
{
    struct ent k = {0};
    if (len == 0 || len >= sizeof k.name)
        return NULL;
    memcpy(k.name, name, len);
    k.name[len] = '\0';
    return bsearch(&k, ents, nents, sizeof ents[0], ent_cmp);
}

/* windows-1252 0x80..0x9F (WHATWG); the bytes it leaves undefined map to C1. */
static const uint16_t cp1252_hi[32] = {
    0x20AC, 0x0081, 0x201A, 0x0192, 0x201E, 0x2026, 0x2020, 0x2021, 0x02C6, 0x2030, 0x0160,
    0x2039, 0x0152, 0x008D, 0x017D, 0x008F, 0x0090, 0x2018, 0x2019, 0x201C, 0x201D, 0x2022,
    0x2013, 0x2014, 0x02DC, 0x2122, 0x0161, 0x203A, 0x0153, 0x009D, 0x017E, 0x0178};

static int is_alnum(int c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

static int is_alpha(int c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

static int is_ws(int c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f';
}

/*
 * A character reference at s[0] == '&' (n bytes available). Returns the bytes
 * it spans with *cp set, or 0 when it is not one (the '&' is literal). In an
 * attribute a named reference without ';' followed by [A-Za-z0-9=] stays
 * literal (so "?a=1&copy=2" keeps its query).
 */
static size_t char_ref(const char *s, size_t n, int in_attr, uint32_t *cp)
{
    if (n < 2)
        return 0;
    size_t i = 1;
    if (s[i] == '#') {
        i++;
        int hex = i < n && (s[i] == 'x' || s[i] == 'X');
        if (hex)
            i++;
        size_t start = i;
        uint32_t v = 0;
        for (; i < n; i++) {
            int c = (unsigned char)s[i], d;
            if (c >= '0' && c <= '9')
                d = c - '0';
            else if (hex && c >= 'a' && c <= 'f')
                d = c - 'a' + 10;
            else if (hex && c >= 'A' && c <= 'F')
                d = c - 'A' + 10;
            else
                break;
            v = v > 0x10FFFF ? 0x110000 : v * (hex ? 16u : 10u) + (uint32_t)d;
        }
        if (i == start)
            return 0;
        if (i < n && s[i] == ';')
            i++;
        if (v == 0 || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF))
            v = 0xFFFD;
        else if (v >= 0x80 && v <= 0x9F)
            v = cp1252_hi[v - 0x80];
        *cp = v;
        return i;
    }
    size_t len = 0;
    while (1 + len < n && len < 32 && is_alnum((unsigned char)s[1 + len]))
        len++;
    if (len == 0)
        return 0;
    if (1 + len < n && s[1 + len] == ';') {
        const struct ent *e = ent_find(s + 1, len);
        if (e) {
            *cp = e->cp;
            return len + 2;
        }
    }
    /* without ';': the longest legacy name that starts the run */
    for (size_t k = TK_MIN(len, (size_t)8); k >= 2; k--) {
        const struct ent *e = ent_find(s + 1, k);
        if (!e || !e->legacy)
            continue;
        if (in_attr && 1 + k < n && (is_alnum((unsigned char)s[1 + k]) || s[1 + k] == '='))
            return 0;
        *cp = e->cp;
        return k + 1;
    }
    return 0;
}

/* --------------------------------------------------------------- UTF-8 */

/* Decodes one character of p[0..n) (n >= 1): lib/utf8's decoder, a byte of
 * Windows-1252 where the page is in that encoding, else U+FFFD for one byte. */
static size_t dec_char(const unsigned char *p, size_t n, int cp1252, uint32_t *cp)
{
    unsigned c = p[0];
    if (c < 0x80) {
        *cp = c;
        return 1;
    }
    if (cp1252) {
        *cp = c < 0xA0 ? cp1252_hi[c - 0x80] : c;
        return 1;
    }
    size_t k = tk_utf8_decode((const char *)p, n, cp);
    if (k)
        return k;
    *cp = 0xFFFD;
    return 1;
}

/* Characters never written: NUL, C0 controls but tab/LF/CR, DEL, C1. */
static int dropped_char(uint32_t cp)
{
    return (cp < 0x20 && cp != '\t' && cp != '\n' && cp != '\r') || (cp >= 0x7F && cp < 0xA0);
}

size_t html_text_utf8(const char *s, size_t len, int cp1252, tk_buf *out)
{
    size_t i = 0;
    while (i < len) {
        uint32_t cp;
        size_t k = dec_char((const unsigned char *)s + i, len - i, cp1252, &cp);
        if (!dropped_char(cp)) {
            char e[4];
            if (tk_buf_append(out, e, tk_utf8_encode(cp, e)) != TK_OK)
                return i;
        }
        i += k;
    }
    return i;
}

int html_text_charset_is_1252(const char *cs)
{
    static const char *const labels[] = {
        "ansi_x3.4-1968", "ascii",           "cp1252",     "cp819",     "csisolatin1",
        "ibm819",         "iso-8859-1",      "iso-ir-100", "iso8859-1", "iso88591",
        "iso_8859-1",     "iso_8859-1:1987", "l1",         "latin1",    "us-ascii",
        "windows-1252",   "x-cp1252"};
    if (!cs)
        return 0;
    while (is_ws((unsigned char)*cs) || *cs == '"' || *cs == '\'')
        cs++;
    size_t n = 0;
    while (cs[n] && !is_ws((unsigned char)cs[n]) && cs[n] != '"' && cs[n] != '\'' && cs[n] != ';')
        n++;
    for (size_t i = 0; i < TK_ARRAY_LEN(labels); i++)
        if (strlen(labels[i]) == n && strncasecmp(cs, labels[i], n) == 0)
            return 1;
    return 0;
}

/* --------------------------------------------------------------- state */

struct entry {
    uint8_t tag;
    uint8_t vis;    /* visible when opened: its open effects were applied */
    uint8_t skip;   /* counted in nskip */
    uint8_t main;   /* counted in nmain */
    uint8_t sect;   /* counted in nsect */
    uint8_t fence;  /* a pre whose ``` was written */
    uint16_t count; /* ol: items so far; tr: cells so far */
    int tr;         /* index of the nearest tr at or below, -1 */
    int list;       /* index of the nearest ul/ol at or below, -1 */
    int list_depth; /* ul/ol entries at or below */
    size_t link;    /* a: link number, 0 for none */
};

struct attrs {
    const char *href, *role, *charset, *http_equiv, *content;
    size_t href_len, role_len, charset_len, http_equiv_len, content_len;
    int hidden, aria_hidden;
};

struct ctx {
    const char *s;
    size_t n;
    const html_text_opts *o;
    int cp1252;
    const tk_url *base;
    tk_url base_tag; /* from <base href>, when have_base */
    tk_arena *base_arena;
    int have_base;
    /* the pass */
    int scan;      /* the first pass: find <main>, <meta charset>, <base>; no output */
    int main_only; /* only inside <main> */
    int lenient;   /* soft skips off */
    int has_main;
    char meta_charset[48];
    int stop;
    /* the stack */
    struct entry st[HTML_TEXT_MAX_DEPTH];
    int depth;
    unsigned tag_count[T_COUNT];
    int nskip, nmain, nsect, npre, ncell;
    /* output */
    tk_buf out;
    int truncated;
    int pend_nl, pend_sep, pend_space;
    int after_marker; /* the last thing written was a link marker */
    char prefix[64];
    int pre_skip_nl;
    tk_buf title;
    int have_title;
    /* links */
    html_link *links;
    uint64_t *hashes;
    size_t nlinks, links_cap, links_more, max_links;
    size_t open_link; /* the link of the open <a>, 0 for none */
    char ltext[HTML_TEXT_LINK_TEXT_MAX + 4];
    size_t ltext_len;
    int ltext_space;
};

static int visible(const struct ctx *x)
{
    return !x->scan && x->nskip == 0 && (!x->main_only || x->nmain > 0);
}

static void out_write(struct ctx *x, const char *s, size_t n)
{
    if (x->stop)
        return;
    if (tk_buf_append(&x->out, s, n) != TK_OK) {
        x->truncated = 1;
        x->stop = 1;
    }
}

static char last_char(const struct ctx *x)
{
    return x->out.len ? x->out.data[x->out.len - 1] : '\n';
}

static int trailing_newlines(const struct ctx *x)
{
    int k = 0;
    for (size_t i = x->out.len; i > 0 && k < 2 && x->out.data[i - 1] == '\n'; i--)
        k++;
    return k;
}

/* Writes what is pending before the next visible character. */
static void flush(struct ctx *x)
{
    if (x->out.len > 0) {
        if (x->pend_nl) {
            for (int k = trailing_newlines(x); k < x->pend_nl; k++)
                out_write(x, "\n", 1);
        } else if (x->pend_sep) {
            out_write(x, " | ", 3);
        } else if (x->pend_space && last_char(x) != '\n' && last_char(x) != ' ') {
            out_write(x, " ", 1);
        }
    }
    if (x->prefix[0]) {
        out_write(x, x->prefix, strlen(x->prefix));
        x->prefix[0] = '\0';
    }
    x->pend_nl = x->pend_sep = x->pend_space = 0;
}

static void block(struct ctx *x, int n)
{
    if (x->ncell > 0) {
        x->pend_space = 1;
        return;
    }
    if (x->prefix[0] && x->pend_nl)
        return; /* <li><p>: the item's own break and prefix stand */
    if (n > x->pend_nl)
        x->pend_nl = n;
    x->pend_sep = 0;
    x->pend_space = 0;
}

static void link_text_cp(struct ctx *x, uint32_t cp, int space)
{
    if (space) {
        x->ltext_space = x->ltext_len > 0;
        return;
    }
    char e[4];
    size_t k = tk_utf8_encode(cp, e);
    if (x->ltext_len + k + (size_t)x->ltext_space > HTML_TEXT_LINK_TEXT_MAX)
        return;
    if (x->ltext_space)
        x->ltext[x->ltext_len++] = ' ';
    x->ltext_space = 0;
    memcpy(x->ltext + x->ltext_len, e, k);
    x->ltext_len += k;
}

/* One character of text (decoded). */
static void put_char(struct ctx *x, uint32_t cp)
{
    if (!visible(x) || x->stop)
        return;
    if (cp == 0xA0)
        cp = ' ';
    if (x->npre > 0) {
        if (cp == '\r')
            return;
        if (x->pre_skip_nl) {
            x->pre_skip_nl = 0;
            if (cp == '\n')
                return;
        }
    } else if (is_ws((int)cp)) {
        x->pend_space = 1;
        if (x->open_link)
            link_text_cp(x, cp, 1);
        return;
    }
    if (dropped_char(cp) || cp == '\f')
        return;
    if (x->after_marker && (is_alnum((int)cp) || cp >= 0x80))
        x->pend_space = 1; /* "docs [3] and", not "docs [3]and" */
    x->after_marker = 0;
    flush(x);
    char e[4];
    out_write(x, e, tk_utf8_encode(cp, e));
    if (x->open_link)
        link_text_cp(x, cp, is_ws((int)cp));
}

/* ----------------------------------------------------------------- links */

static uint64_t hash_str(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++)
        h = (h ^ (uint8_t)*s) * 1099511628211ull;
    return h;
}

/* Decodes an attribute value (character references) into out (NUL-terminated);
 * returns its length, or (size_t)-1 when it does not fit. */
static size_t attr_decode(const char *v, size_t len, char *out, size_t outlen)
{
    size_t o = 0;
    for (size_t i = 0; i < len;) {
        uint32_t cp = 0;
        size_t k = v[i] == '&' ? char_ref(v + i, len - i, 1, &cp) : 0;
        char e[4];
        size_t el;
        if (k) {
            el = tk_utf8_encode(cp, e);
            i += k;
        } else {
            e[0] = v[i];
            el = 1;
            i++;
        }
        if (o + el >= outlen)
            return (size_t)-1;
        memcpy(out + o, e, el);
        o += el;
    }
    out[o] = '\0';
    return o;
}

/* An href, trimmed of ASCII whitespace with tabs and newlines removed (as URL
 * parsers do), into out; returns its length or (size_t)-1. */
static size_t href_clean(const char *v, size_t len, char *out, size_t outlen)
{
    char tmp[TK_URL_MAX + 1];
    size_t n = attr_decode(v, len, tmp, sizeof tmp);
    if (n == (size_t)-1)
        return n;
    size_t a = 0, b = n;
    while (a < b && (unsigned char)tmp[a] <= ' ')
        a++;
    while (b > a && (unsigned char)tmp[b - 1] <= ' ')
        b--;
    size_t o = 0;
    for (size_t i = a; i < b; i++) {
        if (tmp[i] == '\t' || tmp[i] == '\n' || tmp[i] == '\r')
            continue;
        if (o + 1 >= outlen)
            return (size_t)-1;
        out[o++] = tmp[i];
    }
    out[o] = '\0';
    return o;
}

/* Resolves an href against the page; returns the normalised URL in a (NULL when
 * it is not an http(s) link worth listing). */
static const char *resolve(struct ctx *x, tk_arena *a, const char *v, size_t len)
{
    char ref[TK_URL_MAX + 1];
    size_t n = href_clean(v, len, ref, sizeof ref);
    if (n == (size_t)-1 || n == 0 || ref[0] == '#')
        return NULL;
    const tk_url *base = x->have_base ? &x->base_tag : x->base;
    tk_url u;
    tk_status st =
        base ? tk_url_resolve(a, base, ref, n, &u, NULL) : tk_url_parse(a, ref, n, &u, NULL);
    return st == TK_OK ? u.href : NULL;
}

/* The number of a link (1-based), adding it; 0 when dropped or over the cap. */
static size_t link_id(struct ctx *x, const char *v, size_t len)
{
    tk_arena *a = tk_arena_new(8 * TK_URL_MAX);
    size_t id = 0;
    const char *url = resolve(x, a, v, len);
    if (!url)
        goto out;
    uint64_t h = hash_str(url);
    for (size_t i = 0; i < x->nlinks; i++) {
        if (x->hashes[i] == h && strcmp(x->links[i].url, url) == 0) {
            id = i + 1;
            goto out;
        }
    }
    if (x->nlinks >= x->max_links) {
        x->links_more++;
        goto out;
    }
    if (x->nlinks == x->links_cap) {
        x->links_cap = x->links_cap ? x->links_cap * 2 : 16;
        x->links = tk_realloc(x->links, x->links_cap * sizeof *x->links);
        x->hashes = tk_realloc(x->hashes, x->links_cap * sizeof *x->hashes);
    }
    x->links[x->nlinks] = (html_link){.url = tk_strdup(url), .text = NULL, .at = SIZE_MAX};
    x->hashes[x->nlinks] = h;
    id = ++x->nlinks;
out:
    tk_arena_free(a);
    return id;
}

/* The marker after a link's text, and the link's text on its first use. */
static void link_close(struct ctx *x, size_t id)
{
    html_link *l = &x->links[id - 1];
    if (x->prefix[0] || x->pend_nl)
        flush(x);
    char m[32];
    int k = snprintf(m, sizeof m, "%s[%zu]",
                     x->out.len && last_char(x) != ' ' && last_char(x) != '\n' ? " " : "", id);
    out_write(x, m, (size_t)k);
    x->pend_space = 0;
    x->after_marker = 1;
    if (!l->text) {
        l->text = tk_strndup(x->ltext, x->ltext_len);
        if (!x->stop)
            l->at = x->out.len;
    }
}

/* ----------------------------------------------------------------- stack */

/* The break around an element: a blank line, or one line break (nested lists
 * stay tight). */
static int break_of(const struct entry *e)
{
    if ((e->tag == T_UL || e->tag == T_OL) && e->list_depth > 1)
        return 1;
    return (tag_flags[e->tag] & F_BLOCK2) ? 2 : 1;
}

static void pop(struct ctx *x)
{
    struct entry *e = &x->st[--x->depth];
    x->tag_count[e->tag]--;
    unsigned f = tag_flags[e->tag];
    if (e->vis && !x->scan) {
        if (e->tag == T_A && e->link)
            link_close(x, e->link);
        if (e->tag == T_PRE || e->tag == T_LISTING) {
            if (e->fence) {
                if (last_char(x) != '\n')
                    out_write(x, "\n", 1);
                out_write(x, "```", 3);
            }
        }
        if (is_heading(e->tag) || e->tag == T_LI || e->tag == T_DD)
            x->prefix[0] = '\0';
        if (f & (F_BLOCK1 | F_BLOCK2))
            block(x, break_of(e));
    }
    if (e->tag == T_A)
        x->open_link = 0;
    if (e->tag == T_PRE || e->tag == T_LISTING)
        x->npre--;
    if (e->tag == T_TD || e->tag == T_TH)
        x->ncell--;
    x->nskip -= e->skip;
    x->nmain -= e->main;
    x->nsect -= e->sect;
}

static void pop_to(struct ctx *x, int tag)
{
    if (x->tag_count[tag] == 0)
        return;
    while (x->depth > 0) {
        int t = x->st[x->depth - 1].tag;
        pop(x);
        if (t == tag)
            return;
    }
}

static int top(const struct ctx *x)
{
    return x->depth ? x->st[x->depth - 1].tag : T_NONE;
}

static int attr_is(const char *v, size_t n, const char *word)
{
    return v && strlen(word) == n && strncasecmp(v, word, n) == 0;
}

static int role_skips(const struct attrs *at)
{
    static const char *const roles[] = {"navigation", "banner", "contentinfo", "complementary",
                                        "search",     "menu",   "menubar",     "toolbar"};
    for (size_t i = 0; i < TK_ARRAY_LEN(roles); i++)
        if (attr_is(at->role, at->role_len, roles[i]))
            return 1;
    return 0;
}

/* The implicit end tags that keep sloppy pages shallow. */
static void implicit_closes(struct ctx *x, int tag)
{
    unsigned f = tag_flags[tag];
    if ((f & F_CLOSEP) && top(x) == T_P)
        pop(x);
    switch (tag) {
    case T_LI:
        if (top(x) == T_LI)
            pop(x);
        break;
    case T_DT:
    case T_DD:
        if (top(x) == T_DT || top(x) == T_DD)
            pop(x);
        break;
    case T_TD:
    case T_TH:
        if (top(x) == T_TD || top(x) == T_TH)
            pop(x);
        break;
    case T_TR:
        if (top(x) == T_TD || top(x) == T_TH)
            pop(x);
        if (top(x) == T_TR)
            pop(x);
        break;
    case T_THEAD:
    case T_TBODY:
    case T_TFOOT:
        if (top(x) == T_TD || top(x) == T_TH)
            pop(x);
        if (top(x) == T_TR)
            pop(x);
        if (top(x) == T_THEAD || top(x) == T_TBODY || top(x) == T_TFOOT)
            pop(x);
        break;
    case T_OPTION:
        if (top(x) == T_OPTION)
            pop(x);
        break;
    case T_A:
        pop_to(x, T_A);
        break;
    default:
        if (is_heading(tag) && is_heading(top(x)))
            pop(x);
        break;
    }
}

static void open_effects(struct ctx *x, struct entry *e, const struct attrs *at)
{
    int t = e->tag;
    unsigned f = tag_flags[t];
    if (f & (F_BLOCK1 | F_BLOCK2))
        block(x, break_of(e));
    if (is_heading(t)) {
        int level = t - T_H1 + 1;
        memset(x->prefix, '#', (size_t)level);
        x->prefix[level] = ' ';
        x->prefix[level + 1] = '\0';
    } else if (t == T_LI) {
        int indent = e->list >= 0 ? x->st[e->list].list_depth - 1 : 0;
        indent = TK_MIN(indent, 8);
        size_t k = 0;
        for (int i = 0; i < indent; i++) {
            x->prefix[k++] = ' ';
            x->prefix[k++] = ' ';
        }
        if (e->list >= 0 && x->st[e->list].tag == T_OL) {
            unsigned num = ++x->st[e->list].count;
            snprintf(x->prefix + k, sizeof x->prefix - k, "%u. ", num);
        } else {
            snprintf(x->prefix + k, sizeof x->prefix - k, "- ");
        }
    } else if (t == T_DD) {
        snprintf(x->prefix, sizeof x->prefix, "  ");
    } else if (t == T_TD || t == T_TH) {
        if (e->tr >= 0 && x->st[e->tr].count++ > 0 && !x->pend_nl)
            x->pend_sep = 1;
    } else if (t == T_PRE || t == T_LISTING) {
        if (x->npre == 0) {
            x->pend_nl = 2;
            flush(x);
            out_write(x, "```\n", 4);
            e->fence = 1;
            x->pre_skip_nl = 1;
        }
    } else if (t == T_A && at->href && !x->o->no_links) {
        e->link = link_id(x, at->href, at->href_len);
        if (e->link) {
            x->open_link = e->link;
            x->ltext_len = 0;
            x->ltext_space = 0;
        }
    }
}

static void push(struct ctx *x, int tag, const struct attrs *at)
{
    implicit_closes(x, tag);
    unsigned f = tag_flags[tag];
    int skip = (f & F_SKIP) || at->hidden || at->aria_hidden;
    if (!x->lenient)
        skip |= (f & F_SOFTSKIP) || ((f & F_BANNER) && x->nsect == 0) || role_skips(at);
    int is_main = tag == T_MAIN || attr_is(at->role, at->role_len, "main");
    if (is_main && !skip)
        x->has_main = 1;
    if (x->depth >= HTML_TEXT_MAX_DEPTH)
        return; /* not tracked: its end tag finds nothing to pop */
    struct entry *e = &x->st[x->depth];
    memset(e, 0, sizeof *e);
    e->tag = (uint8_t)tag;
    e->skip = (uint8_t)skip;
    e->main = (uint8_t)is_main;
    e->sect = (f & F_SECT) != 0;
    const struct entry *parent = x->depth ? &x->st[x->depth - 1] : NULL;
    e->tr = tag == T_TR ? x->depth : parent ? parent->tr : -1;
    e->list = (tag == T_UL || tag == T_OL) ? x->depth : parent ? parent->list : -1;
    e->list_depth = (parent ? parent->list_depth : 0) + (tag == T_UL || tag == T_OL);
    if (tag == T_TABLE)
        e->tr = -1;
    x->depth++;
    x->tag_count[tag]++;
    x->nskip += e->skip;
    x->nmain += e->main;
    x->nsect += e->sect;
    e->vis = (uint8_t)visible(x);
    if (e->vis)
        open_effects(x, e, at);
    if (tag == T_PRE || tag == T_LISTING)
        x->npre++;
    if (tag == T_TD || tag == T_TH)
        x->ncell++;
}

/* ------------------------------------------------------------ tokenizer */

static size_t find_gt(const struct ctx *x, size_t i)
{
    const char *p = memchr(x->s + i, '>', x->n - i);
    return p ? (size_t)(p - x->s) + 1 : x->n;
}

/* Where the end tag </name starts at or after i; n when there is none. */
static size_t find_end_tag(const struct ctx *x, size_t i, const char *name)
{
    size_t nl = strlen(name);
    while (i < x->n) {
        const char *p = memchr(x->s + i, '<', x->n - i);
        if (!p)
            return x->n;
        size_t j = (size_t)(p - x->s);
        if (j + 2 + nl <= x->n && p[1] == '/' && strncasecmp(p + 2, name, nl) == 0 &&
            (j + 2 + nl == x->n || is_ws((unsigned char)p[2 + nl]) || p[2 + nl] == '/' ||
             p[2 + nl] == '>'))
            return j;
        i = j + 1;
    }
    return x->n;
}

/* Parses the attributes from i to the tag's '>'. Returns the index after '>',
 * or UNTERMINATED when the input ends first. */
#define UNTERMINATED SIZE_MAX

static size_t parse_attrs(const struct ctx *x, size_t i, struct attrs *at)
{
    const char *s = x->s;
    size_t n = x->n;
    memset(at, 0, sizeof *at);
    for (;;) {
        while (i < n && (is_ws((unsigned char)s[i]) || s[i] == '/'))
            i++;
        if (i >= n)
            return UNTERMINATED;
        if (s[i] == '>')
            return i + 1;
        size_t ns = i;
        i++; /* the first character may be '=' */
        while (i < n && !is_ws((unsigned char)s[i]) && s[i] != '/' && s[i] != '>' && s[i] != '=')
            i++;
        size_t nl = i - ns;
        while (i < n && is_ws((unsigned char)s[i]))
            i++;
        const char *v = NULL;
        size_t vl = 0;
        if (i < n && s[i] == '=') {
            i++;
            while (i < n && is_ws((unsigned char)s[i]))
                i++;
            if (i < n && (s[i] == '"' || s[i] == '\'')) {
                const char *q = memchr(s + i + 1, s[i], n - i - 1);
                if (!q)
                    return UNTERMINATED;
                v = s + i + 1;
                vl = (size_t)(q - v);
                i = (size_t)(q - s) + 1;
            } else {
                v = s + i;
                while (i < n && !is_ws((unsigned char)s[i]) && s[i] != '>')
                    i++;
                vl = (size_t)(s + i - v);
            }
        }
        const char *name = s + ns;
        if (attr_is(name, nl, "href") && !at->href)
            at->href = v ? v : "", at->href_len = vl;
        else if (attr_is(name, nl, "role") && !at->role)
            at->role = v ? v : "", at->role_len = vl;
        else if (attr_is(name, nl, "hidden"))
            at->hidden = 1;
        else if (attr_is(name, nl, "aria-hidden"))
            at->aria_hidden = attr_is(v, vl, "true");
        else if (attr_is(name, nl, "charset") && !at->charset)
            at->charset = v ? v : "", at->charset_len = vl;
        else if (attr_is(name, nl, "http-equiv") && !at->http_equiv)
            at->http_equiv = v ? v : "", at->http_equiv_len = vl;
        else if (attr_is(name, nl, "content") && !at->content)
            at->content = v ? v : "", at->content_len = vl;
    }
}

static void meta_charset(struct ctx *x, const struct attrs *at)
{
    if (x->meta_charset[0])
        return;
    const char *v = NULL;
    size_t vl = 0;
    if (at->charset) {
        v = at->charset, vl = at->charset_len;
    } else if (at->http_equiv && attr_is(at->http_equiv, at->http_equiv_len, "content-type") &&
               at->content) {
        for (size_t i = 0; i + 8 <= at->content_len; i++) {
            if (strncasecmp(at->content + i, "charset=", 8) == 0) {
                v = at->content + i + 8;
                vl = at->content_len - i - 8;
                break;
            }
        }
    }
    if (!v)
        return;
    snprintf(x->meta_charset, sizeof x->meta_charset, "%.*s", (int)TK_MIN(vl, (size_t)47), v);
    if (!x->meta_charset[0])
        snprintf(x->meta_charset, sizeof x->meta_charset, "-");
}

static void base_href(struct ctx *x, const struct attrs *at)
{
    if (x->have_base || !at->href || !x->base)
        return;
    char ref[TK_URL_MAX + 1];
    size_t n = href_clean(at->href, at->href_len, ref, sizeof ref);
    if (n == (size_t)-1 || n == 0)
        return;
    if (!x->base_arena)
        x->base_arena = tk_arena_new(8 * TK_URL_MAX);
    if (tk_url_resolve(x->base_arena, x->base, ref, n, &x->base_tag, NULL) == TK_OK)
        x->have_base = 1;
}

/* The <title>: RCDATA from i to its end tag. */
static void title_text(struct ctx *x, size_t i, size_t end)
{
    if (x->have_title || x->nskip > 0 || x->scan)
        return;
    x->have_title = 1;
    int space = 0;
    while (i < end) {
        uint32_t cp;
        size_t k = x->s[i] == '&' ? char_ref(x->s + i, end - i, 0, &cp) : 0;
        if (!k)
            k = dec_char((const unsigned char *)x->s + i, end - i, x->cp1252, &cp);
        i += k;
        if (is_ws((int)cp) || cp == 0xA0) {
            space = x->title.len > 0;
            continue;
        }
        if (dropped_char(cp))
            continue;
        char e[5];
        size_t el = 0;
        if (space)
            e[el++] = ' ';
        el += tk_utf8_encode(cp, e + el);
        if (tk_buf_append(&x->title, e, el) != TK_OK)
            return;
        space = 0;
    }
}

static size_t start_tag(struct ctx *x, size_t i)
{
    /* s[i] == '<', s[i+1] is a letter */
    size_t ns = i + 1, j = ns;
    while (j < x->n && !is_ws((unsigned char)x->s[j]) && x->s[j] != '/' && x->s[j] != '>')
        j++;
    char name[16];
    size_t nl = j - ns;
    const struct tagdef *d = NULL;
    if (nl < sizeof name) {
        for (size_t k = 0; k < nl; k++) {
            char c = x->s[ns + k];
            name[k] = (char)(c >= 'A' && c <= 'Z' ? c + 32 : c);
        }
        name[nl] = '\0';
        d = tag_find(name);
    }
    struct attrs at;
    size_t after = parse_attrs(x, j, &at);
    if (after == UNTERMINATED)
        return x->n; /* a tag cut by the end of the input: dropped */
    if (!d)
        return after;
    int t = d->tag;
    if (t == T_META) {
        if (x->scan)
            meta_charset(x, &at);
        return after;
    }
    if (t == T_BASE) {
        if (x->scan)
            base_href(x, &at);
        return after;
    }
    if (t == T_BR) {
        if (visible(x)) {
            if (x->npre > 0) {
                flush(x);
                out_write(x, "\n", 1);
            } else if (x->ncell > 0) {
                x->pend_space = 1;
            } else {
                x->pend_nl = TK_MIN(2, x->pend_nl + 1);
            }
        }
        return after;
    }
    if (t == T_HR) {
        if (top(x) == T_P)
            pop(x);
        if (visible(x))
            block(x, 2);
        return after;
    }
    if (d->flags & F_RAW) {
        if (t == T_PLAINTEXT)
            return x->n;
        size_t end = find_end_tag(x, after, d->name);
        if (t == T_TITLE)
            title_text(x, after, end);
        return end >= x->n ? x->n : find_gt(x, end);
    }
    push(x, t, &at);
    return after;
}

static size_t end_tag(struct ctx *x, size_t i)
{
    /* s[i] == '<', s[i+1] == '/', s[i+2] is a letter */
    size_t ns = i + 2, j = ns;
    while (j < x->n && !is_ws((unsigned char)x->s[j]) && x->s[j] != '/' && x->s[j] != '>')
        j++;
    struct attrs at;
    size_t after = parse_attrs(x, j, &at);
    if (after == UNTERMINATED)
        return x->n;
    char name[16];
    size_t nl = j - ns;
    if (nl >= sizeof name)
        return after;
    for (size_t k = 0; k < nl; k++) {
        char c = x->s[ns + k];
        name[k] = (char)(c >= 'A' && c <= 'Z' ? c + 32 : c);
    }
    name[nl] = '\0';
    const struct tagdef *d = tag_find(name);
    if (!d)
        return after;
    if (d->tag == T_BR) { /* </br> is a <br> */
        if (visible(x) && x->npre == 0 && x->ncell == 0)
            x->pend_nl = TK_MIN(2, x->pend_nl + 1);
        return after;
    }
    pop_to(x, d->tag);
    return after;
}

static size_t markup(struct ctx *x, size_t i)
{
    const char *s = x->s;
    size_t n = x->n;
    if (i + 1 >= n) {
        put_char(x, '<');
        return n;
    }
    char c = s[i + 1];
    if (c == '!') {
        if (i + 3 < n && s[i + 2] == '-' && s[i + 3] == '-') {
            if (i + 4 < n && s[i + 4] == '>')
                return i + 5; /* <!--> */
            if (i + 5 < n && s[i + 4] == '-' && s[i + 5] == '>')
                return i + 6; /* <!---> */
            const char *p = memmem(s + i + 4, n - i - 4, "-->", 3);
            return p ? (size_t)(p - s) + 3 : n;
        }
        return find_gt(x, i + 2);
    }
    if (c == '?')
        return find_gt(x, i + 2);
    if (c == '/') {
        if (i + 2 < n && is_alpha((unsigned char)s[i + 2]))
            return end_tag(x, i);
        if (i + 2 < n && s[i + 2] == '>')
            return i + 3;
        return find_gt(x, i + 2);
    }
    if (is_alpha((unsigned char)c))
        return start_tag(x, i);
    put_char(x, '<');
    return i + 1;
}

static void run(struct ctx *x)
{
    const char *s = x->s;
    size_t n = x->n, i = 0;
    while (i < n && !x->stop) {
        char c = s[i];
        if (c == '<') {
            i = markup(x, i);
            continue;
        }
        if (!visible(x)) { /* nothing to write: on to the next tag */
            const char *p = memchr(s + i, '<', n - i);
            i = p ? (size_t)(p - s) : n;
            continue;
        }
        uint32_t cp;
        size_t k = c == '&' ? char_ref(s + i, n - i, 0, &cp) : 0;
        if (!k)
            k = dec_char((const unsigned char *)s + i, n - i, x->cp1252, &cp);
        put_char(x, cp);
        i += k;
    }
    while (x->depth > 0)
        pop(x);
}

/* ---------------------------------------------------------------- passes */

static void pass_reset(struct ctx *x)
{
    x->stop = 0;
    x->depth = 0;
    memset(x->tag_count, 0, sizeof x->tag_count);
    x->nskip = x->nmain = x->nsect = x->npre = x->ncell = 0;
    tk_buf_reset(&x->out);
    x->truncated = 0;
    x->pend_nl = x->pend_sep = x->pend_space = 0;
    x->after_marker = 0;
    x->prefix[0] = '\0';
    x->pre_skip_nl = 0;
    tk_buf_reset(&x->title);
    x->have_title = 0;
    for (size_t i = 0; i < x->nlinks; i++) {
        free(x->links[i].url);
        free(x->links[i].text);
    }
    x->nlinks = x->links_more = 0;
    x->open_link = 0;
}

static void trim_output(struct ctx *x)
{
    while (x->out.len > 0 && is_ws((unsigned char)x->out.data[x->out.len - 1]))
        x->out.data[--x->out.len] = '\0';
    while (x->title.len > 0 && x->title.data[x->title.len - 1] == ' ')
        x->title.data[--x->title.len] = '\0';
}

void html_text_reduce(const char *html, size_t len, const tk_url *base, const html_text_opts *opts,
                      html_text_doc *out)
{
    pthread_once(&once, init_tables);
    static const html_text_opts defaults;
    const html_text_opts *o = opts ? opts : &defaults;
    struct ctx *x = tk_calloc(1, sizeof *x);
    x->s = html ? html : "";
    x->n = html ? len : 0;
    x->o = o;
    x->base = base;
    x->max_links = o->max_links ? o->max_links : HTML_TEXT_MAX_LINKS;
    tk_buf_init(&x->out, o->max_text ? o->max_text : HTML_TEXT_MAX_TEXT);
    tk_buf_init(&x->title, HTML_TEXT_TITLE_MAX);

    /* pass 0: <main>, <meta charset>, <base href> */
    x->scan = 1;
    run(x);
    x->scan = 0;
    const char *cs = o->charset && *o->charset ? o->charset : x->meta_charset;
    x->cp1252 = html_text_charset_is_1252(cs);

    /* then the text: <main> only, the whole body, the whole body leniently */
    for (int level = x->has_main ? 0 : 1; level <= 2; level++) {
        pass_reset(x);
        x->main_only = level == 0;
        x->lenient = level == 2;
        run(x);
        trim_output(x);
        if (x->out.len > 0)
            break;
    }

    memset(out, 0, sizeof *out);
    out->title = tk_buf_steal(&x->title, NULL);
    out->text = tk_buf_steal(&x->out, &out->text_len);
    out->truncated = x->truncated;
    out->links = x->links;
    out->nlinks = x->nlinks;
    out->links_more = x->links_more;
    out->main_only = x->main_only;
    for (size_t i = 0; i < out->nlinks; i++)
        if (!out->links[i].text)
            out->links[i].text = tk_strdup("");
    free(x->hashes);
    if (x->base_arena)
        tk_arena_free(x->base_arena);
    free(x);
}

void html_text_doc_free(html_text_doc *d)
{
    for (size_t i = 0; i < d->nlinks; i++) {
        free(d->links[i].url);
        free(d->links[i].text);
    }
    free(d->links);
    free(d->title);
    free(d->text);
    memset(d, 0, sizeof *d);
}
