/* In-process extraction (text, Markdown, HTML, CSV, JSON), normalisation, the
 * blocks protocol and the chunker. */
#include "app/utopia/chunk.h"
#include "app/utopia/extract.h"
#include "tk_test.h"

static utopia_blocks B;

static void ex(utopia_format f, const char *s)
{
    char err[256];
    utopia_blocks_init(&B, 1 << 20);
    tk_status st = utopia_extract(f, s, strlen(s), NULL, &B, err, sizeof err);
    if (st != TK_OK)
        TK_TEST_FAIL("extract: %s %s", tk_status_str(st), err);
}

TEST(normalize_utf8_controls_and_blanks)
{
    tk_buf b;
    tk_buf_init(&b, 1024);
    const char in[] = "  a\tb\0"
                      "c \xff\xfe d\r\n\r\n\r\ne\xc3\xa9\xe2\x80\x8b  ";
    CHECK(utopia_text_normalize(&b, in, sizeof in - 1, 1) == TK_OK);
    CHECK_STR(tk_buf_cstr(&b), "a bc \xEF\xBF\xBD\xEF\xBF\xBD d\ne\xc3\xa9");
    tk_buf_reset(&b);
    CHECK(utopia_text_normalize(&b, "x\n\ny", 4, 0) == TK_OK);
    CHECK_STR(tk_buf_cstr(&b), "x y");
    /* overlong encodings and surrogates are invalid */
    tk_buf_reset(&b);
    CHECK(utopia_text_normalize(&b, "\xc0\xaf\xed\xa0\x80", 5, 0) == TK_OK);
    CHECK(strstr(tk_buf_cstr(&b), "\xc0") == NULL && strstr(tk_buf_cstr(&b), "\xed") == NULL);
    tk_buf_free(&b);
}

TEST(markdown_headings_paragraphs_code_tables)
{
    ex(UTOPIA_FMT_MARKDOWN,
       "# Guide\n\nIntro *text* with `code` and [a link](http://x).\n\n"
       "## Install\n\n```\n# not a heading\nmake\n```\n\n"
       "Setext\n------\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\n- item one\n- item two\n");
    CHECK_INT(B.n, >=, 8);
    CHECK(B.v[0].kind == UTOPIA_BLOCK_HEADING && B.v[0].level == 1);
    CHECK_STR(B.v[0].text, "Guide");
    CHECK_STR(B.v[1].text, "Intro text with code and a link.");
    CHECK(B.v[2].kind == UTOPIA_BLOCK_HEADING && B.v[2].level == 2);
    CHECK_STR(B.v[3].text, "# not a heading\nmake");
    CHECK(B.v[4].kind == UTOPIA_BLOCK_HEADING && B.v[4].level == 2);
    CHECK_STR(B.v[4].text, "Setext");
    CHECK_STR(B.v[5].text, "a | b");
    CHECK_STR(B.v[6].text, "1 | 2");
    CHECK_STR(B.v[7].text, "item one");
    CHECK_STR(utopia_blocks_title(&B), "Guide");
    utopia_blocks_free(&B);
}

