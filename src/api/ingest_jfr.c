/*
 * api/ingest_jfr.c — Pyroscope's /ingest?format=jfr, as the Pyroscope Java
 * agent (async-profiler) sends it: the JFR recording raw, or as the part
 * "jfr" of a multipart/form-data body with an optional part "labels", a
 * LabelsSnapshot protobuf (third_party/grafana-jfr-parser: context id ->
 * label name/value string ids, plus the string table). Either may be
 * gzip-compressed. pyroscope.c splits the multipart body and calls
 * pd__ingest_jfr.
 *
 * The recording is converted by ingest/jfr.c into one profile per kind of
 * event found (cpu, wall, alloc_in_new_tlab, alloc_outside_tlab,
 * alloc_sample, mutex, block, live), each stored in its own series: the
 * labels of name= with __name__ set to the kind. Samples whose contextId
 * the snapshot resolves carry the context's labels as pprof sample labels.
 * cpu and wall samples are worth 1e9/sampleRate ns (sampleRate defaults
 * to 100 Hz, as the agent's).
 *
 * Errors: an empty, malformed or hostile recording answers 400 with the
 * converter's message naming chunk and offset (reason bad_profile); a cap
 * 413 (too_large); a bad labels part 400 (bad_labels). Nothing is stored
 * unless the whole recording converted. The profiles are then stored one by
 * one; a storage failure in the middle leaves the kinds stored before it.
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api_int.h"
#include "base/log.h"
#include "pprof/jfr_labels.pb-c.h" /* third_party/grafana-jfr-parser, protoc-c */
#include "ingest/jfr.h"

#define MAX_LABELS_PART_BYTES (16u << 20)
#define MAX_CONTEXT_LABELS 64

/* Context resolution over a decoded LabelsSnapshot. */
typedef struct snap {
    LabelsSnapshot *ls;
    const char *kv[2 * MAX_CONTEXT_LABELS];
} snap;

static const char *snap_str(const LabelsSnapshot *ls, int64_t id)
{
    for (size_t i = 0; i < ls->n_strings; i++)
        if (ls->strings[i]->key == id)
            return ls->strings[i]->value;
    return NULL;
}

static size_t snap_context(void *arg, int64_t id, const char *const **kv)
{
    snap *s = arg;
    for (size_t i = 0; i < s->ls->n_contexts; i++) {
        const LabelsSnapshot__ContextsEntry *e = s->ls->contexts[i];
        if (e->key != id || !e->value)
            continue;
        size_t n = 0;
        for (size_t j = 0; j < e->value->n_labels && n < MAX_CONTEXT_LABELS; j++) {
            const char *k = snap_str(s->ls, e->value->labels[j]->key);
            const char *v = snap_str(s->ls, e->value->labels[j]->value);
            if (!k || !v || !*k || !*v)
                continue;
            s->kv[2 * n] = k;
            s->kv[2 * n + 1] = v;
            n++;
        }
        *kv = s->kv;
        return n;
    }
    return 0;
}

/* Gunzips in[0..len) into buf when it is gzip; sets *d and *n to what to read. */
static int maybe_gunzip(const uint8_t *in, size_t len, size_t max, pd_buf *buf, const uint8_t **d,
                        size_t *n, pd_err *err)
{
    *d = in;
    *n = len;
    if (!pd_is_gzip(in, len))
        return 0;
    int rc = pd_gunzip(in, len, max, buf, err);
    if (rc < 0)
        return rc;
    *d = (const uint8_t *)buf->data;
    *n = buf->len;
    return 0;
}

