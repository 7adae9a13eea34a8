/*
 * api/pyroscope.c — Pyroscope's ingest API:
 *
 *   POST /ingest?name=APP.TYPE{k=v,...}&from=&until=&sampleRate=&spyName=
 *               &units=&aggregationType=&format=
 *
 * name: APP is the application (stored as label service_name), TYPE the
 *   profile type (stored as __name__) when the text after the last '.' is
 *   one of Pyroscope's types (KNOWN_TYPES below); otherwise the whole name is
 *   APP and TYPE is cpu. {k=v,...} are labels: names [a-zA-Z_][a-zA-Z0-9_]*
 *   (names starting "__", such as the Go client's __session_id__, are
 *   Pyroscope-internal and dropped), values non-empty UTF-8 without ',' or
 *   '}', at most PD_LABEL_MAX_VALUE bytes, at most PD_LABEL_MAX_COUNT labels.
 * from/until: Unix seconds, ms, us or ns told apart by digit count as
 *   Pyroscope does (the Go client sends nanoseconds), or RFC 3339; the
 *   profile's time is from, else now; until - from becomes duration_nanos.
 * format:
 *   folded (default; also "collapsed") and lines: the body (raw, or gzip)
 *     is converted by ingest/ (pd_ingest_folded). With units empty or
 *     "samples", sampleRate (Hz, default 100) gives TYPE/nanoseconds
 *     values beside samples/count; other units give one TYPE/UNIT sample
 *     type with the counts (objects, goroutines and lock_samples become
 *     pprof's "count", lock_nanoseconds "nanoseconds", others are kept).
 *     The stored body is the converted profile, gzip pprof.
 *   pprof: a raw pprof body (gzip or not), stored as received; or, when
 *     the Content-Type is multipart/form-data (what the Pyroscope Go
 *     client sends, whatever format says), the parts
 *       profile            the pprof (required)
 *       prev_profile       the previous cumulative profile (optional)
 *       sample_type_config JSON {"TYPE":{"units":..,"aggregation":..,
 *                          "cumulative":bool,...},...} (optional)
 *     With prev_profile, the stored profile is profile - prev_profile for
 *     the cumulative sample types (those marked "cumulative":true, or with
 *     no config Pyroscope's defaults alloc_objects, alloc_space,
 *     contentions, delay) and profile for the others; samples that end up
 *     all zero are dropped. Without it, the profile part is stored as
 *     received.
 * spyName, aggregationType: accepted, not stored.
 *
 * Multipart parsing (RFC 2046 / 7578), by hand over the whole body: the
 * boundary comes from the Content-Type (at most 70 bytes, maybe quoted);
 * parts are delimited by "--BOUNDARY" at the body's start or "\r\n--BOUNDARY"
 * later; each part has headers (at most MP_MAX_HEADER bytes, ended by a blank
 * line) of which Content-Disposition's name="..." names the part; at most
 * MP_MAX_PARTS parts; the body must end with the close delimiter
 * "--BOUNDARY--" (else it was truncated). Part contents point into the body.
 *
 * Limits: the body and each part are held to the api's pprof limits
 * (max_body_bytes, gzip decompressed to max_decompressed_bytes, counts
 * of samples/locations/functions/stack depth in the decoder or converter);
 * a cap answers 413, anything malformed 400, both as text naming the
 * problem, counted in profd_rejected_input_total{reason} (bad_request,
 * bad_labels, bad_profile, too_large, duplicate). Nothing is stored unless
 * everything passed. Success: 200 with an empty body (as Pyroscope),
 * counted in profd_ingested_*{source="pyroscope"}.
 */
#include <inttypes.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "api/api_int.h"
#include "base/log.h"
#include "base/time.h"
#include "ingest/ingest.h"

#define MP_MAX_PARTS 16
#define MP_MAX_HEADER 8192
#define MP_MAX_BOUNDARY 70
#define MAX_NAME_BYTES 65536
#define MAX_CONFIG_BYTES 65536

static const char *const KNOWN_TYPES[] = {
    "cpu",
    "itimer",
    "wall",
    "alloc_objects",
    "alloc_space",
    "inuse_objects",
    "inuse_space",
    "goroutines",
    "goroutine",
    "mutex_count",
    "mutex_duration",
    "block_count",
    "block_duration",
    "lock_count",
    "lock_duration",
    "lock_samples",
    "lock_nanoseconds",
    "exceptions",
    "alloc_in_new_tlab_objects",
    "alloc_in_new_tlab_bytes",
    "alloc_outside_tlab_objects",
    "alloc_outside_tlab_bytes",
    "heap",
    "block",
    "mutex",
    "threadcreate",
};

