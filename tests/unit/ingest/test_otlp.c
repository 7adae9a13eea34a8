/* Unit tests of src/ingest/otlp.c: testdata/otlp-small.pb (a request
 * encoded by protobufjs from the vendored protos, tests/e2e/otlp/gen_seed.mjs)
 * converted field by field; truncations, nesting, caps, bad indices. */
#include <setjmp.h>
#include <string.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <cmocka.h>

#include "ingest/otlp.h"
#include "ingest_test.h"
#include "opentelemetry/proto/collector/profiles/v1development/profiles_service.pb-c.h"

/* ---- requests built with protobuf-c (the vendored v1.11.0 protos) ---- */

typedef Opentelemetry__Proto__Profiles__V1development__Sample PSample;
typedef Opentelemetry__Proto__Profiles__V1development__Profile PProfile;
typedef Opentelemetry__Proto__Profiles__V1development__ValueType PVT;
typedef Opentelemetry__Proto__Profiles__V1development__Mapping PMapping;
typedef Opentelemetry__Proto__Profiles__V1development__Location PLocation;
typedef Opentelemetry__Proto__Profiles__V1development__Line PLine;
typedef Opentelemetry__Proto__Profiles__V1development__Function PFunction;
typedef Opentelemetry__Proto__Profiles__V1development__Stack PStack;
typedef Opentelemetry__Proto__Profiles__V1development__KeyValueAndUnit PKVU;
typedef Opentelemetry__Proto__Common__V1__AnyValue PAny;

/* strings: 0 "", 1 samples, 2 count, 3 cpu, 4 nanoseconds, 5 f, 6 /bin/app,
 * 7 pprof.mapping.has_functions, 8 pprof.mapping.has_inline_frames,
 * 9 process.executable.build_id.gnu, 10 abc123, 11 thread, 12 w1 */
static char *strs[] = {"",
                       "samples",
                       "count",
                       "cpu",
                       "nanoseconds",
                       "f",
                       "/bin/app",
                       "pprof.mapping.has_functions",
                       "pprof.mapping.has_inline_frames",
                       "process.executable.build_id.gnu",
                       "abc123",
                       "thread",
                       "w1"};

/* Encodes a request: one resource (service.name=svc), one scope holding
 * profiles prof[0..n), a dictionary with one mapping (attributes 1-3), one
 * location (f at line 3) and one stack [1]; attributes 4 thread=w1. */
