/* Unit tests of src/pprof/gzip.c: gzip/gunzip, caps, gzip bombs. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include "../pd_test.h"
#include <zlib.h>

#include "pb_test.h"

/* gzip of `total` zero bytes, streamed (never holds the input), with zlib
 * directly so the test does not depend on pd_gzip. */
static void gzip_zeros(size_t total, pd_buf *out)
{
    static unsigned char zeros[1 << 20];
    unsigned char tmp[1 << 16];
    z_stream zs;
    memset(&zs, 0, sizeof zs);
    assert_int_equal(deflateInit2(&zs, 9, Z_DEFLATED, 16 + MAX_WBITS, 9, Z_RLE), Z_OK);
    size_t left = total;
    int flush;
    do {
        size_t n = left < sizeof zeros ? left : sizeof zeros;
        left -= n;
        flush = left ? Z_NO_FLUSH : Z_FINISH;
        zs.next_in = zeros;
        zs.avail_in = (uInt)n;
        do {
            zs.next_out = tmp;
            zs.avail_out = sizeof tmp;
            assert_int_not_equal(deflate(&zs, flush), Z_STREAM_ERROR);
            pd_buf_append(out, tmp, sizeof tmp - zs.avail_out);
        } while (zs.avail_out == 0);
    } while (flush != Z_FINISH);
    deflateEnd(&zs);
}

static void test_is_gzip(void **state)
{
    (void)state;
    assert_true(pd_is_gzip((const uint8_t *)"\x1f\x8b\x08", 3));
    assert_true(pd_is_gzip((const uint8_t *)"\x1f\x8b", 2));
    assert_false(pd_is_gzip((const uint8_t *)"\x1f", 1));
    assert_false(pd_is_gzip((const uint8_t *)"", 0));
    assert_false(pd_is_gzip((const uint8_t *)"\x0a\x04", 2));
}

static void test_roundtrip(void **state)
{
    (void)state;
    size_t sizes[] = {0, 1, 100, 65535, 65536, 65537, 1000003};
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        size_t n = sizes[k];
        uint8_t *in = malloc(n + 1);
        uint32_t x = 12345;
        for (size_t i = 0; i < n; i++) {
            x = x * 1103515245u + 12345u;
            in[i] = (uint8_t)(i % 7 == 0 ? x >> 24 : 'a' + i % 3); /* some structure */
        }
        pd_buf gz, out;
        pd_err err = {{0}};
        pd_buf_init(&gz, 0);
        pd_buf_init(&out, 0);
        assert_int_equal(pd_gzip(in, n, &gz), 0);
        assert_true(pd_is_gzip((const uint8_t *)gz.data, gz.len));
        /* zlib's own uncompress (gzip via inflateInit2) agrees */
        PD_ASSERT_OK(pd_gunzip((const uint8_t *)gz.data, gz.len, n, &out, &err), &err);
        assert_int_equal(out.len, n);
        if (n)
            assert_memory_equal(out.data, in, n);
        /* the cap: exactly n is fine, n - 1 is too big */
        if (n) {
            pd_buf_reset(&out);
            assert_int_equal(pd_gunzip((const uint8_t *)gz.data, gz.len, n - 1, &out, &err),
                             PD_ETOOBIG);
            assert_non_null(strstr(err.msg, "max_decompressed_bytes"));
        }
        free(in);
        pd_buf_release(&gz);
        pd_buf_release(&out);
    }
}

static void test_appends(void **state)
{
    (void)state;
    pd_buf gz, out;
    pd_err err = {{0}};
    pd_buf_init(&gz, 0);
    pd_buf_init(&out, 0);
    pd_buf_puts(&out, "head:");
    assert_int_equal(pd_gzip((const uint8_t *)"hello", 5, &gz), 0);
    PD_ASSERT_OK(pd_gunzip((const uint8_t *)gz.data, gz.len, 5, &out, &err), &err);
    assert_string_equal(out.data, "head:hello");
    pd_buf_release(&gz);
    pd_buf_release(&out);
}

static void test_concatenated_members(void **state)
{
    (void)state;
    pd_buf gz, out;
    pd_err err = {{0}};
    pd_buf_init(&gz, 0);
    pd_buf_init(&out, 0);
    assert_int_equal(pd_gzip((const uint8_t *)"abc", 3, &gz), 0);
    assert_int_equal(pd_gzip((const uint8_t *)"defg", 4, &gz), 0);
    PD_ASSERT_OK(pd_gunzip((const uint8_t *)gz.data, gz.len, 100, &out, &err), &err);
    assert_string_equal(out.data, "abcdefg");
    /* the cap counts over all members */
    pd_buf_reset(&out);
    assert_int_equal(pd_gunzip((const uint8_t *)gz.data, gz.len, 6, &out, &err), PD_ETOOBIG);
    pd_buf_release(&gz);
    pd_buf_release(&out);
}

/* The whole-buffer path trusts the trailer's ISIZE only to size its output:
 * a trailer that lies (smaller or larger than the data) is an error, as with
 * zlib alone, and an honest one decodes into exactly the data. */