TEST(html_strips_scripts_styles_keeps_headings)
{
    ex(UTOPIA_FMT_HTML,
       "<!doctype html><html><head><title>The Page</title><style>p{color:red}</style>"
       "<script>var x = '<h1>evil</h1>'; alert(1)</script></head><body>"
       "<h2 class=\"x\">Section &amp; more</h2><p>Hello <b>bold</b> world&nbsp;&#33;&#x263A;</p>"
       "<!-- <p>comment</p> --><div>one<br>two</div><table><tr><td>c1</td><td>c2</td></tr></table>"
       "<SCRIPT type=x>document.write('hidden')</SCRIPT><p>5 < 6 & 7 > 3</p><noscript>ns</noscript>"
       "<svg><text>drawn</text></svg><p attr='a>b'>quoted</p>");
    CHECK(B.v[0].kind == UTOPIA_BLOCK_HEADING);
    CHECK_STR(B.v[0].text, "The Page");
    CHECK(B.v[1].kind == UTOPIA_BLOCK_HEADING && B.v[1].level == 2);
    CHECK_STR(B.v[1].text, "Section & more");
    CHECK_STR(B.v[2].text, "Hello bold world !\xE2\x98\xBA");
    CHECK_STR(B.v[3].text, "one\ntwo");
    CHECK_STR(B.v[4].text, "c1 | c2");
    CHECK_STR(B.v[5].text, "5 < 6 & 7 > 3");
    CHECK_STR(B.v[6].text, "quoted");
    for (size_t i = 0; i < B.n; i++) {
        CHECK(strstr(B.v[i].text, "evil") == NULL);
        CHECK(strstr(B.v[i].text, "alert") == NULL);
        CHECK(strstr(B.v[i].text, "hidden") == NULL);
        CHECK(strstr(B.v[i].text, "color") == NULL);
        CHECK(strstr(B.v[i].text, "comment") == NULL);
        CHECK(strstr(B.v[i].text, "drawn") == NULL);
    }
    utopia_blocks_free(&B);
    /* the page's navigation and footer are not its text; links are plain text;
     * a <pre> is one block */
    ex(UTOPIA_FMT_HTML, "<body><nav><a href=\"/\">Home</a></nav><main><h1>Notes</h1>"
                        "<p>See <a href=\"https://example.com/x\">the docs</a>.</p>"
                        "<pre>line 1\n\nline 3</pre><ul><li>one</li><li>two</li></ul></main>"
                        "<footer>(c) someone</footer></body>");
    CHECK_INT(B.n, ==, 4);
    CHECK(B.v[0].kind == UTOPIA_BLOCK_HEADING && B.v[0].level == 1);
    CHECK_STR(B.v[0].text, "Notes");
    CHECK_STR(B.v[1].text, "See the docs.");
    CHECK_STR(B.v[2].text, "line 1\nline 3"); /* blank lines fold, as in every block */
    CHECK_STR(B.v[3].text, "- one\n- two");
    utopia_blocks_free(&B);
    /* text over the cap is refused, not cut */
    {
        utopia_blocks big;
        utopia_blocks_init(&big, 64);
        char html[400];
        snprintf(html, sizeof html, "<p>%0300d</p>", 7);
        char e2[200];
        CHECK(utopia_extract(UTOPIA_FMT_HTML, html, strlen(html), NULL, &big, e2, sizeof e2) ==
              TK_ETOOBIG);
        utopia_blocks_free(&big);
    }
    /* unterminated constructs end quietly */
    ex(UTOPIA_FMT_HTML, "<p>a<script>never closed");
    CHECK_INT(B.n, ==, 1);
    utopia_blocks_free(&B);
    ex(UTOPIA_FMT_HTML, "text <!-- open comment");
    CHECK_INT(B.n, ==, 1);
    utopia_blocks_free(&B);
}

TEST(csv_rows_with_headers_and_quotes)
{
    ex(UTOPIA_FMT_CSV, "name,city,note\r\nAlice,Paris,\"likes \"\"tea\"\", and cake\"\r\n"
                       "Bob,,\"multi\nline\"\n\nCarol,Rome\n");
    CHECK_INT(B.n, ==, 3);
    CHECK_STR(B.v[0].text, "name: Alice; city: Paris; note: likes \"tea\", and cake");
    CHECK_STR(B.v[1].text, "name: Bob; note: multi\nline");
    CHECK_STR(B.v[2].text, "name: Carol; city: Rome");
    utopia_blocks_free(&B);
    ex(UTOPIA_FMT_CSV, "a;b\n1;2\n");
    CHECK_STR(B.v[0].text, "a: 1; b: 2");
    utopia_blocks_free(&B);
    ex(UTOPIA_FMT_CSV, "x,\"unterminated");
    utopia_blocks_free(&B);
}

TEST(json_paths_and_sections)
{
    ex(UTOPIA_FMT_JSON, "{\"title\": \"Config\", \"servers\": [{\"host\": \"a\", \"port\": 80}, "
                        "{\"host\": \"b\"}], \"limits\": {\"cpu\": 2.5, \"on\": true}}");
    CHECK(B.v[0].kind == UTOPIA_BLOCK_HEADING);
    CHECK_STR(B.v[0].text, "servers");
    CHECK_STR(B.v[1].text, "servers[0].host: a\nservers[0].port: 80");
    CHECK_STR(B.v[2].text, "servers[1].host: b");
    CHECK_STR(B.v[3].text, "limits");
    CHECK_STR(B.v[4].text, "limits.cpu: 2.5\nlimits.on: true");
    CHECK_STR(B.v[5].text, "title: Config");
    utopia_blocks_free(&B);
    char err[256];
    utopia_blocks_init(&B, 1 << 20);
    CHECK(utopia_extract(UTOPIA_FMT_JSON, "{\"a\":1,\"a\":2}", 13, NULL, &B, err, sizeof err) ==
          TK_EINVAL);
    utopia_blocks_free(&B);
}

