/*
 * api/profefe.c — profefe's HTTP API (github.com/profefe/profefe, /api/0/),
 * served as-is so its clients, scripts and `go tool pprof` keep working.
 *
 * Endpoints:
 *   POST /api/0/profiles?service=&type=&instance_id=&labels=k=v,k2=v2&created_at=
 *        body: a pprof profile (gzip or raw). Stores it under the series
 *        {__name__=type, service=..., instance_id=..., k=v...}; replies with
 *        the profile's meta (below).
 *   GET  /api/0/profiles?service=&type=&from=&to=&labels=&limit=
 *        the metas of the stored profiles matching, oldest first, at most
 *        limit (0 or absent: all). service is required; type, when given,
 *        selects one type; labels are equality filters.
 *   GET  /api/0/profiles/merge?service=&type=&from=&to=&labels=
 *        one gzip pprof: the merge of every matching profile, pushed down
 *        into the storage (query.h's pd_query_merge_refs: summed on stack
 *        ids, symbols resolved once; stored profiles as they are, no
 *        deltas); service and type required. 404 when nothing matches.
 *   GET  /api/0/profiles/ID  the stored bytes of that profile, as pushed.
 *   GET  /api/0/profiles/ID1+ID2+...  the merge of those (at most
 *        PROFEFE_MAX_IDS), gzip pprof.
 *   GET  /api/0/services  sorted list of the values of label "service".
 *   GET  /api/0/version   {"version":..,"commit":..,"build_time":..}.
 *
 * Replies: success {"code":200,"status":"success","body":...} and errors
 * {"code":N,"status":"error","errorType":T,"error":"..."} with HTTP N —
 * profefe's envelope (code/body/error), plus Prometheus' status/errorType
 * which profd's own tools read. Profiles are application/octet-stream with
 * Content-Disposition: attachment.
 *
 * Meta of a profile: {"id","type","service","instance_id","labels":[{"key",
 * "value"}...],"created_at"} — labels are the series' labels other than
 * __name__, service and instance_id, sorted by key; created_at is RFC 3339
 * UTC with milliseconds (what profefe's Go time.Time marshals to).
 *
 * Times (created_at, from, to): profefe's "2006-01-02T15:04:05" (UTC), RFC
 * 3339, or Unix seconds. from/to default to all time; both inclusive.
 *
 * Types: profefe's cpu, heap, block, mutex, goroutine, threadcreate, other
 * (the list of profefe's README). Anything else is 400, "trace" included:
 * a Go execution trace is not a pprof profile and profd stores only pprof.
 *
 * Ids: 32 lowercase hex digits: the xxh3 hash of the series' label set
 * (pd_labels_hash, 16 digits) then the timestamp in Unix ms (16 digits, two's
 * complement). Both are functions of what was stored, not of where: the same
 * profile keeps its id across restarts, compaction, and a re-import into
 * another store (a storage series ref would be renumbered by the last two).
 * Lookup selects the series holding a profile at that exact ms and compares
 * label hashes; a 64-bit hash collision between two series with a profile at
 * the same ms would pick the first in label order.
 *
 * Push rules (nothing is stored unless all pass; each refusal is counted in
 * profd_rejected_input_total{reason}):
 *   - service required, a label value (UTF-8, <= PD_LABEL_MAX_VALUE bytes),
 *     likewise instance_id (optional)                       400 bad_request/bad_labels
 *   - type one of profefe's types                           400 bad_request
 *   - labels=k=v,...: as profefe's Labels.FromString: split at ',' and the
 *     first '=', trimmed, URL-decoded ('+', %XX; a bad escape is 400);
 *     empty keys skipped, empty values absent; names any UTF-8
 *     (pd_label_name_valid, "k8s.pod"), not "__"-prefixed, not
 *     service/instance_id, each once; values UTF-8 <= PD_LABEL_MAX_VALUE;
 *     at most PD_LABEL_MAX_COUNT labels                    400 bad_labels
 *   - created_at parses                                     400 bad_request
 *   - body non-empty and decodes + validates under the limits
 *     (size, decompressed size, counts)                     400 bad_profile / 413 too_large
 *   - a push at a series and ms already stored is stored again at the next
 *     free ms (profefe stores every push under a new id); 409 duplicate
 *     only when PROFEFE_MAX_BUMP ms in a row are taken
 *   Success counts profd_ingested_profiles_total{source="push"} and
 *   profd_ingested_bytes_total{source="push"}.
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/parse.h"
#include "api/api_int.h"
#include "base/log.h"
#include "base/metrics.h"
#include "base/time.h"
#include "query/query.h"

#define PROFEFE_MAX_IDS 1000     /* ids in one GET id1+id2+... */
#define PROFEFE_MAX_MERGE 100000 /* profiles in one /merge */
#define PROFEFE_MAX_LIST 1000000 /* metas in one list reply */
#define PROFEFE_ID_LEN 32
#define PROFEFE_MAX_BUMP 1000 /* ms a duplicate push may move forward */
#define STR_(x) #x
#define STR(x) STR_(x)

static const char JSON_CT[] = "application/json";

static const char *const PROFEFE_TYPES[] = {"cpu",       "heap",         "block", "mutex",
                                            "goroutine", "threadcreate", "other"};

/* ---- helpers shared with pyroscope.c ---- */