static const char *const DEFAULT_CUMULATIVE[] = {"alloc_objects", "alloc_space", "contentions",
                                                 "delay"};

static void py_error(pd_http_response *resp, int status, const char *reason, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Replaces the body with a text error; counts reason when set. */
static void py_error(pd_http_response *resp, int status, const char *reason, const char *fmt, ...)
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

/* The api's limits with 0 fields replaced by the defaults. */
static pd_pprof_limits eff_limits(const pd_pprof_limits *l)
{
    pd_pprof_limits d = pd_pprof_limits_default();
    if (!l)
        return d;
#define TAKE(f)                                                                                    \
    if (l->f)                                                                                      \
        d.f = l->f;
    TAKE(max_body_bytes)
    TAKE(max_decompressed_bytes)
    TAKE(max_samples)
    TAKE(max_locations)
    TAKE(max_functions)
    TAKE(max_mappings)
    TAKE(max_strings)
    TAKE(max_sample_types)
    TAKE(max_stack_depth)
    TAKE(max_labels_per_sample)
    TAKE(max_lines)
#undef TAKE
    return d;
}

/* from/until as Pyroscope reads them: an integer is Unix seconds, ms, us or
 * ns by its digit count (<= 10, 13, 16, more: the Go client sends
 * UnixNano); anything else as pd_parse_time_param (RFC 3339, decimal
 * seconds). Into Unix ms. 0 or PD_EPARSE. */
static int parse_time(const char *s, int64_t *ms, pd_err *err)
{
    size_t n = strspn(s, "0123456789");
    if (n > 0 && n <= 19 && s[n] == 0) {
        long long v = strtoll(s, NULL, 10);
        *ms = n <= 10 ? v * 1000 : n <= 13 ? v : n <= 16 ? v / 1000 : v / 1000000;
        return 0;
    }
    return pd_parse_time_param(s, ms, err);
}

/* ---- name=APP.TYPE{k=v,...} ---- */

/* Parses name into ls (__name__, service_name, labels). 0, or replies and -1. */
static int parse_name(const char *name, pd_labels *ls, pd_http_response *resp)
{
    pd_err err = {{0}};
    int rc;
    size_t len = strlen(name);
    if (len == 0) {
        py_error(resp, 400, "bad_request", "missing name (APP.TYPE{k=v,...})");
        return -1;
    }
    if (len > MAX_NAME_BYTES) {
        py_error(resp, 400, "bad_labels", "name is %zu bytes, over %d", len, MAX_NAME_BYTES);
        return -1;
    }
    const char *brace = strchr(name, '{');
    size_t app_end = brace ? (size_t)(brace - name) : len;
    if (brace && name[len - 1] != '}') {
        py_error(resp, 400, "bad_labels", "name \"%.100s\": labels must end with '}'", name);
        return -1;
    }
    /* APP.TYPE */
    char type[64] = "cpu";
    size_t app_len = app_end;
    const char *dot = NULL;
    for (size_t i = app_end; i > 0; i--)
        if (name[i - 1] == '.') {
            dot = name + i - 1;
            break;
        }
    if (dot) {
        size_t tl = app_end - (size_t)(dot - name) - 1;
        for (size_t i = 0; i < sizeof KNOWN_TYPES / sizeof *KNOWN_TYPES; i++)
            if (strlen(KNOWN_TYPES[i]) == tl && !strncmp(dot + 1, KNOWN_TYPES[i], tl)) {
                memcpy(type, dot + 1, tl);
                type[tl] = 0;
                app_len = (size_t)(dot - name);
                break;
            }
    }
    if (app_len == 0) {
        py_error(resp, 400, "bad_request", "name \"%.100s\": empty application name", name);
        return -1;
    }
    if (app_len > PD_LABEL_MAX_VALUE || !pd__api_utf8_valid(name, app_len)) {
        py_error(resp, 400, "bad_labels", "application name: %s",
                 app_len > PD_LABEL_MAX_VALUE ? "over 4096 bytes" : "not UTF-8");
        return -1;
    }
    char *copy = strdup(name);
    if (!copy) {
        py_error(resp, 500, NULL, "out of memory");
        return -1;
    }
    copy[app_len] = 0;
    int ret = -1;
    if ((rc = pd_labels_set(ls, "service_name", copy, &err)) < 0 ||
        (rc = pd_labels_set(ls, "__name__", type, &err)) < 0) {
        py_error(resp, rc == PD_ENOMEM ? 500 : 400, rc == PD_ENOMEM ? NULL : "bad_labels",
                 "bad name: %s", err.msg);
        goto out;
    }
    if (brace) {
        char *lb = copy + (brace - name) + 1;
        copy[len - 1] = 0; /* the closing brace */
        size_t count = 0;
        for (const char *c = lb; *c; c++)
            count += *c == ',';
        if (count + 1 > PD_LABEL_MAX_COUNT) {
            py_error(resp, 400, "bad_labels", "name: %zu labels given, at most %d allowed",
                     count + 1, PD_LABEL_MAX_COUNT);
            goto out;
        }
        char *save = NULL;
        for (char *kv = strtok_r(lb, ",", &save); kv; kv = strtok_r(NULL, ",", &save)) {
            char *eq = strchr(kv, '=');
            if (!eq) {
                py_error(resp, 400, "bad_labels", "name: label \"%.100s\" is not k=v", kv);
                goto out;
            }
            *eq = 0;
            const char *k = kv, *v = eq + 1;
            if (!pd_label_name_valid(k)) {
                py_error(resp, 400, "bad_labels",
                         "name: bad label name \"%.100s\": must match [a-zA-Z_][a-zA-Z0-9_]*", k);
                goto out;
            }
            if (!strncmp(k, "__", 2))
                continue; /* Pyroscope-internal (__session_id__) */
            size_t vl = strlen(v);
            if (!vl || vl > PD_LABEL_MAX_VALUE || !pd__api_utf8_valid(v, vl) || strchr(v, '}')) {
                py_error(resp, 400, "bad_labels", "name: bad value of label \"%.100s\": %s", k,
                         !vl                       ? "empty"
                         : vl > PD_LABEL_MAX_VALUE ? "over 4096 bytes"
                         : strchr(v, '}')          ? "holds '}'"
                                                   : "not UTF-8");
                goto out;
            }
            if (!strcmp(k, "service_name") || pd_labels_get(ls, k)) {
                py_error(resp, 400, "bad_labels", "name: label \"%.100s\" given twice", k);
                goto out;
            }
            if ((rc = pd_labels_set(ls, k, v, &err)) < 0) {
                py_error(resp, rc == PD_ENOMEM ? 500 : 400, rc == PD_ENOMEM ? NULL : "bad_labels",
                         "name: %s", err.msg);
                goto out;
            }
        }
    }
    ret = 0;
out:
    free(copy);
    return ret;
}

/* ---- multipart ---- */

typedef struct part {
    char name[64];
    const uint8_t *data;
    size_t len;
} part;

/* The boundary of a multipart/form-data Content-Type into out. 0 or -1. */
static int mp_boundary(const char *ct, char *out, size_t cap)
{
    const char *b = strcasestr(ct, "boundary=");
    if (!b)
        return -1;
    b += 9;
    size_t n = 0;
    if (*b == '"') {
        b++;
        while (b[n] && b[n] != '"')
            n++;
        if (b[n] != '"')
            return -1;
    } else {
        while (b[n] && b[n] != ';' && b[n] != ' ' && b[n] != '\t')
            n++;
    }
    if (n == 0 || n > MP_MAX_BOUNDARY || n >= cap)
        return -1;
    memcpy(out, b, n);
    out[n] = 0;
    return 0;
}

/* The value of name="..." in a Content-Disposition header value. */
static void mp_part_name(const char *h, size_t hl, char *out, size_t cap)
{
    out[0] = 0;
    for (size_t i = 0; i + 6 <= hl; i++) {
        if (strncasecmp(h + i, "name=", 5) != 0 || (i > 0 && h[i - 1] != ' ' && h[i - 1] != ';'))
            continue;
        const char *v = h + i + 5;
        size_t rest = hl - i - 5, n = 0;
        if (rest && *v == '"') {
            v++;
            rest--;
            while (n < rest && v[n] != '"')
                n++;
        } else {
            while (n < rest && v[n] != ';' && v[n] != ' ')
                n++;
        }
        if (n >= cap)
            n = cap - 1;
        memcpy(out, v, n);
        out[n] = 0;
        return;
    }
}

/* Splits body into parts. 0, or PD_EPARSE / PD_ETOOBIG with msg. */
static int mp_parse(const uint8_t *body, size_t len, const char *boundary, part *parts,
                    size_t *n_parts, char *msg, size_t cap)
{
    char delim[MP_MAX_BOUNDARY + 8];
    size_t bl = strlen(boundary);
    snprintf(delim, sizeof delim, "\r\n--%s", boundary);
    size_t dl = bl + 4;
    const uint8_t *end = body + len, *p;
    *n_parts = 0;
    /* the first delimiter may lack the leading CRLF */
    if (len >= dl - 2 && !memcmp(body, delim + 2, dl - 2)) {
        p = body + dl - 2;
    } else {
        const uint8_t *f = memmem(body, len, delim, dl);
        if (!f) {
            snprintf(msg, cap, "multipart body: no boundary \"%s\" found", boundary);
            return PD_EPARSE;
        }
        p = f + dl;
    }
    for (;;) {
        /* after a delimiter: "--" ends, else transport padding then CRLF */
        if (end - p >= 2 && p[0] == '-' && p[1] == '-')
            return 0;
        while (p < end && (*p == ' ' || *p == '\t'))
            p++;
        if (end - p < 2 || p[0] != '\r' || p[1] != '\n') {
            snprintf(msg, cap, "multipart body: truncated or malformed after part %zu", *n_parts);
            return PD_EPARSE;
        }
        p += 2;
        if (*n_parts == MP_MAX_PARTS) {
            snprintf(msg, cap, "multipart body: more than %d parts", MP_MAX_PARTS);
            return PD_ETOOBIG;
        }
        size_t room = (size_t)(end - p);
        const uint8_t *hend = memmem(p, room < MP_MAX_HEADER ? room : MP_MAX_HEADER, "\r\n\r\n", 4);
        part *pt = &parts[*n_parts];
        pt->name[0] = 0;
        if (!hend && p + 2 <= end && p[0] == '\r' && p[1] == '\n') {
            hend = p - 2; /* no headers at all */
        }
        if (!hend) {
            snprintf(msg, cap, "multipart part %zu: headers %s", *n_parts + 1,
                     room >= MP_MAX_HEADER ? "over 8192 bytes" : "truncated");
            return room >= MP_MAX_HEADER ? PD_ETOOBIG : PD_EPARSE;
        }
        /* headers: lines up to hend */
        const uint8_t *h = p;
        while (h < hend) {
            const uint8_t *eol = memmem(h, (size_t)(hend - h), "\r\n", 2);
            size_t hl = eol ? (size_t)(eol - h) : (size_t)(hend - h);
            if (hl > 20 && !strncasecmp((const char *)h, "Content-Disposition:", 20))
                mp_part_name((const char *)h + 20, hl - 20, pt->name, sizeof pt->name);
            h += hl + 2;
        }
        const uint8_t *data = hend + 4;
        const uint8_t *next = memmem(data, (size_t)(end - data), delim, dl);
        if (!next) {
            snprintf(msg, cap, "multipart part %zu (\"%s\"): truncated, no closing boundary",
                     *n_parts + 1, pt->name);
            return PD_EPARSE;
        }
        pt->data = data;
        pt->len = (size_t)(next - data);
        (*n_parts)++;
        p = next + dl;
    }
}

static const part *find_part(const part *parts, size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (!strcmp(parts[i].name, name))
            return &parts[i];
    return NULL;
}

/* ---- decoding ---- */

/* Decodes a pprof body/part, replying on failure (what names it). */
static int decode(const uint8_t *b, size_t len, const pd_pprof_limits *lim, const char *what,
                  pd_profile *p, pd_http_response *resp)
{
    pd_err err = {{0}};
    if (len == 0) {
        py_error(resp, 400, "bad_profile", "%s: empty", what);
        return -1;
    }
    int rc = pd_profile_decode(p, b, len, lim, &err);
    if (rc == 0) {
        if ((rc = pd__api_check_sample_labels(p, &err)) == 0)
            return 0;
        pd_profile_release(p);
    }
    if (rc == PD_ENOMEM)
        py_error(resp, 500, NULL, "%s: out of memory", what);
    else if (rc == PD_ETOOBIG)
        py_error(resp, 413, "too_large", "%s refused: %s", what, err.msg);
    else
        py_error(resp, 400, "bad_profile", "%s: invalid pprof: %s", what, err.msg);
    return -1;
}

/* Which sample types of p are cumulative (scale for prev_profile: -1 or 0). */
static int prev_scale(const pd_profile *p, const part *cfg, int64_t *scale, pd_http_response *resp)
{
    json_t *j = NULL;
    if (cfg) {
        json_error_t je;
        if (cfg->len > MAX_CONFIG_BYTES) {
            py_error(resp, 413, "too_large", "sample_type_config: %zu bytes, over %d", cfg->len,
                     MAX_CONFIG_BYTES);
            return -1;
        }
        j = json_loadb((const char *)cfg->data, cfg->len, 0, &je);
        if (!j || !json_is_object(j)) {
            py_error(resp, 400, "bad_request", "sample_type_config: not a JSON object%s%s",
                     j ? "" : ": ", j ? "" : je.text);
            json_decref(j);
            return -1;
        }
    }
    for (size_t i = 0; i < p->n_sample_type; i++) {
        const char *t = pd_profile_str(p, p->sample_type[i].type);
        bool cum = false;
        if (j) {
            json_t *c = json_object_get(j, t);
            cum = c && json_is_true(json_object_get(c, "cumulative"));
        } else {
            for (size_t k = 0; k < sizeof DEFAULT_CUMULATIVE / sizeof *DEFAULT_CUMULATIVE; k++)
                cum = cum || !strcmp(t, DEFAULT_CUMULATIVE[k]);
        }
        scale[i] = cum ? -1 : 0;
    }
    json_decref(j);
    return 0;
}

/* The profile minus prev for the cumulative types, gzip-encoded into enc. */
static int delta(const pd_profile *p, const pd_profile *prev, const int64_t *scale,
                 const pd_pprof_limits *lim, pd_profile *out, pd_buf *enc, pd_http_response *resp)
{
    pd__merger *m = NULL;
    pd_err err = {{0}};
    int rc = pd__merger_new(lim, &m);
    if (rc == 0)
        rc = pd__merger_add(m, p, NULL, &err);
    if (rc == 0)
        rc = pd__merger_add(m, prev, scale, &err);
    if (rc == 0)
        rc = pd__merger_finish(m, true, out, &err);
    pd__merger_free(m);
    if (rc == 0) {
        out->time_nanos = p->time_nanos;
        out->duration_nanos = p->duration_nanos;
        rc = pd_profile_encode(out, true, enc);
        if (rc < 0) {
            pd_profile_release(out);
            pd_err_set(&err, rc, "encoding the delta profile: %s", pd_strerror(rc));
        }
    }
    if (rc < 0) {
        py_error(resp,
                 rc == PD_ENOMEM    ? 500
                 : rc == PD_ETOOBIG ? 413
                                    : 400,
                 rc == PD_ENOMEM    ? NULL
                 : rc == PD_ETOOBIG ? "too_large"
                                    : "bad_profile",
                 "prev_profile: %s", err.msg[0] ? err.msg : pd_strerror(rc));
        return -1;
    }
    return 0;
}

/* ---- the handler ---- */

static bool is_multipart(const char *ct)
{
    return ct && !strncasecmp(ct, "multipart/form-data", 19);
}

const char *pd__pyroscope_ingest(const pd__api_env *env, const pd_http_request *req,
                                 pd_http_response *resp)
{
    static const char H[] = "/ingest";
    if (strcmp(req->method, "POST") != 0) {
        pd_http_add_header(resp, "Allow", "POST");
        py_error(resp, 405, NULL, "method not allowed; use POST");
        return H;
    }
    const pd_pprof_limits lim = eff_limits(env->limits);
    const char *name = pd_http_arg(req, "name");
    const char *format = pd_http_arg(req, "format");
    const char *from_s = pd_http_arg(req, "from");
    const char *until_s = pd_http_arg(req, "until");
    const char *rate_s = pd_http_arg(req, "sampleRate");
    const char *units = pd_http_arg(req, "units");
    const char *ct = pd_http_header(req, "Content-Type");
    pd_labels ls;
    pd_labels_init(&ls);
    pd_profile p, prev, d;
    bool have_p = false, have_prev = false, have_d = false;
    pd_buf enc;
    pd_buf_init(&enc, lim.max_decompressed_bytes);
    pd_buf plain;
    pd_buf_init(&plain, lim.max_decompressed_bytes);
    pd_err err = {{0}};
    int rc;

    if (!name || !*name) {
        py_error(resp, 400, "bad_request", "missing name (APP.TYPE{k=v,...})");
        goto out;
    }
    if (parse_name(name, &ls, resp) < 0)
        goto out;
    const char *type = pd_labels_get(&ls, "__name__");

    int64_t from = 0, until = 0;
    if (from_s && *from_s && parse_time(from_s, &from, &err) < 0) {
        py_error(resp, 400, "bad_request", "bad from: %s", err.msg);
        goto out;
    }
    if (until_s && *until_s && parse_time(until_s, &until, &err) < 0) {
        py_error(resp, 400, "bad_request", "bad until: %s", err.msg);
        goto out;
    }
    int64_t ts = from_s && *from_s ? from : pd_now_ms();
    int64_t dur_ns = until > from && from_s && *from_s ? (until - from) * 1000000 : 0;
    int64_t rate = 0;
    if (rate_s && *rate_s) {
        char *e;
        long long v = strtoll(rate_s, &e, 10);
        if (*e || v <= 0 || v > 1000000000) {
            py_error(resp, 400, "bad_request", "bad sampleRate \"%.32s\": want Hz in 1..1e9",
                     rate_s);
            goto out;
        }
        rate = v;
    }
    if (!format || !*format)
        format = is_multipart(ct) ? "pprof" : "folded";
    if (req->body_len > lim.max_body_bytes) {
        py_error(resp, 413, "too_large", "body is %zu bytes, over max_body_bytes=%zu",
                 req->body_len, lim.max_body_bytes);
        goto out;
    }

    const uint8_t *store = NULL;
    size_t store_len = 0;
    const pd_profile *stored = NULL;
    if (is_multipart(ct)) {
        char boundary[MP_MAX_BOUNDARY + 1], msg[256];
        part parts[MP_MAX_PARTS];
        size_t n = 0;
        if (mp_boundary(ct, boundary, sizeof boundary) < 0) {
            py_error(resp, 400, "bad_request",
                     "Content-Type multipart/form-data without a valid boundary (1..70 bytes)");
            goto out;
        }
        if ((rc = mp_parse(req->body, req->body_len, boundary, parts, &n, msg, sizeof msg)) < 0) {
            py_error(resp, rc == PD_ETOOBIG ? 413 : 400,
                     rc == PD_ETOOBIG ? "too_large" : "bad_profile", "%s", msg);
            goto out;
        }
        const part *pp = find_part(parts, n, "profile");
        const part *pv = find_part(parts, n, "prev_profile");
        const part *pc = find_part(parts, n, "sample_type_config");
        if (!pp) {
            py_error(resp, 400, "bad_profile", "multipart body without a \"profile\" part");
            goto out;
        }
        if (decode(pp->data, pp->len, &lim, "part \"profile\"", &p, resp) < 0)
            goto out;
        have_p = true;
        if (pv && pv->len) {
            int64_t *scale = calloc(p.n_sample_type ? p.n_sample_type : 1, sizeof *scale);
            if (!scale) {
                py_error(resp, 500, NULL, "out of memory");
                goto out;
            }
            rc = decode(pv->data, pv->len, &lim, "part \"prev_profile\"", &prev, resp);
            have_prev = rc == 0;
            if (rc == 0)
                rc = prev_scale(&p, pc, scale, resp);
            if (rc == 0)
                rc = delta(&p, &prev, scale, &lim, &d, &enc, resp);
            free(scale);
            if (rc < 0)
                goto out;
            have_d = true;
            store = (const uint8_t *)enc.data;
            store_len = enc.len;
            stored = &d;
        } else {
            if (pc) { /* validate it even when unused */
                int64_t one;
                pd_profile none;
                memset(&none, 0, sizeof none);
                if (prev_scale(&none, pc, &one, resp) < 0)
                    goto out;
            }
            store = pp->data;
            store_len = pp->len;
            stored = &p;
        }
    } else if (!strcmp(format, "pprof")) {
        if (decode(req->body, req->body_len, &lim, "body", &p, resp) < 0)
            goto out;
        have_p = true;
        store = req->body;
        store_len = req->body_len;
        stored = &p;
    } else if (!strcmp(format, "folded") || !strcmp(format, "collapsed") ||
               !strcmp(format, "lines")) {
        const uint8_t *text = req->body;
        size_t tlen = req->body_len;
        if (tlen == 0) {
            py_error(resp, 400, "bad_profile", "empty body: POST %s stacks", format);
            goto out;
        }
        if (pd_is_gzip(text, tlen)) {
            rc = pd_gunzip(text, tlen, lim.max_decompressed_bytes, &plain, &err);
            if (rc < 0) {
                py_error(resp,
                         rc == PD_ETOOBIG  ? 413
                         : rc == PD_ENOMEM ? 500
                                           : 400,
                         rc == PD_ETOOBIG  ? "too_large"
                         : rc == PD_ENOMEM ? NULL
                                           : "bad_profile",
                         "gzip body: %s", err.msg[0] ? err.msg : pd_strerror(rc));
                goto out;
            }
            text = (const uint8_t *)plain.data;
            tlen = plain.len;
        }
        pd_ingest_opts o;
        memset(&o, 0, sizeof o);
        o.type = type;
        if (!units || !*units || !strcmp(units, "samples")) {
            o.sample_rate_hz = rate ? rate : 100;
        } else {
            /* Pyroscope's unit names to pprof's */
            o.unit = !strcmp(units, "objects") || !strcmp(units, "goroutines") ||
                             !strcmp(units, "lock_samples")
                         ? "count"
                     : !strcmp(units, "lock_nanoseconds") ? "nanoseconds"
                                                          : units;
        }
        o.time_nanos = ts * 1000000;
        o.duration_nanos = dur_ns;
        o.lim.max_input_bytes = lim.max_decompressed_bytes;
        o.lim.max_stack_depth = lim.max_stack_depth;
        o.lim.max_frames =
            lim.max_locations < lim.max_functions ? lim.max_locations : lim.max_functions;
        o.lim.max_samples = lim.max_samples;
        rc = pd_ingest_folded((const char *)text, tlen, !strcmp(format, "lines"), &o, &p, &err);
        if (rc < 0) {
            py_error(resp,
                     rc == PD_ETOOBIG  ? 413
                     : rc == PD_ENOMEM ? 500
                                       : 400,
                     rc == PD_ETOOBIG  ? "too_large"
                     : rc == PD_ENOMEM ? NULL
                                       : "bad_profile",
                     "%s body: %s", format, err.msg[0] ? err.msg : pd_strerror(rc));
            goto out;
        }
        have_p = true;
        if ((rc = pd_profile_encode(&p, true, &enc)) < 0) {
            py_error(resp, rc == PD_ETOOBIG ? 413 : 500, rc == PD_ETOOBIG ? "too_large" : NULL,
                     "encoding the converted profile: %s", pd_strerror(rc));
            goto out;
        }
        store = (const uint8_t *)enc.data;
        store_len = enc.len;
        stored = &p;
    } else {
        py_error(resp, 400, "bad_request",
                 "format \"%.32s\" is not supported: use folded, lines or pprof", format);
        goto out;
    }

    pd_err_clear(&err);
    rc = pd__api_store(env->st, &ls, ts, store, store_len, stored, "pyroscope", &err);
    if (rc == PD_EOUTOFBOUNDS) { /* counted by pd__api_store */
        py_error(resp, 400, NULL, "%s", err.msg);
        goto out;
    }
    if (rc == PD_EEXIST) {
        py_error(resp, 409, "duplicate",
                 "a profile of this series at %" PRId64 " ms is already stored", ts);
        goto out;
    }
    if (rc < 0) {
        pd_log(PD_LOG_ERROR, "ingest: storage append failed", "err=\"%s\"", err.msg);
        py_error(resp, 500, NULL, "storage: %s", err.msg[0] ? err.msg : pd_strerror(rc));
        goto out;
    }
    resp->status = 200;
    resp->content_type = "text/plain; charset=utf-8";
out:
    if (have_p)
        pd_profile_release(&p);
    if (have_prev)
        pd_profile_release(&prev);
    if (have_d)
        pd_profile_release(&d);
    pd_buf_release(&enc);
    pd_buf_release(&plain);
    pd_labels_release(&ls);
    return H;
}
