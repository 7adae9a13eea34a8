/*
 * api/querier_render.c — Pyroscope's HTTP render API (what the Profiles
 * Drilldown app and older clients read), answered in flamebearer JSON:
 *
 *   GET /pyroscope/render?query=PTID{SELECTOR}&from=T&until=T[&max-nodes=N]
 *       [&aggregation=sum|avg][&format=dot]
 *     {"version":1,"flamebearer":{"names":[..],"levels":[[..]],
 *      "numTicks":N,"maxSelf":N},"metadata":{"format":"single",
 *      "spyName":"","sampleRate":R,"units":U,"name":PTID},
 *      "timeline":{"startTime":S,"samples":[..],"durationDelta":D}}
 *   The timeline as Pyroscope's (pkg/querier/timeline): D seconds per
 *   sample, chosen from the range as Grafana picks an interval (about 1,500
 *   points, at least 15 s, rounded to 1/2/5/10/15/20/30 s, 1/2/5/10/15/20/30
 *   min, 1/2/3/6/12/24 h, 1 week, 30 days, 1 year); S is from= snapped down
 *   to a multiple of D, in seconds; samples[i] is the sum (aggregation=avg:
 *   the mean) of the type's per-profile values of the selected series in
 *   [S + i*D, S + (i+1)*D), 0 where there are none, up to until= snapped
 *   down the same way.
 *   format=dot: the merged profile as Graphviz DOT text (text/plain, as
 *   Pyroscope's dot writer answers; query.h pd_report_dot), at most
 *   max-nodes boxes (default 100); an empty body when nothing matched.
 *   GET /pyroscope/render-diff?leftQuery=&leftFrom=&leftUntil=&rightQuery=
 *       &rightFrom=&rightUntil=[&max-nodes=N]
 *     the same with "format":"double", levels of 7, "leftTicks",
 *     "rightTicks".
 *
 * The same writer (pd__flamebearer_put) answers /api/v1/query's
 * report=flamebearer (pd__flamebearer_report: the UI's "Flamebearer JSON"
 * export of any view, "timeline":null).
 *
 * R is 1e9 for a nanoseconds type (values are time), else 100; U is
 * samples, bytes, objects, goroutines or lock_nanoseconds by the type.
 * PTID is a five-part profile type ID (querier_int.h); `name=` is accepted
 * for query=. Times as pd__pyro_time (default from=now-1h, until=now).
 * Errors: 400 {"code":"invalid_argument","message":..} naming the parameter.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "api/querier_int.h"
#include "base/time.h"

/* Splits "PTID{sel}" into ptid (copied into buf) and the selector. */
static int split_query(const char *q, char *ptid, size_t cap, const char **sel, pd_err *err)
{
    if (!q || !*q)
        return pd_err_set(err, PD_EINVAL, "query is required (PROFILE_TYPE_ID{selector})");
    const char *b = strchr(q, '{');
    size_t n = b ? (size_t)(b - q) : strlen(q);
    if (n == 0 || n >= cap)
        return pd_err_set(err, PD_EINVAL, "query %.200s: no profile type ID before {", q);
    memcpy(ptid, q, n);
    ptid[n] = 0;
    *sel = b ? b : "{}";
    return 0;
}

static const char *units_of(const char *ptid)
{
    if (strstr(ptid, ":bytes:"))
        return "bytes";
    if (strstr(ptid, "alloc_objects") || strstr(ptid, "inuse_objects"))
        return "objects";
    if (!strncmp(ptid, "goroutines:", 11))
        return "goroutines";
    if (strstr(ptid, ":nanoseconds:") &&
        (!strncmp(ptid, "mutex:", 6) || !strncmp(ptid, "block:", 6)))
        return "lock_nanoseconds";
    if (strstr(ptid, ":nanoseconds:"))
        return "samples";
    return "samples";
}

/* flamebearer's sampleRate: values per second of a "samples" profile; a
 * nanoseconds type is 1e9 per second (as Pyroscope renders cpu time). */
static int rate_of(const char *ptid)
{
    return strstr(ptid, ":nanoseconds:") ? 1000000000 : 100;
}

/* Keeps the first error of a sequence of pd_buf writes in rc (0 while all went well). */
#define W(call) (rc = rc < 0 ? rc : (call))

