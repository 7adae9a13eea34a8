/*
 * scrape/config_adaptive.c — a job's adaptive_capture block (issue 18; keys,
 * defaults and meaning in config.h's pd_adaptive_config). Strict as the rest
 * of the reader: unknown keys and values of the wrong type are errors naming
 * FILE:LINE:COL.
 *
 *   adaptive_capture:
 *     scrape_interval: 1s
 *     profiles: [heap, goroutine]
 *     heap_growth_bytes_per_minute: 64MiB
 *     heap_growth_percent_per_minute: 50
 *     growth_window: 1m
 *     heap_limit: 2GiB
 *     limit_fraction: 0.8
 *     max_duration: 5m
 *     max_targets: 5
 *     byte_budget_per_minute: 64MiB
 *     alert_labels: {job: job, instance: instance}
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/time.h"
#include "scrape/config_int.h"

int pd_adaptive_config_copy(pd_adaptive_config *dst, const pd_adaptive_config *src)
{
    *dst = *src;
    dst->profiles = NULL;
    dst->n_profiles = 0;
    pd_labels_init(&dst->alert_labels);
    if (src->n_profiles) {
        if (!(dst->profiles = calloc(src->n_profiles, sizeof *dst->profiles)))
            goto oom;
        for (size_t i = 0; i < src->n_profiles; i++, dst->n_profiles++)
            if (!(dst->profiles[i] = strdup(src->profiles[i])))
                goto oom;
    }
    if (pd_labels_copy(&dst->alert_labels, &src->alert_labels))
        goto oom;
    return 0;
oom:
    pd_adaptive_config_release(dst);
    return PD_ENOMEM;
}

void pd_adaptive_config_release(pd_adaptive_config *a)
{
    for (size_t i = 0; i < a->n_profiles; i++)
        free(a->profiles[i]);
    free(a->profiles);
    pd_labels_release(&a->alert_labels);
    memset(a, 0, sizeof *a);
}

static int want_size(pd__cfg_ctx *c, const yaml_node_t *n, const char *what, uint64_t *out)
{
    const char *s;
    size_t v;
    int rc = pd__cfg_want_str(c, n, what, &s);
    if (rc)
        return rc;
    if (pd_config_parse_size(s, &v))
        return pd__cfg_fail(c, n, PD_EINVAL,
                            "%s \"%.64s\": want a size such as 0, 512KB, 64MiB, 1GB", what, s);
    *out = v;
    return 0;
}

/* A number in (min, max] (min exclusive). */
static int want_number(pd__cfg_ctx *c, const yaml_node_t *n, const char *what, double min,
                       double max, double *out)
{
    const char *s;
    int rc = pd__cfg_want_str(c, n, what, &s);
    if (rc)
        return rc;
    char *end;
    double v = strtod(s, &end);
    if (!s[0] || *end || !isfinite(v) || v <= min || v > max)
        return pd__cfg_fail(c, n, PD_EINVAL, "%s \"%.64s\": want a number over %g and at most %g",
                            what, s, min, max);
    *out = v;
    return 0;
}

