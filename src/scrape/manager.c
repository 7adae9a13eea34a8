/*
 * scrape/manager.c — the scrape loop (contract in manager.h).
 *
 * Targets. apply() expands the configuration into one target per
 * (job, static target, enabled endpoint). A target's identity (its key) is
 * job, URL and series labels; those fields never change after creation, so
 * the loop may read them without the lock. A reload keeps the target objects
 * whose key stays (with their health and schedule, updating only interval
 * and timeout), creates the new ones and retires the others.
 *
 * Schedule. A target's first scrape is at the next wall-clock instant t with
 * t mod interval == offset (pd__scrape_offset_ms: a stable hash, so scrapes
 * of many targets are spread over the interval and stay put across
 * restarts); later scrapes follow every interval on the monotonic clock.
 * Slots that pass while the previous scrape of the same target still runs
 * are never queued; a target with a profile window (`seconds`: CPU and
 * delta profiles, whose window fills most of the interval by the CPU
 * seconds rule) runs the one slot it met busy as soon as the scrape ends
 * (catch_up), so an answer that comes a little late (a loaded target or
 * machine) costs lateness, not a missed profile; the schedule's phase
 * stays. Other targets skip such a slot, as Prometheus does.
 *
 * Clock. The schedule reads time only through m->clock (the system's unless
 * pd_scrape_manager_set_clock gave another): slots, catch-up runs, burst ends
 * and the stored timestamp. Tests move their own clock and step the loop
 * (pd__scrape_round, the same loop_round the thread runs), so what they
 * assert does not depend on how busy the machine is. Durations and curl's
 * timeouts are real time.
 *
 * Threads and locking. One thread runs the loop over one curl multi handle,
 * a second stores what it scraped (store.c):
 *
 *     loop:  lock: free retired targets (not those being stored); start due
 *            transfers; compute the wait
 *            unlock; curl_multi_poll(wait); curl_multi_perform
 *            decode each transfer that ended (no lock held); hand them over
 *     store: one pd_storage_append_many of every label set of every scrape
 *            handed over, then for each: lock: record health, clear busy
 *
 * The loop does not wait for the store: on ClickHouse a call returns when
 * the one batch it went into is acknowledged (group commit, batches at
 * least --clickhouse.flush-interval apart, up to 1 s), and while it waits
 * the loop starts the scrapes due and reads the answers in flight (their
 * timeouts run); what ends meanwhile goes into the next call. Stored one
 * by one on the loop, as before, each profile waited a batch of its own:
 * ~10 profiles/s however many targets, scrapes late and timing out
 * (bench/scrape_clickhouse/RESULTS.md). Without the store thread (a test
 * stepping the loop with its own clock, pd__scrape_round) a round stores
 * and records what it ended before it returns.
 *
 * m->mu guards the target vector, every target's schedule and health fields,
 * `busy`, the retired list and `stop`. The easy handles and the multi handle
 * are touched only by the loop thread (and by apply()/free() only when the
 * thread is not running). apply() never frees a busy target (a transfer in
 * flight or being stored): it moves it to the retired list, which only the
 * loop frees (aborting its transfer) once its outcome is recorded.
 * curl_multi_wakeup, which is thread-safe, interrupts the poll after
 * apply(), free() and each store call.
 *
 * Outcome of a scrape (metric label outcome=): success; duplicate (stored
 * already: the series has a profile at that ms, PD_EEXIST; the target is up);
 * timeout (curl's CURLE_OPERATION_TIMEDOUT); too_large (body over
 * lim.max_body_bytes, or a decode cap); bad_profile (pd_profile_decode
 * rejected the body); out_of_bounds (the store refused the scrape's time:
 * outside retention or --storage.future-grace of the wall clock, e.g. after
 * a clock jump); error (connection failures, HTTP status other than
 * 200, storage failures). success and duplicate make the target up.
 *
 * Dynamic labels (issue 26): a scraped profile whose samples carry pprof
 * string labels (Go's pprof.Do / runtime/pprof labels in a CPU or goroutine
 * profile) is stored as one profile per label set, each under the target's
 * series labels plus that set (pprof/split.h, the rules of pushes): what
 * Grafana Alloy's pyroscope.scrape + Pyroscope give for the same target, so
 * {endpoint="/checkout"} selects the same thing however the profile came.
 * At most PD__SCRAPE_MAX_SPLIT label sets per profile: past that the profile is
 * stored whole (its labels stay on the samples, nothing lost), logged and
 * counted in profd_scrape_split_skipped_total.
 *
 * Metrics are updated under m->mu (lock order: m->mu, then the registry's
 * own lock) and only for targets that are not retired, so that the series a
 * reload removes stay removed (see forget_series).
 */
#include "scrape/manager.h"

#include <curl/curl.h>
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <xxhash.h>

#include "base/log.h"
#include "base/metrics.h"
#include "base/time.h"
#include "base/u64map.h"
#include "pprof/split.h"
#include "scrape/scrape_int.h"

#define MAX_WAIT_MS 1000 /* the loop wakes at least this often */
#define LOOP_MIN_MS 10   /* rounds of the loop at most this often (see loop) */

void (*pd__scrape_before_record)(const char *url);

enum { HEALTH_UNKNOWN, HEALTH_UP, HEALTH_DOWN };

typedef struct target target;
struct target {
    pd_scrape_manager *m;
    target *next_retired;
    /* identity: immutable after creation */
    char *key;
    uint64_t key_hash;
    char *job, *name, *url;
    /* tls_config.server_name: the URL curl is given (host = server_name, so
     * SNI and certificate checks use it), the real address to connect to
     * (CURLOPT_CONNECT_TO "server_name:port:host:port") and the Host header
     * of the real address; NULL without server_name */
    char *sni_url;
    struct curl_slist *connect_to;
    char *host_header;
    pd_labels labels;        /* series labels: __name__, job, instance, static labels */
    pd_labels stored;        /* labels + PD_LABEL_DELTA="false" when served cumulative (issue 12):
                                what pd_storage_append gets */
    pd_labels discovered;    /* labels before relabeling (/api/v1/targets' discoveredLabels) */
    pd_scrape_client client; /* auth, TLS, proxy, redirects, HTTP/2 */
    char *keep;              /* keep_sample_type of the endpoint (keep.c), NULL = all */
    size_t max_body;         /* body cap: the job's body_size_limit or lim.max_body_bytes */
    bool catch_up;           /* a profile window (seconds > 0): a slot met busy runs at the end */
    char *metric_labels;     /* job="...",profile_type="..." (escaped) */
    char *target_labels;     /* the labels without __name__, plus profile_type (escaped) */
    /* schedule and health: under m->mu */
    int64_t interval_ms, timeout_ms;
    int64_t next_ms; /* monotonic ms of the next slot */
    int health;
    int64_t last_scrape_ms; /* wall ms of the last scrape's start, 0 = never */
    double last_duration_s;
    char last_error[PD__SCRAPE_MSG];
    bool busy;
    bool late;         /* a slot came while busy (catch_up targets start again when done) */
    int64_t resume_ms; /* a catch-up run is due: the slot after it (monotonic ms), else 0 */
    bool retired;      /* dropped by a reload: its metrics are no longer updated */
    /* adaptive capture (adaptive.c), under m->mu: the target's burst state
     * (NULL: its job has no adaptive_capture, or retired), whether its
     * profile type is a burst type, whether it runs on the burst schedule,
     * whether the scrape in flight is a burst scrape */
    pd__burst *bs;
    bool burstable, in_burst, burst_scrape;
    const pd_scrape_job *apply_job; /* during apply_targets only */
    /* transfer in flight: loop thread only */
    CURL *easy;
    struct curl_slist *hdrs; /* the transfer's extra headers */
    pd_buf body;
    bool too_large, oom;
    int64_t start_ms, start_ns;
    char errbuf[CURL_ERROR_SIZE];
};

