/*
 * base/cancel.c — query cancellation tokens (API: cancel.h).
 */
#include "base/cancel.h"

#include <stdlib.h>
#include <time.h>

#include "base/log.h"
#include "base/time.h"

static _Atomic int shutting_down;
static _Thread_local pd_cancel *current;

void pd_cancel_init(pd_cancel *c, bool (*gone)(void *ctx), void *ctx)
{
    atomic_store(&c->reason, PD_CANCEL_NONE);
    atomic_store(&c->next_poll_ns, 0);
    c->gone = gone;
    c->ctx = ctx;
}

void pd_cancel_bind(pd_cancel *c)
{
    current = c;
}

pd_cancel *pd_cancel_current(void)
{
    return current;
}

static void trip(pd_cancel *c, int why)
{
    int none = PD_CANCEL_NONE;
    atomic_compare_exchange_strong(&c->reason, &none, why);
}

bool pd_cancel_check(pd_cancel *c)
{
    if (atomic_load_explicit(&shutting_down, memory_order_relaxed)) {
        if (c)
            trip(c, PD_CANCEL_SHUTDOWN);
        return true;
    }
    if (!c)
        return false;
    if (atomic_load_explicit(&c->reason, memory_order_relaxed) != PD_CANCEL_NONE)
        return true;
    if (!c->gone)
        return false;
    int64_t now = pd_mono_ns(), next = atomic_load_explicit(&c->next_poll_ns, memory_order_relaxed);
    if (now < next ||
        !atomic_compare_exchange_strong(&c->next_poll_ns, &next, now + PD_CANCEL_POLL_NS))
        return false; /* polled lately, or another thread polls now */
    if (c->gone(c->ctx)) {
        trip(c, PD_CANCEL_CLIENT_GONE);
        return true;
    }
    return false;
}

bool pd_cancel_requested(void)
{
    return pd_cancel_check(current);
}

pd_cancel_reason pd_cancel_reason_of(const pd_cancel *c)
{
    return c ? (pd_cancel_reason)atomic_load(&c->reason) : PD_CANCEL_NONE;
}

const char *pd_cancel_message(void)
{
    return pd_cancel_reason_of(current) == PD_CANCEL_SHUTDOWN || atomic_load(&shutting_down)
               ? "query canceled: profd is shutting down"
               : "query canceled by the client";
}

void pd_cancel_shutdown(void)
{
    atomic_store(&shutting_down, 1);
}

bool pd_cancel_test_hold(void)
{
    if (!getenv("PROFD_TEST_QUERY_HOLD"))
        return false;
    pd_log(PD_LOG_INFO, "test hook: query held until cancelled", NULL);
    struct timespec ts = {0, 5000000};
    while (!pd_cancel_requested())
        nanosleep(&ts, NULL);
    return true;
}
