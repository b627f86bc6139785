/*
 * local.c — the isolated local extractor (parent side) and the helper entry
 * point (child side). See local.h.
 */
#include "app/utopia/local.h"

#include <errno.h>
#include <seccomp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "app/utopia/docx.h"

/* ---- the helper (child side) ---- */

static int write_all(int fd, const char *p, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        p += w, n -= (size_t)w;
    }
    return 0;
}

static void say(int fd, const char *msg)
{
    if (write_all(fd, msg, strlen(msg)) == 0)
        (void)write_all(fd, "\n", 1);
}

/* Once the input is read, nothing but memory, reading, writing and exiting. */
static int narrow(void)
{
    scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ERRNO(EPERM));
    if (!ctx)
        return -1;
    static const int allowed[] = {
        SCMP_SYS(read),         SCMP_SYS(write),          SCMP_SYS(brk),
        SCMP_SYS(mmap),         SCMP_SYS(munmap),         SCMP_SYS(mremap),
        SCMP_SYS(madvise),      SCMP_SYS(exit),           SCMP_SYS(exit_group),
        SCMP_SYS(rt_sigreturn), SCMP_SYS(rt_sigprocmask), SCMP_SYS(futex),
        SCMP_SYS(getpid),       SCMP_SYS(gettid),         SCMP_SYS(clock_gettime),
        SCMP_SYS(sched_yield),  SCMP_SYS(mprotect),       SCMP_SYS(fstat),
        SCMP_SYS(newfstatat),   SCMP_SYS(sigaltstack),    SCMP_SYS(rt_sigaction),
        SCMP_SYS(getrusage),    SCMP_SYS(close),
    };
    int rc = 0;
    for (size_t i = 0; i < TK_ARRAY_LEN(allowed) && rc == 0; i++)
        rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, allowed[i], 0);
    if (rc == 0)
        rc = seccomp_load(ctx);
    seccomp_release(ctx);
    return rc == 0 ? 0 : -1;
}

int utopia_local_helper_main(int argc, char **argv, int in, int out, int errfd, int sandbox)
{
    int64_t max_in = 64 << 20, max_xml = 64 << 20, max_out = 32 << 20;
    if (argc < 2 || strcmp(argv[1], "docx") != 0) {
        say(errfd, "usage: " UTOPIA_HELPER_ARGV0 " docx [max-input max-xml max-output]");
        return 1;
    }
    if (argc >= 5 && (tk_parse_i64(argv[2], 1, (int64_t)1 << 32, &max_in) != TK_OK ||
                      tk_parse_i64(argv[3], 1, (int64_t)1 << 32, &max_xml) != TK_OK ||
                      tk_parse_i64(argv[4], 1, (int64_t)1 << 32, &max_out) != TK_OK)) {
        say(errfd, "bad limits");
        return 1;
    }
    tk_buf input;
    tk_buf_init(&input, (size_t)max_in);
    for (;;) {
        char buf[65536];
        ssize_t r = read(in, buf, sizeof buf);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            say(errfd, "reading the input failed");
            return 1;
        }
        if (r == 0)
            break;
        if (tk_buf_append(&input, buf, (size_t)r) != TK_OK) {
            say(errfd, "the file is larger than the input cap");
            return 2;
        }
    }
    if (sandbox && narrow() != 0) {
        say(errfd, "seccomp (allow-list) could not be loaded");
        return 1;
    }
    utopia_blocks b;
    utopia_blocks_init(&b, (size_t)max_out);
    char err[256] = "";
    int code = 0;
    tk_status st = utopia_docx_extract(input.data ? input.data : "", input.len, (size_t)max_xml, &b,
                                       err, sizeof err);
    tk_buf_free(&input);
    if (st == TK_OK) {
        tk_buf o;
        tk_buf_init(&o, (size_t)max_out * 2 + 64);
        st = utopia_blocks_write(&b, &o);
        if (st == TK_OK && write_all(out, tk_buf_cstr(&o), o.len) != 0)
            code = 1;
        tk_buf_free(&o);
    }
    if (st != TK_OK) {
        say(errfd, *err ? err : tk_status_str(st));
        code = st == TK_ERROR ? 1 : 2;
    }
    utopia_blocks_free(&b);
    return code;
}