/* A (target, endpoint) relabeling dropped: /api/v1/targets' droppedTargets. */
typedef struct dropped_target {
    size_t job; /* index in the dropped job names */
    char *name; /* the endpoint (profile type) */
    pd_labels discovered;
} dropped_target;

/* The dropped targets of one apply: those kept (per job at most its
 * keep_dropped_targets, 0 = all) and how many each job dropped in all. */
typedef struct dropped_set {
    dropped_target *v;
    size_t n, cap;
    char **jobs;     /* job names, configuration order */
    uint64_t *count; /* per job: every target dropped, kept or not */
    size_t n_jobs;
} dropped_set;

struct pd_scrape_manager {
    int64_t round_ms;      /* loop thread: real monotonic ms the last round started polling */
    pd_scrape_clock clock; /* the schedule's time source (pd_scrape_manager_set_clock) */
    pd_storage *st;
    pd_pprof_limits lim;
    CURLM *multi;
    pthread_mutex_t mu;
    target **tv; /* under mu */
    size_t tn;
    target *retired;     /* under mu */
    dropped_set dropped; /* under mu */
    bool stop;           /* under mu */
    bool running;
    pthread_t thread;
    pd__sd *sd;                /* service discovery; its lock serialises apply and rebuilds */
    pd__adaptive *ad;          /* adaptive capture state, under mu */
    pd__scrape_storer *storer; /* stores the scrapes the rounds end (store.c) */
    bool storer_running;       /* its thread started (pd_scrape_manager_start) */
};

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static CURLcode curl_init_rc;
static void curl_init(void)
{
    curl_init_rc = curl_global_init(CURL_GLOBAL_DEFAULT);
}

/* ---- helpers ---- */

static int64_t mono_ms(void)
{
    return pd_mono_ns() / 1000000;
}

static int64_t sys_mono_ms(void *arg)
{
    (void)arg;
    return mono_ms();
}

static int64_t sys_wall_ms(void *arg)
{
    (void)arg;
    return pd_now_ms();
}

/* The schedule's clocks (the system's unless a test set its own). */
static int64_t clk_mono(const pd_scrape_manager *m)
{
    return m->clock.mono_ms(m->clock.arg);
}

static int64_t clk_wall(const pd_scrape_manager *m)
{
    return m->clock.wall_ms(m->clock.arg);
}

int64_t pd__scrape_offset_ms(const char *job, const char *url, int64_t interval_ms)
{
    XXH3_state_t *s = XXH3_createState();
    uint64_t h;
    if (s) {
        XXH3_64bits_reset(s);
        XXH3_64bits_update(s, job, strlen(job) + 1);
        XXH3_64bits_update(s, url, strlen(url));
        h = XXH3_64bits_digest(s);
        XXH3_freeState(s);
    } else {
        h = XXH3_64bits(url, strlen(url));
    }
    return interval_ms > 0 ? (int64_t)(h % (uint64_t)interval_ms) : 0;
}

int pd__scrape_url(const pd_scrape_job *job, const char *tgt, const pd_pprof_endpoint *ep,
                   pd_buf *out)
{
    int rc = pd_buf_printf(out, "%s://%s%s", job->scheme ? job->scheme : "http", tgt, ep->path);
    char sep = '?';
    if (!rc && ep->seconds > 0) {
        rc = pd_buf_printf(out, "?seconds=%lld", (long long)ep->seconds);
        sep = '&';
    }
    for (size_t i = 0; i < job->n_query && !rc; i++) {
        if (ep->seconds > 0 && !strcmp(job->query[i].name, "seconds"))
            continue;
        if (!(rc = pd_buf_putc(out, sep)) &&
            !(rc = pd__scrape_put_escaped(out, job->query[i].name)) &&
            !(rc = pd_buf_putc(out, '=')))
            rc = pd__scrape_put_escaped(out, job->query[i].value);
        sep = '&';
    }
    return rc;
}

/* Label value escaped for the metrics text format. */
static int put_metric_value(pd_buf *b, const char *s)
{
    int rc = 0;
    for (; *s && !rc; s++) {
        if (*s == '\\')
            rc = pd_buf_puts(b, "\\\\");
        else if (*s == '"')
            rc = pd_buf_puts(b, "\\\"");
        else if (*s == '\n')
            rc = pd_buf_puts(b, "\\n");
        else
            rc = pd_buf_putc(b, *s);
    }
    return rc;
}

static void target_free(target *t)
{
    if (!t)
        return;
    free(t->key);
    free(t->job);
    free(t->name);
    free(t->url);
    free(t->sni_url);
    free(t->host_header);
    free(t->keep);
    curl_slist_free_all(t->connect_to);
    free(t->metric_labels);
    free(t->target_labels);
    pd_labels_release(&t->labels);
    pd_labels_release(&t->stored);
    pd_labels_release(&t->discovered);
    pd_scrape_client_release(&t->client);
    pd_buf_release(&t->body);
    free(t);
}

/* Loop thread (or no thread running): aborts t's transfer, if any. */
static void target_abort(pd_scrape_manager *m, target *t)
{
    if (t->easy) {
        curl_multi_remove_handle(m->multi, t->easy);
        curl_easy_cleanup(t->easy);
        t->easy = NULL;
    }
    curl_slist_free_all(t->hdrs);
    t->hdrs = NULL;
    pd_buf_release(&t->body);
}

static void schedule_first(target *t, int64_t now_mono, int64_t now_wall)
{
    int64_t off = pd__scrape_offset_ms(t->job, t->url, t->interval_ms);
    int64_t delay =
        ((off - now_wall % t->interval_ms) % t->interval_ms + t->interval_ms) % t->interval_ms;
    t->next_ms = now_mono + delay;
}

/* Appends the labels of t's per-target gauges to b: t->labels without
 * __name__, plus profile_type=t->name, sorted by name, as name="value"
 * pairs. A static label that is itself named profile_type is kept as
 * exported_profile_type (exported_exported_... while taken), as Prometheus
 * renames a scraped label that clashes with a target label. */
static int put_target_labels(const target *t, pd_buf *b, pd_err *err)
{
    pd_labels ls;
    pd_labels_init(&ls);
    char *clash = NULL;
    int rc = PD_ENOMEM;
    if (pd_labels_copy(&ls, &t->labels))
        goto out;
    if ((rc = pd_labels_set(&ls, "__name__", "", err)))
        goto out;
    const char *pt = pd_labels_get(&ls, "profile_type");
    if (pt) {
        char name[PD_LABEL_MAX_NAME + 1] = "exported_profile_type";
        rc = PD_ENOMEM;
        if (!(clash = strdup(pt)))
            goto out;
        while (pd_labels_get(&ls, name) && strlen(name) + 9 <= PD_LABEL_MAX_NAME) {
            memmove(name + 9, name, strlen(name) + 1);
            memcpy(name, "exported_", 9);
        }
        if ((rc = pd_labels_set(&ls, name, clash, err)))
            goto out;
    }
    if ((rc = pd_labels_set(&ls, "profile_type", t->name, err)))
        goto out;
    rc = PD_ENOMEM;
    for (size_t i = 0; i < ls.n; i++)
        if ((i && pd_buf_putc(b, ',')) || pd_buf_puts(b, ls.v[i].name) || pd_buf_puts(b, "=\"") ||
            put_metric_value(b, ls.v[i].value) || pd_buf_putc(b, '"'))
            goto out;
    rc = 0;
out:
    free(clash);
    pd_labels_release(&ls);
    return rc;
}

/* For tls_config.server_name: t->sni_url, t->connect_to, t->host_header
 * from t->url (https://HOST:PORT/rest; spec_build always gives a port).
 * 0 or PD_ENOMEM. */
