/*
 * agent/ebpf/main.c — profd-agent: samples the CPU of every process on the
 * host with eBPF and pushes one pprof `process_cpu` profile per process to
 * profd every --upload-interval (docs/ebpf-agent.md; the parts in
 * ebpf_int.h).
 *
 * Lifecycle: flags (exit 2 on a bad one, naming it) → load and attach
 * (exit 1 naming the missing capability and sysctl when the kernel says no)
 * → every interval: drain, build, queue (never waiting for the network) →
 * SIGINT/SIGTERM: one last drain and up to 5 s to deliver what is queued.
 * SIGHUP reads --config.file again (reload_config) on the same thread,
 * between two drains: the processes of the next drain are relabeled by the
 * new rules; a broken file keeps the old rules (logged with the file and
 * the error, counted in profd_agent_config_reloads_total{result="failure"}
 * and profd_agent_config_last_reload_successful 0).
 */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>

#include "agent/ebpf/ebpf_int.h"
#include "base/buildinfo.h"
#include "base/log.h"
#include "base/metrics.h"
#include "base/parse.h"
#include "base/time.h"

#define DEFAULT_SERVER "http://127.0.0.1:10902"

static const char usage_text[] =
    "usage: profd-agent [--server=URL] [--frequency=HZ] [--upload-interval=DURATION] [flags]\n"
    "  Samples the CPU of every process on this host with eBPF (user and kernel\n"
    "  stacks by frame pointers) and pushes one pprof process_cpu profile per\n"
    "  process to profd every upload interval. Needs root, or CAP_BPF and\n"
    "  CAP_PERFMON (kernel.perf_event_paranoid applies).\n"
    "  --server=URL              profd to push to (default " DEFAULT_SERVER ")\n"
    "  --frequency=HZ            samples per second of CPU time (default 19, 1..1000)\n"
    "  --upload-interval=DUR     how often profiles are built and pushed (default 15s)\n"
    "  --buffer.max-bytes=SIZE   push requests kept while profd cannot be reached\n"
    "                            (bytes, or with a K/M/G suffix); the oldest are\n"
    "                            dropped beyond it and counted (default 64M; an\n"
    "                            older name: --buffer-bytes)\n"
    "  --upload.max-bytes=SIZE   largest push request; an interval's profiles are\n"
    "                            split into requests of at most this size (default\n"
    "                            4M; profd takes 16M by default)\n"
    "  --config.file=FILE        YAML with relabel_configs over the processes'\n"
    "                            __meta_process_* labels (as Grafana Alloy's\n"
    "                            discovery.process) to set labels and drop processes\n"
    "  --web.listen-address=ADDR serve the agent's own /metrics on ADDR\n"
    "                            (HOST:PORT or :PORT; default: not served)\n"
    "  --timeout=DUR             per push request (default 30s)\n"
    "  --tls.ca-file=FILE        CA certificates (PEM) the server's must chain to\n"
    "  --tls.cert-file=FILE      client certificate (PEM), with --tls.key-file\n"
    "  --tls.key-file=FILE       its private key (PEM)\n"
    "  --tls.insecure-skip-verify  do not check the server's certificate\n"
    "  --basic-auth.username=U   basic auth user; the password from\n"
    "  --basic-auth.password-file=FILE  (first line)\n"
    "  --bearer-token-file=FILE  \"Authorization: Bearer\" with the token in FILE\n"
    "  --log.level=LEVEL         debug, info, warn or error (default info)\n"
    "  --version                 build facts\n"
    "  Exit: 0 after SIGINT/SIGTERM, 1 when BPF or perf events are refused or\n"
    "  --web.listen-address cannot listen, 2 on a bad flag or --config.file.\n"
    "  SIGHUP reads --config.file again; a broken file keeps the rules in use.\n";

static int usage_err(const char *fmt, const char *arg)
{
    fprintf(stderr, "profd-agent: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\n(profd-agent --help for the flags)\n");
    return 2;
}

static char *read_secret(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "profd-agent: %s: %s\n", path, strerror(errno));
        return NULL;
    }
    char *b = calloc(1, 65537);
    size_t n = b ? fread(b, 1, 65536, f) : 0;
    fclose(f);
    if (!b)
        return NULL;
    b[n] = 0;
    b[strcspn(b, "\r\n")] = 0;
    n = strlen(b);
    while (n && (b[n - 1] == ' ' || b[n - 1] == '\t'))
        b[--n] = 0;
    if (!n) {
        fprintf(stderr, "profd-agent: %s: empty\n", path);
        free(b);
        return NULL;
    }
    return b;
}

