/*
 * agent/ebpf/ebpf_int.h — the parts of profd-agent (host-wide CPU profiler
 * with eBPF; docs/ebpf-agent.md) and how they call each other:
 *
 *   main.c     flags, privileges check, the loop: every --upload-interval
 *              drain the BPF maps (sampler.c), turn them into one pprof per
 *              process (process.c), queue Connect PushRequests of at most
 *              --upload.max-bytes each (push.c)
 *   config.c   --config.file: relabel_configs (YAML) for the processes
 *   metrics.c  the agent's own /metrics (--web.listen-address), from
 *              base/metrics.h's registry, on libmicrohttpd
 *   sampler.c  libbpf: loads profd_agent.bpf.c's skeleton, one perf event
 *              per CPU, reads and clears the double-buffered maps
 *   process.c  per process: labels from /proc, mappings from
 *              /proc/PID/maps, build IDs and function names of the files
 *              (symbolize/elf.h, cached per file), kernel names from
 *              /proc/kallsyms, JIT names from /tmp/perf-PID.map; builds the
 *              pprof `process_cpu` profile
 *   push.c     bounded queue of encoded requests and the thread that POSTs
 *              them to profd's /push.v1.PusherService/Push with retries and
 *              backoff; the queue drops its oldest request when full (never
 *              blocks the loop; BPF sampling never waits for user space)
 * Depends on base/ (relabel.h, metrics.h too), pprof/, symbolize/elf.h and
 * the push protobuf-c code.
 */
#ifndef PD_AGENT_EBPF_INT_H
#define PD_AGENT_EBPF_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "base/buf.h"
#include "base/error.h"
#include "base/relabel.h"

#define PD_EBPF_MAX_DEPTH 127

/* ---- sampler.c ---- */
typedef struct pd_ebpf_sampler pd_ebpf_sampler;

/* One aggregated entry of a drain: `count` samples of process pid (its comm
 * when sampled) with user stack user[0..n_user) and kernel stack
 * kern[0..n_kern), leaf first, as return addresses (the leaf: the sampled
 * instruction). n_* is 0 when that stack was not available. Borrowed for
 * the callback only. */
typedef struct pd_ebpf_entry {
    uint32_t pid;
    char comm[17];
    uint64_t count;
    const uint64_t *user, *kern;
    size_t n_user, n_kern;
    bool user_lost, kern_lost; /* the stack map was full: the stack is missing */
} pd_ebpf_entry;

/* Loads the BPF program and attaches a CPU-clock perf event at hz to every
 * online CPU. Errors: -EPERM/-EACCES with err naming the missing
 * capabilities and sysctls; other -errno with err saying which step failed. */
int pd_ebpf_sampler_open(int hz, pd_ebpf_sampler **out /* OUT */, pd_err *err);

/* Switches the BPF program to the other pair of maps, then calls fn for
 * every entry of the pair it was using and clears that pair. Returns the
 * number of entries, or -errno. *dropped_out: samples the program could not
 * count since the last call (its counts map was full). */
int pd_ebpf_sampler_drain(pd_ebpf_sampler *s, void (*fn)(void *ctx, const pd_ebpf_entry *e),
                          void *ctx, uint64_t *dropped_out /* OUT */);

/* Detaches and frees. NULL is a no-op. */
void pd_ebpf_sampler_free(pd_ebpf_sampler *s);

/* ---- process.c ---- */
typedef struct pd_ebpf_procs pd_ebpf_procs;

/* What one drain and its encoding did (added to by pd_ebpf_procs_encode). */
typedef struct pd_ebpf_procs_stats {
    uint64_t samples;           /* samples drained */
    uint64_t samples_unkept;    /* of them, of processes past the 4096 a drain keeps */
    uint64_t dropped_max_procs; /* those processes (or ones out of memory) */
    uint64_t processes;         /* processes seen in the drain */
    uint64_t dropped_relabel;   /* of them, dropped by relabel_configs */
    uint64_t dropped_too_large; /* profiles bigger than max_req_bytes alone */
    uint64_t profiles;          /* profiles put into requests */
    uint64_t requests;          /* requests made */
} pd_ebpf_procs_stats;

/* The profiles of one drain, one per process. period_ns: 1e9 / hz. */
int pd_ebpf_procs_new(int64_t period_ns, pd_ebpf_procs **out /* OUT */);
/* Rules applied to each process's labels (borrowed: they must outlive p).
 * Labels before the rules: service_name, pid, comm, exe, cgroup,
 * container_id, systemd_unit, and Alloy discovery.process's "__" labels
 * (process.c's proc_labels); "__" labels are removed after them. */
