/*
 * api/connect.c — Connect unary calls: request decoding (codec, gzip),
 * replies and Connect error JSON. connect.h documents the protocol subset.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include "api/api_int.h"
#include "api/connect.h"
#include "pprof/pprof.h"

static const struct {
    const char *name;
    int status;
} codes[] = {
    [PD_CONNECT_CANCELED] = {"canceled", 499},
    [PD_CONNECT_UNKNOWN] = {"unknown", 500},
    [PD_CONNECT_INVALID_ARGUMENT] = {"invalid_argument", 400},
    [PD_CONNECT_DEADLINE_EXCEEDED] = {"deadline_exceeded", 504},
    [PD_CONNECT_NOT_FOUND] = {"not_found", 404},
    [PD_CONNECT_ALREADY_EXISTS] = {"already_exists", 409},
    [PD_CONNECT_PERMISSION_DENIED] = {"permission_denied", 403},
    [PD_CONNECT_RESOURCE_EXHAUSTED] = {"resource_exhausted", 429},
    [PD_CONNECT_FAILED_PRECONDITION] = {"failed_precondition", 400},
    [PD_CONNECT_ABORTED] = {"aborted", 409},
    [PD_CONNECT_OUT_OF_RANGE] = {"out_of_range", 400},
    [PD_CONNECT_UNIMPLEMENTED] = {"unimplemented", 501},
    [PD_CONNECT_INTERNAL] = {"internal", 500},
    [PD_CONNECT_UNAVAILABLE] = {"unavailable", 503},
    [PD_CONNECT_DATA_LOSS] = {"data_loss", 500},
    [PD_CONNECT_UNAUTHENTICATED] = {"unauthenticated", 401},
};

const char *pd_connect_code_name(pd_connect_code code)
{
    return (unsigned)code < sizeof codes / sizeof codes[0] ? codes[code].name : "unknown";
}

int pd_connect_code_status(pd_connect_code code)
{
    return (unsigned)code < sizeof codes / sizeof codes[0] ? codes[code].status : 500;
}

pd_connect_code pd_connect_code_of(int rc)
{
    switch (rc) {
    case PD_EPARSE:
    case PD_EINVAL:
    case PD_EAMBIGUOUS:
    case PD_EOUTOFBOUNDS:
        return PD_CONNECT_INVALID_ARGUMENT;
    case PD_ENOTFOUND:
        return PD_CONNECT_NOT_FOUND;
    case PD_ETOOBIG:
    case PD_ENOMEM:
    case PD_ELIMIT:
        return PD_CONNECT_RESOURCE_EXHAUSTED;
    case PD_ETIMEOUT:
        return PD_CONNECT_DEADLINE_EXCEEDED;
    case PD_ECANCELED:
        return PD_CONNECT_CANCELED;
    case PD_EEXIST:
        return PD_CONNECT_ALREADY_EXISTS;
    case PD_ECLOSED:
        return PD_CONNECT_UNAVAILABLE;
    default:
        return PD_CONNECT_INTERNAL;
    }
}

void pd_connect_error(pd_http_response *resp, pd_connect_code code, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    resp->status = pd_connect_code_status(code);
    resp->content_type = "application/json";
    pd_buf_reset(&resp->body);
    pd_buf_printf(&resp->body, "{\"code\":\"%s\",\"message\":", pd_connect_code_name(code));
    pd_buf_put_json_string(&resp->body, msg, strlen(msg));
    pd_buf_putc(&resp->body, '}');
}

/* Media type of Content-Type without parameters, case-insensitively. */
static bool media_is(const char *ct, const char *want)
{
    size_t n = strlen(want);
    if (strncasecmp(ct, want, n) != 0)
        return false;
    return ct[n] == 0 || ct[n] == ';' || ct[n] == ' ';
}

/* True when an Accept-Encoding list names gzip (q=0 not honoured). */
static bool accepts_gzip(const char *ae)
{
    if (!ae)
        return false;
    for (const char *p = ae; (p = strcasestr(p, "gzip")) != NULL; p += 4) {
        bool start = p == ae || p[-1] == ',' || p[-1] == ' ';
        bool end = p[4] == 0 || p[4] == ',' || p[4] == ';' || p[4] == ' ';
        if (start && end)
            return true;
    }
    return false;
}