bool pd__api_utf8_valid(const char *s, size_t len)
{
    const unsigned char *p = (const unsigned char *)s, *end = p + len;
    while (p < end) {
        unsigned c = *p;
        size_t n;
        unsigned cp;
        if (c < 0x80) {
            p++;
            continue;
        } else if ((c & 0xe0) == 0xc0) {
            n = 1;
            cp = c & 0x1f;
        } else if ((c & 0xf0) == 0xe0) {
            n = 2;
            cp = c & 0x0f;
        } else if ((c & 0xf8) == 0xf0) {
            n = 3;
            cp = c & 0x07;
        } else {
            return false;
        }
        if ((size_t)(end - p) <= n)
            return false;
        for (size_t i = 1; i <= n; i++) {
            if ((p[i] & 0xc0) != 0x80)
                return false;
            cp = (cp << 6) | (p[i] & 0x3f);
        }
        if ((n == 1 && cp < 0x80) || (n == 2 && cp < 0x800) || (n == 3 && cp < 0x10000) ||
            cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
            return false;
        p += n + 1;
    }
    return true;
}

int pd__api_check_sample_labels(const pd_profile *p, pd_err *err)
{
    for (size_t i = 0; i < p->n_sample; i++) {
        const pd_pprof_sample *s = &p->sample[i];
        for (size_t k = 0; k < s->n_label; k++) {
            int64_t idx[2] = {s->label[k].key, s->label[k].str};
            for (int j = 0; j < 2; j++) {
                size_t len = idx[j] > 0 && (size_t)idx[j] < p->n_string ? p->string_len[idx[j]] : 0;
                if (len > PD_API_MAX_SAMPLE_LABEL_BYTES)
                    return pd_err_set(err, PD_ETOOBIG, "sample %zu: label %s is %zu bytes, over %d",
                                      i, j ? "value" : "key", len, PD_API_MAX_SAMPLE_LABEL_BYTES);
            }
        }
    }
    return 0;
}

void pd__api_count_rejected(const char *reason)
{
    char lbl[96];
    snprintf(lbl, sizeof lbl, "reason=\"%s\"", reason);
    pd_metrics_add("profd_rejected_input_total", lbl, 1);
}

/* ---- replies ---- */

static const char *error_type(int status)
{
    switch (status) {
    case 404:
        return "not_found";
    case 422:
        return "execution";
    default:
        return status >= 500 ? "internal" : "bad_data";
    }
}

static void pf_error(pd_http_response *resp, int status, const char *reason, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Replaces the body with profefe's error envelope; counts reason when set. */
static void pf_error(pd_http_response *resp, int status, const char *reason, const char *fmt, ...)
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
    resp->content_type = JSON_CT;
    pd_buf_printf(&resp->body,
                  "{\"code\":%d,\"status\":\"error\",\"errorType\":\"%s\",\"error\":", status,
                  error_type(status));
    pd_buf_put_json_string(&resp->body, msg, strlen(msg));
    pd_buf_puts(&resp->body, "}");
    pd_log(PD_LOG_DEBUG, "profefe request refused", "status=%d reason=%s", status,
           reason ? reason : "none");
}

static int ok_begin(pd_http_response *resp)
{
    resp->status = 200;
    resp->content_type = JSON_CT;
    return pd_buf_puts(&resp->body, "{\"code\":200,\"status\":\"success\",\"body\":");
}

/* Ends a success envelope begun by ok_begin; rc is the result of filling it. */
static void ok_end(pd_http_response *resp, int rc)
{
    if (rc == 0)
        rc = pd__api_put_warnings(&resp->body);
    if (rc == 0)
        rc = pd_buf_puts(&resp->body, "}");
    if (rc == PD_ETOOBIG)
        pf_error(resp, 422, NULL, "reply over the size limit of %zu bytes", resp->body.max);
    else if (rc < 0)
        pf_error(resp, 500, NULL, "%s", pd_strerror(rc));
}

/* ---- parameters ---- */

static bool type_valid(const char *t)
{
    for (size_t i = 0; i < sizeof PROFEFE_TYPES / sizeof *PROFEFE_TYPES; i++)
        if (strcmp(t, PROFEFE_TYPES[i]) == 0)
            return true;
    return false;
}

/* profefe's time format 2006-01-02T15:04:05 (UTC), RFC 3339, or Unix seconds. */
static int parse_time(const char *s, int64_t *ms)
{
    int Y, M, D, h, m, sec, used = 0;
    if (strlen(s) == 19 &&
        sscanf(s, "%4d-%2d-%2dT%2d:%2d:%2d%n", &Y, &M, &D, &h, &m, &sec, &used) == 6 &&
        used == 19 && s[4] == '-' && s[7] == '-' && s[10] == 'T' && s[13] == ':' && s[16] == ':') {
        static const int mdays[12] = {31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
        if (Y < 1 || M < 1 || M > 12 || D < 1 || D > mdays[M - 1] || h < 0 || h > 23 || m < 0 ||
            m > 59 || sec < 0 || sec > 60)
            return PD_EPARSE;
        bool leap = (Y % 4 == 0 && Y % 100 != 0) || Y % 400 == 0;
        if (M == 2 && D == 29 && !leap)
            return PD_EPARSE;
        struct tm tm = {.tm_year = Y - 1900,
                        .tm_mon = M - 1,
                        .tm_mday = D,
                        .tm_hour = h,
                        .tm_min = m,
                        .tm_sec = sec};
        *ms = (int64_t)timegm(&tm) * 1000;
        return 0;
    }
    return pd_parse_time_param(s, ms, NULL);
}

/* An optional time parameter; def when absent. 0, or replies 400 and -1. */
static int time_arg(const pd_http_request *req, pd_http_response *resp, const char *name,
                    int64_t def, int64_t *out, const char *reason)
{
    const char *v = pd_http_arg(req, name);
    if (!v || !*v) {
        *out = def;
        return 0;
    }
    if (parse_time(v, out) < 0) {
        pf_error(resp, 400, reason,
                 "bad request: bad %s \"%.64s\": expected 2006-01-02T15:04:05 (UTC), RFC 3339 "
                 "or Unix seconds",
                 name, v);
        return -1;
    }
    return 0;
}

/* Checks a label value from a parameter. NULL when fine, else why not. */
static const char *value_problem(const char *v)
{
    size_t n = strlen(v);
    if (n > PD_LABEL_MAX_VALUE)
        return "over " STR(PD_LABEL_MAX_VALUE) " bytes";
    if (!pd__api_utf8_valid(v, n))
        return "not UTF-8";
    return NULL;
}

static int hexval(char c);

/* Go's url.QueryUnescape of s[0..n) trimmed of spaces (what profefe's
 * Labels.FromString applies to each key and value): '+' is a space, %XX a
 * byte. Into a malloc'd string *out. 0, PD_ENOMEM, or PD_EPARSE for a
 * malformed escape (profefe fails the same way) or an escaped NUL. */
static int query_unescape(const char *s, size_t n, char **out)
{
    while (n && (*s == ' ' || *s == '\t'))
        s++, n--;
    while (n && (s[n - 1] == ' ' || s[n - 1] == '\t'))
        n--;
    char *o = malloc(n + 1);
    if (!o)
        return PD_ENOMEM;
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '+') {
            o[m++] = ' ';
        } else if (s[i] == '%') {
            if (i + 2 >= n) {
                free(o);
                return PD_EPARSE;
            }
            int a = hexval(s[i + 1]), b = hexval(s[i + 2]);
            if (a < 0 || b < 0 || (a | b) == 0) {
                free(o);
                return PD_EPARSE;
            }
            o[m++] = (char)(a * 16 + b);
            i += 2;
        } else {
            o[m++] = s[i];
        }
    }
    o[m] = 0;
    *out = o;
    return 0;
}

