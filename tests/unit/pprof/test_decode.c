/* Unit tests of src/pprof/decode.c (and the decode entry point of pprof.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include "../pd_test.h"

#include "mini_test.h"

static void decode_mini(const mini_opts *o, pd_profile *p, int want_rc, pd_err *err)
{
    pd_buf b;
    pd_buf_init(&b, 0);
    mini_build(&b, o);
    int rc = pd_profile_decode(p, (const uint8_t *)b.data, b.len, NULL, err);
    if (rc != want_rc)
        fail_msg("decode rc %d (%s), want %d", rc, err->msg, want_rc);
    pd_buf_release(&b);
}

static void test_testdata_all_decode(void **state)
{
    (void)state;
    size_t n;
    char **files = testdata_files(&n);
    /* README: 7 once + 30 heap + 10 cpu series + 2 node */
    assert_true(n >= 49);
    for (size_t i = 0; i < n; i++) {
        pd_buf b;
        pd_profile p;
        pd_err err = {{0}};
        pd_buf_init(&b, 0);
        assert_int_equal(read_whole(files[i], &b), 0);
        int rc = pd_profile_decode(&p, (const uint8_t *)b.data, b.len, NULL, &err);
        if (rc)
            fail_msg("%s: %s", files[i], err.msg);
        assert_true(p.n_sample_type >= 1);
        assert_true(p.n_string >= 1);
        assert_string_equal(p.string_table[0], "");
        for (size_t s = 0; s < p.n_sample; s++)
            for (size_t k = 0; k < p.sample[s].n_location; k++)
                assert_non_null(pd_profile_location(&p, p.sample[s].location_id[k]));
        pd_profile_release(&p);
        pd_buf_release(&b);
    }
    free_list(files);
}

/* Facts below were read from `go tool pprof -raw` of the same file. */
static void test_go_heap_known_content(void **state)
{
    (void)state;
    pd_profile p;
    pd_err err = {{0}};
    assert_int_equal(load_profile("go-demo-once/heap.pb.gz", &p, &err), 0);
    const char *types[] = {"alloc_objects", "count", "alloc_space", "bytes",
                           "inuse_objects", "count", "inuse_space", "bytes"};
    assert_int_equal(p.n_sample_type, 4);
    for (size_t i = 0; i < 4; i++) {
        assert_string_equal(pd_profile_str(&p, p.sample_type[i].type), types[2 * i]);
        assert_string_equal(pd_profile_str(&p, p.sample_type[i].unit), types[2 * i + 1]);
    }
    assert_string_equal(pd_profile_str(&p, p.period_type.type), "space");
    assert_string_equal(pd_profile_str(&p, p.period_type.unit), "bytes");
    assert_int_equal(p.period, 524288);
    assert_int_equal(p.n_sample, 11);
    /* "Time: 2026-11-22 11:37:58.258140998 +0000 UTC"; date -d gives 1795347478 s */
    assert_int_equal(p.time_nanos, 1795347478258140998LL);
    /* pprof -raw shows only the used mapping 1 (the main binary); the file
     * also lists libc, vdso, ld.so and vsyscall */
    assert_int_equal(p.n_mapping, 5);
    const pd_pprof_mapping *m = pd_profile_mapping(&p, 1);
    assert_non_null(m);
    assert_string_equal(pd_profile_str(&p, m->filename), "/tmp/feas/godemo/godemo");
    assert_int_equal(m->memory_start, 0x400000);
    assert_int_equal(m->memory_limit, 0x672000);
    /* "162 2662613 162 2662613: 2  bytes:[16384]", location 2 = main.leaker main.go:33 */
    int found = 0;
    for (size_t i = 0; i < p.n_sample; i++) {
        const pd_pprof_sample *s = &p.sample[i];
        if (s->value[1] != 2662613)
            continue;
        found = 1;
        assert_int_equal(s->value[0], 162);
        assert_int_equal(s->value[3], 2662613);
        assert_int_equal(s->n_location, 1);
        const pd_pprof_location *l = pd_profile_location(&p, s->location_id[0]);
        assert_non_null(l);
        assert_int_equal(l->address, 0x670ea4);
        assert_int_equal(l->mapping_id, 1);
        assert_int_equal(l->n_line, 1);
        assert_int_equal(l->line[0].line, 33);
        const pd_pprof_function *f = pd_profile_function(&p, l->line[0].function_id);
        assert_non_null(f);
        assert_string_equal(pd_profile_str(&p, f->name), "main.leaker");
        assert_string_equal(pd_profile_str(&p, f->filename), "/tmp/feas/godemo/main.go");
        assert_int_equal(s->n_label, 1);
        assert_string_equal(pd_profile_str(&p, s->label[0].key), "bytes");
        assert_int_equal(s->label[0].num, 16384);
    }
    assert_true(found);
    pd_profile_release(&p);
}

