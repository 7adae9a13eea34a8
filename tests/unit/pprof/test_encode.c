/* Unit tests of src/pprof/encode.c: round trips on real profiles. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include "../pd_test.h"

#include <time.h>

#include "mini_test.h"

static void roundtrip_file(const char *path, bool gzip)
{
    pd_buf in, out, out2;
    pd_profile a, b;
    pd_err err = {{0}};
    pd_buf_init(&in, 0);
    pd_buf_init(&out, 0);
    pd_buf_init(&out2, 0);
    assert_int_equal(read_whole(path, &in), 0);
    if (pd_profile_decode(&a, (const uint8_t *)in.data, in.len, NULL, &err))
        fail_msg("%s: %s", path, err.msg);
    assert_int_equal(pd_profile_encode(&a, gzip, &out), 0);
    assert_int_equal(pd_is_gzip((const uint8_t *)out.data, out.len), gzip);
    if (pd_profile_decode(&b, (const uint8_t *)out.data, out.len, NULL, &err))
        fail_msg("%s re-encoded (%s): %s", path, gzip ? "gzip" : "raw", err.msg);
    if (!pd_profile_equal(&a, &b, &err))
        fail_msg("%s (%s): not equal after round trip: %s", path, gzip ? "gzip" : "raw", err.msg);
    /* the encoding is stable: encoding the decoded copy gives the same bytes */
    assert_int_equal(pd_profile_encode(&b, false, &out2), 0);
    pd_buf_reset(&out);
    assert_int_equal(pd_profile_encode(&a, false, &out), 0);
    assert_int_equal(out.len, out2.len);
    assert_memory_equal(out.data, out2.data, out.len);
    pd_profile_release(&a);
    pd_profile_release(&b);
    pd_buf_release(&in);
    pd_buf_release(&out);
    pd_buf_release(&out2);
}

static void test_roundtrip_all_testdata(void **state)
{
    (void)state;
    size_t n;
    char **files = testdata_files(&n);
    assert_true(n >= 49);
    for (size_t i = 0; i < n; i++) {
        roundtrip_file(files[i], true);
        roundtrip_file(files[i], false);
    }
    free_list(files);
}

static void test_roundtrip_keeps_every_field(void **state)
{
    (void)state;
    pd_buf b, out;
    pd_profile a, c;
    pd_err err = {{0}};
    pd_buf_init(&b, 0);
    pd_buf_init(&out, 0);
    mini_opts o = {.extra_mapping = 1};
    mini_build(&b, &o);
    PD_ASSERT_OK(pd_profile_decode(&a, (const uint8_t *)b.data, b.len, NULL, &err), &err);
    /* set what mini leaves at 0 */
    a.drop_frames = 7;
    a.keep_frames = 5;
    a.doc_url = 8;
    a.mapping[0].file_offset = 0x44;
    a.mapping[0].build_id = 10;
    a.mapping[0].has_filenames = a.mapping[0].has_line_numbers = a.mapping[0].has_inline_frames =
        true;
    a.location[0].is_folded = true;
    a.location[0].line[0].column = 9;
    assert_int_equal(pd_profile_encode(&a, true, &out), 0);
    PD_ASSERT_OK(pd_profile_decode(&c, (const uint8_t *)out.data, out.len, NULL, &err), &err);
    /* ids and string indexes are kept by decode -> encode */
    assert_int_equal(c.n_string, a.n_string);
    for (size_t i = 0; i < a.n_string; i++)
        assert_string_equal(c.string_table[i], a.string_table[i]);
    assert_int_equal(c.drop_frames, 7);
    assert_int_equal(c.keep_frames, 5);
    assert_int_equal(c.doc_url, 8);
    assert_int_equal(c.time_nanos, 1234);
    assert_int_equal(c.duration_nanos, 5678);
    assert_int_equal(c.period, 10);
    assert_int_equal(c.period_type.unit, 4);
    assert_int_equal(c.default_sample_type, 3);
    assert_int_equal(c.n_comment, 1);
    assert_int_equal(c.comment[0], 11);
    assert_int_equal(c.n_mapping, 2);
    const pd_pprof_mapping *m = pd_profile_mapping(&c, 1);
    assert_int_equal(m->file_offset, 0x44);
    assert_int_equal(m->build_id, 10);
    assert_true(m->has_functions && m->has_filenames && m->has_line_numbers &&
                m->has_inline_frames);
    assert_int_equal(pd_profile_mapping(&c, 2)->memory_start, 0x10000);
    const pd_pprof_location *l = pd_profile_location(&c, 1);
    assert_true(l->is_folded);
    assert_int_equal(l->line[0].column, 9);
    assert_int_equal(c.sample[0].label[1].num_unit, 12);
    assert_int_equal(c.sample[0].label[1].num, 64);
    assert_true(pd_profile_equal(&a, &c, &err));
    pd_profile_release(&a);
    pd_profile_release(&c);
    pd_buf_release(&b);
    pd_buf_release(&out);
}

