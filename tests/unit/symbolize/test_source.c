/* tests/unit/symbolize: symbolize/source.c — source files from
 * --ui.source-dir: suffix and prefix lookups, and nothing outside the
 * directories ever read (".." paths, symlinks out, a prefix that is not a
 * whole component), the size cap, a non-text file, UTF-8 repair, and the
 * "tried" text. debuginfod itself: e2e_source_debuginfod. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../pd_test.h"
#include "symbolize/source.h"

static char root[PATH_MAX], srcdir[PATH_MAX + 32], secret[PATH_MAX + 32];

static void put(const char *path, const char *text, size_t len)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(text, 1, len, f), len);
    fclose(f);
}

static int setup(void **state)
{
    (void)state;
    snprintf(root, sizeof root, "/tmp/pd-test-source-XXXXXX");
    assert_non_null(mkdtemp(root));
    char p[PATH_MAX + 100];
    snprintf(srcdir, sizeof srcdir, "%s/src", root);
    assert_int_equal(mkdir(srcdir, 0755), 0);
    snprintf(p, sizeof p, "%s/app", srcdir);
    assert_int_equal(mkdir(p, 0755), 0);
    snprintf(p, sizeof p, "%s/app/main.go", srcdir);
    put(p, "package main\n", 13);
    /* a secret beside the source dir, and ways to point at it from inside */
    snprintf(secret, sizeof secret, "%s/secret.txt", root);
    put(secret, "TOP SECRET\n", 11);
    snprintf(p, sizeof p, "%s/link.go", srcdir);
    assert_int_equal(symlink(secret, p), 0);
    snprintf(p, sizeof p, "%s/updir", srcdir);
    assert_int_equal(symlink("..", p), 0);
    snprintf(p, sizeof p, "%s/bin.c", srcdir);
    put(p, "a\0b", 3);
    snprintf(p, sizeof p, "%s/latin1.c", srcdir);
    put(p, "caf\xe9\n", 5);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[PATH_MAX + 20];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
    return system(cmd) == 0 ? 0 : -1;
}

/* Looks path up in dirs with no debuginfod; returns the code, fills f/tried. */
static int find(const pd_source_dir *dirs, size_t n, const char *path, size_t max,
                pd_source_file *f, pd_buf *tried)
{
    pd_source_opts o = {.dirs = dirs, .n_dirs = n, .use_debuginfod = false, .max_bytes = max};
    pd_buf_reset(tried);
    return pd_source_find(&o, NULL, 0, path, f, tried);
}

static void test_suffix_and_prefix(void **state)
{
    (void)state;
    pd_buf tried;
    pd_buf_init(&tried, 0);
    pd_source_file f;
    pd_source_dir any = {NULL, srcdir};
    /* the path where it was built: found by its suffix app/main.go */
    assert_int_equal(find(&any, 1, "/home/ci/build/app/main.go", 0, &f, &tried), 0);
    assert_string_equal(f.text, "package main\n");
    assert_string_equal(f.origin, "directory");
    char want[PATH_MAX + 64];
    snprintf(want, sizeof want, "%s/app/main.go", srcdir);
    char real[PATH_MAX];
    assert_non_null(realpath(want, real));
    assert_string_equal(f.where, real);
    pd_source_file_release(&f);
    /* relative names too */
    assert_int_equal(find(&any, 1, "app/main.go", 0, &f, &tried), 0);
    pd_source_file_release(&f);
    /* a prefix maps a whole tree: /build/x/... -> DIR/... */
    pd_source_dir pre = {"/build/x", srcdir};
    assert_int_equal(find(&pre, 1, "/build/x/app/main.go", 0, &f, &tried), 0);
    pd_source_file_release(&f);
    /* only under the prefix, and by whole components */
    assert_int_equal(find(&pre, 1, "/build/xy/app/main.go", 0, &f, &tried), PD_ENOTFOUND);
    assert_non_null(strstr(tried.data, "not under the prefix"));
    assert_int_equal(find(&pre, 1, "/other/app/main.go", 0, &f, &tried), PD_ENOTFOUND);
    /* missing: said, naming the dir */
    assert_int_equal(find(&any, 1, "/x/nothere.go", 0, &f, &tried), PD_ENOTFOUND);
    assert_non_null(strstr(tried.data, "no nothere.go under it"));
    assert_int_equal(find(NULL, 0, "/x/nothere.go", 0, &f, &tried), PD_ENOTFOUND);
    assert_non_null(strstr(tried.data, "no --ui.source-dir configured"));
    pd_buf_release(&tried);
}

