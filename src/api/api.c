/*
 * api/api.c — the HTTP handlers of profd (routes and envelopes: api.h).
 *
 * Each request runs on an HTTP server thread: route by path, check the
 * method, read parameters (pd_http_arg), call query/storage, and write the
 * reply into resp->body (capped at max_response_bytes). Handlers keep no
 * state between requests; the only shared state is the metrics registry and
 * what storage and the scrape manager guard themselves.
 *
 * profefe's API (/api/0/...) lives in profefe.c and Pyroscope's POST
 * /ingest in pyroscope.c (rules there); route() only dispatches to them.
 */
#include "api/api.h"
#include "api/api_int.h"
#include "api/querier_int.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <pthread.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "agent/profd_agent.h"
#include "base/cancel.h"
#include "base/labels.h"
#include "base/log.h"
#include "base/metrics.h"
#include "base/time.h"
#include "query/query.h"
#include "symbolize/elf.h"
#include "symbolize/symbolize.h"
#include "ui/ui.h"
#include "base/parse.h"

#define MAX_MATCH_PARAMS 64
#define DEFAULT_TOP_ROWS 100
#define DEFAULT_QUERY_TIMEOUT_MS (120 * 1000LL)
#define DEFAULT_MAX_RESPONSE ((size_t)256 << 20)
#define RANGE_DEFAULT_MS (3600 * 1000LL)

static const char TEXT_CT[] = "text/plain; charset=utf-8";

/* report=view: {"top":<report=top>,"flamegraph":<report=flamegraph>} of
 * one profile (one merge for the UI's table and flame graph: issue 15);
 * top with o (its rows, order, filter), the flame graph with fg_nodes nodes
 * (fg_nodes= parameter, 0 = all) and the same sample type and diff flag. */
static int put_view(const pd_profile *p, const pd_report_options *o, size_t fg_nodes, pd_buf *out)
{
    pd_report_options fo = *o;
    fo.max_nodes = fg_nodes;
    fo.sort = PD_TOP_SORT_DEFAULT;
    fo.filter = NULL;
    int rc = pd_buf_puts(out, "{\"top\":");
    if (!rc)
        rc = pd_report_top_ex(p, o, out);
    if (!rc)
        rc = pd_buf_puts(out, ",\"flamegraph\":");
    if (!rc)
        rc = pd_report_flamegraph_ex(p, &fo, out);
    if (!rc)
        rc = pd_buf_putc(out, '}');
    return rc;
}

/* report=flamebearer: Pyroscope's FlamebearerProfile JSON of p (what its UI
 * exports and imports; querier_int.h pd__flamebearer_report), bare (no
 * envelope, as proto and folded), named after sel's metric name (the
 * leading name of a selector, e.g. heap of heap{job="api"}). */
static void put_flamebearer(const pd_profile *p, const pd_report_options *ro, const char *sel,
                            pd_http_response *resp)
{
    char metric[128] = "";
    size_t n = 0;
    while (sel && (*sel == ' ' || *sel == '\t'))
        sel++;
    while (sel && n + 1 < sizeof metric &&
           ((sel[n] >= 'a' && sel[n] <= 'z') || (sel[n] >= 'A' && sel[n] <= 'Z') || sel[n] == '_' ||
            sel[n] == ':' || (n && sel[n] >= '0' && sel[n] <= '9')))
        n++;
    if (sel)
        memcpy(metric, sel, n);
    metric[n] = 0;
    pd_err err = {{0}};
    pd_buf_reset(&resp->body);
    int rc = pd__flamebearer_report(p, ro->sample_index, ro->max_nodes, ro->diff, metric,
                                    &resp->body, &err);
    if (rc < 0) {
        pd__api_reply_error(resp, pd__api_status_of(rc), "%s",
                            err.msg[0] ? err.msg : pd_strerror(rc));
        return;
    }
    resp->status = 200;
    resp->content_type = "application/json";
}

/* report=top's sort=flat|cum|name, order=asc|desc and filter=TEXT into o.
 * 0, or replies 400 naming the parameter and returns -1. */
static int top_params(const pd_http_request *req, pd_http_response *resp, pd_report_options *o)
{
    const char *sort = pd_http_arg(req, "sort"), *order = pd_http_arg(req, "order");
    const char *filter = pd_http_arg(req, "filter");
    if (sort && *sort) {
        if (!strcmp(sort, "flat"))
            o->sort = PD_TOP_SORT_FLAT;
        else if (!strcmp(sort, "cum"))
            o->sort = PD_TOP_SORT_CUM;
        else if (!strcmp(sort, "name"))
            o->sort = PD_TOP_SORT_NAME;
        else if (strcmp(sort, "default")) {
            pd__api_reply_error(
                resp, 400,
                "invalid parameter \"sort\": \"%.64s\" is not one of flat, cum, name, "
                "default",
                sort);
            return -1;
        }
    }
    if (order && *order) {
        if (strcmp(order, "asc") && strcmp(order, "desc")) {
            pd__api_reply_error(resp, 400,
                                "invalid parameter \"order\": \"%.64s\" is not asc or desc", order);
            return -1;
        }
        o->ascending = !strcmp(order, "asc");
    }
    if (filter && strlen(filter) > 1024) {
        pd__api_reply_error(resp, 400, "invalid parameter \"filter\": over 1024 bytes");
        return -1;
    }
    o->filter = filter;
    return 0;
}

/* ---- /api/v1 ---- */

/* delta= (issue 12): "true"/"1", "false"/"0"/"raw", absent = def (-1 when
 * the caller's default is "auto"). Replies 400 and returns -2 on anything
 * else. */
static int delta_param(const pd_http_request *req, pd_http_response *resp, int def)
{
    const char *d = pd_http_arg(req, "delta");
    if (!d)
        return def;
    if (!strcmp(d, "true") || !strcmp(d, "1"))
        return 1;
    if (!strcmp(d, "false") || !strcmp(d, "0") || !strcmp(d, "raw"))
        return 0;
    pd_metrics_add("profd_rejected_input_total", "reason=\"query_bad_param\"", 1);
    pd__api_reply_error(
        resp, 400,
        "invalid parameter \"delta\": \"%.64s\" (true: each profile of a cumulative "
        "series minus the one before; false: the stored counters)",
        d);
    return -2;
}

static void h_query_range(pd_api *api, const pd_http_request *req, pd_http_response *resp)
{
    const char *q = pd_http_arg(req, "query");
    if (!q || !*q) {
        pd__api_reply_error(
            resp, 400,
            "invalid parameter \"query\": missing (a series selector, e.g. heap{job=\"api\"})");
        return;
    }
    int64_t to, from;
    if (pd__api_time_param(req, resp, "to", "end", pd_now_ms(), &to) < 0 ||
        pd__api_time_param(req, resp, "from", "start", to - RANGE_DEFAULT_MS, &from) < 0)
        return;
    if (to < from) {
        pd__api_reply_error(
            resp, 400, "invalid parameter \"to\": end timestamp must not be before start time");
        return;
    }
    if (pd__api_check_selector(resp, "query", q) < 0)
        return;
    int delta = delta_param(req, resp, 1);
    if (delta < 0)
        return;
    pd_err err = {{0}};
    int rc = pd__api_begin_success(resp);
    if (rc == 0)
        rc = pd_query_range_ex(api->st, q, from, to, delta == 1, &resp->body, &err);
    pd__api_finish_query(resp, rc, &err, "query_range");
}

/* ---- /api/v1/query: merge, diff, and single with options ---- */

/* True when a query needs the merge path: mode merge/diff, by/focus/ignore/
 * hide given, or a report only that path writes. */
static bool wants_many(const pd_http_request *req)
{
    const char *mode = pd__api_arg_any(req, "mode", NULL),
               *report = pd__api_arg_any(req, "report", NULL);
    return (mode && strcmp(mode, "single") != 0) || pd_http_arg(req, "by") ||
           pd__api_arg_any(req, "focus", NULL) || pd__api_arg_any(req, "ignore", NULL) ||
           pd__api_arg_any(req, "hide", NULL) || pd__api_arg_any(req, "span_id", NULL) ||
           (report && (!strcmp(report, "folded") || !strcmp(report, "callgraph")));
}

/* pd_merge_options.cancelled: the client hung up or profd stops (ctx: the
 * request's token, base/cancel.h). */
static bool client_gone(void *ctx)
{
    return pd_cancel_check(ctx);
}