int pd__cfg_parse_adaptive(pd__cfg_ctx *c, const yaml_node_t *n, pd_scrape_job *job)
{
    enum {
        K_ENABLED,
        K_INTERVAL,
        K_PROFILES,
        K_GROWTH_BYTES,
        K_GROWTH_PCT,
        K_WINDOW,
        K_LIMIT,
        K_FRACTION,
        K_MAX_DURATION,
        K_MAX_TARGETS,
        K_BUDGET,
        K_ALERT_LABELS,
        K_N
    };
    static const char *const keys[K_N + 1] = {"enabled",
                                              "scrape_interval",
                                              "profiles",
                                              "heap_growth_bytes_per_minute",
                                              "heap_growth_percent_per_minute",
                                              "growth_window",
                                              "heap_limit",
                                              "limit_fraction",
                                              "max_duration",
                                              "max_targets",
                                              "byte_budget_per_minute",
                                              "alert_labels",
                                              NULL};
    pd_adaptive_config *a = &job->adaptive;
    yaml_node_t *v[K_N];
    bool empty;
    int rc;
    if ((rc = pd__cfg_want_map(c, n, "adaptive_capture", &empty)))
        return rc;
    if ((rc = pd__cfg_map_keys(c, n, "adaptive_capture", keys, v)))
        return rc;
    a->enabled = true;
    a->interval_ms = 1000;
    a->growth_window_ms = 60000;
    a->limit_fraction = 0.8;
    a->max_duration_ms = 5 * 60000;
    a->max_targets = 5;
    a->byte_budget_per_min = 64u << 20;
    pd_labels_init(&a->alert_labels);
    if (v[K_ENABLED] &&
        (rc = pd__cfg_want_bool(c, v[K_ENABLED], "adaptive_capture.enabled", &a->enabled)))
        return rc;
    if ((v[K_INTERVAL] &&
         (rc = pd__cfg_want_duration(c, v[K_INTERVAL], "adaptive_capture.scrape_interval",
                                     &a->interval_ms))) ||
        (v[K_WINDOW] &&
         (rc = pd__cfg_want_duration(c, v[K_WINDOW], "adaptive_capture.growth_window",
                                     &a->growth_window_ms))) ||
        (v[K_MAX_DURATION] &&
         (rc = pd__cfg_want_duration(c, v[K_MAX_DURATION], "adaptive_capture.max_duration",
                                     &a->max_duration_ms))) ||
        (v[K_MAX_TARGETS] &&
         (rc = pd__cfg_want_int(c, v[K_MAX_TARGETS], "adaptive_capture.max_targets", 1, 1000000,
                                &a->max_targets))) ||
        (v[K_GROWTH_BYTES] &&
         (rc = want_size(c, v[K_GROWTH_BYTES], "adaptive_capture.heap_growth_bytes_per_minute",
                         &a->growth_bytes_per_min))) ||
        (v[K_GROWTH_PCT] &&
         (rc = want_number(c, v[K_GROWTH_PCT], "adaptive_capture.heap_growth_percent_per_minute", 0,
                           1e9, &a->growth_percent_per_min))) ||
        (v[K_LIMIT] &&
         (rc = want_size(c, v[K_LIMIT], "adaptive_capture.heap_limit", &a->heap_limit_bytes))) ||
        (v[K_FRACTION] && (rc = want_number(c, v[K_FRACTION], "adaptive_capture.limit_fraction", 0,
                                            1, &a->limit_fraction))) ||
        (v[K_BUDGET] && (rc = want_size(c, v[K_BUDGET], "adaptive_capture.byte_budget_per_minute",
                                        &a->byte_budget_per_min))))
        return rc;
    if (a->interval_ms >= job->interval_ms) {
        char iv[32], bv[32];
        pd_format_duration(job->interval_ms, iv, sizeof iv);
        pd_format_duration(a->interval_ms, bv, sizeof bv);
        return pd__cfg_fail(c, v[K_INTERVAL] ? v[K_INTERVAL] : n, PD_EINVAL,
                            "adaptive_capture.scrape_interval (%s) must be shorter than the job's "
                            "scrape_interval (%s)",
                            bv, iv);
    }
    if (v[K_PROFILES]) {
        const yaml_node_t *s = v[K_PROFILES];
        if ((rc = pd__cfg_want_seq(c, s, "adaptive_capture.profiles", &empty)))
            return rc;
        size_t cnt =
            empty ? 0 : (size_t)(s->data.sequence.items.top - s->data.sequence.items.start);
        if (!cnt)
            return pd__cfg_fail(c, s, PD_EINVAL,
                                "adaptive_capture.profiles is empty: name the profile types to "
                                "scrape fast (e.g. [heap, goroutine])");
        if (!(a->profiles = calloc(cnt, sizeof *a->profiles)))
            return PD_ENOMEM;
        for (size_t i = 0; i < cnt; i++) {
            yaml_node_t *pn = pd__cfg_node(c, s->data.sequence.items.start[i]);
            if (!pn)
                return pd__cfg_fail(c, s, PD_EPARSE, "adaptive_capture.profiles: broken YAML node");
            if ((rc = pd__cfg_want_dup(c, pn, "adaptive_capture.profiles entry", &a->profiles[i])))
                return rc;
            a->n_profiles++;
            bool known = false;
            for (size_t e = 0; e < job->n_endpoints && !known; e++) {
                known = !strcmp(job->endpoints[e].name, a->profiles[i]);
                if (known && job->endpoints[e].seconds > 0)
                    return pd__cfg_fail(c, pn, PD_EINVAL,
                                        "adaptive_capture.profiles: \"%.64s\" has a profile window "
                                        "(seconds: %lld), which cannot be taken every "
                                        "scrape_interval of a burst; list profiles without one "
                                        "(heap, goroutine)",
                                        a->profiles[i], (long long)job->endpoints[e].seconds);
            }
            if (!known)
                return pd__cfg_fail(c, pn, PD_EINVAL,
                                    "adaptive_capture.profiles: \"%.64s\" is not a profile type "
                                    "of job \"%.128s\"",
                                    a->profiles[i], job->job_name);
        }
    } else {
        static const char *const defs[] = {"heap", "memory", "goroutine"};
        if (!(a->profiles = calloc(3, sizeof *a->profiles)))
            return PD_ENOMEM;
        for (size_t i = 0; i < 3; i++)
            if (!(a->profiles[a->n_profiles++] = strdup(defs[i])))
                return PD_ENOMEM;
    }
    if (v[K_ALERT_LABELS]) {
        const yaml_node_t *m = v[K_ALERT_LABELS];
        if ((rc = pd__cfg_want_map(c, m, "adaptive_capture.alert_labels", &empty)))
            return rc;
        for (yaml_node_pair_t *p = m->data.mapping.pairs.start;
             !empty && p < m->data.mapping.pairs.top; p++) {
            const char *name, *val;
            if ((rc = pd__cfg_free_key(c, m, p, "adaptive_capture.alert_labels", &name)))
                return rc;
            yaml_node_t *vn = pd__cfg_node(c, p->value);
            if ((rc = pd__cfg_want_str(c, vn, "adaptive_capture.alert_labels value", &val)))
                return rc;
            if (!pd_label_name_classic(name) || !pd_label_name_classic(val))
                return pd__cfg_fail(c, vn, PD_EINVAL,
                                    "adaptive_capture.alert_labels: \"%.64s: %.64s\" is not an "
                                    "alert label name mapped to a target label name",
                                    name, val);
            pd_err e;
            pd_err_clear(&e);
            if ((rc = pd_labels_set(&a->alert_labels, name, val, &e)))
                return rc == PD_ENOMEM ? rc : pd__cfg_fail(c, vn, rc, "%s", e.msg);
        }
    } else if (pd_labels_set(&a->alert_labels, "job", "job", NULL) ||
               pd_labels_set(&a->alert_labels, "instance", "instance", NULL)) {
        return PD_ENOMEM;
    }
    if (!a->alert_labels.n)
        return pd__cfg_fail(c, v[K_ALERT_LABELS] ? v[K_ALERT_LABELS] : n, PD_EINVAL,
                            "adaptive_capture.alert_labels is empty: alerts could match no target");
    return 0;
}