int pd__ingest_jfr(const pd__api_env *env, const pd_labels *ls, int64_t ts_ms, int64_t rate_hz,
                   const uint8_t *jfr, size_t jfr_len, const uint8_t *labels, size_t labels_len,
                   const pd_pprof_limits *lim, pd_http_response *resp)
{
    pd_buf plain, lplain, enc;
    pd_buf_init(&plain, lim->max_decompressed_bytes);
    pd_buf_init(&lplain, MAX_LABELS_PART_BYTES);
    pd_buf_init(&enc, lim->max_decompressed_bytes);
    pd_err err = {{0}};
    snap sn = {0};
    pd_jfr_result r;
    bool have_r = false;
    int ret = -1, rc;
    const uint8_t *d;
    size_t n;

    if (jfr_len == 0) {
        pd__api_text_error(resp, 400, "bad_profile", "jfr: empty recording");
        goto out;
    }
    if ((rc = maybe_gunzip(jfr, jfr_len, lim->max_decompressed_bytes, &plain, &d, &n, &err)) < 0) {
        pd__api_input_error(resp, rc, &err, "jfr: gzip");
        goto out;
    }
    if (labels && labels_len) {
        const uint8_t *ld;
        size_t ln;
        if ((rc = maybe_gunzip(labels, labels_len, MAX_LABELS_PART_BYTES, &lplain, &ld, &ln,
                               &err)) < 0) {
            pd__api_text_error(resp, pd__api_input_status(rc),
                               pd__api_input_reason(rc, "bad_labels"), "labels: gzip: %s",
                               err.msg[0] ? err.msg : pd_strerror(rc));
            goto out;
        }
        if (ln > MAX_LABELS_PART_BYTES) {
            pd__api_text_error(resp, 413, "too_large", "labels: %zu bytes, over %u", ln,
                               MAX_LABELS_PART_BYTES);
            goto out;
        }
        sn.ls = labels_snapshot__unpack(NULL, ln, ld);
        if (!sn.ls) {
            pd__api_text_error(resp, 400, "bad_labels",
                               "labels: not a LabelsSnapshot protobuf (%zu bytes)", ln);
            goto out;
        }
    }
    pd_jfr_opts o;
    memset(&o, 0, sizeof o);
    o.period_nanos = rate_hz > 0 ? 1000000000 / rate_hz : 0;
    if (sn.ls) {
        o.context = snap_context;
        o.context_arg = &sn;
    }
    o.lim.max_input_bytes = lim->max_decompressed_bytes;
    o.lim.max_stack_depth = lim->max_stack_depth;
    o.lim.pprof = *lim;
    rc = pd_jfr_to_pprof(d, n, &o, &r, &err);
    if (rc < 0) {
        pd__api_input_error(resp, rc, &err, "jfr");
        goto out;
    }
    have_r = true;
    /* encode everything before storing anything */
    size_t off[PD_JFR_N_KINDS + 1];
    for (int k = 0; k < PD_JFR_N_KINDS; k++) {
        off[k] = enc.len;
        if (r.have[k] && (rc = pd_profile_encode(&r.profile[k], true, &enc)) < 0) {
            pd__api_text_error(resp, rc == PD_ETOOBIG ? 413 : 500,
                               rc == PD_ETOOBIG ? "too_large" : NULL,
                               "jfr: encoding the %s profile: %s", pd_jfr_kind_name((pd_jfr_kind)k),
                               pd_strerror(rc));
            goto out;
        }
    }
    off[PD_JFR_N_KINDS] = enc.len;
    size_t stored = 0;
    for (int k = 0; k < PD_JFR_N_KINDS; k++) {
        if (!r.have[k])
            continue;
        pd_labels sl;
        if (pd_labels_copy(&sl, ls) < 0) {
            pd__api_text_error(resp, 500, NULL, "out of memory");
            goto out;
        }
        rc = pd_labels_set(&sl, "__name__", pd_jfr_kind_name((pd_jfr_kind)k), &err);
        if (rc == 0)
            rc = pd__api_store(env, &sl, ts_ms, (const uint8_t *)enc.data + off[k],
                               off[k + 1] - off[k], &r.profile[k], "pyroscope", &err);
        pd_labels_release(&sl);
        if (rc == PD_EOUTOFBOUNDS || rc == PD_ELIMIT) { /* counted by pd__api_store */
            pd__api_text_error(resp, pd__api_store_status(rc), NULL,
                               "%s profile (%zu of this recording's kinds stored before it): %s",
                               pd_jfr_kind_name((pd_jfr_kind)k), stored, err.msg);
            goto out;
        }
        if (rc < 0) {
            pd_log(PD_LOG_ERROR, "ingest: storage append failed", "err=\"%s\"", err.msg);
            pd__api_text_error(
                resp, pd__api_store_status(rc), rc == PD_EINVAL ? "bad_request" : NULL,
                "storage (%s profile, %zu stored before): %s", pd_jfr_kind_name((pd_jfr_kind)k),
                stored, err.msg[0] ? err.msg : pd_strerror(rc));
            goto out;
        }
        stored++;
    }
    resp->status = 200;
    resp->content_type = "text/plain; charset=utf-8";
    ret = 0;
out:
    if (have_r)
        pd_jfr_result_release(&r);
    if (sn.ls)
        labels_snapshot__free_unpacked(sn.ls, NULL);
    pd_buf_release(&plain);
    pd_buf_release(&lplain);
    pd_buf_release(&enc);
    return ret;
}
