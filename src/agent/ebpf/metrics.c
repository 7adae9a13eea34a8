/*
 * agent/ebpf/metrics.c — profd-agent's own metrics (base/metrics.h's
 * registry, the one profd uses) and the small HTTP server that serves them
 * at GET /metrics when --web.listen-address is given (libmicrohttpd, its
 * internal polling thread, at most 16 connections, 10 s timeout; the agent
 * layer does not use profd's http/ server, DESIGN.md §2).
 *
 * Families (docs/ebpf-agent.md#metrics):
 *   profd_agent_samples_total                 samples drained from BPF
 *   profd_agent_samples_lost_total            samples the BPF program could not count (map full)
 *   profd_agent_uploads_total                 upload intervals done
 *   profd_agent_processes_seen_total          processes with samples, once per interval
 *   profd_agent_processes                     processes in the last interval
 *   profd_agent_pushes_total                  push requests profd took (2xx)
 *   profd_agent_profiles_pushed_total         profiles in them
 *   profd_agent_pushed_bytes_total            their bytes
 *   profd_agent_push_failures_total           attempts that failed and will be retried
 *   profd_agent_profiles_dropped_total{reason}  profiles never delivered: relabel,
 *                                             buffer_full, refused, too_large,
 *                                             max_processes, out_of_memory
 *   profd_agent_dropped_bytes_total{reason}   bytes of requests dropped (buffer_full, refused)
 *   profd_agent_buffer_bytes / _requests      what waits to be pushed
 *   profd_agent_buffer_max_bytes              --buffer.max-bytes
 *   profd_agent_config_reloads_total{result}  SIGHUP reloads of --config.file: success, failure
 *   profd_agent_config_last_reload_successful 1 when the last (re)load worked, else 0
 *   profd_agent_config_last_reload_success_timestamp_seconds  when it last worked
 */
#include "agent/ebpf/ebpf_int.h"

#include <arpa/inet.h>
#include <errno.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "base/metrics.h"

static const char *const drop_reasons[] = {"relabel",   "buffer_full",   "refused",
                                           "too_large", "max_processes", "out_of_memory"};

