/* Unit tests of src/ingest/jfr.c on a real recording (testdata/hot.jfr:
 * OpenJDK 17, -XX:StartFlightRecording settings=profile, tests/e2e/jfr/Hot.java
 * for 1 s; `jfr summary` counts 32 jdk.ExecutionSample and 136
 * jdk.ObjectAllocationSample events in its one chunk), several chunks,
 * and hostile input: every truncation, lying offsets and sizes, random byte
 * flips — each an error naming chunk and offset, never a crash. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <cmocka.h>

#include "ingest/jfr.h"
#include "ingest_test.h"

#ifndef PD_JFR_TESTDATA
#error PD_JFR_TESTDATA must name tests/unit/ingest/testdata
#endif

static uint8_t *rec;
static size_t rec_len;

static int load(void **state)
{
    (void)state;
    FILE *f = fopen(PD_JFR_TESTDATA "/hot.jfr", "rb");
    if (!f)
        return -1;
    fseek(f, 0, SEEK_END);
    rec_len = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    rec = malloc(rec_len);
    if (!rec || fread(rec, 1, rec_len, f) != rec_len) {
        fclose(f);
        return -1;
    }
    fclose(f);
    return 0;
}

static int unload(void **state)
{
    (void)state;
    free(rec);
    return 0;
}

/* Function name with the largest flat value of sample type vi. */
static const char *top_flat(const pd_profile *p, size_t vi, int64_t *total)
{
    static char best[256];
    int64_t bv = -1, sum = 0;
    best[0] = 0;
    /* flat per leaf function: add up samples by leaf name */
    for (size_t i = 0; i < p->n_sample; i++) {
        const pd_pprof_sample *s = &p->sample[i];
        sum += s->value[vi];
        if (!s->n_location)
            continue;
        const char *name = pd_profile_str(
            p, pd_profile_function(p, pd_profile_location(p, s->location_id[0])->line[0].function_id)->name);
        int64_t v = 0;
        for (size_t j = 0; j < p->n_sample; j++) {
            const pd_pprof_sample *t = &p->sample[j];
            if (t->n_location &&
                !strcmp(name, pd_profile_str(p, pd_profile_function(p, pd_profile_location(p, t->location_id[0])->line[0].function_id)->name)))
                v += t->value[vi];
        }
        if (v > bv) {
            bv = v;
            snprintf(best, sizeof best, "%s", name);
        }
    }
    if (total)
        *total = sum;
    return best;
}

static void test_real_recording(void **state)
{
    (void)state;
    pd_jfr_result r;
    pd_err err = {{0}};
    int rc = pd_jfr_to_pprof(rec, rec_len, NULL, &r, &err);
    if (rc)
        fail_msg("jfr: %d %s", rc, err.msg);
    assert_int_equal(r.n_chunks, 1);
    assert_true(r.have[PD_JFR_CPU]);
    assert_true(r.have[PD_JFR_ALLOC_SAMPLE]);
    const pd_profile *cpu = &r.profile[PD_JFR_CPU];
    assert_int_equal(cpu->n_sample_type, 1);
    assert_string_equal(pd_profile_str(cpu, cpu->sample_type[0].type), "cpu");
    assert_string_equal(pd_profile_str(cpu, cpu->sample_type[0].unit), "nanoseconds");
    int64_t total;
    assert_string_equal(top_flat(cpu, 0, &total), "Hot.burnCpu");
    /* every jdk.ExecutionSample has a stack here: 32 samples of 10 ms */
    assert_int_equal(total, 32 * 10000000LL);
    /* frames are pkg/Class.method, the root is a thread's entry */
    char buf[4096];
    bool saw_main = false;
    for (size_t i = 0; i < cpu->n_sample; i++)
        if (strstr(stack_str(cpu, &cpu->sample[i], buf, sizeof buf), "Hot.main;Hot.burnCpu"))
            saw_main = true;
    assert_true(saw_main);
    const pd_profile *al = &r.profile[PD_JFR_ALLOC_SAMPLE];
    assert_int_equal(al->n_sample_type, 2);
    assert_string_equal(pd_profile_str(al, al->sample_type[1].type), "alloc_sample_bytes");
    int64_t objs;
    assert_string_equal(top_flat(al, 1, &total), "Hot.allocate");
    top_flat(al, 0, &objs);
    assert_true(objs > 0 && objs <= 136);
    assert_true(total > objs * 4096);
    assert_true(cpu->time_nanos > 1700000000000000000LL);
    assert_true(cpu->duration_nanos > 0 && cpu->duration_nanos < 60000000000LL);
    /* encodes to pprof that decodes equal */
    pd_buf b;
    pd_buf_init(&b, 0);
    assert_int_equal(pd_profile_encode(cpu, true, &b), 0);
    pd_profile back;
    assert_int_equal(pd_profile_decode(&back, (const uint8_t *)b.data, b.len, NULL, &err), 0);
    assert_true(pd_profile_equal(cpu, &back, &err));
    pd_profile_release(&back);
    pd_buf_release(&b);
    pd_jfr_result_release(&r);
}

static void test_two_chunks_and_period(void **state)
{
    (void)state;
    uint8_t *two = malloc(rec_len * 2);
    assert_non_null(two);
    memcpy(two, rec, rec_len);
    memcpy(two + rec_len, rec, rec_len);
    pd_jfr_opts o;
    memset(&o, 0, sizeof o);
    o.period_nanos = 1000000; /* sampleRate 1000 Hz */
    pd_jfr_result r;
    pd_err err = {{0}};
    int rc = pd_jfr_to_pprof(two, rec_len * 2, &o, &r, &err);
    if (rc)
        fail_msg("jfr: %d %s", rc, err.msg);
    assert_int_equal(r.n_chunks, 2);
    int64_t total;
    top_flat(&r.profile[PD_JFR_CPU], 0, &total);
    assert_int_equal(total, 2 * 32 * 1000000LL);
    pd_jfr_result_release(&r);
    free(two);
}

