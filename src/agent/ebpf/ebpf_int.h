/*
 * agent/ebpf/ebpf_int.h — the parts of profd-agent (host-wide CPU profiler
 * with eBPF; docs/ebpf-agent.md) and how they call each other:
 *
 *   main.c     flags, privileges check, the loop: every --upload-interval
 *              drain the BPF maps (sampler.c), turn them into one pprof per
 *              process (process.c), queue one Connect PushRequest (push.c)
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
 * Depends on base/, pprof/, symbolize/elf.h and the push protobuf-c code.
 */
#ifndef PD_AGENT_EBPF_INT_H
#define PD_AGENT_EBPF_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "base/buf.h"
#include "base/error.h"

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

/* The profiles of one drain, one per process. period_ns: 1e9 / hz. */
int pd_ebpf_procs_new(int64_t period_ns, pd_ebpf_procs **out /* OUT */);
/* Adds one drained entry (the callback of pd_ebpf_sampler_drain). */
void pd_ebpf_procs_add(void *procs, const pd_ebpf_entry *e);
/* Encodes every process's profile (time_nanos start, duration dur_ns) as
 * one push.v1.PushRequest (protobuf) appended to out; *n_series: the
 * number of processes. 0 or PD_ENOMEM. The per-drain data is cleared;
 * caches of files and kernel symbols are kept. */
int pd_ebpf_procs_encode(pd_ebpf_procs *p, int64_t start_ns, int64_t dur_ns, pd_buf *out,
                         size_t *n_series /* OUT */, pd_err *err);
void pd_ebpf_procs_free(pd_ebpf_procs *p);

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

typedef struct pd_ebpf_push pd_ebpf_push;

/* Starts the sender thread. cfg is copied (its strings are borrowed for
 * the pusher's life). 0, PD_ENOMEM, or -errno. */
int pd_ebpf_push_start(const pd_ebpf_push_cfg *cfg, pd_ebpf_push **out /* OUT */);
/* Queues body (taken over: body is left empty). Never blocks on the
 * network: when the queue would pass max_buffer_bytes the oldest requests
 * are dropped (counted). */
void pd_ebpf_push_enqueue(pd_ebpf_push *p, pd_buf *body);
void pd_ebpf_push_get_stats(pd_ebpf_push *p, pd_ebpf_push_stats *st /* OUT */);
/* Tries to send what is queued for at most wait_ms, then stops the thread
 * and frees. NULL is a no-op. */
void pd_ebpf_push_stop(pd_ebpf_push *p, int64_t wait_ms);

#endif
