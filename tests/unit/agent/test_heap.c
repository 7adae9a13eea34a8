/* Unit tests of src/agent/heap.c: sampled allocations from a known
 * function show up, unsampled, in alloc_* and inuse_*; freeing them takes
 * them out of inuse_*; realloc, calloc, posix_memalign and aligned_alloc go
 * through the sampler. Under ASan heap sampling is compiled out: the
 * profile must then be empty and say so. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include "agent/profd_agent.h"
#include "pprof/pprof.h"

#define N 2048
#define SZ (32 * 1024)
static void *g_keep[N];

__attribute__((noipa)) void *test_heap_alloc_site(size_t i)
{
    void *p;
    switch (i % 4) {
    case 0: p = malloc(SZ); break;
    case 1: p = calloc(1, SZ); break;
    case 2: p = aligned_alloc(64, SZ); break;
    default:
        if (posix_memalign(&p, 64, SZ) != 0)
            p = NULL;
    }
    if (p)
        memset(p, 1, 16);
    return p;
}

static void heap_totals(const char *fn, int64_t v[4], size_t *n_types, char *comment, size_t cap)
{
    pd_buf b;
    pd_buf_init(&b, 0);
    pd_err err = {{0}};
    if (pd_agent_heap_profile(&b, &err) < 0)
        fail_msg("heap profile: %s", err.msg);
    pd_profile p;
    if (pd_profile_decode(&p, (const uint8_t *)b.data, b.len, NULL, &err) < 0)
        fail_msg("decode: %s", err.msg);
    *n_types = p.n_sample_type;
    assert_string_equal(pd_profile_str(&p, p.sample_type[3].type), "inuse_space");
    assert_string_equal(pd_profile_str(&p, p.default_sample_type), "inuse_space");
    comment[0] = 0;
    if (p.n_comment)
        snprintf(comment, cap, "%s", pd_profile_str(&p, p.comment[0]));
    memset(v, 0, 4 * sizeof *v);
    for (size_t s = 0; s < p.n_sample; s++) {
        const pd_pprof_sample *smp = &p.sample[s];
        int hit = 0;
        for (size_t k = 0; k < smp->n_location && k < 2; k++) {
            const pd_pprof_location *l = pd_profile_location(&p, smp->location_id[k]);
            for (size_t j = 0; l && j < l->n_line; j++) {
                const pd_pprof_function *f = pd_profile_function(&p, l->line[j].function_id);
                if (f && strcmp(pd_profile_str(&p, f->name), fn) == 0)
                    hit = 1;
            }
        }
        for (size_t t = 0; hit && t < 4; t++)
            v[t] += smp->value[t];
    }
    pd_profile_release(&p);
    pd_buf_release(&b);
}

static void sampled_allocations_are_unsampled_and_freed(void **st)
{
    (void)st;
    int64_t v[4];
    size_t nt;
    char comment[200];
    if (!pd_agent_heap_enabled()) {
        heap_totals("test_heap_alloc_site", v, &nt, comment, sizeof comment);
        assert_int_equal(nt, 4);
        assert_non_null(strstr(comment, "off"));
        skip();
    }
    for (size_t i = 0; i < N; i++)
        g_keep[i] = test_heap_alloc_site(i);
    heap_totals("test_heap_alloc_site", v, &nt, comment, sizeof comment);
    /* 64 MiB allocated, all live: unsampled estimates within a wide band
     * (about 128 samples at a 512 KiB mean) */
    int64_t want = (int64_t)N * SZ;
    print_message("alloc_space %lld inuse_space %lld objects %lld want %lld\n", (long long)v[1],
                  (long long)v[3], (long long)v[2], (long long)want);
    assert_true(v[1] > want / 2 && v[1] < want * 2);
    assert_true(v[3] > want / 2 && v[3] < want * 2);
    assert_true(v[2] > N / 2 && v[2] < N * 2);
    /* realloc the first half (moves them to another site), free all */
    for (size_t i = 0; i < N / 2; i++)
        g_keep[i] = realloc(g_keep[i], 2 * SZ);
    for (size_t i = 0; i < N; i++)
        free(g_keep[i]);
    int64_t v2[4];
    heap_totals("test_heap_alloc_site", v2, &nt, comment, sizeof comment);
    assert_int_equal(v2[3], 0); /* nothing of that site is live */
    assert_int_equal(v2[2], 0);
    assert_true(v2[1] >= v[1]); /* alloc_* are cumulative */
}

static void rate_zero_stops_sampling(void **st)
{
    (void)st;
    if (!pd_agent_heap_enabled())
        skip();
    pd_agent_heap_set_rate(0);
    assert_false(pd_agent_heap_enabled());
    pd_agent_stats a, b;
    pd_agent_get_stats(&a);
    for (size_t i = 0; i < 256; i++)
        free(malloc(1 << 20));
    pd_agent_get_stats(&b);
    assert_int_equal(a.heap_samples, b.heap_samples);
    pd_agent_heap_set_rate(PD_AGENT_DEFAULT_HEAP_RATE);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(sampled_allocations_are_unsampled_and_freed),
        cmocka_unit_test(rate_zero_stops_sampling),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
