/* Unit tests of src/ingest/otlp.c: testdata/otlp-small.pb (a request
 * encoded by protobufjs from the vendored protos, tests/e2e/otlp/gen_seed.mjs)
 * converted field by field; truncations, nesting, caps, bad indices. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <cmocka.h>

#include "ingest/otlp.h"
#include "ingest_test.h"

static uint8_t *req;
static size_t req_len;

static int load(void **state)
{
    (void)state;
    FILE *f = fopen(PD_JFR_TESTDATA "/otlp-small.pb", "rb");
    if (!f)
        return -1;
    fseek(f, 0, SEEK_END);
    req_len = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    req = malloc(req_len);
    size_t got = req ? fread(req, 1, req_len, f) : 0;
    fclose(f);
    return got == req_len ? 0 : -1;
}

static int unload(void **state)
{
    (void)state;
    free(req);
    return 0;
}

static void test_small_request(void **state)
{
    (void)state;
    pd_otlp_result r;
    pd_err err = {{0}};
    int rc = pd_otlp_convert(req, req_len, NULL, &r, &err);
    if (rc)
        fail_msg("otlp: %d %s", rc, err.msg);
    assert_int_equal(r.n, 1);
    assert_int_equal(r.rejected, 0);
    const pd_labels *ls = &r.p[0].labels;
    assert_string_equal(pd_labels_get(ls, "__name__"), "cpu");
    assert_string_equal(pd_labels_get(ls, "service_name"), "svc");
    assert_string_equal(pd_labels_get(ls, "k8s.pod.name"), "p-1"); /* UTF-8 names, as given */
    assert_string_equal(pd_labels_get(ls, "n"), "3");
    assert_null(pd_labels_get(ls, "arr")); /* arrays are not label values */
    assert_int_equal(r.p[0].time_ms, 1700000000000LL);
    const pd_profile *p = &r.p[0].profile;
    assert_int_equal(p->n_sample_type, 1);
    assert_string_equal(pd_profile_str(p, p->sample_type[0].type), "cpu");
    assert_int_equal(p->period, 10000000);
    assert_int_equal(p->time_nanos, 1700000000000000000LL);
    assert_int_equal(p->duration_nanos, 1000000000LL);
    /* stack [2,1] is leaf first: location 2 holds work inlined in main */
    const pd_pprof_sample *s = NULL;
    char buf[256];
    for (size_t i = 0; i < p->n_sample; i++)
        if (p->sample[i].n_location == 2)
            s = &p->sample[i];
    assert_non_null(s);
    assert_int_equal(s->value[0], 30000000);
    const pd_pprof_label *l = find_label(p, s, "thread");
    assert_non_null(l);
    assert_string_equal(pd_profile_str(p, l->str), "worker");
    const pd_pprof_location *leaf = pd_profile_location(p, s->location_id[0]);
    assert_int_equal(leaf->address, 4300);
    assert_int_equal(leaf->n_line, 2);
    assert_string_equal(pd_profile_str(p, pd_profile_function(p, leaf->line[0].function_id)->name), "work");
    assert_int_equal(leaf->line[0].line, 10);
    assert_string_equal(pd_profile_str(p, pd_profile_mapping(p, leaf->mapping_id)->filename), "/bin/app");
    /* stack [1] twice: values[0] 10 ms, and 3 timestamps without values */
    int64_t tot = 0;
    for (size_t i = 0; i < p->n_sample; i++)
        if (p->sample[i].n_location == 1) {
            tot += p->sample[i].value[0];
            assert_string_equal(stack_str(p, &p->sample[i], buf, sizeof buf), "main");
        }
    assert_int_equal(tot, 10000000 + 3);
    pd_otlp_result_release(&r);
}

static void test_truncations(void **state)
{
    (void)state;
    /* every prefix either fails cleanly or converts (a prefix can end on a
     * field boundary); never a crash under ASan */
    size_t errors = 0;
    for (size_t n = 0; n < req_len; n++) {
        pd_otlp_result r;
        pd_err err = {{0}};
        int rc = pd_otlp_convert(req, n, NULL, &r, &err);
        if (rc == 0)
            pd_otlp_result_release(&r);
        else {
            assert_int_equal(rc, PD_EPARSE);
            assert_non_null(strstr(err.msg, "ExportProfilesServiceRequest"));
            errors++;
        }
    }
    assert_true(errors > req_len / 2);
}

