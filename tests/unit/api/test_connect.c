/*
 * Unit tests of src/api/connect.c and connect_json.c: Connect's code table
 * and the proto3 JSON mapping over protobuf-c descriptors (names in both
 * spellings, int64 as strings, enums by name, bytes as base64, defaults
 * left out, unknown fields and wrong types refused with the field named).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>
#include "api/connect.h"
#include "push/v1/push.pb-c.h"
#include "querier/v1/querier.pb-c.h"

static void test_codes(void **state)
{
    (void)state;
    assert_string_equal(pd_connect_code_name(PD_CONNECT_INVALID_ARGUMENT), "invalid_argument");
    assert_int_equal(pd_connect_code_status(PD_CONNECT_INVALID_ARGUMENT), 400);
    assert_int_equal(pd_connect_code_status(PD_CONNECT_NOT_FOUND), 404);
    assert_int_equal(pd_connect_code_status(PD_CONNECT_RESOURCE_EXHAUSTED), 429);
    assert_int_equal(pd_connect_code_status(PD_CONNECT_UNIMPLEMENTED), 501);
    assert_int_equal(pd_connect_code_status(PD_CONNECT_DEADLINE_EXCEEDED), 504);
    assert_int_equal(pd_connect_code_status(PD_CONNECT_UNAUTHENTICATED), 401);
    assert_int_equal(pd_connect_code_of(PD_EPARSE), PD_CONNECT_INVALID_ARGUMENT);
    assert_int_equal(pd_connect_code_of(PD_ETIMEOUT), PD_CONNECT_DEADLINE_EXCEEDED);
}

static void test_json_decode_both_spellings(void **state)
{
    (void)state;
    const char *js = "{\"profileTypeID\":\"a:b:c:d:e\",\"label_selector\":\"{x=\\\"y\\\"}\","
                     "\"start\":\"1700000000000\",\"end\":1700000001000,\"maxNodes\":\"16\","
                     "\"format\":\"PROFILE_FORMAT_PPROF\"}";
    ProtobufCMessage *m = NULL;
    pd_err err = {{0}};
    assert_int_equal(
        pd_connect_json_decode(
            js, strlen(js), &querier__v1__select_merge_stacktraces_request__descriptor, &m, &err),
        0);
    Querier__V1__SelectMergeStacktracesRequest *r = (void *)m;
    assert_string_equal(r->profile_typeid, "a:b:c:d:e");
    assert_string_equal(r->label_selector, "{x=\"y\"}");
    assert_true(r->start == 1700000000000LL);
    assert_true(r->end == 1700000001000LL);
    assert_int_equal(r->max_nodes, 16);
    assert_int_equal(r->format, QUERIER__V1__PROFILE_FORMAT__PROFILE_FORMAT_PPROF);
    pd_buf out;
    pd_buf_init(&out, 0);
    assert_int_equal(pd_connect_json_encode(m, &out), 0);
    assert_string_equal(out.data,
                        "{\"profileTypeID\":\"a:b:c:d:e\",\"labelSelector\":\"{x=\\\"y\\\"}\","
                        "\"start\":\"1700000000000\",\"end\":\"1700000001000\","
                        "\"maxNodes\":\"16\",\"format\":\"PROFILE_FORMAT_PPROF\"}");
    pd_buf_release(&out);
    protobuf_c_message_free_unpacked(m, NULL);
}

static void test_json_bytes_and_repeated(void **state)
{
    (void)state;
    const char *js =
        "{\"series\":[{\"labels\":[{\"name\":\"__name__\",\"value\":\"process_cpu\"}],"
        "\"samples\":[{\"rawProfile\":\"AAEC/w\",\"ID\":\"x\"},{\"raw_profile\":\"-_8=\"}]}]}";
    ProtobufCMessage *m = NULL;
    pd_err err = {{0}};
    assert_int_equal(
        pd_connect_json_decode(js, strlen(js), &push__v1__push_request__descriptor, &m, &err), 0);
    Push__V1__PushRequest *r = (void *)m;
    assert_int_equal(r->n_series, 1);
    assert_int_equal(r->series[0]->n_samples, 2);
    const ProtobufCBinaryData *b = &r->series[0]->samples[0]->raw_profile;
    assert_int_equal(b->len, 4);
    assert_memory_equal(b->data, "\x00\x01\x02\xff", 4);
    assert_int_equal(r->series[0]->samples[1]->raw_profile.len, 2);
    assert_memory_equal(r->series[0]->samples[1]->raw_profile.data, "\xfb\xff", 2);
    pd_buf out;
    pd_buf_init(&out, 0);
    assert_int_equal(pd_connect_json_encode(m, &out), 0);
    assert_non_null(strstr(out.data, "\"rawProfile\":\"AAEC/w==\""));
    pd_buf_release(&out);
    protobuf_c_message_free_unpacked(m, NULL);
}

static void test_json_refusals(void **state)
{
    (void)state;
    static const struct {
        const char *js, *want;
    } bad[] = {
        {"{\"nope\":1}", "unknown field \"nope\""},
        {"{\"start\":\"12x\"}", "field start"},
        {"{\"format\":\"PROFILE_FORMAT_NOPE\"}", "PROFILE_FORMAT_NOPE"},
        {"{\"profileTypeID\":5}", "field profile_typeID"},
        {"{\"profileTypeID\":\"a\",\"profile_typeID\":\"b\"}", "given twice"},
        {"[1]", "expected a JSON object"},
        {"{\"start\":", "bad JSON"},
        {"{\"profileIdSelector\":\"x\"}", "expected an array"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ProtobufCMessage *m = (ProtobufCMessage *)1;
        pd_err err = {{0}};
        int rc = pd_connect_json_decode(bad[i].js, strlen(bad[i].js),
                                        &querier__v1__select_merge_stacktraces_request__descriptor,
                                        &m, &err);
        assert_true(rc < 0);
        assert_null(m);
        if (!strstr(err.msg, bad[i].want))
            fail_msg("%s: message [%s] lacks [%s]", bad[i].js, err.msg, bad[i].want);
    }
}

static void test_unpack_proto(void **state)
{
    (void)state;
    Querier__V1__SelectMergeStacktracesRequest r =
        QUERIER__V1__SELECT_MERGE_STACKTRACES_REQUEST__INIT;
    r.profile_typeid = "p";
    r.max_nodes = 7;
    uint8_t buf[64];
    size_t n = querier__v1__select_merge_stacktraces_request__pack(&r, buf);
    ProtobufCMessage *m = NULL;
    pd_err err = {{0}};
    assert_int_equal(pd_connect_unpack(PD_CONNECT_PROTO, buf, n,
                                       &querier__v1__select_merge_stacktraces_request__descriptor,
                                       &m, &err),
                     0);
    assert_int_equal(((Querier__V1__SelectMergeStacktracesRequest *)m)->max_nodes, 7);
    protobuf_c_message_free_unpacked(m, NULL);
    /* truncated */
    assert_int_equal(pd_connect_unpack(PD_CONNECT_PROTO, buf, n - 1,
                                       &querier__v1__select_merge_stacktraces_request__descriptor,
                                       &m, &err),
                     PD_EPARSE);
    assert_null(m);
    assert_non_null(strstr(err.msg, "SelectMergeStacktracesRequest"));
    /* an empty JSON body is the empty message */
    assert_int_equal(pd_connect_unpack(PD_CONNECT_JSON, (const uint8_t *)"", 0,
                                       &querier__v1__select_merge_stacktraces_request__descriptor,
                                       &m, &err),
                     0);
    protobuf_c_message_free_unpacked(m, NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_codes),
        cmocka_unit_test(test_json_decode_both_spellings),
        cmocka_unit_test(test_json_bytes_and_repeated),
        cmocka_unit_test(test_json_refusals),
        cmocka_unit_test(test_unpack_proto),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
