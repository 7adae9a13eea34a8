/*
 * scrape/adaptive.c — the state of adaptive capture (rules in adaptive.h).
 *
 * Events: events.c (the ring and its file).
 *
 * State, all under the manager's lock:
 *   pd__adaptive   the bursts (one per target of an adaptive job: job +
 *                  labels without __name__; the manager's per-profile-type
 *                  targets of one instance share it), the per-job states and
 *                  the event ring.
 *   pd__burst      heap samples of the target (a ring of HEAP_SAMPLES
 *                  (ts, in use) pairs), whether it is in burst, since when and
 *                  why, the alerts holding it, the last stored profile.
 *   job_state      the job's adaptive_capture (a copy), how many targets are
 *                  in burst, and the burst bytes of the current minute.
 *   the events     pd__events (events.c).
 *
 * The manager's loop asks pd__burst_interval() of each target whose profile
 * type is a burst type and switches its schedule when the answer changes;
 * finish_scrape feeds pd__burst_scraped() and pd__burst_observe().
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "base/metrics.h"
#include "base/time.h"
#include "scrape/scrape_int.h"

#define HEAP_SAMPLES 128
#define MAX_ALERTS 8 /* alerts remembered per target */

typedef struct job_state job_state;
struct job_state {
    job_state *next;
    char *name;
    char *mlabels; /* job="..." escaped */
    pd_adaptive_config cfg;
    int64_t normal_interval_ms;
    size_t in_burst;
    int64_t minute; /* wall minute of bytes */
    uint64_t bytes; /* burst bytes in that minute */
    bool seen;
};

typedef struct alert_ref {
    char key[72];
    int64_t starts_at_ms;
    bool active; /* holds the burst; false: capped by max_duration (not restarted) */
} alert_ref;

struct pd__burst {
    pd__burst *next;
    pd__adaptive *a;
    job_state *js;
    char *ident;      /* job \n labels */
    pd_labels labels; /* without __name__ */
    char *instance;   /* for messages */
    bool seen;
    /* heap samples */
    int64_t ts[HEAP_SAMPLES], v[HEAP_SAMPLES];
    size_t ns, head; /* count, index of the next write */
    /* burst */
    bool active;
    const char *reason; /* start reason (static) */
    int64_t started_mono, ended_mono;
    alert_ref alerts[MAX_ALERTS];
    size_t n_alerts;
    /* the end */
    int64_t last_profile_ms;
    char last_type[64];
    bool down; /* target_down recorded, waiting for a success */
};

struct pd__adaptive {
    pd__burst *bursts;
    job_state *jobs;
    pd__events *events; /* events.c */
};

static void describe(void)
{
    pd_metrics_describe("profd_adaptive_bursts_started_total", PD_METRIC_COUNTER,
                        "Adaptive capture bursts started, by job and reason (growth, limit, "
                        "alert).");
    pd_metrics_describe("profd_adaptive_bursts_ended_total", PD_METRIC_COUNTER,
                        "Adaptive capture bursts ended, by job and reason (calm, max_duration, "
                        "resolved, target_down, reload).");
    pd_metrics_describe("profd_adaptive_bursts_refused_total", PD_METRIC_COUNTER,
                        "Bursts not started because the job had max_targets targets in burst.");
    pd_metrics_describe("profd_adaptive_targets_in_burst", PD_METRIC_GAUGE,
                        "Targets of the job in an adaptive capture burst now.");
    pd_metrics_describe("profd_adaptive_burst_profiles_total", PD_METRIC_COUNTER,
                        "Profiles stored by burst scrapes, by job and profile type.");
    pd_metrics_describe("profd_adaptive_burst_bytes_total", PD_METRIC_COUNTER,
                        "Bytes of profiles stored by burst scrapes, by job.");
    pd_metrics_describe(
        "profd_adaptive_slots_over_budget_total", PD_METRIC_COUNTER,
        "Burst scrapes skipped because the job's byte_budget_per_minute was spent.");
    pd_metrics_describe("profd_adaptive_events_total", PD_METRIC_COUNTER,
                        "Events recorded (/api/v1/events), by kind.");
    pd_metrics_describe("profd_adaptive_events_file_errors_total", PD_METRIC_COUNTER,
                        "Events that could not be appended to the events file (kept in memory).");
    pd_metrics_describe("profd_adaptive_events_file_damaged_total", PD_METRIC_COUNTER,
                        "Opens of the events file that dropped a damaged tail.");
}

