/*
 * tests/unit/ingest/ingest_test.h — helpers for the ingest tests: render a
 * sample's stack root first as "a;b;c" (a location without a function shows
 * as 0xADDR), find a sample by its stack, and read labels.
 */
#ifndef PD_TESTS_INGEST_TEST_H
#define PD_TESTS_INGEST_TEST_H

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "ingest/ingest.h"

/* Root-first "a;b;c" of sample s into out[cap]. */
static inline const char *stack_str(const pd_profile *p, const pd_pprof_sample *s, char *out,
                                    size_t cap)
{
    size_t n = 0;
    out[0] = 0;
    for (size_t i = s->n_location; i-- > 0;) {
        const pd_pprof_location *l = pd_profile_location(p, s->location_id[i]);
        char frame[256];
        if (!l)
            snprintf(frame, sizeof frame, "<bad id %" PRIu64 ">", s->location_id[i]);
        else if (!l->n_line)
            snprintf(frame, sizeof frame, "0x%" PRIx64, l->address);
        else
            snprintf(frame, sizeof frame, "%s",
                     pd_profile_str(p, pd_profile_function(p, l->line[0].function_id)->name));
        n += (size_t)snprintf(out + n, n < cap ? cap - n : 0, "%s%s", n ? ";" : "", frame);
    }
    return out;
}

/* The sample whose root-first stack is `want`, or NULL. */
static inline const pd_pprof_sample *find_sample(const pd_profile *p, const char *want)
{
    char buf[4096];
    for (size_t i = 0; i < p->n_sample; i++)
        if (!strcmp(stack_str(p, &p->sample[i], buf, sizeof buf), want))
            return &p->sample[i];
    return NULL;
}

/* The label of s with key `key`, or NULL. */
static inline const pd_pprof_label *find_label(const pd_profile *p, const pd_pprof_sample *s,
                                               const char *key)
{
    for (size_t i = 0; i < s->n_label; i++)
        if (!strcmp(pd_profile_str(p, s->label[i].key), key))
            return &s->label[i];
    return NULL;
}

/* Encodes p (gzip), decodes it back and checks semantic equality: the
 * result is a well-formed pprof that says the same. Returns 1 when so. */
static inline int roundtrip_equal(const pd_profile *p, pd_err *why)
{
    pd_buf b;
    pd_profile q;
    int ok = 0;
    pd_buf_init(&b, 0);
    if (pd_profile_encode(p, true, &b) == 0 &&
        pd_profile_decode(&q, (const uint8_t *)b.data, b.len, NULL, why) == 0) {
        ok = pd_profile_equal(p, &q, why);
        pd_profile_release(&q);
    }
    pd_buf_release(&b);
    return ok;
}

#endif
