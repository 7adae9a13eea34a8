/*
 * api/otlp.c — OTLP/HTTP profiles receiver:
 *
 *   POST /v1development/profiles
 *
 * Body: an ExportProfilesServiceRequest (opentelemetry-proto v1.11.0,
 * profiles/v1development) as binary protobuf (Content-Type
 * application/x-protobuf) or OTLP/JSON, optionally Content-Encoding: gzip (a gzip body
 * is also recognised by its magic). Each profile is converted by
 * ingest/otlp.c and stored in its own series (labels from the resource
 * attributes, __name__ from the sample type) at its time_unix_nano (now
 * when unset).
 *
 * Several profiles of one scope at one time (a pprof with n sample types
 * converted the standard way) are stored as one profile with n sample types
 * (ingest/otlp.h).
 *
 * Replies (OTLP/HTTP, opentelemetry-proto docs/specification.md "OTLP/HTTP
 * Response"): 200 with an ExportProfilesServiceResponse; when some
 * profiles were refused (bad indices, a sample with neither values nor
 * timestamps, the series cap, out of bounds), partial_success carries rejected_profiles (in
 * OTLP profiles, i.e. sample types) and the first error. A request that is
 * not one (bad protobuf, a request of another opentelemetry-proto release,
 * nesting or a table over its cap, gzip bomb) answers 400/413 (405 for a
 * wrong method, 500 out of memory) with a google.rpc.Status {code,
 * message} naming the problem, counted in profd_rejected_input_total{reason};
 * nothing of it is stored. Content-Type application/json: OTLP/JSON
 * (ingest/otlp_json.c turns it into the same protobuf first), answered in
 * JSON (the response and the Status alike); otherwise protobuf.
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "api/api_int.h"
#include "base/log.h"
#include "base/time.h"
#include "ingest/otlp.h"

/* Refuses the request: status with a google.rpc.Status (gRPC code from the
 * HTTP status, as the OTLP/HTTP spec maps them) in the request's encoding;
 * reason counted as pd__api_text_error does. */
static void otlp_fail(pd_http_response *resp, bool json, int status, const char *reason,
                      const char *fmt, ...) __attribute__((format(printf, 5, 6)));

static void otlp_fail(pd_http_response *resp, bool json, int status, const char *reason,
                      const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    pd__api_text_error(resp, status, reason, "%s", msg); /* counts and logs */
    int code = status == 400   ? 3                       /* INVALID_ARGUMENT */
               : status == 413 ? 8                       /* RESOURCE_EXHAUSTED */
               : status == 405 ? 12                      /* UNIMPLEMENTED */
                               : 13;                     /* INTERNAL */
    pd_buf_reset(&resp->body);
    if (pd_otlp_status(code, msg, json, &resp->body) < 0) {
        pd_buf_reset(&resp->body);
        return; /* empty body, status kept */
    }
    resp->content_type = json ? "application/json" : "application/x-protobuf";
}

