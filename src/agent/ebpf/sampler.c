/*
 * agent/ebpf/sampler.c — loads profd_agent.bpf.c (its libbpf skeleton,
 * generated at build time by `bpftool gen skeleton`), opens one
 * PERF_COUNT_SW_CPU_CLOCK event per online CPU at the given frequency
 * (attr.freq, so the kernel keeps hz samples a second of CPU time), attaches
 * the program to each, and drains the double-buffered maps (see the BPF
 * file's comment: flip `gen`, let programs already running end, read and
 * clear the other pair).
 */
#include "agent/ebpf/ebpf_int.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <errno.h>
#include <linux/perf_event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "profd_agent.skel.h"

struct sample_key {
    uint32_t pid;
    int32_t user_stack, kern_stack;
    uint32_t pad;
};
struct sample_val {
    uint64_t count;
    char comm[16];
};

struct pd_ebpf_sampler {
    struct profd_agent_bpf *skel;
    int ncpu;
    int *fds;
    struct bpf_link **links;
    uint64_t dropped_seen;
};

static const char PRIV_HELP[] =
    "profd-agent needs CAP_BPF and CAP_PERFMON (or CAP_SYS_ADMIN, or root) to load its BPF "
    "program and open CPU-clock perf events on every CPU; run it as root (the "
    "profd-agent.service unit does), or grant them: setcap cap_bpf,cap_perfmon+ep profd-agent. "
    "Sysctls involved: kernel.perf_event_paranoid (perf events of all processes need <= -1 "
    "without CAP_PERFMON) and kernel.unprivileged_bpf_disabled";

static int libbpf_quiet(enum libbpf_print_level level, const char *fmt, va_list ap)
{
    if (level == LIBBPF_WARN && getenv("PROFD_AGENT_BPF_DEBUG"))
        return vfprintf(stderr, fmt, ap);
    if (level == LIBBPF_DEBUG && getenv("PROFD_AGENT_BPF_DEBUG"))
        return vfprintf(stderr, fmt, ap);
    return 0;
}

int pd_ebpf_sampler_open(int hz, pd_ebpf_sampler **out, pd_err *err)
{
    *out = NULL;
    libbpf_set_print(libbpf_quiet);
    pd_ebpf_sampler *s = calloc(1, sizeof *s);
    if (!s)
        return PD_ENOMEM;
    int rc;
    s->skel = profd_agent_bpf__open();
    if (!s->skel) {
        rc = -errno;
        pd_err_set(err, rc, "opening the BPF object: %s", strerror(-rc));
        goto fail;
    }
    if ((rc = profd_agent_bpf__load(s->skel)) < 0) {
        if (rc == -EPERM || rc == -EACCES)
            pd_err_set(err, rc, "loading the BPF program: %s. %s", strerror(-rc), PRIV_HELP);
        else
            pd_err_set(err, rc,
                       "loading the BPF program: %s (the kernel refused it; "
                       "PROFD_AGENT_BPF_DEBUG=1 shows the verifier's log)",
                       strerror(-rc));
        goto fail;
    }
    s->ncpu = libbpf_num_possible_cpus();
    if (s->ncpu <= 0) {
        rc = s->ncpu < 0 ? s->ncpu : -EINVAL;
        pd_err_set(err, rc, "counting CPUs: %s", strerror(-rc));
        goto fail;
    }
    s->fds = malloc((size_t)s->ncpu * sizeof *s->fds);
    s->links = calloc((size_t)s->ncpu, sizeof *s->links);
    if (!s->fds || !s->links) {
        rc = PD_ENOMEM;
        goto fail;
    }
    int opened = 0;
    for (int cpu = 0; cpu < s->ncpu; cpu++) {
        struct perf_event_attr a;
        memset(&a, 0, sizeof a);
        a.size = sizeof a;
        a.type = PERF_TYPE_SOFTWARE;
        a.config = PERF_COUNT_SW_CPU_CLOCK;
        a.freq = 1;
        a.sample_freq = (uint64_t)hz;
        s->fds[cpu] = (int)syscall(SYS_perf_event_open, &a, -1, cpu, -1, PERF_FLAG_FD_CLOEXEC);
        if (s->fds[cpu] < 0) {
            rc = -errno;
            if (rc == -ENODEV || rc == -ENOENT) /* CPU possible but not online */
                continue;
            if (rc == -EPERM || rc == -EACCES)
                pd_err_set(err, rc, "perf_event_open on CPU %d: %s. %s", cpu, strerror(-rc),
                           PRIV_HELP);
            else
                pd_err_set(err, rc, "perf_event_open(PERF_COUNT_SW_CPU_CLOCK) on CPU %d: %s", cpu,
                           strerror(-rc));
            goto fail;
        }
        s->links[cpu] = bpf_program__attach_perf_event(s->skel->progs.pd_sample, s->fds[cpu]);
        if (!s->links[cpu]) {
            rc = -errno;
            pd_err_set(err, rc, "attaching the BPF program to CPU %d's perf event: %s", cpu,
                       strerror(-rc));
            goto fail;
        }
        opened++;
    }
    if (!opened) {
        rc = -ENODEV;
        pd_err_set(err, rc, "no online CPU accepted a perf event");
        goto fail;
    }
    *out = s;
    return 0;
fail:
    pd_ebpf_sampler_free(s);
    return rc;
}