static int put_levels(pd_buf *b, const pd__levels *lv)
{
    int rc = 0;
    W(pd_buf_puts(b, "\"names\":["));
    for (size_t i = 0; i < lv->n_names && rc == 0; i++) {
        if (i)
            W(pd_buf_putc(b, ','));
        W(pd_buf_put_json_string(b, lv->names[i], strlen(lv->names[i])));
    }
    W(pd_buf_puts(b, "],\"levels\":["));
    for (size_t l = 0; l < lv->n_levels && rc == 0; l++) {
        W(pd_buf_puts(b, l ? ",[" : "["));
        for (size_t i = 0; i < lv->level_len[l] && rc == 0; i++)
            W(pd_buf_printf(b, "%s%" PRId64, i ? "," : "", lv->levels[l][i]));
        W(pd_buf_putc(b, ']'));
    }
    W(pd_buf_printf(b, "],\"numTicks\":%" PRId64 ",\"maxSelf\":%" PRId64, lv->total, lv->max_self));
    return rc;
}

int pd__flamebearer_put(pd_buf *b, const pd__levels *lv, bool diff, const char *name)
{
    int rc = 0;
    W(pd_buf_puts(b, "{\"version\":1,\"flamebearer\":{"));
    W(put_levels(b, lv));
    W(pd_buf_printf(b,
                    "},\"metadata\":{\"format\":\"%s\",\"spyName\":\"\",\"sampleRate\":%d,"
                    "\"units\":\"%s\",\"name\":",
                    diff ? "double" : "single", rate_of(name), units_of(name)));
    W(pd_buf_put_json_string(b, name, strlen(name)));
    W(pd_buf_putc(b, '}'));
    if (diff)
        W(pd_buf_printf(b, ",\"leftTicks\":%" PRId64 ",\"rightTicks\":%" PRId64, lv->left_ticks,
                        lv->right_ticks));
    return rc;
}

int pd__flamebearer_report(const pd_profile *p, size_t type_idx, size_t max_nodes, bool diff,
                           const char *metric, pd_buf *out, pd_err *err)
{
    pd_arena a;
    pd_arena_init(&a);
    pd__levels lv;
    int rc = pd__levels_build(p, type_idx, max_nodes, diff, &a, &lv, err);
    if (rc == 0) {
        char name[512];
        const pd_pprof_value_type *st =
            type_idx < p->n_sample_type ? &p->sample_type[type_idx] : NULL;
        snprintf(name, sizeof name, "%.120s:%.120s:%.60s:%.120s:%.60s",
                 metric && *metric ? metric : "profile", st ? pd_profile_str(p, st->type) : "",
                 st ? pd_profile_str(p, st->unit) : "", pd_profile_str(p, p->period_type.type),
                 pd_profile_str(p, p->period_type.unit));
        rc = pd__flamebearer_put(out, &lv, diff, name);
        W(pd_buf_puts(out, ",\"timeline\":null}"));
        if (rc < 0)
            pd_err_set(err, rc, "flamebearer: %s", pd_strerror(rc));
    }
    pd_arena_release(&a);
    return rc;
}

static void bad(pd_http_response *resp, int rc, const pd_err *err)
{
    pd__api_count_rejected("render_params");
    pd_connect_error(resp, pd_connect_code_of(rc), "%s", err->msg);
}

/* Grafana's interval rounding (Pyroscope's timeline.CalcPointInterval):
 * (until - from) / 1500 rounded up to the next nice step, at least 15 s.
 * Seconds. */
static int64_t point_interval_s(int64_t from_ms, int64_t until_ms)
{
    static const struct {
        int64_t upto_ms, step_ms;
    } T[] = {
        {17500, 15000},        {25000, 20000},          {45000, 30000},       {90000, 60000},
        {210000, 120000},      {450000, 300000},        {750000, 600000},     {1050000, 900000},
        {1500000, 1200000},    {2700000, 1800000},      {5400000, 3600000},   {9000000, 7200000},
        {16200000, 10800000},  {32400000, 21600000},    {86400000, 43200000}, {172800000, 86400000},
        {604800000, 86400000}, {1814400000, 604800000},
    };
    int64_t iv = (until_ms - from_ms) / 1500;
    if (iv < 15000)
        return 15;
    for (size_t i = 0; i < sizeof T / sizeof *T; i++)
        if (iv <= T[i].upto_ms)
            return T[i].step_ms / 1000;
    return iv < 3628800000LL ? 2592000 : 31536000;
}

