/*
 * rules/remote_write.c — Prometheus remote-write 1.0 sender (rules.h).
 *
 * One pd_remote = one URL, one bounded FIFO of samples and one thread:
 *
 *   enqueue ──> [ring of capacity samples] ──take ≤ max_samples_per_send──> batch
 *                 full: dropped (counted)          encode (WriteRequest, protobuf-c)
 *                                                  snappy block compress
 *                                                  POST (libcurl)
 *     2xx: sent            (samples_total += n)
 *     5xx, 429, no answer: retried (retried_samples_total += n), same batch
 *                          after backoff (min_backoff doubling to max_backoff)
 *     other 4xx: failed    (failed_samples_total += n), batch dropped
 *
 * The batch being sent counts in samples_pending with the queue. Samples of
 * one label set keep their order (the ring is FIFO and a batch groups them
 * into one TimeSeries in order), which is what a receiver needs.
 */
#include <curl/curl.h>
#include <errno.h>
#include <pthread.h>
#include <snappy-c.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/log.h"
#include "base/metrics.h"
#include "rules/rules.h"
#include "remote_write.pb-c.h"

typedef struct rw_sample {
    pd_labels labels; /* owned */
    int64_t ts;
    double v;
} rw_sample;

struct pd_remote {
    pd_remote_write_config cfg; /* deep copy */
    char mlabels[700];          /* remote_name="..",url=".." for /metrics */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    rw_sample *ring;
    size_t head, n;   /* FIFO: n samples from head */
    size_t in_flight; /* the batch being sent */
    bool stop;
    pthread_t th;
};

static void metrics_describe(void)
{
    pd_metrics_describe("profd_remote_storage_samples_total", PD_METRIC_COUNTER,
                        "Samples of recording rules sent to remote storage (2xx).");
    pd_metrics_describe("profd_remote_storage_failed_samples_total", PD_METRIC_COUNTER,
                        "Samples the remote storage refused with a 4xx other than 429 "
                        "(not retried, dropped).");
    pd_metrics_describe("profd_remote_storage_retried_samples_total", PD_METRIC_COUNTER,
                        "Samples sent again after a 5xx, a 429 or a connection error.");
    pd_metrics_describe("profd_remote_storage_dropped_samples_total", PD_METRIC_COUNTER,
                        "Samples dropped before sending: the queue was full, or profd stopped "
                        "or removed the remote with them queued.");
    pd_metrics_describe("profd_remote_storage_samples_pending", PD_METRIC_GAUGE,
                        "Samples queued for remote storage, the batch being sent included.");
}

static void update_pending(pd_remote *rm)
{
    pd_metrics_set("profd_remote_storage_samples_pending", rm->mlabels,
                   (double)(rm->n + rm->in_flight));
}

/* ---- encoding ---- */

int pd_remote_encode(const pd_labels *const *labels, const int64_t *ts, const double *v, size_t n,
                     pd_buf *out)
{
    int rc = PD_ENOMEM;
    Prometheus__WriteRequest wr = PROMETHEUS__WRITE_REQUEST__INIT;
    Prometheus__TimeSeries *series = calloc(n ? n : 1, sizeof *series);
    Prometheus__TimeSeries **sp = calloc(n ? n : 1, sizeof *sp);
    Prometheus__Sample *samples = calloc(n ? n : 1, sizeof *samples);
    Prometheus__Sample **smp = calloc(n ? n : 1, sizeof *smp);
    size_t n_labels = 0;
    for (size_t i = 0; i < n; i++)
        n_labels += labels[i]->n;
    Prometheus__Label *lab = calloc(n_labels ? n_labels : 1, sizeof *lab);
    Prometheus__Label **lp = calloc(n_labels ? n_labels : 1, sizeof *lp);
    size_t *order = calloc(n ? n : 1, sizeof *order);
    bool *done = calloc(n ? n : 1, sizeof *done);
    uint8_t *wire = NULL;
    if (!series || !sp || !samples || !smp || !lab || !lp || !order || !done)
        goto out;
    /* group: the samples of one label set, in their order */
    size_t ns = 0, k = 0, li = 0;
    for (size_t i = 0; i < n; i++) {
        if (done[i])
            continue;
        Prometheus__TimeSeries *s = &series[ns];
        prometheus__time_series__init(s);
        s->labels = &lp[li];
        s->n_labels = labels[i]->n;
        for (size_t j = 0; j < labels[i]->n; j++) {
            prometheus__label__init(&lab[li]);
            lab[li].name = labels[i]->v[j].name;
            lab[li].value = labels[i]->v[j].value;
            lp[li] = &lab[li];
            li++;
        }
        s->samples = &smp[k];
        for (size_t j = i; j < n; j++) {
            if (done[j] || (j != i && pd_labels_cmp(labels[i], labels[j])))
                continue;
            done[j] = true;
            prometheus__sample__init(&samples[k]);
            samples[k].value = v[j];
            samples[k].timestamp = ts[j];
            smp[k] = &samples[k];
            k++;
            s->n_samples++;
        }
        sp[ns++] = s;
    }
    wr.timeseries = sp;
    wr.n_timeseries = ns;
    size_t len = prometheus__write_request__get_packed_size(&wr);
    if (!(wire = malloc(len ? len : 1)))
        goto out;
    prometheus__write_request__pack(&wr, wire);
    rc = pd_buf_append(out, wire, len);
out:
    free(series);
    free(sp);
    free(samples);
    free(smp);
    free(lab);
    free(lp);
    free(order);
    free(done);
    free(wire);
    return rc;
}

