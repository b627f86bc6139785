/* browserd/page: the outline of an accessibility tree cuts long names, values
 * and lines between characters, never inside one. */
#include <stdlib.h>
#include <string.h>

#include "browserd/page.h"
#include "lib/buf.h"
#include "lib/json.h"
#include "lib/utf8.h"
#include "tk_test.h"

/* n copies of the two-byte "é" */
static char *accents(size_t n)
{
    char *s = malloc(2 * n + 1);
    for (size_t i = 0; i < n; i++)
        memcpy(s + 2 * i, "\xc3\xa9", 2);
    s[2 * n] = '\0';
    return s;
}

static json_t *ax(const char *id, const char *role, const char *name, const char *value, int bid)
{
    json_t *n = json_pack("{s:s,s:{s:s,s:s},s:{s:s,s:s}}", "nodeId", id, "role", "type", "role",
                          "value", role, "name", "type", "computedString", "value", name);
    if (value)
        json_object_set_new(n, "value", json_pack("{s:s,s:s}", "type", "string", "value", value));
    if (bid)
        json_object_set_new(n, "backendDOMNodeId", json_integer(bid));
    return n;
}

TEST(page_outline_cuts_between_characters)
{
    char *big = accents(400), *odd = accents(399);
    /* an odd start shifts every cut by one byte: one of the two lands inside
     * a character wherever the caps are */
    char *odd1 = malloc(strlen(odd) + 2);
    odd1[0] = 'x';
    strcpy(odd1 + 1, odd);
    json_t *nodes = json_array();
    json_array_append_new(nodes, ax("1", "RootWebArea", "page", NULL, 0));
    json_array_append_new(nodes, ax("2", "textbox", big, big, 7));
    json_array_append_new(nodes, ax("3", "textbox", odd1, odd1, 8));
    json_array_append_new(nodes, ax("4", "StaticText", big, NULL, 0));
    json_array_append_new(nodes, ax("5", "StaticText", odd1, NULL, 0));
    /* a role far longer than a line: the line itself is cut */
    char *longrole = accents(500);
    json_array_append_new(nodes, ax("6", longrole, "x", NULL, 0));
    json_array_append_new(nodes, ax("7", "button", odd1, NULL, 9));
    /* the root's children, each of it */
    json_t *kids = json_array();
    for (size_t i = 1; i < json_array_size(nodes); i++) {
        json_t *n = json_array_get(nodes, i);
        json_array_append(kids, json_object_get(n, "nodeId"));
        json_object_set_new(n, "parentId", json_string("1"));
    }
    json_object_set_new(json_array_get(nodes, 0), "childIds", kids);
    int64_t *refs;
    size_t nrefs;
    char *text = brd_page_outline_of(nodes, &refs, &nrefs);
    CHECK(text != NULL);
    CHECK(tk_utf8_valid(text, strlen(text)));
    CHECK(strlen(text) <= BRD_PAGE_MAX_OUTLINE);
    CHECK(strstr(text, "\xc3\xa9\xc3\xa9") != NULL); /* the names are there, cut */
    CHECK_INT(nrefs, ==, 3);
    free(text);
    free(refs);
    json_decref(nodes);
    free(big);
    free(odd);
    free(odd1);
    free(longrole);
}

TEST_MAIN()
