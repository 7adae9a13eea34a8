/*
 * api/envelope.c — the reply envelopes of Prometheus' HTTP API
 * ({"status":"success","data":...,"warnings":[...]} and
 * {"status":"error","errorType":...,"error":...}), the HTTP status of an
 * error code, and the parameters every /api/v1 handler reads alike (times,
 * selectors, counts). Declared in api_int.h; used by api.c and the other
 * handlers of api/.
 */
#include "api/api_int.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "base/parse.h"
#include "base/time.h"
#include "query/query.h"

static const char JSON_CT[] = "application/json";
static const char TEXT_CT[] = "text/plain; charset=utf-8";

/* ---- replies ---- */

static const char *error_type(int status)
{
    switch (status) {
    case 400:
        return "bad_data";
    case 404:
        return "not_found";
    case 405:
    case 409:
    case 413:
        return "bad_data";
    case 422:
        return "execution";
    case 503:
        return "timeout";
    default:
        return "internal";
    }
}

/* The HTTP status for an error code of query/storage. */
int pd__api_status_of(int rc)
{
    switch (rc) {
    case PD_EPARSE:
    case PD_EINVAL:
    case PD_EAMBIGUOUS:
        return 400;
    case PD_ENOTFOUND:
        return 404;
    case PD_ETOOBIG:
        return 422;
    case PD_ETIMEOUT:
        return 503;
    default:
        return 500;
    }
}

/* Replaces the body with a Prometheus error envelope. */
void pd__api_reply_error(pd_http_response *resp, int status, const char *fmt, ...)
{
    char msg[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    pd_buf_reset(&resp->body);
    resp->status = status;
    resp->content_type = JSON_CT;
    pd_buf_printf(&resp->body,
                  "{\"status\":\"error\",\"errorType\":\"%s\",\"error\":", error_type(status));
    pd_buf_put_json_string(&resp->body, msg, strlen(msg));
    pd_buf_puts(&resp->body, "}");
}

void pd__api_reply_text(pd_http_response *resp, int status, const char *text)
{
    pd_buf_reset(&resp->body);
    resp->status = status;
    resp->content_type = TEXT_CT;
    pd_buf_puts(&resp->body, text);
}

/* The storage warnings of the request this thread handles (pd_api_handle). */
static _Thread_local pd_storage_warnings *t_warn;

void pd__api_set_warnings(pd_storage_warnings *w)
{
    t_warn = w;
}

int pd__api_put_warnings(pd_buf *b)
{
    const pd_storage_warnings *w = t_warn;
    if (!w || (!w->n && !w->dropped))
        return 0;
    int rc = pd_buf_puts(b, ",\"warnings\":[");
    for (size_t i = 0; i < w->n && !rc; i++) {
        if (i)
            rc = pd_buf_putc(b, ',');
        if (!rc)
            rc = pd_buf_put_json_string(b, w->v[i], strlen(w->v[i]));
    }
    if (!rc && w->dropped)
        rc = pd_buf_printf(b, "%s\"%zu more warnings not shown\"", w->n ? "," : "", w->dropped);
    if (!rc)
        rc = pd_buf_putc(b, ']');
    return rc;
}

/* Starts a success envelope; the caller appends data, then ends it. */
int pd__api_begin_success(pd_http_response *resp)
{
    resp->content_type = JSON_CT;
    return pd_buf_puts(&resp->body, "{\"status\":\"success\",\"data\":");
}

int pd__api_end_success(pd_http_response *resp)
{
    int rc = pd__api_put_warnings(&resp->body);
    return rc ? rc : pd_buf_puts(&resp->body, "}");
}

/* Finishes a query call that appended data (or failed with rc/err). */
void pd__api_finish_query(pd_http_response *resp, int rc, const pd_err *err, const char *what)
{
    if (rc == 0)
        rc = pd__api_end_success(resp);
    if (rc < 0) {
        if (rc == PD_ETOOBIG && !err->msg[0])
            pd__api_reply_error(resp, 422, "%s: reply over the size limit of %zu bytes", what,
                                resp->body.max);
        else
            pd__api_reply_error(resp, pd__api_status_of(rc), "%s",
                                err->msg[0] ? err->msg : pd_strerror(rc));
    }
}

/* ---- parameters ---- */

const char *pd__api_arg_any(const pd_http_request *req, const char *a, const char *b)
{
    const char *v = pd_http_arg(req, a);
    if ((!v || !*v) && b)
        v = pd_http_arg(req, b);
    return v && *v ? v : NULL;
}

/* Parses an optional time parameter; def when absent. 0, or replies 400. */
int pd__api_time_param(const pd_http_request *req, pd_http_response *resp, const char *name,
                       const char *alias, int64_t def, int64_t *out)
{
    const char *v = pd__api_arg_any(req, name, alias);
    if (!v) {
        *out = def;
        return 0;
    }
    pd_err err = {{0}};
    if (pd_parse_time_param(v, out, &err) < 0) {
        pd__api_reply_error(resp, 400, "invalid parameter \"%s\": %s",
                            pd_http_arg(req, name) ? name : alias,
                            err.msg[0] ? err.msg : "cannot parse time");
        return -1;
    }
    return 0;
}

/* Validates a selector; replies 400 naming the parameter on failure. */
int pd__api_check_selector(pd_http_response *resp, const char *param, const char *sel)
{
    pd_matcher *ms = NULL;
    size_t n = 0;
    pd_err err = {{0}};
    int rc = pd_selector_parse(sel, &ms, &n, &err);
    if (rc < 0) {
        pd__api_reply_error(resp, 400, "invalid parameter \"%s\": %s", param,
                            err.msg[0] ? err.msg : pd_strerror(rc));
        return -1;
    }
    pd_matchers_free(ms, n);
    return 0;
}

int pd__api_uint_param(const pd_http_request *req, pd_http_response *resp, const char *name,
                       const char *alias, size_t def, size_t *out)
{
    const char *v = pd__api_arg_any(req, name, alias);
    if (!v) {
        *out = def;
        return 0;
    }
    uint64_t x;
    int rc = pd_parse_u64(v, SIZE_MAX, &x);
    if (rc < 0) {
        pd__api_reply_error(
            resp, 400,
            rc == PD_ETOOBIG ? "invalid parameter \"%s\": \"%.64s\" is too large"
                             : "invalid parameter \"%s\": \"%.64s\" is not a non-negative integer "
                               "(decimal digits only)",
            pd_http_arg(req, name) ? name : alias, v);
        return -1;
    }
    *out = (size_t)x;
    return 0;
}