static void test_negative_values_roundtrip(void **state)
{
    (void)state;
    pd_buf b, out;
    pd_profile a, c;
    pd_err err = {{0}};
    pd_buf_init(&b, 0);
    pd_buf_init(&out, 0);
    mini_opts o = {0};
    mini_build(&b, &o);
    PD_ASSERT_OK(pd_profile_decode(&a, (const uint8_t *)b.data, b.len, NULL, &err), &err);
    a.sample[0].value[0] = -5; /* diff profiles carry negative values */
    a.sample[1].value[1] = INT64_MIN;
    a.time_nanos = -1;
    assert_int_equal(pd_profile_encode(&a, false, &out), 0);
    PD_ASSERT_OK(pd_profile_decode(&c, (const uint8_t *)out.data, out.len, NULL, &err), &err);
    assert_int_equal(c.sample[0].value[0], -5);
    assert_int_equal(c.sample[1].value[1], INT64_MIN);
    assert_int_equal(c.time_nanos, -1);
    pd_profile_release(&a);
    pd_profile_release(&c);
    pd_buf_release(&b);
    pd_buf_release(&out);
}

static void test_encode_respects_out_cap(void **state)
{
    (void)state;
    pd_profile p;
    pd_err err = {{0}};
    assert_int_equal(load_profile("go-demo-once/heap.pb.gz", &p, &err), 0);
    for (int gz = 0; gz <= 1; gz++) {
        pd_buf out;
        pd_buf_init(&out, 100);
        assert_int_equal(pd_buf_append(&out, "keep", 4), 0);
        assert_int_equal(pd_profile_encode(&p, gz, &out), PD_ETOOBIG);
        /* what was there before stays */
        assert_int_equal(out.len, 4);
        assert_memory_equal(out.data, "keep", 4);
        pd_buf_release(&out);
    }
    pd_profile_release(&p);
}

static void test_encode_empty_profile(void **state)
{
    (void)state;
    pd_profile p, q;
    pd_buf out;
    pd_err err = {{0}};
    pd_buf_init(&out, 0);
    assert_int_equal(pd_profile_init(&p), 0);
    assert_int_equal(pd_profile_encode(&p, true, &out), 0);
    PD_ASSERT_OK(pd_profile_decode(&q, (const uint8_t *)out.data, out.len, NULL, &err), &err);
    assert_int_equal(q.n_string, 1);
    assert_int_equal(q.n_sample, 0);
    assert_true(pd_profile_equal(&p, &q, &err));
    pd_profile_release(&p);
    pd_profile_release(&q);
    pd_buf_release(&out);
}

/* A synthetic profile as big as a large service's: 40k functions and
 * locations, 100k samples 32 frames deep with random stacks: 12 MB raw,
 * 8 MB gzip, more than a real 2 MB gzip profile holds. */
