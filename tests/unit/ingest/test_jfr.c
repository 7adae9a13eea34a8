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
            p,
            pd_profile_function(p, pd_profile_location(p, s->location_id[0])->line[0].function_id)
                ->name);
        int64_t v = 0;
        for (size_t j = 0; j < p->n_sample; j++) {
            const pd_pprof_sample *t = &p->sample[j];
            if (t->n_location &&
                !strcmp(
                    name,
                    pd_profile_str(
                        p, pd_profile_function(
                               p, pd_profile_location(p, t->location_id[0])->line[0].function_id)
                               ->name)))
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
    expect_err((const uint8_t *)"FLR\0\0\2", 6, PD_EPARSE,
               "chunk 1 at offset 0: truncated chunk header");
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

/* ---- a tiny JFR writer for synthetic recordings ---- */

static void w_var(pd_buf *b, uint64_t v)
{
    for (int i = 0; i < 8; i++) {
        if (v < 0x80) {
            pd_buf_putc(b, (char)v);
            return;
        }
        pd_buf_putc(b, (char)(0x80 | (v & 0x7f)));
        v >>= 7;
    }
    pd_buf_putc(b, (char)v);
}

static void w_str(pd_buf *b, const char *s)
{
    pd_buf_putc(b, 3);
    w_var(b, strlen(s));
    pd_buf_append(b, s, strlen(s));
}

/* Appends an event whose body (type id first) is body. */
static void w_event(pd_buf *out, const pd_buf *body)
{
    size_t n = body->len + 1;
    for (;;) { /* size counts itself */
        size_t vl = 1;
        for (uint64_t v = n; v >= 0x80; v >>= 7)
            vl++;
        if (body->len + vl == n)
            break;
        n = body->len + vl;
    }
    w_var(out, n);
    pd_buf_append(out, body->data, body->len);
}

/* Metadata: strings are added as met; elements written directly. */
static const char *META_STR[1024];
static size_t n_meta_str;

static uint64_t si(const char *s)
{
    for (size_t i = 0; i < n_meta_str; i++)
        if (!strcmp(META_STR[i], s))
            return i;
    META_STR[n_meta_str] = s;
    return n_meta_str++;
}

typedef struct tf {
    const char *name;
    int cls;
    bool cp, array;
} tf;

/* One class element with its fields. */
static void w_class(pd_buf *e, int id, const char *name, const tf *f, size_t nf)
{
    static char ids[1024][16];
    static int nid;
    char *idbuf = ids[nid++ % 1024];
    snprintf(idbuf, 16, "%d", id);
    w_var(e, si("class"));
    w_var(e, 2);
    w_var(e, si("id"));
    w_var(e, si(idbuf));
    w_var(e, si("name"));
    w_var(e, si(name));
    w_var(e, nf);
    for (size_t i = 0; i < nf; i++) {
        char *cb = ids[nid++ % 1024];
        snprintf(cb, 16, "%d", f[i].cls);
        w_var(e, si("field"));
        w_var(e, 2 + (f[i].cp ? 1 : 0) + (f[i].array ? 1 : 0));
        w_var(e, si("name"));
        w_var(e, si(f[i].name));
        w_var(e, si("class"));
        w_var(e, si(cb));
        if (f[i].cp) {
            w_var(e, si("constantPool"));
            w_var(e, si("true"));
        }
        if (f[i].array) {
            w_var(e, si("dimension"));
            w_var(e, si("1"));
        }
        w_var(e, 0);
    }
}

/* A one-chunk recording: 3 samples of App.work <- App.main with contextId
 * 7, one without context; with blowup, also a jdk.ThreadPark event whose
 * inline field is a 40-level binary tree of classes without fields. */
static void synth(pd_buf *out, bool blowup)
{
    pd_buf classes, ev, cp, meta, body;
    pd_buf_init(&classes, 0);
    pd_buf_init(&ev, 0);
    pd_buf_init(&cp, 0);
    pd_buf_init(&meta, 0);
    n_meta_str = 0;
    size_t n_classes = 0;
    const tf none[1] = {{"", 0, false, false}};
    w_class(&classes, 100, "long", none, 0);
    w_class(&classes, 101, "int", none, 0);
    w_class(&classes, 102, "boolean", none, 0);
    w_class(&classes, 103, "java.lang.String", none, 0);
    const tf sym[] = {{"string", 103, false, false}};
    w_class(&classes, 110, "jdk.types.Symbol", sym, 1);
    const tf cls[] = {{"name", 110, true, false}};
    w_class(&classes, 111, "java.lang.Class", cls, 1);
    const tf meth[] = {{"type", 111, true, false}, {"name", 110, true, false}};
    w_class(&classes, 112, "jdk.types.Method", meth, 2);
    const tf fr[] = {{"method", 112, true, false}, {"lineNumber", 101, false, false}};
    w_class(&classes, 113, "jdk.types.StackFrame", fr, 2);
    const tf st[] = {{"truncated", 102, false, false}, {"frames", 113, false, true}};
    w_class(&classes, 114, "jdk.types.StackTrace", st, 2);
    const tf es[] = {{"startTime", 100, false, false},
                     {"stackTrace", 114, true, false},
                     {"contextId", 100, false, false}};
    w_class(&classes, 120, "jdk.ExecutionSample", es, 3);
    n_classes = 10;
    if (blowup) {
        static char names[41][8];
        for (int i = 0; i <= 40; i++) {
            snprintf(names[i], sizeof names[i], "X%d", i);
            const tf xf[] = {{"a", 131 + i, false, false}, {"b", 131 + i, false, false}};
            w_class(&classes, 130 + i, names[i], xf, i == 40 ? 0 : 2);
        }
        const tf tp[] = {{"startTime", 100, false, false},
                         {"duration", 100, false, false},
                         {"stackTrace", 114, true, false},
                         {"x", 130, false, false}};
        w_class(&classes, 121, "jdk.ThreadPark", tp, 4);
        n_classes += 42;
    }
    size_t off_cp, off_meta;
    /* events after the header */
    pd_buf_append(out, "FLR\0\0\2\0\0", 8);
    for (int i = 8; i < 68; i++)
        pd_buf_putc(out, 0);
    /* constant pool */
    w_var(&cp, 1);
    w_var(&cp, 0);
    w_var(&cp, 0);
    w_var(&cp, 0); /* delta */
    w_var(&cp, 0); /* flush */
    w_var(&cp, 4);
    w_var(&cp, 110); /* symbols */
    w_var(&cp, 3);
    w_var(&cp, 1), w_str(&cp, "com/example/App");
    w_var(&cp, 2), w_str(&cp, "main");
    w_var(&cp, 3), w_str(&cp, "work");
    w_var(&cp, 111);
    w_var(&cp, 1);
    w_var(&cp, 1), w_var(&cp, 1);
    w_var(&cp, 112);
    w_var(&cp, 2);
    w_var(&cp, 1), w_var(&cp, 1), w_var(&cp, 2);
    w_var(&cp, 2), w_var(&cp, 1), w_var(&cp, 3);
    w_var(&cp, 114);
    w_var(&cp, 1);
    w_var(&cp, 1), pd_buf_putc(&cp, 0), w_var(&cp, 2);
    w_var(&cp, 2), w_var(&cp, 10); /* leaf first: work:10 */
    w_var(&cp, 1), w_var(&cp, 5);  /* main:5 */
    off_cp = out->len;
    w_event(out, &cp);
    for (int i = 0; i < 4; i++) {
        pd_buf_reset(&ev);
        w_var(&ev, 120);
        w_var(&ev, 1000 + (uint64_t)i);
        w_var(&ev, 1);
        w_var(&ev, i < 3 ? 7 : 0);
        w_event(out, &ev);
    }
    if (blowup) {
        pd_buf_reset(&ev);
        w_var(&ev, 121);
        w_var(&ev, 2000);
        w_var(&ev, 5);
        w_var(&ev, 1);
        w_event(out, &ev);
    }
    /* metadata: element tree first (to collect strings), then the table */
    pd_buf tree;
    pd_buf_init(&tree, 0);
    w_var(&tree, si("root"));
    w_var(&tree, 0);
    w_var(&tree, 2);
    w_var(&tree, si("metadata"));
    w_var(&tree, 0);
    w_var(&tree, n_classes);
    pd_buf_append(&tree, classes.data, classes.len);
    w_var(&tree, si("region"));
    w_var(&tree, 0);
    w_var(&tree, 0);
    w_var(&meta, 0);
    w_var(&meta, 0);
    w_var(&meta, 0);
    w_var(&meta, 1);
    w_var(&meta, n_meta_str);
    for (size_t i = 0; i < n_meta_str; i++)
        w_str(&meta, META_STR[i]);
    pd_buf_append(&meta, tree.data, tree.len);
    off_meta = out->len;
    w_event(out, &meta);
    (void)body;
    uint8_t *h = (uint8_t *)out->data;
    put_be64(h + 8, out->len);
    put_be64(h + 16, off_cp);
    put_be64(h + 24, off_meta);
    put_be64(h + 32, 1700000000000000000ULL);
    put_be64(h + 40, 1000000000ULL);
    put_be64(h + 48, 0);
    put_be64(h + 56, 1000000000ULL);
    h[67] = 1; /* compressed integers */
    pd_buf_release(&classes);
    pd_buf_release(&ev);
    pd_buf_release(&cp);
    pd_buf_release(&meta);
    pd_buf_release(&tree);
}

static void test_synthetic_context_labels(void **state)
{
    (void)state;
    pd_buf b;
    pd_buf_init(&b, 0);
    synth(&b, false);
    pd_jfr_opts o;
    memset(&o, 0, sizeof o);
    o.context = ctx_labels;
    pd_jfr_result r;
    pd_err err = {{0}};
    int rc = pd_jfr_to_pprof((const uint8_t *)b.data, b.len, &o, &r, &err);
    if (rc)
        fail_msg("jfr: %d %s", rc, err.msg);
    const pd_profile *p = &r.profile[PD_JFR_CPU];
    assert_int_equal(p->n_sample, 2);
    char buf[256];
    size_t with = 0;
    for (size_t i = 0; i < p->n_sample; i++) {
        assert_string_equal(stack_str(p, &p->sample[i], buf, sizeof buf),
                            "com/example/App.main;com/example/App.work");
        const pd_pprof_label *l = find_label(p, &p->sample[i], "span");
        if (l) {
            with++;
            assert_string_equal(pd_profile_str(p, l->str), "x");
            assert_int_equal(p->sample[i].value[0], 3 * 10000000LL);
        } else {
            assert_int_equal(p->sample[i].value[0], 10000000LL);
        }
    }
    assert_int_equal(with, 1);
    /* line numbers kept per location */
    const pd_pprof_location *leaf = pd_profile_location(p, p->sample[0].location_id[0]);
    assert_int_equal(leaf->line[0].line, 10);
    assert_int_equal(p->time_nanos, 1700000000000000000LL);
    pd_jfr_result_release(&r);
    pd_buf_release(&b);
}

static void test_nesting_blowup_is_capped(void **state)
{
    (void)state;
    pd_buf b;
    pd_buf_init(&b, 0);
    synth(&b, true);
    pd_jfr_result r;
    pd_err err = {{0}};
    /* 2^40 empty values would never finish: the decode budget stops it
     * (the 40 levels are within max_depth 64 here) */
    pd_jfr_opts o;
    memset(&o, 0, sizeof o);
    o.lim.max_depth = 64;
    int rc = pd_jfr_to_pprof((const uint8_t *)b.data, b.len, &o, &r, &err);
    if (rc != PD_ETOOBIG)
        fail_msg("want PD_ETOOBIG, got %d %s", rc, err.msg);
    assert_non_null(strstr(err.msg, "values decoded"));
    /* with the default depth cap (32) the nesting itself is refused */
    rc = pd_jfr_to_pprof((const uint8_t *)b.data, b.len, NULL, &r, &err);
    assert_int_equal(rc, PD_ETOOBIG);
    assert_non_null(strstr(err.msg, "chunk 1 at offset"));
    pd_buf_release(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_real_recording),
        cmocka_unit_test(test_two_chunks_and_period),
        cmocka_unit_test(test_no_context_in_jdk_recording),
        cmocka_unit_test(test_hostile),
        cmocka_unit_test(test_synthetic_context_labels),
        cmocka_unit_test(test_nesting_blowup_is_capped),
    };
    return cmocka_run_group_tests(tests, load, unload);
}
