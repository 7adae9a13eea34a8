/*
 * rules/rules_eval.c — the recording rules engine (rules.h): evaluation of
 * each profile storage accepted, the state deltas need, the remotes the
 * samples go to, and GET /api/v1/rules' view.
 *
 * State, per rule (kept across a reload when the rule is unchanged):
 *   in[]  per input series (hash of its labels): the previous profile's
 *         groups (by-values -> value, raw cumulative values for a cumulative
 *         type) and its total of the sample type (reset detection);
 *   out[] per output series (hash of its labels): the last time sent, so
 *         that samples of one output series leave in increasing time.
 * Both are capped at PD_RULES_MAX_SERIES entries per rule; past it, a new
 * input series is evaluated without state (as a first profile) and the rule
 * reports the error.
 *
 * One mutex (r->mu) serializes evaluations: rules' regex matchers hold
 * per-matcher match data (base/labels.h), and the state is shared.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "base/metrics.h"
#include "base/time.h"
#include "query/query.h"
#include "rules/rules.h"
#include "rules/rules_int.h"

#define BUCKETS 1024

typedef struct group {
    char *key; /* the by-values, each followed by '\x1f' (absent: empty) */
    double v;
} group;

typedef struct in_state {
    uint64_t hash;
    double total;
    group *prev;
    size_t n_prev;
    struct in_state *next;
} in_state;

typedef struct out_state {
    uint64_t hash;
    int64_t last_ts;
    struct out_state *next;
} out_state;

typedef struct rule_rt {
    pd_rule rule;
    int64_t last_eval_ms; /* 0: never */
    double last_eval_s;
    char last_error[sizeof(((pd_err *)0)->msg)];
    uint64_t evals, samples;
    in_state *in[BUCKETS];
    out_state *out[BUCKETS];
    size_t n_in, n_out;
} rule_rt;

struct pd_rules {
    pd_storage *st;
    pthread_mutex_t mu;
    rule_rt **rules;
    size_t n_rules;
    pd_remote **remotes;
    pd_remote_write_config *rcfg; /* as started, to tell an unchanged remote */
    size_t n_remotes;
    pd__rules_sink_fn sink; /* tests (rules_int.h) */
    void *sink_ctx;
};

void pd__rules_set_sink(pd_rules *r, pd__rules_sink_fn fn, void *ctx)
{
    pthread_mutex_lock(&r->mu);
    r->sink = fn;
    r->sink_ctx = ctx;
    pthread_mutex_unlock(&r->mu);
}

static void groups_free(group *g, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(g[i].key);
    free(g);
}

static void rt_free_state(rule_rt *rt)
{
    for (size_t b = 0; b < BUCKETS; b++) {
        for (in_state *s = rt->in[b], *nx; s; s = nx) {
            nx = s->next;
            groups_free(s->prev, s->n_prev);
            free(s);
        }
        for (out_state *s = rt->out[b], *nx; s; s = nx) {
            nx = s->next;
            free(s);
        }
        rt->in[b] = NULL;
        rt->out[b] = NULL;
    }
    rt->n_in = rt->n_out = 0;
}

static void rt_free(rule_rt *rt)
{
    if (!rt)
        return;
    rt_free_state(rt);
    pd_rule_release(&rt->rule);
    free(rt);
}

static bool same_rule(const pd_rule *a, const pd_rule *b)
{
    if (strcmp(a->record, b->record) || strcmp(a->selector, b->selector) ||
        strcmp(a->sample_type, b->sample_type) || !a->function != !b->function ||
        (a->function && strcmp(a->function, b->function)) || a->fn_match != b->fn_match ||
        a->n_by != b->n_by || pd_labels_cmp(&a->labels, &b->labels))
        return false;
    for (size_t i = 0; i < a->n_by; i++)
        if (strcmp(a->by[i], b->by[i]))
            return false;
    return true;
}

