/*
 * api/serve.c — reply plumbing beside the handlers: the UI's embedded assets
 * with entity tags (304 on revalidation), gzip of text replies, and the text
 * error of the push endpoints (see api_int.h).
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "api/api_int.h"
#include "base/buf.h"
#include "base/log.h"
#include "pprof/pprof.h"

/* An embedded UI asset with its entity tag: "Cache-Control: no-cache" (the
 * browser keeps it and revalidates), 304 with no body when If-None-Match
 * names the tag (RFC 9110 13.1.2: weak comparison). */
void pd__api_serve_asset(const pd_http_request *req, pd_http_response *resp, const pd_ui_asset *a)
{
    const char *inm = pd_http_header(req, "If-None-Match");
    pd_http_add_header(resp, "ETag", a->etag);
    pd_http_add_header(resp, "Cache-Control", "no-cache");
    if (inm && (strcmp(inm, "*") == 0 || strstr(inm, a->etag + 2 /* past W/ */))) {
        resp->status = 304;
        resp->content_type = a->content_type;
        return;
    }
    resp->content_type = a->content_type;
    if (pd_buf_append(&resp->body, a->data, a->len) < 0) {
        pd_buf_reset(&resp->body);
        resp->status = 500;
        resp->content_type = "text/plain; charset=utf-8";
        pd_buf_puts(&resp->body, "out of memory\n");
    }
}

/* gzip of a text reply (JSON, HTML, JS, CSS, SVG, plain text) of 1 KiB or
 * more when the client accepts it (Accept-Encoding names gzip without
 * q=0): as Prometheus' and Pyroscope's servers do. pprof bodies
 * (application/octet-stream, already gzip) are left as they are. On any
 * failure the reply goes out uncompressed. */
void pd__api_maybe_gzip(const pd_http_request *req, pd_http_response *resp)
{
    const char *ae = pd_http_header(req, "Accept-Encoding");
    const char *ct = resp->content_type ? resp->content_type : "text/plain";
    if (!ae || resp->body.len < 1024 || resp->status == 304)
        return;
    if (strncmp(ct, "application/json", 16) && strncmp(ct, "text/", 5) &&
        strncmp(ct, "image/svg+xml", 13))
        return;
    if (resp->headers && strstr(resp->headers, "Content-Encoding:"))
        return;
    const char *g = strstr(ae, "gzip");
    if (!g)
        return;
    const char *q = g + 4;
    while (*q == ' ')
        q++;
    if (*q == ';') { /* gzip;q=0 (or 0.0, 0.00): refused */
        const char *v = strstr(q, "q=");
        if (v && v[2] == '0' && strspn(v + 3, ".0") == strcspn(v + 3, ",; "))
            return;
    }
    pd_buf z;
    pd_buf_init(&z, resp->body.max);
    if (pd_gzip((const uint8_t *)resp->body.data, resp->body.len, &z) < 0 ||
        pd_http_add_header(resp, "Content-Encoding", "gzip") < 0) {
        pd_buf_release(&z);
        return;
    }
    pd_http_add_header(resp, "Vary", "Accept-Encoding");
    pd_buf_release(&resp->body);
    resp->body = z;
}

int pd__api_input_status(int rc)
{
    return rc == PD_ETOOBIG ? 413 : rc == PD_ENOMEM ? 500 : 400;
}

const char *pd__api_input_reason(int rc, const char *bad)
{
    return rc == PD_ETOOBIG ? "too_large" : rc == PD_ENOMEM ? NULL : bad;
}

void pd__api_input_error(pd_http_response *resp, int rc, const pd_err *err, const char *what)
{
    pd__api_text_error(resp, pd__api_input_status(rc), pd__api_input_reason(rc, "bad_profile"),
                       "%s: %s", what, err && err->msg[0] ? err->msg : pd_strerror(rc));
}

void pd__api_text_error(pd_http_response *resp, int status, const char *reason, const char *fmt,
                        ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (reason)
        pd__api_count_rejected(reason);
    pd_buf_reset(&resp->body);
    resp->status = status;
    resp->content_type = "text/plain; charset=utf-8";
    pd_buf_puts(&resp->body, msg);
    pd_buf_puts(&resp->body, "\n");
    pd_log(PD_LOG_DEBUG, "ingest refused", "status=%d reason=%s", status, reason ? reason : "none");
}