static size_t ctx_labels(void *arg, int64_t id, const char *const **kv)
{
    static const char *const L[] = {"span", "x"};
    (void)arg;
    (void)id;
    *kv = L;
    return 1;
}

static void test_no_context_in_jdk_recording(void **state)
{
    (void)state;
    /* the JDK's events have no contextId: the callback is never asked */
    pd_jfr_opts o;
    memset(&o, 0, sizeof o);
    o.context = ctx_labels;
    pd_jfr_result r;
    pd_err err = {{0}};
    assert_int_equal(pd_jfr_to_pprof(rec, rec_len, &o, &r, &err), 0);
    for (size_t i = 0; i < r.profile[PD_JFR_CPU].n_sample; i++)
        assert_int_equal(r.profile[PD_JFR_CPU].sample[i].n_label, 0);
    pd_jfr_result_release(&r);
}

static void expect_err(const uint8_t *d, size_t n, int code, const char *sub)
{
    pd_jfr_result r;
    pd_err err = {{0}};
    int rc = pd_jfr_to_pprof(d, n, NULL, &r, &err);
    if (rc != code || !strstr(err.msg, sub))
        fail_msg("want %d with \"%s\", got %d \"%s\"", code, sub, rc, err.msg);
}

static void put_be64(uint8_t *p, uint64_t v)
{
    for (int i = 7; i >= 0; i--, v >>= 8)
        p[i] = (uint8_t)v;
}

static void test_hostile(void **state)
{
    (void)state;
    uint8_t *d = malloc(rec_len);
    assert_non_null(d);
    expect_err(rec, 0, PD_EPARSE, "empty");
    expect_err((const uint8_t *)"FLR\0\0\2", 6, PD_EPARSE, "chunk 1 at offset 0: truncated chunk header");
    memcpy(d, rec, rec_len);
    memcpy(d, "XXXX", 4);
    expect_err(d, rec_len, PD_EPARSE, "magic");
    /* a lying constant-pool offset */
    memcpy(d, rec, rec_len);
    put_be64(d + 16, rec_len * 4);
    expect_err(d, rec_len, PD_EPARSE, "chunk 1 at offset 16: constant pool offset");
    memcpy(d, rec, rec_len);
    put_be64(d + 16, 100); /* inside, but not a constant-pool event */
    expect_err(d, rec_len, PD_EPARSE, "chunk 1 at offset 100");
    memcpy(d, rec, rec_len);
    put_be64(d + 24, 68); /* metadata offset at the first event */
    expect_err(d, rec_len, PD_EPARSE, "metadata");
    memcpy(d, rec, rec_len);
    put_be64(d + 8, rec_len + 1); /* chunk size past the end */
    expect_err(d, rec_len, PD_EPARSE, "chunk size");
    /* every truncation fails cleanly (the chunk size no longer fits) */
    for (size_t n = 1; n < rec_len; n += 1 + n / 7)
        expect_err(rec, n, PD_EPARSE, "chunk 1 at offset");
    /* a recording followed by garbage names chunk 2 */
    uint8_t *two = malloc(rec_len + 10);
    assert_non_null(two);
    memcpy(two, rec, rec_len);
    memset(two + rec_len, 'x', 10);
    expect_err(two, rec_len + 10, PD_EPARSE, "chunk 2 at offset");
    free(two);
    /* random byte flips: any outcome but a crash (ASan) or an error without
     * a chunk named */
    srand(7);
    for (int i = 0; i < 300; i++) {
        memcpy(d, rec, rec_len);
        for (int j = 0; j < 4; j++)
            d[68 + (size_t)rand() % (rec_len - 68)] ^= (uint8_t)(1 + rand() % 255);
        pd_jfr_result r;
        pd_err err = {{0}};
        int rc = pd_jfr_to_pprof(d, rec_len, NULL, &r, &err);
        if (rc == 0)
            pd_jfr_result_release(&r);
        else if (rc != PD_ENOMEM && !strstr(err.msg, "chunk 1"))
            fail_msg("flip %d: %d \"%s\" names no chunk", i, rc, err.msg);
    }
    /* caps */
    pd_jfr_opts o;
    memset(&o, 0, sizeof o);
    o.lim.max_events = 10;
    pd_jfr_result r;
    pd_err err = {{0}};
    assert_int_equal(pd_jfr_to_pprof(rec, rec_len, &o, &r, &err), PD_ETOOBIG);
    assert_non_null(strstr(err.msg, "more than 10 events"));
    memset(&o, 0, sizeof o);
    o.lim.max_pool_entries = 100;
    assert_int_equal(pd_jfr_to_pprof(rec, rec_len, &o, &r, &err), PD_ETOOBIG);
    assert_non_null(strstr(err.msg, "constant pool entries"));
    memset(&o, 0, sizeof o);
    o.lim.max_stack_depth = 2;
    assert_int_equal(pd_jfr_to_pprof(rec, rec_len, &o, &r, &err), 0);
    for (size_t i = 0; i < r.profile[PD_JFR_CPU].n_sample; i++)
        assert_true(r.profile[PD_JFR_CPU].sample[i].n_location <= 3);
    pd_jfr_result_release(&r);
    free(d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_real_recording),
        cmocka_unit_test(test_two_chunks_and_period),
        cmocka_unit_test(test_no_context_in_jdk_recording),
        cmocka_unit_test(test_hostile),
    };
    return cmocka_run_group_tests(tests, load, unload);
}