/* Reads one side's parameters: `query<sfx>` (else `query`), `mode<sfx>`,
 * `time<sfx>`, `from<sfx>`, `to<sfx>`. Returns 0, or -1 after replying 400. */
static int side_params(const pd_http_request *req, pd_http_response *resp, const char *sfx,
                       const char *mode, pd_query_side *s, const char **ex /* [MAX_MATCH_PARAMS] */)
{
    char qn[16], mn[16], tn[16], fn[16], ton[16];
    snprintf(qn, sizeof qn, "query%s", sfx);
    snprintf(mn, sizeof mn, "mode%s", sfx);
    snprintf(tn, sizeof tn, "time%s", sfx);
    snprintf(fn, sizeof fn, "from%s", sfx);
    snprintf(ton, sizeof ton, "to%s", sfx);
    memset(s, 0, sizeof *s);
    s->selector = pd__api_arg_any(req, qn, *sfx ? "query" : NULL);
    if (!s->selector) {
        pd__api_reply_error(
            resp, 400,
            "invalid parameter \"%s\": missing (a series selector, e.g. heap{job=\"api\"})", qn);
        return -1;
    }
    if (pd__api_check_selector(resp, qn, s->selector) < 0)
        return -1;
    if (*sfx) {
        mode = pd__api_arg_any(req, mn, NULL);
        if (!mode)
            mode = "single";
        if (strcmp(mode, "single") && strcmp(mode, "merge")) {
            pd__api_reply_error(
                resp, 400, "invalid parameter \"%s\": \"%.64s\" is not single or merge", mn, mode);
            return -1;
        }
    }
    s->mode = strcmp(mode, "merge") == 0 ? PD_QUERY_MODE_MERGE : PD_QUERY_MODE_SINGLE;
    /* exclude= (and exclude_a=/exclude_b= for one side of a diff): series
       left out of a merge, e.g. the UI's hidden legend entries */
    char xn[16];
    snprintf(xn, sizeof xn, "exclude%s", sfx);
    size_t nx = pd_http_args(req, xn, ex, MAX_MATCH_PARAMS);
    if (*sfx && nx == 0)
        nx = pd_http_args(req, "exclude", ex, MAX_MATCH_PARAMS);
    if (nx > MAX_MATCH_PARAMS) {
        pd__api_reply_error(resp, 400, "invalid parameter \"%s\": more than %d selectors", xn,
                            MAX_MATCH_PARAMS);
        return -1;
    }
    for (size_t i = 0; i < nx; i++)
        if (pd__api_check_selector(resp, xn, ex[i]) < 0)
            return -1;
    s->exclude = ex;
    s->n_exclude = nx;
    int64_t now = pd_now_ms();
    if (s->mode == PD_QUERY_MODE_SINGLE)
        return pd__api_time_param(req, resp, tn, NULL, now, &s->time);
    if (pd__api_time_param(req, resp, ton, *sfx ? NULL : "end", now, &s->to) < 0 ||
        pd__api_time_param(req, resp, fn, *sfx ? NULL : "start", s->to - RANGE_DEFAULT_MS,
                           &s->from) < 0)
        return -1;
    if (s->to < s->from) {
        pd__api_reply_error(resp, 400,
                            "invalid parameter \"%s\": end timestamp must not be before start time",
                            ton);
        return -1;
    }
    return 0;
}

/* report=callgraph: pprof's -svg idea: the DOT of pd_report_dot rendered by
 * Graphviz (`dot -Tsvg`, run on a temp file; stdout read up to the reply
 * cap). 0, or a negative code after replying. */
static int render_callgraph(const pd_profile *p, const pd_report_options *o, pd_http_response *resp)
{
    pd_buf dot;
    pd_buf_init(&dot, resp->body.max);
    int rc = pd_report_dot(p, o, &dot);
    if (rc < 0) {
        pd_buf_release(&dot);
        pd__api_reply_error(resp, pd__api_status_of(rc), "callgraph: %s", pd_strerror(rc));
        return rc;
    }
    char path[] = "/tmp/profd-callgraph-XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0) {
        pd_buf_release(&dot);
        pd__api_reply_error(resp, 500, "callgraph: cannot make a temp file");
        return PD_EINVAL;
    }
    size_t off = 0;
    while (off < dot.len) {
        ssize_t w = write(fd, dot.data + off, dot.len - off);
        if (w <= 0)
            break;
        off += (size_t)w;
    }
    close(fd);
    bool written = off == dot.len;
    pd_buf_release(&dot);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "dot -Tsvg %s 2>/dev/null", path);
    FILE *f = written ? popen(cmd, "r") : NULL;
    rc = 0;
    if (f) {
        char tmp[65536];
        size_t r;
        while ((r = fread(tmp, 1, sizeof tmp, f)) > 0 && rc == 0)
            rc = pd_buf_append(&resp->body, tmp, r);
        int st = pclose(f);
        if (rc == 0 && (st != 0 || resp->body.len == 0))
            rc = PD_EINVAL;
    }
    unlink(path);
    if (!f || rc < 0) {
        pd__api_reply_error(resp, rc == PD_ETOOBIG ? 422 : 500, "callgraph: %s",
                            rc == PD_ETOOBIG
                                ? "over the reply size limit"
                                : "Graphviz `dot -Tsvg` failed (is graphviz installed?)");
        return rc < 0 ? rc : PD_EINVAL;
    }
    resp->content_type = "image/svg+xml";
    return 0;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* The span_id parameter (traces to profiles): a comma-separated list of
 * span ids, 16 hex digits each (storage.h, pd_storage_sample_filter), into
 * *ids (malloc'ed, sorted, unique; NULL with *n = 0 when absent). 0, or
 * replies 400 naming the bad id. */
static int span_param(const pd_http_request *req, pd_http_response *resp, uint64_t **ids, size_t *n)
{
    *ids = NULL;
    *n = 0;
    const char *v = pd__api_arg_any(req, "span_id", NULL);
    if (!v)
        return 0;
    size_t cap = 1;
    for (const char *p = v; *p; p++)
        cap += *p == ',';
    if (!(*ids = malloc(cap * sizeof **ids))) {
        pd__api_reply_error(resp, 500, "out of memory");
        return -1;
    }
    for (const char *p = v;;) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (!pd_storage_span_id_parse(p, len, &(*ids)[*n])) {
            pd_metrics_add("profd_rejected_input_total", "reason=\"query_bad_param\"", 1);
            pd__api_reply_error(resp, 400,
                                "invalid parameter \"span_id\": \"%.*s\" is not a span id (16 hex "
                                "digits; several: comma-separated)",
                                (int)(len < 64 ? len : 64), p);
            free(*ids);
            *ids = NULL;
            *n = 0;
            return -1;
        }
        (*n)++;
        if (!e)
            break;
        p = e + 1;
    }
    qsort(*ids, *n, sizeof **ids, cmp_u64);
    size_t k = 0;
    for (size_t i = 0; i < *n; i++)
        if (!k || (*ids)[i] != (*ids)[k - 1])
            (*ids)[k++] = (*ids)[i];
    *n = k;
    return 0;
}

