/*
 * fuzz_pprof_decode — libFuzzer target for the pprof decoder.
 *
 * Input: any bytes, as a pprof body (gzip or raw protobuf). The seed corpus
 * is fuzz/corpus/pprof (the real profiles of ../shared/testdata/pprof).
 * On a successful decode the profile must encode (raw and gzip), decode
 * again and be pd_profile_equal to the first decode; the lookups, totals and
 * sample_index run on it too. Any failure other than an error return aborts.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include "pprof/pprof.h"

/* Small caps so that the fuzzer explores them and stays fast. */
static pd_pprof_limits limits(void)
{
    pd_pprof_limits l = pd_pprof_limits_default();
    l.max_decompressed_bytes = 4u << 20;
    l.max_samples = 100000;
    l.max_locations = 100000;
    l.max_functions = 100000;
    l.max_strings = 100000;
    l.max_lines = 200000;
    return l;
}

static void check_roundtrip(const pd_profile *p, bool gzip, const pd_pprof_limits *lim)
{
    pd_buf out;
    pd_profile q;
    pd_err err = {{0}};
    pd_buf_init(&out, 0);
    if (pd_profile_encode(p, gzip, &out) != 0)
        abort();
    /* the encoding of a valid profile can exceed small caps only by size */
    pd_pprof_limits big = *lim;
    big.max_body_bytes = big.max_decompressed_bytes = 64u << 20;
    int rc = pd_profile_decode(&q, (const uint8_t *)out.data, out.len, &big, &err);
    if (rc != 0) {
        fprintf(stderr, "re-decode failed: %s\n", err.msg);
        abort();
    }
    if (!pd_profile_equal(p, &q, &err)) {
        fprintf(stderr, "round trip not equal: %s\n", err.msg);
        abort();
    }
    pd_profile_release(&q);
    pd_buf_release(&out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    pd_pprof_limits lim = limits();
    pd_profile p;
    pd_err err = {{0}};
    if (pd_profile_decode(&p, data, size, &lim, &err) != 0)
        return 0;
    check_roundtrip(&p, false, &lim);
    check_roundtrip(&p, true, &lim);

    int64_t totals[64];
    if (p.n_sample_type <= 64)
        pd_profile_totals(&p, totals);
    size_t idx;
    (void)pd_profile_sample_index(&p, NULL, &idx, &err);
    (void)pd_profile_sample_index(&p, "1", &idx, &err);
    for (size_t i = 0; i < p.n_sample && i < 100; i++)
        for (size_t j = 0; j < p.sample[i].n_location; j++)
            if (!pd_profile_location(&p, p.sample[i].location_id[j]))
                abort(); /* validate promised it resolves */
    pd_profile_release(&p);
    return 0;
}
