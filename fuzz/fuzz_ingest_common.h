/*
 * fuzz_ingest_common.h — what fuzz_folded and fuzz_perf_script share: the
 * conversion options chosen by the input's first byte, and the checks run on
 * a converted profile.
 *
 * Input layout of both targets: byte 0 is a flags byte, the rest is the text
 * to convert.
 *   bit 0-1  folded only: 0 folded cpu, 1 lines cpu, 2 folded "alloc_space"
 *            with unit "bytes" (one value), 3 folded "wall" at 997 Hz
 *   bit 2    small caps (4 frames deep, 16 frames, 8 samples, 64 lines,
 *            256-byte lines) so the cap paths are explored
 *   bit 3    set time_nanos and duration_nanos in the options
 * Checks on a successful conversion: pd_profile_validate passes; the
 * profile encodes (raw and gzip), decodes again and is pd_profile_equal to
 * itself; totals can be taken. A failed conversion must set a message.
 */
#ifndef PD_FUZZ_INGEST_COMMON_H
#define PD_FUZZ_INGEST_COMMON_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include "ingest/ingest.h"
#include "pprof/pprof.h"

static pd_ingest_opts fuzz_ingest_opts(uint8_t flags)
{
    pd_ingest_opts o = {0};
    if (flags & 4) {
        o.lim.max_stack_depth = 4;
        o.lim.max_frames = 16;
        o.lim.max_samples = 8;
        o.lim.max_lines = 64;
        o.lim.max_line_bytes = 256;
    }
    if (flags & 8) {
        o.time_nanos = 1700000000000000000LL;
        o.duration_nanos = 10000000000LL;
    }
    return o;
}

static void fuzz_roundtrip(const pd_profile *p, bool gzip)
{
    pd_buf out;
    pd_profile q;
    pd_err err = {{0}};
    pd_pprof_limits big = pd_pprof_limits_default();
    pd_buf_init(&out, 0);
    if (pd_profile_encode(p, gzip, &out) != 0)
        abort();
    big.max_body_bytes = big.max_decompressed_bytes = 256u << 20;
    if (pd_profile_decode(&q, (const uint8_t *)out.data, out.len, &big, &err) != 0) {
        fprintf(stderr, "converted profile does not decode after encode: %s\n", err.msg);
        abort();
    }
    if (!pd_profile_equal(p, &q, &err)) {
        fprintf(stderr, "converted profile differs after encode+decode: %s\n", err.msg);
        abort();
    }
    pd_profile_release(&q);
    pd_buf_release(&out);
}

/* Converts text[0..len) in fmt with opts and checks the result. */
static void fuzz_convert(pd_ingest_format fmt, const char *text, size_t len,
                         const pd_ingest_opts *opts, pd_profile *p /* OUT, released by caller
                                                                      when 0 returned */,
                         int *rc_out)
{
    pd_err err = {{0}};
    int rc = pd_ingest_convert(fmt, text, len, opts, p, &err);
    *rc_out = rc;
    if (rc != 0) {
        if (!err.msg[0]) {
            fprintf(stderr, "conversion failed with %d and no message\n", rc);
            abort();
        }
        if (rc != PD_EPARSE && rc != PD_ETOOBIG && rc != PD_EINVAL) {
            fprintf(stderr, "conversion failed with unexpected %d: %s\n", rc, err.msg);
            abort();
        }
        return;
    }
    if (pd_profile_validate(p, &err) != 0) {
        fprintf(stderr, "converted profile does not validate: %s\n", err.msg);
        abort();
    }
    if (p->n_sample_type == 0 || p->n_sample_type > 2)
        abort();
    int64_t totals[2];
    pd_profile_totals(p, totals);
    fuzz_roundtrip(p, false);
    fuzz_roundtrip(p, true);
}

#endif