static void test_node_cpu_known_content(void **state)
{
    (void)state;
    pd_profile p;
    pd_err err = {{0}};
    assert_int_equal(load_profile("node/node-cpu.pb.gz", &p, &err), 0);
    assert_int_equal(p.n_sample_type, 2);
    assert_string_equal(pd_profile_str(&p, p.sample_type[0].type), "sample");
    assert_string_equal(pd_profile_str(&p, p.sample_type[1].type), "wall");
    assert_string_equal(pd_profile_str(&p, p.sample_type[1].unit), "nanoseconds");
    assert_int_equal(p.period, 1166000);
    /* pprof -raw: "Duration: 2.00" (%.4v of a time.Duration: 2.00x s) */
    assert_true(p.duration_nanos >= 2000000000 && p.duration_nanos < 2010000000);
    /* no mappings in the file: pprof -raw shows a fake one it adds itself */
    assert_int_equal(p.n_mapping, 0);
    pd_profile_release(&p);
}

static void test_hand_built(void **state)
{
    (void)state;
    pd_profile p;
    pd_err err = {{0}};
    mini_opts o = {0};
    decode_mini(&o, &p, 0, &err);
    assert_int_equal(p.n_sample_type, 2);
    assert_int_equal(p.n_sample, 2);
    assert_int_equal(p.n_mapping, 1);
    assert_int_equal(p.n_location, 2);
    assert_int_equal(p.n_function, 2);
    assert_int_equal(p.n_string, 13);
    assert_int_equal(p.time_nanos, 1234);
    assert_int_equal(p.duration_nanos, 5678);
    assert_int_equal(p.period, 10);
    assert_string_equal(pd_profile_str(&p, p.period_type.type), "cpu");
    assert_int_equal(p.n_comment, 1);
    assert_string_equal(pd_profile_str(&p, p.comment[0]), "a comment");
    assert_string_equal(pd_profile_str(&p, p.default_sample_type), "cpu");
    const pd_pprof_sample *s = &p.sample[0];
    assert_int_equal(s->n_location, 2);
    assert_int_equal(s->location_id[0], 2);
    assert_int_equal(s->location_id[1], 1);
    assert_int_equal(s->n_value, 2);
    assert_int_equal(s->value[0], 1);
    assert_int_equal(s->value[1], 100);
    assert_int_equal(s->n_label, 2);
    assert_string_equal(pd_profile_str(&p, s->label[0].key), "key");
    assert_string_equal(pd_profile_str(&p, s->label[0].str), "val");
    assert_int_equal(s->label[1].num, 64);
    assert_string_equal(pd_profile_str(&p, s->label[1].num_unit), "bytes");
    const pd_pprof_location *l = pd_profile_location(&p, 2);
    assert_non_null(l);
    assert_int_equal(l->address, 0x2020);
    assert_int_equal(l->n_line, 2);
    assert_int_equal(l->line[0].function_id, 2);
    assert_int_equal(l->line[1].line, 11);
    const pd_pprof_mapping *m = pd_profile_mapping(&p, 1);
    assert_non_null(m);
    assert_int_equal(m->memory_limit, 0x9000);
    assert_true(m->has_functions);
    assert_false(m->has_filenames);
    const pd_pprof_function *f = pd_profile_function(&p, 1);
    assert_int_equal(f->start_line, 3);
    assert_string_equal(pd_profile_str(&p, f->system_name), "main");
    assert_null(pd_profile_location(&p, 3));
    pd_profile_release(&p);
}