static uint8_t *build_req(PProfile **prof, size_t n, size_t *len)
{
    static PMapping m0 = OPENTELEMETRY__PROTO__PROFILES__V1DEVELOPMENT__MAPPING__INIT,
                    m1 = OPENTELEMETRY__PROTO__PROFILES__V1DEVELOPMENT__MAPPING__INIT;
    static int32_t mattrs[] = {1, 2, 3};
    m1.memory_start = 0x1000;
    m1.memory_limit = 0x2000;
    m1.filename_strindex = 6;
    m1.n_attribute_indices = 3;
    m1.attribute_indices = mattrs;
    static PMapping *maps[] = {&m0, &m1};
    static PFunction f0 = OPENTELEMETRY__PROTO__PROFILES__V1DEVELOPMENT__FUNCTION__INIT,
                     f1 = OPENTELEMETRY__PROTO__PROFILES__V1DEVELOPMENT__FUNCTION__INIT;
    f1.name_strindex = 5;
    static PFunction *fns[] = {&f0, &f1};
    static PLine ln = OPENTELEMETRY__PROTO__PROFILES__V1DEVELOPMENT__LINE__INIT;
    ln.function_index = 1;
    ln.line = 3;
    static PLine *lns[] = {&ln};
    static PLocation l0 = OPENTELEMETRY__PROTO__PROFILES__V1DEVELOPMENT__LOCATION__INIT,
                     l1 = OPENTELEMETRY__PROTO__PROFILES__V1DEVELOPMENT__LOCATION__INIT;
    l1.mapping_index = 1;
    l1.address = 0x1234;
    l1.n_lines = 1;
    l1.lines = lns;
    static PLocation *locs[] = {&l0, &l1};
    static PStack s0 = OPENTELEMETRY__PROTO__PROFILES__V1DEVELOPMENT__STACK__INIT,
                  s1 = OPENTELEMETRY__PROTO__PROFILES__V1DEVELOPMENT__STACK__INIT;
    static int32_t li[] = {1};
    s1.n_location_indices = 1;
    s1.location_indices = li;
    static PStack *stk[] = {&s0, &s1};
    static PAny vt = OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__INIT,
                vb = OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__INIT,
                vw = OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__INIT;
    vt.value_case = OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_BOOL_VALUE;
    vt.bool_value = 1;
    vb.value_case = OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_STRING_VALUE;
    vb.string_value = "abc123";
    vw.value_case = OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_STRING_VALUE;
    vw.string_value = "w1";
    static PKVU a[5] = {OPENTELEMETRY__PROTO__PROFILES__V1DEVELOPMENT__KEY_VALUE_AND_UNIT__INIT,
                        OPENTELEMETRY__PROTO__PROFILES__V1DEVELOPMENT__KEY_VALUE_AND_UNIT__INIT,
                        OPENTELEMETRY__PROTO__PROFILES__V1DEVELOPMENT__KEY_VALUE_AND_UNIT__INIT,
                        OPENTELEMETRY__PROTO__PROFILES__V1DEVELOPMENT__KEY_VALUE_AND_UNIT__INIT,
                        OPENTELEMETRY__PROTO__PROFILES__V1DEVELOPMENT__KEY_VALUE_AND_UNIT__INIT};
    a[1].key_strindex = 7;
    a[1].value = &vt;
    a[2].key_strindex = 8;
    a[2].value = &vt;
    a[3].key_strindex = 9;
    a[3].value = &vb;
    a[4].key_strindex = 11;
    a[4].value = &vw;
    static PKVU *ap[] = {&a[0], &a[1], &a[2], &a[3], &a[4]};
    Opentelemetry__Proto__Profiles__V1development__ProfilesDictionary d =
        OPENTELEMETRY__PROTO__PROFILES__V1DEVELOPMENT__PROFILES_DICTIONARY__INIT;
    d.n_mapping_table = 2;
    d.mapping_table = maps;
    d.n_location_table = 2;
    d.location_table = locs;
    d.n_function_table = 2;
    d.function_table = fns;
    d.n_string_table = sizeof strs / sizeof *strs;
    d.string_table = strs;
    d.n_attribute_table = 5;
    d.attribute_table = ap;
    d.n_stack_table = 2;
    d.stack_table = stk;
    Opentelemetry__Proto__Common__V1__AnyValue sv =
        OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__INIT;
    sv.value_case = OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_STRING_VALUE;
    sv.string_value = "svc";
    Opentelemetry__Proto__Common__V1__KeyValue
        kv = OPENTELEMETRY__PROTO__COMMON__V1__KEY_VALUE__INIT,
        *kvp = &kv;
    kv.key = "service.name";
    kv.value = &sv;
    Opentelemetry__Proto__Resource__V1__Resource res =
        OPENTELEMETRY__PROTO__RESOURCE__V1__RESOURCE__INIT;
    res.n_attributes = 1;
    res.attributes = &kvp;
    Opentelemetry__Proto__Profiles__V1development__ScopeProfiles
        sp = OPENTELEMETRY__PROTO__PROFILES__V1DEVELOPMENT__SCOPE_PROFILES__INIT,
        *spp = &sp;
    sp.n_profiles = n;
    sp.profiles = prof;
    Opentelemetry__Proto__Profiles__V1development__ResourceProfiles
        rp = OPENTELEMETRY__PROTO__PROFILES__V1DEVELOPMENT__RESOURCE_PROFILES__INIT,
        *rpp = &rp;
    rp.resource = &res;
    rp.n_scope_profiles = 1;
    rp.scope_profiles = &spp;
    Opentelemetry__Proto__Collector__Profiles__V1development__ExportProfilesServiceRequest r =
        OPENTELEMETRY__PROTO__COLLECTOR__PROFILES__V1DEVELOPMENT__EXPORT_PROFILES_SERVICE_REQUEST__INIT;
    r.n_resource_profiles = 1;
    r.resource_profiles = &rpp;
    r.dictionary = &d;
    *len =
        opentelemetry__proto__collector__profiles__v1development__export_profiles_service_request__get_packed_size(
            &r);
    uint8_t *b = malloc(*len ? *len : 1);
    assert_non_null(b);
    opentelemetry__proto__collector__profiles__v1development__export_profiles_service_request__pack(
        &r, b);
    return b;
}

static PVT vt_samples = {
    PROTOBUF_C_MESSAGE_INIT(&opentelemetry__proto__profiles__v1development__value_type__descriptor),
    1, 2};