int pd__api_query_profile(pd_api *api, const pd_http_request *req, pd_http_response *resp,
                          bool allow_diff, pd_profile *p, pd_merge_stats *stats, bool *diff_out)
{
    memset(p, 0, sizeof *p);
    memset(stats, 0, sizeof *stats);
    const char *mode = pd__api_arg_any(req, "mode", NULL);
    if (!mode)
        mode = "single";
    bool diff = strcmp(mode, "diff") == 0;
    if ((diff && !allow_diff) || (!diff && strcmp(mode, "single") && strcmp(mode, "merge"))) {
        pd_metrics_add("profd_rejected_input_total", "reason=\"query_bad_param\"", 1);
        pd__api_reply_error(resp, 400,
                            "invalid parameter \"mode\": \"%.64s\" is not one of single, merge%s",
                            mode, allow_diff ? ", diff" : "");
        return -1;
    }
    *diff_out = diff;
    pd_query_side a, b;
    const char *exa[MAX_MATCH_PARAMS], *exb[MAX_MATCH_PARAMS];
    if (diff) {
        if (side_params(req, resp, "_a", NULL, &a, exa) < 0 ||
            side_params(req, resp, "_b", NULL, &b, exb) < 0)
            return -1;
    } else if (side_params(req, resp, "", mode, &b, exb) < 0) {
        return -1;
    }
    pd_merge_options mo = {
        .by = pd_http_arg(req, "by"),
        .focus = pd__api_arg_any(req, "focus", NULL),
        .ignore = pd__api_arg_any(req, "ignore", NULL),
        .hide = pd__api_arg_any(req, "hide", NULL),
        .max_samples = api->o.query_max_samples,
        .timeout_ms = api->o.query_timeout_ms,
        .deadline_ns = pd_mono_ns() + api->o.query_timeout_ms * 1000000,
        .cancelled = client_gone,
        .cancel_ctx = pd_cancel_current(),
    };
    const char *agg = pd_http_arg(req, "agg"), *norm = pd_http_arg(req, "normalize");
    if (agg && strcmp(agg, "sum") && strcmp(agg, "avg")) {
        pd_metrics_add("profd_rejected_input_total", "reason=\"query_bad_param\"", 1);
        pd__api_reply_error(resp, 400, "invalid parameter \"agg\": \"%.64s\" (sum or avg)", agg);
        return -1;
    }
    if (norm && strcmp(norm, "true") && strcmp(norm, "false") && strcmp(norm, "1") &&
        strcmp(norm, "0")) {
        pd_metrics_add("profd_rejected_input_total", "reason=\"query_bad_param\"", 1);
        pd__api_reply_error(resp, 400, "invalid parameter \"normalize\": \"%.64s\" (true or false)",
                            norm);
        return -1;
    }
    mo.agg = agg && !strcmp(agg, "avg") ? PD_MERGE_AVG : PD_MERGE_SUM;
    int delta = delta_param(req, resp, -1);
    if (delta == -2)
        return -1;
    mo.delta = delta < 0 ? PD_DELTA_AUTO : delta ? PD_DELTA_ON : PD_DELTA_RAW;
    mo.sample_type = pd__api_arg_any(req, "sample_index", NULL);
    mo.normalize = norm && (!strcmp(norm, "true") || !strcmp(norm, "1"));
    uint64_t *span_ids;
    size_t n_span;
    if (span_param(req, resp, &span_ids, &n_span) < 0)
        return -1;
    pd_storage_sample_filter sf = {.span_ids = span_ids, .n_span_ids = n_span};
    if (span_ids)
        mo.sample_filter = &sf;
    pd_err err = {{0}};
    int rc = diff ? pd_query_diff(api->st, &a, &b, &mo, p, stats, &err)
                  : pd_query_merge(api->st, &b, &mo, p, stats, &err);
    free(span_ids);
    if (rc < 0) {
        pd__api_reply_error(resp, pd__api_status_of(rc), "%s",
                            err.msg[0] ? err.msg : pd_strerror(rc));
        return -1;
    }
    return 0;
}

static void h_query_many(pd_api *api, const pd_http_request *req, pd_http_response *resp)
{
    const char *report = pd__api_arg_any(req, "report", NULL);
    if (!report)
        report = "proto";
    static const char *const reports[] = {"proto", "top",       "flamegraph", "folded",
                                          "meta",  "callgraph", "view",       "flamebearer"};
    bool known = false;
    for (size_t i = 0; i < sizeof reports / sizeof *reports; i++)
        known = known || strcmp(report, reports[i]) == 0;
    if (!known) {
        pd__api_reply_error(resp, 400,
                            "invalid parameter \"report\": \"%.64s\" is not one of proto, top, "
                            "flamegraph, folded, meta, callgraph, view, flamebearer",
                            report);
        return;
    }
    size_t nodes;
    size_t def_nodes = !strcmp(report, "top") || !strcmp(report, "view") ? api->o.top_default_rows
                       : !strcmp(report, "callgraph")                    ? 80
                                                                         : 0;
    size_t fg_nodes = 0;
    if (pd__api_uint_param(req, resp, "nodes", "limit", def_nodes, &nodes) < 0 ||
        pd__api_uint_param(req, resp, "fg_nodes", NULL, 0, &fg_nodes) < 0)
        return;
    pd_profile p;
    pd_merge_stats stats;
    bool diff = false;
    if (pd__api_query_profile(api, req, resp, true, &p, &stats, &diff) < 0)
        return;
    const char *mode = pd__api_arg_any(req, "mode", NULL);
    if (!mode)
        mode = "single";
    int rc;
    pd_err err = {{0}};
    char num[32];
    snprintf(num, sizeof num, "%zu", stats.profiles);
    pd_http_add_header(resp, "X-Profd-Profiles", num);
    snprintf(num, sizeof num, "%zu", stats.series);
    pd_http_add_header(resp, "X-Profd-Series-Count", num);
    pd_http_add_header(resp, "X-Profd-Delta", stats.delta ? "true" : "false");

    size_t si = 0;
    const char *sis = pd__api_arg_any(req, "sample_index", NULL);
    if (strcmp(report, "meta") != 0 && (rc = pd_profile_sample_index(&p, sis, &si, &err)) < 0) {
        pd__api_reply_error(resp, 400, "invalid parameter \"sample_index\": %s", err.msg);
        goto out;
    }
    pd_report_options ro = {.sample_index = si, .max_nodes = nodes, .diff = diff};
    if ((!strcmp(report, "top") || !strcmp(report, "view")) && top_params(req, resp, &ro) < 0)
        goto out;
    if (strcmp(report, "proto") == 0) {
        if (sis && si < p.n_sample_type)
            p.default_sample_type = p.sample_type[si].type;
        resp->content_type = "application/octet-stream";
        char disp[128];
        snprintf(disp, sizeof disp, "attachment; filename=\"%s-%" PRId64 ".pb.gz\"", mode,
                 pd_now_ms());
        pd_http_add_header(resp, "Content-Disposition", disp);
        rc = pd_profile_encode(&p, true, &resp->body);
        if (rc < 0)
            pd__api_reply_error(resp, rc == PD_ETOOBIG ? 422 : 500, "encoding the profile: %s",
                                rc == PD_ETOOBIG ? "over the reply size limit" : pd_strerror(rc));
        goto out;
    }
    if (strcmp(report, "folded") == 0) {
        resp->content_type = TEXT_CT;
        rc = pd_report_folded(&p, &ro, &resp->body);
        if (rc < 0)
            pd__api_reply_error(resp, pd__api_status_of(rc), "folded: %s",
                                rc == PD_ETOOBIG ? "over the reply size limit" : pd_strerror(rc));
        goto out;
    }
    if (strcmp(report, "callgraph") == 0) {
        render_callgraph(&p, &ro, resp);
        goto out;
    }
    if (strcmp(report, "flamebearer") == 0) {
        const char *sel = pd__api_arg_any(req, diff ? "query_b" : "query", diff ? "query" : NULL);
        put_flamebearer(&p, &ro, sel, resp);
        goto out;
    }
    rc = pd__api_begin_success(resp);
    if (rc == 0) {
        if (strcmp(report, "top") == 0)
            rc = pd_report_top_ex(&p, &ro, &resp->body);
        else if (strcmp(report, "flamegraph") == 0)
            rc = pd_report_flamegraph_ex(&p, &ro, &resp->body);
        else if (strcmp(report, "view") == 0)
            rc = put_view(&p, &ro, fg_nodes, &resp->body);
        else
            rc = pd_report_meta(&p, &resp->body);
    }
    pd_err_clear(&err);
    pd__api_finish_query(resp, rc, &err, report);
out:
    pd_profile_release(&p);
}