int pd__adaptive_new(pd__adaptive **out)
{
    *out = calloc(1, sizeof **out);
    if (!*out)
        return PD_ENOMEM;
    if (pd__events_new(&(*out)->events)) {
        free(*out);
        *out = NULL;
        return PD_ENOMEM;
    }
    describe();
    return 0;
}

int pd__adaptive_events_open(pd__adaptive *a, const char *path, pd_err *err)
{
    return pd__events_open(a->events, path, err);
}

static void burst_free(pd__burst *b)
{
    free(b->ident);
    free(b->instance);
    pd_labels_release(&b->labels);
    free(b);
}

static void job_free(job_state *j)
{
    free(j->name);
    free(j->mlabels);
    pd_adaptive_config_release(&j->cfg);
    free(j);
}

void pd__adaptive_free(pd__adaptive *a)
{
    if (!a)
        return;
    while (a->bursts) {
        pd__burst *b = a->bursts;
        a->bursts = b->next;
        burst_free(b);
    }
    while (a->jobs) {
        job_state *j = a->jobs;
        if (j->mlabels)
            pd_metrics_remove("profd_adaptive_targets_in_burst", j->mlabels);
        a->jobs = j->next;
        job_free(j);
    }
    pd__events_free(a->events);
    free(a);
}

static int put_escaped(pd_buf *b, const char *s)
{
    int rc = 0;
    for (; *s && !rc; s++)
        rc = *s == '\\'   ? pd_buf_puts(b, "\\\\")
             : *s == '"'  ? pd_buf_puts(b, "\\\"")
             : *s == '\n' ? pd_buf_puts(b, "\\n")
                          : pd_buf_putc(b, *s);
    return rc;
}

/* job="...",<extra> into a static-size-free string; NULL on ENOMEM. */
static char *mlabels(const job_state *j, const char *extra_name, const char *extra_value)
{
    pd_buf b;
    pd_buf_init(&b, 0);
    if (pd_buf_puts(&b, j->mlabels) ||
        (extra_name && (pd_buf_printf(&b, ",%s=\"", extra_name) || put_escaped(&b, extra_value) ||
                        pd_buf_putc(&b, '"')))) {
        pd_buf_release(&b);
        return NULL;
    }
    return pd_buf_detach(&b, NULL);
}

static void count(const job_state *j, const char *family, const char *name, const char *value,
                  double v)
{
    char *l = mlabels(j, name, value);
    if (l)
        pd_metrics_add(family, l, v);
    free(l);
}

/* Records an event of b's target (kind and reason static strings). */
static void record_event(pd__adaptive *a, const pd__burst *b, const char *kind, int64_t time_ms,
                         const char *reason, const char *message, int64_t last_profile_ms,
                         const char *error)
{
    pd__events_add(a->events, kind, time_ms, b->js->name, &b->labels, reason, message,
                   last_profile_ms, b->last_type, error);
    pd_log_info("adaptive capture", "event=%s job=\"%s\" instance=\"%s\" reason=\"%s\"", kind,
                b->js->name, b->instance, reason);
}

/* ---- apply ---- */

void pd__adaptive_begin_apply(pd__adaptive *a)
{
    for (pd__burst *b = a->bursts; b; b = b->next)
        b->seen = false;
    for (job_state *j = a->jobs; j; j = j->next)
        j->seen = false;
}

static job_state *job_ref(pd__adaptive *a, const pd_scrape_job *job)
{
    job_state *j;
    for (j = a->jobs; j; j = j->next)
        if (!strcmp(j->name, job->job_name))
            break;
    if (!j) {
        pd_buf b;
        pd_buf_init(&b, 0);
        if (!(j = calloc(1, sizeof *j)) || !(j->name = strdup(job->job_name)) ||
            pd_buf_puts(&b, "job=\"") || put_escaped(&b, job->job_name) || pd_buf_putc(&b, '"')) {
            pd_buf_release(&b);
            if (j)
                free(j->name);
            free(j);
            return NULL;
        }
        j->mlabels = pd_buf_detach(&b, NULL);
        j->next = a->jobs;
        a->jobs = j;
        pd_metrics_set("profd_adaptive_targets_in_burst", j->mlabels, 0);
    }
    if (!j->seen) { /* the new configuration of the job */
        pd_adaptive_config c;
        if (pd_adaptive_config_copy(&c, &job->adaptive))
            return NULL;
        pd_adaptive_config_release(&j->cfg);
        j->cfg = c;
        j->normal_interval_ms = job->interval_ms;
        j->seen = true;
    }
    return j;
}