const char *pd__otlp_profiles(const pd__api_env *env, const pd_http_request *req,
                              pd_http_response *resp)
{
    static const char H[] = "/v1development/profiles";
    const char *ct = pd_http_header(req, "Content-Type");
    bool json = ct && !strncasecmp(ct, "application/json", 16);
    if (strcmp(req->method, "POST") != 0) {
        pd_http_add_header(resp, "Allow", "POST");
        otlp_fail(resp, json, 405, NULL, "method not allowed; use POST");
        return H;
    }
    pd_pprof_limits lim = env->limits ? *env->limits : pd_pprof_limits_default();
    pd_pprof_limits dl = pd_pprof_limits_default();
    if (!lim.max_body_bytes)
        lim.max_body_bytes = dl.max_body_bytes;
    if (!lim.max_decompressed_bytes)
        lim.max_decompressed_bytes = dl.max_decompressed_bytes;
    if (req->body_len > lim.max_body_bytes) {
        otlp_fail(resp, json, 413, "too_large", "body is %zu bytes, over max_body_bytes=%zu",
                  req->body_len, lim.max_body_bytes);
        return H;
    }
    pd_buf plain, reply;
    pd_buf_init(&plain, lim.max_decompressed_bytes);
    pd_buf_init(&reply, 0);
    pd_err err = {{0}};
    pd_otlp_result r;
    bool have_r = false;
    const uint8_t *b = req->body;
    size_t n = req->body_len;
    int rc;
    if (pd_is_gzip(b, n)) {
        if ((rc = pd_gunzip(b, n, lim.max_decompressed_bytes, &plain, &err)) < 0) {
            otlp_fail(resp, json, pd__api_input_status(rc), pd__api_input_reason(rc, "bad_profile"),
                      "gzip body: %s", err.msg[0] ? err.msg : pd_strerror(rc));
            goto out;
        }
        b = (const uint8_t *)plain.data;
        n = plain.len;
    }
    pd_buf pb;
    pd_buf_init(&pb, lim.max_decompressed_bytes);
    if (json) {
        if ((rc = pd_otlp_json_to_protobuf((const char *)b, n, 0, &pb, &err)) < 0) {
            pd_buf_release(&pb);
            otlp_fail(resp, json, pd__api_input_status(rc), pd__api_input_reason(rc, "bad_profile"),
                      "OTLP/JSON: %s", err.msg);
            goto out;
        }
        b = (const uint8_t *)pb.data;
        n = pb.len;
    }
    pd_otlp_limits ol = pd_otlp_limits_default();
    ol.pprof = lim;
    rc = pd_otlp_convert(b, n, &ol, &r, &err);
    pd_buf_release(&pb);
    if (rc < 0) {
        otlp_fail(resp, json, pd__api_input_status(rc), pd__api_input_reason(rc, "bad_profile"),
                  "%s", err.msg);
        goto out;
    }
    have_r = true;
    int64_t rejected = (int64_t)r.rejected;
    char first[600];
    snprintf(first, sizeof first, "%s", r.first_error);
    if (r.rejected)
        pd__api_count_rejected("bad_profile");
    pd_buf enc;
    pd_buf_init(&enc, lim.max_decompressed_bytes);
    for (size_t i = 0; i < r.n; i++) {
        pd_buf_reset(&enc);
        int64_t ts = r.p[i].time_ms > 0 ? r.p[i].time_ms : pd_now_ms();
        pd_err_clear(&err);
        rc = pd_profile_encode(&r.p[i].profile, true, &enc);
        if (rc == 0)
            rc = pd__api_store(env, &r.p[i].labels, ts, (const uint8_t *)enc.data, enc.len,
                               &r.p[i].profile, "otlp", &err);
        if (rc == 0)
            continue;
        if (rc != PD_EOUTOFBOUNDS && rc != PD_ELIMIT) /* those are counted by pd__api_store */
            pd_log(PD_LOG_ERROR, "otlp: storage append failed", "err=\"%s\"", err.msg);
        if (!rejected)
            snprintf(first, sizeof first, "profile %zu (%zu sample types): %s", i, r.p[i].n_joined,
                     err.msg[0] ? err.msg : pd_strerror(rc));
        rejected += (int64_t)(r.p[i].n_joined ? r.p[i].n_joined : 1);
    }
    pd_buf_release(&enc);
    if ((json ? pd_otlp_json_response(rejected, first, &reply)
              : pd_otlp_response(rejected, first, &reply)) < 0) {
        otlp_fail(resp, json, 500, NULL, "out of memory");
        goto out;
    }
    pd_buf_reset(&resp->body);
    pd_buf_append(&resp->body, reply.data, reply.len);
    resp->status = 200;
    resp->content_type = json ? "application/json" : "application/x-protobuf";
out:
    if (have_r)
        pd_otlp_result_release(&r);
    pd_buf_release(&plain);
    pd_buf_release(&reply);
    return H;
}