/* The timeline of selection s over [f, u) ms as JSON. */
static int put_timeline(pd_buf *b, const pd__vselection *s, int64_t f, int64_t u, bool avg)
{
    int64_t d = point_interval_s(f, u), dms = d * 1000;
    int64_t S = f / dms * dms, E = u / dms * dms;
    size_t n = E > S ? (size_t)((E / 1000 - S / 1000) / d) : 0;
    if (n > 100000) /* cannot happen with the interval table; a bound all the same */
        n = 100000;
    double *sum = calloc(n ? n : 1, sizeof *sum);
    int64_t *cnt = calloc(n ? n : 1, sizeof *cnt);
    if (!sum || !cnt) {
        free(sum);
        free(cnt);
        return PD_ENOMEM;
    }
    for (size_t i = 0; i < s->n; i++) {
        const pd__vseries *vs = &s->v[i];
        if (!vs->pts->n || !vs->pts->v[0].types)
            continue;
        const char *ty = vs->pts->v[0].types[vs->type_idx].type,
                   *un = vs->pts->v[0].types[vs->type_idx].unit;
        for (size_t j = 0; j < vs->pts->n; j++) {
            const pd_point *pt = &vs->pts->v[j];
            if (pt->ts_ms < S || pt->ts_ms >= E || !pt->types)
                continue;
            size_t t;
            for (t = 0; t < pt->n_types; t++)
                if (!strcmp(pt->types[t].type, ty) && !strcmp(pt->types[t].unit, un))
                    break;
            if (t == pt->n_types)
                continue;
            size_t k = (size_t)((pt->ts_ms / 1000 - S / 1000) / d);
            if (k >= n)
                continue;
            sum[k] += (double)pt->totals[t];
            cnt[k]++;
        }
    }
    int rc = pd_buf_printf(b, "{\"startTime\":%" PRId64 ",\"samples\":[", S / 1000);
    for (size_t k = 0; k < n && rc == 0; k++) {
        double v = avg && cnt[k] ? sum[k] / (double)cnt[k] : sum[k];
        rc = pd_buf_printf(b, "%s%.0f", k ? "," : "", v < 0 ? 0 : v);
    }
    if (rc == 0)
        rc = pd_buf_printf(b, "],\"durationDelta\":%" PRId64 "}", d);
    free(sum);
    free(cnt);
    return rc;
}

/* One side: parse, select, merge. *have false when nothing matched. */
static int side(const pd__querier_env *env, const char *q, const char *from, const char *until,
                char *ptid, pd__vselection *s, pd_profile *p, size_t *ti, bool *have, pd_err *err)
{
    const char *sel = "{}";
    int64_t now = pd_now_ms(), f, u;
    int rc;
    *have = false;
    if ((rc = split_query(q, ptid, 512, &sel, err)) < 0)
        return rc;
    if ((rc = pd__pyro_time(from ? from : "now-1h", now, &f, err)) < 0 ||
        (rc = pd__pyro_time(until ? until : "now", now, &u, err)) < 0)
        return rc;
    const char *sels[1] = {sel};
    if ((rc = pd__vselect(env->st, ptid, sels, 1, f, u, s, err)) < 0)
        return rc;
    if (!s->n)
        return 0;
    if ((rc = pd__vmerge(env, NULL, 0, 0, s, f, u, p, ti, err)) < 0)
        return rc;
    *have = true;
    return 0;
}