void pd_ebpf_metrics_init(size_t buffer_max_bytes)
{
    static const struct {
        const char *name;
        pd_metric_kind kind;
        const char *help;
    } fam[] = {
        {"profd_agent_samples_total", PD_METRIC_COUNTER, "CPU samples drained from the BPF maps."},
        {"profd_agent_samples_lost_total", PD_METRIC_COUNTER,
         "CPU samples the BPF program could not count (its map was full)."},
        {"profd_agent_uploads_total", PD_METRIC_COUNTER, "Upload intervals done."},
        {"profd_agent_processes_seen_total", PD_METRIC_COUNTER,
         "Processes that had samples, counted once per upload interval."},
        {"profd_agent_processes", PD_METRIC_GAUGE,
         "Processes that had samples in the last upload interval."},
        {"profd_agent_pushes_total", PD_METRIC_COUNTER, "Push requests profd took (2xx)."},
        {"profd_agent_profiles_pushed_total", PD_METRIC_COUNTER,
         "Profiles in the push requests profd took."},
        {"profd_agent_pushed_bytes_total", PD_METRIC_COUNTER,
         "Bytes of the push requests profd took."},
        {"profd_agent_push_failures_total", PD_METRIC_COUNTER,
         "Push attempts that failed (network, 5xx, 408, 429) and will be retried."},
        {"profd_agent_profiles_dropped_total", PD_METRIC_COUNTER,
         "Profiles never delivered, by reason: relabel (a rule dropped the process), "
         "buffer_full (oldest dropped past --buffer.max-bytes), refused (a 4xx), too_large "
         "(one profile over --upload.max-bytes), max_processes (over 4096 processes in an "
         "interval), out_of_memory."},
        {"profd_agent_dropped_bytes_total", PD_METRIC_COUNTER,
         "Bytes of the push requests dropped, by reason (buffer_full, refused)."},
        {"profd_agent_buffer_bytes", PD_METRIC_GAUGE,
         "Bytes of push requests waiting to be delivered."},
        {"profd_agent_buffer_requests", PD_METRIC_GAUGE, "Push requests waiting to be delivered."},
        {"profd_agent_buffer_max_bytes", PD_METRIC_GAUGE, "--buffer.max-bytes."},
        {"profd_agent_config_reloads_total", PD_METRIC_COUNTER,
         "Reloads of --config.file on SIGHUP, by result (success, failure: the old rules "
         "stay)."},
        {"profd_agent_config_last_reload_successful", PD_METRIC_GAUGE,
         "1 when the last load of --config.file (at start or on SIGHUP) worked, else 0."},
        {"profd_agent_config_last_reload_success_timestamp_seconds", PD_METRIC_GAUGE,
         "Unix time of the last load of --config.file that worked."},
    };
    for (size_t i = 0; i < sizeof fam / sizeof *fam; i++) {
        pd_metrics_describe(fam[i].name, fam[i].kind, fam[i].help);
        if (strcmp(fam[i].name, "profd_agent_profiles_dropped_total") &&
            strcmp(fam[i].name, "profd_agent_dropped_bytes_total") &&
            strcmp(fam[i].name, "profd_agent_config_reloads_total"))
            pd_metrics_add(fam[i].name, NULL, 0);
    }
    char lbl[64];
    for (size_t i = 0; i < sizeof drop_reasons / sizeof *drop_reasons; i++) {
        snprintf(lbl, sizeof lbl, "reason=\"%s\"", drop_reasons[i]);
        pd_metrics_add("profd_agent_profiles_dropped_total", lbl, 0);
        if (i == 1 || i == 2)
            pd_metrics_add("profd_agent_dropped_bytes_total", lbl, 0);
    }
    pd_metrics_add("profd_agent_config_reloads_total", "result=\"success\"", 0);
    pd_metrics_add("profd_agent_config_reloads_total", "result=\"failure\"", 0);
    pd_metrics_set("profd_agent_buffer_max_bytes", NULL, (double)buffer_max_bytes);
}

struct pd_ebpf_web {
    struct MHD_Daemon *d;
};

static enum MHD_Result reply(struct MHD_Connection *conn, unsigned status, const char *type,
                             void *data, size_t len, enum MHD_ResponseMemoryMode mode)
{
    struct MHD_Response *r = MHD_create_response_from_buffer(len, data, mode);
    if (!r)
        return MHD_NO;
    MHD_add_response_header(r, "Content-Type", type);
    enum MHD_Result ret = MHD_queue_response(conn, status, r);
    MHD_destroy_response(r);
    return ret;
}

static enum MHD_Result handle(void *cls, struct MHD_Connection *conn, const char *url,
                              const char *method, const char *version, const char *upload,
                              size_t *upload_len, void **state)
{
    (void)cls;
    (void)version;
    (void)upload;
    static int first;
    if (!*state) { /* the headers: answer once the (empty) body is read */
        *state = &first;
        return MHD_YES;
    }
    if (*upload_len) {
        *upload_len = 0; /* a body is read and ignored */
        return MHD_YES;
    }
    if (strcmp(method, "GET") && strcmp(method, "HEAD"))
        return reply(conn, 405, "text/plain; charset=utf-8", "method not allowed: use GET\n", 28,
                     MHD_RESPMEM_PERSISTENT);
    if (!strcmp(url, "/metrics")) {
        pd_buf b;
        pd_buf_init(&b, 0);
        if (pd_metrics_write(&b) < 0) {
            pd_buf_release(&b);
            return reply(conn, 500, "text/plain; charset=utf-8", "out of memory\n", 14,
                         MHD_RESPMEM_PERSISTENT);
        }
        enum MHD_Result r = reply(conn, 200, "text/plain; version=0.0.4; charset=utf-8",
                                  b.data ? b.data : "", b.len, MHD_RESPMEM_MUST_COPY);
        pd_buf_release(&b);
        return r;
    }
    if (!strcmp(url, "/-/healthy"))
        return reply(conn, 200, "text/plain; charset=utf-8", "profd-agent is Healthy.\n", 24,
                     MHD_RESPMEM_PERSISTENT);
    return reply(conn, 404, "text/plain; charset=utf-8", "not found: see /metrics\n", 24,
                 MHD_RESPMEM_PERSISTENT);
}

