/*
 * fuzz_otlp — libFuzzer target for the OTLP profiles converter
 * (src/ingest/otlp.c: the nesting walk, protobuf-c's unpack of the
 * vendored opentelemetry-proto v1.11.0 messages, the conversion).
 *
 * Input: an ExportProfilesServiceRequest, binary, or OTLP/JSON when the
 * input starts with '{' (src/ingest/otlp_json.c first). Seed corpus: fuzz/corpus/otlp
 * (tests/e2e/otlp/gen_seed.mjs, encoded by protobufjs).
 * Checks: no crash, leak or undefined behaviour; every converted profile
 * passes pd_profile_validate with the labels of a valid series (__name__
 * set) and survives an encode/decode round trip equal to itself.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "ingest/otlp.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    pd_otlp_limits lim = pd_otlp_limits_default();
    lim.pprof.max_samples = 10000;
    pd_otlp_result r;
    pd_err err = {{0}};
    pd_buf pb;
    pd_buf_init(&pb, 64u << 20);
    if (size && data[0] == '{') {
        if (pd_otlp_json_to_protobuf((const char *)data, size, 0, &pb, &err) != 0) {
            pd_buf_release(&pb);
            return 0;
        }
        data = (const uint8_t *)pb.data;
        size = pb.len;
    }
    int rc = pd_otlp_convert(data, size, &lim, &r, &err);
    pd_buf_release(&pb);
    if (rc != 0)
        return 0;
    for (size_t i = 0; i < r.n; i++) {
        const pd_profile *p = &r.p[i].profile;
        if (!pd_labels_get(&r.p[i].labels, "__name__") || pd_profile_validate(p, &err) != 0) {
            fprintf(stderr, "profile %zu: %s\n", i, err.msg);
            abort();
        }
        pd_buf b;
        pd_buf_init(&b, 0);
        if (pd_profile_encode(p, false, &b) == 0) {
            pd_profile back;
            if (pd_profile_decode(&back, (const uint8_t *)b.data, b.len, NULL, &err) != 0 ||
                !pd_profile_equal(p, &back, &err)) {
                fprintf(stderr, "profile %zu: round trip: %s\n", i, err.msg);
                abort();
            }
            pd_profile_release(&back);
        }
        pd_buf_release(&b);
    }
    pd_otlp_result_release(&r);
    return 0;
}