/* "--name=value" or "--name value": *val set and 1; 0 when argv[*i] is not
 * --name; -1 when the value is missing. */
static int opt(int argc, char **argv, int *i, const char *name, const char **val)
{
    size_t n = strlen(name);
    if (strncmp(argv[*i], name, n) != 0)
        return 0;
    if (argv[*i][n] == '=') {
        *val = argv[*i] + n + 1;
        return 1;
    }
    if (argv[*i][n] != 0)
        return 0;
    if (*i + 1 >= argc)
        return -1;
    *val = argv[++*i];
    return 1;
}

/* bytes, or with a K/M/G suffix (KiB, MiB, GiB: powers of 1024) */
static int parse_size(const char *s, size_t *out)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (end == s || errno || *s == '-' || *s == '+' || *s == ' ')
        return -1;
    unsigned long long mul = 1;
    if (*end == 'K' || *end == 'k')
        mul = 1ULL << 10;
    else if (*end == 'M' || *end == 'm')
        mul = 1ULL << 20;
    else if (*end == 'G' || *end == 'g')
        mul = 1ULL << 30;
    if (mul != 1) {
        end++;
        if (!strcmp(end, "iB") || !strcmp(end, "B"))
            end += strlen(end);
    } else if (!strcmp(end, "B")) {
        end++;
    }
    if (*end || v > (1ULL << 40) / mul)
        return -1;
    *out = (size_t)(v * mul);
    return 0;
}

/* Outcome of a (re)load of --config.file in /metrics (Prometheus'
 * prometheus_config_last_reload_successful and _success_timestamp_seconds). */
static void config_loaded(bool ok)
{
    pd_metrics_set("profd_agent_config_last_reload_successful", NULL, ok ? 1 : 0);
    if (ok)
        pd_metrics_set("profd_agent_config_last_reload_success_timestamp_seconds", NULL,
                       (double)pd_now_ms() / 1000.0);
}

/* SIGHUP: reads path again into a new config; when it loads, procs uses its
 * rules from the next drain on and *cfg (the old rules, which procs
 * borrowed until now) is released and replaced; when not, nothing changes.
 * Either way logged and counted. Called between drains on the main thread,
 * the only one that relabels. */
static void reload_config(const char *path, pd_ebpf_config *cfg, pd_ebpf_procs *procs)
{
    if (!path) {
        pd_log_info("SIGHUP: no --config.file, nothing to reload", NULL);
        return;
    }
    pd_ebpf_config next = {0};
    pd_err err = {{0}};
    if (pd_ebpf_config_load(path, &next, &err) < 0) {
        char q[600];
        size_t o = 0;
        for (const char *c = err.msg; *c && o + 2 < sizeof q; c++)
            if (*c != '\n')
                q[o++] = *c == '"' ? '\'' : *c;
        q[o] = 0;
        pd_ebpf_config_release(&next);
        pd_log_error("reload failed, keeping the old configuration", "file=%s err=\"%s\"", path, q);
        pd_metrics_add("profd_agent_config_reloads_total", "result=\"failure\"", 1);
        config_loaded(false);
        return;
    }
    pd_ebpf_procs_set_relabel(procs, next.relabel, next.n_relabel);
    pd_ebpf_config_release(cfg);
    *cfg = next;
    pd_log_info("configuration reloaded", "file=%s relabel_rules=%zu", path, cfg->n_relabel);
    pd_metrics_add("profd_agent_config_reloads_total", "result=\"success\"", 1);
    config_loaded(true);
}

static void emit(void *ctx, pd_buf *body, size_t n_profiles)
{
    pd_ebpf_push_enqueue(ctx, body, n_profiles);
}