static int set_sni(target *t)
{
    const char *hs = t->url + 8, *rest = strchr(hs, '/');
    if (!rest)
        rest = hs + strlen(hs);
    const char *colon = rest;
    while (colon > hs && colon[-1] != ':' && colon[-1] != ']')
        colon--;
    if (colon == hs || colon[-1] != ':')
        return 0; /* no port: cannot happen, leave the URL as is */
    size_t hl = (size_t)(colon - 1 - hs);
    const char *port = colon;
    size_t pl = (size_t)(rest - port);
    pd_buf b;
    pd_buf_init(&b, 0);
    if (pd_buf_printf(&b, "https://%s:%.*s%s", t->client.server_name, (int)pl, port, rest))
        goto oom;
    t->sni_url = pd_buf_detach(&b, NULL);
    if (pd_buf_printf(&b, "%s:%.*s:%.*s:%.*s", t->client.server_name, (int)pl, port, (int)hl, hs,
                      (int)pl, port))
        goto oom;
    char *ct = pd_buf_detach(&b, NULL);
    t->connect_to = ct ? curl_slist_append(NULL, ct) : NULL;
    free(ct);
    if (!t->connect_to || pd_buf_printf(&b, "Host: %.*s", (int)(rest - hs), hs))
        goto oom;
    t->host_header = pd_buf_detach(&b, NULL);
    return t->sni_url && t->host_header ? 0 : PD_ENOMEM;
oom:
    pd_buf_release(&b);
    return PD_ENOMEM;
}

/* A target for (job, address, group labels, endpoint), or NULL: with *rc 0
 * when relabeling dropped it (its labels before relabeling moved to
 * *dropped), PD_EINVAL (err says why; the target is skipped) or PD_ENOMEM. */
static target *target_new(pd_scrape_manager *m, const pd_config *cfg, const pd_scrape_job *job,
                          const char *tgt, const pd_labels *group, const pd_pprof_endpoint *ep,
                          pd_labels *dropped, int *rcp, pd_err *err)
{
    int rc = PD_ENOMEM;
    pd_buf b;
    pd_buf_init(&b, 0);
    pd__scrape_spec sp;
    target *t = NULL;
    if ((rc = pd__scrape_spec_build(cfg, job, tgt, group, ep, &sp, err)))
        goto out;
    if (!sp.keep) {
        *dropped = sp.discovered;
        pd_labels_init(&sp.discovered);
        goto out;
    }
    rc = PD_ENOMEM;
    if (!(t = calloc(1, sizeof *t)))
        goto out;
    t->m = m;
    t->apply_job = job;
    t->max_body = job->body_size_limit && job->body_size_limit < m->lim.max_body_bytes
                      ? job->body_size_limit
                      : m->lim.max_body_bytes;
    pd_buf_init(&t->body, t->max_body);
    t->labels = sp.labels;
    t->discovered = sp.discovered;
    pd_labels_init(&sp.labels);
    pd_labels_init(&sp.discovered);
    pd_labels_init(&t->stored);
    if (pd_labels_copy(&t->stored, &t->labels) ||
        (sp.cumulative && pd_labels_set(&t->stored, PD_LABEL_DELTA, "false", NULL)))
        goto fail;
    t->url = pd_buf_detach(&sp.url, NULL);
    t->interval_ms = sp.interval_ms;
    t->timeout_ms = pd_config_endpoint_timeout_ms(sp.timeout_ms, ep->seconds);
    t->catch_up = pd__scrape_catch_up(ep->seconds, t->interval_ms);
    if (!t->url || !(t->job = strdup(job->job_name)) || !(t->name = strdup(ep->name)) ||
        pd_scrape_client_copy(&t->client, &job->client) ||
        (ep->keep_sample_types && !(t->keep = strdup(ep->keep_sample_types))))
        goto fail;
    if (t->client.server_name && !strncmp(t->url, "https://", 8) && set_sni(t))
        goto fail;
    if (pd_buf_puts(&b, "job=\"") || put_metric_value(&b, job->job_name) ||
        pd_buf_puts(&b, "\",profile_type=\"") || put_metric_value(&b, ep->name) ||
        pd_buf_putc(&b, '"'))
        goto fail;
    t->metric_labels = pd_buf_detach(&b, NULL);
    if ((rc = put_target_labels(t, &b, err)))
        goto fail;
    t->target_labels = pd_buf_detach(&b, NULL);
    rc = PD_ENOMEM;
    /* identity: job, URL, labels and the client options (a changed password is a new target) */
    const pd_scrape_client *c = &t->client;
    if (pd_buf_puts(&b, t->job) || pd_buf_putc(&b, '\n') || pd_buf_puts(&b, t->url) ||
        pd_buf_putc(&b, '\n') || pd_labels_format(&t->labels, &b) ||
        pd_buf_printf(
            &b, "\n%s\x01%s\x01%s\x01%s\x01%s\x01%s\x01%s\x01%s\x01%s\x01%s\x01%s\x01%d%d%d%d%zu",
            c->basic_username ? c->basic_username : "", c->basic_password ? c->basic_password : "",
            c->basic_password_file ? c->basic_password_file : "", c->auth_type ? c->auth_type : "",
            c->auth_credentials ? c->auth_credentials : "",
            c->auth_credentials_file ? c->auth_credentials_file : "", c->ca_file ? c->ca_file : "",
            c->cert_file ? c->cert_file : "", c->key_file ? c->key_file : "",
            c->server_name ? c->server_name : "", c->proxy_url ? c->proxy_url : "",
            c->insecure_skip_verify, c->tls_min_version, c->follow_redirects, c->enable_http2,
            t->max_body) ||
        pd_buf_printf(&b, "\x01%s\x01%s\x01%s\x01%s\x01%s\x01%s\x01%s",
                      c->oauth2_token_url ? c->oauth2_token_url : "",
                      c->oauth2_client_id ? c->oauth2_client_id : "",
                      c->oauth2_client_secret ? c->oauth2_client_secret : "",
                      c->oauth2_client_secret_file ? c->oauth2_client_secret_file : "",
                      c->oauth2_scopes ? c->oauth2_scopes : "",
                      c->oauth2_params ? c->oauth2_params : "", t->keep ? t->keep : ""))
        goto fail;
    t->key_hash = XXH3_64bits(b.data, b.len);
    if (t->key_hash == UINT64_MAX)
        t->key_hash--;
    t->key = pd_buf_detach(&b, NULL);
    if (t->timeout_ms <= 0)
        t->timeout_ms = t->interval_ms;
    t->health = HEALTH_UNKNOWN;
    *rcp = 0;
    return t;
fail:
    target_free(t);
    t = NULL;
    if (rc == PD_ENOMEM)
        pd_err_set(err, rc, "out of memory building scrape targets");
out:
    pd__scrape_spec_release(&sp);
    pd_buf_release(&b);
    *rcp = rc;
    return t;
}

static void describe_metrics(void)
{
    pd_metrics_describe("profd_scrape_split_skipped_total", PD_METRIC_COUNTER,
                        "Scraped profiles stored whole because their samples' labels make more "
                        "label sets than one profile may be split into.");
    pd_metrics_add("profd_scrape_split_skipped_total", NULL, 0);
    pd_metrics_describe("profd_scrapes_total", PD_METRIC_COUNTER,
                        "Scrapes finished, by job, profile type and outcome "
                        "(success, error, timeout, bad_profile, too_large).");
    pd_metrics_describe("profd_scrape_slots_missed_total", PD_METRIC_COUNTER,
                        "Scheduled scrapes not made because the previous scrape of the same "
                        "target and profile type still ran (a windowed profile's first such slot "
                        "runs late instead and is not counted), by job and profile type.");
    pd_metrics_describe("profd_scrape_duration_seconds_total", PD_METRIC_COUNTER,
                        "Sum of the wall time of finished scrapes, by job and profile type "
                        "(divide by profd_scrapes_total for the mean).");
    pd_metrics_describe("profd_ingested_profiles_total", PD_METRIC_COUNTER,
                        "Profiles stored, by source (scrape or push).");
    pd_metrics_describe("profd_ingested_bytes_total", PD_METRIC_COUNTER,
                        "Bytes of profile bodies stored, by source (scrape or push).");
    pd_metrics_describe("profd_scrape_targets", PD_METRIC_GAUGE,
                        "Scrape targets configured (one per target and profile type).");
    pd_metrics_describe("profd_target_up", PD_METRIC_GAUGE,
                        "1 if the last scrape of the target's profile type succeeded (HTTP 200, "
                        "a profile that decoded and was stored or already stored), 0 if not.");
    pd_metrics_describe("profd_scrape_last_duration_seconds", PD_METRIC_GAUGE,
                        "Wall time of the last finished scrape of the target's profile type.");
    pd_metrics_describe("profd_scrape_last_success_timestamp_seconds", PD_METRIC_GAUGE,
                        "Unix time of the start of the last successful scrape of the target's "
                        "profile type (the stored profile's timestamp).");
}

