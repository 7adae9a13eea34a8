/* Helpers shared by the cmocka unit tests (include as "../pd_test.h" after <cmocka.h>). */
#ifndef PD_TEST_H
#define PD_TEST_H

#include <stdio.h>

/* PD_ASSERT_OK(call, errp): evaluates call (an int-returning pd_* function that
 * fills the pd_err *errp on failure) once; if it is not 0, fails the test with
 * the call's text, its code and errp->msg (e.g. "localhost: Name or service not
 * known"), not only the code. */
#define PD_ASSERT_OK(call, errp)                                                             \
    do {                                                                                     \
        int pd_test_rc_ = (call);                                                            \
        if (pd_test_rc_ != 0)                                                                \
            fail_msg("%s failed: %d: %s", #call, pd_test_rc_, (errp)->msg);                  \
    } while (0)

/* PD_ASSERT_RC(call, want, errp): as PD_ASSERT_OK for an expected code want
 * (e.g. -EADDRINUSE): on any other code, fails with both codes and errp->msg. */
#define PD_ASSERT_RC(call, want, errp)                                                       \
    do {                                                                                     \
        int pd_test_rc_ = (call);                                                            \
        int pd_test_want_ = (want);                                                          \
        if (pd_test_rc_ != pd_test_want_)                                                    \
            fail_msg("%s returned %d, expected %d (%s): %s", #call, pd_test_rc_,             \
                     pd_test_want_, #want, (errp)->msg);                                     \
    } while (0)

#endif
