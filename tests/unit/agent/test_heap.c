/* Unit tests of src/agent/heap.c: sampled allocations from a known
 * function show up, unsampled, in alloc_* and inuse_*; freeing them takes
 * them out of inuse_*; realloc, calloc, posix_memalign and aligned_alloc go
 * through the sampler. Sampled blocks come from the agent's own address
 * range (region.c): every allocator keeps its contract for them (alignment,
 * usable size, calloc's zeroes after reuse, realloc moving into and out of
 * the range, realloc(p, 0)), from several threads freeing each other's
 * blocks and in a forked child; an unsampled pointer lies above the range
 * (free's one-compare path). Under ASan heap sampling is compiled out: the
 * profile must then be empty and say so. */
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <sys/wait.h>
#include <unistd.h>
#include <stdio.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include "agent/agent_int.h"
#include "agent/profd_agent.h"
#include "pprof/pprof.h"

#define N 2048
#define SZ (32 * 1024)
static void *g_keep[N];

__attribute__((noipa)) void *test_heap_alloc_site(size_t i)
{
    void *p;
    switch (i % 4) {
    case 0:
        p = malloc(SZ);
        break;
    case 1:
        p = calloc(1, SZ);
        break;
    case 2:
        p = aligned_alloc(64, SZ);
        break;
    default:
        if (posix_memalign(&p, 64, SZ) != 0)
            p = NULL;
    }
    if (p)
        memset(p, 1, 16);
    return p;
}

static void *volatile g_sink;

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
    for (size_t i = 0; i < 256; i++) { /* through a volatile: GCC drops free(malloc(n)) */
        g_sink = malloc(1 << 20);
        free(g_sink);
    }
    pd_agent_get_stats(&b);
    assert_int_equal(a.heap_samples, b.heap_samples);
    pd_agent_heap_set_rate(PD_AGENT_DEFAULT_HEAP_RATE);
}

/* Every allocation sampled from here (rate 1), after the countdown drawn
 * at the old rate has run out. */
static void sample_everything(void)
{
    pd_agent_heap_set_rate(1);
    for (int i = 0; i < 256; i++) { /* through a volatile: GCC drops free(malloc(n)) */
        g_sink = malloc(1 << 20);
        free(g_sink);
    }
}

static void fill(unsigned char *p, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i++)
        p[i] = (unsigned char)(i * 31 + seed);
}

static int same(const unsigned char *p, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i++)
        if (p[i] != (unsigned char)(i * 31 + seed))
            return 0;
    return 1;
}

/* noipa: GCC drops a memset into a block about to be freed */
__attribute__((noipa)) static void dirty(void *p, size_t n)
{
    memset(p, 0xab, n);
}

static int all_zero(const unsigned char *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (p[i])
            return 0;
    return 1;
}

static void sampled_blocks_keep_every_contract(void **st)
{
    (void)st;
    if (!pd_agent_heap_enabled())
        skip();
    sample_everything();
    /* malloc, usable size */
    unsigned char *a = malloc(100);
    assert_true(pd__agent_region_owns(a));
    assert_true(malloc_usable_size(a) >= 100);
    fill(a, malloc_usable_size(a), 1);
    /* malloc(0): a unique block */
    void *z0 = malloc(0), *z1 = malloc(0);
    assert_non_null(z0);
    assert_ptr_not_equal(z0, z1);
    free(z0);
    free(z1);
    /* calloc after a dirty block of the same size was freed: zeroes (a
     * small class, kept resident, and a large one, given back) */
    size_t sizes[] = {3000, 1 << 20};
    for (size_t k = 0; k < 2; k++) {
        unsigned char *d = malloc(sizes[k]);
        assert_true(pd__agent_region_owns(d));
        dirty(d, sizes[k]);
        free(d);
        unsigned char *c = calloc(1, sizes[k]);
        assert_true(pd__agent_region_owns(c));
        assert_true(all_zero(c, sizes[k]));
        free(c);
    }
    /* alignment */
    size_t aligns[] = {16, 64, 4096, 65536, 1 << 21};
    for (size_t k = 0; k < 5; k++) {
        void *p = NULL;
        assert_int_equal(posix_memalign(&p, aligns[k], 10), 0);
        assert_true(pd__agent_region_owns(p));
        assert_int_equal((uintptr_t)p % aligns[k], 0);
        free(p);
        p = aligned_alloc(aligns[k], aligns[k] * 2);
        assert_int_equal((uintptr_t)p % aligns[k], 0);
        free(p);
        p = memalign(aligns[k], 3);
        assert_int_equal((uintptr_t)p % aligns[k], 0);
        free(p);
    }
    void *p = NULL;
    assert_int_equal(posix_memalign(&p, 48, 10), EINVAL);
    long pg = sysconf(_SC_PAGESIZE);
    void *v = valloc(10), *pv = pvalloc(10);
    assert_int_equal((uintptr_t)v % (uintptr_t)pg, 0);
    assert_int_equal((uintptr_t)pv % (uintptr_t)pg, 0);
    assert_true(malloc_usable_size(pv) >= (size_t)pg);
    free(v);
    free(pv);
    /* realloc: grows and shrinks keeping the bytes, region to region */
    size_t ua = malloc_usable_size(a);
    unsigned char *b = realloc(a, 100000);
    assert_true(pd__agent_region_owns(b));
    assert_true(same(b, ua, 1));
    fill(b, 100000, 2);
    b = realloc(b, 50);
    assert_true(same(b, 50, 2));
    /* out of the region (sampling off): moves to glibc, bytes kept */
    pd_agent_heap_set_rate(0);
    b = realloc(b, 5000);
    assert_false(pd__agent_region_owns(b));
    assert_true(same(b, 50, 2));
    fill(b, 5000, 3);
    unsigned char *g = malloc(777);
    assert_false(pd__agent_region_owns(g));
    assert_true(malloc_usable_size(g) >= 777);
#if defined(__PIE__) && defined(__x86_64__) && !defined(PD_AGENT_NO_HEAP)
    /* a PIE's heap lies above the range: free takes the one-compare path */
    assert_true((uintptr_t)g >= pd__agent_region_hi);
#endif
    fill(g, 777, 4);
    /* into the region (sampling on): a glibc block moves, bytes kept */
    sample_everything();
    b = realloc(b, 9000);
    assert_true(pd__agent_region_owns(b));
    assert_true(same(b, 5000, 3));
    g = realloc(g, 10);
    assert_true(pd__agent_region_owns(g));
    assert_true(same(g, 10, 4));
    /* realloc(p, 0) frees; realloc(NULL, n) allocates */
    assert_null(realloc(b, 0));
    g = realloc(g, 0);
    assert_null(g);
    void *r = realloc(NULL, 64);
    assert_true(pd__agent_region_owns(r));
    free(r);
    free(NULL);
    /* a large block; more than the range: glibc's answer (NULL) */
    unsigned char *big = malloc(64u << 20);
    assert_true(pd__agent_region_owns(big));
    big[0] = 1;
    big[(64u << 20) - 1] = 2;
    free(big);
    errno = 0;
    assert_null(malloc((size_t)1 << 46));
    assert_int_equal(errno, ENOMEM);
    size_t half = SIZE_MAX / 2;
    g_sink = &half;
    assert_null(calloc(*(volatile size_t *)&half, 4)); /* n * size overflows */
    pd_agent_heap_set_rate(PD_AGENT_DEFAULT_HEAP_RATE);
}

