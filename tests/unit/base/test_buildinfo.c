/*
 * tests/unit/base/test_buildinfo.c — base/buildinfo.c: the --version text in
 * Prometheus' layout and profd_build_info's label string (escaping, cut).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "base/buildinfo.h"

static const pd_build_info BI = {.version = "1.2.3-rc.1",
                                 .revision = "0123456789abcdef0123456789abcdef01234567",
                                 .branch = "main",
                                 .build_user = "alice@host",
                                 .build_date = "20261127-15:35:16",
                                 .compiler = "gcc 12.2.0",
                                 .platform = "linux/amd64"};

static void test_text(void **state)
{
    (void)state;
    pd_buf b;
    pd_buf_init(&b, 0);
    assert_int_equal(pd_build_info_write_text(&BI, "profd", &b), 0);
    assert_int_equal(pd_buf_putc(&b, 0), 0);
    assert_string_equal(b.data, "profd, version 1.2.3-rc.1 (branch: main, revision: "
                                "0123456789abcdef0123456789abcdef01234567)\n"
                                "  build user:       alice@host\n"
                                "  build date:       20261127-15:35:16\n"
                                "  compiler:         gcc 12.2.0\n"
                                "  platform:         linux/amd64\n");
    pd_buf_release(&b);
}

static void test_labels(void **state)
{
    (void)state;
    char out[512];
    size_t n = pd_build_info_labels(&BI, out, sizeof out);
    assert_int_equal(n, strlen(out));
    assert_string_equal(out, "branch=\"main\",compiler=\"gcc 12.2.0\",platform=\"linux/amd64\","
                             "revision=\"0123456789abcdef0123456789abcdef01234567\","
                             "version=\"1.2.3-rc.1\"");
    /* a value with a quote, a backslash and a newline (an override) */
    pd_build_info odd = BI;
    odd.branch = "a\"b\\c\nd";
    n = pd_build_info_labels(&odd, out, sizeof out);
    assert_int_equal(n, strlen(out));
    assert_non_null(strstr(out, "branch=\"a\\\"b\\\\c\\nd\","));
    /* cut: the length needed is returned, the output is NUL-terminated */
    char small[16];
    size_t need = pd_build_info_labels(&BI, small, sizeof small);
    assert_true(need >= sizeof small);
    assert_int_equal(strlen(small), sizeof small - 1);
    assert_memory_equal(small, "branch=\"main\",c", 15);
    assert_int_equal(pd_build_info_labels(&BI, NULL, 0),
                     pd_build_info_labels(&BI, out, sizeof out));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_text),
        cmocka_unit_test(test_labels),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
