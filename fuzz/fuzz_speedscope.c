/*
 * fuzz_speedscope — libFuzzer target for the speedscope JSON converter
 * (src/ingest/speedscope.c), the path of POST /ingest?format=speedscope.
 *
 * Input: the JSON bytes. Seed corpus: fuzz/corpus/speedscope.
 * Checks: no crash or sanitizer report; a refusal says why; on success at
 * least one profile, each with a name, a type, exactly one sample type
 * whose type is that type, no negative value, and pd_profile_validate
 * accepts it.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ingest/speedscope.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    pd_ingest_opts o;
    memset(&o, 0, sizeof o);
    o.lim.max_input_bytes = 4u << 20;
    o.lim.max_frames = 10000;
    o.lim.max_samples = 100000;
    o.lim.max_stack_depth = 1024;
    pd_err err;
    memset(&err, 0, sizeof err);
    pd_ingest_named_profile *ps = NULL;
    size_t n = 0;
    int rc = pd_ingest_speedscope((const char *)data, size, &o, &ps, &n, &err);
    if (rc < 0) {
        if (rc != PD_ENOMEM && !err.msg[0])
            abort();
        if (ps || n)
            abort();
        return 0;
    }
    if (n == 0 || !ps)
        abort();
    for (size_t i = 0; i < n; i++) {
        const pd_profile *p = &ps[i].profile;
        if (!ps[i].name || !ps[i].type || p->n_sample_type != 1)
            abort();
        if (strcmp(p->string_table[p->sample_type[0].type], ps[i].type) != 0)
            abort();
        for (size_t s = 0; s < p->n_sample; s++)
            if (p->sample[s].value[0] < 0)
                abort();
        if (pd_profile_validate(p, &err) != 0)
            abort();
    }
    pd_ingest_named_profiles_free(ps, n);
    return 0;
}
