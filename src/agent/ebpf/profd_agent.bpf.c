/*
 * agent/ebpf/profd_agent.bpf.c — the BPF side of profd-agent: one
 * SEC("perf_event") program attached to a PERF_COUNT_SW_CPU_CLOCK event on
 * every CPU. Each sample of a process (tgid != 0; the idle task is not a
 * process) adds 1 to counts[key] with key = (tgid, user stack id, kernel
 * stack id), the stacks walked by frame pointers into a STACK_TRACE map.
 *
 * Double buffering: two pairs of maps (stacks0/counts0, stacks1/counts1);
 * the global `gen` (in .bss, written by user space through the skeleton's
 * mmap) says which pair samples go to. At each upload user space flips gen,
 * waits for programs already running to finish, then reads and clears the
 * other pair: no sample is lost between the read and the clear, and
 * sampling never waits for user space.
 *
 * Stack ids < 0 are errors of bpf_get_stackid (-EFAULT: no stack, e.g. a
 * kernel thread's user stack; -EEXIST/-ENOMEM: the map is full) and are
 * kept in the key as such: user space counts them.
 */
#include <linux/bpf.h>
#include <linux/bpf_perf_event.h>
#include <bpf/bpf_helpers.h>

#define MAX_STACK_DEPTH 127
#define MAX_STACKS 16384
#define MAX_COUNTS 16384

struct pd_sample_key {
    __u32 pid;
    __s32 user_stack;
    __s32 kern_stack;
    __u32 pad;
};

struct pd_sample_val {
    __u64 count;
    char comm[16];
};

#define STACKS(name)                                                                               \
    struct {                                                                                       \
        __uint(type, BPF_MAP_TYPE_STACK_TRACE);                                                    \
        __uint(max_entries, MAX_STACKS);                                                           \
        __uint(key_size, sizeof(__u32));                                                           \
        __uint(value_size, MAX_STACK_DEPTH * sizeof(__u64));                                       \
    } name SEC(".maps")
#define COUNTS(name)                                                                               \
    struct {                                                                                       \
        __uint(type, BPF_MAP_TYPE_HASH);                                                           \
        __uint(max_entries, MAX_COUNTS);                                                           \
        __type(key, struct pd_sample_key);                                                         \
        __type(value, struct pd_sample_val);                                                       \
    } name SEC(".maps")

STACKS(stacks0);
STACKS(stacks1);
COUNTS(counts0);
COUNTS(counts1);

/* written by user space (skeleton bss) */
__u32 gen = 0;
/* samples that found their counts map full (read by user space) */
__u64 dropped = 0;

static __always_inline void count(void *counts, struct pd_sample_key *k)
{
    struct pd_sample_val *v = bpf_map_lookup_elem(counts, k);
    if (v) {
        __sync_fetch_and_add(&v->count, 1);
        return;
    }
    struct pd_sample_val nv = {.count = 1};
    bpf_get_current_comm(nv.comm, sizeof nv.comm);
    if (bpf_map_update_elem(counts, k, &nv, BPF_NOEXIST) != 0) {
        v = bpf_map_lookup_elem(counts, k); /* raced with another CPU */
        if (v)
            __sync_fetch_and_add(&v->count, 1);
        else
            __sync_fetch_and_add(&dropped, 1);
    }
}

SEC("perf_event")
int pd_sample(struct bpf_perf_event_data *ctx)
{
    __u32 pid = bpf_get_current_pid_tgid() >> 32;
    if (pid == 0)
        return 0;
    struct pd_sample_key k = {.pid = pid};
    if (gen & 1) {
        k.user_stack = bpf_get_stackid(ctx, &stacks1, BPF_F_USER_STACK);
        k.kern_stack = bpf_get_stackid(ctx, &stacks1, 0);
        count(&counts1, &k);
    } else {
        k.user_stack = bpf_get_stackid(ctx, &stacks0, BPF_F_USER_STACK);
        k.kern_stack = bpf_get_stackid(ctx, &stacks0, 0);
        count(&counts0, &k);
    }
    return 0;
}

char LICENSE[] SEC("license") = "GPL";