static void test_nesting_and_caps(void **state)
{
    (void)state;
    /* field 1 (resource_profiles) > 1 (resource) > 1 (attributes) > 2
     * (value) > 5 (array) > 1 (value) > 5 ... 200 levels, inside out */
    size_t cap = 8192, n = 0;
    uint8_t *b = malloc(cap), *t = malloc(cap);
    assert_non_null(b);
    assert_non_null(t);
    b[n++] = 0x0a; /* AnyValue string_value "" */
    b[n++] = 0;
    static const uint8_t tags[] = {0x0a, 0x2a}; /* ArrayValue.values, AnyValue.array_value */
    for (int i = 0; i < 200; i++) {
        uint8_t tag = tags[i % 2];
        assert_true(n < 127 * 64);
        size_t m = 0;
        t[m++] = tag;
        size_t v = n;
        do {
            t[m++] = (uint8_t)((v & 0x7f) | (v >= 0x80 ? 0x80 : 0));
            v >>= 7;
        } while (v);
        memcpy(t + m, b, n);
        memcpy(b, t, n + m);
        n += m;
    }
    /* wrap: KeyValue.value(2) > Resource.attributes(1) > ResourceProfiles.resource(1) > Request(1) */
    static const uint8_t wrap[] = {0x12, 0x0a, 0x0a, 0x0a};
    for (size_t w = 0; w < sizeof wrap; w++) {
        size_t m = 0;
        t[m++] = wrap[w];
        size_t v = n;
        do {
            t[m++] = (uint8_t)((v & 0x7f) | (v >= 0x80 ? 0x80 : 0));
            v >>= 7;
        } while (v);
        memcpy(t + m, b, n);
        memcpy(b, t, n + m);
        n += m;
    }
    pd_otlp_result r;
    pd_err err = {{0}};
    assert_int_equal(pd_otlp_convert(b, n, NULL, &r, &err), PD_ETOOBIG);
    assert_non_null(strstr(err.msg, "nest deeper than 16"));
    free(b);
    free(t);
    /* caps on the small request */
    pd_otlp_limits lim = pd_otlp_limits_default();
    lim.max_attributes = 2;
    assert_int_equal(pd_otlp_convert(req, req_len, &lim, &r, &err), PD_ETOOBIG);
    assert_non_null(strstr(err.msg, "attributes, over 2"));
    lim = pd_otlp_limits_default();
    lim.max_table = 3;
    assert_int_equal(pd_otlp_convert(req, req_len, &lim, &r, &err), PD_ETOOBIG);
    assert_non_null(strstr(err.msg, "over 3"));
    /* a builder cap refuses the profile (partial), not the request */
    lim = pd_otlp_limits_default();
    lim.pprof.max_samples = 1;
    assert_int_equal(pd_otlp_convert(req, req_len, &lim, &r, &err), 0);
    assert_int_equal(r.n, 0);
    assert_int_equal(r.rejected, 1);
    assert_non_null(strstr(r.first_error, "resource 0 scope 0: profile 0: "));
    pd_otlp_result_release(&r);
}

static void test_response(void **state)
{
    (void)state;
    pd_buf b;
    pd_buf_init(&b, 0);
    assert_int_equal(pd_otlp_response(0, NULL, &b), 0);
    assert_int_equal(b.len, 0); /* empty message: full success */
    assert_int_equal(pd_otlp_response(2, "bad", &b), 0);
    /* partial_success(1){rejected_profiles(1)=2, error_message(2)="bad"} */
    static const uint8_t want[] = {0x0a, 0x07, 0x08, 0x02, 0x12, 0x03, 'b', 'a', 'd'};
    assert_int_equal(b.len, sizeof want);
    assert_memory_equal(b.data, want, sizeof want);
    pd_buf_release(&b);
}