static void h_query(pd_api *api, const pd_http_request *req, pd_http_response *resp)
{
    if (wants_many(req)) {
        h_query_many(api, req, resp);
        return;
    }
    const char *q = pd_http_arg(req, "query");
    if (!q || !*q) {
        pd__api_reply_error(
            resp, 400,
            "invalid parameter \"query\": missing (a series selector, e.g. heap{job=\"api\"})");
        return;
    }
    const char *report = pd__api_arg_any(req, "report", NULL);
    if (!report)
        report = "proto";
    if (strcmp(report, "proto") && strcmp(report, "top") && strcmp(report, "flamegraph") &&
        strcmp(report, "meta") && strcmp(report, "view") && strcmp(report, "flamebearer")) {
        pd__api_reply_error(resp, 400,
                            "invalid parameter \"report\": \"%.64s\" is not one of proto, top, "
                            "flamegraph, meta, view, flamebearer",
                            report);
        return;
    }
    int64_t t;
    size_t limit; /* top, view: rows (default 100); flamegraph: nodes (default all) */
    size_t fg_nodes = 0;
    if (pd__api_time_param(req, resp, "time", NULL, pd_now_ms(), &t) < 0 ||
        pd__api_uint_param(
            req, resp, "limit", "nodes",
            !strcmp(report, "top") || !strcmp(report, "view") ? api->o.top_default_rows : 0,
            &limit) < 0 ||
        pd__api_uint_param(req, resp, "fg_nodes", NULL, 0, &fg_nodes) < 0)
        return;
    if (pd__api_check_selector(resp, "query", q) < 0)
        return;

    pd_profile p;
    memset(&p, 0, sizeof p);
    pd_labels ls;
    pd_labels_init(&ls);
    int64_t ts = 0;
    pd_err err = {{0}};
    int rc = pd_query_single(api->st, q, t, &p, &ls, &ts, &err);
    if (rc < 0) {
        pd__api_reply_error(resp, pd__api_status_of(rc), "%s",
                            err.msg[0] ? err.msg : pd_strerror(rc));
        return;
    }
    pd_buf sel;
    pd_buf_init(&sel, 4096);
    char tsbuf[32];
    if (pd_labels_format(&ls, &sel) == 0 && sel.data) {
        /* header values cannot hold CR/LF: a label value could */
        for (char *c = sel.data; *c; c++)
            if (*c == '\r' || *c == '\n')
                *c = ' ';
        pd_http_add_header(resp, "X-Profd-Series", sel.data);
    }
    snprintf(tsbuf, sizeof tsbuf, "%" PRId64, ts);
    pd_http_add_header(resp, "X-Profd-Timestamp", tsbuf);

    size_t si = 0;
    const char *sis = pd__api_arg_any(req, "sample_index", NULL);
    if (strcmp(report, "meta") != 0 && (rc = pd_profile_sample_index(&p, sis, &si, &err)) < 0) {
        pd__api_reply_error(resp, 400, "invalid parameter \"sample_index\": %s", err.msg);
        goto out;
    }
    if (strcmp(report, "proto") == 0) {
        if (sis && si < p.n_sample_type)
            p.default_sample_type = p.sample_type[si].type;
        resp->content_type = "application/octet-stream";
        char name[128], disp[200];
        const char *type = pd_labels_get(&ls, "__name__");
        snprintf(name, sizeof name, "%.64s-%" PRId64 ".pb.gz", type ? type : "profile", ts);
        for (char *c = name; *c; c++)
            if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') ||
                  (*c >= '0' && *c <= '9') || *c == '.' || *c == '-' || *c == '_'))
                *c = '_';
        snprintf(disp, sizeof disp, "attachment; filename=\"%s\"", name);
        pd_http_add_header(resp, "Content-Disposition", disp);
        rc = pd_profile_encode(&p, true, &resp->body);
        if (rc < 0)
            pd__api_reply_error(resp, rc == PD_ETOOBIG ? 422 : 500, "encoding the profile: %s",
                                rc == PD_ETOOBIG ? "over the reply size limit" : pd_strerror(rc));
        goto out;
    }
    pd_report_options ro = {.sample_index = si, .max_nodes = limit};
    if ((!strcmp(report, "top") || !strcmp(report, "view")) && top_params(req, resp, &ro) < 0)
        goto out;
    if (strcmp(report, "flamebearer") == 0) {
        put_flamebearer(&p, &ro, pd_labels_get(&ls, "__name__"), resp);
        goto out;
    }
    rc = pd__api_begin_success(resp);
    if (rc == 0) {
        if (strcmp(report, "top") == 0)
            rc = pd_report_top_ex(&p, &ro, &resp->body);
        else if (strcmp(report, "flamegraph") == 0) /* honours nodes= (issue 12) */
            rc = pd_report_flamegraph_ex(&p, &ro, &resp->body);
        else if (strcmp(report, "view") == 0)
            rc = put_view(&p, &ro, fg_nodes, &resp->body);
        else
            rc = pd_report_meta(&p, &resp->body);
    }
    pd_err_clear(&err);
    pd__api_finish_query(resp, rc, &err, report);
out:
    pd_buf_release(&sel);
    pd_labels_release(&ls);
    pd_profile_release(&p);
}

/* Reads match[], start, end. Returns n selectors (>= 0) or -1 (replied). */
static int series_params(const pd_http_request *req, pd_http_response *resp,
                         const char **sel /* [MAX_MATCH_PARAMS] */, int64_t *start, int64_t *end)
{
    size_t n = pd_http_args(req, "match[]", sel, MAX_MATCH_PARAMS);
    if (n > MAX_MATCH_PARAMS) {
        pd__api_reply_error(resp, 400, "invalid parameter \"match[]\": more than %d selectors",
                            MAX_MATCH_PARAMS);
        return -1;
    }
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (!*sel[i])
            continue; /* an empty match[] is no filter */
        if (pd__api_check_selector(resp, "match[]", sel[i]) < 0)
            return -1;
        sel[k++] = sel[i];
    }
    if (pd__api_time_param(req, resp, "start", NULL, INT64_MIN, start) < 0 ||
        pd__api_time_param(req, resp, "end", NULL, INT64_MAX, end) < 0)
        return -1;
    if (*end < *start) {
        pd__api_reply_error(
            resp, 400, "invalid parameter \"end\": end timestamp must not be before start time");
        return -1;
    }
    return (int)k;
}

/* What h_series lists. */
typedef enum { LIST_SERIES, LIST_LABEL_NAMES, LIST_LABEL_VALUES, LIST_PROFILE_TYPES } list_kind;

static void h_series(pd_api *api, const pd_http_request *req, pd_http_response *resp,
                     list_kind kind, const char *label /* LIST_LABEL_VALUES: the label */)
{
    const char *sel[MAX_MATCH_PARAMS];
    int64_t start, end;
    int n = series_params(req, resp, sel, &start, &end);
    if (n < 0)
        return;
    pd_err err = {{0}};
    int rc = pd__api_begin_success(resp);
    if (rc == 0) {
        if (kind == LIST_SERIES)
            rc = pd_query_series(api->st, sel, (size_t)n, start, end, &resp->body, &err);
        else if (kind == LIST_LABEL_NAMES)
            rc = pd_query_label_names(api->st, sel, (size_t)n, start, end, &resp->body, &err);
        else if (kind == LIST_PROFILE_TYPES)
            rc = pd_query_profile_types(api->st, sel, (size_t)n, start, end, &resp->body, &err);
        else
            rc = pd_query_label_values(api->st, label, sel, (size_t)n, start, end, &resp->body,
                                       &err);
    }
    pd__api_finish_query(resp, rc, &err, kind == LIST_SERIES ? "series" : "labels");
}

static void h_targets(pd_api *api, const pd_http_request *req, pd_http_response *resp)
{
    int rc = pd__api_begin_success(resp);
    if (rc == 0) {
        if (api->sm)
            rc = pd_scrape_manager_targets_json(api->sm, pd_http_arg(req, "state"),
                                                pd_http_arg(req, "scrapePool"), &resp->body);
        else
            rc = pd_buf_puts(&resp->body, "{\"activeTargets\":[],\"droppedTargets\":[],"
                                          "\"droppedTargetCounts\":{}}");
    }
    pd_err err = {{0}};
    pd__api_finish_query(resp, rc, &err, "targets");
}

/* ---- /metrics ---- */

