/*
 * fuzz_jfr — libFuzzer target for the JFR converter (src/ingest/jfr.c).
 *
 * Input: a JFR recording (one or more chunks). Seed corpus: fuzz/corpus/jfr
 * (a real OpenJDK 17 recording of tests/e2e/jfr/Hot.java with only
 * jdk.ExecutionSample and jdk.ObjectAllocationSample enabled).
 * Checks: no crash, leak or undefined behaviour (ASan+UBSan); an error
 * always names a chunk; each profile made passes pd_profile_validate and
 * survives an encode/decode round trip equal to itself.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "ingest/jfr.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    pd_jfr_opts o;
    memset(&o, 0, sizeof o);
    /* small caps keep each run short */
    o.lim.max_events = 20000;
    o.lim.max_pool_entries = 200000;
    o.lim.max_classes = 5000;
    o.lim.max_fields = 50000;
    o.lim.max_meta_strings = 50000;
    pd_jfr_result r;
    pd_err err = {{0}};
    int rc = pd_jfr_to_pprof(data, size, &o, &r, &err);
    if (rc != 0) {
        if (rc != PD_ENOMEM && size > 0 && !strstr(err.msg, "chunk ")) {
            fprintf(stderr, "error names no chunk: %s\n", err.msg);
            abort();
        }
        return 0;
    }
    for (int k = 0; k < PD_JFR_N_KINDS; k++) {
        if (!r.have[k])
            continue;
        if (pd_profile_validate(&r.profile[k], &err) != 0) {
            fprintf(stderr, "%s: invalid profile: %s\n", pd_jfr_kind_name((pd_jfr_kind)k), err.msg);
            abort();
        }
        pd_buf b;
        pd_buf_init(&b, 0);
        if (pd_profile_encode(&r.profile[k], false, &b) == 0) {
            pd_profile back;
            if (pd_profile_decode(&back, (const uint8_t *)b.data, b.len, NULL, &err) != 0 ||
                !pd_profile_equal(&r.profile[k], &back, &err)) {
                fprintf(stderr, "%s: round trip: %s\n", pd_jfr_kind_name((pd_jfr_kind)k), err.msg);
                abort();
            }
            pd_profile_release(&back);
        }
        pd_buf_release(&b);
    }
    pd_jfr_result_release(&r);
    return 0;
}