void pd_ebpf_procs_set_relabel(pd_ebpf_procs *p, const pd_relabel_rule *rules, size_t n);
/* Adds one drained entry (the callback of pd_ebpf_sampler_drain). */
void pd_ebpf_procs_add(void *procs, const pd_ebpf_entry *e);
/* Called with each encoded push.v1.PushRequest (body is the callee's to
 * take: pd_ebpf_push_enqueue takes it over) and its number of profiles. */
typedef void (*pd_ebpf_emit_fn)(void *ctx, pd_buf *body, size_t n_profiles);
/* Encodes every kept process's profile (time_nanos start, duration dur_ns)
 * into push.v1.PushRequests of at most max_req_bytes each, in process
 * order, calling fn for each; a profile bigger than max_req_bytes alone is
 * left out (st->dropped_too_large). Counts are added to *st. 0 or
 * PD_ENOMEM. The per-drain data is cleared; caches of files and kernel
 * symbols are kept. */
int pd_ebpf_procs_encode(pd_ebpf_procs *p, int64_t start_ns, int64_t dur_ns, size_t max_req_bytes,
                         pd_ebpf_emit_fn fn, void *ctx, pd_ebpf_procs_stats *st /* OUT */,
                         pd_err *err);
void pd_ebpf_procs_free(pd_ebpf_procs *p);

/* ---- config.c ---- */
typedef struct pd_ebpf_config {
    pd_relabel_rule *relabel; /* relabel_configs, compiled, in order */
    size_t n_relabel;
} pd_ebpf_config;

/* Reads --config.file (YAML; format at the top of config.c) into out.
 * Errors: -errno (cannot open; err "PATH: strerror"), PD_EINVAL with err
 * "PATH:LINE:COL: what is wrong", PD_ETOOBIG (over 4 MiB), PD_ENOMEM.
 * Release with pd_ebpf_config_release (also after an error: no-op). */
int pd_ebpf_config_load(const char *path, pd_ebpf_config *out /* OUT */, pd_err *err);
/* The same from text (name: the file name in messages). */
int pd_ebpf_config_parse(const char *text, size_t len, const char *name,
                         pd_ebpf_config *out /* OUT */, pd_err *err);
void pd_ebpf_config_release(pd_ebpf_config *c);

/* ---- metrics.c ---- */
/* Declares the agent's metric families (HELP, TYPE) and sets the series that
 * must be there from the start to 0 (base/metrics.h). */
void pd_ebpf_metrics_init(size_t buffer_max_bytes);
typedef struct pd_ebpf_web pd_ebpf_web;
/* Serves GET /metrics (Prometheus text format 0.0.4) and /-/healthy on
 * addr ("HOST:PORT", ":PORT" = every address; "[::1]:PORT" for IPv6) with
 * libmicrohttpd's own thread. PD_EINVAL (bad address) or -errno (cannot
 * listen) with err naming addr. */
int pd_ebpf_web_start(const char *addr, pd_ebpf_web **out /* OUT */, pd_err *err);
void pd_ebpf_web_stop(pd_ebpf_web *w);

/* ---- push.c ---- */
typedef struct pd_ebpf_push_cfg {
    const char *url; /* base URL of profd, e.g. http://127.0.0.1:4100 */
    int64_t timeout_ms;
    size_t max_buffer_bytes;
    const char *ca_file, *cert_file, *key_file;
    bool insecure;
    const char *username, *password; /* basic auth (password may be NULL) */
    const char *bearer;
} pd_ebpf_push_cfg;

typedef struct pd_ebpf_push_stats {
    uint64_t sent, failed_attempts, dropped, dropped_bytes;
    size_t queued, queued_bytes;
} pd_ebpf_push_stats;
/* push.c also keeps the profd_agent_* push metrics of metrics.c current. */

typedef struct pd_ebpf_push pd_ebpf_push;

/* Starts the sender thread. cfg is copied (its strings are borrowed for
 * the pusher's life). 0, PD_ENOMEM, or -errno. */
int pd_ebpf_push_start(const pd_ebpf_push_cfg *cfg, pd_ebpf_push **out /* OUT */);
/* Queues body, a request holding n_profiles profiles (taken over: body is
 * left empty). Never blocks on the network: when the queue would pass
 * max_buffer_bytes the oldest requests are dropped (counted, with their
 * profiles, in profd_agent_profiles_dropped_total{reason="buffer_full"}). */
void pd_ebpf_push_enqueue(pd_ebpf_push *p, pd_buf *body, size_t n_profiles);
void pd_ebpf_push_get_stats(pd_ebpf_push *p, pd_ebpf_push_stats *st /* OUT */);
/* Tries to send what is queued for at most wait_ms, then stops the thread
 * and frees. NULL is a no-op. */
void pd_ebpf_push_stop(pd_ebpf_push *p, int64_t wait_ms);

#endif