static void process_metrics(pd_api *api)
{
    long tck = sysconf(_SC_CLK_TCK), page = sysconf(_SC_PAGESIZE);
    char buf[2048];
    FILE *f = fopen("/proc/self/stat", "r");
    if (f) {
        size_t n = fread(buf, 1, sizeof buf - 1, f);
        fclose(f);
        buf[n] = 0;
        char *rp = strrchr(buf, ')'); /* comm may hold spaces and parens */
        unsigned long long ut = 0, stt = 0, start = 0, vsize = 0;
        /* after ")": state(3) ... utime(14) stime(15) ... starttime(22) vsize(23) */
        if (rp && tck > 0 &&
            sscanf(rp + 1,
                   " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu %*d %*d %*d %*d %*d %*d "
                   "%llu %llu",
                   &ut, &stt, &start, &vsize) == 4) {
            pd_metrics_set("process_cpu_seconds_total", NULL, (double)(ut + stt) / (double)tck);
            pd_metrics_set("process_virtual_memory_bytes", NULL, (double)vsize);
            double btime = 0;
            FILE *sf = fopen("/proc/stat", "r");
            if (sf) {
                char line[256];
                while (fgets(line, sizeof line, sf))
                    if (strncmp(line, "btime ", 6) == 0) {
                        btime = strtod(line + 6, NULL);
                        break;
                    }
                fclose(sf);
            }
            pd_metrics_set("process_start_time_seconds", NULL,
                           btime > 0 ? btime + (double)start / (double)tck : api->start_time_s);
        }
    }
    f = fopen("/proc/self/statm", "r");
    if (f) {
        unsigned long long size = 0, rss = 0;
        if (fscanf(f, "%llu %llu", &size, &rss) == 2 && page > 0)
            pd_metrics_set("process_resident_memory_bytes", NULL, (double)rss * (double)page);
        fclose(f);
    }
    DIR *d = opendir("/proc/self/fd");
    if (d) {
        double n = 0;
        struct dirent *e;
        while ((e = readdir(d)))
            if (e->d_name[0] != '.')
                n++;
        closedir(d);
        pd_metrics_set("process_open_fds", NULL, n - 1); /* minus the opendir fd */
    }
    if (!__atomic_load_n(&api->ready, __ATOMIC_ACQUIRE))
        return; /* the store is being opened: no storage series yet */
    pd_storage_stats ss;
    memset(&ss, 0, sizeof ss);
    pd_storage_stats_get(api->st, &ss);
    pd_metrics_set("profd_storage_series", NULL, (double)ss.n_series);
    pd_metrics_set("profd_storage_profiles", NULL, (double)ss.n_profiles);
    pd_metrics_set("profd_storage_bytes", NULL, (double)ss.bytes_on_disk);
    pd_metrics_set("profd_storage_blocks", NULL, (double)ss.n_blocks); /* fresh at each scrape */
    pd_metrics_set("profd_storage_min_time_seconds", NULL, (double)ss.min_ts / 1000.0);
    pd_metrics_set("profd_storage_max_time_seconds", NULL, (double)ss.max_ts / 1000.0);
}

static void h_metrics(pd_api *api, pd_http_response *resp)
{
    process_metrics(api);
    resp->content_type = "text/plain; version=0.0.4; charset=utf-8";
    int rc = pd_metrics_write(&resp->body);
    if (rc < 0)
        pd__api_reply_text(resp, 500, "cannot write metrics\n");
}

/* ---- routing ---- */

static bool method_is(const pd_http_request *req, const char *m)
{
    return strcmp(req->method, m) == 0;
}
/* ---- issue 17: profd's own /debug/pprof (libprofd-agent) ---- */

static const char *h_debug_pprof(const pd_http_request *req, pd_http_response *resp,
                                 const char *path)
{
    pd_err err = {{0}};
    int rc;
    const char *handler;
    if (strcmp(req->method, "GET") != 0 && strcmp(req->method, "HEAD") != 0) {
        pd__api_reply_text(resp, 405, "method not allowed: use GET\n");
        return "/debug/pprof";
    }
    if (strcmp(path, "/debug/pprof/profile") == 0) {
        handler = "/debug/pprof/profile";
        unsigned secs = 30;
        const char *s = pd_http_arg(req, "seconds");
        if (s) {
            char *end;
            errno = 0;
            unsigned long v = strtoul(s, &end, 10);
            if (!*s || *end || errno || v < 1 || v > PD_AGENT_MAX_SECONDS) {
                char msg[200];
                snprintf(msg, sizeof msg, "bad seconds=%.40s: want an integer from 1 to %d\n", s,
                         PD_AGENT_MAX_SECONDS);
                pd_metrics_add("profd_rejected_input_total", "reason=\"pprof_bad_seconds\"", 1);
                pd__api_reply_text(resp, 400, msg);
                return handler;
            }
            secs = (unsigned)v;
        }
        rc = pd_agent_cpu_profile(secs, 0, NULL, &resp->body, &err);
    } else if (strcmp(path, "/debug/pprof/heap") == 0 || strcmp(path, "/debug/pprof/allocs") == 0) {
        handler = "/debug/pprof/heap";
        rc = pd_agent_heap_profile(&resp->body, &err);
    } else {
        pd__api_reply_text(resp, 404, "404 page not found\n");
        return "/debug/pprof";
    }
    if (rc < 0) {
        char msg[600];
        pd_buf_reset(&resp->body);
        snprintf(msg, sizeof msg, "%s\n", err.msg[0] ? err.msg : pd_strerror(rc));
        pd__api_reply_text(resp, 500, msg);
    } else {
        resp->content_type = "application/octet-stream";
        pd_http_add_header(resp, "Content-Disposition", "attachment; filename=\"profile\"");
    }
    return handler;
}

static bool is_get(const pd_http_request *req)
{
    return method_is(req, "GET") || method_is(req, "HEAD");
}

static void bad_method(pd_http_response *resp, const char *allow, bool json)
{
    pd_http_add_header(resp, "Allow", allow);
    if (json)
        pd__api_reply_error(resp, 405, "method not allowed; use %s", allow);
    else
        pd__api_reply_text(resp, 405, "method not allowed\n");
}

/* Hex digit value or -1. */
static int hexdig(char c)
{
    return c >= '0' && c <= '9'   ? c - '0'
           : c >= 'a' && c <= 'f' ? c - 'a' + 10
           : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                  : -1;
}

/* The label name of /api/v1/label/<name>/values as Prometheus 3 reads it:
 * %XX escapes decoded, then a name starting "U__" unescaped per Prometheus'
 * value-encoding escaping ("__" is '_', "_HEX_" is that code point, as
 * `U__otel_2e_scope_2e_name`). Into out (cap bytes, NUL-terminated).
 * 0, or -1 when an escape is malformed or the result does not fit. */
static int label_name_from_path(const char *s, size_t n, char *out, size_t cap)
{
    char tmp[3 * PD_LABEL_MAX_NAME + 1];
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        if (m + 1 >= sizeof tmp)
            return -1;
        if (s[i] == '%') {
            int a = i + 2 < n ? hexdig(s[i + 1]) : -1, b = i + 2 < n ? hexdig(s[i + 2]) : -1;
            if (a < 0 || b < 0 || (a == 0 && b == 0))
                return -1;
            tmp[m++] = (char)(a * 16 + b);
            i += 2;
        } else {
            tmp[m++] = s[i];
        }
    }
    tmp[m] = 0;
    if (strncmp(tmp, "U__", 3) != 0) {
        if (m + 1 > cap)
            return -1;
        memcpy(out, tmp, m + 1);
        return 0;
    }
    size_t o = 0;
    for (size_t i = 3; i < m;) {
        if (o + 5 >= cap)
            return -1;
        if (tmp[i] != '_') {
            out[o++] = tmp[i++];
            continue;
        }
        if (i + 1 < m && tmp[i + 1] == '_') {
            out[o++] = '_';
            i += 2;
            continue;
        }
        uint32_t cp = 0;
        size_t j = i + 1;
        while (j < m && tmp[j] != '_' && j - i <= 6) {
            int d = hexdig(tmp[j]);
            if (d < 0)
                return -1;
            cp = cp * 16 + (uint32_t)d;
            j++;
        }
        if (j >= m || tmp[j] != '_' || j == i + 1 || cp == 0 || cp > 0x10FFFF ||
            (cp >= 0xD800 && cp <= 0xDFFF))
            return -1;
        if (cp < 0x80) {
            out[o++] = (char)cp;
        } else if (cp < 0x800) {
            out[o++] = (char)(0xC0 | (cp >> 6));
            out[o++] = (char)(0x80 | (cp & 0x3F));
        } else if (cp < 0x10000) {
            out[o++] = (char)(0xE0 | (cp >> 12));
            out[o++] = (char)(0x80 | ((cp >> 6) & 0x3F));
            out[o++] = (char)(0x80 | (cp & 0x3F));
        } else {
            out[o++] = (char)(0xF0 | (cp >> 18));
            out[o++] = (char)(0x80 | ((cp >> 12) & 0x3F));
            out[o++] = (char)(0x80 | ((cp >> 6) & 0x3F));
            out[o++] = (char)(0x80 | (cp & 0x3F));
        }
        i = j + 1;
    }
    out[o] = 0;
    return 0;
}

