/* Unit tests of src/agent/stack.c: the lock-free stack table and the
 * bounded frame-pointer unwinder. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>
#include "agent/agent_int.h"

static void table_merges_equal_stacks(void **st)
{
    (void)st;
    pd__agent_table t;
    assert_int_equal(pd__agent_table_init(&t, 64), 0);
    uintptr_t a[3] = {0x1000, 0x2000, 0x3000}, b[2] = {0x1000, 0x2000};
    long i1 = pd__agent_table_add(&t, a, 3, 1, 10);
    long i2 = pd__agent_table_add(&t, a, 3, 2, 20);
    long i3 = pd__agent_table_add(&t, b, 2, 1, 1);
    assert_true(i1 >= 0);
    assert_int_equal(i1, i2);
    assert_true(i3 >= 0 && i3 != i1);
    assert_int_equal(atomic_load(&t.slot[i1].v[0]), 3);
    assert_int_equal(atomic_load(&t.slot[i1].v[1]), 30);
    pd__agent_table_reset(&t);
    assert_int_equal(atomic_load(&t.slot[i1].state), 0);
}

static void table_full_drops_and_counts(void **st)
{
    (void)st;
    pd__agent_table t;
    assert_int_equal(pd__agent_table_init(&t, 8), 0);
    size_t ok = 0;
    for (uintptr_t i = 1; i <= 20; i++) {
        uintptr_t pc = i * 16;
        if (pd__agent_table_add(&t, &pc, 1, 1, 0) >= 0)
            ok++;
    }
    assert_int_equal(ok, 8);
    assert_int_equal(atomic_load(&t.dropped), 12);
}

static void unwind_follows_valid_frames(void **st)
{
    (void)st;
    uintptr_t stack[32] = {0};
    uintptr_t base = (uintptr_t)stack;
    /* frame at [4]: next at [10], ret 0x4010; frame at [10]: next at [20], ret 0x5010;
     * frame at [20]: next 0 (ends: not above), ret 0x6010 */
    stack[4] = base + 10 * 8, stack[5] = 0x4010;
    stack[10] = base + 20 * 8, stack[11] = 0x5010;
    stack[20] = 0, stack[21] = 0x6010;
    uintptr_t pc[8];
    uint32_t n = pd__agent_unwind(0x1234, base + 4 * 8, base, base + sizeof stack, pc, 8);
    assert_int_equal(n, 4);
    assert_int_equal(pc[0], 0x1234);
    assert_int_equal(pc[1], 0x400f);
    assert_int_equal(pc[2], 0x500f);
    assert_int_equal(pc[3], 0x600f);
}

static void unwind_stops_at_bad_frame_pointers(void **st)
{
    (void)st;
    uintptr_t stack[16] = {0};
    uintptr_t base = (uintptr_t)stack, hi = base + sizeof stack;
    uintptr_t pc[8];
    /* fp outside the bounds: only the leaf */
    assert_int_equal(pd__agent_unwind(0x1234, 0xdeadbeef0, base, hi, pc, 8), 1);
    /* misaligned */
    assert_int_equal(pd__agent_unwind(0x1234, base + 3, base, hi, pc, 8), 1);
    /* a frame pointing at itself or downward ends after one frame */
    stack[2] = base + 2 * 8, stack[3] = 0x7010;
    assert_int_equal(pd__agent_unwind(0, base + 16, base, hi, pc, 8), 1);
    /* a next frame past hi is not read */
    stack[2] = hi + 4096, stack[3] = 0x7010;
    assert_int_equal(pd__agent_unwind(0, base + 16, base, hi, pc, 8), 1);
    /* the record itself straddling hi is not read */
    assert_int_equal(pd__agent_unwind(0, hi - 8, base, hi, pc, 8), 0);
    /* depth is bounded */
    for (int i = 0; i < 7; i++)
        stack[2 * i] = base + (2 * i + 2) * 8, stack[2 * i + 1] = 0x8000 + (uintptr_t)i;
    assert_int_equal(pd__agent_unwind(0, base, base, hi, pc, 3), 3);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(table_merges_equal_stacks),
        cmocka_unit_test(table_full_drops_and_counts),
        cmocka_unit_test(unwind_follows_valid_frames),
        cmocka_unit_test(unwind_stops_at_bad_frame_pointers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
