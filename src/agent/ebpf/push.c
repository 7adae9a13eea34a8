/*
 * agent/ebpf/push.c — the agent's way to profd: a FIFO of encoded
 * push.v1.PushRequest bodies, bounded in bytes, and one thread that POSTs
 * the oldest to URL/push.v1.PusherService/Push (Connect, application/proto:
 * the push Grafana Alloy's pyroscope.ebpf uses, served by profd's
 * api/push_connect.c) until it is taken (2xx) or refused for good (4xx
 * other than 408/429: dropped, counted, logged); other failures are
 * retried with exponential backoff from 1 s to 30 s. The loop that fills
 * the queue never waits: when a new body would pass the byte bound the
 * oldest bodies are dropped (counted in dropped/dropped_bytes).
 *
 * Metrics (metrics.c declares them): profd_agent_pushes_total,
 * profd_agent_profiles_pushed_total, profd_agent_pushed_bytes_total,
 * profd_agent_push_failures_total (attempts that will be retried),
 * profd_agent_profiles_dropped_total{reason="buffer_full"|"refused"} and
 * profd_agent_dropped_bytes_total{reason}, the gauges
 * profd_agent_buffer_bytes / _requests (what waits, not counting the
 * request being sent).
 */
#include "agent/ebpf/ebpf_int.h"

#include <curl/curl.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/log.h"
#include "base/metrics.h"

#define BACKOFF_MIN_MS 1000
#define BACKOFF_MAX_MS 30000

typedef struct item {
    struct item *next;
    pd_buf body;
    size_t n_profiles;
} item;

struct pd_ebpf_push {
    pd_ebpf_push_cfg cfg;
    char *url;
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    item *head, *tail;
    bool stop;
    int64_t stop_deadline_ns;
    pd_ebpf_push_stats st;
};

/* An item leaves for good without being delivered (p->mu held). */
static void drop_item(pd_ebpf_push *p, item *it, const char *reason)
{
    char lbl[64];
    snprintf(lbl, sizeof lbl, "reason=\"%s\"", reason);
    p->st.dropped++;
    p->st.dropped_bytes += it->body.len;
    pd_metrics_add("profd_agent_profiles_dropped_total", lbl, (double)it->n_profiles);
    pd_metrics_add("profd_agent_dropped_bytes_total", lbl, (double)it->body.len);
    pd_buf_release(&it->body);
    free(it);
}

/* The buffer gauges (p->mu held). */
static void gauges(pd_ebpf_push *p)
{
    pd_metrics_set("profd_agent_buffer_bytes", NULL, (double)p->st.queued_bytes);
    pd_metrics_set("profd_agent_buffer_requests", NULL, (double)p->st.queued);
}

static int64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static size_t discard(char *d, size_t sz, size_t n, void *ctx)
{
    pd_buf *b = ctx;
    if (b->len < 512)
        pd_buf_append(b, d, sz * n < 512 ? sz * n : 512);
    return sz * n;
}

/* 0 sent, 1 retry, -1 refused for good */
static int send_one(pd_ebpf_push *p, CURL *c, const pd_buf *body)
{
    pd_buf reply;
    pd_buf_init(&reply, 4096);
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, body->data);
    curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)body->len);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, discard);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &reply);
    CURLcode cc = curl_easy_perform(c);
    long status = 0;
    int rc;
    if (cc != CURLE_OK) {
        pd_log_warn("push failed", "url=%s err=\"%s\"", p->url, curl_easy_strerror(cc));
        rc = 1;
    } else {
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
        if (status >= 200 && status < 300) {
            rc = 0;
        } else {
            pd_buf_putc(&reply, 0);
            for (char *s = reply.data; s && *s; s++)
                if (*s == '"' || *s == '\n')
                    *s = '\'';
            pd_log_warn("push refused", "url=%s status=%ld reply=\"%.300s\"", p->url, status,
                        reply.data ? reply.data : "");
            rc = (status >= 400 && status < 500 && status != 408 && status != 429) ? -1 : 1;
        }
    }
    pd_buf_release(&reply);
    return rc;
}

