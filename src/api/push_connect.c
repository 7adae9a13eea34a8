/*
 * api/push_connect.c — POST /push.v1.PusherService/Push, the Connect push of
 * Pyroscope's SDKs (Python, Ruby, Rust, .NET, and Grafana Alloy):
 *
 *   PushRequest{series[{labels[{name,value}], samples[{raw_profile, ID}]}]}
 *
 * Each raw_profile is a pprof (gzip or not) stored under its series' labels
 * as given: __name__ is the profile type as Pyroscope's push gives it
 * ("process_cpu", "memory", ...; Pyroscope's distributor keeps it and derives
 * one profile type per sample type, which profd's querier does at read
 * time, querier_int.h). service_name is kept; without one, Pyroscope files
 * the profile under "unknown_service" and so does profd's querier.
 * The timestamp is the profile's time_nanos, else now.
 *
 * All or nothing as far as input goes: every series' labels and every
 * profile are checked (decoded) before the first is stored, so a bad one in
 * the middle stores none. Errors are Connect error JSON: invalid_argument
 * (labels, a bad pprof: the message names the series and sample index),
 * resource_exhausted (a cap), already_exists (same series and time stored),
 * invalid_argument for a time outside the store's window (retention, future
 * grace; checked at store time, so profiles before it in the request are kept).
 * Refusals are counted in profd_rejected_input_total{reason="connect_push_*"}.
 */
#include <stdio.h>
#include <string.h>
#include "api/querier_int.h"
#include "base/time.h"
#include "push/v1/push.pb-c.h"

/* Caps on one request (the body cap of the server holds the bytes). */
#define MAX_SERIES 10000
#define MAX_SAMPLES_TOTAL 100000

static int labels_of(const Push__V1__RawProfileSeries *s, size_t si, pd_labels *ls, pd_err *err)
{
    pd_labels_init(ls);
    if (s->n_labels > PD_LABEL_MAX_COUNT)
        return pd_err_set(err, PD_EINVAL, "series %zu: %zu labels, at most %d", si, s->n_labels,
                          PD_LABEL_MAX_COUNT);
    for (size_t i = 0; i < s->n_labels; i++) {
        const Types__V1__LabelPair *lp = s->labels[i];
        const char *n = lp && lp->name ? lp->name : "", *v = lp && lp->value ? lp->value : "";
        if (!pd__api_utf8_valid(v, strlen(v)))
            return pd_err_set(err, PD_EINVAL, "series %zu: label %.100s: value is not UTF-8", si,
                              n);
        pd_err e2;
        int rc = pd_labels_set(ls, n, v, &e2);
        if (rc < 0)
            return pd_err_set(err, rc, "series %zu: label \"%.100s\": %s", si, n, e2.msg);
    }
    if (!pd_labels_get(ls, "__name__"))
        return pd_err_set(err, PD_EINVAL,
                          "series %zu: no __name__ label (the profile type, e.g. process_cpu)", si);
    return 0;
}

const char *pd__push_connect(const pd__api_env *env, const pd_http_request *req,
                             pd_http_response *resp)
{
    const char *h = "/push.v1.PusherService/Push";
    Push__V1__PushRequest *in = NULL;
    pd_connect_call call;
    pd_err err = {{0}};
    int rc = 0;
    const char *reason = NULL;
    if (pd_connect_decode(req, &push__v1__push_request__descriptor, (ProtobufCMessage **)&in, &call,
                          resp) < 0)
        return h;
    size_t total = 0;
    if (in->n_series > MAX_SERIES) {
        rc = pd_err_set(&err, PD_ETOOBIG, "%zu series in one push, at most %d", in->n_series,
                        MAX_SERIES);
        reason = "connect_push_too_big";
        goto fail;
    }
    for (size_t i = 0; i < in->n_series; i++)
        total += in->series[i]->n_samples;
    if (total > MAX_SAMPLES_TOTAL) {
        rc = pd_err_set(&err, PD_ETOOBIG, "%zu profiles in one push, at most %d", total,
                        MAX_SAMPLES_TOTAL);
        reason = "connect_push_too_big";
        goto fail;
    }
    /* pass 1: check everything; pass 2: store */
    for (int pass = 0; pass < 2; pass++) {
        for (size_t i = 0; i < in->n_series; i++) {
            const Push__V1__RawProfileSeries *s = in->series[i];
            pd_labels ls;
            if ((rc = labels_of(s, i, &ls, &err)) < 0) {
                pd_labels_release(&ls);
                reason = "connect_push_labels";
                goto fail;
            }
            for (size_t j = 0; j < s->n_samples; j++) {
                const Push__V1__RawSample *rs = s->samples[j];
                const uint8_t *b = rs ? rs->raw_profile.data : NULL;
                size_t n = rs ? rs->raw_profile.len : 0;
                pd_profile p;
                pd_err e2;
                if (!n) {
                    rc = pd_err_set(&err, PD_EINVAL, "series %zu sample %zu: empty raw_profile", i,
                                    j);
                    reason = "connect_push_pprof";
                } else if ((rc = pd_profile_decode(&p, b, n, env->limits, &e2)) < 0) {
                    pd_err_set(&err, rc, "series %zu sample %zu: raw_profile: %s", i, j, e2.msg);
                    reason = rc == PD_ETOOBIG ? "connect_push_too_big" : "connect_push_pprof";
                } else if ((rc = pd__api_check_sample_labels(&p, &e2)) < 0) {
                    pd_err_set(&err, rc, "series %zu sample %zu: %s", i, j, e2.msg);
                    reason = "connect_push_pprof";
                    pd_profile_release(&p);
                } else {
                    if (pass == 1) {
                        int64_t ts = p.time_nanos > 0 ? p.time_nanos / 1000000 : pd_now_ms();
                        rc = pd__api_store(env, &ls, ts, b, n, &p, "connect_push", &e2);
                        if (rc < 0) /* out_of_bounds and series_limit: counted there */
                            pd_err_set(&err, rc, "series %zu sample %zu: %s", i, j, e2.msg);
                    }
                    pd_profile_release(&p);
                }
                if (rc < 0) {
                    pd_labels_release(&ls);
                    goto fail;
                }
            }
            pd_labels_release(&ls);
        }
    }
    Push__V1__PushResponse out = PUSH__V1__PUSH_RESPONSE__INIT;
    pd_connect_reply(resp, &call, &out.base);
    protobuf_c_message_free_unpacked(&in->base, NULL);
    return h;
fail:
    if (reason)
        pd__api_count_rejected(reason);
    pd_connect_error(resp, pd_connect_code_of(rc), "%s", err.msg);
    protobuf_c_message_free_unpacked(&in->base, NULL);
    return h;
}
