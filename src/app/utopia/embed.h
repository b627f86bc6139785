/*
 * embed.h — embeddings from an OpenAI-compatible endpoint (POST {base}/embeddings
 * with {"model", "input": [...]}), as unit vectors.
 *
 * Used only when UTOPIA_EMBEDDINGS_MODEL and UTOPIA_EMBEDDINGS_URL are set
 * (fail-closed: nothing is sent anywhere otherwise). Blocking; call from worker
 * threads.
 */
#ifndef UTOPIA_EMBED_H
#define UTOPIA_EMBED_H

#include <stddef.h>

#include "app/utopia/utopia.h"
#include "lib/buf.h"

#define UTOPIA_EMBED_MAX_DIM 4096
#define UTOPIA_EMBED_BATCH   32
/* Users with at most this many chunks have all of them ranked by similarity;
 * above, the semantic ranking re-ranks the lexical candidates only. */
#define UTOPIA_EMBED_SCAN_ALL 5000

/*
 * Embeds n texts (each cut to 8,000 bytes on a character boundary). On TK_OK,
 * *vecs holds n * *dim floats (free() it), each vector of length 1 (a zero
 * vector stays zero). TK_ERROR with a message when the endpoint fails, answers
 * something else than n vectors of one dimension, or a dimension past the cap.
 */
tk_status utopia_embed(const utopia *u, const char *const *texts, size_t n, float **vecs, int *dim,
                       char *err, size_t errlen);

/* A vector as a Postgres real[] literal "{0.1,-0.2,...}" (appended to out). */
tk_status utopia_embed_literal(const float *v, int dim, tk_buf *out);

#endif