static void *run(void *arg)
{
    pd_ebpf_push *p = arg;
    CURL *c = curl_easy_init();
    struct curl_slist *hdr = NULL;
    hdr = curl_slist_append(hdr, "Content-Type: application/proto");
    hdr = curl_slist_append(hdr, "Connect-Protocol-Version: 1");
    char auth[4200];
    if (p->cfg.bearer) {
        snprintf(auth, sizeof auth, "Authorization: Bearer %s", p->cfg.bearer);
        hdr = curl_slist_append(hdr, auth);
    }
    if (c) {
        curl_easy_setopt(c, CURLOPT_URL, p->url);
        curl_easy_setopt(c, CURLOPT_HTTPHEADER, hdr);
        curl_easy_setopt(c, CURLOPT_USERAGENT, "profd-agent");
        curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, (long)p->cfg.timeout_ms);
        curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
        if (p->cfg.ca_file)
            curl_easy_setopt(c, CURLOPT_CAINFO, p->cfg.ca_file);
        if (p->cfg.cert_file) {
            curl_easy_setopt(c, CURLOPT_SSLCERT, p->cfg.cert_file);
            curl_easy_setopt(c, CURLOPT_SSLKEY, p->cfg.key_file);
        }
        if (p->cfg.insecure) {
            curl_easy_setopt(c, CURLOPT_SSL_VERIFYPEER, 0L);
            curl_easy_setopt(c, CURLOPT_SSL_VERIFYHOST, 0L);
        }
        if (p->cfg.username) {
            curl_easy_setopt(c, CURLOPT_HTTPAUTH, (long)CURLAUTH_BASIC);
            curl_easy_setopt(c, CURLOPT_USERNAME, p->cfg.username);
            curl_easy_setopt(c, CURLOPT_PASSWORD, p->cfg.password ? p->cfg.password : "");
        }
    }
    int64_t backoff = BACKOFF_MIN_MS;
    pthread_mutex_lock(&p->mu);
    for (;;) {
        while (!p->head && !p->stop)
            pthread_cond_wait(&p->cv, &p->mu);
        if (!p->head || (p->stop && mono_ns() >= p->stop_deadline_ns))
            break;
        item *it = p->head; /* stays queued (and droppable) only once taken out */
        p->head = it->next;
        if (!p->head)
            p->tail = NULL;
        p->st.queued--;
        p->st.queued_bytes -= it->body.len;
        gauges(p);
        pthread_mutex_unlock(&p->mu);
        int rc = c ? send_one(p, c, &it->body) : 1;
        pthread_mutex_lock(&p->mu);
        if (rc <= 0) {
            if (rc == 0) {
                p->st.sent++;
                pd_metrics_add("profd_agent_pushes_total", NULL, 1);
                pd_metrics_add("profd_agent_profiles_pushed_total", NULL, (double)it->n_profiles);
                pd_metrics_add("profd_agent_pushed_bytes_total", NULL, (double)it->body.len);
                pd_buf_release(&it->body);
                free(it);
            } else {
                drop_item(p, it, "refused");
            }
            gauges(p);
            backoff = BACKOFF_MIN_MS;
            continue;
        }
        p->st.failed_attempts++;
        pd_metrics_add("profd_agent_push_failures_total", NULL, 1);
        /* back at the head, unless new bodies pushed it out meanwhile */
        if (p->st.queued_bytes + it->body.len > p->cfg.max_buffer_bytes) {
            drop_item(p, it, "buffer_full");
            gauges(p);
        } else {
            it->next = p->head;
            p->head = it;
            if (!p->tail)
                p->tail = it;
            p->st.queued++;
            p->st.queued_bytes += it->body.len;
            gauges(p);
        }
        if (p->stop && mono_ns() >= p->stop_deadline_ns)
            break;
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        int64_t wait = backoff;
        if (p->stop) {
            int64_t left = (p->stop_deadline_ns - mono_ns()) / 1000000;
            if (left < wait)
                wait = left > 0 ? left : 0;
        }
        ts.tv_sec += wait / 1000;
        ts.tv_nsec += (wait % 1000) * 1000000;
        if (ts.tv_nsec >= 1000000000) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000;
        }
        pthread_cond_timedwait(&p->cv, &p->mu, &ts);
        backoff = backoff * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : backoff * 2;
    }
    pthread_mutex_unlock(&p->mu);
    curl_slist_free_all(hdr);
    if (c)
        curl_easy_cleanup(c);
    return NULL;
}

int pd_ebpf_push_start(const pd_ebpf_push_cfg *cfg, pd_ebpf_push **out)
{
    *out = NULL;
    pd_ebpf_push *p = calloc(1, sizeof *p);
    if (!p)
        return PD_ENOMEM;
    p->cfg = *cfg;
    size_t n = strlen(cfg->url);
    while (n && cfg->url[n - 1] == '/')
        n--;
    if (asprintf(&p->url, "%.*s/push.v1.PusherService/Push", (int)n, cfg->url) < 0) {
        free(p);
        return PD_ENOMEM;
    }
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv, NULL);
    int rc = pthread_create(&p->thread, NULL, run, p);
    if (rc) {
        free(p->url);
        free(p);
        return -rc;
    }
    *out = p;
    return 0;
}

void pd_ebpf_push_enqueue(pd_ebpf_push *p, pd_buf *body, size_t n_profiles)
{
    item *it = calloc(1, sizeof *it);
    if (!it) {
        pd_metrics_add("profd_agent_profiles_dropped_total", "reason=\"out_of_memory\"",
                       (double)n_profiles);
        pd_buf_release(body);
        return;
    }
    it->body = *body;
    it->n_profiles = n_profiles;
    pd_buf_init(body, body->max);
    pthread_mutex_lock(&p->mu);
    while (p->head && p->st.queued_bytes + it->body.len > p->cfg.max_buffer_bytes) {
        item *old = p->head;
        p->head = old->next;
        if (!p->head)
            p->tail = NULL;
        p->st.queued--;
        p->st.queued_bytes -= old->body.len;
        drop_item(p, old, "buffer_full");
    }
    if (it->body.len > p->cfg.max_buffer_bytes) {
        drop_item(p, it, "buffer_full");
    } else {
        if (p->tail)
            p->tail->next = it;
        else
            p->head = it;
        p->tail = it;
        p->st.queued++;
        p->st.queued_bytes += it->body.len;
        pthread_cond_signal(&p->cv);
    }
    gauges(p);
    pthread_mutex_unlock(&p->mu);
}

void pd_ebpf_push_get_stats(pd_ebpf_push *p, pd_ebpf_push_stats *st)
{
    pthread_mutex_lock(&p->mu);
    *st = p->st;
    pthread_mutex_unlock(&p->mu);
}

void pd_ebpf_push_stop(pd_ebpf_push *p, int64_t wait_ms)
{
    if (!p)
        return;
    pthread_mutex_lock(&p->mu);
    p->stop = true;
    p->stop_deadline_ns = mono_ns() + wait_ms * 1000000;
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
    pthread_join(p->thread, NULL);
    while (p->head) {
        item *it = p->head;
        p->head = it->next;
        pd_buf_release(&it->body);
        free(it);
    }
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->cv);
    free(p->url);
    free(p);
}