static void test_packed_and_unpacked_agree(void **state)
{
    (void)state;
    pd_profile a, b;
    pd_err err = {{0}};
    mini_opts packed = {0}, unpacked = {.unpacked = 1};
    decode_mini(&packed, &a, 0, &err);
    decode_mini(&unpacked, &b, 0, &err);
    assert_int_equal(b.sample[0].n_location, 2);
    assert_int_equal(b.sample[0].location_id[0], 2);
    assert_int_equal(b.sample[1].value[1], 200);
    assert_int_equal(b.n_comment, 1);
    assert_true(pd_profile_equal(&a, &b, &err));
    pd_profile_release(&a);
    pd_profile_release(&b);
}

static void test_mixed_packed_unpacked_concatenate(void **state)
{
    (void)state;
    /* one sample: location ids 5 (unpacked), then packed [6 7], then 8 unpacked */
    pd_buf b, m;
    pd_buf_init(&b, 0);
    pd_buf_init(&m, 0);
    pb_u(&m, 1, 1);
    pb_msg(&b, 1, &m);
    pb_u(&m, 1, 5);
    uint64_t ids[] = {6, 7};
    pb_packed(&m, 1, ids, 2);
    pb_u(&m, 1, 8);
    pb_u(&m, 2, (uint64_t)-3); /* negative int64: 10-byte varint */
    pb_msg(&b, 2, &m);
    for (uint64_t id = 5; id <= 8; id++) {
        pb_u(&m, 1, id);
        pb_msg(&b, 4, &m);
    }
    pb_str(&b, 6, "");
    pb_str(&b, 6, "x");
    pd_profile p;
    pd_err err = {{0}};
    PD_ASSERT_OK(pd_profile_decode(&p, (const uint8_t *)b.data, b.len, NULL, &err), &err);
    assert_int_equal(p.sample[0].n_location, 4);
    for (size_t i = 0; i < 4; i++)
        assert_int_equal(p.sample[0].location_id[i], 5 + i);
    assert_int_equal(p.sample[0].value[0], -3);
    pd_profile_release(&p);
    pd_buf_release(&b);
    pd_buf_release(&m);
}

static void test_unknown_fields_skipped(void **state)
{
    (void)state;
    pd_profile a, b;
    pd_err err = {{0}};
    mini_opts plain = {0}, unk = {.unknown_fields = 1};
    decode_mini(&plain, &a, 0, &err);
    decode_mini(&unk, &b, 0, &err);
    /* the wrongly typed time_nanos at the end was skipped, not taken */
    assert_int_equal(b.time_nanos, 1234);
    assert_true(pd_profile_equal(&a, &b, &err));
    pd_profile_release(&a);
    pd_profile_release(&b);
}

static void expect_parse_error(const pd_buf *b, const char *needle)
{
    pd_profile p;
    pd_err err = {{0}};
    int rc = pd_profile_decode(&p, (const uint8_t *)b->data, b->len, NULL, &err);
    if (rc != PD_EPARSE)
        fail_msg("rc %d (%s), want PD_EPARSE", rc, err.msg);
    if (!strstr(err.msg, needle))
        fail_msg("message \"%s\" lacks \"%s\"", err.msg, needle);
}

