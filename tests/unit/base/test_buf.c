/* Unit tests of src/base/buf.c: caps, NUL termination, printf, JSON strings. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include <jansson.h>

#include "base/buf.h"
#include "base/error.h"

static void test_cap_is_hard(void **state)
{
    (void)state;
    pd_buf b;
    pd_buf_init(&b, 10);
    assert_null(b.data);
    assert_int_equal(pd_buf_append(&b, "0123456789", 10), 0);
    assert_int_equal(b.len, 10);
    assert_int_equal(pd_buf_putc(&b, 'x'), PD_ETOOBIG);
    assert_int_equal(pd_buf_append(&b, "yz", 2), PD_ETOOBIG);
    assert_int_equal(pd_buf_printf(&b, "%d", 5), PD_ETOOBIG);
    assert_int_equal(pd_buf_puts(&b, ""), 0); /* nothing to add: fine at the cap */
    /* contents kept, still NUL-terminated */
    assert_int_equal(b.len, 10);
    assert_string_equal(b.data, "0123456789");
    /* overflow of len + extra is caught */
    assert_int_equal(pd_buf_reserve(&b, SIZE_MAX), PD_ETOOBIG);
    assert_int_equal(pd_buf_reserve(&b, SIZE_MAX - 5), PD_ETOOBIG);
    pd_buf_reset(&b);
    assert_int_equal(b.len, 0);
    assert_string_equal(b.data, "");
    assert_int_equal(pd_buf_append(&b, "abcdefghij", 10), 0);
    pd_buf_release(&b);
    assert_null(b.data);
    assert_int_equal(b.max, 10); /* release keeps max */

    pd_buf_init(&b, 0);
    assert_int_equal(b.max, SIZE_MAX / 2);
    assert_int_equal(pd_buf_reserve(&b, SIZE_MAX / 2 + 1), PD_ETOOBIG);
    pd_buf_release(&b);
}

static void test_growth_and_nul(void **state)
{
    (void)state;
    pd_buf b;
    pd_buf_init(&b, 0);
    for (int i = 0; i < 10000; i++) {
        assert_int_equal(pd_buf_putc(&b, (char)('a' + i % 26)), 0);
        assert_int_equal(b.data[b.len], '\0');
        assert_true(b.cap > b.len);
    }
    assert_int_equal(b.len, 10000);
    assert_int_equal(b.data[9999], 'a' + 9999 % 26);
    assert_int_equal(pd_buf_printf(&b, "-%s-%05d", "x", 42), 0);
    assert_string_equal(b.data + 10000, "-x-00042");
    size_t len = 0;
    char *d = pd_buf_detach(&b, &len);
    assert_int_equal(len, 10008);
    assert_null(b.data);
    assert_int_equal(b.len, 0);
    free(d);
    /* embedded NULs are kept */
    assert_int_equal(pd_buf_append(&b, "a\0b", 3), 0);
    assert_int_equal(b.len, 3);
    assert_memory_equal(b.data, "a\0b", 3);
    pd_buf_release(&b);
}

static void check_json(const char *s, size_t len)
{
    pd_buf b;
    pd_buf_init(&b, 0);
    assert_int_equal(pd_buf_put_json_string(&b, s, len), 0);
    /* a JSON parser must read back exactly the input */
    json_error_t e;
    json_t *j = json_loadb(b.data, b.len, JSON_DECODE_ANY | JSON_ALLOW_NUL, &e);
    if (!j)
        fail_msg("jansson rejects %s: %s", b.data, e.text);
    assert_true(json_is_string(j));
    assert_int_equal(json_string_length(j), len);
    assert_memory_equal(json_string_value(j), s, len);
    json_decref(j);
    pd_buf_release(&b);
}

static void test_json_string(void **state)
{
    (void)state;
    check_json("", 0);
    check_json("plain", 5);
    check_json("q\"uote\\back/slash", 17);
    check_json("nl\ncr\rtab\tbs\bff\f", 16);
    check_json("\x01\x1f\x7f", 3);
    check_json("nul\0inside", 10);
    check_json("utf-8: h\xc3\xa9llo \xe2\x82\xac", 17);
    pd_buf b;
    pd_buf_init(&b, 0);
    pd_buf_put_json_string(&b, "a\"b", 3);
    assert_string_equal(b.data, "\"a\\\"b\"");
    pd_buf_release(&b);
    /* the cap applies */
    pd_buf_init(&b, 4);
    assert_int_equal(pd_buf_put_json_string(&b, "abcdef", 6), PD_ETOOBIG);
    pd_buf_release(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cap_is_hard),
        cmocka_unit_test(test_growth_and_nul),
        cmocka_unit_test(test_json_string),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
