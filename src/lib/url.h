/*
 * url.h — absolute http(s) URL parsing and normalisation, for the URLs Tusko
 * fetches on the agent's behalf (see ssrf.h, which decides whether they may be).
 *
 * The parser is strict where leniency could hide a host from a check and
 * follows the WHATWG URL standard where a lenient reading is the one browsers
 * and curl would use anyway. What comes out is one canonical spelling:
 *
 *   HTTP://Ex%41mple.COM.:80/a/./b/../c?q=1#frag -> http://example.com/a/c?q=1
 *   http://0x7f.1/                               -> http://127.0.0.1/
 *   http://bücher.example/                       -> http://xn--bcher-kva.example/
 *   http://[0:0::FFFF:127.0.0.1]:8080/           -> http://[::ffff:7f00:1]:8080/
 *
 * Hosts: percent-escapes are decoded; non-ASCII names go through IDNA (UTS #46,
 * non-transitional, libidn2), which also folds full-width letters, digits and
 * dots; names are lower-cased and lose one trailing dot. A host whose last label
 * is a number is an IPv4 address and must parse as one, in any of the notations
 * inet_aton() and browsers accept: decimal 2130706433, octal 0177.0.0.1, hex
 * 0x7f.1 / 0x7f000001, short forms 127.1 and 127.0.1; it comes out dotted-quad.
 * IPv6 literals are bracketed; zone identifiers ("%eth0") are refused; they come
 * out in RFC 5952 form (lower case, longest zero run compressed, no dotted quad).
 *
 * Refused (tk_url_err says why): schemes other than http and https; user name or
 * password ("user@"); ports 0 and above 65535; control characters, backslashes
 * or a missing "//" after the scheme; hosts with characters outside
 * [a-z0-9-_.] after IDNA; empty labels; labels over 63 or names over 253 bytes;
 * URLs longer than TK_URL_MAX, before or after normalisation.
 * Paths and queries keep their escapes; bytes that may not appear raw in a
 * request line are percent-encoded; dot segments (also "%2e") are removed; the
 * fragment is dropped (it is never sent to a server).
 *
 * Normalising is idempotent: parsing a result's href again yields the same href.
 * Everything here is pure and thread-safe; nothing touches the network.
 */
#ifndef TK_URL_H
#define TK_URL_H

#include <stddef.h>
#include <stdint.h>

#include "lib/arena.h"
#include "lib/common.h"

#define TK_URL_MAX  8192 /* bytes, input and normalised */
#define TK_HOST_MAX 253  /* bytes of a normalised host name */

/* An IP address: family is 4 or 6; an IPv4 address is b[0..3]. */
typedef struct {
    int family;
    uint8_t b[16];
} tk_ip;

typedef enum {
    TK_HOST_NAME = 1, /* a DNS name (ASCII, punycode for IDNA) */
    TK_HOST_IPV4,
    TK_HOST_IPV6,
} tk_host_type;

typedef struct {
    tk_host_type type;
    char text[TK_HOST_MAX + 1]; /* normalised: name, dotted quad, or IPv6 without brackets */
    tk_ip ip;                   /* for TK_HOST_IPV4 and TK_HOST_IPV6 */
} tk_host;

typedef struct {
    const char *href;   /* the normalised URL: scheme://host[:port]/path[?query] */
    const char *scheme; /* "http" or "https" (static storage) */
    tk_host host;
    int port;           /* the effective port (80 or 443 when none is written) */
    const char *path;   /* "/..." including "?query": the request target */
    const char *origin; /* "scheme://host[:port]" */
} tk_url;

/* Why a URL was refused. */
typedef enum {
    TK_URL_OK = 0,
    TK_URL_EBAD,      /* malformed, or not representable safely */
    TK_URL_ESCHEME,   /* not http or https */
    TK_URL_EUSERINFO, /* user name or password present */
    TK_URL_EPORT,     /* port 0 or above 65535 */
} tk_url_fault;

typedef struct {
    tk_url_fault fault;
    char reason[224]; /* for people; echoes at most a short, sanitised piece of the input */
} tk_url_err;

/*
 * Parses and normalises an absolute URL of len bytes (no NUL needed). The
 * strings in *u live in `a`. Returns TK_OK; TK_EINVAL with err filled; or
 * TK_ETOOBIG (fault TK_URL_EBAD) when the URL is too long or `a` is out of room.
 * err may be NULL.
 */
tk_status tk_url_parse(tk_arena *a, const char *s, size_t len, tk_url *u, tk_url_err *err);

/*
 * Resolves a reference (a Location header, a link) against base, RFC 3986
 * section 5: absolute URLs, "//host/...", "/path", "?query", "#frag" and
 * relative paths; then normalises as tk_url_parse. Returns as tk_url_parse.
 */
tk_status tk_url_resolve(tk_arena *a, const tk_url *base, const char *ref, size_t len, tk_url *out,
                         tk_url_err *err);

/*
 * Parses and normalises a host on its own ("Example.COM.", "0x7f.1",
 * "[::1]"): the same rules as the host part of a URL. Returns TK_OK or
 * TK_EINVAL with err filled (err may be NULL).
 */
tk_status tk_url_host_parse(const char *s, size_t len, tk_host *h, tk_url_err *err);

/* Canonical text of an address: dotted quad, or RFC 5952 IPv6 without brackets.
 * out should hold 46 bytes (INET6_ADDRSTRLEN); it is always NUL-terminated. */
void tk_ip_format(const tk_ip *ip, char *out, size_t outlen);

/* Parses a plain numeric address: strict dotted quad or IPv6 (no brackets,
 * no zone). Returns 1 on success. */
int tk_ip_parse(const char *s, tk_ip *ip);

#endif
