/*
 * fuzz_connect — libFuzzer target for the Connect request decoding of
 * src/api/connect_json.c: pd_connect_unpack in both codecs (binary protobuf
 * through protobuf-c, and the proto3 JSON mapping by reflection) over the
 * request messages profd serves (querier.v1, types.v1, push.v1).
 *
 * Input: byte 0 picks the codec (bit 0: 0 proto, 1 JSON) and the message
 * (byte 0 >> 1, modulo the list below); the rest is the request body.
 * Seed corpus: fuzz/corpus/connect.
 * Properties checked besides the sanitizers:
 *   - an error return sets a message and leaves *out NULL;
 *   - a decoded message encodes to JSON, and that JSON decodes again to a
 *     message whose binary encoding equals the first one's, unless it holds
 *     strings that JSON cannot carry as they are (invalid UTF-8, NUL).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "api/connect.h"
#include "push/v1/push.pb-c.h"
#include "querier/v1/querier.pb-c.h"
#include "types/v1/types.pb-c.h"

static const ProtobufCMessageDescriptor *const msgs[] = {
    &querier__v1__profile_types_request__descriptor,
    &types__v1__label_names_request__descriptor,
    &types__v1__label_values_request__descriptor,
    &querier__v1__series_request__descriptor,
    &querier__v1__select_merge_stacktraces_request__descriptor,
    &querier__v1__select_merge_profile_request__descriptor,
    &querier__v1__select_series_request__descriptor,
    &querier__v1__diff_request__descriptor,
    &push__v1__push_request__descriptor,
    &querier__v1__select_merge_stacktraces_response__descriptor,
};

static uint8_t *pack(const ProtobufCMessage *m, size_t *n)
{
    *n = protobuf_c_message_get_packed_size(m);
    uint8_t *b = malloc(*n + 1);
    if (!b)
        abort();
    protobuf_c_message_pack(m, b);
    return b;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    pd_connect_codec codec = (data[0] & 1) ? PD_CONNECT_JSON : PD_CONNECT_PROTO;
    const ProtobufCMessageDescriptor *d = msgs[(data[0] >> 1) % (sizeof msgs / sizeof msgs[0])];
    ProtobufCMessage *m = NULL;
    pd_err err = {{0}};
    int rc = pd_connect_unpack(codec, data + 1, size - 1, d, &m, &err);
    if (rc < 0) {
        if (m || !err.msg[0]) {
            fprintf(stderr, "error %d without message or with a message left\n", rc);
            abort();
        }
        return 0;
    }
    pd_buf js;
    pd_buf_init(&js, 0);
    if (pd_connect_json_encode(m, &js) < 0)
        abort();
    ProtobufCMessage *m2 = NULL;
    if (pd_connect_json_decode(js.data, js.len, d, &m2, &err) == 0) {
        size_t n1, n2;
        uint8_t *b1 = pack(m, &n1), *b2 = pack(m2, &n2);
        /* strings are where JSON may differ (UTF-8 replacement): only a
         * message whose JSON was decodable as text is compared */
        if (codec == PD_CONNECT_JSON && (n1 != n2 || memcmp(b1, b2, n1) != 0)) {
            fprintf(stderr, "JSON round trip changed the message: %s\n", js.data);
            abort();
        }
        free(b1);
        free(b2);
        protobuf_c_message_free_unpacked(m2, NULL);
    }
    pd_buf_release(&js);
    protobuf_c_message_free_unpacked(m, NULL);
    return 0;
}
