/*
 * cidr.h — address prefixes ("10.0.0.0/8", "fd00::/8") and the client address
 * behind trusted reverse proxies (X-Forwarded-For).
 *
 * A prefix list is written as entries separated by commas or spaces: an
 * address ("10.0.0.7", "::1": the one address) or a CIDR prefix whose host bits
 * are zero ("10.0.0.0/8"; "10.0.0.1/8" is refused, naming 10.0.0.0/8). An IPv6
 * address of the IPv4-mapped form (::ffff:a.b.c.d) is matched as the IPv4
 * address it carries, so a dual-stack socket's peer matches a v4 entry.
 *
 * The client behind proxies (tk_forwarded_client): X-Forwarded-For lists the
 * addresses a request passed through, the client first, each proxy appending
 * the address it received the request from. Only entries appended by proxies
 * the operator trusts are believed: the walk starts at the peer (which must be
 * trusted, else the peer is the client and the header is ignored) and goes
 * from the right end leftwards, past every trusted address; the first address
 * that is not trusted is the client. An entry that is not an address ("unknown",
 * an obfuscated name, garbage) ends the walk: the client is then the last
 * trusted hop, since nothing left of it can be believed. Entries may carry a
 * port ("1.2.3.4:5678", "[::1]:80") or brackets ("[::1]").
 *
 * Everything here is pure: no allocation but the list's array, no locks.
 */
#ifndef TK_CIDR_H
#define TK_CIDR_H

#include <stddef.h>

#include "lib/common.h"
#include "lib/url.h"

#define TK_CIDR_LIST_MAX 256 /* entries in one list; more is refused */
#define TK_XFF_MAX_HOPS  64  /* X-Forwarded-For entries walked at most */

typedef struct {
    tk_ip net; /* host bits zero */
    unsigned len;
} tk_cidr;

typedef struct {
    tk_cidr *v;
    size_t n;
} tk_cidr_list;

/* Parses one entry of n bytes (an address or a prefix). TK_EINVAL with a
 * message quoting the entry in err. */
tk_status tk_cidr_parse(const char *s, size_t n, tk_cidr *out, char *err, size_t errlen);
/* Parses a list (NULL or empty: the empty list). On TK_EINVAL err names the bad
 * entry and *out is left empty (nothing to free). Free with tk_cidr_list_free. */
tk_status tk_cidr_list_parse(const char *s, tk_cidr_list *out, char *err, size_t errlen);
void tk_cidr_list_free(tk_cidr_list *l);

/* The IPv4 address an IPv4-mapped IPv6 address carries; other addresses as they are. */
tk_ip tk_ip_unmapped(const tk_ip *ip);
/* 1 when ip is inside the prefix (mapped addresses as their IPv4 address). */
int tk_cidr_match(const tk_cidr *c, const tk_ip *ip);
int tk_cidr_list_match(const tk_cidr_list *l, const tk_ip *ip);
/* "10.0.0.0/8" into out (at least 52 bytes). */
void tk_cidr_format(const tk_cidr *c, char *out, size_t outlen);

/* One X-Forwarded-For entry ("1.2.3.4", "1.2.3.4:80", "::1", "[::1]:80", with
 * spaces or tabs around): 1 with *ip set, else 0. */
int tk_xff_entry_parse(const char *s, size_t n, tk_ip *ip);

/*
 * The client address of a request from peer whose X-Forwarded-For header (all
 * its fields joined with ',', len bytes; NULL when none) is xff, given the
 * trusted proxies. Returns the number of header entries believed (0 when the
 * peer is not trusted or there is no header: *client is the peer).
 */
int tk_forwarded_client(const tk_ip *peer, const char *xff, size_t len, const tk_cidr_list *trusted,
                        tk_ip *client);

#endif
