/* Unit tests of src/agent/region.c, the address range sampled heap blocks
 * come from: classes (power-of-two pages, aligned to their size), LIFO
 * reuse, what reads as zero (fresh blocks, large ones given back with
 * MADV_DONTNEED) and what does not (small reused ones), alignment larger
 * than the size, the gap left by aligning the bump offset serving smaller
 * classes, and requests larger than the range. Heap sampling is set to 0
 * so that the interposers take no block meanwhile. Compiled out (skipped)
 * where a sanitizer owns malloc. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>
#include "agent/agent_int.h"

#ifndef PD_AGENT_NO_HEAP
static int all_zero(const unsigned char *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (p[i])
            return 0;
    return 1;
}

static void *alloc(size_t n, size_t align, unsigned *cls, bool *zeroed)
{
    void *p = pd__agent_region_alloc(n, align, cls, zeroed);
    assert_non_null(p);
    assert_true(pd__agent_region_owns(p));
    assert_int_equal((uintptr_t)p % pd__agent_region_class_size(*cls), 0);
    return p;
}
#endif

static void classes_reuse_and_zeroes(void **st)
{
    (void)st;
#ifdef PD_AGENT_NO_HEAP
    skip();
#else
    pd_agent_heap_set_rate(0);
    assert_int_equal(pd__agent_region_init(), 0);
    uintptr_t lo = pd__agent_region_lo, hi = pd__agent_region_hi, size = hi - lo;
    assert_true(size >= (16u << 20));
    assert_int_equal(size & (size - 1), 0); /* a power of two */
    assert_int_equal(lo & (size - 1), 0);   /* aligned to it */
    unsigned c;
    bool z;
    unsigned char *a = alloc(1, 0, &c, &z);
    assert_int_equal(c, 0);
    assert_int_equal(pd__agent_region_class_size(c), 4096);
    assert_true(z && all_zero(a, 4096));
    unsigned char *b = alloc(5000, 0, &c, &z);
    assert_int_equal(c, 1);
    /* a freed small block comes back first, as it was left */
    memset(a, 0xcd, 4096);
    pd__agent_region_free(a, 0);
    unsigned char *a2 = alloc(100, 0, &c, &z);
    assert_ptr_equal(a2, a);
    assert_int_equal(c, 0);
    assert_false(z);
    assert_int_equal(a2[4095], 0xcd);
    /* a freed large block stays resident (reused dirty, as glibc would)
       while the dirty ones are under 32 MiB ... */
    unsigned char *m = alloc(1 << 20, 0, &c, &z);
    assert_int_equal(c, 8);
    memset(m, 0xef, 1 << 20);
    pd__agent_region_free(m, 8);
    unsigned char *m2 = alloc((1 << 20) - 5, 0, &c, &z);
    assert_ptr_equal(m2, m);
    assert_false(z);
    assert_int_equal(m2[(1 << 20) - 1], 0xef);
    /* ... past that, freed ones go back to the kernel: zero again. 40 x 1
       MiB freed: 32 kept, 8 given back; reused LIFO, the 8 come first */
    unsigned char *many[40];
    for (int i = 0; i < 40; i++) {
        many[i] = alloc(1 << 20, 0, &c, &z);
        memset(many[i], 0xef, 1 << 20);
    }
    for (int i = 0; i < 40; i++)
        pd__agent_region_free(many[i], 8);
    int n_zero = 0;
    for (int i = 0; i < 40; i++) {
        many[i] = alloc(1 << 20, 0, &c, &z);
        if (z) {
            assert_true(all_zero(many[i], 1 << 20));
            n_zero++;
        } else {
            assert_int_equal(many[i][12345], 0xef);
        }
        assert_int_equal(z, i < 8);
    }
    assert_int_equal(n_zero, 8);
    for (int i = 0; i < 40; i++)
        pd__agent_region_free(many[i], 8);
    /* alignment beyond the size: the class follows the alignment */
    void *al = alloc(10, 1 << 21, &c, &z);
    assert_int_equal((uintptr_t)al % (1 << 21), 0);
    assert_int_equal(c, 9);
    /* the gaps that aligning the 1 MiB and 2 MiB blocks left are cut into
     * aligned runs for the smaller classes: 64 KiB and 16 KiB blocks come
     * from there (below the 1 MiB block) in a fresh range */
    unsigned c64;
    unsigned char *big = alloc(64 << 10, 0, &c64, &z);
    unsigned c16;
    unsigned char *mid = alloc(16 << 10, 0, &c16, &z);
    assert_int_equal(c64, 4);
    assert_int_equal(c16, 2);
    print_message("blocks at +%#lx (4 KiB) +%#lx (1 MiB) +%#lx (64 KiB) +%#lx (16 KiB)\n",
                  (unsigned long)((uintptr_t)a - lo), (unsigned long)((uintptr_t)m - lo),
                  (unsigned long)((uintptr_t)big - lo), (unsigned long)((uintptr_t)mid - lo));
    if ((uintptr_t)a == lo) { /* nothing was sampled before this test */
        assert_true(big < m);
        assert_true(mid < m);
    }
    /* more than the range: refused, not counted as exhaustion */
    uint64_t ex = pd__agent_region_exhausted();
    assert_null(pd__agent_region_alloc((size_t)size + 1, 0, &c, &z));
    assert_null(pd__agent_region_alloc(16, (size_t)size * 2, &c, &z));
    assert_int_equal(pd__agent_region_exhausted(), ex);
    pd__agent_region_free(a2, 0);
    pd__agent_region_free(b, 1);
    pd__agent_region_free(m2, 8);
    pd__agent_region_free(al, 9);
    pd__agent_region_free(big, c64);
    pd__agent_region_free(mid, c16);
    pd_agent_heap_set_rate(PD_AGENT_DEFAULT_HEAP_RATE);
#endif
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(classes_reuse_and_zeroes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