static PVT vt_cpu = {
    PROTOBUF_C_MESSAGE_INIT(&opentelemetry__proto__profiles__v1development__value_type__descriptor),
    3, 4};

static void init_profile(PProfile *p, PVT *st, PSample **s, size_t ns)
{
    opentelemetry__proto__profiles__v1development__profile__init(p);
    p->sample_type = st;
    p->period_type = &vt_cpu;
    p->period = 10000000;
    p->time_unix_nano = 1700000000000000000ULL;
    p->duration_nano = 1000000000;
    p->n_samples = ns;
    p->samples = s;
}

static int64_t total(const pd_profile *p, size_t ti)
{
    int64_t t = 0;
    for (size_t i = 0; i < p->n_sample; i++)
        t += p->sample[i].value[ti];
    return t;
}

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
    assert_string_equal(pd_profile_str(p, pd_profile_function(p, leaf->line[0].function_id)->name),
                        "work");
    assert_int_equal(leaf->line[0].line, 10);
    assert_string_equal(pd_profile_str(p, pd_profile_mapping(p, leaf->mapping_id)->filename),
                        "/bin/app");
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
    /* wrap: KeyValue.value(2) > Resource.attributes(1) > ResourceProfiles.resource(1) > Request(1)
     */
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

/* values [2,2,3,3] with 4 timestamps is 10; 3 timestamps alone are 3; a
 * sample with neither is refused, named; values and timestamps of
 * different counts are refused. */
static void test_sample_shapes(void **state)
{
    (void)state;
    int64_t v4[] = {2, 2, 3, 3}, v2[] = {1, 2};
    uint64_t t4[] = {1, 2, 3, 4};
    PSample a = OPENTELEMETRY__PROTO__PROFILES__V1DEVELOPMENT__SAMPLE__INIT, b = a, c = a, d = a;
    a.stack_index = 1;
    a.n_values = 4;
    a.values = v4;
    a.n_timestamps_unix_nano = 4;
    a.timestamps_unix_nano = t4;
    int32_t th[] = {4};
    b.stack_index = 1;
    b.n_attribute_indices = 1;
    b.attribute_indices = th;
    b.n_timestamps_unix_nano = 3;
    b.timestamps_unix_nano = t4;
    PSample *ss[] = {&a, &b};
    PProfile p;
    init_profile(&p, &vt_samples, ss, 2);
    PProfile *pp[] = {&p};
    size_t len;
    uint8_t *req1 = build_req(pp, 1, &len);
    pd_otlp_result r;
    pd_err err = {{0}};
    assert_int_equal(pd_otlp_convert(req1, len, NULL, &r, &err), 0);
    free(req1);
    assert_int_equal(r.n, 1);
    assert_int_equal(r.rejected, 0);
    assert_int_equal(total(&r.p[0].profile, 0), 13);
    assert_int_equal(r.p[0].profile.n_sample, 2);
    pd_otlp_result_release(&r);
    /* neither */
    c.stack_index = 1;
    PSample *ss2[] = {&a, &c};
    init_profile(&p, &vt_samples, ss2, 2);
    req1 = build_req(pp, 1, &len);
    assert_int_equal(pd_otlp_convert(req1, len, NULL, &r, &err), 0);
    free(req1);
    assert_int_equal(r.n, 0);
    assert_int_equal(r.rejected, 1);
    assert_non_null(
        strstr(r.first_error, "profile 0 sample 1 has neither values nor timestamps_unix_nano"));
    pd_otlp_result_release(&r);
    /* counts differ */
    d.stack_index = 1;
    d.n_values = 2;
    d.values = v2;
    d.n_timestamps_unix_nano = 3;
    d.timestamps_unix_nano = t4;
    PSample *ss3[] = {&d};
    init_profile(&p, &vt_samples, ss3, 1);
    req1 = build_req(pp, 1, &len);
    assert_int_equal(pd_otlp_convert(req1, len, NULL, &r, &err), 0);
    free(req1);
    assert_int_equal(r.rejected, 1);
    assert_non_null(strstr(r.first_error, "2 values and 3 timestamps_unix_nano"));
    pd_otlp_result_release(&r);
}

/* Two profiles of one scope at one time (samples/count, cpu/nanoseconds)
 * are one pprof with both types; a third at another time is its own;
 * the mapping's attributes are its has_* flags and build id. */