static void test_never_outside(void **state)
{
    (void)state;
    pd_buf tried;
    pd_buf_init(&tried, 0);
    pd_source_file f;
    pd_source_dir any = {NULL, srcdir};
    pd_source_dir pre = {"/build", srcdir};
    char p[PATH_MAX + 64];
    /* ".." anywhere in the path: never looked up */
    static const char *const dotdot[] = {"../secret.txt", "/a/../../secret.txt", "..",
                                         "/build/../secret.txt", "app/../../secret.txt"};
    for (size_t i = 0; i < sizeof dotdot / sizeof *dotdot; i++) {
        assert_int_equal(find(&any, 1, dotdot[i], 0, &f, &tried), PD_ENOTFOUND);
        assert_non_null(strstr(tried.data, "\"..\" component (refused)"));
        assert_int_equal(find(&pre, 1, dotdot[i], 0, &f, &tried), PD_ENOTFOUND);
    }
    /* a file name that starts with two dots is a name, not a step up */
    snprintf(p, sizeof p, "%s/..hidden.c", srcdir);
    put(p, "x\n", 2);
    assert_int_equal(find(&any, 1, "/w/..hidden.c", 0, &f, &tried), 0);
    pd_source_file_release(&f);
    /* a symlink inside the dir pointing out of it: refused on what was opened */
    assert_int_equal(find(&any, 1, "/w/link.go", 0, &f, &tried), PD_ENOTFOUND);
    assert_non_null(strstr(tried.data, "outside"));
    assert_non_null(strstr(tried.data, "(refused)"));
    /* a directory symlink to the parent, then the secret's name */
    assert_int_equal(find(&any, 1, "updir/secret.txt", 0, &f, &tried), PD_ENOTFOUND);
    assert_int_equal(find(&pre, 1, "/build/updir/secret.txt", 0, &f, &tried), PD_ENOTFOUND);
    /* absolute path of the secret itself: only suffixes under the dir are tried */
    assert_int_equal(find(&any, 1, secret, 0, &f, &tried), PD_ENOTFOUND);
    assert_int_equal(find(&any, 1, "/etc/passwd", 0, &f, &tried), PD_ENOTFOUND);
    /* the source dir given through a symlink still works (real paths compared) */
    char alias[PATH_MAX + 20];
    snprintf(alias, sizeof alias, "%s/alias", root);
    assert_int_equal(symlink(srcdir, alias), 0);
    pd_source_dir via = {NULL, alias};
    assert_int_equal(find(&via, 1, "/b/app/main.go", 0, &f, &tried), 0);
    pd_source_file_release(&f);
    pd_buf_release(&tried);
}

static void test_caps_and_text(void **state)
{
    (void)state;
    pd_buf tried;
    pd_buf_init(&tried, 0);
    pd_source_file f;
    pd_source_dir any = {NULL, srcdir};
    /* over the cap: skipped and said */
    assert_int_equal(find(&any, 1, "app/main.go", 5, &f, &tried), PD_ENOTFOUND);
    assert_non_null(strstr(tried.data, "13 bytes, over the 5-byte cap"));
    /* a NUL byte: not text */
    assert_int_equal(find(&any, 1, "bin.c", 0, &f, &tried), PD_ENOTFOUND);
    assert_non_null(strstr(tried.data, "not a text file"));
    /* bad UTF-8 becomes U+FFFD */
    assert_int_equal(find(&any, 1, "latin1.c", 0, &f, &tried), 0);
    assert_string_equal(f.text, "caf\xef\xbf\xbd\n");
    assert_int_equal(f.len, 7);
    pd_source_file_release(&f);
    /* no path at all */
    assert_int_equal(find(&any, 1, "", 0, &f, &tried), PD_ENOTFOUND);
    assert_non_null(strstr(tried.data, "names no source file"));
    pd_buf_release(&tried);
}

static void test_dir_parse(void **state)
{
    (void)state;
    pd_source_dir d;
    char a[] = "/src", b[] = "/build/app=/src/app", c[] = "rel=/x", e[] = "", g[] = "/p=";
    assert_int_equal(pd_source_dir_parse(a, &d), 0);
    assert_null(d.prefix);
    assert_string_equal(d.dir, "/src");
    assert_int_equal(pd_source_dir_parse(b, &d), 0);
    assert_string_equal(d.prefix, "/build/app");
    assert_string_equal(d.dir, "/src/app");
    assert_int_equal(pd_source_dir_parse(c, &d), PD_EINVAL);
    assert_int_equal(pd_source_dir_parse(e, &d), PD_EINVAL);
    assert_int_equal(pd_source_dir_parse(g, &d), PD_EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_suffix_and_prefix),
        cmocka_unit_test(test_never_outside),
        cmocka_unit_test(test_caps_and_text),
        cmocka_unit_test(test_dir_parse),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