pd__burst *pd__adaptive_ref(pd__adaptive *a, const pd_scrape_job *job, const pd_labels *labels)
{
    job_state *j = job_ref(a, job);
    if (!j)
        return NULL;
    pd_buf b;
    pd_buf_init(&b, 0);
    pd_labels ls;
    pd_labels_init(&ls);
    pd__burst *r = NULL;
    if (pd_labels_copy(&ls, labels) || pd_labels_set(&ls, "__name__", "", NULL) ||
        pd_buf_puts(&b, job->job_name) || pd_buf_putc(&b, '\n') || pd_labels_format(&ls, &b))
        goto out;
    for (r = a->bursts; r; r = r->next)
        if (!strcmp(r->ident, b.data))
            break;
    if (!r) {
        const char *inst = pd_labels_get(&ls, "instance");
        if (!(r = calloc(1, sizeof *r)) || !(r->instance = strdup(inst ? inst : "?"))) {
            free(r);
            r = NULL;
            goto out;
        }
        r->ident = pd_buf_detach(&b, NULL);
        r->labels = ls;
        pd_labels_init(&ls);
        r->next = a->bursts;
        a->bursts = r;
    }
    r->js = j;
    r->a = a;
    r->seen = true;
out:
    pd_labels_release(&ls);
    pd_buf_release(&b);
    return r;
}

static void set_gauge(const job_state *j)
{
    pd_metrics_set("profd_adaptive_targets_in_burst", j->mlabels, (double)j->in_burst);
}

static void end_burst(pd__adaptive *a, pd__burst *b, const char *reason, int64_t now_mono)
{
    if (!b->active)
        return;
    b->active = false;
    b->ended_mono = now_mono;
    for (size_t i = 0; i < b->n_alerts; i++)
        b->alerts[i].active = false;
    if (b->js->in_burst)
        b->js->in_burst--;
    set_gauge(b->js);
    count(b->js, "profd_adaptive_bursts_ended_total", "reason", reason, 1);
    char msg[600];
    snprintf(msg, sizeof msg, "burst of %s ended: %s after %.1f s", b->instance, reason,
             (double)(now_mono - b->started_mono) / 1000);
    record_event(a, b, "burst_ended", pd_now_ms(), reason, msg, 0, NULL);
}

/* Starts a burst of b (reason static). false when the job's max_targets is reached. */
static bool start_burst(pd__adaptive *a, pd__burst *b, const char *reason, int64_t now_mono,
                        const char *detail)
{
    if (b->active)
        return true;
    if ((int64_t)b->js->in_burst >= b->js->cfg.max_targets) {
        count(b->js, "profd_adaptive_bursts_refused_total", "reason", "max_targets", 1);
        return false;
    }
    b->active = true;
    b->reason = reason;
    b->started_mono = now_mono;
    b->js->in_burst++;
    set_gauge(b->js);
    count(b->js, "profd_adaptive_bursts_started_total", "reason", reason, 1);
    char msg[600];
    snprintf(msg, sizeof msg, "burst of %s started: %s", b->instance, detail);
    record_event(a, b, "burst_started", pd_now_ms(), reason, msg, 0, NULL);
    return true;
}

void pd__adaptive_end_apply(pd__adaptive *a)
{
    int64_t now = pd_mono_ns() / 1000000;
    for (pd__burst **pp = &a->bursts; *pp;) {
        pd__burst *b = *pp;
        if (b->seen && b->js->cfg.enabled) {
            pp = &b->next;
            continue;
        }
        end_burst(a, b, "reload", now);
        *pp = b->next;
        burst_free(b);
    }
    for (job_state **pp = &a->jobs; *pp;) {
        job_state *j = *pp;
        if (j->seen) {
            pp = &j->next;
            continue;
        }
        pd_metrics_remove("profd_adaptive_targets_in_burst", j->mlabels);
        *pp = j->next;
        job_free(j);
    }
}

/* ---- the loop ---- */

bool pd__burst_profile(const pd__burst *b, const char *name)
{
    for (size_t i = 0; i < b->js->cfg.n_profiles; i++)
        if (!strcmp(b->js->cfg.profiles[i], name))
            return true;
    return false;
}

void pd__adaptive_tick(pd__adaptive *a, int64_t now_mono)
{
    for (pd__burst *b = a->bursts; b; b = b->next)
        if (b->active && now_mono - b->started_mono >= b->js->cfg.max_duration_ms)
            end_burst(a, b, "max_duration", now_mono);
}

int64_t pd__burst_interval(const pd__burst *b)
{
    return b->active ? b->js->cfg.interval_ms : 0;
}