static void test_isize_lies(void **state)
{
    (void)state;
    char text[3000];
    for (size_t i = 0; i < sizeof text; i++)
        text[i] = (char)('a' + i % 23);
    pd_buf gz, out;
    pd_err err = {{0}};
    pd_buf_init(&gz, 0);
    pd_buf_init(&out, 0);
    assert_int_equal(pd_gzip((const uint8_t *)text, sizeof text, &gz), 0);
    PD_ASSERT_OK(pd_gunzip((const uint8_t *)gz.data, gz.len, sizeof text, &out, &err), &err);
    assert_int_equal(out.len, sizeof text);
    assert_memory_equal(out.data, text, sizeof text);
    uint8_t *isize = (uint8_t *)gz.data + gz.len - 4;
    isize[0] = (uint8_t)(isize[0] - 1); /* one byte short */
    pd_buf_reset(&out);
    assert_int_equal(pd_gunzip((const uint8_t *)gz.data, gz.len, 1 << 20, &out, &err), PD_EPARSE);
    isize[0] = (uint8_t)(isize[0] + 2); /* one byte long */
    pd_buf_reset(&out);
    assert_int_equal(pd_gunzip((const uint8_t *)gz.data, gz.len, 1 << 20, &out, &err), PD_EPARSE);
    pd_buf_release(&gz);
    pd_buf_release(&out);
}

static void test_corrupt(void **state)
{
    (void)state;
    pd_buf gz, out;
    pd_err err = {{0}};
    pd_buf_init(&gz, 0);
    pd_buf_init(&out, 0);
    const char *text = "the quick brown fox jumps over the lazy dog, again and again and again";
    assert_int_equal(pd_gzip((const uint8_t *)text, strlen(text), &gz), 0);

    /* every truncation fails */
    for (size_t len = 0; len < gz.len; len++) {
        pd_buf_reset(&out);
        assert_int_equal(pd_gunzip((const uint8_t *)gz.data, len, 1000, &out, &err), PD_EPARSE);
        assert_true(err.msg[0] != '\0');
    }
    /* trailing garbage */
    pd_buf_append(&gz, "XYZ", 3);
    pd_buf_reset(&out);
    assert_int_equal(pd_gunzip((const uint8_t *)gz.data, gz.len, 1000, &out, &err), PD_EPARSE);
    assert_non_null(strstr(err.msg, "trailing garbage"));
    gz.len -= 3;
    /* a flipped byte in the CRC */
    gz.data[gz.len - 6] ^= 0x55;
    pd_buf_reset(&out);
    assert_int_equal(pd_gunzip((const uint8_t *)gz.data, gz.len, 1000, &out, &err), PD_EPARSE);
    /* not gzip at all */
    pd_buf_reset(&out);
    assert_int_equal(pd_gunzip((const uint8_t *)"plain text", 10, 1000, &out, &err), PD_EPARSE);
    pd_buf_release(&gz);
    pd_buf_release(&out);
}

static void test_output_buffer_cap(void **state)
{
    (void)state;
    pd_buf gz, out;
    pd_err err = {{0}};
    pd_buf_init(&gz, 0);
    pd_buf_init(&out, 10);
    assert_int_equal(pd_gzip((const uint8_t *)"0123456789abcdef", 16, &gz), 0);
    assert_int_equal(pd_gunzip((const uint8_t *)gz.data, gz.len, 1000, &out, &err), PD_ETOOBIG);
    pd_buf_release(&out);
    /* pd_gzip into a buffer too small for the output */
    pd_buf_init(&out, 8);
    assert_int_equal(pd_gzip((const uint8_t *)"0123456789abcdef", 16, &out), PD_ETOOBIG);
    pd_buf_release(&out);
    pd_buf_release(&gz);
}

/* 1 GiB of zeros compressed (about 1 MB): decoding stops at the cap. */
static void test_gzip_bomb(void **state)
{
    (void)state;
    pd_buf bomb, out;
    pd_err err = {{0}};
    pd_buf_init(&bomb, 0);
    pd_buf_init(&out, 0);
    gzip_zeros((size_t)1 << 30, &bomb);
    assert_true(bomb.len < (4u << 20));

    assert_int_equal(pd_gunzip((const uint8_t *)bomb.data, bomb.len, 8u << 20, &out, &err),
                     PD_ETOOBIG);
    assert_true(out.len <= (8u << 20) + 1);
    assert_true(out.cap <= (16u << 20)); /* memory bounded by the cap */
    pd_buf_release(&out);

    pd_profile p;
    int rc = pd_profile_decode(&p, (const uint8_t *)bomb.data, bomb.len, NULL, &err);
    assert_int_equal(rc, PD_ETOOBIG);
    assert_non_null(strstr(err.msg, "max_decompressed_bytes=67108864"));

    /* a bomb made of many small members is capped the same way */
    pd_buf small, multi;
    pd_buf_init(&small, 0);
    pd_buf_init(&multi, 0);
    gzip_zeros(1u << 20, &small);
    for (int i = 0; i < 100; i++)
        pd_buf_append(&multi, small.data, small.len);
    pd_pprof_limits lim = {.max_decompressed_bytes = 50u << 20};
    rc = pd_profile_decode(&p, (const uint8_t *)multi.data, multi.len, &lim, &err);
    assert_int_equal(rc, PD_ETOOBIG);
    pd_buf_release(&small);
    pd_buf_release(&multi);
    pd_buf_release(&bomb);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_is_gzip),           cmocka_unit_test(test_roundtrip),
        cmocka_unit_test(test_appends),           cmocka_unit_test(test_concatenated_members),
        cmocka_unit_test(test_isize_lies),        cmocka_unit_test(test_corrupt),
        cmocka_unit_test(test_output_buffer_cap), cmocka_unit_test(test_gzip_bomb),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