#define THREADS 4
#define PER 4000
static void *g_blocks[THREADS][PER];
static pthread_barrier_t g_barrier;

__attribute__((noipa)) void *test_heap_thread_site(size_t n)
{
    void *p = malloc(n);
    __asm__ volatile("" ::: "memory"); /* not a tail call: this frame stays on the stack */
    return p;
}

static void *churn(void *arg)
{
    size_t t = (size_t)arg;
    uint64_t x = 0x9e3779b97f4a7c15ull * (t + 1);
    for (int round = 0; round < 4; round++) {
        for (size_t i = 0; i < PER; i++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            size_t n = 1 + (size_t)(x % (i % 64 == 0 ? (256u << 10) : 4096u));
            g_blocks[t][i] = test_heap_thread_site(n);
            memset(g_blocks[t][i], (int)t, n < 64 ? n : 64);
        }
        pthread_barrier_wait(&g_barrier);
        /* free the next thread's blocks */
        size_t o = (t + 1) % THREADS;
        for (size_t i = 0; i < PER; i++)
            free(g_blocks[o][i]);
        pthread_barrier_wait(&g_barrier);
    }
    return NULL;
}

static void threads_free_each_others_samples(void **st)
{
    (void)st;
    if (!pd_agent_heap_enabled())
        skip();
    pd_agent_heap_set_rate(8192); /* about one block in four sampled */
    pd_agent_stats a, b;
    pd_agent_get_stats(&a);
    pthread_t th[THREADS];
    pthread_barrier_init(&g_barrier, NULL, THREADS);
    for (size_t t = 0; t < THREADS; t++)
        assert_int_equal(pthread_create(&th[t], NULL, churn, (void *)t), 0);
    for (size_t t = 0; t < THREADS; t++)
        pthread_join(th[t], NULL);
    pthread_barrier_destroy(&g_barrier);
    pd_agent_get_stats(&b);
    pd_agent_heap_set_rate(PD_AGENT_DEFAULT_HEAP_RATE);
    print_message("samples %llu dropped %llu\n",
                  (unsigned long long)(b.heap_samples - a.heap_samples),
                  (unsigned long long)(b.heap_dropped - a.heap_dropped));
    assert_true(b.heap_samples - a.heap_samples > THREADS * PER / 2);
    assert_int_equal(b.heap_dropped, a.heap_dropped);
    int64_t v[4];
    size_t nt;
    char comment[200];
    heap_totals("test_heap_thread_site", v, &nt, comment, sizeof comment);
    assert_true(v[1] > 0);     /* allocated */
    assert_int_equal(v[3], 0); /* all freed, by other threads */
}

static void forked_child_samples(void **st)
{
    (void)st;
    if (!pd_agent_heap_enabled())
        skip();
    sample_everything();
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        int ok = 1;
        for (int i = 0; i < 1000 && ok; i++) {
            unsigned char *p = malloc(100 + (size_t)i);
            ok = pd__agent_region_owns(p);
            fill(p, 100 + (size_t)i, 5);
            p = realloc(p, 200 + (size_t)i);
            ok = ok && same(p, 100 + (size_t)i, 5);
            free(p);
        }
        _exit(ok ? 0 : 1);
    }
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    pd_agent_heap_set_rate(PD_AGENT_DEFAULT_HEAP_RATE);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(sampled_allocations_are_unsampled_and_freed),
        cmocka_unit_test(rate_zero_stops_sampling),
        cmocka_unit_test(sampled_blocks_keep_every_contract),
        cmocka_unit_test(threads_free_each_others_samples),
        cmocka_unit_test(forked_child_samples),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
