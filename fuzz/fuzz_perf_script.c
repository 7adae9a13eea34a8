/*
 * fuzz_perf_script — libFuzzer target for the `perf script` converter
 * (src/ingest/perf_script.c, via pd_ingest_convert).
 *
 * Input: byte 0 is the flags byte of fuzz_ingest_common.h (bits 2-3: small
 * caps, times), the rest is perf script text. Seed corpus:
 * fuzz/corpus/perf_script (the inputs of tests/unit/ingest, each behind a
 * flags byte).
 * Checks: those of fuzz_convert (validate, encode/decode/equal round trip),
 * plus samples/count is 1 per record, so every sample's first value is >= 1,
 * and every mapping's memory_limit is past the addresses of its locations.
 */
#include <stdint.h>
#include <stdlib.h>
#include "fuzz_ingest_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    pd_ingest_opts o = fuzz_ingest_opts(data[0]);
    pd_profile p;
    int rc;
    fuzz_convert(PD_INGEST_PERF_SCRIPT, (const char *)data + 1, size - 1, &o, &p, &rc);
    if (rc != 0)
        return 0;
    for (size_t i = 0; i < p.n_sample; i++)
        if (p.sample[i].value[0] < 1)
            abort();
    for (size_t i = 0; i < p.n_location; i++) {
        const pd_pprof_location *l = &p.location[i];
        const pd_pprof_mapping *m = l->mapping_id ? pd_profile_mapping(&p, l->mapping_id) : NULL;
        if (l->mapping_id && !m)
            abort();
        if (m && l->address != UINT64_MAX && l->address >= m->memory_limit)
            abort();
    }
    pd_profile_release(&p);
    return 0;
}