int main(int argc, char **argv)
{
    pd_ebpf_push_cfg pc = {
        .url = DEFAULT_SERVER, .timeout_ms = 30000, .max_buffer_bytes = (size_t)64 << 20};
    int64_t hz = 19, interval_ms = 15000;
    size_t max_req_bytes = (size_t)4 << 20;
    const char *pwfile = NULL, *bearer_file = NULL, *config_file = NULL, *listen = NULL;
    pd_err err = {{0}};
    for (int i = 1; i < argc; i++) {
        const char *v = NULL;
        int r;
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            fputs(usage_text, stdout);
            return 0;
        }
        if (!strcmp(argv[i], "--version")) {
            printf("profd-agent, version %s\n", PD_EBPF_VERSION);
            return 0;
        }
        if (!strcmp(argv[i], "--tls.insecure-skip-verify")) {
            pc.insecure = true;
            continue;
        }
#define OPT(name)                                                                                  \
    if ((r = opt(argc, argv, &i, name, &v)) < 0)                                                   \
        return usage_err("%s needs a value", name);                                                \
    else if (r > 0)
        OPT("--server")
        {
            pc.url = v;
            continue;
        }
        OPT("--frequency")
        {
            char *end;
            errno = 0;
            hz = strtoll(v, &end, 10);
            if (errno || end == v || *end || hz < 1 || hz > 1000)
                return usage_err("--frequency=%s: want a whole number of Hz in 1..1000", v);
            continue;
        }
        OPT("--upload-interval")
        {
            if (pd_parse_duration(v, &interval_ms, &err) < 0 || interval_ms < 1000)
                return usage_err("--upload-interval=%s: want a duration of at least 1s, like 15s",
                                 v);
            continue;
        }
        OPT("--timeout")
        {
            if (pd_parse_duration(v, &pc.timeout_ms, &err) < 0 || pc.timeout_ms < 1)
                return usage_err("--timeout=%s: want a duration like 30s", v);
            continue;
        }
        OPT("--buffer.max-bytes")
        {
            if (parse_size(v, &pc.max_buffer_bytes) < 0 || pc.max_buffer_bytes < 1024)
                return usage_err("--buffer.max-bytes=%s: want a size of at least 1024 bytes, "
                                 "like 64M",
                                 v);
            continue;
        }
        OPT("--buffer-bytes")
        {
            if (parse_size(v, &pc.max_buffer_bytes) < 0 || pc.max_buffer_bytes < 1024)
                return usage_err("--buffer-bytes=%s: want a size of at least 1024 bytes, "
                                 "like 64M",
                                 v);
            continue;
        }
        OPT("--upload.max-bytes")
        {
            if (parse_size(v, &max_req_bytes) < 0 || max_req_bytes < 1024)
                return usage_err("--upload.max-bytes=%s: want a size of at least 1024 bytes, "
                                 "like 4M",
                                 v);
            continue;
        }
        OPT("--config.file")
        {
            config_file = v;
            continue;
        }
        OPT("--web.listen-address")
        {
            listen = v;
            continue;
        }
        OPT("--tls.ca-file")
        {
            pc.ca_file = v;
            continue;
        }
        OPT("--tls.cert-file")
        {
            pc.cert_file = v;
            continue;
        }
        OPT("--tls.key-file")
        {
            pc.key_file = v;
            continue;
        }
        OPT("--basic-auth.username")
        {
            pc.username = v;
            continue;
        }
        OPT("--basic-auth.password-file")
        {
            pwfile = v;
            continue;
        }
        OPT("--bearer-token-file")
        {
            bearer_file = v;
            continue;
        }
        OPT("--log.level")
        {
            if (pd_log_set_level(v) < 0)
                return usage_err("--log.level=%s: want debug, info, warn or error", v);
            continue;
        }
#undef OPT
        return usage_err("unknown argument %s", argv[i]);
    }
    if (strncmp(pc.url, "http://", 7) && strncmp(pc.url, "https://", 8))
        return usage_err("--server=%s: want an http:// or https:// URL", pc.url);
    if (!pc.cert_file != !pc.key_file)
        return usage_err("%s: --tls.cert-file and --tls.key-file go together",
                         pc.cert_file ? "--tls.cert-file" : "--tls.key-file");
    if (pwfile && !pc.username)
        return usage_err("%s: --basic-auth.password-file needs --basic-auth.username", pwfile);
    pd_ebpf_config cfg = {0};
    if (config_file && pd_ebpf_config_load(config_file, &cfg, &err) < 0) {
        fprintf(stderr, "profd-agent: --config.file: %s\n", err.msg);
        return 2;
    }
    char *password = NULL, *bearer = NULL;
    if (pwfile && !(password = read_secret(pwfile))) {
        pd_ebpf_config_release(&cfg);
        return 2;
    }
    if (bearer_file && !(bearer = read_secret(bearer_file))) {
        pd_ebpf_config_release(&cfg);
        free(password);
        return 2;
    }
    pc.password = password;
    pc.bearer = bearer;

    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGTERM);
    sigaddset(&sigs, SIGHUP);
    sigprocmask(SIG_BLOCK, &sigs, NULL); /* the push thread inherits the mask */
    signal(SIGPIPE, SIG_IGN);

    int rc = 0;
    pd_ebpf_sampler *smp = NULL;
    pd_ebpf_procs *procs = NULL;
    pd_ebpf_push *push = NULL;
    pd_ebpf_web *web = NULL;
    curl_global_init(CURL_GLOBAL_DEFAULT);
    pd_ebpf_metrics_init(pc.max_buffer_bytes);
    config_loaded(true); /* the file at start (or none) loaded: a bad one exits 2 above */
    if (listen && (rc = pd_ebpf_web_start(listen, &web, &err)) < 0) {
        fprintf(stderr, "profd-agent: %s\n", err.msg);
        rc = rc == PD_EINVAL ? 2 : 1;
        goto out;
    }
    if ((rc = pd_ebpf_sampler_open((int)hz, &smp, &err)) < 0) {
        fprintf(stderr, "profd-agent: %s\n", err.msg);
        rc = 1;
        goto out;
    }
    int64_t period_ns = 1000000000 / hz;
    if (pd_ebpf_procs_new(period_ns, &procs) < 0 || pd_ebpf_push_start(&pc, &push) < 0) {
        fprintf(stderr, "profd-agent: out of memory\n");
        rc = 1;
        goto out;
    }
    pd_ebpf_procs_set_relabel(procs, cfg.relabel, cfg.n_relabel);
    pd_log_info("profd-agent started",
                "server=%s frequency_hz=%" PRId64 " upload_interval_ms=%" PRId64
                " relabel_rules=%zu web=%s",
                pc.url, hz, interval_ms, cfg.n_relabel, listen ? listen : "off");
    int64_t start_ns = pd_now_ms() * 1000000;
    int64_t next = pd_mono_ns() + interval_ms * 1000000;
    for (;;) {
        int64_t left = next - pd_mono_ns();
        bool last = false;
        if (left > 0) {
            struct timespec ts = {left / 1000000000, left % 1000000000};
            int s = sigtimedwait(&sigs, NULL, &ts);
            if (s == SIGINT || s == SIGTERM) {
                last = true;
            } else if (s == SIGHUP) {
                reload_config(config_file, &cfg, procs);
                continue;
            } else if (s >= 0 || errno == EINTR) {
                continue;
            }
        }
        next += interval_ms * 1000000;
        if (next < pd_mono_ns())
            next = pd_mono_ns() + interval_ms * 1000000;
        uint64_t dropped = 0;
        int n = pd_ebpf_sampler_drain(smp, pd_ebpf_procs_add, procs, &dropped);
        int64_t now_ns = pd_now_ms() * 1000000;
        pd_ebpf_procs_stats ps = {0};
        if (pd_ebpf_procs_encode(procs, start_ns, now_ns - start_ns, max_req_bytes, emit, push, &ps,
                                 &err) < 0)
            pd_log_warn("upload failed", "err=\"%s\"", err.msg);
        pd_metrics_add("profd_agent_uploads_total", NULL, 1);
        pd_metrics_add("profd_agent_samples_total", NULL, (double)ps.samples);
        pd_metrics_add("profd_agent_samples_lost_total", NULL, (double)dropped);
        pd_metrics_add("profd_agent_processes_seen_total", NULL, (double)ps.processes);
        pd_metrics_set("profd_agent_processes", NULL, (double)ps.processes);
        pd_metrics_add("profd_agent_profiles_dropped_total", "reason=\"relabel\"",
                       (double)ps.dropped_relabel);
        pd_metrics_add("profd_agent_profiles_dropped_total", "reason=\"too_large\"",
                       (double)ps.dropped_too_large);
        pd_metrics_add("profd_agent_profiles_dropped_total", "reason=\"max_processes\"",
                       (double)ps.dropped_max_procs);
        pd_ebpf_push_stats st;
        pd_ebpf_push_get_stats(push, &st);
        pd_log_debug("upload",
                     "entries=%d processes=%" PRIu64 " profiles=%" PRIu64 " requests=%" PRIu64
                     " relabel_dropped=%" PRIu64 " bpf_dropped=%" PRIu64 " sent=%" PRIu64
                     " dropped=%" PRIu64 " queued=%zu queued_bytes=%zu",
                     n, ps.processes, ps.profiles, ps.requests, ps.dropped_relabel, dropped,
                     st.sent, st.dropped, st.queued, st.queued_bytes);
        start_ns = now_ns;
        if (last)
            break;
    }
    pd_log_info("profd-agent stopping", NULL);
out:
    pd_ebpf_push_stop(push, 5000);
    pd_ebpf_web_stop(web);
    pd_ebpf_config_release(&cfg);
    pd_ebpf_procs_free(procs);
    pd_ebpf_sampler_free(smp);
    curl_global_cleanup();
    free(password);
    free(bearer);
    return rc;
}