bool pd__burst_budget_ok(pd__burst *b, int64_t now_wall)
{
    job_state *j = b->js;
    if (!j->cfg.byte_budget_per_min)
        return true;
    if (now_wall / 60000 != j->minute) {
        j->minute = now_wall / 60000;
        j->bytes = 0;
    }
    return j->bytes < j->cfg.byte_budget_per_min;
}

void pd__burst_over_budget(pd__burst *b)
{
    pd_metrics_add("profd_adaptive_slots_over_budget_total", b->js->mlabels, 1);
}

void pd__burst_scraped(pd__burst *b, bool ok, int64_t start_ms, int64_t end_ms, size_t bytes,
                       bool in_burst, const char *metric_labels, const char *name, bool conn_failed,
                       const char *reason, const char *error, int64_t now_mono)
{
    job_state *j = b->js;
    if (ok) {
        if (start_ms >= b->last_profile_ms) {
            b->last_profile_ms = start_ms;
            snprintf(b->last_type, sizeof b->last_type, "%s", name);
        }
        b->down = false;
        if (in_burst) {
            if (start_ms / 60000 != j->minute) {
                j->minute = start_ms / 60000;
                j->bytes = 0;
            }
            j->bytes += bytes;
            pd_metrics_add("profd_adaptive_burst_profiles_total", metric_labels, 1);
            pd_metrics_add("profd_adaptive_burst_bytes_total", j->mlabels, (double)bytes);
        }
        return;
    }
    if (!conn_failed || b->down)
        return;
    bool just_after = b->ended_mono && now_mono - b->ended_mono <= 2 * j->normal_interval_ms;
    if (!b->active && !in_burst && !just_after)
        return;
    b->down = true;
    /* dated when the failing attempt ended (a 9 s CPU scrape in flight at the
     * death started before profiles taken meanwhile), never before the last
     * profile (a wall clock stepped back) */
    int64_t down_ms = end_ms > b->last_profile_ms ? end_ms : b->last_profile_ms;
    char msg[700];
    if (b->last_profile_ms)
        snprintf(msg, sizeof msg, "last profile %.1f s before %s went down (%s)",
                 (double)(down_ms - b->last_profile_ms) / 1000, b->instance, reason);
    else
        snprintf(msg, sizeof msg, "%s went down (%s) before any profile was stored", b->instance,
                 reason);
    record_event(b->a, b, "target_down", down_ms, reason, msg, b->last_profile_ms, error);
    end_burst(b->a, b, "target_down", now_mono);
}

/* The growth (bytes/min) between the newest sample and the oldest one
 * within the window; false when there are not two samples 1 s apart. */
static bool growth(const pd__burst *b, double *bytes_per_min, double *pct_per_min)
{
    if (b->ns < 2)
        return false;
    size_t newest = (b->head + HEAP_SAMPLES - 1) % HEAP_SAMPLES;
    int64_t t1 = b->ts[newest], v1 = b->v[newest];
    size_t oldest = newest;
    for (size_t k = 1; k < b->ns; k++) {
        size_t i = (newest + HEAP_SAMPLES - k) % HEAP_SAMPLES;
        if (t1 - b->ts[i] > b->js->cfg.growth_window_ms)
            break;
        oldest = i;
    }
    int64_t dt = t1 - b->ts[oldest];
    if (oldest == newest || dt < 1000)
        return false;
    double d = (double)(v1 - b->v[oldest]);
    *bytes_per_min = d * 60000.0 / (double)dt;
    *pct_per_min = b->v[oldest] > 0 ? *bytes_per_min * 100.0 / (double)b->v[oldest] : 0;
    return true;
}