int pd_connect_decode(const pd_http_request *req, const ProtobufCMessageDescriptor *d,
                      ProtobufCMessage **out, pd_connect_call *call, pd_http_response *resp)
{
    pd_err err = {{0}};
    pd_buf plain;
    pd_buf_init(&plain, PD_CONNECT_MAX_DECOMPRESSED);
    int rc;
    *out = NULL;
    memset(call, 0, sizeof *call);
    call->gzip_reply = accepts_gzip(pd_http_header(req, "Accept-Encoding"));
    if (strcmp(req->method, "POST") != 0) {
        pd_http_add_header(resp, "Allow", "POST");
        pd_connect_error(resp, PD_CONNECT_UNIMPLEMENTED,
                         "method %s not allowed; Connect unary calls are POST", req->method);
        resp->status = 405;
        pd__api_count_rejected("connect_method");
        return PD_EINVAL;
    }
    const char *ct = pd_http_header(req, "Content-Type");
    if (ct && (media_is(ct, "application/proto") || media_is(ct, "application/protobuf") ||
               media_is(ct, "application/x-protobuf")))
        call->codec = PD_CONNECT_PROTO;
    else if (ct && media_is(ct, "application/json"))
        call->codec = PD_CONNECT_JSON;
    else {
        pd_connect_error(resp, PD_CONNECT_INVALID_ARGUMENT,
                         "Content-Type %.100s is not supported; use application/proto or "
                         "application/json (Connect unary)",
                         ct ? ct : "(none)");
        resp->status = 415;
        pd_http_add_header(resp, "Accept-Post", "application/proto, application/json");
        pd__api_count_rejected("connect_media_type");
        return PD_EINVAL;
    }
    const uint8_t *body = req->body;
    size_t len = req->body_len;
    const char *ce = pd_http_header(req, "Content-Encoding");
    if (!ce)
        ce = pd_http_header(req, "Connect-Content-Encoding");
    if (ce && strcasecmp(ce, "gzip") == 0) {
        if ((rc = pd_gunzip(body, len, PD_CONNECT_MAX_DECOMPRESSED, &plain, &err)) < 0) {
            pd_connect_error(resp,
                             rc == PD_ETOOBIG ? PD_CONNECT_RESOURCE_EXHAUSTED
                                              : PD_CONNECT_INVALID_ARGUMENT,
                             "gzip request body: %s", err.msg);
            pd__api_count_rejected(rc == PD_ETOOBIG ? "connect_too_big" : "connect_gzip");
            goto out;
        }
        body = (const uint8_t *)plain.data;
        len = plain.len;
    } else if (ce && strcasecmp(ce, "identity") != 0) {
        pd_connect_error(resp, PD_CONNECT_UNIMPLEMENTED,
                         "Content-Encoding %.60s is not supported; use gzip or identity", ce);
        pd__api_count_rejected("connect_encoding");
        rc = PD_EINVAL;
        goto out;
    }
    if ((rc = pd_connect_unpack(call->codec, body, len, d, out, &err)) < 0) {
        pd_connect_error(resp, pd_connect_code_of(rc), "%s request: %s", d->name, err.msg);
        pd__api_count_rejected("connect_message");
    }
out:
    pd_buf_release(&plain);
    return rc;
}

void pd_connect_reply(pd_http_response *resp, const pd_connect_call *call,
                      const ProtobufCMessage *msg)
{
    pd_buf raw;
    pd_buf_init(&raw, resp->body.max);
    int rc = 0;
    if (call->codec == PD_CONNECT_JSON) {
        rc = pd_connect_json_encode(msg, &raw);
    } else {
        size_t n = protobuf_c_message_get_packed_size(msg);
        if ((rc = pd_buf_reserve(&raw, n + 1)) == 0) {
            protobuf_c_message_pack(msg, (uint8_t *)raw.data);
            raw.len = n;
            raw.data[n] = 0;
        }
    }
    if (rc < 0) {
        pd_buf_release(&raw);
        pd_connect_error(resp, PD_CONNECT_RESOURCE_EXHAUSTED,
                         "reply over the size limit of %zu bytes; narrow the query",
                         resp->body.max);
        return;
    }
    pd_buf_reset(&resp->body);
    if (call->gzip_reply && raw.len > 1024) {
        rc = pd_gzip((const uint8_t *)raw.data, raw.len, &resp->body);
        if (rc == 0)
            pd_http_add_header(resp, "Content-Encoding", "gzip");
    } else {
        rc = -1;
    }
    if (rc != 0) {
        pd_buf_reset(&resp->body);
        if (pd_buf_append(&resp->body, raw.data ? raw.data : "", raw.len) < 0) {
            pd_buf_release(&raw);
            pd_connect_error(resp, PD_CONNECT_RESOURCE_EXHAUSTED, "reply too large");
            return;
        }
    }
    pd_buf_release(&raw);
    resp->status = 200;
    resp->content_type = call->codec == PD_CONNECT_JSON ? "application/json" : "application/proto";
}
