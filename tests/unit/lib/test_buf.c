#include "lib/arena.h"
#include "lib/buf.h"
#include "tk_test.h"

TEST(buf_append_and_cstr)
{
    tk_buf b;
    tk_buf_init(&b, 100);
    CHECK_STR(tk_buf_cstr(&b), "");
    CHECK(tk_buf_append_str(&b, "hello") == TK_OK);
    CHECK(tk_buf_printf(&b, " %d", 42) == TK_OK);
    CHECK_STR(tk_buf_cstr(&b), "hello 42");
    CHECK_INT(b.len, ==, 8);
    tk_buf_free(&b);
}

TEST(buf_refuses_one_byte_over_cap_and_keeps_content)
{
    tk_buf b;
    tk_buf_init(&b, 10);
    CHECK(tk_buf_append(&b, "0123456789", 10) == TK_OK);
    CHECK(tk_buf_append(&b, "x", 1) == TK_ETOOBIG);
    CHECK_INT(b.len, ==, 10);
    CHECK_STR(tk_buf_cstr(&b), "0123456789");
    /* never allocates more than cap + NUL */
    CHECK_INT(b.size, <=, 11);
    tk_buf_free(&b);
}

TEST(buf_printf_over_cap)
{
    tk_buf b;
    tk_buf_init(&b, 300);
    char big[400];
    memset(big, 'a', sizeof big - 1);
    big[399] = 0;
    CHECK(tk_buf_printf(&b, "%s", big) == TK_ETOOBIG);
    CHECK_INT(b.len, ==, 0);
    CHECK(tk_buf_printf(&b, "%.*s", 300, big) == TK_OK);
    CHECK_INT(b.len, ==, 300);
    CHECK_INT(b.size, <=, 301);
    tk_buf_free(&b);
}

TEST(buf_consume_and_steal)
{
    tk_buf b;
    tk_buf_init(&b, 64);
    tk_buf_append_str(&b, "abcdef");
    tk_buf_consume(&b, 2);
    CHECK_STR(tk_buf_cstr(&b), "cdef");
    size_t n;
    char *s = tk_buf_steal(&b, &n);
    CHECK_STR(s, "cdef");
    CHECK_INT(n, ==, 4);
    CHECK(b.data == NULL && b.len == 0);
    free(s);
    s = tk_buf_steal(&b, &n);
    CHECK_STR(s, "");
    free(s);
}

TEST(buf_huge_request_is_refused_without_overflow)
{
    tk_buf b;
    tk_buf_init(&b, 1000);
    tk_buf_append_str(&b, "abc");
    CHECK(tk_buf_reserve(&b, SIZE_MAX - 1) == TK_ETOOBIG);
    CHECK(tk_buf_append(&b, "x", SIZE_MAX) == TK_ETOOBIG);
    CHECK_STR(tk_buf_cstr(&b), "abc");
    tk_buf_free(&b);
}

TEST(arena_alloc_zeroed_aligned)
{
    tk_arena *a = tk_arena_new(0);
    for (int i = 0; i < 1000; i++) {
        unsigned char *p = tk_arena_alloc(a, (size_t)(i % 37) + 1);
        CHECK(p != NULL);
        CHECK(((uintptr_t)p % _Alignof(max_align_t)) == 0);
        for (int j = 0; j < i % 37 + 1; j++)
            CHECK(p[j] == 0);
        memset(p, 0xab, (size_t)(i % 37) + 1);
    }
    char *big = tk_arena_alloc(a, 100000);
    CHECK(big != NULL);
    memset(big, 1, 100000);
    CHECK_STR(tk_arena_printf(a, "%s-%d", "x", 7), "x-7");
    CHECK_STR(tk_arena_strndup(a, "hello", 3), "hel");
    tk_arena_free(a);
}

TEST(arena_cap_refuses)
{
    tk_arena *a = tk_arena_new(1024);
    CHECK(tk_arena_alloc(a, 1000) != NULL);
    CHECK(tk_arena_alloc(a, 100) == NULL);
    CHECK(tk_arena_alloc(a, SIZE_MAX) == NULL);
    CHECK_INT(tk_arena_used(a), <=, 1024);
    tk_arena_free(a);
}

static int order[4], norder;
static void cleanup(void *d)
{
    order[norder++] = (int)(intptr_t)d;
}

TEST(arena_cleanups_run_in_reverse)
{
    tk_arena *a = tk_arena_new(0);
    tk_arena_cleanup_add(a, cleanup, (void *)1);
    tk_arena_cleanup_add(a, cleanup, (void *)2);
    tk_arena_cleanup_add(a, cleanup, (void *)3);
    tk_arena_free(a);
    CHECK_INT(norder, ==, 3);
    CHECK(order[0] == 3 && order[1] == 2 && order[2] == 1);
}

TEST_MAIN()