/* Runs before main() when this binary is executed as the helper. glibc passes
 * (argc, argv, envp) to ELF constructors. */
__attribute__((constructor)) static void utopia_local_helper_ctor(int argc, char **argv,
                                                                  char **envp)
{
    (void)envp;
    if (argc >= 2 && argv && argv[0] && strcmp(argv[0], UTOPIA_HELPER_ARGV0) == 0)
        _exit(utopia_local_helper_main(argc, argv, 0, 1, 2, 1));
}

/* ---- the extractor (parent side) ---- */

static tk_status local_run(const utopia_extractor *x, utopia_format fmt, const void *data,
                           size_t len, tk_buf *out, char *err, size_t errlen)
{
    const utopia_local_config *cfg = x->ud;
    utopia_isolate_result res;
    tk_status st;
    if (fmt == UTOPIA_FMT_PDF) {
        const char *prog = cfg->pdftotext ? cfg->pdftotext : "/usr/bin/pdftotext";
        if (access(prog, X_OK) != 0) {
            snprintf(err, errlen, "PDF extraction needs %s (Debian package poppler-utils)", prog);
            return TK_ERROR;
        }
        char *argv[] = {"pdftotext", "-enc", "UTF-8", "-", "-", NULL};
        tk_buf text;
        tk_buf_init(&text, out->max);
        st = utopia_isolate_run(prog, argv, data, len, &cfg->limits, &text, &res, err, errlen);
        if (st == TK_OK) {
            utopia_blocks b;
            utopia_blocks_init(&b, out->max / 2);
            st = utopia_extract_text(tk_buf_cstr(&text), text.len, &b);
            if (st == TK_OK)
                st = utopia_blocks_write(&b, out);
            if (st == TK_ETOOBIG)
                snprintf(err, errlen, "the PDF's text is larger than the cap");
            utopia_blocks_free(&b);
        } else if (res.exited && !res.setup_failed && res.exit_code != 0) {
            char *nl = strchr(res.stderr_head, '\n');
            snprintf(err, errlen, "the PDF could not be read: %.*s",
                     nl ? (int)(nl - res.stderr_head) : (int)strlen(res.stderr_head),
                     res.stderr_head);
            st = TK_EINVAL;
        }
        tk_buf_free(&text);
        return st;
    }
    if (fmt == UTOPIA_FMT_DOCX) {
        const char *self = cfg->helper ? cfg->helper : utopia_isolate_self_exe();
        if (!self) {
            snprintf(err, errlen, "cannot find this program's executable for the DOCX helper");
            return TK_ERROR;
        }
        char a2[24], a3[24], a4[24];
        snprintf(a2, sizeof a2, "%zu", cfg->max_input ? cfg->max_input : (size_t)64 << 20);
        snprintf(a3, sizeof a3, "%zu", cfg->max_xml ? cfg->max_xml : (size_t)64 << 20);
        snprintf(a4, sizeof a4, "%zu", out->max / 2);
        char *argv[] = {UTOPIA_HELPER_ARGV0, "docx", a2, a3, a4, NULL};
        st = utopia_isolate_run(self, argv, data, len, &cfg->limits, out, &res, err, errlen);
        if (st != TK_OK && res.exited && res.exit_code == 2) {
            char *nl = strchr(res.stderr_head, '\n');
            snprintf(err, errlen, "the DOCX file was refused: %.*s",
                     nl ? (int)(nl - res.stderr_head) : (int)strlen(res.stderr_head),
                     res.stderr_head);
            st = TK_EINVAL;
        }
        return st;
    }
    snprintf(err, errlen, "no isolated extractor for %s", utopia_format_name(fmt));
    return TK_EINVAL;
}

void utopia_local_extractor(utopia_extractor *x, const utopia_local_config *cfg)
{
    x->run = local_run;
    x->ud = (void *)cfg;
}
