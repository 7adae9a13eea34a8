/* Unit tests of src/base/cancel.c. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "base/cancel.h"

static int polls;
static bool gone_answer;

static bool gone(void *ctx)
{
    (void)ctx;
    polls++;
    return gone_answer;
}

static void test_client_gone(void **state)
{
    (void)state;
    pd_cancel c;
    polls = 0;
    gone_answer = false;
    pd_cancel_init(&c, gone, NULL);
    assert_false(pd_cancel_check(&c));
    assert_int_equal(polls, 1); /* the first check polls */
    assert_int_equal(pd_cancel_reason_of(&c), PD_CANCEL_NONE);
    gone_answer = true;
    atomic_store(&c.next_poll_ns, 0); /* (the next poll is due) */
    assert_true(pd_cancel_check(&c));
    assert_int_equal(pd_cancel_reason_of(&c), PD_CANCEL_CLIENT_GONE);
    int n = polls;
    assert_true(pd_cancel_check(&c)); /* tripped for good: no more polls */
    assert_int_equal(polls, n);
}

static void test_bind(void **state)
{
    (void)state;
    pd_cancel c;
    pd_cancel_init(&c, NULL, NULL);
    assert_null(pd_cancel_current());
    assert_false(pd_cancel_requested()); /* no token: only shutdown */
    pd_cancel_bind(&c);
    assert_ptr_equal(pd_cancel_current(), &c);
    assert_false(pd_cancel_requested()); /* no gone callback: never by itself */
    pd_cancel_bind(NULL);
    assert_null(pd_cancel_current());
    assert_false(pd_cancel_test_hold()); /* without PROFD_TEST_QUERY_HOLD */
}

/* last: shutdown is for the whole process */
static void test_shutdown(void **state)
{
    (void)state;
    pd_cancel c;
    pd_cancel_init(&c, gone, NULL);
    gone_answer = false;
    pd_cancel_shutdown();
    assert_true(pd_cancel_check(NULL));
    assert_true(pd_cancel_check(&c));
    assert_int_equal(pd_cancel_reason_of(&c), PD_CANCEL_SHUTDOWN);
    pd_cancel_bind(&c);
    assert_true(pd_cancel_requested());
    pd_cancel_bind(NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_client_gone),
        cmocka_unit_test(test_bind),
        cmocka_unit_test(test_shutdown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