static void test_malformed_wire(void **state)
{
    (void)state;
    pd_buf b;
    pd_buf_init(&b, 0);

    pb_tag(&b, 50, 3); /* start group */
    expect_parse_error(&b, "wire type");
    pd_buf_reset(&b);

    pb_tag(&b, 2, 2); /* sample: length 100, 3 bytes follow */
    pb_varint(&b, 100);
    pd_buf_append(&b, "\x08\x01\x08", 3);
    expect_parse_error(&b, "length 100 runs past the end");
    pd_buf_reset(&b);

    pb_tag(&b, 9, 0); /* truncated varint */
    pd_buf_append(&b, "\xff\xff", 2);
    expect_parse_error(&b, "truncated varint");
    pd_buf_reset(&b);

    pb_tag(&b, 9, 0); /* 11-byte varint */
    pd_buf_append(&b, "\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01", 11);
    expect_parse_error(&b, "longer than 10 bytes");
    pd_buf_reset(&b);

    pd_buf_append(&b, "\x00", 1); /* field number 0 */
    expect_parse_error(&b, "field number 0");
    pd_buf_reset(&b);

    pb_tag(&b, 77, 1); /* truncated fixed64 */
    pd_buf_append(&b, "1234", 4);
    expect_parse_error(&b, "truncated fixed-width");
    pd_buf_reset(&b);

    /* packed location ids ending in a dangling continuation byte, inside a sample */
    pd_buf m;
    pd_buf_init(&m, 0);
    pb_tag(&m, 1, 2);
    pb_varint(&m, 2);
    pd_buf_append(&m, "\x01\x81", 2);
    pb_msg(&b, 2, &m);
    expect_parse_error(&b, "sample 0");
    pd_buf_release(&m);
    pd_buf_release(&b);
}

static void test_empty_and_validation_via_decode(void **state)
{
    (void)state;
    pd_profile p;
    pd_err err = {{0}};
    /* an empty message has no string_table[0] (Go's parser rejects it too) */
    assert_int_equal(pd_profile_decode(&p, (const uint8_t *)"", 0, NULL, &err), PD_EINVAL);
    assert_non_null(strstr(err.msg, "string_table[0]"));
    mini_opts o = {.bad_loc = 1};
    decode_mini(&o, &p, PD_EINVAL, &err);
    assert_string_equal(err.msg, "sample 1: location id 99 not found");
    /* failure leaves nothing to free; release is still safe */
    pd_profile_release(&p);
}

/* gunzips a testdata file into raw protobuf */
static void load_raw(const char *rel, pd_buf *raw)
{
    char path[4096];
    pd_buf gz;
    pd_err err = {{0}};
    pd_buf_init(&gz, 0);
    snprintf(path, sizeof path, "%s/pprof/%s", PD_TESTDATA, rel);
    assert_int_equal(read_whole(path, &gz), 0);
    PD_ASSERT_OK(pd_gunzip((const uint8_t *)gz.data, gz.len, 1u << 30, raw, &err), &err);
    pd_buf_release(&gz);
}

static void test_truncated_bodies(void **state)
{
    (void)state;
    pd_buf raw;
    pd_buf_init(&raw, 0);
    load_raw("go-demo-once/goroutine.pb.gz", &raw);
    size_t fails = 0;
    for (size_t len = 0; len <= raw.len; len++) {
        pd_profile p;
        pd_err err = {{0}};
        /* copy so that ASan sees reads past the prefix */
        uint8_t *copy = malloc(len ? len : 1);
        memcpy(copy, raw.data, len);
        int rc = pd_profile_decode(&p, copy, len, NULL, &err);
        free(copy);
        if (len == raw.len)
            assert_int_equal(rc, 0);
        else if (len + 1 == raw.len) /* the last field loses its last byte */
            assert_int_equal(rc, PD_EPARSE);
        if (rc == 0)
            pd_profile_release(&p);
        else {
            assert_true(rc == PD_EPARSE || rc == PD_EINVAL);
            assert_true(err.msg[0] != '\0');
            fails++;
        }
    }
    assert_true(fails > raw.len / 2);
    pd_buf_release(&raw);

    /* truncated gzip: every prefix of the compressed file fails */
    char path[4096];
    pd_buf gz;
    pd_buf_init(&gz, 0);
    snprintf(path, sizeof path, "%s/pprof/go-demo-once/mutex.pb.gz", PD_TESTDATA);
    assert_int_equal(read_whole(path, &gz), 0);
    for (size_t len = 2; len < gz.len; len++) {
        pd_profile p;
        pd_err err = {{0}};
        int rc = pd_profile_decode(&p, (const uint8_t *)gz.data, len, NULL, &err);
        if (rc != PD_EPARSE)
            fail_msg("gzip prefix %zu/%zu: rc %d (%s)", len, gz.len, rc, err.msg);
    }
    pd_buf_release(&gz);
}