/* Parses labels=k=v,k2=v2 into ls (which may already hold labels; names
 * present already are refused) as profefe's Labels.FromString reads it:
 * split at ',', then at the first '='; key and value trimmed of spaces and
 * URL-decoded (url.QueryUnescape: '+' and %XX); an empty key is skipped; an
 * empty value means absent (profd's rule: nothing is stored). Names are any
 * UTF-8 (pd_label_name_valid: "k8s.pod" is fine) without the reserved "__"
 * prefix, not service/instance_id; a name given twice is refused (a profd
 * series holds one value per name; profefe would keep both). 0, or replies
 * 400/500 and returns -1. */
static int parse_labels(const char *s, pd_labels *ls, pd_http_response *resp, const char *reason)
{
    size_t commas = 0;
    for (const char *c = s; *c; c++)
        commas += *c == ',';
    if (commas + 1 > PD_LABEL_MAX_COUNT) {
        pf_error(resp, 400, reason, "bad labels: %zu labels given, at most %d allowed", commas + 1,
                 PD_LABEL_MAX_COUNT);
        return -1;
    }
    pd_err err = {{0}};
    const char *c = s;
    for (;;) {
        const char *end = strchr(c, ',');
        size_t cl = end ? (size_t)(end - c) : strlen(c);
        const char *eq = memchr(c, '=', cl);
        size_t kl = eq ? (size_t)(eq - c) : cl;
        char *k = NULL, *v = NULL;
        int rc = query_unescape(c, kl, &k);
        if (rc == 0)
            rc = query_unescape(eq ? eq + 1 : "", eq ? cl - kl - 1 : 0, &v);
        if (rc == PD_ENOMEM) {
            free(k);
            pf_error(resp, 500, NULL, "out of memory");
            return -1;
        }
        if (rc < 0) {
            pf_error(resp, 400, reason, "bad labels: \"%.*s\": invalid URL escape",
                     (int)(cl > 100 ? 100 : cl), c);
            free(k);
            return -1;
        }
        const char *why = NULL;
        if (!*k || !*v) {
            /* profefe skips an empty key; an empty value is an absent label */
        } else if (!pd_label_name_valid(k) || strncmp(k, "__", 2) == 0) {
            pf_error(resp, 400, reason,
                     "bad label name \"%.100s\": must be 1..%d bytes of UTF-8 without control "
                     "characters and without a \"__\" prefix",
                     k, PD_LABEL_MAX_NAME);
            goto fail;
        } else if (!strcmp(k, "service") || !strcmp(k, "instance_id")) {
            pf_error(resp, 400, reason, "label \"%s\" conflicts with the %s parameter", k, k);
            goto fail;
        } else if ((why = value_problem(v))) {
            pf_error(resp, 400, reason, "bad value of label \"%.100s\": %s", k, why);
            goto fail;
        } else if (pd_labels_get(ls, k)) {
            pf_error(resp, 400, reason, "label \"%.100s\" given twice", k);
            goto fail;
        } else if ((rc = pd_labels_set(ls, k, v, &err)) < 0) {
            pf_error(resp, rc == PD_ENOMEM ? 500 : 400, rc == PD_ENOMEM ? NULL : reason,
                     "bad labels: %s", err.msg);
            goto fail;
        }
        free(k);
        free(v);
        if (!end)
            return 0;
        c = end + 1;
        continue;
    fail:
        free(k);
        free(v);
        return -1;
    }
}

