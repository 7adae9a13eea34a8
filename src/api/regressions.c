/*
 * api/regressions.c — GET /api/v1/regressions (issue 30): the regression
 * report of query.h's pd_query_regressions, in Prometheus' envelope.
 *
 *   query=SELECTOR (required)   by=LABEL (default version)
 *   from=, to= (RFC 3339 or Unix s; default the last 24 h)
 *   sample_index=NAME (default the profiles' first sample type)
 *   limit=N (functions per comparison, default 10, 1..1000)
 *   min_change=F (share, 0..1, default 0.01)
 *   max_profiles=N (per version, newest first, default 500, 1..10000)
 * A bad parameter: 400 naming it (profd_rejected_input_total{reason=
 * "bad_query"}).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api_int.h"
#include "base/time.h"
#include "query/query.h"

static const char *bad(pd_http_response *resp, const char *msg)
{
    pd__api_count_rejected("bad_query");
    pd__api_reply_error(resp, 400, "%s", msg);
    return "/api/v1/regressions";
}

static bool num(const char *s, double lo, double hi, double *out)
{
    char *end;
    double v = strtod(s, &end);
    if (end == s || *end || !(v >= lo && v <= hi))
        return false;
    *out = v;
    return true;
}

const char *pd__api_regressions(pd_api *api, const pd_http_request *req, pd_http_response *resp)
{
    const char *q = pd_http_arg(req, "query"), *by = pd_http_arg(req, "by"),
               *f = pd_http_arg(req, "from"), *t = pd_http_arg(req, "to"),
               *si = pd_http_arg(req, "sample_index"), *l = pd_http_arg(req, "limit"),
               *mc = pd_http_arg(req, "min_change"), *mp = pd_http_arg(req, "max_profiles");
    char msg[800];
    if (!q || !*q)
        return bad(resp, "missing query: a selector, e.g. query=cpu{job=\"api\"}");
    if (!by || !*by)
        by = "version";
    if (!pd_label_name_valid(by))
        return bad(resp, "invalid by: not a label name");
    int64_t now = pd_now_ms(), from = now - 24 * 3600 * 1000LL, to = now;
    pd_err err = {{0}};
    if (f && pd_parse_time_param(f, &from, &err) < 0) {
        snprintf(msg, sizeof msg, "invalid from: %s", err.msg);
        return bad(resp, msg);
    }
    if (t && pd_parse_time_param(t, &to, &err) < 0) {
        snprintf(msg, sizeof msg, "invalid to: %s", err.msg);
        return bad(resp, msg);
    }
    if (to < from)
        return bad(resp, "invalid range: to is before from");
    double limit = 10, min_change = 0.01, max_profiles = 500;
    if (l && !num(l, 1, 1000, &limit))
        return bad(resp, "invalid limit: want 1..1000");
    if (mc && !num(mc, 0, 1, &min_change))
        return bad(resp, "invalid min_change: want a share in 0..1 (0.01 = one percentage point)");
    if (mp && !num(mp, 1, 10000, &max_profiles))
        return bad(resp, "invalid max_profiles: want 1..10000");
    if (pd__api_begin_success(resp) < 0)
        return "/api/v1/regressions";
    size_t mark = resp->body.len;
    int rc = pd_query_regressions(api->st, q, by, from, to, si, (size_t)limit, min_change,
                                  (size_t)max_profiles, &resp->body, &err);
    if (rc == PD_EPARSE || rc == PD_EINVAL) {
        snprintf(msg, sizeof msg, "invalid query: %s", err.msg);
        return bad(resp, msg);
    }
    if (rc < 0) {
        resp->body.len = mark;
        pd_buf_reset(&resp->body);
        resp->status = rc == PD_ETOOBIG ? 422 : 500;
        resp->content_type = "application/json";
        pd_buf_puts(&resp->body, "{\"status\":\"error\",\"errorType\":\"execution\",\"error\":");
        const char *m = err.msg[0] ? err.msg : pd_strerror(rc);
        pd_buf_put_json_string(&resp->body, m, strlen(m));
        pd_buf_puts(&resp->body, "}");
        return "/api/v1/regressions";
    }
    pd__api_end_success(resp);
    return "/api/v1/regressions";
}