/* Routes one request; returns the handler name used for metrics. */
/* /metrics and the UI's assets, served whether the store is open or not:
 * the handler's name, or NULL when path is neither. */
static const char *route_metrics_or_asset(pd_api *api, const pd_http_request *req,
                                          pd_http_response *resp)
{
    if (strcmp(req->path, "/metrics") == 0) {
        if (!is_get(req))
            bad_method(resp, "GET", false);
        else
            h_metrics(api, resp);
        return "/metrics";
    }
    const pd_ui_asset *a = is_get(req) ? pd_ui_find(req->path) : NULL;
    if (!a)
        return NULL;
    pd__api_serve_asset(req, resp, a);
    return "ui";
}

/* The routes while the store is being opened (pd_api_new with st NULL):
 * health, readiness, metrics and the UI's assets; everything else 503. */
static const char *route_starting(pd_api *api, const pd_http_request *req, pd_http_response *resp)
{
    const char *path = req->path, *h;
    if (strcmp(path, "/-/healthy") == 0 || strcmp(path, "/-/ready") == 0) {
        if (!is_get(req))
            bad_method(resp, "GET", false);
        else if (strcmp(path, "/-/healthy") == 0)
            pd__api_reply_text(resp, 200, "profd is Healthy.\n");
        else
            pd__api_reply_text(resp, 503,
                               "profd is not ready: opening the storage (WAL replay).\n");
        return path;
    }
    /* issue 17: profd profiles itself (libprofd-agent), also while the WAL replays */
    if (strncmp(path, "/debug/pprof/", 13) == 0 && api->o.enable_pprof)
        return h_debug_pprof(req, resp, path);
    if ((h = route_metrics_or_asset(api, req, resp)))
        return h;
    if (strncmp(path, "/querier.v1.", 12) == 0 || strncmp(path, "/push.v1.", 9) == 0)
        pd_connect_error(resp, PD_CONNECT_UNAVAILABLE,
                         "profd is starting: the storage is being opened (WAL replay)");
    else if (strncmp(path, "/api/", 5) == 0)
        pd__api_reply_error(resp, 503,
                            "profd is starting: the storage is being opened (WAL replay); "
                            "try again when /-/ready answers 200");
    else
        pd__api_reply_text(
            resp, 503,
            "profd is starting: the storage is being opened (WAL replay); try again when "
            "/-/ready answers 200\n");
    return "starting";
}

/* POST /api/v1/debuginfo/{build_id}: the body is an ELF file (a .debug file
 * or an unstripped binary) whose GNU build ID is build_id; stored for the
 * symbolizer (symbolize/symbolize.h) under <storage.path>/debuginfo, where
 * it names the address-only frames of every answer from then on, old
 * profiles' too. 200 {"build_id","bytes"}; 400 bad build ID / not ELF /
 * another build ID (counted as debuginfo_bad_file); 413 too large. */
static const char *h_debuginfo(const pd_http_request *req, pd_http_response *resp, const char *bid)
{
    const char *h = "/api/v1/debuginfo/:build_id";
    if (!method_is(req, "POST") && !method_is(req, "PUT")) {
        bad_method(resp, "POST, PUT", true);
        return h;
    }
    pd_symbolizer *sym = pd_symbolizer_global();
    if (!sym) {
        pd__api_reply_error(resp, 503, "symbolization is not available in this profd");
        return h;
    }
    if (!pd_elf_build_id_valid(bid)) {
        pd__api_count_rejected("debuginfo_bad_file");
        pd__api_reply_error(
            resp, 400,
            "bad build ID \"%.140s\" in the path: want an even number (2 to 128) of hex "
            "digits, e.g. b8b4927d225506efc8179ba514ad29366628bc8d",
            bid);
        return h;
    }
    pd_err err = {{0}};
    int rc = pd_symbolizer_store(sym, bid, req->body, req->body_len, &err);
    if (rc < 0) {
        if (rc == PD_EINVAL || rc == PD_ETOOBIG)
            pd__api_count_rejected(rc == PD_ETOOBIG ? "too_large" : "debuginfo_bad_file");
        pd__api_reply_error(resp,
                            rc == PD_EINVAL    ? 400
                            : rc == PD_ETOOBIG ? 413
                                               : 500,
                            "%s", err.msg);
        return h;
    }
    pd__api_begin_success(resp);
    pd_buf_puts(&resp->body, "{\"build_id\":");
    pd_buf_put_json_string(&resp->body, bid, strlen(bid));
    pd_buf_printf(&resp->body, ",\"bytes\":%zu}", req->body_len);
    pd__api_end_success(resp);
    return h;
}

