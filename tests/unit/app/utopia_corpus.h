/*
 * utopia_corpus.h — a generated corpus with known answers, shared by the
 * ranking tests (test_utopia_store.c) and bench/search (recall@5).
 *
 * Entity i (0 <= i < n) is a place with a unique made-up name and one Markdown
 * section of its own ("## <Name>") in document i / 50:
 *   "<Name> is a <kind> in the <region> region. It was founded by <Founder> in
 *    <year>. Its artisans <verb>ed <colour> <good> for the markets. <filler>"
 * The (verb, colour, good) triple is unique per entity, so a query naming it
 * in another inflection has exactly one right answer that only stemming finds;
 * the name is unique too, so a misspelt name has one right answer that only the
 * trigram path finds.
 */
#ifndef UTOPIA_CORPUS_H
#define UTOPIA_CORPUS_H

#include <stdio.h>
#include <string.h>

#include "lib/buf.h"

static const char *const uc_syl[] = {"ka",  "lo",  "mi", "ren", "tor", "va",  "sel", "dun",
                                     "pha", "gri", "mo", "len", "sta", "qui", "bre", "zo"};
static const char *const uc_kinds[] = {"town",      "harbor", "fortress", "village",
                                       "monastery", "city",   "market",   "colony"};
static const char *const uc_regions[] = {"northern", "southern", "eastern",  "western",
                                         "central",  "coastal",  "highland", "river"};
/* base verbs: past "-ed", gerund "-ing", third person "-s" are regular */
static const char *const uc_verbs[] = {"paint", "carv", "weav", "polish", "stitch", "bak",
                                       "smelt", "tint", "brew", "forg",   "press",  "mould",
                                       "glaz",  "gild", "knot", "plait"};
static const char *const uc_colours[] = {"crimson", "azure",  "amber",  "ivory",
                                         "ochre",   "violet", "jade",   "scarlet",
                                         "umber",   "silver", "golden", "russet"};
static const char *const uc_goods[] = {
    "baskets", "lanterns", "saddles", "barrels", "tiles",   "blankets", "helmets", "kettles",
    "bowls",   "ropes",    "carpets", "mirrors", "candles", "flutes",   "boots",   "cloaks"};
static const char *const uc_filler[] = {
    "The winters there are long and the roads are often closed.",
    "Travellers describe the main square as busy in every season.",
    "A small museum keeps records of the early settlers and their trade.",
    "Most families keep gardens behind their houses.",
    "The local council meets once a month in the old hall.",
    "Visitors come for the festival held at the end of summer.",
    "Several bridges cross the stream that runs through the centre.",
    "The school teaches reading, arithmetic and the history of the region."};

#define UC_SYL 16
#define UC_NV  16
#define UC_NC  12
#define UC_NG  16

/* a unique capitalised name for i < 65536: four syllables + "ix" */
static inline void uc_name(int i, char *out, size_t outlen)
{
    snprintf(out, outlen, "%s%s%s%six", uc_syl[i % UC_SYL], uc_syl[(i / 16) % UC_SYL],
             uc_syl[(i / 256) % UC_SYL], uc_syl[(i / 4096) % UC_SYL]);
    out[0] = (char)(out[0] - 'a' + 'A');
}

static inline void uc_triple(int i, int *v, int *c, int *g)
{
    /* a bijection of i < 16*12*16 = 3072 onto the triples, scrambled */
    int j = (int)(((unsigned)i * 1543u) % (UC_NV * UC_NC * UC_NG));
    *v = j % UC_NV;
    *c = (j / UC_NV) % UC_NC;
    *g = j / (UC_NV * UC_NC);
}

/* The Markdown of document d (entities d*per .. d*per+per-1, below n). */
static inline void uc_document(int d, int per, int n, tk_buf *md)
{
    tk_buf_printf(md, "# Gazetteer volume %d\n\n", d + 1);
    for (int i = d * per; i < (d + 1) * per && i < n; i++) {
        char name[40], founder[40];
        uc_name(i, name, sizeof name);
        /* founders' names never collide with places': another suffix */
        uc_name((i * 7919 + 13) % 65536, founder, sizeof founder);
        founder[strlen(founder) - 2] = 0;
        tk_buf_append_str(md, ""); /* keep the buffer initialised */
        int v, c, g;
        uc_triple(i, &v, &c, &g);
        tk_buf_printf(md,
                      "## %s\n\n%s is a %s in the %s region. It was founded by %sov Vel in %d. "
                      "Its artisans %sed %s %s for the markets.\n\n%s %s\n\n",
                      name, name, uc_kinds[i % 8], uc_regions[(i / 8) % 8], founder,
                      1100 + (i * 37) % 800, uc_verbs[v], uc_colours[c], uc_goods[g],
                      uc_filler[i % 8], uc_filler[(i / 3) % 8]);
    }
}

/* Known-answer queries for entity i. */
static inline void uc_query_exact(int i, char *out, size_t outlen)
{
    char name[40];
    uc_name(i, name, sizeof name);
    snprintf(out, outlen, "who founded %s", name);
}
static inline void uc_query_inflected(int i, char *out, size_t outlen)
{
    int v, c, g;
    uc_triple(i, &v, &c, &g);
    /* the text says "<verb>ed ... baskets": ask with "<verb>ing ... basket" */
    size_t gl = strlen(uc_goods[g]);
    snprintf(out, outlen, "%sing %s %.*s", uc_verbs[v], uc_colours[c], (int)gl - 1, uc_goods[g]);
}
static inline void uc_query_typo(int i, char *out, size_t outlen)
{
    char name[40];
    uc_name(i, name, sizeof name);
    size_t n = strlen(name);
    /* swap two letters in the middle: "Kalomiren" -> "Kaolmiren" */
    char t = name[n / 2];
    name[n / 2] = name[n / 2 + 1];
    name[n / 2 + 1] = t;
    snprintf(out, outlen, "%s region founder", name);
}

/* The heading an entity's chunk carries. */
static inline void uc_heading(int i, char *out, size_t outlen)
{
    char name[40];
    uc_name(i, name, sizeof name);
    snprintf(out, outlen, "Gazetteer volume %d > %s", i / 50 + 1, name);
}

#endif
