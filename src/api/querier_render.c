/*
 * api/querier_render.c — Pyroscope's HTTP render API (what the Profiles
 * Drilldown app and older clients read), answered in flamebearer JSON:
 *
 *   GET /pyroscope/render?query=PTID{SELECTOR}&from=T&until=T[&max-nodes=N]
 *     {"version":1,"flamebearer":{"names":[..],"levels":[[..]],
 *      "numTicks":N,"maxSelf":N},"metadata":{"format":"single",
 *      "spyName":"","sampleRate":R,"units":U,"name":PTID},
 *      "timeline":null}  (no timeline yet)
 *   GET /pyroscope/render-diff?leftQuery=&leftFrom=&leftUntil=&rightQuery=
 *       &rightFrom=&rightUntil=[&max-nodes=N]
 *     the same with "format":"double", levels of 7, "leftTicks",
 *     "rightTicks".
 *
 * R is 1e9 for a nanoseconds type (values are time), else 100; U is
 * samples, bytes, objects, goroutines or lock_nanoseconds by the type.
 * PTID is a five-part profile type ID (querier_int.h); `name=` is accepted
 * for query=. Times as pd__pyro_time (default from=now-1h, until=now).
 * Errors: 400 {"code":"invalid_argument","message":..} naming the parameter.
 */
#include <inttypes.h>
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
    if (strstr(ptid, ":nanoseconds:") && (!strncmp(ptid, "mutex:", 6) || !strncmp(ptid, "block:", 6)))
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

static void put_levels(pd_buf *b, const pd__levels *lv)
{
    pd_buf_puts(b, "\"names\":[");
    for (size_t i = 0; i < lv->n_names; i++) {
        if (i)
            pd_buf_putc(b, ',');
        pd_buf_put_json_string(b, lv->names[i], strlen(lv->names[i]));
    }
    pd_buf_puts(b, "],\"levels\":[");
    for (size_t l = 0; l < lv->n_levels; l++) {
        pd_buf_puts(b, l ? ",[" : "[");
        for (size_t i = 0; i < lv->level_len[l]; i++)
            pd_buf_printf(b, "%s%" PRId64, i ? "," : "", lv->levels[l][i]);
        pd_buf_putc(b, ']');
    }
    pd_buf_printf(b, "],\"numTicks\":%" PRId64 ",\"maxSelf\":%" PRId64, lv->total, lv->max_self);
}

static void bad(pd_http_response *resp, int rc, const pd_err *err)
{
    pd__api_count_rejected("render_params");
    pd_connect_error(resp, pd_connect_code_of(rc), "%s", err->msg);
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
        if ((rc = side(env, q, pd_http_arg(req, "from"), pd_http_arg(req, "until"), lid, &ls, &lp,
                       &lti, &lhave, &err)) < 0) {
            bad(resp, rc, &err);
            goto out;
        }
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
            lv = (pd__levels){.names = names, .n_names = 1, .levels = zl, .level_len = zlen, .n_levels = 1};
        pd_buf_reset(b);
        pd_buf_puts(b, "{\"version\":1,\"flamebearer\":{");
        put_levels(b, &lv);
        pd_buf_printf(b, "},\"metadata\":{\"format\":\"single\",\"spyName\":\"\",\"sampleRate\":%d,"
                         "\"units\":\"%s\",\"name\":",
                      rate_of(lid), units_of(lid));
        pd_buf_put_json_string(b, lid, strlen(lid));
        pd_buf_puts(b, "},\"timeline\":null}");
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
        pd__pyro_time(pd_http_arg(req, "leftFrom") ? pd_http_arg(req, "leftFrom") : "now-1h", now, &lf, &err);
        pd__pyro_time(pd_http_arg(req, "leftUntil") ? pd_http_arg(req, "leftUntil") : "now", now, &lu, &err);
        pd__pyro_time(pd_http_arg(req, "rightFrom") ? pd_http_arg(req, "rightFrom") : "now-1h", now, &rf, &err);
        pd__pyro_time(pd_http_arg(req, "rightUntil") ? pd_http_arg(req, "rightUntil") : "now", now, &ru, &err);
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
        pd_buf_puts(b, "{\"version\":1,\"flamebearer\":{");
        put_levels(b, &lv);
        pd_buf_printf(b, "},\"metadata\":{\"format\":\"double\",\"spyName\":\"\",\"sampleRate\":%d,"
                         "\"units\":\"%s\",\"name\":",
                      rate_of(rid), units_of(rid));
        pd_buf_put_json_string(b, rid, strlen(rid));
        pd_buf_printf(b, "},\"leftTicks\":%" PRId64 ",\"rightTicks\":%" PRId64 ",\"timeline\":null}",
                      lv.left_ticks, lv.right_ticks);
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