void pd_ebpf_sampler_free(pd_ebpf_sampler *s)
{
    if (!s)
        return;
    if (s->links)
        for (int i = 0; i < s->ncpu; i++)
            if (s->links[i])
                bpf_link__destroy(s->links[i]);
    /* the descriptors: bpf_link__destroy closes the perf event fd it owns
     * (attach_perf_event takes it over) */
    free(s->links);
    free(s->fds);
    if (s->skel)
        profd_agent_bpf__destroy(s->skel);
    free(s);
}

static void clear_map(int fd, size_t key_size)
{
    uint8_t key[64], next[64];
    /* delete from the first key each time: next_key after a deleted key
     * restarts from the beginning anyway */
    while (bpf_map_get_next_key(fd, NULL, next) == 0) {
        memcpy(key, next, key_size);
        if (bpf_map_delete_elem(fd, key) < 0)
            break;
    }
}

static size_t stack_len(const uint64_t *ips)
{
    size_t n = 0;
    while (n < PD_EBPF_MAX_DEPTH && ips[n])
        n++;
    return n;
}

int pd_ebpf_sampler_drain(pd_ebpf_sampler *s, void (*fn)(void *ctx, const pd_ebpf_entry *e),
                          void *ctx, uint64_t *dropped_out)
{
    uint32_t old = s->skel->bss->gen & 1;
    __atomic_store_n(&s->skel->bss->gen, old ^ 1, __ATOMIC_SEQ_CST);
    /* a BPF program that read the old gen runs for microseconds */
    struct timespec ts = {0, 20 * 1000 * 1000};
    nanosleep(&ts, NULL);
    int counts = bpf_map__fd(old ? s->skel->maps.counts1 : s->skel->maps.counts0);
    int stacks = bpf_map__fd(old ? s->skel->maps.stacks1 : s->skel->maps.stacks0);

    static uint64_t ubuf[PD_EBPF_MAX_DEPTH], kbuf[PD_EBPF_MAX_DEPTH];
    struct sample_key key, next;
    struct sample_val val;
    int n = 0;
    bool first = true;
    while (bpf_map_get_next_key(counts, first ? NULL : &key, &next) == 0) {
        first = false;
        key = next;
        if (bpf_map_lookup_elem(counts, &key, &val) < 0)
            continue;
        pd_ebpf_entry e;
        memset(&e, 0, sizeof e);
        e.pid = key.pid;
        memcpy(e.comm, val.comm, 16);
        e.comm[16] = 0;
        e.count = val.count;
        e.user = ubuf;
        e.kern = kbuf;
        if (key.user_stack >= 0) {
            memset(ubuf, 0, sizeof ubuf);
            if (bpf_map_lookup_elem(stacks, &key.user_stack, ubuf) == 0)
                e.n_user = stack_len(ubuf);
        } else if (key.user_stack == -EEXIST || key.user_stack == -ENOMEM) {
            e.user_lost = true;
        }
        if (key.kern_stack >= 0) {
            memset(kbuf, 0, sizeof kbuf);
            if (bpf_map_lookup_elem(stacks, &key.kern_stack, kbuf) == 0)
                e.n_kern = stack_len(kbuf);
        } else if (key.kern_stack == -EEXIST || key.kern_stack == -ENOMEM) {
            e.kern_lost = true;
        }
        fn(ctx, &e);
        n++;
    }
    clear_map(counts, sizeof(struct sample_key));
    clear_map(stacks, sizeof(uint32_t));
    uint64_t d = __atomic_load_n(&s->skel->bss->dropped, __ATOMIC_RELAXED);
    if (dropped_out)
        *dropped_out = d - s->dropped_seen;
    s->dropped_seen = d;
    return n;
}
