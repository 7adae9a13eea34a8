/*
 * base/cancel.h — cancellation of the query a thread is running (issue 35:
 * a query stops when its client leaves and when profd shuts down).
 *
 * The HTTP server gives each request run on a worker a pd_cancel token and
 * binds it to that thread for the handler's call (pd_cancel_bind). Loops
 * that may run long (series selection, label listings, merges and the
 * storage's aggregation) poll pd_cancel_requested() — or, on a thread of
 * their own, pd_cancel_check() of the token they were handed — and stop
 * with PD_ECANCELED. A token trips when:
 *   - its `gone` callback says the client left (polled at most every
 *     PD_CANCEL_POLL_NS: libmicrohttpd does not watch a suspended
 *     connection, so a close is seen by polling the socket, not notified);
 *   - pd_cancel_shutdown() was called (SIGINT/SIGTERM): every token trips.
 * Thread-safe: a token may be checked from many threads at once.
 */
#ifndef PD_BASE_CANCEL_H
#define PD_BASE_CANCEL_H
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#define PD_CANCEL_POLL_NS 20000000 /* 20 ms between two polls of `gone` */

typedef enum {
    PD_CANCEL_NONE = 0,
    PD_CANCEL_CLIENT_GONE = 1, /* the client closed its connection */
    PD_CANCEL_SHUTDOWN = 2,    /* profd is stopping */
} pd_cancel_reason;

typedef struct pd_cancel {
    _Atomic int reason;           /* pd_cancel_reason; set once */
    _Atomic int64_t next_poll_ns; /* pd_mono_ns() of the next poll of gone */
    bool (*gone)(void *ctx);      /* may be NULL: only shutdown trips it */
    void *ctx;                    /* gone's argument (borrowed) */
} pd_cancel;

/* A token that polls gone(ctx) (NULL: none). No allocation. */
void pd_cancel_init(pd_cancel *c, bool (*gone)(void *ctx), void *ctx);
/* Makes c the calling thread's current token (NULL: none). */
void pd_cancel_bind(pd_cancel *c);
/* The calling thread's current token, or NULL. Hand it to worker threads
 * that check for the query (pd_cancel_check). */
pd_cancel *pd_cancel_current(void);
/* True once c has tripped (above); c NULL: true during shutdown only. */
bool pd_cancel_check(pd_cancel *c);
/* pd_cancel_check(pd_cancel_current()). */
bool pd_cancel_requested(void);
/* Why c tripped (PD_CANCEL_NONE: it has not). */
pd_cancel_reason pd_cancel_reason_of(const pd_cancel *c);
/* The message for a query stopped by the current token: "query canceled
 * by the client" (as merges say it) or "query canceled: profd is shutting
 * down". Static. */
const char *pd_cancel_message(void);
/* Trips every token, present and future (process shutdown). */
void pd_cancel_shutdown(void);
/* Test hook (PROFD_TEST_QUERY_HOLD set in the environment): blocks until
 * the current query is cancelled, then returns true; false at once without
 * the variable. Lets tests hold a query open deterministically. */
bool pd_cancel_test_hold(void);

#endif