static const char *route(pd_api *api, const pd_http_request *req, pd_http_response *resp)
{
    const char *path = req->path, *h;
    bool get_or_post = is_get(req) || method_is(req, "POST");
    if (!__atomic_load_n(&api->ready, __ATOMIC_ACQUIRE))
        return route_starting(api, req, resp);

    if (strncmp(path, "/api/v1/", 8) == 0) {
        const char *r = path + 8;
        if (!get_or_post) {
            bad_method(resp, "GET, POST", true);
            return "/api/v1";
        }
        if (strcmp(r, "query_range") == 0) {
            h_query_range(api, req, resp);
            return "/api/v1/query_range";
        }
        if (strcmp(r, "query") == 0) {
            h_query(api, req, resp);
            return "/api/v1/query";
        }
        if (strcmp(r, "series") == 0) {
            h_series(api, req, resp, LIST_SERIES, NULL);
            return "/api/v1/series";
        }
        if (strcmp(r, "labels") == 0) {
            h_series(api, req, resp, LIST_LABEL_NAMES, NULL);
            return "/api/v1/labels";
        }
        if (strcmp(r, "profile_types") == 0) { /* the UI's type picker */
            h_series(api, req, resp, LIST_PROFILE_TYPES, NULL);
            return "/api/v1/profile_types";
        }
        if (strncmp(r, "label/", 6) == 0) {
            const char *name = r + 6, *slash = strchr(name, '/');
            if (slash && strcmp(slash, "/values") == 0) {
                char lname[PD_LABEL_MAX_NAME + 1];
                size_t nl = (size_t)(slash - name);
                if (nl == 0 || nl > 3 * PD_LABEL_MAX_NAME) {
                    pd__api_reply_error(resp, 400, "invalid label name: %s",
                                        nl ? "too long" : "empty");
                    return "/api/v1/label/:name/values";
                }
                if (label_name_from_path(name, nl, lname, sizeof lname) < 0 ||
                    !pd_label_name_valid(lname)) {
                    pd__api_reply_error(
                        resp, 400,
                        "invalid label name \"%.*s\": not UTF-8, a control character, a "
                        "bad %%XX or U__ escape, or over %d bytes",
                        (int)(nl > 200 ? 200 : nl), name, PD_LABEL_MAX_NAME);
                    return "/api/v1/label/:name/values";
                }
                h_series(api, req, resp, LIST_LABEL_VALUES, lname);
                return "/api/v1/label/:name/values";
            }
        }
        if (strncmp(r, "debuginfo/", 10) == 0)
            return h_debuginfo(req, resp, r + 10);
        if (strcmp(r, "targets") == 0) {
            h_targets(api, req, resp);
            return "/api/v1/targets";
        }
        if (strcmp(r, "alerts") == 0) /* issue 18: capture on alert */
            return pd__api_alerts(api, req, resp);
        if (strcmp(r, "events") == 0)
            return pd__api_events(api, req, resp);
        if (strcmp(r, "rules") == 0) /* issue 30 */
            return pd__api_rules(api, req, resp);
        if (strcmp(r, "regressions") == 0)
            return pd__api_regressions(api, req, resp);
        if (strcmp(r, "source") == 0) /* issue 31 item 7: the source view */
            return pd__api_source(api, req, resp);
        if (strncmp(r, "status/", 7) == 0 && (h = pd__api_status_route(api, r + 7, resp)))
            return h;
        pd__api_reply_error(resp, 404, "unknown API endpoint %.200s", path);
        return "other";
    }
    if (strncmp(path, "/api/0/", 7) == 0) {
        pd__api_env env = {api->st, &api->o.limits, api->version, &api->build, api->series_cap};
        return pd__profefe_route(&env, req, resp);
    }
    if (strncmp(path, "/querier.v1.QuerierService/", 27) == 0 ||
        strncmp(path, "/pyroscope/render", 17) == 0) {
        pd__querier_env qenv = {api->st, &api->o.limits, api->o.query_timeout_ms,
                                api->o.query_max_samples};
        if (path[1] == 'q')
            return pd__querier_route(&qenv, req, resp);
        if (strcmp(path, "/pyroscope/render") == 0 || strcmp(path, "/pyroscope/render-diff") == 0)
            return pd__querier_render(&qenv, req, resp);
    }
    if (strcmp(path, "/push.v1.PusherService/Push") == 0) {
        pd__api_env env = {api->st, &api->o.limits, api->version, &api->build, api->series_cap};
        return pd__push_connect(&env, req, resp);
    }
    if (strcmp(path, "/ingest") == 0) {
        pd__api_env env = {api->st, &api->o.limits, api->version, &api->build, api->series_cap};
        return pd__pyroscope_ingest(&env, req, resp);
    }
    if (strcmp(path, "/v1development/profiles") == 0) {
        pd__api_env env = {api->st, &api->o.limits, api->version, &api->build, api->series_cap};
        return pd__otlp_profiles(&env, req, resp);
    }
    if (strcmp(path, "/-/healthy") == 0 || strcmp(path, "/-/ready") == 0) {
        if (!is_get(req))
            bad_method(resp, "GET", false);
        else if (strcmp(path, "/-/healthy") == 0)
            pd__api_reply_text(resp, 200, "profd is Healthy.\n");
        else if (!pd_storage_ready(api->st)) /* issue 35: no slow window after a restart */
            pd__api_reply_text(
                resp, 503,
                "profd is not ready: loading the head (profiles replayed from the WAL "
                "are being decomposed; profd_storage_head_wal_only_profiles).\n");
        else
            pd__api_reply_text(resp, 200, "profd is Ready.\n");
        return path;
    }
    if (strcmp(path, "/-/reload") == 0) {
        if (!method_is(req, "POST") && !method_is(req, "PUT")) {
            bad_method(resp, "POST, PUT", false);
        } else if (!api->o.enable_lifecycle) { /* issue 20 item 4, as Prometheus */
            pd_metrics_add("profd_http_rejected_total", "reason=\"lifecycle_disabled\"", 1);
            pd__api_reply_text(
                resp, 403,
                "Lifecycle API is not enabled: start profd with --web.enable-lifecycle "
                "to use /-/reload (SIGHUP reloads too)\n");
        } else if (!api->o.reload) {
            pd__api_reply_text(resp, 500, "reload is not available\n");
        } else {
            pd_err err = {{0}};
            int rc = api->o.reload(api->o.reload_ctx, &err);
            if (rc < 0) {
                char msg[700];
                snprintf(msg, sizeof msg, "failed to reload config: %s\n",
                         err.msg[0] ? err.msg : pd_strerror(rc));
                pd__api_reply_text(resp, 500, msg);
            } else {
                pd__api_reply_text(resp, 200, "");
            }
        }
        return "/-/reload";
    }
    if (strcmp(path, "/-/quit") == 0) { /* Prometheus' graceful shutdown */
        if (!method_is(req, "POST") && !method_is(req, "PUT")) {
            bad_method(resp, "POST, PUT", false);
        } else if (!api->o.enable_lifecycle) {
            pd_metrics_add("profd_http_rejected_total", "reason=\"lifecycle_disabled\"", 1);
            pd__api_reply_text(
                resp, 403,
                "Lifecycle API is not enabled: start profd with --web.enable-lifecycle "
                "to use /-/quit (SIGTERM shuts down too)\n");
        } else {
            /* the main thread sigwaits for SIGTERM (every thread blocks it) and
             * shuts down as for a signal: this reply is sent before the HTTP
             * server stops */
            pd__api_reply_text(resp, 200, "Requesting termination... Goodbye!\n");
            kill(getpid(), SIGTERM);
        }
        return "/-/quit";
    }
    /* issue 17: profd profiles itself (libprofd-agent), also while the WAL replays */
    if (strncmp(path, "/debug/pprof/", 13) == 0 && api->o.enable_pprof)
        return h_debug_pprof(req, resp, path);
    if ((h = route_metrics_or_asset(api, req, resp)))
        return h;
    pd__api_reply_text(resp, 404, "404 page not found\n");
    return "other";
}

/* Copies s into out as a logfmt value (quoted, " and \ escaped, control
 * characters dropped). */
static void logfmt_value(const char *s, char *out, size_t cap)
{
    size_t o = 0;
    if (cap < 3)
        return;
    out[o++] = '"';
    for (; *s && o + 3 < cap; s++) {
        unsigned char c = (unsigned char)*s;
        if (c < 0x20)
            continue;
        if (c == '"' || c == '\\')
            out[o++] = '\\';
        out[o++] = (char)c;
    }
    out[o++] = '"';
    out[o] = 0;
}

bool pd_api_form_route(const char *method, const char *path)
{
    (void)method;
    /* a debug file upload is a binary body whatever its Content-Type */
    return strncmp(path, "/api/v1/", 8) == 0 && strncmp(path, "/api/v1/debuginfo/", 18) != 0;
}

pd_http_pool pd_api_classify(void *ctx, const char *method, const char *path)
{
    (void)ctx;
    bool get = strcmp(method, "GET") == 0 || strcmp(method, "HEAD") == 0;
    if (get && (strcmp(path, "/-/healthy") == 0 || strcmp(path, "/-/ready") == 0))
        return PD_HTTP_POOL_INLINE;
    if (!get && strncmp(path, "/api/v1/debuginfo/", 18) == 0)
        return PD_HTTP_POOL_INGEST;
    if (strncmp(path, "/api/v1/", 8) == 0 || strncmp(path, "/querier.v1.", 12) == 0 ||
        strncmp(path, "/pyroscope/render", 17) == 0)
        return PD_HTTP_POOL_QUERY;
    if (strncmp(path, "/api/0/", 7) == 0)
        return !get && (strcmp(path, "/api/0/profiles") == 0 ||
                        strcmp(path, "/api/0/profiles/") == 0)
                   ? PD_HTTP_POOL_INGEST
                   : PD_HTTP_POOL_QUERY;
    if (get && strcmp(path, "/metrics") != 0)
        return PD_HTTP_POOL_QUERY;
    return PD_HTTP_POOL_INGEST;
}

int pd_api_access_group(const char *method, const char *path)
{
    bool get = strcmp(method, "GET") == 0 || strcmp(method, "HEAD") == 0;
    if ((!get && (strcmp(path, "/api/0/profiles") == 0 || strcmp(path, "/api/0/profiles/") == 0)) ||
        strcmp(path, "/ingest") == 0 || strncmp(path, "/push.v1.", 9) == 0 ||
        strcmp(path, "/v1development/profiles") == 0 ||
        (!get && strcmp(path, "/api/v1/alerts") == 0) ||
        (!get && strncmp(path, "/api/v1/debuginfo/", 18) == 0))
        return 1; /* PD_ACCESS_PUSH */
    if (strcmp(path, "/-/reload") == 0 || strcmp(path, "/-/quit") == 0 ||
        strncmp(path, "/debug/pprof/", 13) == 0)
        return 2; /* PD_ACCESS_ADMIN */
    return 0;     /* PD_ACCESS_QUERY */
}

void pd_api_handle(void *ctx, const pd_http_request *req, pd_http_response *resp)
{
    pd_api *api = ctx;
    int64_t t0 = pd_mono_ns();
    pd_buf_init(&resp->body, api->o.max_response_bytes); /* empty on entry */
    resp->status = 200;
    pd_storage_warnings warn;
    pd_storage_warnings_begin(&warn);
    pd__api_set_warnings(&warn);
    const char *handler = route(api, req, resp);
    pd__api_set_warnings(NULL);
    pd_storage_warnings_end();
    if (warn.n || warn.dropped) {
        /* partial answer: JSON envelopes carry "warnings"; any reply (a pprof
           body too) carries the count and the first message in a header */
        char hv[PD_STORAGE_WARNING_BYTES + 64];
        int k = snprintf(hv, sizeof hv, "%zu damaged parts skipped: %s", warn.n + warn.dropped,
                         warn.n ? warn.v[0] : "");
        for (int i = 0; i > -1 && i < k && hv[i]; i++)
            if ((unsigned char)hv[i] < 0x20 || hv[i] == 0x7f)
                hv[i] = ' ';
        pd_http_add_header(resp, "X-Profd-Warnings", hv);
        pd_metrics_add("profd_partial_answers_total", NULL, 1);
    }
    pd_storage_warnings_release(&warn);
    pd__api_maybe_gzip(req, resp); /* last: the warnings may have changed the body */
    double secs = (double)(pd_mono_ns() - t0) / 1e9;
    char lbl[160];
    snprintf(lbl, sizeof lbl, "handler=\"%s\",code=\"%d\"", handler, resp->status);
    pd_metrics_add("profd_http_requests_total", lbl, 1);
    snprintf(lbl, sizeof lbl, "handler=\"%s\"", handler);
    pd_metrics_add("profd_http_request_duration_seconds_total", lbl, secs);
    char qpath[600];
    logfmt_value(req->path, qpath, sizeof qpath);
    pd_log(PD_LOG_DEBUG, "http request", "method=%s path=%s status=%d bytes=%zu duration=%.6fs",
           req->method, qpath, resp->status, resp->body.len, secs);
}

