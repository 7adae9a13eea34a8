#include "base/error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

const char *pd_strerror(int code)
{
    switch (code) {
    case PD_OK:
        return "ok";
    case PD_ENOMEM:
        return "out of memory";
    case PD_EINVAL:
        return "invalid input";
    case PD_ECORRUPT:
        return "corrupt data";
    case PD_ETOOBIG:
        return "input too large";
    case PD_ENOTFOUND:
        return "not found";
    case PD_EPARSE:
        return "parse error";
    case PD_ETIMEOUT:
        return "timed out";
    case PD_EEXIST:
        return "already exists";
    case PD_ECANCELED:
        return "canceled";
    case PD_EAMBIGUOUS:
        return "ambiguous";
    case PD_ECLOSED:
        return "closed";
    case PD_EOUTOFBOUNDS:
        return "out of bounds";
    case PD_ELIMIT:
        return "limit reached";
    default:
        if (code < 0 && code > -1000)
            return strerror(-code);
        return "unknown error";
    }
}

int pd_err_set(pd_err *err, int code, const char *fmt, ...)
{
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->msg, sizeof err->msg, fmt, ap);
        va_end(ap);
    }
    return code;
}

void pd_err_prefix(pd_err *err, const char *fmt, ...)
{
    if (!err)
        return;
    char prefix[256], old[sizeof err->msg];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    memcpy(old, err->msg, sizeof old);
    snprintf(err->msg, sizeof err->msg, "%.200s: %.300s", prefix, old);
}

void pd_err_clear(pd_err *err)
{
    if (err)
        err->msg[0] = '\0';
}