static void build_large(pd_buf *out)
{
    pd_buf m, l;
    pd_buf_init(&m, 0);
    pd_buf_init(&l, 0);
    const size_t n_fn = 40000, n_samples = 100000, depth = 32;
    pb_u(&m, 1, 1), pb_u(&m, 2, 2);
    pb_msg(out, 1, &m);
    uint64_t x = 88172645463325252ULL;
    for (size_t i = 0; i < n_samples; i++) {
        uint64_t ids[32];
        for (size_t d = 0; d < depth; d++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            ids[d] = 1 + x % n_fn;
        }
        pb_packed(&m, 1, ids, depth);
        uint64_t v = 1 + x % 1000;
        pb_packed(&m, 2, &v, 1);
        pb_msg(out, 2, &m);
    }
    pb_u(&m, 1, 1), pb_u(&m, 2, 0x400000), pb_u(&m, 3, 0x800000), pb_u(&m, 5, 3);
    pb_msg(out, 3, &m);
    for (size_t i = 1; i <= n_fn; i++) {
        pb_u(&m, 1, i), pb_u(&m, 2, 1), pb_u(&m, 3, 0x400000 + i * 16);
        pb_u(&l, 1, i), pb_u(&l, 2, i % 500);
        pb_msg(&m, 4, &l);
        pb_msg(out, 4, &m);
    }
    for (size_t i = 1; i <= n_fn; i++) {
        pb_u(&m, 1, i), pb_u(&m, 2, 3 + i), pb_u(&m, 4, 3);
        pb_msg(out, 5, &m);
    }
    pb_str(out, 6, "");
    pb_str(out, 6, "samples");
    pb_str(out, 6, "count");
    pb_str(out, 6, "/src/main.go");
    char name[64];
    for (size_t i = 1; i <= n_fn; i++) {
        snprintf(name, sizeof name, "github.com/example/service/pkg%zu.(*Type).Method%zu", i % 97,
                 i);
        pb_str(out, 6, name);
    }
    pd_buf_release(&m);
    pd_buf_release(&l);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID,
                  &ts); /* CPU time: other load on the machine does not count */
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void test_large_profile(void **state)
{
    (void)state;
    pd_buf raw, gz, out;
    pd_profile a, b;
    pd_err err = {{0}};
    pd_buf_init(&raw, 0);
    pd_buf_init(&gz, 0);
    pd_buf_init(&out, 0);
    build_large(&raw);
    assert_int_equal(pd_gzip((const uint8_t *)raw.data, raw.len, &gz), 0);
    double t0 = now_s();
    if (pd_profile_decode(&a, (const uint8_t *)gz.data, gz.len, NULL, &err))
        fail_msg("%s", err.msg);
    double t1 = now_s();
    assert_int_equal(a.n_sample, 100000);
    assert_int_equal(pd_profile_encode(&a, true, &out), 0);
    PD_ASSERT_OK(pd_profile_decode(&b, (const uint8_t *)out.data, out.len, NULL, &err), &err);
    assert_true(pd_profile_equal(&a, &b, &err));
    double t2 = now_s();
    print_message(
        "large profile: %zu bytes raw, %zu gzip; decode %.3f s; encode+decode+equal %.3f s\n",
        raw.len, gz.len, t1 - t0, t2 - t1);
    /* linear time, "well under a second of CPU in a normal build", is
     * bench/pprof_codec's figure: no test compares a measured time with a
     * constant (issue 34) */
    pd_profile_release(&a);
    pd_profile_release(&b);
    pd_buf_release(&raw);
    pd_buf_release(&gz);
    pd_buf_release(&out);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_roundtrip_all_testdata),
        cmocka_unit_test(test_roundtrip_keeps_every_field),
        cmocka_unit_test(test_negative_values_roundtrip),
        cmocka_unit_test(test_encode_respects_out_cap),
        cmocka_unit_test(test_encode_empty_profile),
        cmocka_unit_test(test_large_profile),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