/* ---- sending ---- */

static size_t discard_body(char *p, size_t sz, size_t n, void *ud)
{
    pd_buf *b = ud;
    size_t len = sz * n;
    if (b->len < 512)
        pd_buf_append(b, p, len < 512 ? len : 512);
    return len;
}

/* Aborts a transfer under way when the remote is being stopped. */
static int on_progress(void *ud, curl_off_t dt, curl_off_t dn, curl_off_t ut, curl_off_t un)
{
    (void)dt, (void)dn, (void)ut, (void)un;
    pd_remote *rm = ud;
    return __atomic_load_n(&rm->stop, __ATOMIC_ACQUIRE) ? 1 : 0;
}

/* POSTs one compressed body. Returns the HTTP status, or 0 when no answer
 * came (connection refused, timeout); msg gets a short reason. */
static long post(pd_remote *rm, const char *body, size_t len, char *msg, size_t msgsz)
{
    CURL *h = curl_easy_init();
    if (!h) {
        snprintf(msg, msgsz, "curl_easy_init failed");
        return 0;
    }
    struct curl_slist *hdr = NULL;
    hdr = curl_slist_append(hdr, "Content-Encoding: snappy");
    hdr = curl_slist_append(hdr, "Content-Type: application/x-protobuf");
    hdr = curl_slist_append(hdr, "X-Prometheus-Remote-Write-Version: 0.1.0");
    hdr = curl_slist_append(hdr, "User-Agent: profd");
    for (size_t i = 0; i < rm->cfg.n_headers; i++)
        hdr = curl_slist_append(hdr, rm->cfg.headers[i]);
    pd_buf resp;
    pd_buf_init(&resp, 4096);
    curl_easy_setopt(h, CURLOPT_URL, rm->cfg.url);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdr);
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, (long)rm->cfg.timeout_ms);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, discard_body);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &resp);
    curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, on_progress);
    curl_easy_setopt(h, CURLOPT_XFERINFODATA, rm);
    if (rm->cfg.username) {
        curl_easy_setopt(h, CURLOPT_USERNAME, rm->cfg.username);
        curl_easy_setopt(h, CURLOPT_PASSWORD, rm->cfg.password ? rm->cfg.password : "");
    }
    long code = 0;
    CURLcode cr = curl_easy_perform(h);
    if (cr != CURLE_OK)
        snprintf(msg, msgsz, "%s", curl_easy_strerror(cr));
    else {
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);
        size_t l = resp.len;
        while (l && (resp.data[l - 1] == '\n' || resp.data[l - 1] == '\r'))
            l--;
        snprintf(msg, msgsz, "HTTP %ld: %.*s", code, (int)(l > 200 ? 200 : l),
                 resp.data ? (const char *)resp.data : "");
    }
    pd_buf_release(&resp);
    curl_slist_free_all(hdr);
    curl_easy_cleanup(h);
    return code;
}

/* Sleeps ms unless stopped meanwhile (mu held). true when stopped. */
static bool wait_ms(pd_remote *rm, int64_t ms)
{
    struct timespec until;
    clock_gettime(CLOCK_MONOTONIC, &until);
    until.tv_sec += ms / 1000;
    until.tv_nsec += (ms % 1000) * 1000000;
    if (until.tv_nsec >= 1000000000) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000;
    }
    while (!rm->stop)
        if (pthread_cond_timedwait(&rm->cv, &rm->mu, &until) == ETIMEDOUT)
            break;
    return rm->stop;
}