/*
 * Per-target series. Prometheus users look for `up`, but profd does not
 * expose that name: `up` is the series Prometheus itself writes for every
 * target it scrapes, so when Prometheus scrapes profd's /metrics an `up`
 * from profd would be one more `up` per profd target, its job and instance
 * renamed to exported_job and exported_instance, and every `up == 0` alert
 * would mix "profd is down" with "a target of profd is down". Exporters
 * report the health of what they look at as <namespace>_up (mysql_up,
 * haproxy_up); profd's is profd_target_up. It is per (target, profile type),
 * not per target, because the profile types of one target are separate
 * scrapes that fail separately (a CPU profile times out while the heap
 * profile is fine); min by (job, instance) (profd_target_up) is the per
 * target view. Labels: the target's own labels (job, instance, the static
 * labels: what Prometheus attaches to up) and profile_type.
 *
 * The series exist from a target's first finished scrape until a reload
 * drops the target; then apply() removes them under m->mu, and scrape_done
 * updates metrics under m->mu only for targets not retired, so a scrape in
 * flight during the reload cannot bring them back.
 */
static void set_target_gauges(const target *t, bool up, double dur_s)
{
    pd_metrics_set("profd_target_up", t->target_labels, up ? 1 : 0);
    pd_metrics_set("profd_scrape_last_duration_seconds", t->target_labels, dur_s);
    if (up)
        pd_metrics_set("profd_scrape_last_success_timestamp_seconds", t->target_labels,
                       (double)t->start_ms / 1000);
}

static uint64_t str_key(const char *s)
{
    uint64_t h = XXH3_64bits(s, strlen(s));
    return h == UINT64_MAX ? h - 1 : h; /* UINT64_MAX is reserved in pd_u64map */
}

/* True when some target of nv has the string s at `field` (an offset of a
 * char * member), looked up through idx: str_key(string) -> index in nv. */
static bool in_use(const pd_u64map *idx, target *const *nv, size_t field, const char *s)
{
    uint64_t i;
    return pd_u64map_get(idx, str_key(s), &i) &&
           strcmp(*(char *const *)((const char *)nv[i] + field), s) == 0;
}

/* Under m->mu: removes the series of o, a target dropped by a reload, but
 * not those that a target of the new configuration nv writes too: the
 * per-target gauges unless a new target has the same labels, the counters
 * by job and profile type unless the pair stays (the job's other targets). */
static void forget_series(const target *o, target *const *nv, const pd_u64map *by_target,
                          const pd_u64map *by_job)
{
    if (!in_use(by_target, nv, offsetof(target, target_labels), o->target_labels)) {
        pd_metrics_remove("profd_target_up", o->target_labels);
        pd_metrics_remove("profd_scrape_last_duration_seconds", o->target_labels);
        pd_metrics_remove("profd_scrape_last_success_timestamp_seconds", o->target_labels);
    }
    if (!in_use(by_job, nv, offsetof(target, metric_labels), o->metric_labels)) {
        pd_metrics_remove_prefix("profd_scrapes_total", o->metric_labels);
        pd_metrics_remove("profd_scrape_duration_seconds_total", o->metric_labels);
        pd_metrics_remove("profd_scrape_slots_missed_total", o->metric_labels);
    }
}

bool pd__scrape_catch_up(int64_t seconds, int64_t interval_ms)
{
    (void)interval_ms; /* any window: a late answer must not cost the next profile */
    return seconds > 0;
}

/* ---- public ---- */

static int rebuild_cb(void *arg, pd_err *err);
static void scrape_done(void *arg, pd__scrape_fin *f);
static void scrape_idle(void *arg);

int pd_scrape_manager_new(pd_storage *st, const pd_pprof_limits *lim, pd_scrape_manager **out,
                          pd_err *err)
{
    *out = NULL;
    pthread_once(&curl_once, curl_init);
    if (curl_init_rc != CURLE_OK)
        return pd_err_set(err, PD_ENOMEM, "libcurl initialisation failed: %s",
                          curl_easy_strerror(curl_init_rc));
    pd_scrape_manager *m = calloc(1, sizeof *m);
    if (!m)
        return pd_err_set(err, PD_ENOMEM, "out of memory creating the scrape manager");
    m->st = st;
    m->clock = (pd_scrape_clock){sys_mono_ms, sys_wall_ms, NULL};
    m->lim = lim ? *lim : pd_pprof_limits_default();
    if (m->lim.max_body_bytes == 0)
        m->lim.max_body_bytes = pd_pprof_limits_default().max_body_bytes;
    m->multi = curl_multi_init();
    if (!m->multi) {
        free(m);
        return pd_err_set(err, PD_ENOMEM, "out of memory creating the curl multi handle");
    }
    pthread_mutex_init(&m->mu, NULL);
    if (pd__sd_new(rebuild_cb, m, &m->sd) || pd__adaptive_new(&m->ad) ||
        pd__scrape_storer_new(st, scrape_done, scrape_idle, m, &m->storer)) {
        pd__sd_free(m->sd);
        pd__adaptive_free(m->ad);
        curl_multi_cleanup(m->multi);
        pthread_mutex_destroy(&m->mu);
        free(m);
        return pd_err_set(err, PD_ENOMEM, "out of memory creating the scrape manager");
    }
    describe_metrics();
    pd__scrape_store_describe();
    *out = m;
    return 0;
}

/* The new target vector being built by apply_targets. */
typedef struct tvec {
    target **v;
    size_t n, cap;
    pd_u64map seen;
    dropped_set dropped;
} tvec;

static void dropped_release(dropped_set *d)
{
    for (size_t i = 0; i < d->n; i++) {
        free(d->v[i].name);
        pd_labels_release(&d->v[i].discovered);
    }
    free(d->v);
    for (size_t i = 0; i < d->n_jobs; i++)
        free(d->jobs[i]);
    free(d->jobs);
    free(d->count);
    memset(d, 0, sizeof *d);
}

/* Counts a target of the last job of d dropped, keeps its labels (moved
 * from *ls) within keep (0: all). 0 or PD_ENOMEM. */
static int dropped_add(dropped_set *d, uint64_t keep, const char *name, pd_labels *ls)
{
    size_t j = d->n_jobs - 1;
    if (keep && d->count[j]++ >= keep)
        return 0;
    if (!keep)
        d->count[j]++;
    if (d->n == d->cap) {
        size_t nc = d->cap ? d->cap * 2 : 16;
        dropped_target *v = realloc(d->v, nc * sizeof *v);
        if (!v)
            return PD_ENOMEM;
        d->v = v;
        d->cap = nc;
    }
    dropped_target *t = &d->v[d->n];
    if (!(t->name = strdup(name)))
        return PD_ENOMEM;
    t->job = j;
    t->discovered = *ls;
    pd_labels_init(ls);
    d->n++;
    return 0;
}