void pd__burst_observe(pd__burst *b, int64_t ts_ms, int64_t inuse, int64_t now_mono)
{
    const pd_adaptive_config *c = &b->js->cfg;
    if (b->ns && ts_ms <= b->ts[(b->head + HEAP_SAMPLES - 1) % HEAP_SAMPLES])
        return; /* out of order */
    b->ts[b->head] = ts_ms;
    b->v[b->head] = inuse;
    b->head = (b->head + 1) % HEAP_SAMPLES;
    if (b->ns < HEAP_SAMPLES)
        b->ns++;
    double bpm = 0, pct = 0;
    bool have = growth(b, &bpm, &pct);
    bool grows = have && ((c->growth_bytes_per_min && bpm >= (double)c->growth_bytes_per_min) ||
                          (c->growth_percent_per_min > 0 && pct >= c->growth_percent_per_min));
    bool near =
        c->heap_limit_bytes && (double)inuse >= c->limit_fraction * (double)c->heap_limit_bytes;
    char detail[300];
    if (!b->active && (grows || near)) {
        if (near)
            snprintf(detail, sizeof detail,
                     "heap in use %.1f MiB is over %.0f %% of the limit %.1f MiB",
                     (double)inuse / 1048576, c->limit_fraction * 100,
                     (double)c->heap_limit_bytes / 1048576);
        else
            snprintf(detail, sizeof detail,
                     "heap in use grows %.1f MiB/min (%.0f %%/min), at %.1f MiB", bpm / 1048576,
                     pct, (double)inuse / 1048576);
        start_burst(b->a, b, near ? "limit" : "growth", now_mono, detail);
    } else if (b->active && !grows && !near && b->n_alerts == 0 &&
               (!strcmp(b->reason, "growth") || !strcmp(b->reason, "limit")) &&
               now_mono - b->started_mono >= c->growth_window_ms) {
        end_burst(b->a, b, "calm", now_mono);
    }
}

int64_t pd__adaptive_heap_inuse(const pd_profile *p)
{
    for (size_t i = 0; i < p->n_sample_type; i++) {
        int64_t t = p->sample_type[i].type;
        if (t < 0 || (size_t)t >= p->n_string || strcmp(p->string_table[t], "inuse_space"))
            continue;
        int64_t sum = 0;
        for (size_t k = 0; k < p->n_sample; k++)
            if (i < p->sample[k].n_value)
                sum += p->sample[k].value[i];
        return sum < 0 ? 0 : sum;
    }
    return -1;
}

/* ---- alerts ---- */

/* Whether alert labels al match b's target through the job's alert_labels. */
static bool alert_matches(const pd__burst *b, const pd_labels *al)
{
    const pd_labels *map = &b->js->cfg.alert_labels;
    size_t used = 0;
    for (size_t i = 0; i < map->n; i++) {
        const char *av = pd_labels_get(al, map->v[i].name);
        if (!av)
            continue;
        const char *tv = pd_labels_get(&b->labels, map->v[i].value);
        if (!tv || strcmp(av, tv))
            return false;
        used++;
    }
    return used > 0;
}

size_t pd__adaptive_alert(pd__adaptive *a, const pd_scrape_alert *al, int64_t now_mono)
{
    size_t matched = 0;
    const char *key = al->key && al->key[0] ? al->key : "";
    for (pd__burst *b = a->bursts; b; b = b->next) {
        if (!b->js->cfg.enabled || !alert_matches(b, al->labels))
            continue;
        matched++;
        alert_ref *r = NULL;
        for (size_t i = 0; i < b->n_alerts; i++)
            if (!strcmp(b->alerts[i].key, key))
                r = &b->alerts[i];
        if (al->firing) {
            if (r && (r->active || r->starts_at_ms == al->starts_at_ms))
                continue; /* held already, or capped by max_duration */
            if (!r) {
                if (b->n_alerts == MAX_ALERTS) { /* forget the oldest */
                    memmove(b->alerts, b->alerts + 1, (MAX_ALERTS - 1) * sizeof *b->alerts);
                    b->n_alerts--;
                }
                r = &b->alerts[b->n_alerts++];
                snprintf(r->key, sizeof r->key, "%s", key);
            }
            r->starts_at_ms = al->starts_at_ms;
            const char *name = pd_labels_get(al->labels, "alertname");
            char detail[300];
            snprintf(detail, sizeof detail, "alert %s firing", name ? name : key);
            bool was = b->active;
            r->active = start_burst(a, b, "alert", now_mono, detail);
            if (was && r->active && strcmp(b->reason, "alert")) /* held by the alert from now */
                b->started_mono = now_mono, b->reason = "alert";
        } else if (r) {
            r->active = false;
            size_t left = 0;
            for (size_t i = 0; i < b->n_alerts; i++)
                left += b->alerts[i].active;
            /* forget it: a new firing of the same alert starts a burst again */
            *r = b->alerts[--b->n_alerts];
            if (!left && b->active && !strcmp(b->reason, "alert"))
                end_burst(a, b, "resolved", now_mono);
        }
    }
    return matched;
}

/* ---- events ---- */

int pd__adaptive_events_json(pd__adaptive *a, int64_t from_ms, int64_t to_ms, const char *kind,
                             pd_buf *out)
{
    return pd__events_json(a->events, from_ms, to_ms, kind, out);
}