static bool same_remote(const pd_remote_write_config *a, const pd_remote_write_config *b)
{
#define S(x) (!a->x == !b->x && (!a->x || !strcmp(a->x, b->x)))
    if (!S(name) || !S(url) || !S(username) || !S(password) || a->timeout_ms != b->timeout_ms ||
        a->capacity != b->capacity || a->max_samples_per_send != b->max_samples_per_send ||
        a->min_backoff_ms != b->min_backoff_ms || a->max_backoff_ms != b->max_backoff_ms ||
        a->n_headers != b->n_headers)
        return false;
#undef S
    for (size_t i = 0; i < a->n_headers; i++)
        if (strcmp(a->headers[i], b->headers[i]))
            return false;
    return true;
}

static void describe(void)
{
    pd_metrics_describe("profd_rule_evaluations_total", PD_METRIC_COUNTER,
                        "Profiles evaluated by recording rules (one per rule and matching "
                        "profile).");
    pd_metrics_describe("profd_rule_evaluation_failures_total", PD_METRIC_COUNTER,
                        "Recording rule evaluations that failed (see GET /api/v1/rules' "
                        "lastError).");
    pd_metrics_describe("profd_rule_samples_total", PD_METRIC_COUNTER,
                        "Samples recording rules produced (queued for every remote_write).");
}

int pd_rules_new(pd_storage *st, pd_rules **out, pd_err *err)
{
    describe();
    pd_rules *r = calloc(1, sizeof *r);
    if (!r)
        return pd_err_set(err, PD_ENOMEM, "rules: out of memory");
    r->st = st;
    pthread_mutex_init(&r->mu, NULL);
    *out = r;
    return 0;
}

static void free_remote_cfgs(pd_remote_write_config *c, size_t n)
{
    pd_rules_config tmp = {.remotes = c, .n_remotes = n};
    pd_rules_config_release(&tmp);
}

int pd_rules_apply(pd_rules *r, pd_rules_config *cfg, pd_err *err)
{
    rule_rt **nr = calloc(cfg->n_rules ? cfg->n_rules : 1, sizeof *nr);
    pd_remote **nrm = calloc(cfg->n_remotes ? cfg->n_remotes : 1, sizeof *nrm);
    if (!nr || !nrm) {
        free(nr);
        free(nrm);
        return pd_err_set(err, PD_ENOMEM, "rules: out of memory applying the configuration");
    }
    pthread_mutex_lock(&r->mu);
    /* remotes: keep the unchanged, start the new */
    bool *kept = calloc(r->n_remotes ? r->n_remotes : 1, sizeof *kept);
    int rc = kept ? 0 : PD_ENOMEM;
    for (size_t i = 0; rc == 0 && i < cfg->n_remotes; i++) {
        for (size_t j = 0; j < r->n_remotes && !nrm[i]; j++)
            if (!kept[j] && same_remote(&r->rcfg[j], &cfg->remotes[i])) {
                nrm[i] = r->remotes[j];
                kept[j] = true;
            }
        if (!nrm[i])
            rc = pd_remote_start(&cfg->remotes[i], &nrm[i], err);
    }
    if (rc < 0) { /* undo: stop what was started here */
        for (size_t i = 0; i < cfg->n_remotes; i++) {
            bool old = false;
            for (size_t j = 0; j < r->n_remotes; j++)
                old |= nrm[i] == r->remotes[j];
            if (nrm[i] && !old)
                pd_remote_stop(nrm[i]);
        }
        pthread_mutex_unlock(&r->mu);
        free(kept);
        free(nr);
        free(nrm);
        return rc;
    }
    for (size_t j = 0; j < r->n_remotes; j++)
        if (!kept[j])
            pd_remote_stop(r->remotes[j]);
    free(kept);
    free(r->remotes);
    free_remote_cfgs(r->rcfg, r->n_remotes);
    r->remotes = nrm;
    r->rcfg = cfg->remotes;
    r->n_remotes = cfg->n_remotes;
    cfg->remotes = NULL;
    cfg->n_remotes = 0;

    /* rules: an unchanged rule keeps its state and history */
    for (size_t i = 0; i < cfg->n_rules; i++) {
        for (size_t j = 0; j < r->n_rules && !nr[i]; j++)
            if (r->rules[j] && same_rule(&r->rules[j]->rule, &cfg->rules[i])) {
                nr[i] = r->rules[j];
                r->rules[j] = NULL;
                pd_rule_release(&nr[i]->rule);
            }
        if (!nr[i] && !(nr[i] = calloc(1, sizeof *nr[i]))) {
            rc = pd_err_set(err, PD_ENOMEM, "rules: out of memory");
            break;
        }
        nr[i]->rule = cfg->rules[i];
        memset(&cfg->rules[i], 0, sizeof cfg->rules[i]);
    }
    for (size_t j = 0; j < r->n_rules; j++)
        rt_free(r->rules[j]);
    free(r->rules);
    r->rules = nr;
    r->n_rules = cfg->n_rules;
    if (rc < 0) { /* keep the rules built so far */
        size_t k = 0;
        for (size_t i = 0; i < r->n_rules; i++)
            if (nr[i])
                nr[k++] = nr[i];
        r->n_rules = k;
    }
    pthread_mutex_unlock(&r->mu);
    pd_rules_config_release(cfg);
    return rc;
}

