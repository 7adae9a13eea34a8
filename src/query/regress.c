/*
 * query/regress.c — the regression report (issue 30, query.h
 * pd_query_regressions): for a label that names versions (`by`, e.g.
 * version), each version against the one before it, the functions whose
 * share of the profile grew or shrank the most — reported only when the
 * change stands out of the profiles' own spread.
 *
 * A *profile* here is every stored part of a series group at one time (a
 * scrape split into series by pprof labels stores its parts at one ms).
 * Per profile p of the selection, for each function f:
 *   share_p(f) = (sum of the sample type's values of p's samples whose stack
 *                 contains f, each sample once) / (p's total of that type)
 * — the "cum" of `go tool pprof -top`, normalized so versions that ran for
 * different times or at different load compare. Per version (all series
 * with that label value): the mean and the standard deviation of share_p
 * over its profiles (profiles where f is absent count 0). Versions are
 * ordered by their first profile's time. For consecutive versions a, b:
 *   change = mean_b - mean_a
 *   noise  = sqrt(sd_a^2 / n_a + sd_b^2 / n_b)   (standard error of change)
 * f is reported when |change| >= min_change (absolute share, default 0.01:
 * one percentage point) and |change| > 4 * noise (with n >= 2 on both
 * sides), ranked by |change|. Two runs of one version thus report nothing
 * unless they really differ. At most max_profiles (newest) profiles per
 * version are read, each decoded once.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "query/query.h"
#include "query/query_int.h"

typedef struct fstat {
    char *name;
    double sum, sumsq; /* of share over the version's profiles */
} fstat;

typedef struct version {
    char *value;
    int64_t first_ts;
    size_t n_profiles;
    fstat *f;
    size_t n_f, cap_f;
    size_t *slot;
    size_t nslot;
    /* the version's profiles, to read: (ref, ts) */
    uint64_t *refs;
    int64_t *ts;
    size_t n_pts, cap_pts;
} version;