/* Starts job's entry in d. 0 or PD_ENOMEM. */
static int dropped_job(dropped_set *d, const char *job)
{
    char **jv = realloc(d->jobs, (d->n_jobs + 1) * sizeof *jv);
    if (!jv)
        return PD_ENOMEM;
    d->jobs = jv;
    uint64_t *cv = realloc(d->count, (d->n_jobs + 1) * sizeof *cv);
    if (!cv)
        return PD_ENOMEM;
    d->count = cv;
    if (!(d->jobs[d->n_jobs] = strdup(job)))
        return PD_ENOMEM;
    d->count[d->n_jobs++] = 0;
    return 0;
}

/* Adds the targets of one group (static or discovered) of job. 0, PD_ENOMEM. */
static int add_group(pd_scrape_manager *m, const pd_config *cfg, const pd_scrape_job *job,
                     const pd_static_config *sc, tvec *tv, pd_err *err)
{
    for (size_t k = 0; k < sc->n_targets; k++) {
        for (size_t e = 0; e < job->n_endpoints; e++) {
            if (!job->endpoints[e].enabled)
                continue;
            int trc;
            pd_labels dl;
            pd_labels_init(&dl);
            target *t = target_new(m, cfg, job, sc->targets[k], &sc->labels, &job->endpoints[e],
                                   &dl, &trc, err);
            if (!t && trc == PD_EINVAL) {
                pd_log_warn("scrape target skipped",
                            "job=\"%s\" target=\"%s\" profile_type=%s err=\"%s\"", job->job_name,
                            sc->targets[k], job->endpoints[e].name, err ? err->msg : "");
                continue;
            }
            if (!t && trc)
                return trc;
            if (!t) { /* dropped by relabeling */
                int drc = dropped_add(&tv->dropped, job->keep_dropped_targets,
                                      job->endpoints[e].name, &dl);
                pd_labels_release(&dl);
                if (drc)
                    return drc;
                continue;
            }
            /* the same target twice (same key): keep the first, as Prometheus */
            uint64_t idx;
            if (pd_u64map_get(&tv->seen, t->key_hash, &idx) && !strcmp(tv->v[idx]->key, t->key)) {
                target_free(t);
                continue;
            }
            if (tv->n == tv->cap) {
                size_t nc = tv->cap ? tv->cap * 2 : 16;
                target **v = realloc(tv->v, nc * sizeof *v);
                if (!v) {
                    target_free(t);
                    return PD_ENOMEM;
                }
                tv->v = v;
                tv->cap = nc;
            }
            tv->v[tv->n++] = t;
            if (pd_u64map_put(&tv->seen, t->key_hash, tv->n - 1))
                return PD_ENOMEM;
        }
    }
    return 0;
}

/* Replaces the targets by those of cfg's static configs and of the groups
 * discovered for it (m->sd, whose lock the caller holds). */
static int apply_targets(pd_scrape_manager *m, const pd_config *cfg, pd_err *err)
{
    tvec tv = {0};
    target **nv = NULL;
    size_t nn = 0;
    pd_u64map old, by_target, by_job;
    int rc = 0;
    pd_u64map_init(&tv.seen);
    pd_u64map_init(&old);
    pd_u64map_init(&by_target);
    pd_u64map_init(&by_job);

    for (size_t j = 0; j < cfg->n_jobs && !rc; j++) {
        const pd_scrape_job *job = &cfg->jobs[j];
        rc = dropped_job(&tv.dropped, job->job_name);
        for (size_t s = 0; s < job->n_static_configs && !rc; s++)
            rc = add_group(m, cfg, job, &job->static_configs[s], &tv, err);
        size_t ng = pd__sd_config(m->sd) == cfg ? pd__sd_group_count(m->sd, j) : 0;
        for (size_t g = 0; g < ng && !rc; g++)
            rc = add_group(m, cfg, job, pd__sd_group(m->sd, j, g), &tv, err);
    }
    nv = tv.v;
    nn = tv.n;
    if (rc)
        goto fail;

    for (size_t i = 0; i < nn; i++) {
        if (pd_u64map_put(&by_target, str_key(nv[i]->target_labels), i) ||
            pd_u64map_put(&by_job, str_key(nv[i]->metric_labels), i)) {
            rc = PD_ENOMEM;
            goto fail;
        }
    }

    pthread_mutex_lock(&m->mu);
    for (size_t i = 0; i < m->tn; i++) {
        if (pd_u64map_put(&old, m->tv[i]->key_hash, i)) {
            pthread_mutex_unlock(&m->mu);
            rc = PD_ENOMEM;
            goto fail;
        }
    }
    int64_t now_mono = clk_mono(m), now_wall = clk_wall(m);
    size_t kept = 0;
    pd__adaptive_begin_apply(m->ad);
    for (size_t i = 0; i < nn; i++) {
        const pd_scrape_job *job = nv[i]->apply_job;
        nv[i]->apply_job = NULL;
        if (!job->adaptive.enabled)
            continue;
        if (!(nv[i]->bs = pd__adaptive_ref(m->ad, job, &nv[i]->labels))) {
            /* no end_apply: the running targets keep their bursts */
            pthread_mutex_unlock(&m->mu);
            rc = PD_ENOMEM;
            goto fail;
        }
        nv[i]->burstable = pd__burst_profile(nv[i]->bs, nv[i]->name);
    }
    for (size_t i = 0; i < nn; i++) {
        uint64_t idx;
        target *o = NULL;
        if (pd_u64map_get(&old, nv[i]->key_hash, &idx) && m->tv[idx] &&
            !strcmp(m->tv[idx]->key, nv[i]->key))
            o = m->tv[idx];
        if (o) {
            m->tv[idx] = NULL; /* taken */
            bool resched = o->interval_ms != nv[i]->interval_ms;
            o->interval_ms = nv[i]->interval_ms;
            o->timeout_ms = nv[i]->timeout_ms;
            o->bs = nv[i]->bs;
            o->burstable = nv[i]->burstable;
            if (o->in_burst && !(o->bs && o->burstable)) {
                o->in_burst = false;
                resched = true;
            }
            if (resched)
                schedule_first(o, now_mono, now_wall);
            target_free(nv[i]);
            nv[i] = o;
            kept++;
        } else {
            schedule_first(nv[i], now_mono, now_wall);
        }
    }
    for (size_t i = 0; i < m->tn; i++) {
        target *o = m->tv[i];
        if (!o)
            continue;
        o->retired = true;
        o->bs = NULL;
        forget_series(o, nv, &by_target, &by_job);
        if (o->busy || o->easy) {
            o->next_retired = m->retired;
            m->retired = o;
        } else {
            target_free(o);
        }
    }
    free(m->tv);
    m->tv = nv;
    m->tn = nn;
    dropped_release(&m->dropped);
    m->dropped = tv.dropped;
    memset(&tv.dropped, 0, sizeof tv.dropped);
    pd__adaptive_end_apply(m->ad); /* bursts of targets gone end ("reload") */
    pthread_mutex_unlock(&m->mu);
    nv = NULL;
    curl_multi_wakeup(m->multi);
    pd_metrics_set("profd_scrape_targets", NULL, (double)nn);
    pd_log_info("scrape targets applied", "targets=%zu kept=%zu jobs=%zu", nn, kept, cfg->n_jobs);
    goto out;
fail:
    for (size_t i = 0; i < nn; i++)
        target_free(nv[i]);
    free(nv);
    if (rc == PD_ENOMEM)
        pd_err_set(err, rc, "out of memory applying the scrape configuration");
out:
    dropped_release(&tv.dropped);
    pd_u64map_release(&tv.seen);
    pd_u64map_release(&old);
    pd_u64map_release(&by_target);
    pd_u64map_release(&by_job);
    return rc;
}

static int rebuild_cb(void *arg, pd_err *err)
{
    pd_scrape_manager *m = arg;
    const pd_config *own = pd__sd_config(m->sd);
    return own ? apply_targets(m, own, err) : 0;
}