static void *sender(void *arg)
{
    pd_remote *rm = arg;
    size_t max = rm->cfg.max_samples_per_send;
    rw_sample *batch = calloc(max, sizeof *batch);
    const pd_labels **lp = calloc(max, sizeof *lp);
    int64_t *ts = calloc(max, sizeof *ts);
    double *vs = calloc(max, sizeof *vs);
    pd_buf wire, comp;
    pd_buf_init(&wire, 0);
    pd_buf_init(&comp, 0);
    pthread_mutex_lock(&rm->mu);
    while (batch && lp && ts && vs) {
        while (!rm->stop && rm->n == 0)
            pthread_cond_wait(&rm->cv, &rm->mu);
        if (rm->stop)
            break;
        size_t k = 0;
        while (rm->n && k < max) {
            batch[k++] = rm->ring[rm->head];
            rm->head = (rm->head + 1) % rm->cfg.capacity;
            rm->n--;
        }
        rm->in_flight = k;
        update_pending(rm);
        pthread_mutex_unlock(&rm->mu);

        for (size_t i = 0; i < k; i++) {
            lp[i] = &batch[i].labels;
            ts[i] = batch[i].ts;
            vs[i] = batch[i].v;
        }
        pd_buf_reset(&wire);
        pd_buf_reset(&comp);
        int rc = pd_remote_encode(lp, ts, vs, k, &wire);
        size_t clen = snappy_max_compressed_length(wire.len);
        if (rc == 0)
            rc = pd_buf_reserve(&comp, clen);
        if (rc == 0 && snappy_compress((const char *)wire.data, wire.len, (char *)comp.data,
                                       &clen) != SNAPPY_OK)
            rc = PD_EINVAL;
        comp.len = rc == 0 ? clen : 0;
        int64_t backoff = rm->cfg.min_backoff_ms;
        bool stopped = false;
        for (;;) {
            if (rc < 0) { /* out of memory: cannot be sent */
                pd_metrics_add("profd_remote_storage_failed_samples_total", rm->mlabels, (double)k);
                pd_log(PD_LOG_ERROR, "remote write: cannot encode a batch", "remote=%s samples=%zu",
                       rm->cfg.name, k);
                break;
            }
            char msg[300];
            long code = post(rm, (const char *)comp.data, comp.len, msg, sizeof msg);
            if (code >= 200 && code < 300) {
                pd_metrics_add("profd_remote_storage_samples_total", rm->mlabels, (double)k);
                break;
            }
            if (code >= 400 && code < 500 && code != 429) {
                pd_metrics_add("profd_remote_storage_failed_samples_total", rm->mlabels, (double)k);
                pd_log(PD_LOG_ERROR, "remote write refused a batch; dropped",
                       "remote=%s url=%s samples=%zu err=\"%s\"", rm->cfg.name, rm->cfg.url, k,
                       msg);
                break;
            }
            pd_metrics_add("profd_remote_storage_retried_samples_total", rm->mlabels, (double)k);
            pd_log(PD_LOG_WARN, "remote write failed; retrying",
                   "remote=%s url=%s samples=%zu backoff_ms=%lld err=\"%s\"", rm->cfg.name,
                   rm->cfg.url, k, (long long)backoff, msg);
            pthread_mutex_lock(&rm->mu);
            stopped = wait_ms(rm, backoff);
            pthread_mutex_unlock(&rm->mu);
            if (stopped) {
                pd_metrics_add("profd_remote_storage_dropped_samples_total", rm->mlabels,
                               (double)k);
                break;
            }
            backoff = backoff * 2 > rm->cfg.max_backoff_ms ? rm->cfg.max_backoff_ms : backoff * 2;
        }
        for (size_t i = 0; i < k; i++)
            pd_labels_release(&batch[i].labels);
        pthread_mutex_lock(&rm->mu);
        rm->in_flight = 0;
        update_pending(rm);
        if (stopped)
            break;
    }
    pthread_mutex_unlock(&rm->mu);
    pd_buf_release(&wire);
    pd_buf_release(&comp);
    free(batch);
    free(lp);
    free(ts);
    free(vs);
    return NULL;
}

/* ---- lifecycle ---- */

static int copy_cfg(pd_remote_write_config *d, const pd_remote_write_config *s)
{
    *d = *s;
    d->name = strdup(s->name ? s->name : "");
    d->url = strdup(s->url ? s->url : "");
    d->username = s->username ? strdup(s->username) : NULL;
    d->password = s->password ? strdup(s->password) : NULL;
    d->headers = calloc(s->n_headers ? s->n_headers : 1, sizeof *d->headers);
    d->n_headers = 0;
    if (!d->name || !d->url || !d->headers || (s->username && !d->username) ||
        (s->password && !d->password))
        return PD_ENOMEM;
    for (size_t i = 0; i < s->n_headers; i++) {
        if (!(d->headers[i] = strdup(s->headers[i])))
            return PD_ENOMEM;
        d->n_headers++;
    }
    return 0;
}

static void free_remote(pd_remote *rm)
{
    for (size_t i = 0; i < rm->cfg.n_headers; i++)
        free(rm->cfg.headers[i]);
    free(rm->cfg.headers);
    free(rm->cfg.name);
    free(rm->cfg.url);
    free(rm->cfg.username);
    free(rm->cfg.password);
    free(rm->ring);
    pthread_mutex_destroy(&rm->mu);
    pthread_cond_destroy(&rm->cv);
    free(rm);
}