static void test_group_and_mapping(void **state)
{
    (void)state;
    int64_t one[] = {1}, ns[] = {10000000}, two[] = {2};
    PSample a = OPENTELEMETRY__PROTO__PROFILES__V1DEVELOPMENT__SAMPLE__INIT, b = a, c = a;
    a.stack_index = b.stack_index = c.stack_index = 1;
    a.n_values = b.n_values = c.n_values = 1;
    a.values = one;
    b.values = ns;
    c.values = two;
    PSample *sa[] = {&a}, *sb[] = {&b}, *sc[] = {&c};
    PProfile p0, p1, p2;
    init_profile(&p0, &vt_samples, sa, 1);
    init_profile(&p1, &vt_cpu, sb, 1);
    init_profile(&p2, &vt_samples, sc, 1);
    p2.time_unix_nano += 10000000000ULL;
    PProfile *pp[] = {&p0, &p1, &p2};
    size_t len;
    uint8_t *req1 = build_req(pp, 3, &len);
    pd_otlp_result r;
    pd_err err = {{0}};
    assert_int_equal(pd_otlp_convert(req1, len, NULL, &r, &err), 0);
    free(req1);
    assert_int_equal(r.n, 2);
    assert_int_equal(r.rejected, 0);
    const pd_profile *p = &r.p[0].profile;
    assert_int_equal(r.p[0].n_joined, 2);
    assert_string_equal(pd_labels_get(&r.p[0].labels, "__name__"), "cpu");
    assert_int_equal(p->n_sample_type, 2);
    assert_string_equal(pd_profile_str(p, p->sample_type[0].type), "samples");
    assert_string_equal(pd_profile_str(p, p->sample_type[1].type), "cpu");
    assert_int_equal(p->n_sample, 1); /* same stack, no attributes: one sample */
    assert_int_equal(p->sample[0].value[0], 1);
    assert_int_equal(p->sample[0].value[1], 10000000);
    const pd_pprof_mapping *m =
        pd_profile_mapping(p, pd_profile_location(p, p->sample[0].location_id[0])->mapping_id);
    assert_non_null(m);
    assert_true(m->has_functions);
    assert_true(m->has_inline_frames);
    assert_false(m->has_filenames);
    assert_false(m->has_line_numbers);
    assert_string_equal(pd_profile_str(p, m->build_id), "abc123");
    assert_int_equal(r.p[1].n_joined, 1);
    assert_int_equal(r.p[1].profile.n_sample_type, 1);
    assert_int_equal(r.p[1].time_ms, 1700000010000LL);
    pd_otlp_result_release(&r);
}

/* A v1.9.0-shaped Sample (values 2, attribute_indices 3 packed) is
 * refused as a whole; an attribute index naming entry 0 is refused. */
static void test_other_release(void **state)
{
    (void)state;
    PSample a = OPENTELEMETRY__PROTO__PROFILES__V1DEVELOPMENT__SAMPLE__INIT;
    int64_t one[] = {1};
    a.stack_index = 1;
    a.n_values = 1;
    a.values = one;
    PSample *sa[] = {&a};
    PProfile p0;
    init_profile(&p0, &vt_samples, sa, 1);
    PProfile *pp[] = {&p0};
    size_t len;
    uint8_t *b = build_req(pp, 1, &len);
    /* the Sample is "08 01 22 01 01" (stack_index 1, values [1] packed in
       field 4); as v1.9.0 writes it: "08 01 12 01 01 1a 01 04" (values in
       2, attribute_indices [4] in 3). Rebuild the request around it. */
    static const uint8_t v11[] = {0x08, 0x01, 0x22, 0x01, 0x01};
    uint8_t *at = NULL;
    for (size_t i = 0; i + sizeof v11 <= len && !at; i++)
        if (!memcmp(b + i, v11, sizeof v11) && i >= 2 && b[i - 2] == 0x12 && b[i - 1] == sizeof v11)
            at = b + i;
    assert_non_null(at);
    pd_otlp_result r;
    pd_err err = {{0}};
    at[2] = 0x12; /* v1.9.0 values: field 2; same bytes, same length */
    assert_int_equal(pd_otlp_convert(b, len, NULL, &r, &err), 0);
    assert_int_equal(r.rejected, 1); /* read as attribute_indices [1] and no values: refused */
    assert_non_null(strstr(r.first_error, "neither values nor timestamps_unix_nano"));
    pd_otlp_result_release(&r);
    at[2] = 0x1a; /* field 3 packed: v1.9.0's attribute_indices, a varint in v1.11.0 */
    assert_int_equal(pd_otlp_convert(b, len, NULL, &r, &err), PD_EPARSE);
    assert_non_null(strstr(err.msg, "wire type of another release"));
    free(b);
    /* attribute index 0 */
    int32_t z[] = {0};
    a.n_attribute_indices = 1;
    a.attribute_indices = z;
    b = build_req(pp, 1, &len);
    assert_int_equal(pd_otlp_convert(b, len, NULL, &r, &err), 0);
    free(b);
    assert_int_equal(r.rejected, 1);
    assert_non_null(strstr(r.first_error, "has no key"));
    pd_otlp_result_release(&r);
}