static uint64_t h64(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

static fstat *ffind(version *v, const char *name, bool add)
{
    if (add && (v->n_f + 1) * 2 > v->nslot) {
        size_t ns = v->nslot ? v->nslot * 2 : 256;
        size_t *sl = calloc(ns, sizeof *sl);
        if (!sl)
            return NULL;
        for (size_t i = 0; i < v->n_f; i++) {
            size_t h = (size_t)h64(v->f[i].name) & (ns - 1);
            while (sl[h])
                h = (h + 1) & (ns - 1);
            sl[h] = i + 1;
        }
        free(v->slot);
        v->slot = sl;
        v->nslot = ns;
    }
    if (!v->nslot)
        return NULL;
    size_t h = (size_t)h64(name) & (v->nslot - 1);
    while (v->slot[h]) {
        if (!strcmp(v->f[v->slot[h] - 1].name, name))
            return &v->f[v->slot[h] - 1];
        h = (h + 1) & (v->nslot - 1);
    }
    if (!add)
        return NULL;
    if (v->n_f == v->cap_f) {
        size_t nc = v->cap_f ? v->cap_f * 2 : 128;
        fstat *nf = realloc(v->f, nc * sizeof *nf);
        if (!nf)
            return NULL;
        v->f = nf;
        v->cap_f = nc;
    }
    fstat *f = &v->f[v->n_f];
    if (!(f->name = strdup(name)))
        return NULL;
    f->sum = f->sumsq = 0;
    v->slot[h] = ++v->n_f;
    return f;
}

static const char *pstr(const pd_profile *p, int64_t i)
{
    return i >= 0 && (size_t)i < p->n_string ? p->string_table[i] : "";
}

/* Adds one profile's cum per function name (fstat.sum) and total to the
 * scratch table acc (*total). */
static int acc_profile(version *acc, double *total, const pd_profile *p, const char *sample_type,
                       pd_err *err)
{
    size_t vi = 0;
    if (sample_type && *sample_type) {
        vi = p->n_sample_type;
        for (size_t i = 0; i < p->n_sample_type; i++)
            if (!strcmp(pstr(p, p->sample_type[i].type), sample_type))
                vi = i;
        if (vi == p->n_sample_type)
            return 0; /* not this type: skipped */
    } else if (p->n_sample_type == 0)
        return 0;
    double *cum = calloc(p->n_function ? p->n_function : 1, sizeof *cum);
    size_t *seen = calloc(p->n_function ? p->n_function : 1, sizeof *seen);
    if (!cum || !seen) {
        free(cum);
        free(seen);
        return pd_err_set(err, PD_ENOMEM, "out of memory reading a profile");
    }
    for (size_t s = 0; s < p->n_sample; s++) {
        const pd_pprof_sample *sm = &p->sample[s];
        if (vi >= sm->n_value)
            continue;
        double val = (double)sm->value[vi];
        *total += val;
        for (size_t l = 0; l < sm->n_location; l++) {
            const pd_pprof_location *loc = pd_profile_location(p, sm->location_id[l]);
            for (size_t k = 0; loc && k < loc->n_line; k++) {
                const pd_pprof_function *fn = pd_profile_function(p, loc->line[k].function_id);
                if (!fn)
                    continue;
                size_t fi = (size_t)(fn - p->function);
                if (seen[fi] != s + 1) { /* once per sample (recursion) */
                    seen[fi] = s + 1;
                    cum[fi] += val;
                }
            }
        }
    }
    int rc = 0;
    for (size_t i = 0; i < p->n_function; i++) {
        if (cum[i] == 0)
            continue;
        fstat *f = ffind(acc, pstr(p, p->function[i].name), true);
        if (!f) {
            rc = pd_err_set(err, PD_ENOMEM, "out of memory");
            break;
        }
        f->sum += cum[i];
    }
    free(cum);
    free(seen);
    return rc;
}

/* Adds the shares of one "profile" (acc: every stored part at one time, as
 * a scrape split by pprof labels stores several) to v and empties acc. */
static int flush_profile(version *v, version *acc, double *total, pd_err *err)
{
    int rc = 0;
    if (*total > 0) {
        v->n_profiles++;
        for (size_t i = 0; i < acc->n_f; i++) {
            fstat *f = ffind(v, acc->f[i].name, true);
            if (!f) {
                rc = pd_err_set(err, PD_ENOMEM, "out of memory");
                break;
            }
            double sh = acc->f[i].sum / *total;
            f->sum += sh;
            f->sumsq += sh * sh;
        }
    }
    for (size_t i = 0; i < acc->n_f; i++)
        free(acc->f[i].name);
    acc->n_f = 0;
    if (acc->slot)
        memset(acc->slot, 0, acc->nslot * sizeof *acc->slot);
    *total = 0;
    return rc;
}

typedef struct change {
    const char *name;
    double a, b, sda, sdb, delta, noise;
} change;

static int cmp_change(const void *x, const void *y)
{
    double a = fabs(((const change *)x)->delta), b = fabs(((const change *)y)->delta);
    return a < b ? 1 : a > b ? -1 : strcmp(((const change *)x)->name, ((const change *)y)->name);
}

static void stats(const version *v, const fstat *f, double *mean, double *sd)
{
    double n = (double)v->n_profiles;
    *mean = f && n ? f->sum / n : 0;
    double var = f && n > 1 ? (f->sumsq - n * *mean * *mean) / (n - 1) : 0;
    *sd = var > 0 ? sqrt(var) : 0;
}

static _Thread_local const int64_t *sort_ts; /* cmp_ord's keys */

static int cmp_ord(const void *x, const void *y)
{
    int64_t a = sort_ts[*(const size_t *)x], b = sort_ts[*(const size_t *)y];
    return a < b ? -1 : a > b ? 1 : 0;
}

static int cmp_ts_desc(const void *x, const void *y)
{
    int64_t a = *(const int64_t *)x, b = *(const int64_t *)y;
    return a < b ? 1 : a > b ? -1 : 0;
}

static int cmp_version(const void *x, const void *y)
{
    const version *a = x, *b = y;
    return a->first_ts < b->first_ts   ? -1
           : a->first_ts > b->first_ts ? 1
                                       : strcmp(a->value, b->value);
}

int pd_query_regressions(pd_storage *st, const char *selector, const char *by, int64_t from,
                         int64_t to, const char *sample_type, size_t limit, double min_change,
                         size_t max_profiles, pd_buf *out, pd_err *err)
{
    pd_matcher *ms = NULL;
    size_t n_ms = 0;
    int rc = pd_selector_parse(selector, &ms, &n_ms, err);
    if (rc < 0)
        return rc;
    pd_series_set set = {0};
    version *vs = NULL;
    size_t nv = 0;
    change *ch = NULL;
    if ((rc = pd_storage_select(st, ms, n_ms, from, to, &set, err)) < 0)
        goto out;
    if (!(vs = calloc(set.n ? set.n : 1, sizeof *vs))) {
        rc = pd_err_set(err, PD_ENOMEM, "out of memory");
        goto out;
    }
    for (size_t i = 0; i < set.n; i++) {
        const char *val = pd_labels_get(&set.v[i].labels, by);
        if (!val || !*val)
            continue;
        version *v = NULL;
        for (size_t k = 0; k < nv && !v; k++)
            if (!strcmp(vs[k].value, val))
                v = &vs[k];
        if (!v) {
            v = &vs[nv++];
            if (!(v->value = strdup(val))) {
                rc = pd_err_set(err, PD_ENOMEM, "out of memory");
                goto out;
            }
            v->first_ts = INT64_MAX;
        }
        pd_points pts = {0};
        if ((rc = pd_storage_read_points(st, set.v[i].ref, from, to, &pts, err)) < 0)
            goto out;
        for (size_t k = 0; k < pts.n; k++) {
            if (pts.v[k].ts_ms < v->first_ts)
                v->first_ts = pts.v[k].ts_ms;
            if (v->n_pts == v->cap_pts) {
                size_t nc = v->cap_pts ? v->cap_pts * 2 : 64;
                uint64_t *nr = realloc(v->refs, nc * sizeof *nr);
                if (nr)
                    v->refs = nr;
                int64_t *nt = nr ? realloc(v->ts, nc * sizeof *nt) : NULL;
                if (!nr || !nt) {
                    pd_points_release(&pts);
                    rc = pd_err_set(err, PD_ENOMEM, "out of memory");
                    goto out;
                }
                v->ts = nt;
                v->cap_pts = nc;
            }
            v->refs[v->n_pts] = set.v[i].ref;
            v->ts[v->n_pts++] = pts.v[k].ts_ms;
        }
        pd_points_release(&pts);
    }
    for (size_t k = 0; k < nv; k++) {
        version *v = &vs[k];
        /* the newest max_profiles: points were added series by series, so
           pick by time */
        if (max_profiles && v->n_pts > max_profiles) {
            int64_t *sorted = malloc(v->n_pts * sizeof *sorted);
            if (!sorted) {
                rc = pd_err_set(err, PD_ENOMEM, "out of memory");
                goto out;
            }
            memcpy(sorted, v->ts, v->n_pts * sizeof *sorted);
            qsort(sorted, v->n_pts, sizeof *sorted, cmp_ts_desc);
            int64_t cut = sorted[max_profiles - 1];
            free(sorted);
            size_t taken = 0;
            for (size_t i = 0; i < v->n_pts; i++)
                if (v->ts[i] >= cut && taken < max_profiles) {
                    v->refs[taken] = v->refs[i];
                    v->ts[taken++] = v->ts[i];
                }
            v->n_pts = taken;
        }
        /* by time, so the parts of one scrape (same ms) make one profile */
        size_t *ord = malloc((v->n_pts ? v->n_pts : 1) * sizeof *ord);
        if (!ord) {
            rc = pd_err_set(err, PD_ENOMEM, "out of memory");
            goto out;
        }
        for (size_t i = 0; i < v->n_pts; i++)
            ord[i] = i;
        sort_ts = v->ts;
        qsort(ord, v->n_pts, sizeof *ord, cmp_ord);
        version acc = {0};
        double total = 0;
        for (size_t j = 0; j < v->n_pts && rc == 0; j++) {
            size_t i = ord[j];
            if (j && v->ts[ord[j - 1]] != v->ts[i])
                rc = flush_profile(v, &acc, &total, err);
            pd_profile p;
            pd_err e = {{0}};
            int r2 = rc < 0 ? 0 : pd_storage_read_profile(st, v->refs[i], v->ts[i], &p, NULL, &e);
            if (rc < 0)
                break;
            if (r2 == PD_ENOMEM)
                rc = pd_err_set(err, r2, "out of memory reading profiles");
            if (r2 < 0)
                continue; /* damaged or deleted meanwhile: left out */
            rc = acc_profile(&acc, &total, &p, sample_type, err);
            pd_profile_release(&p);
        }
        if (rc == 0)
            rc = flush_profile(v, &acc, &total, err);
        for (size_t i = 0; i < acc.n_f; i++)
            free(acc.f[i].name);
        free(acc.f);
        free(acc.slot);
        free(ord);
        if (rc < 0)
            goto out;
    }
    qsort(vs, nv, sizeof *vs, cmp_version);

    rc = pd_buf_puts(out, "{\"by\":");
    pd_buf_put_json_string(out, by, strlen(by));
    pd_buf_puts(out, ",\"versions\":[");
    for (size_t k = 0; k < nv; k++) {
        pd_buf_puts(out, k ? ",{\"version\":" : "{\"version\":");
        pd_buf_put_json_string(out, vs[k].value, strlen(vs[k].value));
        pd_buf_printf(out, ",\"firstSeen\":%lld,\"profiles\":%zu}", (long long)vs[k].first_ts,
                      vs[k].n_profiles);
    }
    pd_buf_puts(out, "],\"comparisons\":[");
    for (size_t k = 1; k < nv; k++) {
        version *a = &vs[k - 1], *b = &vs[k];
        size_t cap = a->n_f + b->n_f, n = 0;
        free(ch);
        if (!(ch = calloc(cap ? cap : 1, sizeof *ch))) {
            rc = pd_err_set(err, PD_ENOMEM, "out of memory");
            goto out;
        }
        for (int side = 0; side < 2; side++) {
            version *v = side ? b : a, *o = side ? a : b;
            for (size_t i = 0; i < v->n_f; i++) {
                if (side && ffind(a, v->f[i].name, false))
                    continue; /* done from a's side */
                change *c = &ch[n];
                c->name = v->f[i].name;
                const fstat *fa = side ? ffind(o, c->name, false) : &v->f[i];
                const fstat *fb = side ? &v->f[i] : ffind(o, c->name, false);
                stats(a, fa, &c->a, &c->sda);
                stats(b, fb, &c->b, &c->sdb);
                c->delta = c->b - c->a;
                c->noise = sqrt(c->sda * c->sda / (double)(a->n_profiles ? a->n_profiles : 1) +
                                c->sdb * c->sdb / (double)(b->n_profiles ? b->n_profiles : 1));
                if (a->n_profiles >= 2 && b->n_profiles >= 2 && fabs(c->delta) >= min_change &&
                    fabs(c->delta) > 4 * c->noise)
                    n++;
            }
        }
        qsort(ch, n, sizeof *ch, cmp_change);
        pd_buf_puts(out, k > 1 ? ",{\"from\":" : "{\"from\":");
        pd_buf_put_json_string(out, a->value, strlen(a->value));
        pd_buf_puts(out, ",\"to\":");
        pd_buf_put_json_string(out, b->value, strlen(b->value));
        /* the compare view's two selections */
        pd_buf_puts(out, ",\"compare\":{\"query\":");
        char sel[PD_SELECTOR_MAX_BYTES + 600];
        size_t sl = strlen(selector);
        const char *brace = sl && selector[sl - 1] == '}' ? "" : "{";
        for (int side = 0; side < 2; side++) {
            const char *val = side ? b->value : a->value;
            pd_buf vb;
            pd_buf_init(&vb, 0);
            pd_buf_put_json_string(&vb, val, strlen(val)); /* a JSON string is a PromQL string */
            if (*brace)
                snprintf(sel, sizeof sel, "%s{%s=%.*s}", selector, by, (int)vb.len,
                         (const char *)vb.data);
            else
                snprintf(sel, sizeof sel, "%.*s%s%s=%.*s}", (int)(sl - 1), selector,
                         sl > 1 && selector[sl - 2] != '{' ? "," : "", by, (int)vb.len,
                         (const char *)vb.data);
            pd_buf_release(&vb);
            if (side)
                pd_buf_puts(out, ",\"query_b\":");
            pd_buf_put_json_string(out, sel, strlen(sel));
        }
        pd_buf_puts(out, "},\"functions\":[");
        for (size_t i = 0; i < n && i < limit; i++) {
            const change *c = &ch[i];
            pd_buf_puts(out, i ? ",{\"function\":" : "{\"function\":");
            pd_buf_put_json_string(out, c->name, strlen(c->name));
            pd_buf_printf(out,
                          ",\"direction\":\"%s\",\"shareBefore\":%.6f,\"shareAfter\":%.6f,"
                          "\"change\":%.6f,\"spreadBefore\":%.6f,\"spreadAfter\":%.6f,"
                          "\"noise\":%.6f}",
                          c->delta > 0 ? "grew" : "shrank", c->a, c->b, c->delta, c->sda, c->sdb,
                          c->noise);
        }
        rc = pd_buf_printf(out, "],\"reported\":%zu}", n < limit ? n : limit);
    }
    rc = pd_buf_puts(out, "]}");
out:
    free(ch);
    for (size_t k = 0; vs && k < set.n; k++) {
        free(vs[k].value);
        for (size_t i = 0; i < vs[k].n_f; i++)
            free(vs[k].f[i].name);
        free(vs[k].f);
        free(vs[k].slot);
        free(vs[k].refs);
        free(vs[k].ts);
    }
    free(vs);
    pd_series_set_release(&set);
    pd_matchers_free(ms, n_ms);
    return rc;
}