TEST(format_detection_magic_wins)
{
    CHECK(utopia_format_detect("text/plain", "x.txt", "%PDF-1.4", 8) == UTOPIA_FMT_PDF);
    CHECK(utopia_format_detect(NULL, "x.docx", "PK\3\4....", 8) == UTOPIA_FMT_DOCX);
    CHECK(utopia_format_detect("text/plain", NULL, "PK\3\4....", 8) == UTOPIA_FMT_UNKNOWN);
    CHECK(utopia_format_detect("text/markdown; charset=utf-8", NULL, "# x", 3) ==
          UTOPIA_FMT_MARKDOWN);
    CHECK(utopia_format_detect(NULL, "a.CSV", "a,b", 3) == UTOPIA_FMT_CSV);
    CHECK(utopia_format_detect(NULL, NULL, "  <html>", 8) == UTOPIA_FMT_HTML);
    CHECK(utopia_format_detect(NULL, NULL, "[1]", 3) == UTOPIA_FMT_JSON);
    CHECK(utopia_format_detect(NULL, NULL, "hello", 5) == UTOPIA_FMT_TEXT);
    CHECK(utopia_format_detect(NULL, NULL, "a\0b", 3) == UTOPIA_FMT_UNKNOWN);
}

TEST(blocks_protocol_round_trip_and_caps)
{
    utopia_blocks a, b;
    utopia_blocks_init(&a, 1 << 20);
    utopia_blocks_add(&a, UTOPIA_BLOCK_HEADING, 2, "Head\\ing", 8);
    utopia_blocks_add(&a, UTOPIA_BLOCK_PARA, 0, "line one\nline\ttwo", 17);
    utopia_blocks_add(&a, UTOPIA_BLOCK_PAGE, 0, "", 0);
    tk_buf w;
    tk_buf_init(&w, 1 << 20);
    CHECK(utopia_blocks_write(&a, &w) == TK_OK);
    CHECK_STR(tk_buf_cstr(&w), "h2\tHead\\\\ing\np\tline one\\nline two\nf\t\n");
    utopia_blocks_init(&b, 1 << 20);
    CHECK(utopia_blocks_parse(&b, w.data, w.len) == TK_OK);
    CHECK_INT(b.n, ==, 3);
    CHECK_STR(b.v[0].text, "Head\\ing");
    CHECK_STR(b.v[1].text, "line one\nline two");
    CHECK(b.v[2].kind == UTOPIA_BLOCK_PAGE);
    CHECK(utopia_blocks_parse(&b, "x\tbad\n", 6) == TK_EINVAL);
    CHECK(utopia_blocks_parse(&b, "h9\tbad\n", 7) == TK_EINVAL);
    utopia_blocks_free(&b);
    utopia_blocks_init(&b, 16);
    CHECK(utopia_blocks_add(&b, UTOPIA_BLOCK_PARA, 0, "0123456789", 10) == TK_OK);
    CHECK(utopia_blocks_add(&b, UTOPIA_BLOCK_PARA, 0, "0123456789", 10) == TK_ETOOBIG);
    utopia_blocks_free(&b);
    utopia_blocks_free(&a);
    tk_buf_free(&w);
}