/* google.rpc.Status: protobuf bytes and JSON. */
static void test_status(void **state)
{
    (void)state;
    pd_buf b;
    pd_buf_init(&b, 0);
    assert_int_equal(pd_otlp_status(3, "bad \"x\"", false, &b), 0);
    static const uint8_t want[] = {0x08, 0x03, 0x12, 0x07, 'b', 'a', 'd', ' ', '"', 'x', '"'};
    assert_int_equal(b.len, sizeof want);
    assert_memory_equal(b.data, want, sizeof want);
    pd_buf_reset(&b);
    assert_int_equal(pd_otlp_status(8, "too \"big\"", true, &b), 0);
    pd_buf_puts(&b, "");
    assert_string_equal(b.data, "{\"code\":8,\"message\":\"too \\\"big\\\"\"}");
    pd_buf_release(&b);
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
        {"{\"resourceProfiles\":{}}", PD_EPARSE,
         "ExportProfilesServiceRequest.resourceProfiles: want an array"},
        {"{\"dictionary\":{\"stackTable\":[{\"locationIndices\":[\"x\"]}]}}", PD_EPARSE,
         "Stack.locationIndices[0]"},
        {"{\"dictionary\":{\"linkTable\":[{\"traceId\":\"zz\"}]}}", PD_EPARSE, "Link.traceId"},
        {"{\"dictionary\":{\"stringTable\":[\"\", 3]}}", PD_EPARSE, "stringTable[1]"},
        {"{", PD_EPARSE, "not JSON"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        pd_buf_reset(&pb);
        rc = pd_otlp_json_to_protobuf(bad[i].json, strlen(bad[i].json), 0, &pb, &err);
        if (rc != bad[i].code || !strstr(err.msg, bad[i].msg))
            fail_msg("%s: want %d \"%s\", got %d \"%s\"", bad[i].json, bad[i].code, bad[i].msg, rc,
                     err.msg);
    }
    /* one field under both spellings ("spanId", "span_id"): the first wins and, under
     * ASan, the second's decoded bytes do not leak (a fuzz find) */
    static const char twice[] = "{\"dictionary\":{\"linkTable\":[{\"spanId\":\"0102030405060708\","
                                "\"span_id\":\"1112131415161718\"}]}}";
    pd_buf_reset(&pb);
    rc = pd_otlp_json_to_protobuf(twice, strlen(twice), 0, &pb, &err);
    if (rc)
        fail_msg("twice: %d %s", rc, err.msg);
    {
        static const uint8_t span[] = {1, 2, 3, 4, 5, 6, 7, 8}, other[] = {0x11, 0x12, 0x13, 0x14};
        assert_non_null(memmem(pb.data, pb.len, span, sizeof span));
        assert_null(memmem(pb.data, pb.len, other, sizeof other));
    }
    /* nesting past the cap */
    char deep[4096];
    size_t o = 0;
    o += (size_t)snprintf(deep + o, sizeof deep - o,
                          "{\"resourceProfiles\":[{\"resource\":{\"attributes\":[{\"value\":");
    for (int i = 0; i < 40; i++)
        o += (size_t)snprintf(deep + o, sizeof deep - o,
                              "{\"kvlistValue\":{\"values\":[{\"value\":");
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
    assert_memory_equal(
        pb.data,
        "{\"partialSuccess\":{\"rejectedProfiles\":\"3\",\"errorMessage\":\"a \\\"b\\\"\"}}",
        pb.len);
    pd_buf_release(&pb);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_small_request),
        cmocka_unit_test(test_truncations),
        cmocka_unit_test(test_nesting_and_caps),
        cmocka_unit_test(test_response),
        cmocka_unit_test(test_sample_shapes),
        cmocka_unit_test(test_group_and_mapping),
        cmocka_unit_test(test_other_release),
        cmocka_unit_test(test_status),
        cmocka_unit_test(test_json),
    };
    return cmocka_run_group_tests(tests, load, unload);
}