int pd_scrape_manager_apply(pd_scrape_manager *m, const pd_config *cfg, pd_err *err)
{
    for (size_t i = 0; i < cfg->n_warnings; i++) {
        char q[600];
        size_t o = 0;
        for (const char *p = cfg->warnings[i]; *p && o + 2 < sizeof q; p++)
            q[o++] = *p == '"' ? '\'' : *p;
        q[o] = 0;
        pd_log_warn("configuration", "warning=\"%s\"", q);
    }
    const pd_config *use;
    pd__sd_lock(m->sd);
    int rc = pd__sd_set(m->sd, cfg, &use, err);
    if (!rc)
        rc = apply_targets(m, use, err);
    pd__sd_unlock(m->sd);
    return rc;
}

static size_t on_body(char *ptr, size_t size, size_t nmemb, void *ud)
{
    target *t = ud;
    size_t n = size * nmemb;
    int rc = pd_buf_append(&t->body, ptr, n);
    if (rc == PD_ETOOBIG) {
        t->too_large = true;
        return 0; /* aborts the transfer (CURLE_WRITE_ERROR) */
    }
    if (rc) {
        t->oom = true;
        return 0;
    }
    return n;
}

/* Sets the client options of t on e (auth, TLS, proxy, redirects, HTTP
 * version: pd__client_setopt, as the discovery requests do) and its Host
 * header; t->hdrs gets the headers. false with msg set when a secret file
 * cannot be read or memory runs out. */
static bool set_client(target *t, CURL *e, char *msg, size_t msg_cap)
{
    if (!pd__client_setopt(&t->client, e, &t->hdrs, msg, msg_cap))
        return false;
    if (t->host_header) {
        struct curl_slist *l = curl_slist_append(t->hdrs, t->host_header);
        if (!l) {
            snprintf(msg, msg_cap, "out of memory setting the Host header");
            return false;
        }
        t->hdrs = l;
    }
    if (t->hdrs)
        curl_easy_setopt(e, CURLOPT_HTTPHEADER, t->hdrs);
    return true;
}

/* Under mu, loop thread: starts t's transfer. On failure records it as a
 * failed scrape right away. */
static void start_scrape(pd_scrape_manager *m, target *t)
{
    CURL *e = curl_easy_init();
    t->too_large = t->oom = false;
    t->errbuf[0] = '\0';
    pd_buf_reset(&t->body);
    t->start_ms = clk_wall(m);
    t->start_ns = pd_mono_ns();
    if (!e)
        goto fail;
    curl_easy_setopt(e, CURLOPT_URL, t->sni_url ? t->sni_url : t->url);
    if (t->connect_to)
        curl_easy_setopt(e, CURLOPT_CONNECT_TO, t->connect_to);
    curl_easy_setopt(e, CURLOPT_PRIVATE, t);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, t);
    curl_easy_setopt(e, CURLOPT_ERRORBUFFER, t->errbuf);
    curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, (long)t->timeout_ms);
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(e, CURLOPT_USERAGENT, "profd/0.1");
    curl_easy_setopt(e, CURLOPT_MAXREDIRS, 10L); /* as Go's http.Client */
#if LIBCURL_VERSION_NUM >= 0x075500
    curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(e, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
#endif
    curl_easy_setopt(e, CURLOPT_MAXFILESIZE_LARGE, (curl_off_t)t->max_body);
    if (!set_client(t, e, t->last_error, sizeof t->last_error))
        goto fail_msg;
    if (curl_multi_add_handle(m->multi, e) != CURLM_OK)
        goto fail;
    t->easy = e;
    t->busy = true;
    return;
fail:
    snprintf(t->last_error, sizeof t->last_error, "cannot start the transfer (out of memory)");
fail_msg:
    if (e)
        curl_easy_cleanup(e);
    curl_slist_free_all(t->hdrs);
    t->hdrs = NULL;
    t->health = HEALTH_DOWN;
    t->last_scrape_ms = t->start_ms;
    t->last_duration_s = 0;
    pd_buf_release(&t->body);
    set_target_gauges(t, false, 0);
}

/* Under m->mu, t not retired: counts a finished scrape. */
static void record(const target *t, const char *outcome, double dur_s)
{
    pd_buf b;
    pd_buf_init(&b, 0);
    if (!pd_buf_printf(&b, "%s,outcome=\"%s\"", t->metric_labels, outcome))
        pd_metrics_add("profd_scrapes_total", b.data, 1);
    pd_metrics_add("profd_scrape_duration_seconds_total", t->metric_labels, dur_s);
    pd_buf_release(&b);
}

/* Loop thread, no lock held: ends t's transfer (res: curl's result) into
 * f (zeroed) — owner, res, duration and end; the outcome of a failed
 * transfer in f->outcome/msg, or, for a body with HTTP 200, f ready for
 * pd__scrape_store (decoded, split). */
static void end_transfer(pd_scrape_manager *m, target *t, CURLcode res, pd__scrape_fin *f)
{
    long status = 0;
    f->outcome = "success";
    f->inuse = -1;
    f->owner = t;
    f->res = (int)res;
    curl_easy_getinfo(t->easy, CURLINFO_RESPONSE_CODE, &status);
    curl_multi_remove_handle(m->multi, t->easy);
    curl_easy_cleanup(t->easy);
    t->easy = NULL;
    curl_slist_free_all(t->hdrs);
    t->hdrs = NULL;
    f->dur = (double)(pd_mono_ns() - t->start_ns) / 1e9;
    f->end_wall = clk_wall(m); /* the attempt ended: a target_down event's time */

    if (t->too_large || res == CURLE_FILESIZE_EXCEEDED) {
        f->outcome = "too_large";
        snprintf(f->msg, sizeof f->msg, "body exceeds %zu bytes", t->max_body);
    } else if (t->oom) {
        f->outcome = "error";
        snprintf(f->msg, sizeof f->msg, "out of memory reading the body");
    } else if (res == CURLE_OPERATION_TIMEDOUT) {
        f->outcome = "timeout";
        snprintf(f->msg, sizeof f->msg, "%s", t->errbuf[0] ? t->errbuf : curl_easy_strerror(res));
    } else if (res != CURLE_OK) {
        f->outcome = "error";
        snprintf(f->msg, sizeof f->msg, "%s", t->errbuf[0] ? t->errbuf : curl_easy_strerror(res));
    } else if (status != 200) {
        f->outcome = "error";
        snprintf(f->msg, sizeof f->msg, "HTTP %ld", status);
    } else {
        f->labels = &t->stored;
        f->ts_ms = t->start_ms;
        f->body = (const uint8_t *)t->body.data;
        f->len = t->body.len;
        f->keep = t->keep;
        f->max_body = t->max_body;
        pd__scrape_fin_decode(f, &m->lim);
    }
}

/* Store thread (loop thread without one), no lock held on entry: records
 * the outcome f of its target's scrape (stored, or failed) — health,
 * metrics, adaptive capture — and makes the target ready for its next
 * scrape. */
