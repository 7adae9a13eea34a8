/*
 * bench/agent/bench_agent_heap.c — overhead of libprofd-agent's sampled
 * heap profiling on an allocation-heavy loop: OPS malloc/free pairs of
 * sizes 16 B..4 KiB (xorshift), 4096 blocks kept live in a ring, each block
 * touched once.
 *
 * Built twice by CMake: bench_agent_heap_plain (glibc malloc, no agent)
 * and bench_agent_heap (linked with libprofd-agent: every malloc/free goes
 * through the interposers, 512 KiB mean sampling). Prints the unsampled
 * alloc_space estimate next to the true byte count (agent build).
 *
 *   bench_agent_heap[_plain] [OPS]
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef PD_BENCH_WITH_AGENT
#include "agent/profd_agent.h"
#endif

#define RING 4096

int main(int argc, char **argv)
{
    long ops = argc > 1 ? atol(argv[1]) : 50000000L;
    static void *ring[RING];
    uint64_t x = 88172645463325252ull, bytes = 0;
    for (long i = 0; i < ops; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        size_t sz = 16 + (size_t)(x % 4080);
        size_t k = (size_t)(x >> 40) % RING;
        free(ring[k]);
        ring[k] = malloc(sz);
        if (!ring[k])
            return 1;
        ((volatile char *)ring[k])[0] = (char)i;
        bytes += sz;
    }
    for (size_t k = 0; k < RING; k++)
        free(ring[k]);
#ifdef PD_BENCH_WITH_AGENT
    pd_agent_stats st;
    pd_agent_get_stats(&st);
    printf("allocated %llu bytes; heap sampling %s, %llu samples (expected ~%llu)\n",
           (unsigned long long)bytes, pd_agent_heap_enabled() ? "on" : "off",
           (unsigned long long)st.heap_samples,
           (unsigned long long)(bytes / PD_AGENT_DEFAULT_HEAP_RATE));
#else
    printf("allocated %llu bytes (no agent)\n", (unsigned long long)bytes);
#endif
    return 0;
}