static uint64_t rng_state = 0x9e3779b97f4a7c15ULL;
static uint64_t rnd(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

static void check_any(const uint8_t *data, size_t len)
{
    pd_profile p;
    pd_err err = {{0}};
    int rc = pd_profile_decode(&p, data, len, NULL, &err);
    if (rc == 0) {
        /* whatever decoded must re-encode and decode to an equal profile */
        pd_buf out;
        pd_profile q;
        pd_buf_init(&out, 0);
        assert_int_equal(pd_profile_encode(&p, false, &out), 0);
        PD_ASSERT_OK(pd_profile_decode(&q, (const uint8_t *)out.data, out.len, NULL, &err), &err);
        assert_true(pd_profile_equal(&p, &q, &err));
        pd_profile_release(&q);
        pd_profile_release(&p);
        pd_buf_release(&out);
    } else {
        assert_true(rc == PD_EPARSE || rc == PD_EINVAL || rc == PD_ETOOBIG);
        assert_true(err.msg[0] != '\0');
    }
}

static void test_random_garbage(void **state)
{
    (void)state;
    uint8_t buf[600];
    for (int i = 0; i < 3000; i++) {
        size_t len = rnd() % sizeof buf;
        for (size_t j = 0; j < len; j++)
            buf[j] = (uint8_t)rnd();
        if (i % 3 == 0 && len >= 2) /* also through gunzip */
            buf[0] = 0x1f, buf[1] = 0x8b;
        check_any(buf, len);
    }
    /* mutations of a real profile: flip random bytes */
    pd_buf raw;
    pd_buf_init(&raw, 0);
    load_raw("go-demo-once/heap.pb.gz", &raw);
    uint8_t *m = malloc(raw.len);
    for (int i = 0; i < 1500; i++) {
        memcpy(m, raw.data, raw.len);
        int flips = 1 + (int)(rnd() % 4);
        for (int k = 0; k < flips; k++)
            m[rnd() % raw.len] = (uint8_t)rnd();
        check_any(m, raw.len);
    }
    free(m);
    pd_buf_release(&raw);
}

static void expect_cap(const char *rel, const pd_buf *body, pd_pprof_limits lim, const char *needle)
{
    pd_profile p;
    pd_err err = {{0}};
    int rc = pd_profile_decode(&p, (const uint8_t *)body->data, body->len, &lim, &err);
    if (rc != PD_ETOOBIG)
        fail_msg("%s: rc %d (%s), want PD_ETOOBIG naming %s", rel, rc, err.msg, needle);
    if (!strstr(err.msg, needle))
        fail_msg("%s: message \"%s\" lacks \"%s\"", rel, err.msg, needle);
}

static void expect_ok(const pd_buf *body, pd_pprof_limits lim)
{
    pd_profile p;
    pd_err err = {{0}};
    int rc = pd_profile_decode(&p, (const uint8_t *)body->data, body->len, &lim, &err);
    if (rc)
        fail_msg("rc %d (%s), want 0", rc, err.msg);
    pd_profile_release(&p);
}

static void test_caps(void **state)
{
    (void)state;
    const char *rel = "go-demo-once/heap.pb.gz";
    char path[4096];
    pd_buf gz, raw;
    pd_buf_init(&gz, 0);
    pd_buf_init(&raw, 0);
    snprintf(path, sizeof path, "%s/pprof/%s", PD_TESTDATA, rel);
    assert_int_equal(read_whole(path, &gz), 0);
    load_raw(rel, &raw);

    pd_profile p;
    pd_err err = {{0}};
    PD_ASSERT_OK(pd_profile_decode(&p, (const uint8_t *)gz.data, gz.len, NULL, &err), &err);
    size_t depth = 0;
    for (size_t i = 0; i < p.n_sample; i++)
        if (p.sample[i].n_location > depth)
            depth = p.sample[i].n_location;
    size_t n_loc = p.n_location, n_fn = p.n_function, n_str = p.n_string, n_lines = 0;
    for (size_t i = 0; i < p.n_location; i++)
        n_lines += p.location[i].n_line;
    pd_profile_release(&p);
    assert_true(depth > 1 && n_loc > 1 && n_fn > 1 && n_str > 1 && n_lines > 1);

    pd_pprof_limits lim;
#define AT(field, val) (lim = (pd_pprof_limits){0}, lim.field = (val), lim)
    /* 11 samples: from go tool pprof -raw */
    expect_cap(rel, &gz, AT(max_samples, 10), "max_samples=10");
    expect_ok(&gz, AT(max_samples, 11));
    expect_cap(rel, &gz, AT(max_sample_types, 3), "max_sample_types=3");
    expect_ok(&gz, AT(max_sample_types, 4));
    expect_cap(rel, &gz, AT(max_stack_depth, depth - 1), "max_stack_depth");
    expect_ok(&gz, AT(max_stack_depth, depth));
    expect_cap(rel, &gz, AT(max_locations, n_loc - 1), "max_locations");
    expect_ok(&gz, AT(max_locations, n_loc));
    expect_cap(rel, &gz, AT(max_functions, n_fn - 1), "max_functions");
    expect_cap(rel, &gz, AT(max_strings, n_str - 1), "max_strings");
    expect_cap(rel, &gz, AT(max_lines, n_lines - 1), "max_lines");
    expect_ok(&gz, AT(max_lines, n_lines));
    expect_cap(rel, &gz, AT(max_body_bytes, gz.len - 1), "max_body_bytes");
    expect_ok(&gz, AT(max_body_bytes, gz.len));
    expect_cap(rel, &gz, AT(max_decompressed_bytes, raw.len - 1), "max_decompressed_bytes");
    expect_ok(&gz, AT(max_decompressed_bytes, raw.len));
    expect_cap(rel, &raw, AT(max_decompressed_bytes, raw.len - 1), "max_decompressed_bytes");

    pd_buf b;
    pd_buf_init(&b, 0);
    mini_opts o = {.n_labels = 3, .extra_mapping = 1}; /* 5 labels on sample 0, 2 mappings */
    mini_build(&b, &o);
    expect_cap("mini", &b, AT(max_labels_per_sample, 4), "max_labels_per_sample=4");
    expect_ok(&b, AT(max_labels_per_sample, 5));
    expect_cap("mini", &b, AT(max_mappings, 1), "max_mappings=1");
    expect_ok(&b, AT(max_mappings, 2));
#undef AT
    pd_buf_release(&b);
    pd_buf_release(&gz);
    pd_buf_release(&raw);
}

static void test_limits_default(void **state)
{
    (void)state;
    pd_pprof_limits l = pd_pprof_limits_default();
    assert_int_equal(l.max_body_bytes, 16u << 20);
    assert_int_equal(l.max_decompressed_bytes, 64u << 20);
    assert_int_equal(l.max_samples, 1000000);
    assert_int_equal(l.max_mappings, 10000);
    assert_int_equal(l.max_sample_types, 64);
    assert_int_equal(l.max_stack_depth, 4096);
    assert_int_equal(l.max_labels_per_sample, 1024);
    assert_true(l.max_lines > 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_testdata_all_decode),
        cmocka_unit_test(test_go_heap_known_content),
        cmocka_unit_test(test_node_cpu_known_content),
        cmocka_unit_test(test_hand_built),
        cmocka_unit_test(test_packed_and_unpacked_agree),
        cmocka_unit_test(test_mixed_packed_unpacked_concatenate),
        cmocka_unit_test(test_unknown_fields_skipped),
        cmocka_unit_test(test_malformed_wire),
        cmocka_unit_test(test_empty_and_validation_via_decode),
        cmocka_unit_test(test_truncated_bodies),
        cmocka_unit_test(test_random_garbage),
        cmocka_unit_test(test_caps),
        cmocka_unit_test(test_limits_default),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