TEST(chunker_structure_sizes_overlap)
{
    utopia_blocks b;
    utopia_blocks_init(&b, 1 << 22);
    utopia_blocks_add(&b, UTOPIA_BLOCK_HEADING, 1, "Manual", 6);
    utopia_blocks_add(&b, UTOPIA_BLOCK_PARA, 0, "Short intro.", 12);
    utopia_blocks_add(&b, UTOPIA_BLOCK_HEADING, 2, "Install", 7);
    tk_buf big;
    tk_buf_init(&big, 1 << 20);
    for (int i = 0; i < 60; i++)
        tk_buf_printf(&big, "Sentence number %d says something useful. ", i);
    utopia_blocks_add(&b, UTOPIA_BLOCK_PARA, 0, big.data, big.len);
    utopia_blocks_add(&b, UTOPIA_BLOCK_HEADING, 3, "Debian", 6);
    utopia_blocks_add(&b, UTOPIA_BLOCK_PARA, 0, "apt-get install tusko", 21);
    utopia_blocks_add(&b, UTOPIA_BLOCK_HEADING, 2, "Use", 3);
    utopia_blocks_add(&b, UTOPIA_BLOCK_PARA, 0, "Run it.", 7);
    utopia_chunks c = {0};
    utopia_chunk_blocks(&b, 400, 80, &c);
    CHECK_INT(c.n, >=, 7);
    CHECK_STR(c.v[0].heading, "Manual");
    CHECK_STR(c.v[0].text, "Short intro.");
    CHECK_STR(c.v[1].heading, "Manual > Install");
    size_t i = 1;
    for (; i < c.n && strcmp(c.v[i].heading, "Manual > Install") == 0; i++) {
        CHECK_INT(c.v[i].len, <=, 400 + 2);
        CHECK_INT(c.v[i].len, >, 100);
        /* a chunk cut for size ends at a sentence */
        CHECK(c.v[i].text[c.v[i].len - 1] == '.');
        if (i > 1) {
            /* overlap: the start of this chunk is the end of the previous one */
            const utopia_chunk *p = &c.v[i - 1];
            char head[24];
            snprintf(head, sizeof head, "%.20s", c.v[i].text);
            CHECK(strstr(p->text + (p->len > 120 ? p->len - 120 : 0), head) != NULL);
        }
    }
    CHECK_STR(c.v[i].heading, "Manual > Install > Debian");
    CHECK_STR(c.v[i].text, "apt-get install tusko");
    CHECK_STR(c.v[i + 1].heading, "Manual > Use");
    CHECK_INT(i + 2, ==, c.n);
    /* every sentence survives the cuts */
    for (int s = 0; s < 60; s++) {
        char want[64];
        snprintf(want, sizeof want, "Sentence number %d says", s);
        int found = 0;
        for (size_t k = 0; k < c.n; k++)
            found |= strstr(c.v[k].text, want) != NULL;
        CHECK(found);
    }
    utopia_chunks_free(&c);
    utopia_blocks_free(&b);
    tk_buf_free(&big);
}

TEST(chunker_pages_and_unbreakable_text)
{
    utopia_blocks b;
    utopia_blocks_init(&b, 1 << 22);
    utopia_blocks_add(&b, UTOPIA_BLOCK_PARA, 0, "page one text", 13);
    utopia_blocks_add(&b, UTOPIA_BLOCK_PAGE, 0, "", 0);
    char word[1000];
    memset(word, 'x', sizeof word);
    memcpy(word + 500, "\xc3\xa9\xc3\xa9", 4);
    utopia_blocks_add(&b, UTOPIA_BLOCK_PARA, 0, word, sizeof word);
    utopia_chunks c = {0};
    utopia_chunk_blocks(&b, 200, 40, &c);
    CHECK_STR(c.v[0].heading, "page 1");
    CHECK_INT(c.v[0].page, ==, 1);
    size_t total = 0;
    for (size_t i = 0; i < c.n; i++) {
        CHECK_INT(c.v[i].len, <=, 200);
        /* never cut inside a UTF-8 sequence */
        CHECK(((unsigned char)c.v[i].text[0] & 0xC0) != 0x80);
        if (i > 0)
            CHECK_INT(c.v[i].page, ==, 2);
        total += c.v[i].len;
    }
    CHECK_INT(total, >=, 1000);
    utopia_chunks_free(&c);
    utopia_blocks_free(&b);
}

TEST(text_paragraphs_and_form_feeds)
{
    ex(UTOPIA_FMT_TEXT, "first para\nstill first\n  \nsecond\fthird page\n\n\n");
    CHECK_INT(B.n, ==, 4);
    CHECK_STR(B.v[0].text, "first para\nstill first");
    CHECK_STR(B.v[1].text, "second");
    CHECK(B.v[2].kind == UTOPIA_BLOCK_PAGE);
    CHECK_STR(B.v[3].text, "third page");
    utopia_blocks_free(&B);
}

TEST_MAIN()