const char *pd__querier_render(const pd__querier_env *env, const pd_http_request *req,
                               pd_http_response *resp)
{
    bool diff = strcmp(req->path, "/pyroscope/render-diff") == 0;
    const char *h = diff ? "/pyroscope/render-diff" : "/pyroscope/render";
    pd_err err = {{0}};
    pd_arena a;
    pd_arena_init(&a);
    pd__vselection ls = {0}, rs = {0};
    pd_profile lp = {0}, rp = {0};
    char lid[512], rid[512];
    size_t lti = 0, rti = 0;
    bool lhave = false, rhave = false;
    int rc;
    const char *mn = pd_http_arg(req, "max-nodes");
    if (!mn)
        mn = pd_http_arg(req, "maxNodes");
    size_t max_nodes = 0;
    if (mn) {
        char *e;
        long long v = strtoll(mn, &e, 10);
        if (*e || v < 0) {
            pd_err_set(&err, PD_EINVAL, "max-nodes %.40s: not a non-negative integer", mn);
            bad(resp, PD_EINVAL, &err);
            goto out;
        }
        max_nodes = (size_t)v;
    }
    pd__levels lv;
    pd_buf *b = &resp->body;
    if (!diff) {
        const char *q = pd_http_arg(req, "query");
        if (!q)
            q = pd_http_arg(req, "name");
        const char *fmt = pd_http_arg(req, "format"), *agg = pd_http_arg(req, "aggregation");
        if ((rc = side(env, q, pd_http_arg(req, "from"), pd_http_arg(req, "until"), lid, &ls, &lp,
                       &lti, &lhave, &err)) < 0) {
            bad(resp, rc, &err);
            goto out;
        }
        if (fmt && !strcmp(fmt, "dot")) {
            pd_buf_reset(b);
            pd_report_options o = {.sample_index = lti, .max_nodes = max_nodes ? max_nodes : 100};
            if (lhave && (rc = pd_report_dot(&lp, &o, b)) < 0) {
                pd_err_set(&err, rc, "dot: %s", pd_strerror(rc));
                bad(resp, rc, &err);
                goto out;
            }
            resp->status = 200;
            resp->content_type = "text/plain; charset=utf-8";
            goto out;
        }
        int64_t now = pd_now_ms(), tf, tu;
        pd__pyro_time(pd_http_arg(req, "from") ? pd_http_arg(req, "from") : "now-1h", now, &tf,
                      &err);
        pd__pyro_time(pd_http_arg(req, "until") ? pd_http_arg(req, "until") : "now", now, &tu,
                      &err);
        memset(&lv, 0, sizeof lv);
        if (lhave && (rc = pd__levels_build(&lp, lti, max_nodes, false, &a, &lv, &err)) < 0) {
            bad(resp, rc, &err);
            goto out;
        }
        static char total[] = "total";
        static char *names[] = {total};
        static int64_t zero[4];
        static int64_t *zl[] = {zero};
        static size_t zlen[] = {4};
        if (!lhave)
            lv = (pd__levels){
                .names = names, .n_names = 1, .levels = zl, .level_len = zlen, .n_levels = 1};
        pd_buf_reset(b);
        pd__flamebearer_put(b, &lv, false, lid);
        pd_buf_puts(b, ",\"timeline\":");
        if (put_timeline(b, &ls, tf, tu, agg && !strcmp(agg, "avg")) < 0) {
            pd_err_set(&err, PD_ENOMEM, "out of memory");
            bad(resp, PD_ENOMEM, &err);
            goto out;
        }
        pd_buf_puts(b, "}");
    } else {
        if ((rc = side(env, pd_http_arg(req, "leftQuery"), pd_http_arg(req, "leftFrom"),
                       pd_http_arg(req, "leftUntil"), lid, &ls, &lp, &lti, &lhave, &err)) < 0 ||
            (rc = side(env, pd_http_arg(req, "rightQuery"), pd_http_arg(req, "rightFrom"),
                       pd_http_arg(req, "rightUntil"), rid, &rs, &rp, &rti, &rhave, &err)) < 0) {
            bad(resp, rc, &err);
            goto out;
        }
        if (!lhave || !rhave) {
            pd_connect_error(resp, PD_CONNECT_NOT_FOUND, "render-diff: no profiles on the %s side",
                             !lhave ? "left" : "right");
            goto out;
        }
        pd_profile dp;
        pd_profile_release(&lp);
        pd_profile_release(&rp);
        int64_t now = pd_now_ms(), lf, lu, rf, ru;
        pd__pyro_time(pd_http_arg(req, "leftFrom") ? pd_http_arg(req, "leftFrom") : "now-1h", now,
                      &lf, &err);
        pd__pyro_time(pd_http_arg(req, "leftUntil") ? pd_http_arg(req, "leftUntil") : "now", now,
                      &lu, &err);
        pd__pyro_time(pd_http_arg(req, "rightFrom") ? pd_http_arg(req, "rightFrom") : "now-1h", now,
                      &rf, &err);
        pd__pyro_time(pd_http_arg(req, "rightUntil") ? pd_http_arg(req, "rightUntil") : "now", now,
                      &ru, &err);
        if ((rc = pd__vmerge(env, &ls, lf, lu, &rs, rf, ru, &dp, &rti, &err)) < 0) {
            bad(resp, rc, &err);
            goto out;
        }
        rc = pd__levels_build(&dp, rti, max_nodes, true, &a, &lv, &err);
        pd_profile_release(&dp);
        if (rc < 0) {
            bad(resp, rc, &err);
            goto out;
        }
        pd_buf_reset(b);
        pd__flamebearer_put(b, &lv, true, rid);
        pd_buf_puts(b, ",\"timeline\":null}");
    }
    resp->status = 200;
    resp->content_type = "application/json";
out:
    pd_profile_release(&lp);
    pd_profile_release(&rp);
    pd__vselection_release(&ls);
    pd__vselection_release(&rs);
    pd_arena_release(&a);
    return h;
}
