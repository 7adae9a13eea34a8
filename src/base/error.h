/*
 * base/error.h — error codes and error messages for people.
 *
 * Every fallible function in profd returns an int: 0 on success, a negative
 * code on failure. OS errors pass through as -errno (as libuv does); profd's
 * own codes below are all < -1000 so they never collide with an errno value.
 *
 * Functions that can say more than a code take a `pd_err *err` (may be NULL)
 * as their last argument and fill err->msg with a sentence naming the input
 * and what was wrong with it ("sample 12: location id 99 not found").
 */
#ifndef PD_BASE_ERROR_H
#define PD_BASE_ERROR_H

#include <stddef.h>

enum {
    PD_OK = 0,
    PD_ENOMEM = -1001,       /* allocation failed */
    PD_EINVAL = -1002,       /* an argument or input value is not valid */
    PD_ECORRUPT = -1003,     /* stored data (disk, WAL) fails a check */
    PD_ETOOBIG = -1004,      /* input exceeds a configured cap */
    PD_ENOTFOUND = -1005,    /* the named thing does not exist */
    PD_EPARSE = -1006,       /* input text or bytes do not parse */
    PD_ETIMEOUT = -1007,     /* an operation ran past its deadline */
    PD_EEXIST = -1008,       /* the thing already exists */
    PD_ECANCELED = -1009,    /* the caller gave up */
    PD_EAMBIGUOUS = -1010,   /* a query matched more than one thing where one was required */
    PD_ECLOSED = -1011,      /* the object is closed or shutting down */
    PD_EOUTOFBOUNDS = -1012, /* a timestamp outside the window the store accepts (too far in
                                the future, or older than retention keeps) */
    PD_ELIMIT = -1013,       /* a configured limit on what is stored is reached (series per
                                service, issue 26) */
};

/* A message for a person. Always NUL-terminated; empty when unset. */
typedef struct pd_err {
    char msg[512];
} pd_err;

/* Returns a static, short description of `code` ("out of memory",
 * "corrupt data", or strerror(-code) for -errno values). Never NULL. */
const char *pd_strerror(int code);

/* Formats a message into err->msg (no-op when err is NULL) and returns
 * `code`, so callers can write `return pd_err_set(err, PD_EINVAL, "...")`. */
int pd_err_set(pd_err *err, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Prepends "prefix: " to err->msg (e.g. a file name). No-op when err is NULL. */
void pd_err_prefix(pd_err *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Clears err->msg. No-op when err is NULL. */
void pd_err_clear(pd_err *err);

#endif