int pd_remote_start(const pd_remote_write_config *cfg, pd_remote **out, pd_err *err)
{
    *out = NULL;
    metrics_describe();
    pd_remote *rm = calloc(1, sizeof *rm);
    if (!rm)
        return pd_err_set(err, PD_ENOMEM, "remote write: out of memory");
    pthread_mutex_init(&rm->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&rm->cv, &ca);
    pthread_condattr_destroy(&ca);
    if (copy_cfg(&rm->cfg, cfg) < 0) {
        free_remote(rm);
        return pd_err_set(err, PD_ENOMEM, "remote write: out of memory");
    }
    if (!rm->cfg.capacity)
        rm->cfg.capacity = 100000;
    if (!rm->cfg.max_samples_per_send)
        rm->cfg.max_samples_per_send = 2000;
    if (rm->cfg.min_backoff_ms <= 0)
        rm->cfg.min_backoff_ms = 30;
    if (rm->cfg.max_backoff_ms < rm->cfg.min_backoff_ms)
        rm->cfg.max_backoff_ms = rm->cfg.min_backoff_ms;
    if (rm->cfg.timeout_ms <= 0)
        rm->cfg.timeout_ms = 30000;
    if (!(rm->ring = calloc(rm->cfg.capacity, sizeof *rm->ring))) {
        free_remote(rm);
        return pd_err_set(err, PD_ENOMEM, "remote write: out of memory for a queue of %zu",
                          cfg->capacity);
    }
    /* label values escaped for the text format: the URL may hold '"' or '\\' */
    char url[500];
    size_t o = 0;
    for (const char *p = rm->cfg.url; *p && o + 3 < sizeof url; p++) {
        if (*p == '"' || *p == '\\')
            url[o++] = '\\';
        url[o++] = *p == '\n' ? ' ' : *p;
    }
    url[o] = 0;
    snprintf(rm->mlabels, sizeof rm->mlabels, "remote_name=\"%s\",url=\"%s\"", rm->cfg.name, url);
    pd_metrics_add("profd_remote_storage_samples_total", rm->mlabels, 0);
    pd_metrics_add("profd_remote_storage_failed_samples_total", rm->mlabels, 0);
    pd_metrics_add("profd_remote_storage_retried_samples_total", rm->mlabels, 0);
    pd_metrics_add("profd_remote_storage_dropped_samples_total", rm->mlabels, 0);
    update_pending(rm);
    int rc = pthread_create(&rm->th, NULL, sender, rm);
    if (rc) {
        free_remote(rm);
        return pd_err_set(err, -rc, "remote write: cannot start a thread: %s", strerror(rc));
    }
    *out = rm;
    return 0;
}

void pd_remote_enqueue(pd_remote *rm, const pd_labels *labels, int64_t ts_ms, double value)
{
    rw_sample s = {.ts = ts_ms, .v = value};
    if (pd_labels_copy(&s.labels, labels) < 0) {
        pd_metrics_add("profd_remote_storage_dropped_samples_total", rm->mlabels, 1);
        return;
    }
    pthread_mutex_lock(&rm->mu);
    if (rm->n >= rm->cfg.capacity || rm->stop) {
        pthread_mutex_unlock(&rm->mu);
        pd_labels_release(&s.labels);
        pd_metrics_add("profd_remote_storage_dropped_samples_total", rm->mlabels, 1);
        return;
    }
    rm->ring[(rm->head + rm->n) % rm->cfg.capacity] = s;
    rm->n++;
    update_pending(rm);
    pthread_cond_broadcast(&rm->cv);
    pthread_mutex_unlock(&rm->mu);
}

size_t pd_remote_pending(pd_remote *rm)
{
    pthread_mutex_lock(&rm->mu);
    size_t n = rm->n + rm->in_flight;
    pthread_mutex_unlock(&rm->mu);
    return n;
}

void pd_remote_stop(pd_remote *rm)
{
    if (!rm)
        return;
    pthread_mutex_lock(&rm->mu);
    __atomic_store_n(&rm->stop, true, __ATOMIC_RELEASE);
    pthread_cond_broadcast(&rm->cv);
    pthread_mutex_unlock(&rm->mu);
    pthread_join(rm->th, NULL);
    if (rm->n)
        pd_metrics_add("profd_remote_storage_dropped_samples_total", rm->mlabels, (double)rm->n);
    for (size_t i = 0; i < rm->n; i++)
        pd_labels_release(&rm->ring[(rm->head + i) % rm->cfg.capacity].labels);
    rm->n = 0;
    update_pending(rm);
    free_remote(rm);
}