void pd_rules_free(pd_rules *r)
{
    if (!r)
        return;
    for (size_t i = 0; i < r->n_remotes; i++)
        pd_remote_stop(r->remotes[i]);
    free(r->remotes);
    free_remote_cfgs(r->rcfg, r->n_remotes);
    for (size_t i = 0; i < r->n_rules; i++)
        rt_free(r->rules[i]);
    free(r->rules);
    pthread_mutex_destroy(&r->mu);
    free(r);
}

/* ---- evaluation ---- */

static uint64_t str_hash(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

/* The groups of one profile, in a small hash table. */
typedef struct gtab {
    group *v;
    size_t n, cap;
    size_t *slot; /* nslot entries: index + 1, 0 empty */
    size_t nslot;
} gtab;

static group *gtab_find(gtab *t, const char *key, bool add)
{
    if (add && (t->n + 1) * 2 > t->nslot) {
        size_t ns = t->nslot ? t->nslot * 2 : 64;
        size_t *sl = calloc(ns, sizeof *sl);
        if (!sl)
            return NULL;
        for (size_t i = 0; i < t->n; i++) {
            size_t h = (size_t)str_hash(t->v[i].key) & (ns - 1);
            while (sl[h])
                h = (h + 1) & (ns - 1);
            sl[h] = i + 1;
        }
        free(t->slot);
        t->slot = sl;
        t->nslot = ns;
    }
    if (!t->nslot)
        return NULL;
    size_t h = (size_t)str_hash(key) & (t->nslot - 1);
    while (t->slot[h]) {
        group *g = &t->v[t->slot[h] - 1];
        if (!strcmp(g->key, key))
            return g;
        h = (h + 1) & (t->nslot - 1);
    }
    if (!add)
        return NULL;
    if (t->n == t->cap) {
        size_t nc = t->cap ? t->cap * 2 : 16;
        group *nv = realloc(t->v, nc * sizeof *nv);
        if (!nv)
            return NULL;
        t->v = nv;
        t->cap = nc;
    }
    group *g = &t->v[t->n];
    if (!(g->key = strdup(key)))
        return NULL;
    g->v = 0;
    t->slot[h] = ++t->n;
    return g;
}

static in_state *in_find(rule_rt *rt, uint64_t h)
{
    for (in_state *s = rt->in [h % BUCKETS]; s; s = s->next)
        if (s->hash == h)
            return s;
    return NULL;
}

static const char *pstr(const pd_profile *p, int64_t i)
{
    return i >= 0 && (size_t)i < p->n_string ? p->string_table[i] : "";
}

/* Sends one sample of output series `key` to every remote (r->mu held). */
static int emit(pd_rules *r, rule_rt *rt, const char *key, int64_t ts, double v, pd_err *err)
{
    const pd_rule *ru = &rt->rule;
    pd_labels out;
    pd_labels_init(&out);
    int rc = pd_labels_copy(&out, &ru->labels);
    if (rc == 0)
        rc = pd_labels_set(&out, "__name__", ru->record, err);
    const char *p = key;
    char val[PD_LABEL_MAX_VALUE + 1];
    for (size_t i = 0; rc == 0 && i < ru->n_by; i++) {
        const char *e = strchr(p, '\x1f');
        size_t l = e ? (size_t)(e - p) : strlen(p);
        snprintf(val, sizeof val, "%.*s", (int)l, p);
        rc = pd_labels_set(&out, ru->by[i], val, err);
        p = e ? e + 1 : p + l;
    }
    if (rc == 0) {
        uint64_t h = pd_labels_hash(&out);
        out_state *o = rt->out[h % BUCKETS];
        while (o && o->hash != h)
            o = o->next;
        if (!o && rt->n_out < PD_RULES_MAX_SERIES && (o = calloc(1, sizeof *o))) {
            o->hash = h;
            o->last_ts = INT64_MIN;
            o->next = rt->out[h % BUCKETS];
            rt->out[h % BUCKETS] = o;
            rt->n_out++;
        }
        if (o) {
            if (ts <= o->last_ts)
                ts = o->last_ts + 1;
            o->last_ts = ts;
        }
        for (size_t i = 0; i < r->n_remotes; i++)
            pd_remote_enqueue(r->remotes[i], &out, ts, v);
        if (r->sink)
            r->sink(r->sink_ctx, &out, ts, v);
        rt->samples++;
        pd_metrics_add("profd_rule_samples_total", NULL, 1);
    }
    pd_labels_release(&out);
    return rc;
}

/* The groups of profile p of series `labels` by rule ru (its sample type's
 * values of the samples passing the function filter, summed by the `by`
 * labels) into *t (empty on entry; the caller frees t->v and t->slot), and
 * the sample type's total over every sample into *total. 0, PD_EINVAL (p has
 * no such sample type: err says which it has), PD_ETOOBIG (too many groups),
 * PD_ENOMEM. */
static int groups_of(const pd_rule *ru, const pd_labels *labels, const pd_profile *p, gtab *t,
                     double *total_out, pd_err *err)
{
    size_t vi = p->n_sample_type;
    for (size_t i = 0; i < p->n_sample_type; i++)
        if (!strcmp(pstr(p, p->sample_type[i].type), ru->sample_type)) {
            vi = i;
            break;
        }
    if (vi == p->n_sample_type) {
        char have[200] = "";
        for (size_t i = 0; i < p->n_sample_type && strlen(have) < 150; i++)
            snprintf(have + strlen(have), sizeof have - strlen(have), "%s%s", i ? ", " : "",
                     pstr(p, p->sample_type[i].type));
        return pd_err_set(err, PD_EINVAL, "a profile of %s has no sample type %s (it has: %s)",
                          pd_labels_get(labels, "__name__"), ru->sample_type, have);
    }
    int rc = 0;
    uint8_t *fm = NULL; /* per function index: 0 unknown, 1 match, 2 not */
    if (ru->function && !(fm = calloc(p->n_function ? p->n_function : 1, 1)))
        return PD_ENOMEM;
    pd_buf key;
    pd_buf_init(&key, 0);
    double total = 0;
    for (size_t s = 0; s < p->n_sample; s++) {
        const pd_pprof_sample *sm = &p->sample[s];
        if (vi >= sm->n_value)
            continue;
        double v = (double)sm->value[vi];
        total += v;
        if (ru->function) {
            bool hit = false;
            for (size_t l = 0; !hit && l < sm->n_location; l++) {
                const pd_pprof_location *loc = pd_profile_location(p, sm->location_id[l]);
                for (size_t k = 0; loc && !hit && k < loc->n_line; k++) {
                    const pd_pprof_function *fn = pd_profile_function(p, loc->line[k].function_id);
                    if (fn) {
                        size_t fi = (size_t)(fn - p->function);
                        if (!fm[fi])
                            fm[fi] = pd_matcher_matches(&ru->fn, pstr(p, fn->name)) ? 1 : 2;
                        hit = fm[fi] == 1;
                    }
                    if (ru->fn_match == PD_RULE_FN_SELF)
                        break; /* the innermost line of the leaf only */
                }
                if (ru->fn_match == PD_RULE_FN_SELF)
                    break;
            }
            if (!hit)
                continue;
        }
        pd_buf_reset(&key);
        for (size_t b = 0; b < ru->n_by; b++) {
            const char *val = pd_labels_get(labels, ru->by[b]);
            for (size_t k = 0; !val && k < sm->n_label; k++)
                if (sm->label[k].str && !strcmp(pstr(p, sm->label[k].key), ru->by[b]))
                    val = pstr(p, sm->label[k].str);
            if (val)
                for (const char *c = val; *c; c++)
                    if (*c != '\x1f')
                        pd_buf_putc(&key, *c);
            pd_buf_putc(&key, '\x1f');
        }
        pd_buf_putc(&key, 0);
        group *g = gtab_find(t, (const char *)key.data, t->n < PD_RULES_MAX_SERIES);
        if (!g) {
            rc = t->n >= PD_RULES_MAX_SERIES
                     ? pd_err_set(err, PD_ETOOBIG, "more than %d output series in one profile",
                                  PD_RULES_MAX_SERIES)
                     : PD_ENOMEM;
            goto out;
        }
        g->v += v;
    }

out:
    free(fm);
    pd_buf_release(&key);
    *total_out = total;
    return rc;
}

/* The stored profile before the one being evaluated, read once per
 * pd_rules_observe call and only when a cumulative rule has no state for
 * the input series: after a restart of profd the state in memory is gone,
 * the store still holds the series' previous profile, so the delta goes on
 * from it instead of restarting at 0. */
typedef struct baseline {
    bool tried, found;
    pd_profile p;
} baseline;

static void baseline_load(pd_storage *st, const pd_labels *labels, int64_t ts, baseline *bl)
{
    bl->tried = true;
    if (!st || !labels->n)
        return;
    pd_matcher *ms = calloc(labels->n, sizeof *ms);
    pd_series_set set = {0};
    pd_points pts = {0};
    pd_err e = {{0}};
    size_t n_ms = 0;
    if (!ms)
        return;
    for (; n_ms < labels->n; n_ms++)
        if (pd_matcher_init(&ms[n_ms], PD_MATCH_EQ, labels->v[n_ms].name, labels->v[n_ms].value,
                            &e) < 0)
            goto out;
    if (pd_storage_select(st, ms, n_ms, INT64_MIN, ts, &set, &e) < 0)
        goto out;
    for (size_t i = 0; i < set.n; i++) {
        if (pd_labels_cmp(&set.v[i].labels, labels)) /* a superset: another series */
            continue;
        if (pd_storage_read_point_before(st, set.v[i].ref, ts, &pts, &e) < 0 || !pts.n)
            break;
        if (pd_storage_read_profile(st, set.v[i].ref, pts.v[0].ts_ms, &bl->p, NULL, &e) == 0)
            bl->found = true;
        break;
    }
out:
    if (e.msg[0])
        pd_log(PD_LOG_WARN,
               "recording rules: the stored baseline of a cumulative series "
               "cannot be read; its first delta since start is 0",
               "err=\"%s\"", e.msg);
    pd_points_release(&pts);
    pd_series_set_release(&set);
    for (size_t i = 0; i < n_ms; i++)
        pd_matcher_release(&ms[i]);
    free(ms);
}

static int eval_rule(pd_rules *r, rule_rt *rt, const pd_labels *labels, int64_t ts,
                     const pd_profile *p, baseline *bl, pd_err *err)
{
    const pd_rule *ru = &rt->rule;
    gtab t = {0}, base = {0};
    double total = 0, base_total = 0;
    int rc = groups_of(ru, labels, p, &t, &total, err);
    if (rc < 0)
        goto out;
    bool cumulative = !strcmp(pd_query_sample_kind(labels, ru->sample_type), "cumulative");
    uint64_t h = pd_labels_hash(labels);
    in_state *st = in_find(rt, h);
    /* no state for the series (profd started since its last profile): the
       stored profile before this one is the baseline */
    bool have_base = false;
    if (cumulative && !st) {
        if (!bl->tried)
            baseline_load(r->st, labels, ts, bl);
        pd_err be = {{0}};
        have_base = bl->found && groups_of(ru, labels, &bl->p, &base, &base_total, &be) == 0;
    }
    const group *prev = st ? st->prev : base.v;
    size_t n_prev = st ? st->n_prev : have_base ? base.n : 0;
    bool first = !st && !have_base;
    bool reset = st ? total < st->total : have_base && total < base_total;
    for (size_t i = 0; i < t.n; i++) {
        double v = t.v[i].v;
        if (cumulative) {
            double before = 0;
            for (size_t k = 0; k < n_prev; k++) /* n_prev is small: by values */
                if (!strcmp(prev[k].key, t.v[i].key)) {
                    before = prev[k].v;
                    break;
                }
            v = first ? 0 : reset ? v : v - before;
        }
        int e = emit(r, rt, t.v[i].key, ts, v, err);
        if (e < 0 && rc == 0)
            rc = e;
    }
    /* output series of the previous profile with nothing now: 0 */
    for (size_t k = 0; k < n_prev; k++)
        if (!gtab_find(&t, prev[k].key, false)) {
            int e = emit(r, rt, prev[k].key, ts, 0, err);
            if (e < 0 && rc == 0)
                rc = e;
        }
    if (!st && rt->n_in < PD_RULES_MAX_SERIES && (st = calloc(1, sizeof *st))) {
        st->hash = h;
        st->next = rt->in[h % BUCKETS];
        rt->in[h % BUCKETS] = st;
        rt->n_in++;
    } else if (!st && rc == 0)
        rc = pd_err_set(err, PD_ETOOBIG, "more than %d input series: no deltas kept for more",
                        PD_RULES_MAX_SERIES);
    if (st) {
        groups_free(st->prev, st->n_prev);
        st->prev = t.v; /* moved */
        st->n_prev = t.n;
        st->total = total;
        t.v = NULL;
        t.n = 0;
    }
out:
    groups_free(t.v, t.n);
    free(t.slot);
    groups_free(base.v, base.n);
    free(base.slot);
    return rc;
}

void pd_rules_observe(void *ctx, const pd_labels *labels, int64_t ts_ms, const pd_profile *profile)
{
    pd_rules *r = ctx;
    if (!r || !profile)
        return;
    baseline bl = {0};
    pthread_mutex_lock(&r->mu);
    for (size_t i = 0; i < r->n_rules; i++) {
        rule_rt *rt = r->rules[i];
        if (!pd_matchers_match(rt->rule.ms, rt->rule.n_ms, labels))
            continue;
        int64_t t0 = pd_mono_ns();
        pd_err err = {{0}};
        int rc = eval_rule(r, rt, labels, ts_ms, profile, &bl, &err);
        rt->evals++;
        rt->last_eval_ms = pd_now_ms();
        rt->last_eval_s = (double)(pd_mono_ns() - t0) / 1e9;
        char lbl[300];
        snprintf(lbl, sizeof lbl, "rule=\"%s\"", rt->rule.record);
        pd_metrics_add("profd_rule_evaluations_total", lbl, 1);
        if (rc < 0) {
            snprintf(rt->last_error, sizeof rt->last_error, "%s",
                     err.msg[0] ? err.msg : pd_strerror(rc));
            pd_metrics_add("profd_rule_evaluation_failures_total", lbl, 1);
            pd_log(PD_LOG_WARN, "recording rule failed", "rule=%s err=\"%s\"", rt->rule.record,
                   rt->last_error);
        } else
            rt->last_error[0] = 0;
    }
    pthread_mutex_unlock(&r->mu);
    if (bl.found)
        pd_profile_release(&bl.p);
}

/* ---- GET /api/v1/rules ---- */

static void jstr(pd_buf *b, const char *s)
{
    pd_buf_put_json_string(b, s, strlen(s));
}

int pd_rules_write_json(pd_rules *r, pd_buf *b)
{
    pd_buf_puts(b, "{\"groups\":[");
    if (r) {
        pthread_mutex_lock(&r->mu);
        if (r->n_rules) {
            pd_buf_puts(b, "{\"name\":\"recording_rules\",\"file\":");
            /* the file of the first rule: "FILE:LINE" without the line */
            const char *src = r->rules[0]->rule.source ? r->rules[0]->rule.source : "";
            const char *colon = strrchr(src, ':');
            pd_buf_put_json_string(b, src, colon ? (size_t)(colon - src) : strlen(src));
            pd_buf_puts(b, ",\"rules\":[");
        }
        for (size_t i = 0; i < r->n_rules; i++) {
            const rule_rt *rt = r->rules[i];
            const pd_rule *ru = &rt->rule;
            pd_buf_puts(b, i ? ",{\"name\":" : "{\"name\":");
            jstr(b, ru->record);
            pd_buf_puts(b, ",\"query\":");
            jstr(b, ru->selector);
            pd_buf_puts(b, ",\"sampleType\":");
            jstr(b, ru->sample_type);
            pd_buf_puts(b, ",\"function\":");
            if (ru->function)
                jstr(b, ru->function);
            else
                pd_buf_puts(b, "null");
            pd_buf_printf(b, ",\"functionMatch\":\"%s\",\"by\":[",
                          ru->fn_match == PD_RULE_FN_SELF ? "self" : "total");
            for (size_t k = 0; k < ru->n_by; k++) {
                if (k)
                    pd_buf_putc(b, ',');
                jstr(b, ru->by[k]);
            }
            pd_buf_puts(b, "],\"labels\":{");
            for (size_t k = 0; k < ru->labels.n; k++) {
                if (k)
                    pd_buf_putc(b, ',');
                jstr(b, ru->labels.v[k].name);
                pd_buf_putc(b, ':');
                jstr(b, ru->labels.v[k].value);
            }
            pd_buf_printf(b, "},\"health\":\"%s\",\"lastError\":",
                          !rt->evals          ? "unknown"
                          : rt->last_error[0] ? "err"
                                              : "ok");
            jstr(b, rt->last_error);
            pd_buf_printf(b, ",\"evaluations\":%llu,\"samples\":%llu,\"lastEvaluation\":",
                          (unsigned long long)rt->evals, (unsigned long long)rt->samples);
            if (rt->last_eval_ms) {
                char t[64];
                pd_format_rfc3339(rt->last_eval_ms, t, sizeof t);
                jstr(b, t);
            } else
                pd_buf_puts(b, "null");
            pd_buf_printf(b, ",\"evaluationTime\":%.6f,\"source\":", rt->last_eval_s);
            jstr(b, ru->source ? ru->source : "");
            pd_buf_puts(b, ",\"type\":\"recording\"}");
        }
        if (r->n_rules)
            pd_buf_puts(b, "]}");
        pthread_mutex_unlock(&r->mu);
    }
    return pd_buf_puts(b, "]}");
}