static void scrape_done(void *arg, pd__scrape_fin *f)
{
    pd_scrape_manager *m = arg;
    target *t = f->owner;
    CURLcode res = (CURLcode)f->res;
    double dur = f->dur;
    const char *outcome = f->outcome, *msg = f->msg;
    size_t body_len = t->body.len;
    /* keep the memory of small bodies for the next scrape, not of big ones */
    if (t->body.cap > (1u << 20))
        pd_buf_release(&t->body);
    else
        pd_buf_reset(&t->body);

    if (pd__scrape_before_record)
        pd__scrape_before_record(t->url);
    pthread_mutex_lock(&m->mu);
    int was = t->health;
    t->health = msg[0] ? HEALTH_DOWN : HEALTH_UP;
    t->last_scrape_ms = t->start_ms;
    t->last_duration_s = dur;
    snprintf(t->last_error, sizeof t->last_error, "%s", msg);
    t->busy = false;
    if (t->late) { /* a slot met busy runs now; the schedule resumes at its next slot */
        t->late = false;
        t->resume_ms = t->next_ms;
        t->next_ms = clk_mono(m);
    }
    if (!t->retired) { /* apply() has removed the series of a retired target */
        record(t, outcome, dur);
        set_target_gauges(t, !msg[0], dur);
    }
    if (t->bs) { /* adaptive capture: profiles taken, the end, heap growth */
        bool conn = !t->too_large && !t->oom && res != CURLE_OK;
        const char *why = res == CURLE_COULDNT_CONNECT      ? "connection refused"
                          : res == CURLE_OPERATION_TIMEDOUT ? "timeout"
                          : res == CURLE_RECV_ERROR || res == CURLE_GOT_NOTHING ||
                                  res == CURLE_PARTIAL_FILE || res == CURLE_SEND_ERROR
                              ? "connection reset"
                              : "error";
        pd__burst_scraped(t->bs, !strcmp(outcome, "success"), t->start_ms, f->end_wall, body_len,
                          t->burst_scrape, t->metric_labels, t->name, conn, why, msg, clk_mono(m));
        if (f->inuse >= 0 && t->bs)
            pd__burst_observe(t->bs, t->start_ms, f->inuse, clk_mono(m));
    }
    /* logged under the lock: once busy is clear and the lock free, a
     * reload may free t */
    if (msg[0] && was != HEALTH_DOWN)
        pd_log_warn("scrape failed", "job=\"%s\" url=\"%s\" outcome=%s err=\"%s\"", t->job, t->url,
                    outcome, msg);
    else if (!msg[0] && was == HEALTH_DOWN)
        pd_log_info("scrape recovered", "job=\"%s\" url=\"%s\"", t->job, t->url);
    pthread_mutex_unlock(&m->mu);
}

/* Store thread: a store call ended; the loop hands over what gathered. */
static void scrape_idle(void *arg)
{
    curl_multi_wakeup(((pd_scrape_manager *)arg)->multi);
}

/* One round of the loop: frees retired targets, starts the transfers of the
 * slots due at the clock's now, waits for transfer events (at most the time to
 * the next slot, max_wait_ms), and finishes the transfers that ended.
 * Returns false when the manager is stopping. *running: transfers in flight
 * after the round; *next: ms on the clock until the next slot after the
 * round (<= 0: one is due, e.g. a catch-up run). */
static bool loop_round(pd_scrape_manager *m, int64_t max_wait_ms, int *running_out, int64_t *next)
{
    pthread_mutex_lock(&m->mu);
    if (m->stop) {
        pthread_mutex_unlock(&m->mu);
        return false;
    }
    for (target **rp = &m->retired; *rp;) {
        target *r = *rp;
        if (r->busy && !r->easy) { /* its outcome is being stored (store thread) */
            rp = &r->next_retired;
            continue;
        }
        *rp = r->next_retired;
        target_abort(m, r);
        target_free(r);
    }
    int64_t now = clk_mono(m), wait = max_wait_ms;
    pd__adaptive_tick(m->ad, now);
    for (size_t i = 0; i < m->tn; i++) {
        target *t = m->tv[i];
        int64_t iv = t->interval_ms;
        if (t->bs && t->burstable) {
            int64_t biv = pd__burst_interval(t->bs);
            if ((biv > 0) != t->in_burst) {
                t->in_burst = biv > 0;
                t->late = false;
                t->resume_ms = 0;
                int64_t wall = clk_wall(m);
                if (t->in_burst) /* the burst grid, spread as normal scrapes */
                    t->next_ms =
                        now +
                        ((pd__scrape_offset_ms(t->job, t->url, biv) - wall % biv) % biv + biv) %
                            biv;
                else
                    schedule_first(t, now, wall);
            }
            if (t->in_burst)
                iv = biv;
        }
        if (t->next_ms <= now) {
            int64_t passed = (now - t->next_ms) / iv + 1; /* slots due */
            bool over = false;
            if (!t->busy && t->in_burst && !pd__burst_budget_ok(t->bs, clk_wall(m)) &&
                clk_wall(m) - t->last_scrape_ms < t->interval_ms) {
                over = true; /* the budget is spent: only the normal cadence */
                pd__burst_over_budget(t->bs);
                passed--;
            }
            if (!t->busy && !over) {
                t->burst_scrape = t->in_burst;
                start_scrape(m, t);
                passed--; /* the slot taken now */
            } else if (t->catch_up && !t->late) {
                t->late = true;
                passed--; /* runs when the scrape ends */
            }
            if (passed > 0 && !t->retired && !t->in_burst)
                pd_metrics_add("profd_scrape_slots_missed_total", t->metric_labels, (double)passed);
            if (t->resume_ms) { /* a catch-up run: back to the schedule's phase */
                t->next_ms = t->resume_ms;
                t->resume_ms = 0;
            }
            /* next slot after now; skipped slots are not queued */
            if (t->next_ms <= now) {
                int64_t behind = now - t->next_ms;
                t->next_ms += (behind / iv + 1) * iv;
            }
        }
        if (t->next_ms - now < wait)
            wait = t->next_ms - now;
    }
    pthread_mutex_unlock(&m->mu);

    int running = 0;
    /* Events are taken in batches at most every LOOP_MIN_MS: each
     * round polls every open transfer's socket and walks every target,
     * so with a fleet (1,000 targets, ~1,000 CPU profiles open at once)
     * a round per event cost most of a core (bench/fleet). */
    int64_t since = mono_ms() - m->round_ms;
    if (since >= 0 && since < LOOP_MIN_MS && wait > 0) {
        struct timespec ts = {0, (long)(LOOP_MIN_MS - since) * 1000000L};
        nanosleep(&ts, NULL);
        wait = wait > LOOP_MIN_MS - since ? wait - (LOOP_MIN_MS - since) : 0;
    }
    m->round_ms = mono_ms();
    if (wait > 0)
        curl_multi_poll(m->multi, NULL, 0, (int)wait, NULL);
    curl_multi_perform(m->multi, &running);
    /* the transfers that ended: decoded one by one, stored together (one
     * call; on ClickHouse one batch), then each outcome recorded (store.c) */
    CURLMsg *msg;
    int left;
    while ((msg = curl_multi_info_read(m->multi, &left))) {
        if (msg->msg != CURLMSG_DONE)
            continue;
        char *priv = NULL;
        CURLcode res = msg->data.result;
        curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, &priv);
        if (priv)
            end_transfer(m, (target *)priv, res, pd__scrape_storer_slot(m->storer));
    }
    /* no store thread (a test's pd__scrape_round): stored and recorded now */
    pd__scrape_storer_flush(m->storer, false);
    if (running_out)
        *running_out = running;
    if (next) { /* stepped by a test (pd__scrape_round): the loop thread needs no answer */
        pthread_mutex_lock(&m->mu);
        int64_t now2 = clk_mono(m);
        *next = INT64_MAX;
        for (size_t i = 0; i < m->tn; i++)
            if (m->tv[i]->next_ms - now2 < *next)
                *next = m->tv[i]->next_ms - now2;
        pthread_mutex_unlock(&m->mu);
    }
    return true;
}

static void *loop(void *arg)
{
    pd_scrape_manager *m = arg;
    while (loop_round(m, MAX_WAIT_MS, NULL, NULL))
        ;
    return NULL;
}

int64_t pd__scrape_round(pd_scrape_manager *m, int64_t max_wait_ms, int *running)
{
    int64_t next = INT64_MAX;
    int r = 0;
    loop_round(m, max_wait_ms, &r, &next);
    if (running)
        *running = r;
    return next;
}

void pd_scrape_manager_set_clock(pd_scrape_manager *m, const pd_scrape_clock *c)
{
    pthread_mutex_lock(&m->mu);
    m->clock = c ? *c : (pd_scrape_clock){sys_mono_ms, sys_wall_ms, NULL};
    pthread_mutex_unlock(&m->mu);
}