static void test_json(void **state)
{
    (void)state;
    FILE *f = fopen(PD_JFR_TESTDATA "/otlp-small.json", "rb");
    assert_non_null(f);
    char text[4096];
    size_t n = fread(text, 1, sizeof text, f);
    fclose(f);
    pd_buf pb;
    pd_buf_init(&pb, 0);
    pd_err err = {{0}};
    int rc = pd_otlp_json_to_protobuf(text, n, 0, &pb, &err);
    if (rc)
        fail_msg("json: %d %s", rc, err.msg);
    pd_otlp_result r;
    rc = pd_otlp_convert((const uint8_t *)pb.data, pb.len, NULL, &r, &err);
    if (rc)
        fail_msg("otlp: %d %s", rc, err.msg);
    assert_int_equal(r.n, 1);
    assert_string_equal(pd_labels_get(&r.p[0].labels, "service_name"), "svc");
    assert_string_equal(pd_labels_get(&r.p[0].labels, "__name__"), "cpu");
    const pd_profile *p = &r.p[0].profile;
    assert_int_equal(p->n_sample, 1);
    assert_int_equal(p->sample[0].value[0], 7); /* "7": int64 as a string */
    assert_int_equal(p->time_nanos, 1700000000000000000LL);
    const pd_pprof_location *l = pd_profile_location(p, p->sample[0].location_id[0]);
    assert_int_equal(l->address, 4096);
    assert_int_equal(l->line[0].line, 3);
    pd_otlp_result_release(&r);
    /* errors name message and field */
    static const struct {
        const char *json;
        int code;
        const char *msg;
    } bad[] = {
        {"[1]", PD_EPARSE, "not a JSON ExportProfilesServiceRequest"},
        {"{\"resourceProfiles\":{}}", PD_EPARSE, "ExportProfilesServiceRequest.resourceProfiles: want an array"},
        {"{\"dictionary\":{\"stackTable\":[{\"locationIndices\":[\"x\"]}]}}", PD_EPARSE, "Stack.locationIndices[0]"},
        {"{\"dictionary\":{\"linkTable\":[{\"traceId\":\"zz\"}]}}", PD_EPARSE, "Link.traceId"},
        {"{\"dictionary\":{\"stringTable\":[\"\", 3]}}", PD_EPARSE, "stringTable[1]"},
        {"{", PD_EPARSE, "not JSON"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        pd_buf_reset(&pb);
        rc = pd_otlp_json_to_protobuf(bad[i].json, strlen(bad[i].json), 0, &pb, &err);
        if (rc != bad[i].code || !strstr(err.msg, bad[i].msg))
            fail_msg("%s: want %d \"%s\", got %d \"%s\"", bad[i].json, bad[i].code, bad[i].msg, rc, err.msg);
    }
    /* nesting past the cap */
    char deep[4096];
    size_t o = 0;
    o += (size_t)snprintf(deep + o, sizeof deep - o, "{\"resourceProfiles\":[{\"resource\":{\"attributes\":[{\"value\":");
    for (int i = 0; i < 40; i++)
        o += (size_t)snprintf(deep + o, sizeof deep - o, "{\"kvlistValue\":{\"values\":[{\"value\":");
    o += (size_t)snprintf(deep + o, sizeof deep - o, "{}");
    for (int i = 0; i < 40; i++)
        o += (size_t)snprintf(deep + o, sizeof deep - o, "}]}}");
    o += (size_t)snprintf(deep + o, sizeof deep - o, "}]}}]}");
    rc = pd_otlp_json_to_protobuf(deep, o, 0, &pb, &err);
    assert_int_equal(rc, PD_ETOOBIG);
    assert_non_null(strstr(err.msg, "nest deeper than 16"));
    pd_buf_reset(&pb);
    assert_int_equal(pd_otlp_json_response(0, NULL, &pb), 0);
    assert_int_equal(pb.len, 2);
    pd_buf_reset(&pb);
    assert_int_equal(pd_otlp_json_response(3, "a \"b\"", &pb), 0);
    assert_memory_equal(pb.data, "{\"partialSuccess\":{\"rejectedProfiles\":\"3\",\"errorMessage\":\"a \\\"b\\\"\"}}", pb.len);
    pd_buf_release(&pb);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_small_request),
        cmocka_unit_test(test_truncations),
        cmocka_unit_test(test_nesting_and_caps),
        cmocka_unit_test(test_response),
        cmocka_unit_test(test_json),
    };
    return cmocka_run_group_tests(tests, load, unload);
}