/* ---- ids and metas ---- */

static void format_id(const pd_labels *ls, int64_t ts, char out[PROFEFE_ID_LEN + 1])
{
    snprintf(out, PROFEFE_ID_LEN + 1, "%016" PRIx64 "%016" PRIx64, pd_labels_hash(ls),
             (uint64_t)ts);
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* Parses an id of len bytes. 0 or PD_EPARSE. */
static int parse_id(const char *s, size_t len, uint64_t *hash, int64_t *ts)
{
    if (len != PROFEFE_ID_LEN)
        return PD_EPARSE;
    uint64_t v[2] = {0, 0};
    for (size_t i = 0; i < len; i++) {
        int h = hexval(s[i]);
        if (h < 0)
            return PD_EPARSE;
        v[i / 16] = (v[i / 16] << 4) | (uint64_t)h;
    }
    *hash = v[0];
    *ts = (int64_t)v[1];
    return 0;
}

/* Appends the meta JSON of the profile of series ls at ts. */
static int put_meta(pd_buf *b, const pd_labels *ls, int64_t ts)
{
    char id[PROFEFE_ID_LEN + 1], created[40];
    format_id(ls, ts, id);
    pd_format_rfc3339(ts, created, sizeof created);
    const char *type = pd_labels_get(ls, "__name__");
    const char *service = pd_labels_get(ls, "service");
    const char *iid = pd_labels_get(ls, "instance_id");
    int rc = pd_buf_printf(b, "{\"id\":\"%s\",\"type\":", id);
    type = type ? type : "";
    service = service ? service : "";
    iid = iid ? iid : "";
    rc = rc ? rc : pd_buf_put_json_string(b, type, strlen(type));
    rc = rc ? rc : pd_buf_puts(b, ",\"service\":");
    rc = rc ? rc : pd_buf_put_json_string(b, service, strlen(service));
    rc = rc ? rc : pd_buf_puts(b, ",\"instance_id\":");
    rc = rc ? rc : pd_buf_put_json_string(b, iid, strlen(iid));
    rc = rc ? rc : pd_buf_puts(b, ",\"labels\":[");
    bool first = true;
    for (size_t i = 0; rc == 0 && i < ls->n; i++) {
        const char *k = ls->v[i].name;
        if (!strcmp(k, "__name__") || !strcmp(k, "service") || !strcmp(k, "instance_id"))
            continue;
        rc = pd_buf_puts(b, first ? "{\"key\":" : ",{\"key\":");
        first = false;
        rc = rc ? rc : pd_buf_put_json_string(b, k, strlen(k));
        rc = rc ? rc : pd_buf_puts(b, ",\"value\":");
        rc = rc ? rc : pd_buf_put_json_string(b, ls->v[i].value, strlen(ls->v[i].value));
        rc = rc ? rc : pd_buf_puts(b, "}");
    }
    rc = rc ? rc : pd_buf_puts(b, "],\"created_at\":");
    rc = rc ? rc : pd_buf_put_json_string(b, created, strlen(created));
    rc = rc ? rc : pd_buf_puts(b, "}");
    return rc;
}

/* ---- push ---- */

static void h_push(const pd__api_env *env, const pd_http_request *req, pd_http_response *resp)
{
    const char *service = pd_http_arg(req, "service");
    const char *type = pd_http_arg(req, "type");
    const char *iid = pd_http_arg(req, "instance_id");
    const char *lblstr = pd_http_arg(req, "labels");
    const char *created = pd_http_arg(req, "created_at");
    pd_labels ls;
    pd_labels_init(&ls);
    pd_profile p;
    memset(&p, 0, sizeof p);
    bool decoded = false;
    pd_err err = {{0}};
    int rc;

    if (!service || !*service) {
        pf_error(resp, 400, "bad_request", "bad request: missing service");
        goto out;
    }
    if (!type || !*type) {
        pf_error(resp, 400, "bad_request",
                 "bad request: missing type (one of cpu, heap, block, mutex, goroutine, "
                 "threadcreate, other)");
        goto out;
    }
    if (!type_valid(type)) {
        pf_error(resp, 400, "bad_request",
                 "bad request: bad profile type \"%.100s\": want one of cpu, heap, block, mutex, "
                 "goroutine, threadcreate, other",
                 type);
        goto out;
    }
    const char *vals[2] = {service, iid}, *vnames[2] = {"service", "instance_id"}, *why;
    for (int i = 0; i < 2; i++) {
        if (vals[i] && (why = value_problem(vals[i]))) {
            pf_error(resp, 400, "bad_labels", "bad %s: %s", vnames[i], why);
            goto out;
        }
    }
    if (lblstr && *lblstr && parse_labels(lblstr, &ls, resp, "bad_labels") < 0)
        goto out;
    if ((rc = pd_labels_set(&ls, "service", service, &err)) < 0 ||
        (iid && *iid && (rc = pd_labels_set(&ls, "instance_id", iid, &err)) < 0) ||
        (rc = pd_labels_set(&ls, "__name__", type, &err)) < 0) {
        pf_error(resp, rc == PD_ENOMEM ? 500 : 400, rc == PD_ENOMEM ? NULL : "bad_labels",
                 "bad labels: %s", err.msg);
        goto out;
    }
    int64_t ts = 0;
    bool have_ts = false;
    if (created && *created) {
        if (time_arg(req, resp, "created_at", 0, &ts, "bad_request") < 0)
            goto out;
        have_ts = true;
    }
    if (req->body_len == 0) {
        pf_error(resp, 400, "bad_profile",
                 "empty body: POST a pprof profile (gzip or raw protobuf)");
        goto out;
    }
    rc = pd_profile_decode(&p, req->body, req->body_len, env->limits, &err);
    if (rc < 0) {
        if (rc == PD_ENOMEM)
            pf_error(resp, 500, NULL, "out of memory decoding the profile");
        else if (rc == PD_ETOOBIG)
            pf_error(resp, 413, "too_large", "profile refused: %s", err.msg);
        else
            pf_error(resp, 400, "bad_profile", "invalid profile: %s", err.msg);
        goto out;
    }
    decoded = true;
    if ((rc = pd__api_check_sample_labels(&p, &err)) < 0) {
        pf_error(resp, 413, "too_large", "profile refused: %s", err.msg);
        goto out;
    }
    if (!have_ts)
        ts = p.time_nanos > 0 ? p.time_nanos / 1000000 : pd_now_ms();

    pd_err_clear(&err);
    /* profefe stores every push under a new id: a push landing on a
     * millisecond this series already holds goes to the next free one
     * (its id, which is series + ms, is new) */
    rc = pd__api_store_exact(env->st, &ls, ts, req->body, req->body_len, &p, "push", &err);
    for (int tries = 0; rc == PD_EEXIST && tries < PROFEFE_MAX_BUMP; tries++) {
        ts++;
        pd_err_clear(&err);
        rc = pd__api_store_exact(env->st, &ls, ts, req->body, req->body_len, &p, "push", &err);
    }
    if (rc == PD_EOUTOFBOUNDS) { /* counted by pd__api_store */
        pf_error(resp, 400, NULL, "%s", err.msg);
        goto out;
    }
    if (rc == PD_EEXIST) {
        pf_error(resp, 409, "duplicate",
                 "this series already holds profiles at the %d ms up to %" PRId64 " ms",
                 PROFEFE_MAX_BUMP + 1, ts);
        goto out;
    }
    if (rc < 0) {
        pd_log(PD_LOG_ERROR, "push: storage append failed", "err=\"%s\"", err.msg);
        pf_error(resp, pd__api_store_status(rc), NULL, "storage: %s",
                 err.msg[0] ? err.msg : pd_strerror(rc));
        goto out;
    }
    rc = ok_begin(resp);
    rc = rc ? rc : put_meta(&resp->body, &ls, ts);
    ok_end(resp, rc);
out:
    if (decoded)
        pd_profile_release(&p);
    pd_labels_release(&ls);
}

/* ---- find ---- */

typedef struct find_params {
    pd_matcher ms[PD_LABEL_MAX_COUNT + 2];
    size_t n;
    int64_t from, to;
    size_t limit;
    const char *type;
} find_params;

static void find_release(find_params *f)
{
    for (size_t i = 0; i < f->n; i++)
        pd_matcher_release(&f->ms[i]);
    f->n = 0;
}

/* Reads service, type, from, to, labels, limit into f. 0, or replies 400
 * and returns -1 (f holds nothing then). */
static int find_args(const pd_http_request *req, pd_http_response *resp, bool need_type,
                     find_params *f)
{
    memset(f, 0, sizeof *f);
    const char *service = pd_http_arg(req, "service");
    const char *type = pd_http_arg(req, "type");
    const char *lblstr = pd_http_arg(req, "labels");
    const char *limit = pd_http_arg(req, "limit");
    pd_labels ls;
    pd_labels_init(&ls);
    pd_err err = {{0}};
    int rc;
    if (!service || !*service) {
        pf_error(resp, 400, NULL, "bad request: missing service");
        return -1;
    }
    if (type && *type && !type_valid(type)) {
        pf_error(resp, 400, NULL,
                 "bad request: bad profile type \"%.100s\": want one of cpu, heap, block, mutex, "
                 "goroutine, threadcreate, other",
                 type);
        return -1;
    }
    if (need_type && (!type || !*type)) {
        pf_error(resp, 400, NULL, "bad request: missing type");
        return -1;
    }
    f->type = type && *type ? type : NULL;
    if (time_arg(req, resp, "from", INT64_MIN, &f->from, NULL) < 0 ||
        time_arg(req, resp, "to", INT64_MAX, &f->to, NULL) < 0)
        return -1;
    if (f->to < f->from) {
        pf_error(resp, 400, NULL, "bad request: \"to\" is before \"from\"");
        return -1;
    }
    if (limit && *limit) {
        uint64_t v;
        if (pd_parse_u64(limit, SIZE_MAX, &v) < 0) {
            pf_error(resp, 400, NULL,
                     "bad request: bad limit \"%.64s\": want a non-negative decimal integer "
                     "(0 = all)",
                     limit);
            return -1;
        }
        f->limit = (size_t)v;
    }
    if (lblstr && *lblstr && parse_labels(lblstr, &ls, resp, NULL) < 0)
        goto fail;
    if ((rc = pd_matcher_init(&f->ms[f->n], PD_MATCH_EQ, "service", service, &err)) < 0)
        goto fail_rc;
    f->n++;
    if (f->type) {
        if ((rc = pd_matcher_init(&f->ms[f->n], PD_MATCH_EQ, "__name__", f->type, &err)) < 0)
            goto fail_rc;
        f->n++;
    }
    for (size_t i = 0; i < ls.n; i++) {
        if ((rc = pd_matcher_init(&f->ms[f->n], PD_MATCH_EQ, ls.v[i].name, ls.v[i].value, &err)) <
            0)
            goto fail_rc;
        f->n++;
    }
    pd_labels_release(&ls);
    return 0;
fail_rc:
    pf_error(resp, rc == PD_ENOMEM ? 500 : 400, NULL, "bad request: %s", err.msg);
fail:
    pd_labels_release(&ls);
    find_release(f);
    return -1;
}

typedef struct found {
    size_t series; /* index in the series set */
    int64_t ts;
} found;

static int found_cmp(const void *a, const void *b)
{
    const found *x = a, *y = b;
    if (x->ts != y->ts)
        return x->ts < y->ts ? -1 : 1;
    return x->series < y->series ? -1 : x->series > y->series;
}

/* Selects the profiles matching f: *out (malloc'd, sorted by time, at most
 * cap) and the series set they index. 0, or replies and returns -1. */
static int find(const pd__api_env *env, const find_params *f, size_t cap, pd_series_set *set,
                found **out, size_t *n_out, pd_http_response *resp)
{
    pd_err err = {{0}};
    *out = NULL;
    *n_out = 0;
    int rc = pd_storage_select(env->st, f->ms, f->n, f->from, f->to, set, &err);
    if (rc < 0) {
        pf_error(resp, 500, NULL, "storage: %s", err.msg[0] ? err.msg : pd_strerror(rc));
        return -1;
    }
    size_t total = 0;
    for (size_t i = 0; i < set->n; i++)
        total += set->v[i].n_profiles;
    if (total > cap) {
        pf_error(resp, 422, NULL,
                 "%zu profiles match, more than the %zu one request may read; narrow from/to or "
                 "the labels",
                 total, cap);
        goto fail;
    }
    found *v = malloc((total ? total : 1) * sizeof *v);
    if (!v) {
        pf_error(resp, 500, NULL, "out of memory");
        goto fail;
    }
    size_t n = 0;
    for (size_t i = 0; i < set->n; i++) {
        pd_points pts;
        rc = pd_storage_read_points(env->st, set->v[i].ref, f->from, f->to, &pts, &err);
        if (rc == PD_ENOTFOUND)
            continue; /* dropped meanwhile */
        if (rc < 0) {
            free(v);
            pf_error(resp, 500, NULL, "storage: %s", err.msg[0] ? err.msg : pd_strerror(rc));
            goto fail;
        }
        for (size_t k = 0; k < pts.n && n < total; k++)
            v[n++] = (found){i, pts.v[k].ts_ms};
        pd_points_release(&pts);
    }
    qsort(v, n, sizeof *v, found_cmp);
    *out = v;
    *n_out = n;
    return 0;
fail:
    pd_series_set_release(set);
    return -1;
}

static void h_list(const pd__api_env *env, const pd_http_request *req, pd_http_response *resp)
{
    find_params f;
    if (find_args(req, resp, false, &f) < 0)
        return;
    pd_series_set set = {0};
    found *v = NULL;
    size_t n = 0;
    if (find(env, &f, PROFEFE_MAX_LIST, &set, &v, &n, resp) < 0)
        goto out;
    if (f.limit && n > f.limit)
        n = f.limit;
    int rc = ok_begin(resp);
    rc = rc ? rc : pd_buf_puts(&resp->body, "[");
    for (size_t i = 0; rc == 0 && i < n; i++) {
        if (i)
            rc = pd_buf_puts(&resp->body, ",");
        rc = rc ? rc : put_meta(&resp->body, &set.v[v[i].series].labels, v[i].ts);
    }
    rc = rc ? rc : pd_buf_puts(&resp->body, "]");
    ok_end(resp, rc);
    free(v);
    pd_series_set_release(&set);
out:
    find_release(&f);
}

/* Replies with p as gzip pprof named name. */
static void reply_profile(pd_http_response *resp, const pd_profile *p, const char *name)
{
    char disp[160];
    resp->status = 200;
    resp->content_type = "application/octet-stream";
    snprintf(disp, sizeof disp, "attachment; filename=\"%s\"", name);
    pd_http_add_header(resp, "Content-Disposition", disp);
    int rc = pd_profile_encode(p, true, &resp->body);
    if (rc < 0)
        pf_error(resp, rc == PD_ETOOBIG ? 422 : 500, NULL, "encoding the profile: %s",
                 rc == PD_ETOOBIG ? "over the reply size limit" : pd_strerror(rc));
}

/* The merge behind /merge and id1+id2 is query/'s pd_merge (google/pprof's
 * Merge rules, the same as /api/v1/query's merge mode); api/merge.c's
 * pd__merger remains for Pyroscope's per-type deltas. */
static int merger_new(const pd__api_env *env, pd_merge **m, pd_http_response *resp)
{
    pd_merge_options o;
    memset(&o, 0, sizeof o);
    if (env->limits && env->limits->max_samples)
        o.max_samples = env->limits->max_samples;
    pd_err err = {{0}};
    int rc = pd_merge_new(&o, m, &err);
    if (rc < 0) {
        pf_error(resp, 500, NULL, "merge: %s", err.msg[0] ? err.msg : pd_strerror(rc));
        return -1;
    }
    return 0;
}

/* Adds the profile of (ref, ts) to m. 0, or replies and returns -1. */
static int merge_one(const pd__api_env *env, pd_merge *m, uint64_t ref, int64_t ts,
                     pd_http_response *resp)
{
    pd_profile p;
    pd_err err = {{0}};
    int rc = pd_storage_read_profile(env->st, ref, ts, &p, NULL, &err);
    if (rc == PD_ECORRUPT)
        return 0; /* damaged: left out, the storage warned (storage.h) */
    if (rc < 0) {
        pf_error(resp, rc == PD_ENOTFOUND ? 404 : 500, NULL, "reading profile at %" PRId64 ": %s",
                 ts, err.msg[0] ? err.msg : pd_strerror(rc));
        return -1;
    }
    char source[64];
    snprintf(source, sizeof source, "profile at %" PRId64 " ms", ts);
    rc = pd_merge_add(m, &p, NULL, false, source, &err);
    pd_profile_release(&p);
    if (rc < 0) {
        pf_error(resp,
                 rc == PD_ENOMEM    ? 500
                 : rc == PD_ETOOBIG ? 422
                                    : 400,
                 NULL, "merge: %s", err.msg[0] ? err.msg : pd_strerror(rc));
        return -1;
    }
    return 0;
}

static void finish_merge(pd_merge *m, const char *name, pd_http_response *resp)
{
    pd_profile out;
    pd_err err = {{0}};
    int rc = pd_merge_finish(m, &out, &err);
    if (rc < 0) {
        pf_error(resp, rc == PD_ENOTFOUND ? 404 : 500, NULL, "merge: %s",
                 err.msg[0] ? err.msg : pd_strerror(rc));
        return;
    }
    reply_profile(resp, &out, name);
    pd_profile_release(&out);
}

static void h_merge(const pd__api_env *env, const pd_http_request *req, pd_http_response *resp)
{
    find_params f;
    if (find_args(req, resp, true, &f) < 0)
        return;
    pd_series_set set = {0};
    found *v = NULL;
    size_t n = 0;
    pd_merge *m = NULL;
    if (find(env, &f, PROFEFE_MAX_MERGE, &set, &v, &n, resp) < 0)
        goto out;
    if (n == 0) {
        pf_error(resp, 404, NULL, "nothing found");
        goto done;
    }
    /* pushed down into the storage (pd_storage_aggregate via
       pd_query_merge_refs: summed on stack ids, symbols resolved once), the
       stored profiles as they are (profefe merges what it stored: no
       deltas of cumulative types) */
    pd_merge_options o;
    memset(&o, 0, sizeof o);
    o.delta = PD_DELTA_RAW;
    if (env->limits && env->limits->max_samples)
        o.max_samples = env->limits->max_samples;
    pd_query_refs q = {.series = set.v, .n = set.n, .from = f.from, .to = f.to};
    pd_profile out;
    pd_err err = {{0}};
    int rc = pd_query_merge_refs(env->st, NULL, &q, &o, &out, NULL, &err);
    if (rc < 0) {
        pf_error(resp,
                 rc == PD_ENOTFOUND  ? 404
                 : rc == PD_EINVAL   ? 400
                 : rc == PD_ETOOBIG  ? 422
                 : rc == PD_ETIMEOUT ? 503
                                     : 500,
                 NULL, "merge: %s", err.msg[0] ? err.msg : pd_strerror(rc));
        goto done;
    }
    char name[64];
    snprintf(name, sizeof name, "%s.pb.gz", f.type);
    reply_profile(resp, &out, name);
    pd_profile_release(&out);
done:
    pd_merge_free(m);
    free(v);
    pd_series_set_release(&set);
out:
    find_release(&f);
}

/* Finds the series of id (hash, ts): 0 and *ref, PD_ENOTFOUND, or a storage
 * error (err). */
static int lookup_id(const pd__api_env *env, uint64_t hash, int64_t ts, uint64_t *ref,
                     pd_labels *labels /* OUT, may be NULL */, pd_err *err)
{
    pd_series_set set = {0};
    int rc = pd_storage_select(env->st, NULL, 0, ts, ts, &set, err);
    if (rc < 0)
        return rc;
    rc = PD_ENOTFOUND;
    for (size_t i = 0; i < set.n; i++) {
        if (pd_labels_hash(&set.v[i].labels) == hash) {
            *ref = set.v[i].ref;
            rc = labels ? pd_labels_copy(labels, &set.v[i].labels) : 0;
            break;
        }
    }
    pd_series_set_release(&set);
    return rc;
}

static void h_get(const pd__api_env *env, const char *ids, pd_http_response *resp)
{
    size_t len = strlen(ids);
    while (len && ids[len - 1] == '/')
        len--;
    if (len == 0) {
        pf_error(resp, 400, NULL, "no profile id");
        return;
    }
    size_t n = 1;
    for (size_t i = 0; i < len; i++) {
        n += ids[i] == '+';
        if (ids[i] == '+' && (i == 0 || i + 1 == len || ids[i + 1] == '+')) {
            pf_error(resp, 400, NULL, "bad profile ids \"%.*s\": empty id at byte %zu",
                     (int)(len > 200 ? 200 : len), ids, i + (i > 0));
            return;
        }
    }
    if (n > PROFEFE_MAX_IDS) {
        pf_error(resp, 400, NULL, "bad profile ids: %zu ids, at most %d", n, PROFEFE_MAX_IDS);
        return;
    }
    pd_merge *m = NULL;
    pd_err err = {{0}};
    const char *s = ids, *end = ids + len;
    if (n > 1 && merger_new(env, &m, resp) < 0)
        return;
    char type[64] = "profile";
    while (s < end) {
        const char *plus = memchr(s, '+', (size_t)(end - s));
        size_t l = plus ? (size_t)(plus - s) : (size_t)(end - s);
        uint64_t hash, ref = 0;
        int64_t ts;
        if (parse_id(s, l, &hash, &ts) < 0) {
            pf_error(resp, 400, NULL, "bad profile id \"%.*s\": want %d hex digits",
                     (int)(l > 64 ? 64 : l), s, PROFEFE_ID_LEN);
            goto out;
        }
        pd_labels ls;
        pd_labels_init(&ls);
        int rc = lookup_id(env, hash, ts, &ref, &ls, &err);
        if (rc == PD_ENOTFOUND) {
            pf_error(resp, 404, NULL, "nothing found: no profile with id %.*s", (int)l, s);
            pd_labels_release(&ls);
            goto out;
        }
        if (rc < 0) {
            pd_labels_release(&ls);
            pf_error(resp, 500, NULL, "storage: %s", err.msg[0] ? err.msg : pd_strerror(rc));
            goto out;
        }
        const char *t = pd_labels_get(&ls, "__name__");
        if (t && s == ids)
            snprintf(type, sizeof type, "%.40s", t);
        pd_labels_release(&ls);
        if (!m) {
            /* one id: the stored bytes as pushed */
            pd_profile p;
            char disp[160];
            rc = pd_storage_read_profile(env->st, ref, ts, &p, &resp->body, &err);
            if (rc < 0) {
                pf_error(resp,
                         rc == PD_ETOOBIG     ? 422
                         : rc == PD_ENOTFOUND ? 404
                                              : 500,
                         NULL, "reading profile %.*s: %s", (int)l, s,
                         err.msg[0] ? err.msg : pd_strerror(rc));
                goto out;
            }
            pd_profile_release(&p);
            resp->status = 200;
            resp->content_type = "application/octet-stream";
            snprintf(disp, sizeof disp, "attachment; filename=\"%s-%.*s.pb.gz\"", type, (int)l, s);
            pd_http_add_header(resp, "Content-Disposition", disp);
            goto out;
        }
        if (merge_one(env, m, ref, ts, resp) < 0)
            goto out;
        s = plus ? plus + 1 : end;
    }
    char name[80];
    snprintf(name, sizeof name, "%s-merged.pb.gz", type);
    finish_merge(m, name, resp);
out:
    pd_merge_free(m);
}

static void h_services(const pd__api_env *env, pd_http_response *resp)
{
    pd_err err = {{0}};
    int rc = ok_begin(resp);
    rc = rc ? rc
            : pd_query_label_values(env->st, "service", NULL, 0, INT64_MIN, INT64_MAX, &resp->body,
                                    &err);
    if (rc < 0 && rc != PD_ETOOBIG) {
        pf_error(resp, 500, NULL, "%s", err.msg[0] ? err.msg : pd_strerror(rc));
        return;
    }
    ok_end(resp, rc);
}

static void h_version(const pd__api_env *env, pd_http_response *resp)
{
    const char *v = env->version ? env->version : "unknown";
    int rc = ok_begin(resp);
    rc = rc ? rc : pd_buf_puts(&resp->body, "{\"version\":");
    rc = rc ? rc : pd_buf_put_json_string(&resp->body, v, strlen(v));
    /* profefe's version.go: commit and build_time as its ldflags set them */
    const char *commit = env->build ? env->build->revision : "unknown";
    const char *when = env->build ? env->build->build_date : "unknown";
    rc = rc ? rc : pd_buf_puts(&resp->body, ",\"commit\":");
    rc = rc ? rc : pd_buf_put_json_string(&resp->body, commit, strlen(commit));
    rc = rc ? rc : pd_buf_puts(&resp->body, ",\"build_time\":");
    rc = rc ? rc : pd_buf_put_json_string(&resp->body, when, strlen(when));
    rc = rc ? rc : pd_buf_puts(&resp->body, "}");
    ok_end(resp, rc);
}

/* ---- routing ---- */

static bool is_get(const pd_http_request *req)
{
    return !strcmp(req->method, "GET") || !strcmp(req->method, "HEAD");
}

static void bad_method(pd_http_response *resp, const char *allow)
{
    pf_error(resp, 405, NULL, "method not allowed; use %s", allow);
    pd_http_add_header(resp, "Allow", allow);
}

const char *pd__profefe_route(const pd__api_env *env, const pd_http_request *req,
                              pd_http_response *resp)
{
    const char *path = req->path;
    if (!strcmp(path, "/api/0/profiles") || !strcmp(path, "/api/0/profiles/")) {
        if (!strcmp(req->method, "POST"))
            h_push(env, req, resp);
        else if (is_get(req))
            h_list(env, req, resp);
        else
            bad_method(resp, "GET, POST");
        return "/api/0/profiles";
    }
    if (!strcmp(path, "/api/0/profiles/merge") || !strcmp(path, "/api/0/profiles/merge/")) {
        if (is_get(req))
            h_merge(env, req, resp);
        else
            bad_method(resp, "GET");
        return "/api/0/profiles/merge";
    }
    if (!strncmp(path, "/api/0/profiles/", 16)) {
        if (is_get(req))
            h_get(env, path + 16, resp);
        else
            bad_method(resp, "GET");
        return "/api/0/profiles/:id";
    }
    if (!strcmp(path, "/api/0/services")) {
        if (is_get(req))
            h_services(env, resp);
        else
            bad_method(resp, "GET");
        return "/api/0/services";
    }
    if (!strcmp(path, "/api/0/version")) {
        if (is_get(req))
            h_version(env, resp);
        else
            bad_method(resp, "GET");
        return "/api/0/version";
    }
    pf_error(resp, 404, NULL, "unknown API endpoint %.200s", path);
    return "other";
}