void pd_scrape_manager_wake(pd_scrape_manager *m)
{
    curl_multi_wakeup(m->multi);
}

int pd_scrape_manager_start(pd_scrape_manager *m, pd_err *err)
{
    if (m->running)
        return 0;
    pthread_mutex_lock(&m->mu);
    m->stop = false;
    pthread_mutex_unlock(&m->mu);
    if (!m->storer_running) {
        int src = pd__scrape_storer_start(m->storer, err);
        if (src)
            return src;
        m->storer_running = true;
    }
    int rc = pthread_create(&m->thread, NULL, loop, m);
    if (rc)
        return pd_err_set(err, -rc, "cannot start the scrape thread: %s", strerror(rc));
    m->running = true;
    return pd__sd_start(m->sd, err);
}

void pd_scrape_manager_free(pd_scrape_manager *m)
{
    if (!m)
        return;
    pd__sd_free(m->sd); /* no rebuild after this */
    m->sd = NULL;
    if (m->running) {
        pthread_mutex_lock(&m->mu);
        m->stop = true;
        pthread_mutex_unlock(&m->mu);
        curl_multi_wakeup(m->multi);
        pthread_join(m->thread, NULL);
        m->running = false;
    }
    pd__scrape_storer_free(m->storer); /* what ended is stored and recorded first */
    pd_u64map none;
    pd_u64map_init(&none);
    for (size_t i = 0; i < m->tn; i++) {
        forget_series(m->tv[i], NULL, &none, &none); /* as a reload to no targets */
        target_abort(m, m->tv[i]);
        target_free(m->tv[i]);
    }
    free(m->tv);
    while (m->retired) {
        target *r = m->retired;
        m->retired = r->next_retired;
        target_abort(m, r);
        target_free(r);
    }
    pd__adaptive_free(m->ad);
    curl_multi_cleanup(m->multi);
    pthread_mutex_destroy(&m->mu);
    dropped_release(&m->dropped);
    free(m);
}

int pd_scrape_manager_alerts(pd_scrape_manager *m, const pd_scrape_alert *alerts, size_t n,
                             size_t *matched)
{
    *matched = 0;
    if (!m)
        return 0;
    pthread_mutex_lock(&m->mu);
    for (size_t i = 0; i < n; i++)
        *matched += pd__adaptive_alert(m->ad, &alerts[i], clk_mono(m));
    pthread_mutex_unlock(&m->mu);
    curl_multi_wakeup(m->multi); /* the loop switches the schedules now */
    return 0;
}

int pd_scrape_manager_events_open(pd_scrape_manager *m, const char *path, pd_err *err)
{
    pthread_mutex_lock(&m->mu);
    int rc = pd__adaptive_events_open(m->ad, path, err);
    pthread_mutex_unlock(&m->mu);
    return rc;
}

int pd_scrape_manager_events_json(pd_scrape_manager *m, int64_t from_ms, int64_t to_ms,
                                  const char *kind, pd_buf *out)
{
    if (!m)
        return pd_buf_puts(out, "[]");
    pthread_mutex_lock(&m->mu);
    int rc = pd__adaptive_events_json(m->ad, from_ms, to_ms, kind, out);
    pthread_mutex_unlock(&m->mu);
    return rc;
}

static int put_labels_json(pd_buf *out, const pd_labels *ls)
{
    int rc = pd_buf_putc(out, '{');
    for (size_t k = 0; k < ls->n && !rc; k++) {
        const pd_label *l = &ls->v[k];
        if ((k && (rc = pd_buf_putc(out, ','))) ||
            (rc = pd_buf_put_json_string(out, l->name, strlen(l->name))) ||
            (rc = pd_buf_putc(out, ':')))
            break;
        rc = pd_buf_put_json_string(out, l->value, strlen(l->value));
    }
    return rc ? rc : pd_buf_putc(out, '}');
}

static int put_active(pd_buf *out, const target *t, bool first)
{
    char iv[32], to[32];
    pd_format_duration(t->interval_ms, iv, sizeof iv);
    pd_format_duration(t->timeout_ms, to, sizeof to);
    int rc;
    if ((rc = pd_buf_puts(out, first ? "{\"labels\":" : ",{\"labels\":")) ||
        (rc = put_labels_json(out, &t->labels)) ||
        (rc = pd_buf_puts(out, ",\"discoveredLabels\":")) ||
        (rc = put_labels_json(out, &t->discovered)) ||
        (rc = pd_buf_puts(out, ",\"scrapePool\":")) ||
        (rc = pd_buf_put_json_string(out, t->job, strlen(t->job))) ||
        (rc = pd_buf_puts(out, ",\"scrapeUrl\":")) ||
        (rc = pd_buf_put_json_string(out, t->url, strlen(t->url))) ||
        (rc = pd_buf_puts(out, ",\"profileType\":")) ||
        (rc = pd_buf_put_json_string(out, t->name, strlen(t->name))) ||
        (rc = pd_buf_printf(out, ",\"health\":\"%s\",\"lastError\":",
                            t->health == HEALTH_UP     ? "up"
                            : t->health == HEALTH_DOWN ? "down"
                                                       : "unknown")) ||
        (rc = pd_buf_put_json_string(out, t->last_error, strlen(t->last_error))))
        return rc;
    return pd_buf_printf(out,
                         ",\"lastScrape\":%lld,\"lastScrapeDuration\":%.6f,"
                         "\"scrapeInterval\":\"%s\",\"scrapeTimeout\":\"%s\"}",
                         (long long)t->last_scrape_ms, t->last_duration_s, iv, to);
}

int pd_scrape_manager_targets_json(pd_scrape_manager *m, const char *state, const char *pool,
                                   pd_buf *out)
{
    bool any = !state || !*state || !strcasecmp(state, "any");
    bool active = any || !strcasecmp(state, "active");
    bool dropped = any || !strcasecmp(state, "dropped");
    if (pool && !*pool)
        pool = NULL;
    int rc = pd_buf_puts(out, "{\"activeTargets\":[");
    pthread_mutex_lock(&m->mu);
    bool first = true;
    for (size_t i = 0; active && i < m->tn && !rc; i++) {
        if (pool && strcmp(m->tv[i]->job, pool) != 0)
            continue;
        rc = put_active(out, m->tv[i], first);
        first = false;
    }
    if (!rc)
        rc = pd_buf_puts(out, "],\"droppedTargets\":[");
    const dropped_set *d = &m->dropped;
    first = true;
    for (size_t i = 0; dropped && i < d->n && !rc; i++) {
        const char *job = d->jobs[d->v[i].job];
        if (pool && strcmp(job, pool) != 0)
            continue;
        if ((rc = pd_buf_puts(out, first ? "{\"discoveredLabels\":" : ",{\"discoveredLabels\":")) ||
            (rc = put_labels_json(out, &d->v[i].discovered)) ||
            (rc = pd_buf_puts(out, ",\"scrapePool\":")) ||
            (rc = pd_buf_put_json_string(out, job, strlen(job))) ||
            (rc = pd_buf_puts(out, ",\"profileType\":")) ||
            (rc = pd_buf_put_json_string(out, d->v[i].name, strlen(d->v[i].name))))
            break;
        rc = pd_buf_putc(out, '}');
        first = false;
    }
    if (!rc)
        rc = pd_buf_puts(out, dropped ? "],\"droppedTargetCounts\":{"
                                      : "],\"droppedTargetCounts\":null");
    for (size_t j = 0; dropped && j < d->n_jobs && !rc; j++) {
        if ((j && (rc = pd_buf_putc(out, ','))) ||
            (rc = pd_buf_put_json_string(out, d->jobs[j], strlen(d->jobs[j]))))
            break;
        rc = pd_buf_printf(out, ":%llu", (unsigned long long)d->count[j]);
    }
    pthread_mutex_unlock(&m->mu);
    if (!rc)
        rc = pd_buf_puts(out, dropped ? "}}" : "}");
    return rc;
}