/* ---- lifecycle ---- */

void pd_api_set_rules(pd_api *api, struct pd_rules *rules)
{
    __atomic_store_n(&api->rules, rules, __ATOMIC_RELEASE);
}

void pd_api_set_ready(pd_api *api, pd_storage *st, pd_scrape_manager *sm)
{
    api->st = st;
    api->sm = sm;
    __atomic_store_n(&api->ready, true, __ATOMIC_RELEASE);
}

int pd_api_new(pd_storage *st, pd_scrape_manager *sm, const pd_api_options *opts, pd_api **out,
               pd_err *err)
{
    *out = NULL;
    pd_api *api = calloc(1, sizeof *api);
    if (!api)
        return pd_err_set(err, PD_ENOMEM, "api: out of memory");
    api->st = st;
    api->sm = sm;
    api->ready = st != NULL;
    if (opts)
        api->o = *opts;
    if (!api->o.max_response_bytes)
        api->o.max_response_bytes = DEFAULT_MAX_RESPONSE;
    if (!api->o.top_default_rows)
        api->o.top_default_rows = DEFAULT_TOP_ROWS;
    if (api->o.query_timeout_ms <= 0)
        api->o.query_timeout_ms = DEFAULT_QUERY_TIMEOUT_MS;
    if (!api->o.query_max_samples)
        api->o.query_max_samples = PD_MERGE_DEFAULT_MAX_SAMPLES;
    if (!api->o.max_series_per_service)
        api->o.max_series_per_service = PD_API_DEFAULT_MAX_SERIES_PER_SERVICE;
    if (pd__series_cap_new(
            api->o.max_series_per_service == SIZE_MAX ? 0 : api->o.max_series_per_service,
            &api->series_cap) < 0) {
        free(api);
        return pd_err_set(err, PD_ENOMEM, "api: out of memory");
    }
    snprintf(api->version, sizeof api->version, "%s",
             api->o.build     ? api->o.build->version
             : api->o.version ? api->o.version
                              : "unknown");
    api->o.version = NULL;
    if (api->o.build)
        api->build = *api->o.build;
    else
        api->build = (pd_build_info){.revision = "unknown",
                                     .branch = "unknown",
                                     .build_user = "unknown",
                                     .build_date = "unknown",
                                     .compiler = "unknown",
                                     .platform = "unknown"};
    api->build.version = api->version;
    api->o.build = NULL;
    api->start_time_s = (double)pd_now_ms() / 1000.0;
    pthread_mutex_init(&api->cfg_mu, NULL);
    if (opts && opts->n_flags) {
        if (!(api->flags = calloc(2 * opts->n_flags, sizeof *api->flags))) {
            pd_api_free(api);
            return pd_err_set(err, PD_ENOMEM, "api: out of memory");
        }
        api->n_flags = opts->n_flags;
        for (size_t i = 0; i < opts->n_flags; i++)
            if (!(api->flags[2 * i] = strdup(opts->flag_names[i])) ||
                !(api->flags[2 * i + 1] =
                      strdup(opts->flag_values[i] ? opts->flag_values[i] : ""))) {
                pd_api_free(api);
                return pd_err_set(err, PD_ENOMEM, "api: out of memory");
            }
    }
    api->o.flag_names = api->o.flag_values = NULL;

    pd__api_metrics_catalog_init();
    pd_metrics_describe("profd_http_requests_total", PD_METRIC_COUNTER,
                        "HTTP requests answered, by handler and status code.");
    pd_metrics_describe("profd_http_request_duration_seconds_total", PD_METRIC_COUNTER,
                        "Time spent answering HTTP requests, by handler.");
    pd_metrics_describe("profd_ingested_profiles_total", PD_METRIC_COUNTER,
                        "Profiles stored, by source (scrape or push).");
    pd_metrics_describe("profd_ingested_bytes_total", PD_METRIC_COUNTER,
                        "Bytes of profiles stored as received, by source (scrape or push).");
    pd_metrics_describe("profd_rejected_input_total", PD_METRIC_COUNTER,
                        "Pushed profiles refused, by reason.");
    pd_metrics_describe("profd_ingested_split_series_total", PD_METRIC_COUNTER,
                        "Series stored from pushed profiles split by their samples' labels.");
    pd_metrics_add("profd_ingested_split_series_total", NULL, 0);
    pd_metrics_add("profd_rejected_input_total", "reason=\"series_limit\"", 0);
    pd_metrics_describe("profd_partial_answers_total", PD_METRIC_COUNTER,
                        "Answers that left out damaged stored data (they carry warnings).");
    pd_metrics_add("profd_partial_answers_total", NULL, 0);
    pd_metrics_describe("process_cpu_seconds_total", PD_METRIC_COUNTER,
                        "Total user and system CPU time spent in seconds.");
    pd_metrics_describe("process_resident_memory_bytes", PD_METRIC_GAUGE,
                        "Resident memory size in bytes.");
    pd_metrics_describe("process_virtual_memory_bytes", PD_METRIC_GAUGE,
                        "Virtual memory size in bytes.");
    pd_metrics_describe("process_start_time_seconds", PD_METRIC_GAUGE,
                        "Start time of the process since unix epoch in seconds.");
    pd_metrics_describe("process_open_fds", PD_METRIC_GAUGE, "Number of open file descriptors.");
    /* as prometheus_build_info: one series at 1, the build in its labels */
    pd_metrics_describe("profd_build_info", PD_METRIC_GAUGE,
                        "A metric with a constant '1' value labeled by version, revision, "
                        "branch, compiler and platform from which profd was built.");
    {
        char labels[1024];
        if (pd_build_info_labels(&api->build, labels, sizeof labels) < sizeof labels) {
            pd_metrics_remove_prefix("profd_build_info", NULL);
            pd_metrics_set("profd_build_info", labels, 1);
        }
    }
    pd_metrics_describe("profd_storage_series", PD_METRIC_GAUGE, "Series in the storage.");
    pd_metrics_describe("profd_storage_merges_waiting", PD_METRIC_GAUGE,
                        "Merges waiting for a turn (--query.max-merge-concurrency).");
    pd_metrics_describe("profd_storage_merge_wait_seconds_total", PD_METRIC_COUNTER,
                        "Time merges waited for a turn (--query.max-merge-concurrency).");
    pd_metrics_describe("profd_storage_profiles", PD_METRIC_GAUGE, "Profiles in the storage.");
    pd_metrics_describe("profd_storage_bytes", PD_METRIC_GAUGE,
                        "Bytes of every file under the storage path.");
    pd_metrics_describe("profd_storage_min_time_seconds", PD_METRIC_GAUGE,
                        "Timestamp of the oldest stored profile (0 when empty).");
    pd_metrics_describe("profd_storage_max_time_seconds", PD_METRIC_GAUGE,
                        "Timestamp of the newest stored profile (0 when empty).");
    /* create the push series at 0 so they are visible before the first push */
    pd_metrics_add("profd_ingested_profiles_total", "source=\"push\"", 0);
    pd_metrics_add("profd_ingested_bytes_total", "source=\"push\"", 0);
    *out = api;
    return 0;
}

void pd_api_free(pd_api *api)
{
    if (!api)
        return;
    for (size_t i = 0; i < 2 * api->n_flags; i++)
        free(api->flags[i]);
    free(api->flags);
    free(api->config_text);
    pd__series_cap_free(api->series_cap);
    pthread_mutex_destroy(&api->cfg_mu);
    free(api);
}