int pd_ebpf_web_start(const char *addr, pd_ebpf_web **out, pd_err *err)
{
    *out = NULL;
    const char *colon = strrchr(addr, ':');
    if (!colon || !colon[1])
        return pd_err_set(err, PD_EINVAL, "--web.listen-address=%s: want HOST:PORT or :PORT", addr);
    char *end;
    errno = 0;
    unsigned long port = strtoul(colon + 1, &end, 10);
    if (*end || errno || port > 65535 || colon[1] == '-' || colon[1] == '+')
        return pd_err_set(err, PD_EINVAL, "--web.listen-address=%s: bad port", addr);
    char host[256];
    size_t hl = (size_t)(colon - addr);
    if (hl >= sizeof host)
        return pd_err_set(err, PD_EINVAL, "--web.listen-address=%s: host too long", addr);
    memcpy(host, addr, hl);
    host[hl] = 0;
    struct sockaddr_storage ss;
    memset(&ss, 0, sizeof ss);
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG;
    if (hl >= 2 && host[0] == '[' && host[hl - 1] == ']') {
        struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;
        host[hl - 1] = 0;
        if (inet_pton(AF_INET6, host + 1, &s6->sin6_addr) != 1)
            return pd_err_set(err, PD_EINVAL, "--web.listen-address=%s: bad IPv6 address", addr);
        s6->sin6_family = AF_INET6;
        s6->sin6_port = htons((uint16_t)port);
        flags |= MHD_USE_IPv6;
    } else {
        struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;
        s4->sin_family = AF_INET;
        s4->sin_port = htons((uint16_t)port);
        if (hl && strcmp(host, "0.0.0.0")) {
            if (!strcmp(host, "localhost"))
                snprintf(host, sizeof host, "127.0.0.1");
            if (inet_pton(AF_INET, host, &s4->sin_addr) != 1)
                return pd_err_set(err, PD_EINVAL,
                                  "--web.listen-address=%s: want an IP address (or localhost)",
                                  addr);
        } else if (!hl) { /* ":PORT": every address, IPv6 and IPv4 */
            struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;
            memset(&ss, 0, sizeof ss);
            s6->sin6_family = AF_INET6;
            s6->sin6_port = htons((uint16_t)port);
            s6->sin6_addr = in6addr_any;
            flags |= MHD_USE_DUAL_STACK;
        }
    }
    pd_ebpf_web *w = calloc(1, sizeof *w);
    if (!w)
        return PD_ENOMEM;
    errno = 0;
    w->d = MHD_start_daemon(flags, (uint16_t)port, NULL, NULL, handle, NULL, MHD_OPTION_SOCK_ADDR,
                            (struct sockaddr *)&ss, MHD_OPTION_CONNECTION_LIMIT, 16u,
                            MHD_OPTION_CONNECTION_TIMEOUT, 10u, MHD_OPTION_END);
    if (!w->d) {
        int e = errno ? errno : EADDRINUSE;
        free(w);
        return pd_err_set(err, -e, "--web.listen-address=%s: cannot listen: %s", addr, strerror(e));
    }
    *out = w;
    return 0;
}

void pd_ebpf_web_stop(pd_ebpf_web *w)
{
    if (!w)
        return;
    MHD_stop_daemon(w->d);
    free(w);
}
