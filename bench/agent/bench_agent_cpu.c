/*
 * bench/agent/bench_agent_cpu.c — overhead of libprofd-agent's CPU
 * profiler on a real workload: zlib deflate (level 6) of 8 MiB of
 * semi-compressible text, ROUNDS times, on one thread.
 *
 *   bench_agent_cpu off|on [ROUNDS] [HZ]
 *   off: the agent is linked but idle; on: a CPU profile at HZ (default
 *   100) runs for the whole workload (pd_agent_cpu_profile on a second
 *   thread, cancelled when the work is done) and its size and sample count
 *   are printed.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>
#include "agent/profd_agent.h"

#define IN_BYTES (8u << 20)

static volatile bool g_done;
static unsigned g_hz = 100;
static pd_buf g_prof;
static int g_rc;

static void *profiler(void *arg)
{
    (void)arg;
    pd_err err = {{0}};
    g_rc = pd_agent_cpu_profile(PD_AGENT_MAX_SECONDS, g_hz, &g_done, &g_prof, &err);
    if (g_rc < 0)
        fprintf(stderr, "profile: %s\n", err.msg);
    return NULL;
}

int main(int argc, char **argv)
{
    int on = argc > 1 && strcmp(argv[1], "on") == 0;
    int rounds = argc > 2 ? atoi(argv[2]) : 6;
    if (argc > 3)
        g_hz = (unsigned)atoi(argv[3]);
    unsigned char *in = malloc(IN_BYTES);
    uLong cap = compressBound(IN_BYTES);
    unsigned char *out = malloc(cap);
    if (!in || !out)
        return 1;
    uint64_t x = 88172645463325252ull;
    static const char *words[] = {"profile ", "sample ", "stack ", "heap ", "cpu ", "profd ",
                                  "pprof ", "series ", "label ", "block "};
    for (size_t i = 0; i < IN_BYTES;) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        const char *w = words[x % 10];
        size_t n = strlen(w);
        for (size_t k = 0; k < n && i < IN_BYTES; k++)
            in[i++] = (unsigned char)w[k];
    }
    pthread_t t;
    pd_buf_init(&g_prof, 0);
    if (on)
        pthread_create(&t, NULL, profiler, NULL);
    uLong total = 0;
    for (int r = 0; r < rounds; r++) {
        uLongf n = cap;
        if (compress2(out, &n, in, IN_BYTES, 6) != Z_OK)
            return 1;
        total += n;
    }
    g_done = true;
    if (on) {
        pthread_join(t, NULL);
        pd_agent_stats st;
        pd_agent_get_stats(&st);
        fprintf(stderr, "profile %zu bytes, %llu samples, %llu dropped\n", g_prof.len,
                (unsigned long long)st.cpu_samples, (unsigned long long)st.cpu_dropped);
    }
    printf("compressed %lu bytes\n", (unsigned long)total);
    pd_buf_release(&g_prof);
    free(in);
    free(out);
    return g_rc < 0;
}
